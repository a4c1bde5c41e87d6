"""Model outputs over windows -> one answer per question, and the official output files.

For each question, candidate spans come from every window's beam (top
starts x top ends per start). A candidate is kept when both ends are
context tokens of the window, the start is scored in that window (the
window where it has maximal context), end >= start and the span has at most
`max_answer_length` tokens. Its score is start log-prob + end log-prob; the
`n_best_size` best are kept and the best one is the prediction. Its text is
the original context between the first token's first character and the last
token's last character.

For SQuAD 2.0 the null odds of a question is the smallest answerability
logit over its windows (the window most confident that an answer exists),
as in the original code.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

import numpy as np

from electra_tf.finetuning.question_answering.features import QAFeatures

N_BEST_SIZE = 20
MAX_ANSWER_LENGTH = 30
# The original code's null-odds threshold for SQuAD 2.0 predictions.
DEFAULT_NULL_THRESHOLD = -2.75


@dataclasses.dataclass
class Candidate:
    text: str
    score: float
    start_char: int
    end_char: int


def decode(
    examples,
    features: QAFeatures,
    outputs: Mapping[str, np.ndarray],
    n_best_size: int = N_BEST_SIZE,
    max_answer_length: int = MAX_ANSWER_LENGTH,
) -> tuple[dict, dict, dict]:
    """Best answer, null odds and n-best list per question.

    Args:
        examples: the `QAExample`s the features were built from.
        features: their windows.
        outputs: the model's prediction outputs over the windows, in order:
            start_top_log_probs [N, K], start_top_index [N, K],
            end_top_log_probs [N, K, K], end_top_index [N, K, K],
            answerable_logit [N].

    Returns:
        (predictions {id: text}, null_odds {id: float},
        nbest {id: [{"text", "probability", "score"}]}). A question with no
        valid candidate predicts the empty string.
    """
    starts_lp, starts = outputs["start_top_log_probs"], outputs["start_top_index"]
    ends_lp, ends = outputs["end_top_log_probs"], outputs["end_top_index"]
    answerable = outputs["answerable_logit"]
    by_example: dict[int, list[int]] = {}
    for f, e in enumerate(features.example_index):
        by_example.setdefault(int(e), []).append(f)
    predictions, null_odds, nbest = {}, {}, {}
    for e, example in enumerate(examples):
        windows = by_example.get(e, [])
        candidates: dict[tuple[int, int], float] = {}
        for f in windows:
            spans, owned = features.token_spans[f], features.max_context[f]
            for i in range(starts.shape[1]):
                s = int(starts[f, i])
                if spans[s, 0] < 0 or not owned[s]:
                    continue
                for j in range(ends.shape[2]):
                    t = int(ends[f, i, j])
                    if spans[t, 0] < 0 or t < s or t - s + 1 > max_answer_length:
                        continue
                    key = (int(spans[s, 0]), int(spans[t, 1]))
                    score = float(starts_lp[f, i] + ends_lp[f, i, j])
                    if score > candidates.get(key, -np.inf):
                        candidates[key] = score
        # The same characters can come from two windows (or, when pieces
        # share a unit's span, from two token pairs): each span is kept once,
        # with its best score.
        ranked = sorted(candidates.items(), key=lambda item: -item[1])[:n_best_size]
        best = [Candidate(example.context[a:b], score, a, b) for (a, b), score in ranked]
        scores = np.array([c.score for c in best])
        probs = np.exp(scores - scores.max()) if best else scores
        probs = probs / probs.sum() if best else probs  # softmax over the n-best
        predictions[example.qas_id] = best[0].text if best else ""
        nbest[example.qas_id] = [
            {
                "text": c.text,
                "probability": float(p),
                "score": c.score,
                "start": c.start_char,
                "end": c.end_char,
            }
            for c, p in zip(best, probs)
        ]
        null_odds[example.qas_id] = float(min(answerable[f] for f in windows)) if windows else 0.0
    return predictions, null_odds, nbest


def apply_null_threshold(
    predictions: Mapping[str, str], null_odds: Mapping[str, float], threshold: float
) -> dict:
    """SQuAD 2.0 submission: the empty string where the null odds exceed `threshold`."""
    return {q: ("" if null_odds[q] > threshold else text) for q, text in predictions.items()}
