import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.optimization import AdamWeightDecay, WarmupLinearDecay


@pytest.mark.parametrize(
    "step, expected",
    [
        (0, 0.0),
        (5, 1e-3 * (1 - 5 / 100) * 0.5),  # warmup multiplies the decaying rate
        (10, 1e-3 * (1 - 10 / 100)),
        (55, 1e-3 * (1 - 55 / 100)),
        (100, 0.0),
        (150, 0.0),
    ],
)
def test_warmup_times_linear_decay(step, expected):
    schedule = WarmupLinearDecay(1e-3, num_train_steps=100, num_warmup_steps=10)
    assert float(schedule(step)) == pytest.approx(expected, rel=1e-6, abs=1e-12)


def _np_adam_no_bias_correction(
    params, grads_seq, lr, wd, clip, decay_mask, b1=0.9, b2=0.999, eps=1e-6
):
    params = [p.astype(np.float64).copy() for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for grads in grads_seq:
        grads = [g.astype(np.float64) for g in grads]
        norm = np.sqrt(sum((g**2).sum() for g in grads))
        if clip and norm > clip:
            grads = [g * clip / norm for g in grads]
        for i, g in enumerate(grads):
            if decay_mask[i]:
                params[i] -= lr * wd * params[i]  # decoupled, on the pre-update value
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            params[i] -= lr * m[i] / (np.sqrt(v[i]) + eps)
    return params


def test_adam_weight_decay_matches_the_original_update(rng):
    kernel = keras.Variable(rng.normal(size=(3, 2)).astype(np.float32), name="kernel")
    bias = keras.Variable(rng.normal(size=(2,)).astype(np.float32), name="bias")
    gamma = keras.Variable(rng.normal(size=(2,)).astype(np.float32), name="gamma")
    variables = [kernel, bias, gamma]
    start = [v.numpy() for v in variables]
    optimizer = AdamWeightDecay(learning_rate=0.1, weight_decay=0.05, global_clipnorm=1.0)
    grads_seq = [
        [rng.normal(size=v.shape).astype(np.float32) * 3 for v in variables] for _ in range(3)
    ]
    for grads in grads_seq:
        optimizer.apply([tf.constant(g) for g in grads], variables)
    expected = _np_adam_no_bias_correction(
        start, grads_seq, 0.1, 0.05, 1.0, decay_mask=[True, False, False]
    )
    for var, exp in zip(variables, expected):
        np.testing.assert_allclose(var.numpy(), exp, rtol=1e-5, atol=1e-6)
