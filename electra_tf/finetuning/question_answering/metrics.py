"""Question-answering scores per dataset, as each official evaluation script defines them.

* `squad`: SQuAD 1.1 / 2.0 (`squad_metrics`): English normalisation, bag of
  words F1; 2.0 adds unanswerable questions and the threshold search.
* `korquad`: KorQuAD 1.0's script. Normalisation replaces the quotes and
  brackets ' " 《 》 < > 〈 〉 ( ) ‘ ’ by spaces, lower-cases, removes ASCII
  punctuation and collapses whitespace (no article removal). Exact match
  compares normalised strings; F1 is computed over the *characters* of the
  normalised answer, spaces left out: `서울에서` against `서울` scores 2/3.
* `cmrc2018`: CMRC 2018's script (v5). Text is lower-cased, stripped and cut
  by "mixed segmentation": every CJK ideograph (U+4E00-U+9FA5) and every
  character of its punctuation list is a segment of its own, and each run of
  other characters is cut by NLTK's word tokenizer. F1 comes from the longest
  common *contiguous* run of segments (punctuation left out):
  precision = its length / prediction segments, recall = / answer segments.
  Exact match compares the texts with the punctuation list's characters
  removed. As in the script, the list's "……" is one entry that no single
  character equals, so "…" counts as text.
* `drcd`: DRCD is scored with CMRC 2018's script.

Every dataset's scores are maxima over the gold answers, averaged over all
questions of the data file (a question without a prediction scores 0),
in percent. One difference from CMRC 2018's script: it cuts a run of
non-Chinese text into sentences (Punkt, a model file NLTK downloads) before
tokenizing words; here the run is tokenized as one line, which differs only
when a run holds a sentence-ending period followed by more text.
"""

from __future__ import annotations

import collections
import string
from typing import Mapping, Optional, Sequence

from electra_tf.finetuning.question_answering import squad_metrics

METRICS = ("squad", "korquad", "cmrc2018", "drcd")

# ---------------------------------------------------------------------------
# KorQuAD 1.0

_KORQUAD_SPACED = "'\"《》<>〈〉()‘’"
_ASCII_PUNCTUATION = frozenset(string.punctuation)


def korquad_normalize(text: str) -> str:
    """KorQuAD 1.0's answer normalisation (see the module docstring)."""
    for char in _KORQUAD_SPACED:
        text = text.replace(char, " ")
    text = "".join(c for c in text.lower() if c not in _ASCII_PUNCTUATION)
    return " ".join(text.split())


def korquad_exact_match(prediction: str, gold: str) -> float:
    return float(korquad_normalize(prediction) == korquad_normalize(gold))


def korquad_f1(prediction: str, gold: str) -> float:
    """Character F1 of the normalised texts (spaces are not characters here)."""
    predicted = list(korquad_normalize(prediction).replace(" ", ""))
    wanted = list(korquad_normalize(gold).replace(" ", ""))
    common = sum((collections.Counter(predicted) & collections.Counter(wanted)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(wanted)
    return 2 * precision * recall / (precision + recall)


# ---------------------------------------------------------------------------
# CMRC 2018 (and DRCD)

# The script's list, "……" included although a single character never equals it.
CMRC_PUNCTUATION = frozenset(
    [
        "-",
        ":",
        "_",
        "*",
        "^",
        "/",
        "\\",
        "~",
        "`",
        "+",
        "=",
        "，",
        "。",
        "：",
        "？",
        "！",
        "“",
        "”",
        "；",
        "’",
        "《",
        "》",
        "……",
        "·",
        "、",
        "「",
        "」",
        "（",
        "）",
        "－",
        "～",
        "『",
        "』",
    ]
)


def _word_tokenize(text: str) -> list[str]:
    try:
        from nltk.tokenize import word_tokenize
    except ImportError:
        raise ImportError(
            "--qa_metric=cmrc2018/drcd cuts non-Chinese text with NLTK's word "
            "tokenizer, as the official script does: pip install nltk"
        ) from None
    return word_tokenize(text, preserve_line=True)


def check_available(metric: str) -> None:
    """Raises ImportError (one line, with the fix) when `metric` needs a missing package."""
    if metric in ("cmrc2018", "drcd"):
        _word_tokenize("check")


def cmrc_segments(text: str, remove_punctuation: bool = False) -> list[str]:
    """CMRC 2018's mixed segmentation: ideographs and listed punctuation alone, NLTK words between."""
    segments, run = [], ""
    for char in text.lower().strip():
        if remove_punctuation and char in CMRC_PUNCTUATION:
            continue
        if "\u4e00" <= char <= "\u9fa5" or char in CMRC_PUNCTUATION:
            if run:
                segments.extend(_word_tokenize(run))
                run = ""
            segments.append(char)
        else:
            run += char
    if run:
        segments.extend(_word_tokenize(run))
    return segments


def longest_common_run(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest contiguous run of segments shared by `a` and `b`."""
    best, previous = 0, [0] * (len(b) + 1)
    for x in a:
        current = [0] * (len(b) + 1)
        for j, y in enumerate(b):
            if x == y:
                current[j + 1] = previous[j] + 1
                best = max(best, current[j + 1])
        previous = current
    return best


def cmrc_exact_match(prediction: str, gold: str) -> float:
    def strip(text):
        return "".join(c for c in text.lower().strip() if c not in CMRC_PUNCTUATION)

    return float(strip(prediction) == strip(gold))


def cmrc_f1(prediction: str, gold: str) -> float:
    wanted = cmrc_segments(gold, remove_punctuation=True)
    predicted = cmrc_segments(prediction, remove_punctuation=True)
    common = longest_common_run(wanted, predicted)
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(wanted)
    return 2 * precision * recall / (precision + recall)


# ---------------------------------------------------------------------------
# One entry point for every dataset.

_PAIRS = {
    "korquad": (korquad_exact_match, korquad_f1),
    "cmrc2018": (cmrc_exact_match, cmrc_f1),
    "drcd": (cmrc_exact_match, cmrc_f1),
}


def metric_for_version(version_field) -> str:
    """The metric a data file's `version` field names (`KorQuAD_v1.0_dev`), else `squad`."""
    text = str(version_field or "").lower()
    for name in ("korquad", "cmrc2018", "drcd"):
        if name in text.replace(" ", ""):
            return name
    return "squad"


def evaluate(
    metric: str,
    gold: Mapping[str, Sequence[str]],
    predictions: Mapping[str, str],
    squad_version: str = "1.1",
    null_odds: Optional[Mapping[str, float]] = None,
    threshold: float = 1.0,
) -> dict:
    """The official scores of `metric` in percent; `exact_match` and `f1` always present.

    Args:
        metric: one of `METRICS`.
        gold: question id -> gold answer texts (every question of the file).
        predictions: question id -> predicted text.
        squad_version: with `squad`, "2.0" scores unanswerable questions
            (empty gold lists) with `null_odds` and `threshold`.

    Returns:
        squad 1.1 and korquad: exact_match, f1. squad 2.0: also exact and
        the official script's other keys. cmrc2018 / drcd: also average
        ((EM + F1) / 2), total and skip (questions without a prediction).

    Raises:
        ValueError: an unknown metric, no question, or a dataset metric
            asked for SQuAD 2.0 data.
    """
    if metric not in METRICS:
        raise ValueError(f"--qa_metric={metric!r}: choose one of {', '.join(METRICS)}.")
    if metric == "squad":
        if squad_version == "2.0":
            results = squad_metrics.evaluate_v2(gold, predictions, null_odds, threshold)
            return {"exact_match": results["exact"], **results}
        return squad_metrics.evaluate_v1(gold, predictions)
    if squad_version == "2.0":
        raise ValueError(
            f"--qa_metric={metric} scores answerable questions only; SQuAD 2.0 "
            "data (unanswerable questions) is scored with --qa_metric=squad."
        )
    exact_fn, f1_fn = _PAIRS[metric]
    results = squad_metrics.evaluate_v1(gold, predictions, exact_fn, f1_fn)
    if metric in ("cmrc2018", "drcd"):
        results["average"] = (results["exact_match"] + results["f1"]) / 2
        results["total"] = len(gold)
        results["skip"] = sum(1 for q in gold if q not in predictions)
    return results
