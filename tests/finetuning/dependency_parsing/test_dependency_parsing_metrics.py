"""KLUE-DP's UAS and LAS macro and micro F1: hand-computed examples and KLUE-baseline's recipe."""

import numpy as np
import pytest
from sklearn.metrics import f1_score

from electra_tf.finetuning.dependency_parsing.data import DEPREL_LABELS
from electra_tf.finetuning.dependency_parsing.metrics import klue_dp_scores, score_sentences

ID = {label: i for i, label in enumerate(DEPREL_LABELS)}


def test_one_sentence_worked_by_hand():
    gold_heads, predicted_heads = [2, 0, 2, 2], [2, 0, 1, 2]
    gold = [ID["NP_SBJ"], ID["VP"], ID["NP_OBJ"], ID["VP_CMP"]]
    predicted = [ID["NP_SBJ"], ID["VP"], ID["NP_OBJ"], ID["X"]]
    scores = klue_dp_scores(gold_heads, gold, predicted_heads, predicted)
    # UAS: classes are the head values 0, 1, 2 (gold or predicted).
    #   0: gold {w2}, predicted {w2}: F1 1.  1: predicted {w3}, never gold: F1 0.
    #   2: gold {w1, w3, w4}, predicted {w1, w4}: 2TP / (2TP + FP + FN) = 4 / 5.
    assert scores["uas_macro_f1"] == pytest.approx((1 + 0 + 0.8) / 3)
    assert scores["uas_micro_f1"] == pytest.approx(3 / 4)
    # LAS: VP_CMP and X are both past KLUE's 15 kept labels: one class, so w4 is right.
    # w3's head is wrong: its label becomes "wrong head". Classes: others, wrong head,
    # VP, NP_SBJ, NP_OBJ with F1 1, 0, 1, 1, 0 (NP_OBJ is never predicted).
    assert scores["las_macro_f1"] == pytest.approx(3 / 5)
    assert scores["las_micro_f1"] == pytest.approx(3 / 4)


def test_words_the_model_did_not_see_are_left_out_as_klue_baseline_does():
    gold_heads = [[0], [3, 3, 0]]
    gold_labels = [[ID["VP"]], [ID["NP_SBJ"], ID["NP_OBJ"], ID["VP"]]]
    # The last two words of the second sentence were past max_seq_length: no prediction.
    predicted_heads = [[0], [3, -1, -1]]
    predicted_labels = [[ID["VP"]], [ID["NP"], None, -1]]
    scores = score_sentences(gold_heads, gold_labels, predicted_heads, predicted_labels)
    # Two words scored: heads 0 and 3 both right (two classes, F1 1 each).
    assert scores["uas_macro_f1"] == 1.0 and scores["uas_micro_f1"] == 1.0
    # Labels VP/VP right; NP_SBJ gold, NP predicted: classes NP (0), VP (1), NP_SBJ (0).
    assert scores["las_macro_f1"] == pytest.approx(1 / 3)
    assert scores["las_micro_f1"] == pytest.approx(1 / 2)
    with pytest.raises(ValueError, match="no word"):
        score_sentences([[1]], [[0]], [[-1]], [[None]])


def _klue_baseline(gold_heads, gold_types, predicted_heads, predicted_types):
    """KLUE-baseline's `klue_dp_*_f1` steps on flat arrays, with scikit-learn (x 1/100)."""
    gold_types, predicted_types = np.array(gold_types), np.array(predicted_types)
    for types in (gold_types, predicted_types):
        types[types >= 15] = -3
    predicted_types[np.asarray(predicted_heads) != np.asarray(gold_heads)] = -2
    return {
        "uas_macro_f1": f1_score(gold_heads, predicted_heads, average="macro"),
        "uas_micro_f1": f1_score(gold_heads, predicted_heads, average="micro"),
        "las_macro_f1": f1_score(gold_types, predicted_types, average="macro"),
        "las_micro_f1": f1_score(gold_types, predicted_types, average="micro"),
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_parses_score_as_scikit_learn_scores_them_in_klue_baseline_s_steps(seed):
    rng = np.random.default_rng(seed)
    n = 400
    gold_heads = rng.integers(0, 12, n)
    gold_types = rng.integers(0, len(DEPREL_LABELS), n)
    # Mostly right, so that every kind of class (right, wrong, merged) occurs.
    predicted_heads = np.where(rng.random(n) < 0.7, gold_heads, rng.integers(0, 14, n))
    predicted_types = np.where(rng.random(n) < 0.6, gold_types, rng.integers(0, 38, n))
    ours = klue_dp_scores(gold_heads, gold_types, predicted_heads, predicted_types)
    reference = _klue_baseline(gold_heads, gold_types, predicted_heads, predicted_types)
    assert ours == pytest.approx(reference, abs=1e-12)
