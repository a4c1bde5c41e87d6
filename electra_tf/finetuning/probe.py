"""A linear probe: what a frozen encoder's features tell, without fine-tuning.

The encoder is not trained. Each example becomes the mean of its final
hidden states over its tokens (padding excluded), and a logistic regression
on those features is fitted to the training split. The regularisation
strength is chosen on a tenth of the training split held out, then the model
is refitted on all of it. No dropout and no random initialisation of a head
are involved, so the score carries no fine-tuning noise: two encoders are
compared by what their features separate linearly, in minutes.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from electra_tf.finetuning.classification import features

# Inverse regularisation strengths tried (scikit-learn's C), weakest last.
C_GRID = (0.01, 0.1, 1.0, 10.0, 100.0)
HELD_OUT_FRACTION = 0.1
MAX_ITERATIONS = 2000


def mean_pooled_features(
    encoder, encoded: list, batch_size: int = 64, pad_id: int = 0
) -> np.ndarray:
    """The mean final hidden state of each example's tokens.

    Args:
        encoder: an `ElectraEncoder` (run without dropout).
        encoded: `features.encode` output: (ids, segment ids) per example.
        batch_size: examples per forward pass.
        pad_id: padding id.

    Returns:
        float64 [N, H].
    """

    @tf.function(reduce_retracing=True)
    def pooled(inputs):
        hidden = tf.cast(encoder(inputs, training=False), tf.float32)  # [B, L, H]
        mask = tf.cast(inputs["input_mask"], tf.float32)[:, :, None]  # [B, L, 1]
        return tf.reduce_sum(hidden * mask, axis=1) / tf.reduce_sum(mask, axis=1)

    dataset = features.make_dataset(encoded, None, batch_size, pad_id)
    return np.concatenate([pooled(batch).numpy() for batch in dataset]).astype(np.float64)


@dataclasses.dataclass
class ProbeFit:
    """A fitted probe.

    Attributes:
        predictions: [N_dev] predicted class ids of the dev features.
        c: the regularisation chosen (scikit-learn's C).
        held_out_accuracy: {C: accuracy on the held-out tenth} of every C tried.
    """

    predictions: np.ndarray
    c: float
    held_out_accuracy: dict


def fit_logistic_regression(
    train_x: np.ndarray, train_y: np.ndarray, dev_x: np.ndarray, seed: int = 0, c_grid=C_GRID
) -> ProbeFit:
    """Standardised features -> multinomial logistic regression; C picked on held-out train.

    Args:
        train_x: float [N, H]; train_y: int [N] class ids.
        dev_x: float [M, H] to predict.
        seed: which tenth of the training split is held out.
        c_grid: the C values tried.

    Returns:
        A `ProbeFit`.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    def model(c: float):
        return make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=MAX_ITERATIONS))

    train_y = np.asarray(train_y).reshape(-1)
    order = np.random.default_rng(seed).permutation(len(train_y))
    held = order[: max(1, int(round(HELD_OUT_FRACTION * len(order))))]
    fit = order[len(held) :]
    scores = {}
    for c in c_grid:
        predicted = model(c).fit(train_x[fit], train_y[fit]).predict(train_x[held])
        scores[float(c)] = float(np.mean(predicted == train_y[held]))
    # The strongest regularisation among the best: the simplest model that fits.
    best = min(c for c in scores if scores[c] == max(scores.values()))
    final = model(best).fit(train_x, train_y)
    return ProbeFit(final.predict(dev_x), best, scores)
