"""Files written by earlier code load with the current code and compute what they computed.

`fixtures/saved_models/` was written by `fixtures/make_saved_models.py` at
commit 9a5bdee, when the layers read a process-wide kernel choice and used a
project `Dense` and GELU: a pre-training checkpoint (model, optimizer, dropout
seeds), `.keras` discriminator and generator files and a fine-tuned
classifier, with `expected.npz` holding the outputs that code computed.
"""

import dataclasses
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from fixtures.make_saved_models import batch, config, inputs, outputs

from electra_tf.finetuning.saving import load_finetuned
from electra_tf.pretraining.objectives import ElectraPretrainer
from electra_tf.pretraining.optimization import create_optimizer

SAVED = os.path.join(os.path.dirname(__file__), "..", "fixtures", "saved_models")


@pytest.fixture(scope="module")
def expected():
    with np.load(os.path.join(SAVED, "expected.npz")) as data:
        return dict(data)


def assert_outputs(actual: dict, expected: dict) -> None:
    for name, value in actual.items():
        np.testing.assert_allclose(value, expected[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_keras_files_load_and_give_the_same_outputs(expected):
    discriminator = keras.saving.load_model(os.path.join(SAVED, "discriminator.keras"))
    generator = keras.saving.load_model(os.path.join(SAVED, "generator.keras"))
    assert discriminator.encoder.kernels == generator.encoder.kernels == "reference"
    assert_outputs(outputs(generator, discriminator, batch()), expected)


def test_a_fine_tuned_classifier_loads_and_gives_the_same_logits(expected):
    model, info = load_finetuned(os.path.join(SAVED, "classifier"))
    assert info["kind"] == "classification"  # saved as "classifier", the kind's name then
    np.testing.assert_allclose(
        model(inputs(batch()), training=False).numpy(),
        expected["classifier_logits"],
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.parametrize("kernels", ["reference", "cpu_fast"])
def test_a_pretraining_checkpoint_restores_every_variable_under_either_set(expected, kernels):
    model = ElectraPretrainer(dataclasses.replace(config(), kernels=kernels))
    model.build_from_batch(batch())
    optimizer = create_optimizer(model.config)
    optimizer.build(model.trainable_variables)
    rng_state = [v for v in model.non_trainable_variables if "seed_generator" in v.path]
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, rng_state=rng_state)
    # Every variable of the checkpoint has its place in the model, and every
    # variable of the model and optimizer is in the checkpoint.
    status = checkpoint.read(os.path.join(SAVED, "checkpoint", "ckpt"))
    status.assert_consumed()
    assert int(optimizer.iterations.numpy()) == int(expected["step"]) == 1
    assert_outputs(outputs(model.generator, model.discriminator, batch()), expected)
