"""SQuAD scores as the official evaluation scripts define them (v1.1 and v2.0).

Answers are compared after SQuAD's normalisation: lower case, ASCII
punctuation removed, the English articles a/an/the removed, whitespace
collapsed. Exact match is 1 when the normalised prediction equals a
normalised gold answer; F1 is the bag-of-tokens F1, maximised over the gold
answers. Scores are percentages, as the official scripts print them.

SQuAD 2.0 adds unanswerable questions (gold answer: the empty string) and a
"null odds" per question: the question is predicted unanswerable when its
null odds exceed a threshold. The best threshold is searched by sweeping the
questions in increasing null odds, as the official script does.
"""

from __future__ import annotations

import collections
import re
import string
from typing import Callable, Mapping, Optional, Sequence

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD's answer normalisation."""
    text = "".join(c for c in text.lower() if c not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str, version: str = "1.1") -> float:
    """Token-overlap F1 of one prediction against one gold answer.

    When either side normalises to nothing, v2.0 scores 1 if both do and 0
    otherwise; v1.1 scores 0 (no common tokens), as the respective scripts do.
    """
    predicted, wanted = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if version == "2.0" and (not predicted or not wanted):
        return float(predicted == wanted)
    common = sum((collections.Counter(predicted) & collections.Counter(wanted)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(wanted)
    return 2 * precision * recall / (precision + recall)


def _best_over_gold(prediction: str, golds: Sequence[str], version: str) -> tuple[float, float]:
    golds = [g for g in golds if normalize_answer(g)] if version == "2.0" else list(golds)
    if not golds:
        golds = [""]  # v2.0: an unanswerable question's gold answer
    return (
        max(exact_match(prediction, g) for g in golds),
        max(f1_score(prediction, g, version) for g in golds),
    )


def evaluate_v1(
    gold: Mapping[str, Sequence[str]],
    predictions: Mapping[str, str],
    exact_fn: Optional[Callable[[str, str], float]] = None,
    f1_fn: Optional[Callable[[str, str], float]] = None,
) -> dict:
    """SQuAD 1.1 scores: {"exact_match", "f1"} in percent.

    Args:
        gold: question id -> gold answer texts.
        predictions: question id -> predicted text; a missing id scores 0.
        exact_fn, f1_fn: (prediction, gold) -> score in [0, 1]; default
            SQuAD's. Other datasets' scripts (KorQuAD 1.0, CMRC 2018) total
            their own per-answer scores the same way (`qa_metrics`).
    """
    if not gold:
        raise ValueError("No gold questions to score.")
    em = f1 = 0.0
    for qid, answers in gold.items():
        if qid not in predictions:
            continue
        if exact_fn is None:
            e, f = _best_over_gold(predictions[qid], answers, "1.1")
        else:
            e = max(exact_fn(predictions[qid], g) for g in answers)
            f = max(f1_fn(predictions[qid], g) for g in answers)
        em, f1 = em + e, f1 + f
    return {"exact_match": 100.0 * em / len(gold), "f1": 100.0 * f1 / len(gold)}


def best_threshold(
    raw_scores: Mapping[str, float],
    null_odds: Mapping[str, float],
    has_answer: Mapping[str, bool],
    predictions: Mapping[str, str],
) -> tuple[float, float]:
    """Best score (percent) over no-answer thresholds, and the threshold reaching it.

    Start with every question predicted unanswerable (the unanswerable ones
    score 1), then admit questions in increasing null odds: an answerable
    one adds its raw score, an unanswerable one loses its point when its
    prediction is non-empty. The threshold is the null odds of the last
    question admitted at the best point (0.0 when admitting none is best).
    """
    score = best = float(sum(1 for q in has_answer if not has_answer[q]))
    threshold = 0.0
    for qid in sorted(null_odds, key=lambda q: null_odds[q]):
        if qid not in raw_scores:
            continue
        if has_answer[qid]:
            score += raw_scores[qid]
        elif predictions.get(qid):
            score -= 1.0
        if score > best:
            best, threshold = score, null_odds[qid]
    return 100.0 * best / len(raw_scores), threshold


def evaluate_v2(
    gold: Mapping[str, Sequence[str]],
    predictions: Mapping[str, str],
    null_odds: Optional[Mapping[str, float]] = None,
    threshold: float = 1.0,
) -> dict:
    """SQuAD 2.0 scores as the official script reports them (percent).

    As there, a question "has an answer" when its answer list is not empty
    (even if every answer normalises to nothing), and a question without a
    prediction is left out of every total rather than scored 0.

    Args:
        gold: question id -> gold answer texts (empty for unanswerable ones).
        predictions: question id -> predicted (non-null) text.
        null_odds: question id -> null score; None means all 0.
        threshold: a question whose null odds exceed it is predicted
            unanswerable.

    Returns:
        exact, f1, total, HasAns_exact/f1/total, NoAns_exact/f1/total (for
        the parts present), and with `null_odds` best_exact, best_exact_thresh,
        best_f1, best_f1_thresh.
    """
    if not gold:
        raise ValueError("No gold questions to score.")
    has_answer = {q: bool(answers) for q, answers in gold.items()}
    raw_exact, raw_f1 = {}, {}
    for qid, answers in gold.items():
        if qid in predictions:
            raw_exact[qid], raw_f1[qid] = _best_over_gold(predictions[qid], answers, "2.0")
    if not raw_exact:
        raise ValueError("No prediction for any gold question.")
    odds = dict(null_odds) if null_odds is not None else {q: 0.0 for q in gold}

    def thresholded(raw):
        return {
            qid: float(not has_answer[qid]) if odds.get(qid, 0.0) > threshold else score
            for qid, score in raw.items()
        }

    exact, f1 = thresholded(raw_exact), thresholded(raw_f1)
    results = collections.OrderedDict()

    def add(prefix, qids):
        if qids:
            results[f"{prefix}exact"] = 100.0 * sum(exact[q] for q in qids) / len(qids)
            results[f"{prefix}f1"] = 100.0 * sum(f1[q] for q in qids) / len(qids)
            results[f"{prefix}total"] = len(qids)

    add("", list(exact))
    add("HasAns_", [q for q in exact if has_answer[q]])
    add("NoAns_", [q for q in exact if not has_answer[q]])
    if null_odds is not None:
        results["best_exact"], results["best_exact_thresh"] = best_threshold(
            raw_exact, odds, has_answer, predictions
        )
        results["best_f1"], results["best_f1_thresh"] = best_threshold(
            raw_f1, odds, has_answer, predictions
        )
    return dict(results)
