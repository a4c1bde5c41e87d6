"""REST and gRPC clients and the predict command, against localhost stand-ins of TF Serving."""

import json

import numpy as np
import pytest
from serving_standins import GrpcStandIn, RestStandIn, ServedModel

from electra_tf.commands import predict as predict_command
from electra_tf.serving import predict
from electra_tf.serving.client import GrpcClient, LocalPredictor, RestClient, ServingError

TEXTS = ["the movie was good", "", "한국어 문장도", "a " * 300]
PAIRS = ["fun", "dull plot", "", "x"]


@pytest.fixture(scope="module")
def served(serving_exports):
    version_dir = serving_exports["pair"]
    return ServedModel("pair", 1, version_dir), LocalPredictor(version_dir)


def _assert_same(got, want):
    assert set(got) == set(want) == {"probabilities", "logits", "label_id", "label"}
    np.testing.assert_allclose(
        np.asarray(got["probabilities"], np.float32), want["probabilities"], atol=1e-6
    )
    np.testing.assert_allclose(np.asarray(got["logits"], np.float32), want["logits"], atol=1e-6)
    assert np.asarray(got["label_id"]).tolist() == want["label_id"].tolist()
    assert [v.decode() if isinstance(v, bytes) else str(v) for v in got["label"]] == [
        v.decode() for v in want["label"]
    ]


def test_rest_client(served):
    model, local = served
    want = local.predict({"text": TEXTS, "text_pair": PAIRS})
    with RestStandIn(model) as server:
        client = RestClient(server.url, "pair")
        assert client.status()["model_version_status"][0]["state"] == "AVAILABLE"
        signature = client.metadata()["metadata"]["signature_def"]["signature_def"]
        assert set(signature["serving_default"]["inputs"]) == {"text", "text_pair"}
        assert signature["token_ids"]["inputs"]["input_ids"]["dtype"] == "DT_INT32"
        _assert_same(client.predict({"text": TEXTS, "text_pair": PAIRS}), want)
        # Pinned version, row format, and bytes that are not UTF-8 (sent as b64).
        pinned = RestClient(server.url, "pair", version=1)
        rows = pinned.predict_instances([{"text": t, "text_pair": p} for t, p in zip(TEXTS, PAIRS)])
        assert [r["label"] for r in rows] == [v.decode() for v in want["label"]]
        dirty = client.predict({"text": [b"the movie \xff was good"], "text_pair": [b"fun"]})
        assert server.requests[-1]["inputs"]["text"][0] == {"b64": "dGhlIG1vdmllIP8gd2FzIGdvb2Q="}
        np.testing.assert_allclose(dirty["probabilities"], want["probabilities"][:1], atol=1e-6)
        # Errors come back per request with the server's message; the server keeps serving.
        with pytest.raises(ServingError, match="HTTP 400"):
            client.predict({"text": ["a", "b"], "text_pair": ["a"]})
        with pytest.raises(ServingError, match="HTTP 400: input names"):
            client.predict({"text": ["a"]})
        with pytest.raises(ServingError, match="HTTP 404: Servable not found"):
            RestClient(server.url, "other").status()
        with pytest.raises(ServingError, match="HTTP 404"):
            RestClient(server.url, "pair", version=7).predict({"text": ["a"], "text_pair": ["b"]})
        _assert_same(client.predict({"text": TEXTS, "text_pair": PAIRS}), want)
        url = server.url
    with pytest.raises(ServingError, match="cannot connect"):
        RestClient(url, "pair", timeout=2).status()


def test_grpc_client(served):
    model, local = served
    want = local.predict({"text": TEXTS, "text_pair": PAIRS})
    with GrpcStandIn(model) as server:
        client = GrpcClient(server.target, "pair")
        status = client.status()["model_version_status"][0]
        assert status["state"] == "AVAILABLE" and status["version"] == "1"
        signature = client.metadata()["metadata"]["signature_def"]["signature_def"]
        assert set(signature["serving_default"]["outputs"]) == {
            "probabilities",
            "logits",
            "label_id",
            "label",
        }
        _assert_same(client.predict({"text": TEXTS, "text_pair": PAIRS}), want)
        ids = np.array([[2, 8, 3, 3]], np.int64)  # int64 in, int32 on the wire
        by_ids = GrpcClient(server.target, "pair", version=1).predict(
            {
                "input_ids": ids,
                "input_mask": np.ones_like(ids),
                "segment_ids": np.array([[0, 0, 0, 1]]),
            },
            "token_ids",
        )
        assert by_ids["probabilities"].shape == (1, 2)
        with pytest.raises(ServingError, match="INVALID_ARGUMENT"):
            client.predict({"text": ["a", "b"], "text_pair": ["a"]})
        with pytest.raises(ServingError, match="(?s)INVALID_ARGUMENT: .*vocabulary size"):
            client.predict(
                {
                    "input_ids": ids * 100,
                    "input_mask": np.ones_like(ids),
                    "segment_ids": np.zeros_like(ids),
                },
                "token_ids",
            )
        with pytest.raises(ServingError, match="NOT_FOUND"):
            GrpcClient(server.target, "other").predict({"text": ["a"]})
        _assert_same(client.predict({"text": TEXTS, "text_pair": PAIRS}), want)
        client.close()


def _write_inputs(tmp_path):
    path = tmp_path / "pairs.tsv"
    lines = [f"{t}\t{p}".encode() for t, p in zip(TEXTS, PAIRS)] + [b"bad \xff bytes\tfun"]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_predict_command_rest_grpc_and_local(served, serving_exports, tmp_path, capsys):
    model, local = served
    inputs = _write_inputs(tmp_path)
    want = local.predict({"text": TEXTS + [b"bad \xff bytes"], "text_pair": PAIRS + ["fun"]})
    with RestStandIn(model) as rest, GrpcStandIn(model) as grpc_server:
        runs = {
            "rest": ["--server", rest.url, "--model_name", "pair"],
            "grpc": ["--server", f"grpc://{grpc_server.target}", "--model_name", "pair"],
            "local": ["--saved_model", serving_exports["pair"]],
        }
        for name, where in runs.items():
            output = tmp_path / f"{name}.jsonl"
            assert (
                predict_command.main(
                    where + ["--input", str(inputs), "--output", str(output), "--batch_size", "2"]
                )
                == 0
            )
            rows = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
            assert len(rows) == len(TEXTS) + 1
            assert rows[0]["text"] == TEXTS[0] and rows[0]["text_pair"] == PAIRS[0]
            assert rows[-1]["text"] == "bad \ufffd bytes"  # shown with a replacement character
            np.testing.assert_allclose(
                [r["probabilities"] for r in rows], want["probabilities"], atol=1e-5
            )
            assert [r["label"] for r in rows] == [v.decode() for v in want["label"]]
        capsys.readouterr()
        assert predict_command.main(runs["grpc"] + ["--status"]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert shown["status"]["model_version_status"][0]["state"] == "AVAILABLE"
        assert "token_ids" in shown["metadata"]["metadata"]["signature_def"]["signature_def"]
    assert predict_command.main(["--saved_model", str(tmp_path), "--input", str(inputs)]) == 2
    assert "no saved_model.pb" in capsys.readouterr().err
    assert (
        predict_command.main(["--server", "ftp://x", "--model_name", "m", "--input", str(inputs)])
        == 2
    )


def test_rejected_examples_are_isolated(tmp_path):
    class PickyClient:
        def predict(self, inputs, signature_name):
            if any("reject" in t for t in inputs["text"]):
                raise ServingError("text contains 'reject'")
            return {"score": np.arange(len(inputs["text"]), dtype=np.float32)}

    path = tmp_path / "texts.txt"
    path.write_text("one\nplease reject me\nthree\nfour\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert predict.predict_file(PickyClient(), str(path), str(out), batch_size=3) == (4, 1)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["text"] for r in rows] == ["one", "please reject me", "three", "four"]
    assert rows[1]["error"] == "text contains 'reject'" and "score" not in rows[1]
    assert all("error" not in r for r in rows[:1] + rows[2:])
    with pytest.raises(
        predict.InputError,
        match=r'texts.jsonl line 2: needs the fields of a request: .*\{"text", "text_pair"\}',
    ):
        bad = tmp_path / "texts.jsonl"
        bad.write_text('{"text": "a"}\n{"label": 1}\n', encoding="utf-8")
        predict.predict_file(PickyClient(), str(bad), str(out))
    assert out.exists()  # the earlier output is kept when a later run fails


def test_json_lines_are_read_as_the_request_of_the_kind_whose_fields_they_hold(tmp_path):
    """Each kind's REQUEST_FIELDS: a question, context and options are a multiple-choice request,
    a question and context a question-answering one, words a parser's; lists are padded with ""."""
    sent = []

    class RecordingClient:
        def predict(self, inputs, signature_name):
            sent.append(inputs)
            return {"n": np.arange(len(next(iter(inputs.values()))))}

    rows = [
        {"question": "q1", "context": "c1", "options": ["a", "b", "c"]},
        {"question": "q2", "context": "c2", "options": ["d", "e"]},
    ]
    path = tmp_path / "choices.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    predict.predict_file(RecordingClient(), str(path), str(tmp_path / "out.jsonl"))
    assert sent[-1] == {
        "question": ["q1", "q2"],
        "context": ["c1", "c2"],
        "options": [["a", "b", "c"], ["d", "e", ""]],
    }
    assert list(predict.read_examples(str(path)))[1] == rows[1]

    path.write_text('{"question": "q", "context": "c", "id": 3}\n', encoding="utf-8")
    assert list(predict.read_examples(str(path))) == [{"question": "q", "context": "c"}]
    path.write_text('{"words": ["나는", "간다"]}\n{"words": ["x"]}\n', encoding="utf-8")
    predict.predict_file(RecordingClient(), str(path), str(tmp_path / "out.jsonl"))
    assert sent[-1] == {"words": [["나는", "간다"], ["x", ""]]}
    path.write_text('{"words": "not a list", "x": 1}\n{"words": [1]}\n', encoding="utf-8")
    with pytest.raises(
        predict.InputError, match='line 2: field "words" must be a string or a list'
    ):
        list(predict.read_examples(str(path)))


def test_a_request_line_missing_a_field_or_mixing_lists_and_strings_is_refused(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"question": "q", "options": ["a", "b"]}\n', encoding="utf-8")
    with pytest.raises(predict.InputError, match=r'line 1: a request with "question", "options"'):
        list(predict.read_examples(str(path)))

    class NeverCalled:
        def predict(self, inputs, signature_name):
            raise AssertionError("a mixed column must not be sent")

    path.write_text(
        '{"question": "q", "context": "c", "options": ["a", "b"]}\n'
        '{"question": "q", "context": "c", "options": "ab"}\n',
        encoding="utf-8",
    )
    with pytest.raises(predict.InputError, match='field "options" is a list in some lines'):
        predict.predict_file(NeverCalled(), str(path), str(tmp_path / "out.jsonl"))
