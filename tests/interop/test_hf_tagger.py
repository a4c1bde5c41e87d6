"""A fine-tuned tagger as Hugging Face's ElectraForTokenClassification, and back."""

import json
import os

import numpy as np
import pytest
from finetuning_support import make_pretrained_dir
from transformers_support import needs_transformers, transformers_outputs

from electra_tf.commands.convert import run as convert
from electra_tf.finetuning.saving import load_finetuned

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def trial(tmp_path_factory):
    from electra_tf.artifacts.pretrained import load_discriminator
    from electra_tf.finetuning.saving import save_finetuned
    from electra_tf.finetuning.tagging.data import TaggingDefinition
    from electra_tf.finetuning.tagging.model import build_tagger

    root = tmp_path_factory.mktemp("hf_tagger")
    pretrained = make_pretrained_dir(str(root / "pretrained"))
    model = build_tagger(load_discriminator(pretrained).encoder, 3, seed=5)
    rng = np.random.default_rng(5)
    for variable in model.task_head.weights:
        variable.assign(rng.normal(0, 0.5, variable.shape).astype(np.float32))
    definition = TaggingDefinition(
        "ner", ["O", "B-PER", "I-PER"], "prefix", ("precision", "recall", "f1", "accuracy"), "f1"
    )
    path = str(root / "trial_0")
    save_finetuned(
        model,
        path,
        {
            "kind": "tagger",
            "task": definition.to_dict(),
            "max_seq_length": 16,
            "do_lower_case": True,
            "strip_accents": True,
        },
        os.path.join(pretrained, "vocab.txt"),
    )
    return path


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, 19, size=(2, 7)).astype(np.int32)
    ids[:, 0], ids[0, 6], ids[1, 4] = 2, 3, 3
    mask = np.ones_like(ids)
    mask[1, 5:] = 0
    return {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}


def test_names_shapes_and_config_follow_transformers(trial, tmp_path):
    from safetensors.numpy import load_file

    hf_dir = str(tmp_path / "hf")
    assert convert(["export-hf", trial, hf_dir]) == 0
    state = load_file(os.path.join(hf_dir, "model.safetensors"))
    model, _ = load_finetuned(trial)
    hidden = model.encoder.hidden_size
    # transformers' keys: the head on top of the `electra.` base model, weights [out, in].
    assert state["classifier.weight"].shape == (3, hidden)
    np.testing.assert_array_equal(state["classifier.weight"], model.task_head.kernel.numpy().T)
    np.testing.assert_array_equal(state["classifier.bias"], model.task_head.bias.numpy())
    for key, shape in [
        ("electra.embeddings.word_embeddings.weight", (19, 16)),
        ("electra.embeddings_project.weight", (hidden, 16)),
        ("electra.encoder.layer.1.attention.self.query.weight", (hidden, hidden)),
        ("electra.encoder.layer.1.output.LayerNorm.bias", (hidden,)),
    ]:
        assert state[key].shape == shape, key
    assert not any(k.startswith(("discriminator_predictions", "generator")) for k in state)
    assert all(k.startswith("electra.") or k.startswith("classifier.") for k in state)
    with open(os.path.join(hf_dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    assert config["architectures"] == ["ElectraForTokenClassification"]
    assert config["id2label"] == {"0": "O", "1": "B-PER", "2": "I-PER"}
    assert config["label2id"] == {"O": 0, "B-PER": 1, "I-PER": 2}
    assert os.path.isfile(os.path.join(hf_dir, "vocab.txt"))


@pytest.mark.slow
def test_round_trip_is_exact_and_serves(trial, tmp_path):
    hf_dir, back = str(tmp_path / "hf"), str(tmp_path / "back")
    # A fine-tuning output directory exports its best trial.
    run = tmp_path / "run"
    os.makedirs(run)
    os.symlink(trial, run / "trial_0")
    with open(run / "results.json", "w", encoding="utf-8") as f:
        json.dump(
            {
                "format_version": 2,
                "primary_metric": "f1",
                "trials": [{"trial": 0, "seed": 0, "dev": {"f1": 0.5}}],
            },
            f,
        )
    assert convert(["export-hf", str(run), hf_dir]) == 0
    assert convert(["export-hf", str(run), hf_dir]) == 2  # not empty: refused
    assert convert(["import-hf", hf_dir, back, "--max_seq_length", "12"]) == 0
    original, _ = load_finetuned(trial)
    imported, info = load_finetuned(back)
    inputs = _inputs()
    np.testing.assert_array_equal(np.asarray(imported(inputs)), np.asarray(original(inputs)))
    assert info["kind"] == "tagging" and info["max_seq_length"] == 12
    assert info["task"]["tag_names"] == ["O", "B-PER", "I-PER"]
    assert info["task"]["tag_format"] == "prefix" and info["do_lower_case"] is True
    from electra_tf.serving.exporter import export_checkpoint

    version = export_checkpoint(back, str(tmp_path / "export"), "ner")
    assert os.path.isfile(os.path.join(version, "saved_model.pb"))


def test_classifiers_are_not_written_as_token_classifiers(tmp_path):
    from serving_support import make_trial_dir

    pretrained = make_pretrained_dir(str(tmp_path / "pretrained"))
    classifier = make_trial_dir(str(tmp_path / "classifier"), pretrained)
    assert convert(["export-hf", classifier, str(tmp_path / "hf")]) == 2


@needs_transformers
def test_transformers_gives_the_same_token_logits(trial, tmp_path):
    hf_dir = str(tmp_path / "hf")
    assert convert(["export-hf", trial, hf_dir]) == 0
    inputs = _inputs(1)
    reference = transformers_outputs(hf_dir, inputs, tmp_path)
    assert list(reference["labels"]) == ["O", "B-PER", "I-PER"]
    model, _ = load_finetuned(trial)
    mask = inputs["input_mask"].astype(bool)
    np.testing.assert_allclose(
        np.asarray(model(inputs))[mask], reference["token_logits"][mask], atol=1e-4
    )
