"""Entity-level precision, recall and F1 of tag sequences, as `seqeval` computes them.

`seqeval`'s default mode is conlleval's chunk reading, which is lenient: a
chunk may start with `I` (after `O`, or after a chunk of another type), and
BIO and IOBES tags mix freely. Reading each sentence left to right with one
`O` after its end, between the previous tag (position letter p, type s) and
the current one (letter c, type t):

* a chunk ends before the current tag when p is `E` or `S`; when p is `B`
  or `I` and c is `B`, `S` or `O`; or when p is not `O` and s != t;
* a chunk starts at the current tag when c is `B` or `S`; when c is `E` or
  `I` and p is `E`, `S` or `O`; or when c is not `O` and t != s.

`O` has type `_`, as has a letter without a type. An entity is (type,
first word, last word); a predicted entity is correct when the same triple
is in the gold sentence. Micro precision is correct / predicted, recall
correct / gold, F1 2PR / (P + R), each 0 when undefined (seqeval's
`zero_division="warn"` values); per-type scores count one type's entities.
Token accuracy is the fraction of words whose predicted tag equals the gold
tag.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from electra_tf.finetuning.tagging.data import OUTSIDE, PLAIN, parse_tag

_ENDS_AFTER = {"E", "S"}
_OPEN = {"B", "I"}
_CLOSES_OPEN = {"B", "S", OUTSIDE}
_CONTINUES = {"E", "I"}
_BEFORE_CONTINUATION_START = {"E", "S", OUTSIDE}


def entities(tags: Sequence[str], tag_format: str) -> list[tuple[str, int, int]]:
    """The entities of one sentence's tags: (type, first word, last word), in order."""
    found = []
    prev_letter, prev_type, begin = OUTSIDE, "", 0
    for i, tag in enumerate(list(tags) + [OUTSIDE]):
        letter, type_ = parse_tag(tag, tag_format)
        ends = (
            prev_letter in _ENDS_AFTER
            or (prev_letter in _OPEN and letter in _CLOSES_OPEN)
            or (prev_letter != OUTSIDE and prev_type != type_)
        )
        starts = (
            letter in ("B", "S")
            or (letter in _CONTINUES and prev_letter in _BEFORE_CONTINUATION_START)
            or (letter != OUTSIDE and type_ != prev_type)
        )
        if ends:
            found.append((prev_type, begin, i - 1))
        if starts:
            begin = i
        prev_letter, prev_type = letter, type_
    return found


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0


def _prf(correct: int, predicted: int, gold: int) -> dict[str, float]:
    precision, recall = _ratio(correct, predicted), _ratio(correct, gold)
    return {
        "precision": precision,
        "recall": recall,
        "f1": _ratio(2 * precision * recall, precision + recall),
    }


def entity_scores(
    gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]], tag_format: str
) -> tuple[dict[str, float], dict[str, dict]]:
    """Micro and per-type entity precision, recall and F1 over sentences.

    Args:
        gold: N sentences of gold tags.
        predicted: N sentences of predicted tags, each as long as its gold one.
        tag_format: `prefix` or `suffix`.

    Returns:
        ({precision, recall, f1}, {type: {precision, recall, f1, support}}),
        support being the type's gold entity count; types are those of the
        gold or predicted entities, sorted.
    """
    _check_lengths(gold, predicted)
    correct, n_predicted, n_gold = Counter(), Counter(), Counter()
    for gold_tags, predicted_tags in zip(gold, predicted):
        gold_set = set(entities(gold_tags, tag_format))
        predicted_set = set(entities(predicted_tags, tag_format))
        for type_, _, _ in gold_set:
            n_gold[type_] += 1
        for type_, _, _ in predicted_set:
            n_predicted[type_] += 1
        for type_, _, _ in gold_set & predicted_set:
            correct[type_] += 1
    micro = _prf(sum(correct.values()), sum(n_predicted.values()), sum(n_gold.values()))
    per_type = {
        type_: {**_prf(correct[type_], n_predicted[type_], n_gold[type_]), "support": n_gold[type_]}
        for type_ in sorted(set(n_gold) | set(n_predicted))
    }
    return micro, per_type


def token_accuracy(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> float:
    """Fraction of words tagged as in the gold sentences (0 without words)."""
    _check_lengths(gold, predicted)
    pairs = [(g, p) for gs, ps in zip(gold, predicted) for g, p in zip(gs, ps)]
    return _ratio(sum(g == p for g, p in pairs), len(pairs))


def score(
    gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]], tag_format: str
) -> dict[str, float]:
    """The metrics of a tagging task's results.json: flat, fractions in [0, 1].

    `precision`, `recall`, `f1` (micro, entity level) and `accuracy`, then
    `precision/<type>`, `recall/<type>`, `f1/<type>` for every type; plain
    tags get `accuracy` only.
    """
    results = {}
    if tag_format != PLAIN:
        micro, per_type = entity_scores(gold, predicted, tag_format)
        results.update(micro)
    results["accuracy"] = token_accuracy(gold, predicted)
    if tag_format != PLAIN:
        for type_, values in per_type.items():
            results.update(
                {f"{name}/{type_}": values[name] for name in ("precision", "recall", "f1")}
            )
    return results


def _check_lengths(gold, predicted) -> None:
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
    for i, (g, p) in enumerate(zip(gold, predicted)):
        if len(g) != len(p):
            raise ValueError(f"sentence {i}: {len(g)} gold tags but {len(p)} predicted")
