"""LiteRT exports (`--format=litert`, float32 and `--quantize=int8`) in the LiteRT interpreter."""

import json
import os

import numpy as np
import pytest
from token_id_exports_support import fixture_trial, kind_trial


@pytest.fixture(scope="module")
def classifier_litert(tmp_path_factory):
    from electra_tf.serving.exporter import export_checkpoint

    base = str(tmp_path_factory.mktemp("litert_exports"))
    trial = fixture_trial("classifier")
    return {
        "float32": export_checkpoint(trial, base, "cls", format_name="litert"),
        "int8": export_checkpoint(trial, base, "cls", format_name="litert", quantize="int8"),
    }


def _config(version):
    with open(os.path.join(version, "assets", "serving_config.json")) as f:
        return json.load(f)


def test_serving_config_says_token_ids_and_the_quantization(classifier_litert):
    float32, int8 = _config(classifier_litert["float32"]), _config(classifier_litert["int8"])
    assert float32["format"] == int8["format"] == "litert"
    assert float32["inputs"] == "token_ids" and "RegexSplitWithOffsets" in float32["raw_text"]
    assert float32["quantization"] == "float32"
    assert float32["signatures"] == ["serving_default"]
    assert int8["quantization"].startswith("int8 dynamic range")
    float_size = os.path.getsize(os.path.join(classifier_litert["float32"], "model.tflite"))
    int8_size = os.path.getsize(os.path.join(classifier_litert["int8"], "model.tflite"))
    assert int8_size < 0.8 * float_size


def test_float32_model_answers_the_keras_model(classifier_litert):
    from ai_edge_litert.interpreter import Interpreter

    from electra_tf.finetuning.saving import load_finetuned

    version = classifier_litert["float32"]
    interpreter = Interpreter(model_path=os.path.join(version, "model.tflite"))
    assert interpreter.get_signature_list() == {
        "serving_default": {
            "inputs": ["input_ids", "input_mask", "segment_ids"],
            "outputs": ["label", "label_id", "logits", "probabilities"],
        }
    }
    ids = np.array([[2, 7, 8, 9, 3, 0], [2, 10, 3, 0, 0, 0]], np.int32)
    feed = {"input_ids": ids, "input_mask": (ids > 0).astype(np.int32)}
    feed["segment_ids"] = np.zeros_like(ids)
    got = interpreter.get_signature_runner()(**feed)
    model, _ = load_finetuned(os.path.join(version, "assets.extra"))
    logits = np.asarray(model(feed, training=False))
    np.testing.assert_allclose(got["logits"], logits, atol=1e-4)
    np.testing.assert_array_equal(got["label_id"], logits.argmax(1))


def test_check_bounds_float32_and_reports_int8_agreement(classifier_litert):
    from electra_tf.serving.formats import check_version

    float32 = check_version(classifier_litert["float32"])
    assert float32.ok, float32.lines
    assert any("allowed 0.0001" in line for line in float32.lines)
    int8 = check_version(classifier_litert["int8"])
    assert int8.ok, int8.lines
    text = "\n".join(int8.lines)
    assert "not bounded (quantized)" in text
    assert "labels and ids agreeing with the float32 Keras model" in text
    assert "largest probability difference: probabilities" in text
    # Quantized weights move the probabilities, but not by much on this model.
    assert 0 < int8.result["largest_difference"]["probabilities"] < 0.05


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["question_answering", "tagger", "multiple_choice"])
def test_other_kinds_export_to_litert_and_pass_the_check(kind, tmp_path):
    from electra_tf.serving.exporter import export_checkpoint
    from electra_tf.serving.formats import check_version

    trial = kind_trial(str(tmp_path), kind) if kind == "multiple_choice" else fixture_trial(kind)
    version = export_checkpoint(trial, str(tmp_path / "export"), kind, format_name="litert")
    report = check_version(version)
    assert report.ok, report.lines


@pytest.mark.slow
def test_dependency_parsing_is_refused_in_one_line(tmp_path):
    from electra_tf.serving.exporter import export_checkpoint
    from electra_tf.serving.formats import ExportError

    trial = kind_trial(str(tmp_path), "dependency_parsing")
    with pytest.raises(ExportError) as caught:
        export_checkpoint(trial, str(tmp_path / "export"), "dp", format_name="litert")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("the dependency_parsing model: --format=litert")
    assert "without LiteRT kernels" in message and "--format=onnx" in message
    assert not os.listdir(tmp_path / "export" / "dp")  # nothing published
