"""SQuAD answer normalisation, EM/F1 and the v2.0 threshold search against hand-computed values."""

import pytest

from electra_tf.finetuning.question_answering import decoding as squad_decoding
from electra_tf.finetuning.question_answering.squad_metrics import (
    best_threshold,
    evaluate_v1,
    evaluate_v2,
    exact_match,
    f1_score,
    normalize_answer,
)


def test_normalize_answer():
    assert normalize_answer("The  Quick, brown-fox!") == "quick brownfox"
    assert normalize_answer("An apple a day") == "apple day"
    assert normalize_answer("theatre") == "theatre"  # articles only as whole words
    assert normalize_answer('  "Élan"  ') == "élan"  # non-ASCII letters stay


def test_exact_match_and_f1_by_hand():
    assert exact_match("the Eiffel Tower.", "Eiffel tower") == 1.0
    assert exact_match("Eiffel", "Eiffel Tower") == 0.0
    # prediction tokens [cat, sat, on, mat], gold [cat, sat]: P = 2/4, R = 1.
    assert f1_score("the cat sat on the mat", "a cat sat") == pytest.approx(2 * 0.5 / 1.5)
    # Repeated tokens count with multiplicity: pred [a1, a1, b], gold [a1, b, b]:
    # common = min(2,1) + min(1,2) = 2 -> P = R = 2/3.
    assert f1_score("x x y", "x y y") == pytest.approx(2 / 3)
    assert f1_score("dog", "cat") == 0.0
    assert f1_score("", "the") == 0.0  # v1.1: nothing in common
    assert f1_score("", "the", version="2.0") == 1.0  # v2.0: both empty after normalising


def test_evaluate_v1_takes_the_best_gold_answer():
    gold = {"q1": ["Denver Broncos", "Broncos"], "q2": ["Santa Clara, California"], "q3": ["1990"]}
    predictions = {"q1": "Broncos", "q2": "Santa Clara", "q3": "in 1991"}
    results = evaluate_v1(gold, predictions)
    # q1 exact; q2 F1: [santa, clara] vs [santa, clara, california] = 2*1*(2/3)/(5/3) = 0.8.
    assert results["exact_match"] == pytest.approx(100 / 3)
    assert results["f1"] == pytest.approx(100 * (1 + 0.8 + 0) / 3)


# A tiny SQuAD 2.0 set: q1 and q2 answerable, q3 and q4 not.
GOLD = {"q1": ["Paris"], "q2": ["blue whale"], "q3": [], "q4": []}
PREDICTIONS = {"q1": "Paris", "q2": "whale", "q3": "dog", "q4": "cat"}
NULL_ODDS = {"q1": -3.0, "q2": -1.0, "q3": 2.0, "q4": 0.0}


def test_v2_threshold_search_by_hand():
    # Admitting in increasing odds q1, q2, q4, q3 from a start of 2 (the two
    # unanswerable ones): exact 3, 3, 2, 1 -> best 3/4 at -3.0;
    # F1 (q2 scores 2/3): 3, 3.667, 2.667, 1.667 -> best 3.667/4 at -1.0.
    results = evaluate_v2(GOLD, PREDICTIONS, NULL_ODDS, threshold=1.0)
    assert results["best_exact"] == pytest.approx(75.0)
    assert results["best_exact_thresh"] == -3.0
    assert results["best_f1"] == pytest.approx(100 * (3 + 2 / 3) / 4)
    assert results["best_f1_thresh"] == -1.0
    # Threshold 1.0: only q3 (odds 2.0) is predicted unanswerable (correctly).
    assert results["exact"] == pytest.approx(50.0)  # q1 and q3
    assert results["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1 + 0) / 4)
    assert results["HasAns_exact"] == pytest.approx(50.0) and results["HasAns_total"] == 2
    assert results["HasAns_f1"] == pytest.approx(100 * (1 + 2 / 3) / 2)
    assert results["NoAns_exact"] == pytest.approx(50.0) and results["NoAns_total"] == 2
    # Threshold -2.0: q2, q3, q4 predicted unanswerable -> q1, q3, q4 right.
    assert evaluate_v2(GOLD, PREDICTIONS, NULL_ODDS, threshold=-2.0)["exact"] == pytest.approx(75.0)


def test_best_threshold_admitting_nothing():
    # Every question unanswerable: the best is to predict "no answer" for all.
    score, threshold = best_threshold(
        {"a": 0.0, "b": 0.0}, {"a": 1.0, "b": 2.0}, {"a": False, "b": False}, {"a": "x", "b": "y"}
    )
    assert score == 100.0 and threshold == 0.0


def test_submission_applies_the_threshold():
    submission = squad_decoding.apply_null_threshold(PREDICTIONS, NULL_ODDS, -2.0)
    assert submission == {"q1": "Paris", "q2": "", "q3": "", "q4": ""}


def test_v2_has_answer_follows_the_answer_list_and_missing_predictions_are_not_counted():
    # q5's only answer normalises to nothing ("The"), but the question lists an
    # answer, so it counts as answerable (its gold becomes ""), as in the official
    # script; q6 has no prediction and is left out of every total.
    gold = {"q1": ["Paris"], "q3": [], "q5": ["The"], "q6": ["Rome"]}
    predictions = {"q1": "Paris", "q3": "", "q5": ""}
    results = evaluate_v2(gold, predictions, threshold=1.0)
    assert results["total"] == 3 and results["exact"] == pytest.approx(100.0)
    assert results["HasAns_total"] == 2 and results["NoAns_total"] == 1
    # The same predictions with q5 answered "Paris": q5 scores 0 out of 3 questions.
    results = evaluate_v2(gold, {**predictions, "q5": "Paris"}, threshold=1.0)
    assert results["exact"] == pytest.approx(200 / 3)
    assert results["HasAns_exact"] == pytest.approx(50.0)
