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
* `klue_mrc`: KLUE-MRC as KLUE-baseline scores it (`klue_mrc_em`,
  `klue_mrc_rouge_w` in `klue_baseline/metrics/`). Normalisation lower-cases,
  removes ASCII punctuation and collapses whitespace; its pattern for quotes
  and brackets is, as written, one of ' " 《 》 < > 〈 〉 *followed by* the
  characters ()‘’, so it replaces only such five-character runs by a space
  (KorQuAD's replaces each of them), and so here. Exact match compares the
  normalised texts;
  "ROUGE-W" is the F1 of the longest common *contiguous* run of characters
  (difflib's `find_longest_match`; spaces count). Unanswerable questions
  (SQuAD 2.0's `is_impossible`) have the empty string as their only gold
  answer, which only the empty prediction matches; null odds above the
  threshold answer "". Scores are `exact_match` and `rouge_w`.

Every dataset's scores are maxima over the gold answers, averaged over all
questions of the data file (a question without a prediction scores 0),
in percent. One difference from CMRC 2018's script: it cuts a run of
non-Chinese text into sentences (Punkt, a model file NLTK downloads) before
tokenizing words; here the run is tokenized as one line, which differs only
when a run holds a sentence-ending period followed by more text.
"""

from __future__ import annotations

import collections
import difflib
import re
import string
from typing import Mapping, Optional, Sequence

from electra_tf.finetuning.question_answering import squad_metrics

METRICS = ("squad", "korquad", "cmrc2018", "drcd", "klue_mrc")
# The metrics that score unanswerable questions (SQuAD 2.0's `is_impossible`) besides squad.
WITH_UNANSWERABLE = ("klue_mrc",)

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
# KLUE-MRC

# KLUE-baseline's pattern as written: one of the quotes and brackets, then the literal "()‘’".
_KLUE_MRC_SPACED = re.compile(r"""['"《》<>〈〉]\(\)‘’""")


def klue_mrc_normalize(text: str) -> str:
    """KLUE-baseline's `normalize_answer_for_klue_mrc` (see the module docstring)."""
    text = _KLUE_MRC_SPACED.sub(" ", text.lower())
    text = "".join(c for c in text if c not in _ASCII_PUNCTUATION)
    return " ".join(text.split())


def klue_mrc_rouge_w(prediction: str, gold: str) -> float:
    """F1 of the longest common contiguous run of characters of two normalised texts.

    An empty gold text (an unanswerable question) scores 1 against the empty
    prediction and 0 against any other.
    """
    if gold == "":
        return float(prediction == "")
    match = difflib.SequenceMatcher(None, prediction, gold).find_longest_match(
        0, len(prediction), 0, len(gold)
    )
    if match.size == 0:
        return 0.0
    precision, recall = match.size / len(prediction), match.size / len(gold)
    return 2 * precision * recall / (precision + recall)


def klue_mrc_scores(gold: Mapping[str, Sequence[str]], predictions: Mapping[str, str]) -> dict:
    """KLUE-MRC's exact match and ROUGE-W in percent, each a maximum over the gold answers.

    Args:
        gold: question id -> gold answer texts (none: unanswerable, gold "").
        predictions: question id -> predicted text (a missing one scores 0).
    """
    if not gold:
        raise ValueError("no question to score")
    exact, rouge = [], []
    for qas_id, answers in gold.items():
        if qas_id not in predictions:
            exact.append(0.0)
            rouge.append(0.0)
            continue
        predicted = klue_mrc_normalize(predictions[qas_id])
        wanted = [klue_mrc_normalize(a) for a in answers] or [""]
        exact.append(max(float(predicted == a) for a in wanted))
        rouge.append(max(klue_mrc_rouge_w(predicted, a) for a in wanted))
    return {
        "exact_match": 100.0 * sum(exact) / len(exact),
        "rouge_w": 100.0 * sum(rouge) / len(rouge),
    }


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
        klue_mrc: exact_match and rouge_w (no f1), the predictions answered
        "" where `null_odds` (when given) exceed `threshold`.

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
    if metric == "klue_mrc":
        if null_odds is not None:
            predictions = {
                q: "" if null_odds.get(q, float("-inf")) > threshold else text
                for q, text in predictions.items()
            }
        return klue_mrc_scores(gold, predictions)
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
