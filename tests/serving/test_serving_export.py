"""SavedModel exports for TF Serving: signatures, assets, bad inputs, the export command."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from serving_support import SERVING_VOCAB

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _signature_io(function):
    inputs = {
        k: (v.dtype, v.shape.as_list()) for k, v in function.structured_input_signature[1].items()
    }
    outputs = {k: (v.dtype, v.shape.as_list()) for k, v in function.structured_outputs.items()}
    return inputs, outputs


def test_classifier_signatures_dtypes_shapes_and_assets(serving_exports):
    version_dir = serving_exports["pair"]
    assert os.path.basename(version_dir) == "1"
    loaded = tf.saved_model.load(version_dir)
    assert set(loaded.signatures) == {"serving_default", "token_ids", "serving_bfloat16"}
    text_in, text_out = _signature_io(loaded.signatures["serving_default"])
    ids_in, ids_out = _signature_io(loaded.signatures["token_ids"])
    # The bfloat16 signature takes and returns what serving_default does.
    assert _signature_io(loaded.signatures["serving_bfloat16"]) == (text_in, text_out)
    assert text_in == {"text": (tf.string, [None]), "text_pair": (tf.string, [None])}
    assert ids_in == {
        name: (tf.int32, [None, None]) for name in ("input_ids", "input_mask", "segment_ids")
    }
    expected = {
        "probabilities": (tf.float32, [None, 2]),
        "logits": (tf.float32, [None, 2]),
        "label_id": (tf.int32, [None]),
        "label": (tf.string, [None]),
    }
    assert text_out == expected and ids_out == expected
    assets = os.path.join(version_dir, "assets")
    with open(os.path.join(assets, "vocab.txt"), encoding="utf-8") as f:
        assert f.read().split("\n")[:-1] == SERVING_VOCAB
    with open(os.path.join(assets, "labels.txt"), encoding="utf-8") as f:
        assert f.read() == "neg\npos\n"
    with open(os.path.join(assets, "serving_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    assert (
        config["kind"] == "classification" and config["is_pair"] and config["max_seq_length"] == 16
    )
    assert config["model"]["hidden_size"] == 32 and config["label_names"] == ["neg", "pos"]
    assert config["signatures"] == ["serving_default", "token_ids", "serving_bfloat16"]
    assert os.path.isfile(os.path.join(version_dir, "assets.extra", "model.json"))
    with open(os.path.join(version_dir, "batching_params.pbtxt"), encoding="utf-8") as f:
        batching = _batching_parameters(f.read())
    assert batching.max_batch_size.value == 32 and batching.batch_timeout_micros.value == 1000
    assert batching.max_enqueued_batches.value == 4 and not batching.pad_variable_length_inputs
    assert not batching.HasField("num_batch_threads")  # the server's, not the model's


def _batching_parameters(text: str):
    """`text` parsed as TF Serving's BatchingParameters (a strict parse: unknown fields fail).

    The message is built here from its definition in TF Serving's
    tensorflow_serving/servables/tensorflow/session_bundle_config.proto (field
    names, numbers and wrapper types), which no pip package ships.
    """
    from google.protobuf import (
        descriptor_pb2,
        descriptor_pool,
        message_factory,
        text_format,
        wrappers_pb2,
    )

    pool = descriptor_pool.DescriptorPool()
    wrappers = descriptor_pb2.FileDescriptorProto()
    wrappers_pb2.DESCRIPTOR.CopyToProto(wrappers)
    pool.Add(wrappers)
    proto = descriptor_pb2.FileDescriptorProto(
        name="session_bundle_config.proto",
        package="tensorflow.serving",
        dependency=["google/protobuf/wrappers.proto"],
        syntax="proto3",
    )
    message = proto.message_type.add(name="BatchingParameters")
    wrapped = {
        "max_batch_size": (1, "Int64Value"),
        "batch_timeout_micros": (2, "Int64Value"),
        "max_enqueued_batches": (3, "Int64Value"),
        "num_batch_threads": (4, "Int64Value"),
        "thread_pool_name": (5, "StringValue"),
    }
    for name, (number, kind) in wrapped.items():
        message.field.add(
            name=name,
            number=number,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
            type_name=f".google.protobuf.{kind}",
            label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        )
    message.field.add(
        name="allowed_batch_sizes",
        number=6,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
    )
    message.field.add(
        name="pad_variable_length_inputs",
        number=7,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    )
    pool.Add(proto)
    cls = message_factory.GetMessageClass(
        pool.FindMessageTypeByName("tensorflow.serving.BatchingParameters")
    )
    return text_format.Parse(text, cls())


def test_regression_signature_returns_scaled_scores(serving_exports):
    from electra_tf.finetuning.saving import load_finetuned

    loaded = tf.saved_model.load(serving_exports["regression"])
    text_in, text_out = _signature_io(loaded.signatures["serving_default"])
    assert text_in == {"text": (tf.string, [None])}
    assert text_out == {"score": (tf.float32, [None])}
    model, _ = load_finetuned(
        os.path.join(os.path.dirname(serving_exports["pair_trial"]), "regression_trial")
    )
    ids = np.array([[2, 8, 3]], np.int32)  # [CLS] the [SEP]
    served = loaded.signatures["token_ids"](
        input_ids=ids, input_mask=np.ones_like(ids), segment_ids=np.zeros_like(ids)
    )["score"].numpy()
    keras_out = model(
        {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
    ).numpy()
    np.testing.assert_allclose(served, keras_out * 5.0, atol=1e-5)
    assert served.shape == (1,)


def test_bad_text_inputs_are_defined(serving_exports):
    loaded = tf.saved_model.load(serving_exports["pair"])
    serve = loaded.signatures["serving_default"]
    ids_fn = loaded.signatures["token_ids"]

    def by_ids(ids, segments):
        ids = np.array([ids], np.int32)
        return ids_fn(
            input_ids=ids, input_mask=np.ones_like(ids), segment_ids=np.array([segments], np.int32)
        )["probabilities"].numpy()

    # Empty texts: scored as "[CLS] [SEP] [SEP]".
    empty = serve(text=tf.constant([""]), text_pair=tf.constant([""]))["probabilities"].numpy()
    np.testing.assert_allclose(empty, by_ids([2, 3, 3], [0, 0, 1]), atol=1e-6)
    # Invalid UTF-8 bytes are dropped, as by the Python tokenizer.
    dirty = serve(text=tf.constant([b"good \xff\xfemovie"]), text_pair=tf.constant([b"\xc3"]))
    clean = serve(text=tf.constant(["good movie"]), text_pair=tf.constant([""]))
    np.testing.assert_allclose(dirty["probabilities"], clean["probabilities"], atol=1e-6)
    # Over-long text is cut to max_seq_length (16) tokens, never rejected.
    long_text = tf.constant(["the movie was good " * 200])
    cut = serve(text=long_text, text_pair=tf.constant(["fun"]))["probabilities"].numpy()
    vocab = {t: i for i, t in enumerate(SERVING_VOCAB)}
    pieces = [vocab[w] for w in ("the movie was good " * 4).split()][:12]
    np.testing.assert_allclose(
        cut, by_ids([2] + pieces + [3, vocab["fun"], 3], [0] * 14 + [1, 1]), atol=1e-6
    )
    # Wrong dtype, rank or batch pairing: a per-request error.
    for inputs in (
        {"text": tf.constant([[b"a"]]), "text_pair": tf.constant([[b"b"]])},
        {"text": tf.constant(["a", "b"]), "text_pair": tf.constant(["a"])},
    ):
        with pytest.raises(tf.errors.InvalidArgumentError):
            serve(**inputs)
    with pytest.raises((tf.errors.InvalidArgumentError, TypeError, ValueError)):
        serve(text=tf.constant([1]), text_pair=tf.constant([2]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="vocabulary size"):
        by_ids([2, len(SERVING_VOCAB), 3], [0, 0, 0])
    with pytest.raises(tf.errors.InvalidArgumentError, match="sequence length"):
        by_ids([2] * 600, [0] * 600)


def test_empty_batches_answer_empty_outputs_in_every_signature(serving_exports):
    for name, texts in (("pair", ("text", "text_pair")), ("regression", ("text",))):
        loaded = tf.saved_model.load(serving_exports[name])
        out = loaded.signatures["serving_default"](
            **{key: tf.constant([], tf.string) for key in texts}
        )
        assert {k: v.shape.as_list() for k, v in out.items()} == (
            {"probabilities": [0, 2], "logits": [0, 2], "label_id": [0], "label": [0]}
            if name == "pair"
            else {"score": [0]}
        )
        for length in (0, 3):  # clients padding to the longest example send [0, 0]
            empty = tf.zeros([0, length], tf.int32)
            ids_out = loaded.signatures["token_ids"](
                input_ids=empty, input_mask=empty, segment_ids=empty
            )
            assert all(v.shape[0] == 0 for v in ids_out.values())
        # A row without even [CLS] is an error, not an answer.
        none = tf.zeros([2, 0], tf.int32)
        with pytest.raises(tf.errors.InvalidArgumentError, match="at least one token"):
            loaded.signatures["token_ids"](input_ids=none, input_mask=none, segment_ids=none)


def test_a_model_that_is_not_finite_is_not_exported(serving_exports, tmp_path):
    from electra_tf.finetuning.saving import load_finetuned
    from electra_tf.serving.exporter import ExportError, export_finetuned

    model, info = load_finetuned(serving_exports["pair_trial"])
    model.weights[-1].assign(model.weights[-1] * float("inf"))
    vocab = os.path.join(serving_exports["pair_trial"], "vocab.txt")
    with pytest.raises(ExportError, match="hold NaN or infinite values .* Nothing was exported"):
        export_finetuned(model, info, vocab, str(tmp_path), "diverged")
    assert not os.path.exists(tmp_path / "diverged")


def _run(*args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    return subprocess.run(
        [sys.executable, "-m", "electra_tf.commands.export", *args],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_export_command_from_pretraining_run(serving_exports, tmp_path):
    """The standalone command on a pre-training run: replaced-token probabilities."""
    base = tmp_path / "served"
    result = _run(
        "--checkpoint",
        serving_exports["pretrained"],
        "--export_base",
        str(base),
        "--model_name",
        "rtd",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    version_dir = result.stdout.strip().splitlines()[-1]
    assert version_dir == str(base / "rtd" / "1")
    loaded = tf.saved_model.load(version_dir)
    text_in, text_out = _signature_io(loaded.signatures["serving_default"])
    assert text_in == {"text": (tf.string, [None])}
    assert text_out == {
        "replaced_probability": (tf.float32, [None, None]),
        "logits": (tf.float32, [None, None]),
        "tokens": (tf.string, [None, None]),
        "input_ids": (tf.int32, [None, None]),
        "input_mask": (tf.int32, [None, None]),
    }
    out = loaded.signatures["serving_default"](text=tf.constant(["The movie", "a " * 100]))
    assert out["tokens"].numpy()[0, :4].tolist() == [b"[CLS]", b"the", b"movie", b"[SEP]"]
    assert out["tokens"].shape == (2, 24)  # the run's max_seq_length
    probability = out["replaced_probability"].numpy()
    assert (probability[0, 4:] == 0).all() and (
        (probability[0, :4] > 0) & (probability[0, :4] < 1)
    ).all()
    np.testing.assert_allclose(
        probability, tf.sigmoid(out["logits"]).numpy() * out["input_mask"].numpy(), atol=1e-6
    )

    # Errors name the flag; nothing is created for a bad checkpoint.
    missing = _run(
        "--checkpoint", str(tmp_path / "nope"), "--export_base", str(base), "--model_name", "rtd"
    )
    assert missing.returncode == 2 and "--checkpoint" in missing.stderr
    assert sorted(os.listdir(base / "rtd")) == ["1"]
