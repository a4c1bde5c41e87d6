"""One model on every Keras backend: the same weights give the same outputs on TensorFlow and JAX.

The generator and discriminator are built, loaded with the same weights and run in
one child process per backend (tests/backend_child.py); the reference kernels are the
ones every backend has.
"""

import keras
import numpy as np
import pytest
from backend_support import BATCH, LENGTH, SLOTS, VOCAB, needs_jax, run_on_backends, tiny_config
from backend_support import write_inputs as write_case
from conftest import make_batch

from electra_tf.modeling.kernels import KERNEL_SETS, reference, resolve_kernels

OUTPUTS = ("generator_logits", "discriminator_logits", "sequence_output")


def write_cases(tmp_path, rng, configs):
    cases = []
    for i, config in enumerate(configs):
        case = tmp_path / f"case_{i}"
        case.mkdir()
        write_case("pair", config, make_batch(rng, BATCH, LENGTH, SLOTS, VOCAB), case, seed=i)
        cases.append(case)
    return cases


def assert_same_outputs(result, name):
    tensorflow, jax = result["tensorflow"], result["jax"]
    for output in OUTPUTS:
        assert tensorflow[output].dtype == jax[output].dtype == np.float32
        # Not a comparison of zeros: the outputs vary.
        assert np.std(tensorflow[output]) > 1e-3
        np.testing.assert_allclose(
            jax[output], tensorflow[output], rtol=1e-5, atol=1e-5, err_msg=f"{name}: {output}"
        )


@needs_jax
def test_generator_and_discriminator_agree_on_tensorflow_and_jax(tmp_path, rng):
    (result,) = run_on_backends("pair", write_cases(tmp_path, rng, [tiny_config()]))
    assert result["tensorflow"]["generator_logits"].shape == (BATCH, SLOTS, VOCAB)
    assert result["tensorflow"]["sequence_output"].shape == (BATCH, LENGTH, 32)
    assert_same_outputs(result, "ELECTRA")
    # The model needs no TensorFlow on another backend.
    assert not result["jax"]["imported_tensorflow"]
    assert result["tensorflow"]["imported_tensorflow"]


@needs_jax
@pytest.mark.slow
def test_every_weight_sharing_and_the_cloze_generator_agree_on_tensorflow_and_jax(tmp_path, rng):
    configs = {
        "gdes": tiny_config(weight_sharing="gdes"),
        "none": tiny_config(weight_sharing="none"),
        "all": tiny_config(weight_sharing="all", generator_hidden_fraction=1.0),
        "electric": tiny_config(objective="electric"),
    }
    results = run_on_backends("pair", write_cases(tmp_path, rng, configs.values()))
    for name, result in zip(configs, results):
        assert_same_outputs(result, name)
    # The cloze generator scores every position.
    assert results[-1]["jax"]["generator_logits"].shape == (BATCH, LENGTH, VOCAB)


def test_the_tensorflow_only_kernels_are_chosen_on_tensorflow_only(monkeypatch):
    # This process runs TensorFlow: both sets, and auto picks cpu_fast on a CPU.
    assert keras.backend.backend() == "tensorflow"
    assert set(KERNEL_SETS) == {"reference", "cpu_fast"}
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    assert resolve_kernels("auto") == "reference"
    assert resolve_kernels("reference") == "reference"
    with pytest.raises(ValueError, match="kernels='cpu_fast' is written in TensorFlow.*'jax'"):
        resolve_kernels("cpu_fast")
    assert KERNEL_SETS["reference"] is reference
