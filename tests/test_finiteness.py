"""The record of the first non-finite step, and the refusal of non-finite weights."""

import math

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.finiteness import (
    NonFiniteError,
    NonFiniteRecord,
    NonFiniteStep,
    check_finite_weights,
    gradient_norm,
    nonfinite_weights,
)


def test_the_record_keeps_the_first_non_finite_step_inside_a_graph():
    record = NonFiniteRecord()

    @tf.function
    def step(number, loss, grads):
        record.update(number, loss, gradient_norm(grads))

    finite = [tf.constant([3.0, 4.0]), None]
    step(tf.constant(1, tf.int64), tf.constant(2.0), finite)
    assert record.first() is None
    step(tf.constant(2, tf.int64), tf.constant(2.5), [tf.constant([1.0, np.inf]), None])
    step(tf.constant(3, tf.int64), tf.constant(np.nan), finite)  # later: not recorded
    first = record.first()
    assert first.step == 2 and first.loss == 2.5 and math.isinf(first.gradient_norm)
    assert first.describe() == "step 2: the gradient norm is inf (loss 2.5)"


def test_a_non_finite_loss_is_named_before_the_gradient_norm():
    record = NonFiniteRecord()
    record.update(tf.constant(7, tf.int64), tf.constant(np.nan), tf.constant(np.nan))
    assert record.first().describe() == "step 7: the loss is nan"
    # Without gradients (float16 loss scaling) only the loss counts.
    loss_only = NonFiniteRecord()
    loss_only.update(tf.constant(1, tf.int64), tf.constant(1.0))
    assert loss_only.first() is None
    loss_only.update(tf.constant(2, tf.int64), tf.constant(-np.inf))
    assert loss_only.first() == NonFiniteStep(2, -math.inf, None)


def test_gradient_norm_is_the_global_l2_norm():
    grads = [tf.constant([[3.0, 0.0]]), None, tf.constant([4.0], tf.float16)]
    assert float(gradient_norm(grads)) == pytest.approx(5.0)
    sparse = tf.IndexedSlices(
        tf.constant([[1.0, 2.0], [2.0, 0.0]]), tf.constant([0, 5]), tf.constant([1000, 2])
    )
    assert float(gradient_norm([sparse, tf.constant([4.0])])) == pytest.approx(5.0)


def test_non_finite_weights_are_named_and_refused():
    good = tf.Variable(np.ones((2, 2), np.float32), name="good")
    bad = tf.Variable(np.array([1.0, np.nan], np.float32), name="bad")
    ints = tf.Variable([1, 2], name="ints")
    assert nonfinite_weights([good, ints]) == []
    assert nonfinite_weights([good, bad, ("pair", np.array([np.inf]))]) == ["bad:0", "pair"]
    check_finite_weights([good], "model.keras")
    with pytest.raises(
        NonFiniteError,
        match=r"^model\.keras: 1 of 2 weight tensors hold NaN "
        r"or infinite values \(e\.g\. bad:0\)",
    ):
        check_finite_weights([good, bad], "model.keras")
