"""SQuAD exports: signatures, answers against the Python decoding, bad inputs, the check."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from serving_support import make_serving_pretrained_dir

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX_SEQ_LENGTH = 24
MAX_QUERY_LENGTH = 6
MAX_ANSWER_LENGTH = 4
THRESHOLD = 0.25

PAIRS = [
    ("what was the movie?", "The movie was very good, the actor was bad."),
    ("café?", "ÉLAN Vital: the Café's CRÈME brûlée"),
    ("한국어?", "한국어 문장도 . 中文 fun"),
    ("the plot", "the   plot was   dull\tand\nthe film fun"),
    ("story", "a story " * 20),  # longer than one window: only the first is searched
]


def _make_trial(directory, pretrained, version, seed):
    """A SQuAD trial directory as the trial loop saves it, head weights drawn wide."""
    from electra_tf.artifacts.pretrained import load_discriminator
    from electra_tf.finetuning.question_answering.model import build_qa_model
    from electra_tf.finetuning.saving import save_finetuned

    encoder = load_discriminator(pretrained).encoder
    model = build_qa_model(encoder, beam_size=5, seed=seed)
    rng = np.random.default_rng(seed)
    # Near-equal logits (the init's 0.02) would make the best span a near-tie.
    for variable in model.task_head.weights:
        variable.assign(rng.normal(0, 0.3, variable.shape).astype(np.float32))
    save_finetuned(
        model,
        directory,
        {
            "kind": "question_answering",
            "squad_version": version,
            "max_seq_length": MAX_SEQ_LENGTH,
            "doc_stride": 8,
            "max_query_length": MAX_QUERY_LENGTH,
            "max_answer_length": MAX_ANSWER_LENGTH,
            "null_score_threshold": THRESHOLD,
            "do_lower_case": True,
            "strip_accents": True,
        },
        os.path.join(pretrained, "vocab.txt"),
    )
    return directory


@pytest.fixture(scope="module")
def qa_exports(tmp_path_factory):
    from electra_tf.serving.exporter import export_checkpoint

    root = tmp_path_factory.mktemp("qa_serving")
    pretrained = make_serving_pretrained_dir(str(root / "pretrained"))
    v1 = _make_trial(str(root / "v1_trial"), pretrained, "1.1", seed=3)
    # v2 as a run's output directory: its best trial (by f1) is exported.
    run = root / "squad_run"
    v2 = _make_trial(str(run / "trial_1"), pretrained, "2.0", seed=4)
    with open(run / "results.json", "w", encoding="utf-8") as f:
        json.dump(
            {
                "task": "squad",
                "trials": [
                    {"trial": 0, "scores": {"f1": 90.0}},
                    {"trial": 1, "scores": {"f1": 50.0}},
                ],
            },
            f,
        )
    base = str(root / "export")
    return {
        "v1_trial": v1,
        "v2_trial": v2,
        "v1": export_checkpoint(v1, base, "squad11"),
        "v2": export_checkpoint(str(run), base, "squad20"),
    }


def _io(function):
    inputs = {
        k: (v.dtype, v.shape.as_list()) for k, v in function.structured_input_signature[1].items()
    }
    outputs = {k: (v.dtype, v.shape.as_list()) for k, v in function.structured_outputs.items()}
    return inputs, outputs


def _python_answers(trial_dir, pairs):
    """The project's own path: windows, the Keras model's outputs, `squad_decoding.decode`."""
    from electra_tf.finetuning.question_answering import decoding as squad_decoding
    from electra_tf.finetuning.question_answering import features as squad_features
    from electra_tf.finetuning.question_answering.check import first_windows
    from electra_tf.finetuning.question_answering.data import QAExample
    from electra_tf.finetuning.saving import load_finetuned
    from electra_tf.tokenization import WordPieceTokenizer

    model, info = load_finetuned(trial_dir)
    tokenizer = WordPieceTokenizer(os.path.join(trial_dir, "vocab.txt"), True, True)
    examples = [QAExample(str(i), q, c, []) for i, (q, c) in enumerate(pairs)]
    features = first_windows(
        squad_features.convert_examples(examples, tokenizer, MAX_SEQ_LENGTH, 8, MAX_QUERY_LENGTH)
    )
    outputs = {k: np.asarray(v) for k, v in model(features.inputs()).items()}
    predictions, null_odds, nbest = squad_decoding.decode(
        examples, features, outputs, max_answer_length=MAX_ANSWER_LENGTH
    )
    return (
        [predictions[e.qas_id] for e in examples],
        [nbest[e.qas_id] for e in examples],
        [null_odds[e.qas_id] for e in examples],
        features,
    )


@pytest.mark.slow
def test_signatures_dtypes_shapes_and_config(qa_exports):
    for kind in ("v1", "v2"):
        loaded = tf.saved_model.load(qa_exports[kind])
        assert set(loaded.signatures) == {"serving_default", "token_ids"}
        text_in, text_out = _io(loaded.signatures["serving_default"])
        ids_in, ids_out = _io(loaded.signatures["token_ids"])
        assert text_in == {"question": (tf.string, [None]), "context": (tf.string, [None])}
        expected = {
            "answer_text": (tf.string, [None]),
            "score": (tf.float32, [None]),
            **{k: (tf.int32, [None]) for k in ("start_char", "end_char", "start_byte", "end_byte")},
        }
        expected_ids = {
            "start_logits": (tf.float32, [None, None]),
            "start_top_index": (tf.int32, [None, None]),
            "start_top_log_probs": (tf.float32, [None, None]),
            "end_logits": (tf.float32, [None, None, None]),
            "end_top_index": (tf.int32, [None, None, None]),
            "end_top_log_probs": (tf.float32, [None, None, None]),
        }
        if kind == "v2":
            expected.update(no_answer_score=(tf.float32, [None]), has_answer=(tf.bool, [None]))
            expected_ids["answerable_logit"] = (tf.float32, [None])
        assert text_out == expected
        assert ids_in == {
            n: (tf.int32, [None, None]) for n in ("input_ids", "input_mask", "segment_ids")
        }
        assert ids_out == expected_ids
        with open(os.path.join(qa_exports[kind], "assets", "serving_config.json")) as f:
            config = json.load(f)
        assert config["kind"] == "question_answering"
        assert config["version_2"] == (kind == "v2")
        assert (
            config["max_seq_length"],
            config["max_query_length"],
            config["max_answer_length"],
        ) == (MAX_SEQ_LENGTH, MAX_QUERY_LENGTH, MAX_ANSWER_LENGTH)
        assert os.path.isfile(os.path.join(qa_exports[kind], "assets.extra", "model.json"))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["v1", "v2"])
def test_raw_text_answers_equal_the_python_decoding(qa_exports, kind):
    loaded = tf.saved_model.load(qa_exports[kind])
    served = loaded.signatures["serving_default"](
        question=tf.constant([q for q, _ in PAIRS]), context=tf.constant([c for _, c in PAIRS])
    )
    served = {k: v.numpy() for k, v in served.items()}
    predictions, nbest, null_odds, _ = _python_answers(qa_exports[f"{kind}_trial"], PAIRS)
    for i, (_, context) in enumerate(PAIRS):
        best = nbest[i][0]
        text = served["answer_text"][i].decode()
        assert text == predictions[i] == context[best["start"] : best["end"]]
        assert (served["start_char"][i], served["end_char"][i]) == (best["start"], best["end"])
        raw = context.encode()
        assert raw[served["start_byte"][i] : served["end_byte"][i]] == text.encode()
        np.testing.assert_allclose(served["score"][i], best["score"], atol=1e-4)
    if kind == "v2":
        np.testing.assert_allclose(served["no_answer_score"], null_odds, atol=1e-5)
        np.testing.assert_array_equal(served["has_answer"], np.array(null_odds) <= THRESHOLD)
    else:
        assert "no_answer_score" not in served


def test_token_id_signature_equals_the_keras_model(qa_exports):
    from electra_tf.finetuning.saving import load_finetuned

    _, _, _, features = _python_answers(qa_exports["v2_trial"], PAIRS[:2])
    model, _ = load_finetuned(qa_exports["v2_trial"])
    expected = {k: np.asarray(v) for k, v in model(features.inputs()).items()}
    loaded = tf.saved_model.load(qa_exports["v2"])
    served = loaded.signatures["token_ids"](
        **{k: tf.constant(v) for k, v in features.inputs().items()}
    )
    for name, value in expected.items():
        # rtol: the -1000 at masked positions differs by float32 ulps.
        np.testing.assert_allclose(served[name].numpy(), value, rtol=1e-6, atol=1e-5, err_msg=name)
    assert served["start_logits"].shape == (2, MAX_SEQ_LENGTH)


def test_empty_and_invalid_inputs_do_not_crash(qa_exports):
    serve = tf.saved_model.load(qa_exports["v2"]).signatures["serving_default"]
    out = serve(
        question=tf.constant(["", "movie", b"bad \xff\xfe", "movie"]),
        context=tf.constant(["the movie", "", b"the \xc3 movie \xff was", b"\xff\xfe"]),
    )
    out = {k: v.numpy() for k, v in out.items()}
    # An empty context has no span.
    assert out["answer_text"][1] == b"" and out["start_char"][1] == -1
    assert out["score"][1] == np.float32(-1e9)
    assert out["answer_text"][3] == b"" and out["end_byte"][3] == -1
    # An empty question still answers; invalid bytes stay in the context the answer is cut from.
    for i, context in ((0, b"the movie"), (2, b"the \xc3 movie \xff was")):
        start, end = out["start_byte"][i], out["end_byte"][i]
        assert 0 <= start < end <= len(context) and context[start:end] == out["answer_text"][i]
    assert np.isfinite(out["no_answer_score"]).all()
    with pytest.raises(tf.errors.InvalidArgumentError):
        serve(question=tf.constant(["a", "b"]), context=tf.constant(["a"]))


@pytest.mark.slow
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_empty_batches_answer_empty_outputs(qa_exports, version):
    loaded = tf.saved_model.load(qa_exports[version])
    out = loaded.signatures["serving_default"](
        question=tf.constant([], tf.string), context=tf.constant([], tf.string)
    )
    names = {"answer_text", "start_char", "end_char", "start_byte", "end_byte", "score"}
    assert set(out) == names | ({"no_answer_score", "has_answer"} if version == "v2" else set())
    assert all(v.shape.as_list() == [0] for v in out.values())
    for length in (0, 5):
        empty = tf.zeros([0, length], tf.int32)
        ids_out = loaded.signatures["token_ids"](
            input_ids=empty, input_mask=empty, segment_ids=empty
        )
        assert all(v.shape[0] == 0 for v in ids_out.values())


@pytest.mark.slow
def test_check_passes_and_catches_tampered_weights(qa_exports, tmp_path):
    from electra_tf.serving import check

    report = check.check_export(qa_exports["v2"])
    assert report.ok, "\n".join(report.lines)
    assert report.result["project_importable"] is False
    assert report.result["unsupported_ops"] == []
    responses = report.result["responses"]
    assert sum("outputs" in r for r in responses) == 4
    assert sum("error" in r for r in responses) == len(responses) - 4

    from electra_tf.finetuning.saving import load_finetuned, save_finetuned

    tampered = str(tmp_path / "tampered" / "1")
    shutil.copytree(qa_exports["v1"], tampered)
    # The served weights no longer match the model they were exported from.
    extra = os.path.join(tampered, "assets.extra")
    model, info = load_finetuned(extra)
    model.task_head.start_kernel.assign(-model.task_head.start_kernel)
    save_finetuned(model, extra, info)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    result = subprocess.run(
        [sys.executable, "-m", "electra_tf.commands.check_export", tampered],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    assert "FAIL token_ids" in result.stdout and result.stdout.rstrip().endswith("FAILED")


@pytest.mark.slow
def test_predict_command_reads_question_context_lines(qa_exports, tmp_path):
    from electra_tf.commands import predict as predict_command

    source = tmp_path / "questions.jsonl"
    with open(source, "w", encoding="utf-8") as f:
        for question, context in PAIRS[:2]:
            f.write(json.dumps({"question": question, "context": context}) + "\n")
    output = tmp_path / "answers.jsonl"
    assert (
        predict_command.main(
            ["--saved_model", qa_exports["v1"], "--input", str(source), "--output", str(output)]
        )
        == 0
    )
    with open(output, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    predictions, _, _, _ = _python_answers(qa_exports["v1_trial"], PAIRS[:2])
    assert [r["answer_text"] for r in rows] == predictions
    assert rows[0]["question"] == PAIRS[0][0] and isinstance(rows[0]["score"], float)
