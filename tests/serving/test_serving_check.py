"""The fresh-process check: the export loads without the project and agrees with Keras."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from electra_tf.finetuning.classification.check import (
    BFLOAT16_RELATIVE_TOLERANCE,
    BFLOAT16_TOLERANCE,
    SAMPLE_TEXTS,
)
from electra_tf.serving import check
from electra_tf.serving.exporter import export_checkpoint

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _assert_isolated(result):
    assert result["project_importable"] is False
    # The project root is not on the path (a virtualenv inside it may be).
    assert PROJECT not in [os.path.abspath(p or ".") for p in result["sys_path"]]


def test_classifier_export_agrees_in_a_fresh_process(serving_exports):
    report = check.check_export(serving_exports["pair"])
    assert report.ok, "\n".join(report.lines)
    _assert_isolated(report.result)
    assert report.result["custom_ops"] == [
        "CaseFoldUTF8",
        "FastWordpieceTokenizeWithOffsets",
        "NormalizeUTF8",
        "RegexSplitWithOffsets",
    ]
    assert report.result["unsupported_ops"] == []
    assert "signature_def['serving_default']" in report.result["listing"]
    assert "inputs['text_pair'] tensor_info" in report.result["listing"]
    # Every well-formed request agreed within the tolerance, every malformed one was an error:
    # four through the float32 signatures, the sample texts and one text through bfloat16's.
    responses = report.result["responses"]
    assert sum("outputs" in r for r in responses) == 6
    assert sum("error" in r for r in responses) == len(responses) - 6
    bfloat16 = [line for line in report.lines if line.startswith("ok   serving_bfloat16")]
    assert len(bfloat16) == 2 and all(
        f"{BFLOAT16_TOLERANCE:g} + {BFLOAT16_RELATIVE_TOLERANCE:g} of its row's largest value"
        in line
        for line in bfloat16
    )
    assert sum(line.startswith("ok ") for line in report.lines) == len(responses)
    assert any(
        line.startswith("ok   serving_default: no text (empty outputs)") for line in report.lines
    )


@pytest.mark.slow
def test_discriminator_export_agrees_in_a_fresh_process(serving_exports, tmp_path):
    version_dir = export_checkpoint(serving_exports["pretrained"], str(tmp_path), "rtd")
    report = check.check_export(version_dir)
    assert report.ok, "\n".join(report.lines)
    _assert_isolated(report.result)
    tokens = report.result["responses"][0]["outputs"]["tokens"]
    assert tokens["shape"][0] == len(SAMPLE_TEXTS) + 1


@pytest.mark.slow
def test_check_command_fails_on_disagreement(serving_exports, tmp_path):
    """A SavedModel that does not match its Keras model is caught (exit 1)."""
    tampered = str(tmp_path / "tampered" / "1")
    shutil.copytree(serving_exports["pair"], tampered)
    config_path = os.path.join(tampered, "assets", "serving_config.json")
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    config["max_seq_length"] = 12  # the graph still truncates at 16
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(config, f)
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
    assert "FAIL serving_default" in result.stdout and result.stdout.rstrip().endswith("FAILED")
    assert "ok   serving_default: text as int32 (must be rejected)" in result.stdout

    not_a_version = subprocess.run(
        [sys.executable, "-m", "electra_tf.commands.check_export", str(tmp_path)],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert not_a_version.returncode == 2 and "no saved_model.pb" in not_a_version.stderr


@pytest.mark.slow
def test_export_of_a_bert_normalized_run_agrees_in_a_fresh_process(serving_exports, tmp_path):
    """--normalization=bert is recorded in the export and its graph needs no CaseFoldUTF8."""
    run = tmp_path / "bert_run"
    shutil.copytree(serving_exports["pretrained"], run)
    with open(run / "config.json", encoding="utf-8") as f:
        config = json.load(f)
    config["normalization"] = "bert"
    with open(run / "config.json", "w", encoding="utf-8") as f:
        json.dump(config, f)
    version_dir = export_checkpoint(str(run), str(tmp_path / "export"), "rtd")
    with open(os.path.join(version_dir, "assets", "serving_config.json"), encoding="utf-8") as f:
        assert json.load(f)["normalization"] == "bert"
    report = check.check_export(version_dir)
    assert report.ok, "\n".join(report.lines)
    assert report.result["custom_ops"] == [
        "NormalizeUTF8",
        "RegexSplitWithOffsets",
        "WordpieceTokenizeWithOffsets",
    ]
    assert report.result["unsupported_ops"] == []


def test_weights_that_are_not_finite_fail_the_check(serving_exports, tmp_path):
    """A diverged model answers NaN probabilities with a confident label: refused at once."""
    from electra_tf.finetuning.saving import load_finetuned, save_finetuned

    diverged = str(tmp_path / "diverged" / "1")
    shutil.copytree(serving_exports["pair"], diverged)
    extra = os.path.join(diverged, "assets.extra")
    model, info = load_finetuned(extra)
    model.weights[0].assign(model.weights[0] * float("nan"))
    save_finetuned(model, extra, info)
    report = check.check_export(diverged)
    assert not report.ok and len(report.lines) == 1
    assert report.lines[0].startswith(
        f"FAIL 1 of {len(model.weights)} weight tensors of "
        f"{diverged} hold NaN or infinite values (e.g. "
    )


def test_a_relative_allowance_grows_with_the_rows_largest_value_and_refuses_beyond_it():
    def served(values):  # as the fresh process returns an output
        shape = list(np.shape(values))
        return {"logits": {"dtype": "float32", "values": values, "shape": shape}}

    want = {"logits": np.array([[10.0, -0.5], [1.0, 0.0]], np.float32)}
    # 0.01 + 2% of each row's largest |value|: 0.21 for both values of the first row
    # (-0.5 too), 0.03 for both of the second.
    assert check.compare(want, served([[10.2, -0.7], [1.029, 0.029]]), 0.01, 0.02)[0] == []
    for outside in (
        [[10.25, -0.5], [1.0, 0.0]],
        [[10.0, -0.75], [1.0, 0.0]],
        [[10.0, -0.5], [1.0, 0.035]],
    ):
        problems, _ = check.compare(want, served(outside), 0.01, 0.02)
        assert problems and "+ 0.02 of its row's largest value" in problems[0]
    # A one-dimensional output (a score per example) scales with each value itself.
    scores = {"logits": np.array([10.0, -0.5], np.float32)}
    assert check.compare(scores, served([10.2, -0.515]), 0.01, 0.02)[0] == []
    assert check.compare(scores, served([10.0, -0.53]), 0.01, 0.02)[0]
    # Without the relative share, 10.2 is far outside 0.01.
    assert check.compare(want, served([[10.2, -0.5], [1.0, 0.0]]), 0.01)[0]


def test_the_bound_printed_is_the_bound_applied():
    """1e-5 absolute plus 4 float32 ulps of the value: a difference the ulps admit passes, and
    both the ok line and a refusal name the whole bound, not 1e-5 alone."""
    value = np.float32(1000.0)
    ulp = float(np.spacing(value))  # 6.1e-5 at 1000
    want = {"start_logits": np.array([[value]], np.float32)}

    def served(x):
        return {"start_logits": {"dtype": "float32", "values": [[x]], "shape": [1, 1]}}

    problems, largest = check.compare(want, served(float(value) + 3 * ulp), 1e-5)
    assert problems == [] and largest == pytest.approx(3 * ulp)
    problems, _ = check.compare(want, served(float(value) + 5 * ulp), 1e-5)
    assert problems and "exceeds 1e-05 + 4 float32 ulps of the value by" in problems[0]
    assert check.allowance_text(1e-5) == "1e-05 + 4 float32 ulps of the value"
    assert check.allowance_text(0.01, 0.05) == (
        "0.01 + 0.05 of its row's largest value + 4 float32 ulps of the value"
    )
