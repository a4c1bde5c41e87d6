"""One saved-model format for every fine-tuned model, and the formats saved before it."""

import json
import os

import keras
import numpy as np
import pytest
from finetuning_support import make_pretrained_dir

from electra_tf.artifacts.export_dir import float32_copy
from electra_tf.artifacts.pretrained import load_discriminator
from electra_tf.finetuning.classification.model import build_classifier
from electra_tf.finetuning.question_answering.model import build_qa_model
from electra_tf.finetuning.saving import load_finetuned, save_finetuned


@pytest.fixture(scope="module")
def pretrained_dir(tmp_path_factory):
    return make_pretrained_dir(str(tmp_path_factory.mktemp("pretrained")))


def _batch():
    ids = np.array([[2, 17, 5, 3, 0], [2, 8, 3, 0, 0]], np.int32)
    return {
        "input_ids": ids,
        "input_mask": (ids != 0).astype(np.int32),
        "segment_ids": np.zeros_like(ids),
    }


def _classifier(pretrained_dir):
    return build_classifier(load_discriminator(pretrained_dir).encoder, 3, seed=3)


def _qa_model(pretrained_dir):
    model = build_qa_model(load_discriminator(pretrained_dir).encoder, beam_size=4, seed=2)
    rng = np.random.default_rng(0)
    for variable in model.task_head.weights:  # wide enough that the beam has no near-ties
        variable.assign(rng.normal(0, 0.3, variable.shape).astype(np.float32))
    return model


def _assert_same_outputs(a, b):
    for name in a:
        np.testing.assert_array_equal(np.asarray(a[name]), np.asarray(b[name]), err_msg=name)


def test_classifier_round_trip(pretrained_dir, tmp_path):
    model = _classifier(pretrained_dir)
    logits = model(_batch(), training=False).numpy()
    vocab = os.path.join(pretrained_dir, "vocab.txt")
    path = save_finetuned(model, str(tmp_path), {"kind": "classifier", "max_seq_length": 16}, vocab)
    assert path == str(tmp_path / "model.json")
    assert sorted(os.listdir(tmp_path)) == ["model.json", "model.weights.h5", "vocab.txt"]
    reloaded, info = load_finetuned(str(tmp_path))
    assert info == {"kind": "classification", "max_seq_length": 16}
    np.testing.assert_array_equal(reloaded(_batch(), training=False).numpy(), logits)


def test_question_answering_round_trip(pretrained_dir, tmp_path):
    model = _qa_model(pretrained_dir)
    outputs = model(_batch())
    save_finetuned(model, str(tmp_path), {"kind": "question_answering", "squad_version": "2.0"})
    reloaded, info = load_finetuned(str(tmp_path))
    assert type(reloaded).__name__ == "ElectraQA" and info["squad_version"] == "2.0"
    assert reloaded.task_head.beam_size == 4
    _assert_same_outputs(reloaded(_batch()), outputs)


def test_classifier_saved_as_model_keras_and_task_json(pretrained_dir, tmp_path):
    model = _classifier(pretrained_dir)
    float32_copy(model).save(str(tmp_path / "model.keras"))
    with open(tmp_path / "task.json", "w", encoding="utf-8") as f:
        json.dump({"task": {"name": "toy"}, "max_seq_length": 16}, f)
    reloaded, info = load_finetuned(str(tmp_path))
    assert info == {"kind": "classification", "task": {"name": "toy"}, "max_seq_length": 16}
    np.testing.assert_array_equal(
        reloaded(_batch(), training=False).numpy(), model(_batch(), training=False).numpy()
    )


def test_squad_model_saved_as_qa_model_json(pretrained_dir, tmp_path):
    """The description then held the encoder config and head sizes beside the weights."""
    model = _qa_model(pretrained_dir)
    run = tmp_path / "run"
    trial = run / "trial_0"
    os.makedirs(trial)
    model.save_weights(str(trial / "model.weights.h5"))
    with open(trial / "qa_model.json", "w", encoding="utf-8") as f:
        json.dump(
            {
                "encoder": keras.saving.serialize_keras_object(model.encoder),
                "beam_size": 4,
                "hidden_units": 512,
                "squad_version": "1.1",
                "max_seq_length": 16,
            },
            f,
        )
    # Its run's settings complete what the oldest descriptions lack.
    with open(run / "results.json", "w", encoding="utf-8") as f:
        json.dump(
            {
                "task": "squad",
                "squad_version": "1.1",
                "trials": [],
                "settings": {"max_answer_length": 7, "null_score_threshold": -1.0},
            },
            f,
        )
    reloaded, info = load_finetuned(str(trial))
    assert info == {
        "kind": "question_answering",
        "squad_version": "1.1",
        "max_seq_length": 16,
        "max_answer_length": 7,
        "null_score_threshold": -1.0,
    }
    _assert_same_outputs(reloaded(_batch()), model(_batch()))


def test_nothing_saved(tmp_path):
    with pytest.raises(FileNotFoundError, match="no fine-tuned model"):
        load_finetuned(str(tmp_path))
