"""KLUE-RE as distributed (a JSON array of sentences with two entity spans), scored as KLUE-baseline
scores it (micro F1 without no_relation, AUPRC)."""

import json
import os

import numpy as np
import pytest

from electra_tf.finetuning.benchmarks.building import build_task
from electra_tf.finetuning.benchmarks.klue import KLUE, KLUE_RE_RELATIONS
from electra_tf.finetuning.classification.data import Split, Task
from electra_tf.finetuning.classification.tables import mark_entity_spans
from electra_tf.finetuning.classification.task import write_scored_predictions
from electra_tf.finetuning.kind import metrics
from electra_tf.finetuning.kind.benchmark import DEV, TEST, TRAIN
from electra_tf.finetuning.kind.files import TaskDataError

WORDS = ["movie", "film", "plot", "the", "a", "was", "is", "very", "fun", "good", "bad"]


def _entity(sentence, start, end, kind):
    return {"word": sentence[start : end + 1], "start_idx": start, "end_idx": end, "type": kind}


def re_row(guid, sentence, subject, obj, label, source="wikipedia"):
    """One object as KLUE writes it; `subject` and `obj` are (start, end) with the end included."""
    return {
        "guid": guid,
        "sentence": sentence,
        "subject_entity": _entity(sentence, *subject, "PER"),
        "object_entity": _entity(sentence, *obj, "ORG"),
        "label": label,
        "source": source,
    }


def re_rows(count, seed):
    """`count` sentences of four words, the subject and the object two different words."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(count):
        words = list(rng.choice(WORDS, size=4))
        starts = np.cumsum([0] + [len(w) + 1 for w in words[:-1]])
        a, b = rng.choice(4, size=2, replace=False)
        spans = [(int(starts[k]), int(starts[k]) + len(words[k]) - 1) for k in (a, b)]
        label = KLUE_RE_RELATIONS[i % 3]  # no_relation, org:dissolved, org:founded
        rows.append(re_row(f"klue-re-v1_dev_{i:05d}", " ".join(words), spans[0], spans[1], label))
    return rows


def dump(path, rows):
    """As KLUE's files are written: one JSON array, indented by 4, Hangul unescaped."""
    os.makedirs(path.parent, exist_ok=True)
    path.write_text(json.dumps(rows, indent=4, ensure_ascii=False), encoding="utf-8")


# 이순신은 조선 중기의 무신이다: 이순신 is characters 0-2, 조선 5-6.
SENTENCE = "이순신은 조선 중기의 무신이다."


def write_re(root, dev_rows, train_rows=None):
    folder = root / "klue_benchmark" / "klue-re-v1.1"
    dump(folder / "klue-re-v1.1_dev.json", dev_rows)
    dump(folder / "klue-re-v1.1_train.json", train_rows or dev_rows)
    return str(root), folder / "klue-re-v1.1_dev.json"


# ---------------------------------------------------------------------------
# The spans, marked as KLUE-baseline marks them.


def test_spans_are_marked_in_either_order():
    assert (
        mark_entity_spans(SENTENCE, (0, 2), (5, 6))
        == "<subj>이순신</subj>은 <obj>조선</obj> 중기의 무신이다."
    )
    assert (
        mark_entity_spans(SENTENCE, (5, 6), (0, 2))
        == "<obj>이순신</obj>은 <subj>조선</subj> 중기의 무신이다."
    )
    # An entity at the very end, then one that starts where the other ends.
    assert mark_entity_spans("ab", (1, 1), (0, 0)) == "<obj>a</obj><subj>b</subj>"
    with pytest.raises(ValueError, match="same span"):
        mark_entity_spans(SENTENCE, (0, 2), (0, 2))


def test_the_relation_list_is_klues(tmp_path):
    assert len(KLUE_RE_RELATIONS) == 30 and KLUE_RE_RELATIONS[0] == "no_relation"
    assert len(set(KLUE_RE_RELATIONS)) == 30
    # KLUE's relation_list.json as distributed (tests/fixtures/klue/).
    sample = os.path.join(
        os.path.dirname(os.path.abspath(__file__)),
        "..",
        "..",
        "fixtures",
        "klue",
        "relation_list.json",
    )
    with open(sample, encoding="utf-8") as f:
        assert tuple(json.load(f)["relations"]) == KLUE_RE_RELATIONS


# ---------------------------------------------------------------------------
# The files.


def test_the_record():
    task = KLUE.task("klue-re")
    assert task.files == {TRAIN: "klue-re-v1.1_train.json", DEV: "klue-re-v1.1_dev.json"}
    assert task.directory == "klue-re-v1.1" and task.labels == KLUE_RE_RELATIONS
    assert (task.metric, task.table_metrics) == (
        "relation_micro_f1",
        ("relation_micro_f1", "auprc"),
    )
    recipe = task.recipes["base"]
    assert (recipe.learning_rate, recipe.train_batch_size, recipe.num_train_epochs) == (5e-5, 32, 3)
    assert (recipe.warmup_proportion, recipe.max_seq_length) == (0.1, 256)
    small = task.published_score("KLUE-RoBERTa-small", "relation_micro_f1", TEST)
    assert small.value == 60.89
    assert task.published_score("KLUE-RoBERTa-base", "auprc", TEST).value == 68.55
    assert task.published_score("koELECTRA-base", "auprc", TEST).value == 58.94


def test_the_sentences_are_read_with_their_spans_marked(tmp_path):
    rows = [
        re_row("klue-re-v1_dev_00000", SENTENCE, (0, 2), (5, 6), "per:origin"),
        re_row("klue-re-v1_dev_00001", SENTENCE, (5, 6), (0, 2), "no_relation"),
    ]
    data, dev_path = write_re(tmp_path, rows)
    built = build_task(KLUE, "klue-re", data)
    assert built.files[DEV] == str(dev_path)
    split = built.task.data.dev["dev"]
    assert split.texts_a == [
        "<subj>이순신</subj>은 <obj>조선</obj> 중기의 무신이다.",
        "<obj>이순신</obj>은 <subj>조선</subj> 중기의 무신이다.",
    ]
    assert split.texts_b is None
    assert split.indices == ["klue-re-v1_dev_00000", "klue-re-v1_dev_00001"]
    np.testing.assert_array_equal(split.labels, [KLUE_RE_RELATIONS.index("per:origin"), 0])
    definition = built.task.definition
    assert definition.label_names == list(KLUE_RE_RELATIONS)
    assert definition.metrics[:2] == ("relation_micro_f1", "auprc")
    assert definition.primary_metric == "relation_micro_f1"
    assert built.task.max_seq_length == 256


@pytest.mark.parametrize(
    "change, problem",
    [
        (lambda r: r["object_entity"].update(end_idx=40), "object_entity spans characters 5-40"),
        (lambda r: r["subject_entity"].update(start_idx="0"), "must be integers"),
        (lambda r: r["object_entity"].update(start_idx=0, end_idx=2), "are the same span"),
        (lambda r: r["subject_entity"].pop("end_idx"), "no 'subject_entity.end_idx'"),
        (lambda r: r.update(label="per:hobby"), "label 'per:hobby' is none of no_relation"),
    ],
)
def test_an_object_out_of_layout_is_one_line_naming_it(tmp_path, change, problem):
    rows = [
        re_row(f"klue-re-v1_dev_{i:05d}", SENTENCE, (0, 2), (5, 6), "no_relation") for i in (0, 1)
    ]
    change(rows[1])
    data, dev_path = write_re(tmp_path, rows)
    line = dev_path.read_text(encoding="utf-8").split("\n").index("    {", 2) + 1
    with pytest.raises(TaskDataError) as refused:
        build_task(KLUE, "klue-re", data)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"{dev_path}, line {line}: ") and problem in message
    assert 'expected a JSON array of {"guid", "sentence", "subject_entity"' in message


# ---------------------------------------------------------------------------
# The metrics, as klue_re_micro_f1 and klue_re_auprc compute them.


def test_micro_f1_without_no_relation_by_hand():
    gold = [0, 1, 1, 2, 0, 2]
    predicted = [0, 1, 2, 2, 1, 0]
    # Relations other than 0: TP 2 (1, 2 found), FP 2 (2 for a 1, 1 for a 0), FN 2 (the 1 read
    # as 2, the 2 read as 0) -> F1 = 4 / (4 + 2 + 2); the correct no_relation counts nowhere.
    assert metrics.relation_micro_f1(gold, predicted) == pytest.approx(0.5)
    assert metrics.relation_micro_f1([0, 0], [0, 0]) == 0.0


def test_micro_f1_as_scikit_learn_computes_it():
    sklearn = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(3)
    for _ in range(20):
        gold, predicted = rng.integers(0, 5, 30), rng.integers(0, 5, 30)
        expected = sklearn.f1_score(gold, predicted, average="micro", labels=[1, 2, 3, 4])
        assert metrics.relation_micro_f1(gold, predicted) == pytest.approx(expected)


def test_auprc_by_hand():
    # Class 1 ranks the examples .9 .8 .7 .6 (gold 1 0 1 0): points (recall, precision) from
    # (0, 1): (.5, 1), (.5, .5), (1, 2/3), (1, .5); the trapezoids sum to .5 + 7/24 = 19/24.
    # Class 0's scores 1 - p rank the others the same way: 19/24 too.
    gold = [1, 0, 1, 0]
    scores = np.array([0.9, 0.8, 0.7, 0.6])
    probabilities = np.stack([1.0 - scores, scores], axis=1)
    assert metrics.auprc(gold, probabilities) == pytest.approx(19 / 24)
    # Tied scores are one point. Class 1: .5 .5 .2 (gold 1 0 1) -> (.5, .5), (1, 2/3):
    # 3/8 + 7/24 = 2/3; class 0: .8 (gold 0) -> (0, 0), then .5 .5 (gold 0 1) -> (1, 1/3): 1/6.
    tied = np.array([[0.5, 0.5], [0.5, 0.5], [0.8, 0.2]])
    assert metrics.auprc([1, 0, 1], tied) == pytest.approx((2 / 3 + 1 / 6) / 2)
    # A class no example has: recall 1 at every threshold, precision 0, then 1 at recall 0: 0.5.
    # Class 0 (both examples) is found first at every threshold: 1.
    absent = np.array([[0.7, 0.2, 0.1], [0.6, 0.3, 0.1]])
    assert metrics.auprc([0, 0], absent) == pytest.approx((1.0 + 0.5 + 0.5) / 3)


def test_auprc_as_scikit_learn_computes_it():
    sklearn = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(4)
    for _ in range(20):
        gold = rng.integers(0, 4, 25)
        logits = np.round(rng.normal(size=(25, 4)), 1)  # rounded: some ties
        probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        areas = []
        for c in range(4):
            precision, recall, _ = sklearn.precision_recall_curve(gold == c, probabilities[:, c])
            areas.append(sklearn.auc(recall, precision))
        assert metrics.auprc(gold, probabilities) == pytest.approx(np.mean(areas))
    # Not average precision (its steps give 1/2 * 1 + 1/2 * 2/3 = 5/6 where the trapezoids
    # of test_auprc_by_hand give 19/24).
    scores = np.array([0.9, 0.8, 0.7, 0.6])
    step = sklearn.average_precision_score([1, 0, 1, 0], scores)
    assert step == pytest.approx(5 / 6)
    probabilities = np.stack([1.0 - scores, scores], axis=1)
    assert metrics.auprc([1, 0, 1, 0], probabilities) == pytest.approx(19 / 24)


def test_auprc_needs_probabilities():
    with pytest.raises(ValueError, match="auprc needs the class probabilities"):
        metrics.compute(["auprc"], [0, 1], [0, 1])
    scores = metrics.compute(
        ["relation_micro_f1", "auprc"], [0, 1], [0, 1], [[0.9, 0.1], [0.2, 0.8]]
    )
    assert scores == {"relation_micro_f1": 1.0, "auprc": 1.0}


def test_the_predictions_file_holds_every_relations_probability(tmp_path):
    labels = ["no_relation", "org:founded", "per:title"]
    task = Task("klue-re", "classification", labels, ("relation_micro_f1", "auprc"), "f1", False)
    split = Split("dev", "dev.json", ["a", "b"], None, np.array([2, 0]), ["g0", "g1"])
    probabilities = np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]])
    path = str(tmp_path / "dev_predictions.tsv")
    write_scored_predictions(path, split, np.array([2, 0]), task, probabilities)
    lines = open(path, encoding="utf-8").read().splitlines()
    assert lines == [
        "index\tgold\tprediction\tno_relation\torg:founded\tper:title",
        "g0\tper:title\tper:title\t0.1\t0.2\t0.7",
        "g1\tno_relation\tno_relation\t0.5\t0.25\t0.25",
    ]
