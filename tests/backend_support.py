"""Runs tests/backend_child.py on several Keras backends with the same weights and batch.

The weights are made here (this process's backend builds the model, then every weight
is perturbed with NumPy noise, so biases and LayerNorm parameters are not their
initial zeros and ones), written to a file, and read by one child process per backend,
started together; tests marked `needs_jax` are skipped where JAX is not installed.
"""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "backend_child.py")
ROOT = os.path.dirname(os.path.dirname(CHILD))

# Small enough that a child builds and runs a case in a few seconds.
VOCAB, LENGTH, SLOTS, BATCH = 300, 12, 4, 3


def tiny_config(**overrides):
    """A two-layer model without dropout (so a training step draws no noise), reference kernels."""
    from electra_tf.config import preset

    values = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        num_layers=2,
        embedding_size=16,
        generator_hidden_fraction=0.5,
        num_heads=2,
        max_seq_length=LENGTH,
        max_predictions_per_seq=SLOTS,
        dropout_rate=0.0,
        attention_dropout_rate=0.0,
        kernels="reference",
    )
    values.update(overrides)
    config = preset("tiny", **values)
    config.validate()
    return config


needs_jax = pytest.mark.skipif(
    importlib.util.find_spec("jax") is None,
    reason="needs JAX (pip install the jax[cpu] of requirements.txt)",
)


def write_inputs(mode: str, config, batch: dict, scratch, seed: int = 0) -> None:
    """Writes config.json, batch.npz and weights.npz of `mode` into the directory `scratch`."""
    import keras
    from backend_child import build

    keras.utils.set_random_seed(seed)
    _, _, weights = build(mode, config, batch)
    rng = np.random.default_rng(seed)
    values = [
        np.asarray(v.numpy()) + (0.05 * rng.standard_normal(v.shape)).astype(v.dtype)
        if v.trainable
        else np.asarray(v.numpy())
        for v in weights.variables
    ]
    weights.save(os.path.join(scratch, "weights.npz"), values)
    np.savez(os.path.join(scratch, "batch.npz"), **batch)
    with open(os.path.join(scratch, "config.json"), "w") as f:
        json.dump(config.to_dict(), f)


def run_on_backends(mode: str, cases, backends=("tensorflow", "jax")) -> list:
    """What backend_child.py computed in `mode` on each case directory (see `write_inputs`).

    The children, one per backend, run at the same time, each with KERAS_BACKEND set.

    Returns:
        [{backend: {name: array}} for each case].
    """
    children = {}
    for backend in backends:
        env = {
            **os.environ,
            "KERAS_BACKEND": backend,
            "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]),
            "JAX_PLATFORMS": "cpu",
            # Each weight's initializer is compiled on its own, and the weights are then
            # replaced: LLVM's optimisations of those (and of the one step) took a third
            # of the child's time.
            "XLA_FLAGS": "--xla_backend_optimization_level=0",
        }
        children[backend] = subprocess.Popen(
            [sys.executable, CHILD, mode, f"{backend}.npz", *map(str, cases)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    for backend, child in children.items():
        output, _ = child.communicate(timeout=600)
        assert child.returncode == 0, f"the {backend} child failed:\n{output[-4000:]}"
    return [
        {backend: dict(np.load(os.path.join(case, f"{backend}.npz"))) for backend in backends}
        for case in cases
    ]
