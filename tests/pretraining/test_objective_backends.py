"""The pre-training objectives on every Keras backend: the same losses and gradients on TF and JAX.

Each objective is built, loaded with the same weights and evaluated on the same batch
in one child process per backend (tests/backend_child.py). The batch fixes the masked
positions and, through its `sampling_uniforms`, the generator's samples, so both
backends corrupt the sequence identically; without dropout a training step draws no
other noise.
"""

import numpy as np
import pytest
from backend_support import BATCH, LENGTH, SLOTS, VOCAB, needs_jax, run_on_backends, tiny_config
from backend_support import write_inputs as write_case
from conftest import make_batch

LOSSES = ("generator_loss", "discriminator_loss", "total_loss")


def write_cases(tmp_path, rng, configs):
    cases = []
    for i, config in enumerate(configs):
        case = tmp_path / f"case_{i}"
        case.mkdir()
        write_case("objective", config, make_batch(rng, BATCH, LENGTH, SLOTS, VOCAB), case, seed=i)
        cases.append(case)
    return cases


def assert_same_evaluation(result, name):
    tensorflow, jax = result["tensorflow"], result["jax"]
    # The same samples, hence the same corrupted sequence and labels.
    ids_computed = [ids for ids in ("sampled_ids", "fake_ids", "labels") if ids in tensorflow]
    for ids in ids_computed:
        np.testing.assert_array_equal(jax[ids], tensorflow[ids], err_msg=f"{name}: {ids}")
    sums = sorted(key for key in tensorflow if key.startswith("sums/"))
    assert sums == sorted(key for key in jax if key.startswith("sums/"))
    losses = [loss for loss in LOSSES if loss in tensorflow]
    assert "total_loss" in losses
    for key in (*losses, *sums):
        np.testing.assert_allclose(
            jax[key], tensorflow[key], rtol=1e-5, atol=1e-5, err_msg=f"{name}: {key}"
        )
    assert list(jax["grad_paths"]) == list(tensorflow["grad_paths"])
    grads = [key for key in tensorflow if key.startswith("grad/")]
    assert len(grads) == len(tensorflow["grad_paths"])
    for key in grads:
        assert jax[key].shape == tensorflow[key].shape
        np.testing.assert_allclose(
            jax[key],
            tensorflow[key],
            rtol=1e-4,
            atol=1e-4,
            err_msg=f"{name}: gradient of {tensorflow['grad_paths'][int(key[5:])]}",
        )


@needs_jax
@pytest.mark.slow  # about 15 s of CPU: the JAX child imports TensorFlow through the train step
def test_electras_losses_and_gradients_agree_on_tensorflow_and_jax(tmp_path, rng):
    config = tiny_config()
    assert config.gen_weight == 1
    (result,) = run_on_backends("objective", write_cases(tmp_path, rng, [config]))
    tensorflow = result["tensorflow"]
    assert set(LOSSES) <= set(tensorflow)
    # Samples were drawn and some differ from the original: the discriminator has both labels.
    assert 0 < tensorflow["labels"].sum() < tensorflow["sums/counts/tokens"]
    assert np.isclose(
        tensorflow["total_loss"],
        tensorflow["generator_loss"] + config.disc_weight * tensorflow["discriminator_loss"],
        rtol=1e-6,
    )
    # Every variable gets a gradient, the generator's and the discriminator's.
    assert all(
        np.abs(tensorflow[f"grad/{i}"]).max() > 0 for i in range(len(tensorflow["grad_paths"]))
    )
    assert_same_evaluation(result, "electra")


@needs_jax
@pytest.mark.slow
def test_every_objective_and_training_agrees_on_tensorflow_and_jax(tmp_path, rng):
    configs = {
        "mlm": tiny_config(objective="mlm"),
        "electra_15": tiny_config(objective="electra_15"),
        "replace_mlm": tiny_config(objective="replace_mlm"),
        "all_tokens_mlm": tiny_config(objective="all_tokens_mlm"),
        "electric": tiny_config(objective="electric"),
        "adversarial": tiny_config(training="adversarial"),
        "gdes": tiny_config(weight_sharing="gdes"),
        "disallow_correct": tiny_config(disallow_correct=True, temperature=0.5),
    }
    results = run_on_backends("objective", write_cases(tmp_path, rng, configs.values()))
    for name, result in zip(configs, results):
        assert_same_evaluation(result, name)
