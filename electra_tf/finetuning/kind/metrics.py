"""Evaluation metrics of the GLUE tasks (and KLUE's classification tasks), in plain NumPy.

Every function takes 1-D arrays of equal length and returns a Python float in
the metric's natural range (accuracy and F1 in [0, 1], correlations in
[-1, 1]); callers scale to percent for display. The metrics of
`PROBABILITY_METRICS` take the class probabilities [N, C] in place of the
predicted class ids.
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


def relation_micro_f1(labels, predictions) -> float:
    """KLUE-RE's F1: micro-averaged over every class but class 0 (`no_relation`).

    As `klue_re_micro_f1` (scikit-learn's `f1_score(average="micro")` over
    the labels other than `no_relation`, which KLUE's relation_list.json
    puts first): an example counts as a true positive when its relation is
    found, a false positive when a relation other than its own is predicted,
    a false negative when its relation is missed; 0 when nothing counts.

    Args:
        labels: [N] class ids (0: no relation).
        predictions: [N] predicted class ids.
    """
    y, p = _pair(labels, predictions)
    tp = float(np.sum((p == y) & (y != 0)))
    fp = float(np.sum((p != y) & (p != 0)))
    fn = float(np.sum((p != y) & (y != 0)))
    denominator = 2.0 * tp + fp + fn
    return 2.0 * tp / denominator if denominator else 0.0


def _precision_recall_area(targets: np.ndarray, scores: np.ndarray) -> float:
    """The trapezoidal area under one class's precision-recall curve.

    The curve's points are those of scikit-learn's `precision_recall_curve`
    (one per distinct score, from the highest, plus recall 0 at precision
    1); the area is `auc`'s. With no positive example recall is 1 at every
    threshold (scikit-learn since 1.1), and the area 0.5.
    """
    order = np.argsort(scores, kind="mergesort")[::-1]
    sorted_scores, hits = scores[order], targets[order]
    # The last position of every distinct score: the points of the curve.
    last = np.r_[np.flatnonzero(np.diff(sorted_scores)), len(sorted_scores) - 1]
    true_positives = np.cumsum(hits)[last]
    precision = true_positives / (last + 1.0)
    total = true_positives[-1]
    recall = true_positives / total if total else np.ones_like(precision)
    precision, recall = np.r_[1.0, precision], np.r_[0.0, recall]
    return float(np.sum(np.diff(recall) * (precision[1:] + precision[:-1]) / 2.0))


def auprc(labels, probabilities) -> float:
    """KLUE-RE's AUPRC: the mean over every class of the area under its precision-recall curve.

    As `klue_re_auprc`: each class's probability ranks the examples against
    "the label is this class" (`precision_recall_curve`), the area is the
    trapezoidal one (`auc`, not `average_precision_score`'s steps), and the
    classes' areas are averaged unweighted, `no_relation` included.

    Args:
        labels: [N] class ids.
        probabilities: [N, C] every class's probability.
    """
    y = np.asarray(labels).reshape(-1)
    scores = np.asarray(probabilities, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[0] != y.size:
        raise ValueError(f"probabilities of shape {scores.shape} for {y.size} labels")
    if y.size == 0:
        raise ValueError("no examples to score")
    return float(
        np.mean([_precision_recall_area(y == c, scores[:, c]) for c in range(scores.shape[1])])
    )


METRIC_FUNCTIONS = {
    "accuracy": accuracy,
    "f1": f1,
    "f1_at_3": f1_at_3,
    "macro_f1": macro_f1,
    "mcc": matthews_corrcoef,
    "pearson": pearson,
    "relation_micro_f1": relation_micro_f1,
    "spearman": spearman,
}
# Metrics of the class probabilities [N, C] rather than the predicted class ids.
PROBABILITY_METRICS = {"auprc": auprc}


def compute(names, labels, predictions, probabilities=None) -> dict[str, float]:
    """Computes the metrics named in `names` (keys of `METRIC_FUNCTIONS` and `PROBABILITY_METRICS`).

    Args:
        names: the metrics.
        labels: [N] class ids or scores.
        predictions: [N] predicted class ids or scores.
        probabilities: [N, C] class probabilities, for `PROBABILITY_METRICS`.
    """
    scores = {}
    for name in names:
        if name in PROBABILITY_METRICS:
            if probabilities is None:
                raise ValueError(f"{name} needs the class probabilities")
            scores[name] = PROBABILITY_METRICS[name](labels, probabilities)
        else:
            scores[name] = METRIC_FUNCTIONS[name](labels, predictions)
    return scores
