"""Evaluation metrics of the GLUE tasks, in plain NumPy.

Every function takes 1-D arrays of equal length and returns a Python float in
the metric's natural range (accuracy and F1 in [0, 1], correlations in
[-1, 1]); callers scale to percent for display.
"""

from __future__ import annotations

import numpy as np


def _pair(labels, predictions, dtype=None) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(labels, dtype=dtype).reshape(-1)
    p = np.asarray(predictions, dtype=dtype).reshape(-1)
    if y.shape != p.shape:
        raise ValueError(f"labels and predictions differ in length: {y.size} vs {p.size}")
    if y.size == 0:
        raise ValueError("no examples to score")
    return y, p


def accuracy(labels, predictions) -> float:
    """Fraction of predictions equal to the label.

    Args:
        labels: [N] class ids.
        predictions: [N] predicted class ids.
    """
    y, p = _pair(labels, predictions)
    return float(np.mean(y == p))


def f1(labels, predictions, positive: int = 1) -> float:
    """Binary F1 of the `positive` class (0 when it is never predicted nor present).

    Args:
        labels: [N] class ids.
        predictions: [N] predicted class ids.
        positive: the class whose precision and recall are combined.
    """
    y, p = _pair(labels, predictions)
    tp = float(np.sum((p == positive) & (y == positive)))
    fp = float(np.sum((p == positive) & (y != positive)))
    fn = float(np.sum((p != positive) & (y == positive)))
    # 2TP / (2TP + FP + FN) equals 2PR / (P + R) and needs no special case
    # when precision or recall alone is undefined.
    denominator = 2.0 * tp + fp + fn
    return 2.0 * tp / denominator if denominator else 0.0


def matthews_corrcoef(labels, predictions) -> float:
    """Matthews correlation coefficient (multi-class form, Gorodkin 2004).

    Returns 0 when it is undefined: all predictions (or all labels) in one
    class, which is also what scikit-learn reports.

    Args:
        labels: [N] class ids.
        predictions: [N] predicted class ids.
    """
    y, p = _pair(labels, predictions)
    classes = np.union1d(y, p)
    index_y = np.searchsorted(classes, y)
    index_p = np.searchsorted(classes, p)
    k = len(classes)
    confusion = np.zeros((k, k), dtype=np.float64)
    np.add.at(confusion, (index_y, index_p), 1.0)
    true_per_class = confusion.sum(axis=1)
    predicted_per_class = confusion.sum(axis=0)
    n = confusion.sum()
    correct = np.trace(confusion)
    covariance = correct * n - float(np.dot(true_per_class, predicted_per_class))
    variance_p = n * n - float(np.dot(predicted_per_class, predicted_per_class))
    variance_y = n * n - float(np.dot(true_per_class, true_per_class))
    if variance_p == 0.0 or variance_y == 0.0:
        return 0.0
    return float(covariance / np.sqrt(variance_p * variance_y))


def pearson(labels, predictions) -> float:
    """Pearson correlation (0 when either side is constant).

    Args:
        labels: [N] reference scores.
        predictions: [N] predicted scores.
    """
    y, p = _pair(labels, predictions, dtype=np.float64)
    dy, dp = y - y.mean(), p - p.mean()
    denominator = np.sqrt(np.sum(dy * dy) * np.sum(dp * dp))
    return float(np.sum(dy * dp) / denominator) if denominator > 0 else 0.0


def average_ranks(values) -> np.ndarray:
    """1-based ranks; tied values share the mean of the ranks they span.

    Args:
        values: [N] numbers.

    Returns:
        float64 [N] ranks.
    """
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    ranks = np.empty(len(values), dtype=np.float64)
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        # Positions start..end (0-based) hold ranks start+1..end+1; ties get their mean.
        ranks[order[start : end + 1]] = (start + end) / 2.0 + 1.0
        start = end + 1
    return ranks


def spearman(labels, predictions) -> float:
    """Spearman rank correlation: Pearson of the average ranks.

    Args:
        labels: [N] reference scores.
        predictions: [N] predicted scores.
    """
    y, p = _pair(labels, predictions, dtype=np.float64)
    return pearson(average_ranks(y), average_ranks(p))


def macro_f1(labels, predictions) -> float:
    """Unweighted mean of every class's F1 (one class against the rest).

    The classes are those present in the labels or the predictions, as in
    scikit-learn's `f1_score(average="macro")`.

    Args:
        labels: [N] class ids.
        predictions: [N] predicted class ids.
    """
    y, p = _pair(labels, predictions)
    return float(np.mean([f1(y, p, positive=c) for c in np.union1d(y, p)]))


def f1_at_3(labels, predictions) -> float:
    """KLUE-STS's F1: binary F1 of "similar" (a score of 3 or more) between the 0-5 scores.

    Args:
        labels: [N] reference scores.
        predictions: [N] predicted scores.
    """
    y, p = _pair(labels, predictions, dtype=np.float64)
    return f1((y >= 3.0).astype(np.int64), (p >= 3.0).astype(np.int64))


METRIC_FUNCTIONS = {
    "accuracy": accuracy,
    "f1": f1,
    "f1_at_3": f1_at_3,
    "macro_f1": macro_f1,
    "mcc": matthews_corrcoef,
    "pearson": pearson,
    "spearman": spearman,
}


def compute(names, labels, predictions) -> dict[str, float]:
    """Computes the metrics named in `names` (keys of `METRIC_FUNCTIONS`)."""
    return {name: METRIC_FUNCTIONS[name](labels, predictions) for name in names}
