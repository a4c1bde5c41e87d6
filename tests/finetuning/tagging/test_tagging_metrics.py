"""Entity-level scores of tag sequences: against seqeval itself, and worked by hand."""

import random
import warnings

import pytest

from electra_tf.finetuning.tagging.data import PLAIN, PREFIX, SUFFIX
from electra_tf.finetuning.tagging.metrics import entities, entity_scores, score, token_accuracy

seqeval_metrics = pytest.importorskip("seqeval.metrics")
from seqeval.metrics.sequence_labeling import get_entities, precision_recall_fscore_support  # noqa: E402

TYPES = ["PER", "LOC", "ORG-X"]


def _tag_pool(tag_format):
    tags = ["O"] * 4 + ["B", "I"]  # letters without a type too
    for type_ in TYPES:
        for letter in "BIES":
            tags.append(f"{letter}-{type_}" if tag_format == PREFIX else f"{type_}-{letter}")
    return tags


def _random_corpus(rng, tag_format, sentences=12):
    pool = _tag_pool(tag_format)

    def sentence():
        return [rng.choice(pool) for _ in range(rng.randint(0, 9))]

    gold = [sentence() for _ in range(sentences)]
    # Predictions: mostly the gold tag, sometimes another, so entities match in part.
    predicted = [[g if rng.random() < 0.6 else rng.choice(pool) for g in s] for s in gold]
    return gold, predicted


@pytest.mark.parametrize("tag_format", [PREFIX, SUFFIX])
def test_scores_equal_seqeval_on_random_tag_sequences(tag_format):
    suffix = tag_format == SUFFIX
    for seed in range(300):
        rng = random.Random(seed)
        gold, predicted = _random_corpus(rng, tag_format)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # undefined precision/recall, "not NE tag"
            for sentence in gold + predicted:
                assert entities(sentence, tag_format) == get_entities(sentence, suffix), sentence
            expected = precision_recall_fscore_support(
                gold, predicted, average="micro", suffix=suffix
            )
            per_type = precision_recall_fscore_support(gold, predicted, average=None, suffix=suffix)
        micro, types = entity_scores(gold, predicted, tag_format)
        assert [micro["precision"], micro["recall"], micro["f1"]] == pytest.approx(
            [float(v) for v in expected[:3]], abs=1e-12
        ), seed
        names = sorted(types)
        for i, name in enumerate(names):
            got = [types[name][k] for k in ("precision", "recall", "f1", "support")]
            want = [float(per_type[k][i]) for k in range(3)] + [int(per_type[3][i])]
            assert got == pytest.approx(want, abs=1e-12), (seed, name)
        flat = score(gold, predicted, tag_format)
        assert flat["f1"] == micro["f1"]
        assert {k for k in flat if "/" in k} == {
            f"{m}/{t}" for t in names for m in ("precision", "recall", "f1")
        }


def test_entities_worked_by_hand():
    # conlleval's reading: I starts a chunk after O or after another type.
    assert entities(["I-PER", "I-PER", "O"], PREFIX) == [("PER", 0, 1)]
    assert entities(["B-PER", "I-LOC", "I-LOC"], PREFIX) == [("PER", 0, 0), ("LOC", 1, 2)]
    assert entities(["B-PER", "B-PER", "I-PER"], PREFIX) == [("PER", 0, 0), ("PER", 1, 2)]
    # IOBES: E closes, S is alone; E after E starts a new chunk.
    assert entities(["S-LOC", "B-ORG", "I-ORG", "E-ORG", "E-ORG"], PREFIX) == [
        ("LOC", 0, 0),
        ("ORG", 1, 3),
        ("ORG", 4, 4),
    ]
    # Suffixes read the same way; types may hold hyphens.
    assert entities(["PER-B", "PER-I", "O", "NAME-X-S"], SUFFIX) == [
        ("PER", 0, 1),
        ("NAME-X", 3, 3),
    ]
    assert entities(["B", "I", "O", "I"], PREFIX) == [("_", 0, 1), ("_", 3, 3)]
    assert entities([], PREFIX) == []


def test_micro_and_per_type_scores_by_hand():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    predicted = [["B-PER", "I-PER", "O", "O"], ["B-ORG", "B-LOC"]]
    micro, per_type = entity_scores(gold, predicted, PREFIX)
    # Correct: PER, ORG; predicted 3, gold 3.
    assert micro == pytest.approx({"precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3})
    assert per_type["LOC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert per_type["PER"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1}
    # All O predicted: nothing predicted, F1 0 (the all-O baseline).
    none = [["O"] * len(s) for s in gold]
    assert entity_scores(gold, none, PREFIX)[0] == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    assert token_accuracy(gold, predicted) == pytest.approx(4 / 6)
    assert score(gold, none, PLAIN) == {"accuracy": pytest.approx(2 / 6)}


def test_mismatched_lengths_are_refused():
    with pytest.raises(ValueError, match="sentence 0: 2 gold tags but 1 predicted"):
        entity_scores([["O", "O"]], [["O"]], PREFIX)
