"""KLUE-DP's scores: UAS and LAS, each as macro and micro F1, as KLUE-baseline computes them.

KLUE-baseline (`klue_baseline/metrics/functional.py`, `klue_dp_*_f1`)
scores the words the model saw, all sentences together, with
scikit-learn's `f1_score`:

* UAS: the predicted HEAD of each word against the gold one, every HEAD
  value (0 for the root, 1, 2, ... for the words) a class of its own.
  Macro F1 is the unweighted mean of the F1 of every class present in the
  gold or the predicted heads; micro F1 is the fraction of heads right.
* LAS: the labels, after two changes. First, every label from the 16th of
  KLUE's list on (`VP_CMP` ... `NP_SVJ`, index >= `KEPT_LABELS`) becomes
  one class, "others" — gold and predicted alike, so confusing two of them
  counts as right. Then a word whose predicted HEAD is wrong gets the
  predicted label "wrong head", a class no gold label has. Macro F1 over
  the classes present in either (the "wrong head" class, when present,
  scores 0 and is averaged in); micro F1 is the fraction of words with the
  right head and the right (merged) label.

Scores are fractions in [0, 1] (KLUE-baseline multiplies by 100).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from electra_tf.finetuning.kind.metrics import accuracy, macro_f1

# Labels from this index of `data.DEPREL_LABELS` on are one class in LAS.
KEPT_LABELS = 15
# KLUE-baseline's class ids for the merged labels and for a wrong head.
OTHERS = -3
WRONG_HEAD = -2
METRICS = ("uas_macro_f1", "uas_micro_f1", "las_macro_f1", "las_micro_f1")


def klue_dp_scores(gold_heads, gold_labels, predicted_heads, predicted_labels) -> dict[str, float]:
    """KLUE's four scores of the words given.

    Args:
        gold_heads, predicted_heads: int [N] HEAD of each word (0: root).
        gold_labels, predicted_labels: int [N] label ids (indices of
            `data.DEPREL_LABELS`; a predicted label is not read where the
            predicted head is wrong).

    Returns:
        {metric: fraction} for each of `METRICS`.
    """
    gold_heads = np.asarray(gold_heads, np.int64).reshape(-1)
    predicted_heads = np.asarray(predicted_heads, np.int64).reshape(-1)
    gold = np.asarray(gold_labels, np.int64).reshape(-1)
    predicted = np.asarray(predicted_labels, np.int64).reshape(-1)
    gold = np.where(gold >= KEPT_LABELS, OTHERS, gold)
    predicted = np.where(predicted >= KEPT_LABELS, OTHERS, predicted)
    predicted = np.where(predicted_heads == gold_heads, predicted, WRONG_HEAD)
    return {
        "uas_macro_f1": macro_f1(gold_heads, predicted_heads),
        "uas_micro_f1": accuracy(gold_heads, predicted_heads),
        "las_macro_f1": macro_f1(gold, predicted),
        "las_micro_f1": accuracy(gold, predicted),
    }


def score_sentences(
    gold_heads: Sequence[Sequence[int]],
    gold_labels: Sequence[Sequence[int]],
    predicted_heads: Sequence[Sequence[int]],
    predicted_labels: Sequence[Sequence[Optional[int]]],
) -> dict[str, float]:
    """KLUE's scores of sentences, over the words that have a gold and a predicted head.

    A word without a predicted head (-1) is one the model did not see (its
    first piece was past `max_seq_length`): KLUE-baseline leaves those out
    (its features keep the words of the first `max_seq_length` pieces), and
    so does this. A word without a gold head (-1) is not scored either.

    Args:
        gold_heads, predicted_heads: per sentence, each word's HEAD (-1: none).
        gold_labels, predicted_labels: per sentence, each word's label id
            (-1 or None: none).

    Raises:
        ValueError: no word is scored.
    """
    rows = [
        (gh, gl, ph, -1 if pl is None else pl)
        for sentence in zip(gold_heads, gold_labels, predicted_heads, predicted_labels)
        for gh, gl, ph, pl in zip(*sentence)
        if gh >= 0 and ph >= 0
    ]
    if not rows:
        raise ValueError("no word has both a gold and a predicted head")
    return klue_dp_scores(*np.asarray(rows, np.int64).T)
