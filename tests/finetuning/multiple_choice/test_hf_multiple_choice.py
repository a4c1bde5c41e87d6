"""A multiple-choice model as Hugging Face's ElectraForMultipleChoice, and back."""

import json
import math
import os

import numpy as np
import pytest
from finetuning_support import make_pretrained_dir
from transformers_support import needs_transformers, transformers_outputs

from electra_tf.commands.convert import run as convert
from electra_tf.finetuning.saving import load_finetuned

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.fixture(scope="module")
def trial(tmp_path_factory):
    from electra_tf.artifacts.pretrained import load_discriminator
    from electra_tf.finetuning.multiple_choice.data import MultipleChoiceDefinition
    from electra_tf.finetuning.multiple_choice.model import build_multiple_choice
    from electra_tf.finetuning.saving import save_finetuned

    root = tmp_path_factory.mktemp("hf_multiple_choice")
    pretrained = make_pretrained_dir(str(root / "pretrained"))
    model = build_multiple_choice(load_discriminator(pretrained).encoder, seed=6)
    rng = np.random.default_rng(6)
    for variable in model.task_head.trainable_weights:
        variable.assign(rng.normal(0, 0.5, variable.shape).astype(np.float32))
    path = str(root / "trial_0")
    info = {
        "kind": "multiple_choice",
        "task": MultipleChoiceDefinition("c3").to_dict(),
        "max_seq_length": 16,
        "do_lower_case": True,
        "strip_accents": True,
    }
    save_finetuned(model, path, info, os.path.join(pretrained, "vocab.txt"))
    return path


def _inputs(seed=0):
    """[2, 3, 7]: every option present (transformers scores every row it is given)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, 19, size=(2, 3, 7)).astype(np.int32)
    ids[..., 0], ids[..., 6] = 2, 3
    mask = np.ones_like(ids)
    mask[1, :, 5:] = 0
    segments = np.zeros_like(ids)
    segments[..., 4:] = 1
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def _gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def test_the_written_head_computes_our_scores_as_transformers_head_would(trial, tmp_path):
    """transformers' head in NumPy on the written weights: SequenceSummary("first", projection,
    gelu) then classifier, on each option's [CLS]."""
    from safetensors.numpy import load_file

    hf_dir = str(tmp_path / "hf")
    assert convert(["export-hf", trial, hf_dir]) == 0
    state = load_file(os.path.join(hf_dir, "model.safetensors"))
    with open(os.path.join(hf_dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    assert config["architectures"] == ["ElectraForMultipleChoice"]
    assert config["summary_type"] == "first" and config["summary_use_proj"] is True
    assert config["summary_activation"] == "gelu" and config["summary_proj_to_labels"] is False
    assert config["finetuning_task"] == "c3"
    model, _ = load_finetuned(trial)
    hidden = model.encoder.hidden_size
    head = {k: v for k, v in state.items() if not k.startswith("electra.")}
    assert {k: v.shape for k, v in head.items()} == {
        "sequence_summary.summary.weight": (hidden, hidden),
        "sequence_summary.summary.bias": (hidden,),
        "classifier.weight": (1, hidden),
        "classifier.bias": (1,),
    }
    inputs = _inputs()
    cls = np.asarray(model.encoder({k: v.reshape(6, 7) for k, v in inputs.items()}))[:, 0]
    pooled = _gelu(
        cls @ head["sequence_summary.summary.weight"].T + head["sequence_summary.summary.bias"]
    )
    logits = (pooled @ head["classifier.weight"].T + head["classifier.bias"]).reshape(2, 3)
    np.testing.assert_allclose(np.asarray(model(inputs)), logits, atol=1e-5)


def test_import_gives_back_the_same_model(trial, tmp_path):
    hf_dir, back = str(tmp_path / "hf"), str(tmp_path / "back")
    assert convert(["export-hf", trial, hf_dir]) == 0
    assert convert(["import-hf", hf_dir, back, "--max_seq_length", "12"]) == 0
    original, _ = load_finetuned(trial)
    imported, info = load_finetuned(back)
    inputs = _inputs(1)
    np.testing.assert_array_equal(np.asarray(imported(inputs)), np.asarray(original(inputs)))
    assert info["kind"] == "multiple_choice" and info["max_seq_length"] == 12
    assert info["task"]["name"] == "c3" and imported.dropout_rate == original.dropout_rate


def test_a_summary_our_head_does_not_compute_is_refused(trial, tmp_path):
    hf_dir = str(tmp_path / "hf")
    assert convert(["export-hf", trial, hf_dir]) == 0
    with open(os.path.join(hf_dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    config["summary_activation"] = "tanh"
    with open(os.path.join(hf_dir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    assert convert(["import-hf", hf_dir, str(tmp_path / "back")]) == 2


@needs_transformers
def test_transformers_gives_the_same_choice_logits(trial, tmp_path):
    hf_dir = str(tmp_path / "hf")
    assert convert(["export-hf", trial, hf_dir]) == 0
    inputs = _inputs(2)
    reference = transformers_outputs(hf_dir, inputs, tmp_path)["choice_logits"]
    model, _ = load_finetuned(trial)
    np.testing.assert_allclose(np.asarray(model(inputs)), reference, atol=1e-4)
