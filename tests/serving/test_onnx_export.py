"""ONNX exports (`--format=onnx`): model.onnx in ONNX Runtime against the Keras model."""

import json
import math
import os

import numpy as np
import pytest
from token_id_exports_support import fixture_trial, kind_trial


@pytest.fixture(scope="module")
def classifier_onnx(tmp_path_factory):
    from electra_tf.serving.exporter import export_checkpoint

    base = str(tmp_path_factory.mktemp("onnx_exports"))
    return export_checkpoint(fixture_trial("classifier"), base, "cls", format_name="onnx")


def test_version_holds_model_onnx_assets_and_the_keras_model(classifier_onnx):
    names = set(os.listdir(classifier_onnx))
    assert names == {"model.onnx", "assets", "assets.extra"}
    assert set(os.listdir(os.path.join(classifier_onnx, "assets"))) == {
        "vocab.txt",
        "serving_config.json",
        "labels.txt",
    }
    with open(os.path.join(classifier_onnx, "assets", "serving_config.json")) as f:
        config = json.load(f)
    assert config["format"] == "onnx" and config["inputs"] == "token_ids"
    assert config["signatures"] == ["token_ids"] and config["forward"] == "portable"
    assert config["converter"].startswith("tf2onnx ")


def test_onnx_runtime_answers_the_keras_model_s_logits(classifier_onnx):
    import onnxruntime

    from electra_tf.finetuning.saving import load_finetuned

    session = onnxruntime.InferenceSession(
        os.path.join(classifier_onnx, "model.onnx"), providers=["CPUExecutionProvider"]
    )
    assert [i.name for i in session.get_inputs()] == ["input_ids", "input_mask", "segment_ids"]
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 20, (3, 9)).astype(np.int32)
    ids[:, 0] = 2
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    segments = np.zeros_like(ids)
    segments[2, 5:] = 1
    feed = {"input_ids": ids, "input_mask": mask, "segment_ids": segments}
    got = dict(zip([o.name for o in session.get_outputs()], session.run(None, feed)))
    model, _ = load_finetuned(os.path.join(classifier_onnx, "assets.extra"))
    logits = np.asarray(model(feed, training=False))
    np.testing.assert_allclose(got["logits"], logits, atol=1e-4)
    exp = np.exp(logits - logits.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got["probabilities"], exp / exp.sum(1, keepdims=True), atol=1e-5)
    np.testing.assert_array_equal(got["label_id"], logits.argmax(1))
    assert list(got["label"]) == [["neg", "pos"][i] for i in logits.argmax(1)]


def test_check_export_passes_in_a_fresh_process(classifier_onnx):
    from electra_tf.serving.formats import check_version

    report = check_version(classifier_onnx)
    assert report.ok, report.lines
    text = "\n".join(report.lines)
    assert "model.onnx in onnx" in text and "allowed 0.0001" in text
    assert report.result["agreement"]["equal"] == report.result["agreement"]["total"] > 0
    assert not report.result["project_importable"]


def test_check_refuses_the_raw_text_benchmark(classifier_onnx):
    from electra_tf.serving.check import CheckError
    from electra_tf.serving.formats import check_version

    with pytest.raises(CheckError, match="token ids"):
        check_version(classifier_onnx, benchmark={"requests": 1, "batch_sizes": [1]})


def test_gelu_s_erfc_becomes_one_minus_erf():
    """tf.nn.gelu's Erfc has no ONNX op; the handler's graph matches math.erfc."""
    import onnxruntime
    import tensorflow as tf
    import tf2onnx

    from electra_tf.serving.formats.onnx_format import OPSET, _erfc

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def gelu(x):
        return {"y": tf.nn.gelu(x, approximate=False)}

    proto, _ = tf2onnx.convert.from_function(
        gelu,
        input_signature=[tf.TensorSpec([None], tf.float32, name="x")],
        opset=OPSET,
        custom_op_handlers={"Erfc": (_erfc, [])},
    )
    session = onnxruntime.InferenceSession(proto.SerializeToString())
    x = np.linspace(-6, 6, 25).astype(np.float32)
    (y,) = session.run(None, {"x": x})
    want = [0.5 * v * math.erfc(-v / math.sqrt(2)) for v in x.astype(np.float64)]
    np.testing.assert_allclose(y, want, atol=1e-6)


def test_unknown_format_and_quantization_are_refused():
    from electra_tf.serving.formats import ExportError, export_format

    with pytest.raises(ExportError, match="--format=tflite: choose one of saved_model, onnx"):
        export_format("tflite")
    with pytest.raises(ExportError, match="--quantize=int8: --format=onnx takes none"):
        export_format("onnx", "int8")


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind", ["question_answering", "tagger", "multiple_choice", "dependency_parsing"]
)
def test_every_kind_exports_to_onnx_and_passes_the_check(kind, tmp_path):
    from electra_tf.serving.exporter import export_checkpoint
    from electra_tf.serving.formats import check_version

    if kind in ("multiple_choice", "dependency_parsing"):
        trial = kind_trial(str(tmp_path), kind)
    else:
        trial = fixture_trial(kind)
    version = export_checkpoint(trial, str(tmp_path / "export"), kind, format_name="onnx")
    report = check_version(version)
    assert report.ok, report.lines
    assert any(line.startswith("ok   token_ids") for line in report.lines)
