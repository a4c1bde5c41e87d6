"""Fine-tuning metrics against values worked out by hand."""

import math

import numpy as np
import pytest

from electra_tf.finetuning.kind import metrics


def test_accuracy():
    assert metrics.accuracy([0, 1, 1, 0], [0, 1, 0, 0]) == pytest.approx(0.75)


def test_f1_of_positive_class():
    # TP = 2 (positions 0, 4), FP = 1 (position 2), FN = 1 (position 1): P = R = 2/3.
    assert metrics.f1([1, 1, 0, 0, 1], [1, 0, 1, 0, 1]) == pytest.approx(2 / 3)
    # Positive class never predicted nor present: defined as 0.
    assert metrics.f1([0, 0], [0, 0]) == 0.0


def test_mcc_binary():
    # TP 2, TN 2, FP 1, FN 1: (2*2 - 1*1) / sqrt(3*3*3*3) = 3/9.
    assert metrics.matthews_corrcoef([1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 1]) == pytest.approx(1 / 3)
    assert metrics.matthews_corrcoef([1, 0, 1, 0], [1, 0, 1, 0]) == pytest.approx(1.0)
    assert metrics.matthews_corrcoef([1, 0, 1, 0], [0, 1, 0, 1]) == pytest.approx(-1.0)


def test_mcc_degenerate_is_zero():
    assert metrics.matthews_corrcoef([1, 0, 1, 0], [1, 1, 1, 1]) == 0.0
    assert metrics.matthews_corrcoef([0, 0, 0], [1, 0, 1]) == 0.0


def test_mcc_multiclass():
    # 4 of 6 correct, 2 per class on both sides: (4*6 - 12) / (36 - 12) = 0.5.
    assert metrics.matthews_corrcoef([0, 1, 2, 0, 1, 2], [0, 1, 2, 0, 2, 1]) == pytest.approx(0.5)


def test_pearson():
    # dx = (-1, 0, 1), dy = (-4/3, -1/3, 5/3): 3 / sqrt(2 * 42/9) = 9 / sqrt(84).
    assert metrics.pearson([1, 2, 3], [1, 2, 4]) == pytest.approx(9 / math.sqrt(84))
    assert metrics.pearson([1, 2, 3], [5, 5, 5]) == 0.0


def test_average_ranks_with_ties():
    np.testing.assert_allclose(metrics.average_ranks([3, 1, 3, 2]), [3.5, 1, 3.5, 2])
    np.testing.assert_allclose(metrics.average_ranks([7, 7, 7]), [2, 2, 2])


def test_spearman_with_ties():
    # Ranks (1, 2.5, 2.5, 4) vs (1, 2, 3, 4): 4.5 / sqrt(4.5 * 5).
    assert metrics.spearman([1, 2, 2, 3], [10, 20, 30, 40]) == pytest.approx(4.5 / math.sqrt(22.5))
    # Monotone but non-linear: rank correlation 1.
    assert metrics.spearman([1, 2, 3, 4], [1, 8, 27, 64]) == pytest.approx(1.0)


def test_length_mismatch_is_refused():
    with pytest.raises(ValueError, match="differ in length"):
        metrics.accuracy([0, 1], [0])


def test_macro_f1_by_hand():
    labels = [0, 0, 1, 1, 2, 2]
    predictions = [0, 1, 1, 1, 2, 0]
    # Class 0: TP 1, FP 1, FN 1 -> 1/2. Class 1: TP 2, FP 1, FN 0 -> 4/5.
    # Class 2: TP 1, FP 0, FN 1 -> 2/3. Mean: (1/2 + 4/5 + 2/3) / 3.
    assert metrics.macro_f1(labels, predictions) == pytest.approx((0.5 + 0.8 + 2 / 3) / 3)
    # A class only predicted counts (F1 0), as in scikit-learn.
    assert metrics.macro_f1([0, 0], [0, 3]) == pytest.approx((2 / 3 + 0) / 2)
    assert metrics.compute(["macro_f1"], [1, 1], [1, 1]) == {"macro_f1": 1.0}
