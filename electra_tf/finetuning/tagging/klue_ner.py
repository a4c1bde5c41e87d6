"""KLUE-NER's two scores, as KLUE-baseline computes them, and its predictions file.

KLUE-baseline (`klue_baseline/models/named_entity_recognition.py`) scores
the dev file's characters without their spaces: every sentence becomes
`O`, its characters' tags, `O` (the places of [CLS] and [SEP]), and the
sentences are joined into one sequence. On that sequence
(`klue_baseline/metrics/functional.py`):

* `entity_macro_f1`: seqeval's `f1_score(average="macro", mode="strict",
  scheme=IOB2)`: an entity is `B-X` followed by any `I-X`; an `I-X` that
  no `B-X` or `I-X` precedes starts none. Per entity type of the gold or
  predicted entities, F1 = 2PR / (P + R) (0 when undefined), averaged.
* `char_macro_f1`: scikit-learn's `f1_score(labels=<the 13 tags>,
  average="macro", zero_division=1)` over the characters: per tag (`O`
  included), F1 = 2TP / (2TP + FP + FN), 1 for a tag neither gold nor
  predicted, averaged over KLUE's 13 tags.

Where this differs from KLUE-baseline: it scores the prediction at [CLS]
and [SEP] (here: `O`, where the gold is `O`) and leaves out the characters
past `max_seq_length` (here: predicted `O` and scored).

The predictions file is the dev file again with the predicted tag as a
third column on every character line; a space, which the model does not
read, gets `I-X` between two characters of one predicted entity X, else
`O` (as the gold tags spaces).
"""

from __future__ import annotations

from typing import Sequence

from electra_tf.artifacts.files import atomic_open
from electra_tf.finetuning.kind.files import TaskDataError
from electra_tf.finetuning.tagging.layouts import klue_ner_characters
from electra_tf.finetuning.tagging.sentences import read_text_lines

# KLUE-baseline's label list (`KlueNERProcessor.get_labels`), the tags scored per character.
KLUE_NER_TAGS = (
    "B-PS",
    "I-PS",
    "B-LC",
    "I-LC",
    "B-OG",
    "I-OG",
    "B-DT",
    "I-DT",
    "B-TI",
    "I-TI",
    "B-QT",
    "I-QT",
    "O",
)
METRICS = ("entity_macro_f1", "char_macro_f1")
OUTSIDE = "O"


def scored_sequence(sentences: Sequence[Sequence[str]]) -> list[str]:
    """The one sequence KLUE-baseline scores: `O`, a sentence's tags, `O`, for every sentence."""
    return [tag for tags in sentences for tag in (OUTSIDE, *tags, OUTSIDE)]


def strict_iob2_entities(tags: Sequence[str]) -> set[tuple[str, int, int]]:
    """(type, first, last) of every entity of `tags` read as strict IOB2 (see the docstring)."""
    found, current = set(), None  # current: (type, first)
    for i, tag in enumerate(list(tags) + [OUTSIDE]):
        letter, _, type_ = tag.partition("-")
        if current is not None and not (letter == "I" and type_ == current[0]):
            found.add((current[0], current[1], i - 1))
            current = None
        if letter == "B":
            current = (type_, i)
    return found


def _f1(correct: int, predicted: int, gold: int) -> float:
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def entity_macro_f1(gold: Sequence[str], predicted: Sequence[str]) -> float:
    """Macro F1 over entity types of strict IOB2 entities (a fraction)."""
    gold_entities, predicted_entities = strict_iob2_entities(gold), strict_iob2_entities(predicted)
    types = sorted({e[0] for e in gold_entities | predicted_entities})
    if not types:
        return 0.0
    scores = []
    for type_ in types:
        g = {e for e in gold_entities if e[0] == type_}
        p = {e for e in predicted_entities if e[0] == type_}
        scores.append(_f1(len(g & p), len(p), len(g)))
    return sum(scores) / len(scores)


def char_macro_f1(gold: Sequence[str], predicted: Sequence[str]) -> float:
    """Macro F1 over KLUE's 13 tags, one character each (a fraction; see the docstring)."""
    scores = []
    for tag in KLUE_NER_TAGS:
        tp = sum(g == tag and p == tag for g, p in zip(gold, predicted))
        fp = sum(g != tag and p == tag for g, p in zip(gold, predicted))
        fn = sum(g == tag and p != tag for g, p in zip(gold, predicted))
        scores.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 1.0)
    return sum(scores) / len(scores)


def klue_ner_scores(
    gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]
) -> dict[str, float]:
    """`entity_macro_f1` and `char_macro_f1` of the sentences' tags (spaces left out), fractions.

    Raises:
        ValueError: the sentences or their lengths differ.
    """
    if len(gold) != len(predicted) or any(len(g) != len(p) for g, p in zip(gold, predicted)):
        raise ValueError("gold and predicted sentences differ in number or length")
    g, p = scored_sequence(gold), scored_sequence(predicted)
    return {"entity_macro_f1": entity_macro_f1(g, p), "char_macro_f1": char_macro_f1(g, p)}


def space_tags(characters: Sequence[str], tags: Sequence[str]) -> list[str]:
    """A tag for every character, spaces included, from the tags of the others.

    A space is `I-X` between two characters of one entity X (the one
    before is `B-X` or `I-X`, the one after `I-X`), else `O`.
    """
    out, others = [], iter(tags)
    for char in characters:
        out.append(None if char == " " else next(others))
    for i, char in enumerate(characters):
        if char != " ":
            continue
        before = next((t for t in reversed(out[:i]) if t is not None), OUTSIDE)
        after = next((out[j] for j in range(i + 1, len(out)) if characters[j] != " "), OUTSIDE)
        letter, _, type_ = after.partition("-")
        inside = letter == "I" and before != OUTSIDE and before.partition("-")[2] == type_
        out[i] = after if inside else OUTSIDE
    return out


def write_klue_ner_predictions(path: str, source: str, predicted: Sequence[Sequence[str]]) -> None:
    """Writes `source` again, line for line, with the predicted tag as a third column.

    Comment and blank lines are kept as they are; every character line
    (spaces included, see `space_tags`) gets `<TAB>predicted tag`. Lines
    end with `\\n`.

    Args:
        path: the file written (atomically).
        source: the KLUE-NER file the sentences were read from.
        predicted: per sentence, the predicted tag of each character other
            than a space.

    Raises:
        TaskDataError: `source` no longer holds those sentences.
    """
    sentences = klue_ner_characters(source)
    if len(sentences) != len(predicted) or any(
        sum(c != " " for c in chars) != len(tags) for chars, tags in zip(sentences, predicted)
    ):
        raise TaskDataError(f"{source}: changed since it was read.")
    tags = [space_tags(chars, tags) for chars, tags in zip(sentences, predicted)]
    flat = iter(t for sentence in tags for t in sentence)
    lines = [line for _, line in read_text_lines(source)]
    with atomic_open(path) as f:
        for line in lines:
            line = line.rstrip("\r")
            if line.startswith("##") or not line.strip("\t"):
                f.write(line + "\n")
                continue
            f.write(f"{line}\t{next(flat)}\n")
