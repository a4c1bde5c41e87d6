"""CLUENER 2020 as CLUE scores and takes it: entity labels from tags, CLUE's F1, submissions.

CLUE scores CLUENER with `score.py` of CLUEbenchmark/CLUENER2020: for each
of the ten entity types, a line's entities are the *texts* under that type
in its `label` object (`{type: {entity text: [[start, end], ...]}}`), so an
entity text counts once per line and type whatever its spans; per type,
true positives are predicted texts that the gold line also holds, false
positives the others, false negatives the gold texts not predicted, summed
over lines; the score is the mean of the ten types' F1. `score.py` divides
by zero for a type never predicted or never in the gold lines; that F1 is
0 here.

`entity_label` turns one sentence's predicted tags into that object (spans
inclusive, as CLUENER writes them), `write_cluener` writes predictions as
CLUENER lines: the dev file's (`{"id", "text", "label"}`, which
`score.py` compares with the dev file line by line) and the submission
CLUE's leaderboard takes (`cluener_predict.json`: `{"id", "label"}`, the
ids the test file's, as CLUENER's baseline writes them).
"""

from __future__ import annotations

import json
from typing import Optional, Sequence

from electra_tf.artifacts.files import atomic_open
from electra_tf.finetuning.tagging.metrics import entities

# The entity types `score.py` averages over, in its order.
CLUENER_TYPES = (
    "address",
    "book",
    "company",
    "game",
    "government",
    "movie",
    "name",
    "organization",
    "position",
    "scene",
)
# The score's name in results.json (per type: `clue_f1/<type>`).
CLUE_F1 = "clue_f1"


def entity_label(characters: Sequence[str], tags: Sequence[str], tag_format: str) -> dict:
    """`{type: {entity text: [[start, end], ...]}}` of one sentence's tags (inclusive spans)."""
    label: dict = {}
    for type_, start, end in entities(tags, tag_format):
        text = "".join(characters[start : end + 1])
        label.setdefault(type_, {}).setdefault(text, []).append([start, end])
    return label


def clue_f1(gold: Sequence[dict], predicted: Sequence[dict]) -> dict[str, float]:
    """CLUE's CLUENER score of label objects, line by line (see the module docstring).

    Args:
        gold: N gold `label` objects.
        predicted: N predicted ones.

    Returns:
        {`clue_f1`: the mean of the ten types' F1, `clue_f1/<type>`: each
        type's F1}, fractions in [0, 1].
    """
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold lines but {len(predicted)} predicted")
    scores = {}
    for type_ in CLUENER_TYPES:
        tp = fp = fn = 0
        for gold_label, predicted_label in zip(gold, predicted):
            gold_texts = set((gold_label or {}).get(type_, {}))
            predicted_texts = set((predicted_label or {}).get(type_, {}))
            tp += len(predicted_texts & gold_texts)
            fp += len(predicted_texts - gold_texts)
            fn += len(gold_texts - predicted_texts)
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        total = precision + recall
        scores[f"{CLUE_F1}/{type_}"] = 2 * precision * recall / total if total else 0.0
    scores[CLUE_F1] = sum(scores.values()) / len(CLUENER_TYPES)
    return {CLUE_F1: scores.pop(CLUE_F1), **scores}


def write_cluener(
    path: str,
    sentences: Sequence[Sequence[str]],
    labels: Sequence[dict],
    ids: Optional[Sequence] = None,
    with_text: bool = True,
) -> None:
    """CLUENER lines: `{"id", "text", "label"}` per sentence (`with_text` False: `{"id", "label"}`).

    Args:
        ids: each line's id (default: its position, from 0).
    """
    with atomic_open(path) as f:
        for number, (characters, label) in enumerate(zip(sentences, labels)):
            record = {"id": number if ids is None else ids[number]}
            if with_text:
                record["text"] = "".join(characters)
            record["label"] = label
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
