"""Pieces of the JAX train step that run without the JAX backend."""

import numpy as np
import pytest

pytest.importorskip("jax")

from electra_tf.modeling.jax_train_step import micro_batches  # noqa: E402


def test_micro_batches_take_every_kth_row_and_cover_the_batch_once():
    batch = {"ids": np.arange(12).reshape(6, 2), "mask": np.arange(6)}
    parts = micro_batches(batch, 3)
    assert np.asarray(parts["mask"]).tolist() == [[0, 3], [1, 4], [2, 5]]
    np.testing.assert_array_equal(parts["ids"][1], [[2, 3], [8, 9]])
    assert parts["ids"].shape == (3, 2, 2)
