"""The KLUE suite: its records, its files read as KLUE-baseline reads them, its table, a tiny run.

Files are written here exactly as KLUE distributes them (JSON arrays
written by `json.dump(..., indent=4, ensure_ascii=False)`, KLUE-NER and
KLUE-DP one token per line with `##` comments), in `klue_benchmark/`.
"""

import json
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "dependency_parsing"))
sys.path.insert(0, os.path.dirname(__file__))

from dependency_parsing_support import toy_parses, write_klue_dp  # noqa: E402
from finetuning_support import make_pretrained_dir  # noqa: E402
from test_klue_mrc import write_mrc  # noqa: E402
from test_klue_ner import klue_ner_text  # noqa: E402
from test_klue_re import re_rows  # noqa: E402

from electra_tf.artifacts.pretrained import resolve_pretrained  # noqa: E402
from electra_tf.finetuning.benchmarks import SUITES  # noqa: E402
from electra_tf.finetuning.benchmarks.building import build_task  # noqa: E402
from electra_tf.finetuning.benchmarks.klue import KLUE, KLUE_RE_RELATIONS, YNAT_LABELS  # noqa: E402
from electra_tf.finetuning.benchmarks.options import SuiteOptions, suite_named  # noqa: E402
from electra_tf.finetuning.benchmarks.table import render_table  # noqa: E402
from electra_tf.finetuning.kind import metrics  # noqa: E402
from electra_tf.finetuning.kind.benchmark import DEV, TEST, TRAIN  # noqa: E402
from electra_tf.finetuning.kind.files import TaskDataError  # noqa: E402
from electra_tf.finetuning.kind.settings import FinetuneSettings  # noqa: E402
from electra_tf.finetuning.tagging.klue_ner import klue_ner_scores  # noqa: E402
from electra_tf.training.suite_run import run_suite  # noqa: E402

WORDS = ["movie", "film", "plot", "the", "a", "was", "is", "very", "fun", "good", "bad"]


def _dump(path, rows):
    os.makedirs(path.parent, exist_ok=True)
    path.write_text(json.dumps(rows, indent=4, ensure_ascii=False), encoding="utf-8")


def _sentence(rng, n=4):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def ynat_rows(count, seed):
    rng = np.random.default_rng(seed)
    return [
        {
            "guid": f"ynat-v1_dev_{i:05d}",
            "title": _sentence(rng),
            "label": YNAT_LABELS[i % len(YNAT_LABELS)],
            "url": "https://news.example/1",
            "date": "2016.06.30. 오전 10:36",
        }
        for i in range(count)
    ]


def sts_rows(count, seed):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(count):
        real = float(rng.uniform(0, 5))
        rows.append(
            {
                "guid": f"klue-sts-v1_dev_{i:05d}",
                "source": "airbnb-rtt",
                "sentence1": _sentence(rng),
                "sentence2": _sentence(rng),
                "labels": {
                    "label": round(real, 1),
                    "real-label": real,
                    "binary-label": int(real >= 3),
                },
                "annotations": {
                    "agreement": "0:0:0:0:1:6",
                    "annotators": ["17"],
                    "annotations": [5],
                },
            }
        )
    return rows


def nli_rows(count, seed):
    rng = np.random.default_rng(seed)
    labels = ("entailment", "contradiction", "neutral")
    return [
        {
            "guid": f"klue-nli-v1_dev_{i:05d}",
            "source": "airbnb",
            "premise": _sentence(rng),
            "hypothesis": _sentence(rng),
            "gold_label": labels[i % 3],
            "author": labels[i % 3],
            "label2": labels[i % 3],
        }
        for i in range(count)
    ]


def ner_sentences(count, seed):
    rng = np.random.default_rng(seed)
    sentences = []
    for _ in range(count):
        chars = []
        for w, word in enumerate(rng.choice(WORDS, size=3)):
            if w:
                chars.append((" ", "O"))
            entity = word in ("movie", "film")
            chars += [
                (c, ("B-OG" if k == 0 else "I-OG") if entity else "O") for k, c in enumerate(word)
            ]
        sentences.append(chars)
    return sentences


def klue_data(root, count=8, tasks=("ynat", "sts", "nli", "ner", "re", "dp", "mrc")):
    """The klue_benchmark/ folder holding the tasks asked for (train and dev each)."""
    base = root / "klue_benchmark"
    for split, seed in ((TRAIN, 0), (DEV, 1)):
        if "ynat" in tasks:
            _dump(base / "ynat-v1.1" / f"ynat-v1.1_{split}.json", ynat_rows(count, seed))
        if "sts" in tasks:
            _dump(base / "klue-sts-v1.1" / f"klue-sts-v1.1_{split}.json", sts_rows(count, seed))
        if "nli" in tasks:
            _dump(base / "klue-nli-v1.1" / f"klue-nli-v1.1_{split}.json", nli_rows(count, seed))
        if "ner" in tasks:
            path = base / "klue-ner-v1.1" / f"klue-ner-v1.1_{split}.tsv"
            os.makedirs(path.parent, exist_ok=True)
            path.write_text(klue_ner_text(ner_sentences(count, seed)), encoding="utf-8")
        if "re" in tasks:
            _dump(base / "klue-re-v1.1" / f"klue-re-v1.1_{split}.json", re_rows(count, seed))
        if "dp" in tasks:
            path = base / "klue-dp-v1.1" / f"klue-dp-v1.1_{split}.tsv"
            os.makedirs(path.parent, exist_ok=True)
            write_klue_dp(path, toy_parses(count, seed))
    if "mrc" in tasks:
        write_mrc(root, count)
    return str(root)


# ---------------------------------------------------------------------------
# The records.


def test_the_suite_and_its_records():
    assert suite_named("klue") is KLUE is SUITES["klue"]
    assert [t.name for t in KLUE.tasks] == [
        "ynat",
        "klue-sts",
        "klue-nli",
        "klue-ner",
        "klue-re",
        "klue-dp",
        "klue-mrc",
    ]
    assert [t.metric for t in KLUE.tasks] == [
        "macro_f1",
        "pearson",
        "accuracy",
        "entity_macro_f1",
        "relation_micro_f1",
        "las_macro_f1",
        "rouge_w",
    ]
    assert KLUE.source.startswith("https://github.com/KLUE-benchmark/KLUE/blob/3efd987")
    for task in KLUE.tasks:
        assert task.scored_split == DEV and set(task.files) == {TRAIN, DEV}
        assert task.files[DEV].startswith(task.directory.replace("-v1.1", "") + "-v1.1_dev.")
        assert task.recipes["small"] == task.recipes["base"]
        assert "run_all.sh" in task.recipes["small"].source
        assert {p.model for p in task.published} == set(KLUE.models)
        for entry in task.published:
            # The README's numbers are the test set's: none is recorded on dev.
            assert {s.split for s in entry.scores} == {TEST}
            assert {s.metric for s in entry.scores} == set(task.table_metrics or (task.metric,))
    sts = KLUE.task("klue-sts")
    assert sts.published_score("KLUE-RoBERTa-base", "pearson", TEST).value == 92.50
    assert sts.published_score("koELECTRA-base", "f1_at_3", TEST).value == 84.84
    recipe = KLUE.task("klue-ner").recipes["small"]
    assert (recipe.learning_rate, recipe.train_batch_size, recipe.num_train_epochs) == (5e-5, 32, 3)
    assert (recipe.max_seq_length, recipe.warmup_proportion) == (510, 0.0)
    assert KLUE.task("klue-dp").recipes["base"].max_seq_length == 256


def test_f1_at_3_by_hand():
    gold = [4.0, 3.0, 1.0, 2.9, 5.0]
    predicted = [3.5, 2.0, 3.2, 1.0, 4.0]
    # similar: gold 1 1 0 0 1, predicted 1 0 1 0 1 -> TP 2, FP 1, FN 1 -> F1 4/6.
    assert metrics.f1_at_3(gold, predicted) == pytest.approx(4 / 6)


# ---------------------------------------------------------------------------
# The files, read as KLUE-baseline reads them.


def test_every_task_reads_from_klue_benchmark(tmp_path):
    data = klue_data(tmp_path)
    ynat = build_task(KLUE, "ynat", data)
    assert ynat.files[DEV].endswith(
        os.path.join("klue_benchmark", "ynat-v1.1", "ynat-v1.1_dev.json")
    )
    split = ynat.task.data.dev["dev"]
    rows = ynat_rows(8, 1)
    assert split.texts_a == [r["title"] for r in rows] and split.texts_b is None
    assert split.indices == [r["guid"] for r in rows]
    np.testing.assert_array_equal(split.labels, [YNAT_LABELS.index(r["label"]) for r in rows])
    assert ynat.task.definition.metrics[0] == "macro_f1"

    sts = build_task(KLUE, "klue-sts", data).task
    rows = sts_rows(8, 1)
    np.testing.assert_allclose(
        sts.data.dev["dev"].labels, [r["labels"]["real-label"] for r in rows]
    )
    assert sts.data.dev["dev"].texts_b == [r["sentence2"] for r in rows]
    assert sts.definition.metrics[:2] == ("pearson", "f1_at_3")
    assert sts.definition.primary_metric == "pearson" and sts.definition.label_scale == 5.0

    nli = build_task(KLUE, "klue-nli", data).task
    assert nli.definition.label_names == ["entailment", "contradiction", "neutral"]
    np.testing.assert_array_equal(nli.data.train.labels, [0, 1, 2, 0, 1, 2, 0, 1])

    ner = build_task(KLUE, "klue-ner", data)
    assert ner.task.definition.primary_metric == "entity_macro_f1"
    assert ner.task.max_seq_length == 510
    assert all(" " not in s for s in ner.task.data.dev.sentences)

    dp = build_task(KLUE, "klue-dp", data)
    assert dp.task.definition.primary_metric == "las_macro_f1"
    assert dp.task.max_seq_length == 256 and dp.task.default_epochs == 10


def test_a_file_out_of_layout_is_one_line_naming_it(tmp_path):
    data = klue_data(tmp_path, tasks=("sts",))
    path = tmp_path / "klue_benchmark" / "klue-sts-v1.1" / "klue-sts-v1.1_dev.json"
    rows = sts_rows(3, 1)
    del rows[1]["labels"]["real-label"]
    _dump(path, rows)
    with pytest.raises(TaskDataError) as refused:
        build_task(KLUE, "klue-sts", data)
    message = str(refused.value)
    assert "\n" not in message
    assert path.read_text(encoding="utf-8").split("\n")[21] == "    {"  # the object's start
    assert message.startswith(f"{path}, line 22: no 'labels.real-label'; expected a JSON array")
    rows[1]["labels"]["real-label"] = 7.5
    _dump(path, rows)
    with pytest.raises(TaskDataError, match="line 22: score 7.5 is outside 0-5"):
        build_task(KLUE, "klue-sts", data)


# ---------------------------------------------------------------------------
# The table.


def test_the_table_marks_the_published_test_rows():
    entry = {
        "scores": {"pearson": 12.5, "f1_at_3": 40.0},
        "trials": 1,
        "split": "dev",
        "file": "/data/klue-sts-v1.1/klue-sts-v1.1_dev.json",
        "settings": {
            "learning_rate": 5e-5,
            "train_batch_size": 32,
            "num_train_epochs": 4.0,
            "max_seq_length": 128,
        },
    }
    summary = {
        "init_checkpoint": "runs/ko-tiny/export/discriminator.keras",
        "model_name": "ko-tiny",
        "model_size": "tiny",
        "recipe": "small",
        "data_dir": "/data",
        "tasks": {"klue-sts": entry},
    }
    lines = render_table(KLUE, summary).splitlines()
    assert "| model | KLUE-STS (Pearson r / F1) |" in lines
    assert "| ours: ko-tiny | 12.50 / 40.00 |" in lines
    assert "| published: KLUE-RoBERTa-small | 91.54 / 85.16 (test) |" in lines
    assert "| published: koELECTRA-base | 92.46 / 84.84 (test) |" in lines
    assert any("replace exp results (test set)" in line for line in lines)


# ---------------------------------------------------------------------------
# A tiny run (slow).


def _recomputed_ner(path):
    gold, predicted = [], []
    for block in open(path, encoding="utf-8").read().strip().split("\n\n"):
        rows = [line.split("\t") for line in block.split("\n") if not line.startswith("##")]
        gold.append([g for c, g, _ in rows if c != " "])
        predicted.append([p for c, _, p in rows if c != " "])
    return klue_ner_scores(gold, predicted)


def _tsv(path):
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    return [r[1] for r in rows], [r[2] for r in rows]


@pytest.mark.slow
def test_a_tiny_klue_run_scores_from_its_predictions(tmp_path):
    """Every task, one epoch; each score recomputed from its best trial's predictions file."""
    from scipy.stats import pearsonr

    from electra_tf.finetuning.dependency_parsing.data import DEPREL_LABELS, read_parsed_file
    from electra_tf.finetuning.dependency_parsing.metrics import klue_dp_scores
    from electra_tf.finetuning.question_answering.data import read_gold_answers
    from electra_tf.finetuning.question_answering.metrics import klue_mrc_scores

    data = klue_data(tmp_path / "data")
    out = tmp_path / "out"
    pretrained = make_pretrained_dir(str(tmp_path / "pretrained"))
    options = SuiteOptions(
        suite="klue", data_dir=data, output_dir=str(out), num_train_epochs=1.0, max_seq_length=64
    )
    base = FinetuneSettings(output_dir=str(out), save_models=False)
    said = []
    summary = run_suite(options, resolve_pretrained(pretrained), base, print_fn=said.append)
    assert list(summary["tasks"]) == [t.name for t in KLUE.tasks]
    assert summary["skipped"] == {}
    assert summary["data_dir"] == os.path.join(data, "klue_benchmark")
    tasks = summary["tasks"]

    gold, guess = _tsv(tasks["ynat"]["predictions"])
    ids = {name: i for i, name in enumerate(YNAT_LABELS)}
    expected = metrics.macro_f1([ids[g] for g in gold], [ids[p] for p in guess])
    assert tasks["ynat"]["score"] == pytest.approx(100 * expected)

    gold, guess = _tsv(tasks["klue-nli"]["predictions"])
    assert tasks["klue-nli"]["score"] == pytest.approx(
        100 * np.mean([g == p for g, p in zip(gold, guess)])
    )

    gold, guess = (np.array(v, float) for v in _tsv(tasks["klue-sts"]["predictions"]))
    assert tasks["klue-sts"]["score"] == pytest.approx(
        100 * pearsonr(gold, guess).statistic, abs=1e-3
    )
    similar = ((gold >= 3) & (guess >= 3)).sum()
    f1 = 2 * similar / ((gold >= 3).sum() + (guess >= 3).sum())
    assert tasks["klue-sts"]["scores"]["f1_at_3"] == pytest.approx(100 * f1, abs=1e-3)

    ner = tasks["klue-ner"]
    assert ner["predictions"].endswith("dev_predictions.tsv")
    recomputed = _recomputed_ner(ner["predictions"])
    assert ner["score"] == pytest.approx(100 * recomputed["entity_macro_f1"], abs=1e-6)
    assert ner["scores"]["char_macro_f1"] == pytest.approx(100 * recomputed["char_macro_f1"])

    re_task = tasks["klue-re"]
    with open(re_task["predictions"], encoding="utf-8") as f:
        header, *rows = [line.rstrip("\n").split("\t") for line in f]
    assert header == ["index", "gold", "prediction", *KLUE_RE_RELATIONS]
    ids = {name: i for i, name in enumerate(KLUE_RE_RELATIONS)}
    gold = [ids[r[1]] for r in rows]
    probabilities = np.array([[float(p) for p in r[3:]] for r in rows])
    assert [ids[r[2]] for r in rows] == list(np.argmax(probabilities, axis=1))
    assert re_task["score"] == pytest.approx(
        100 * metrics.relation_micro_f1(gold, [ids[r[2]] for r in rows])
    )
    assert re_task["scores"]["auprc"] == pytest.approx(
        100 * metrics.auprc(gold, probabilities), abs=1e-4
    )

    dp = tasks["klue-dp"]
    gold_split = read_parsed_file(dp["file"], "dev")
    predicted = read_parsed_file(dp["predictions"], "dev")
    ids = {name: i for i, name in enumerate(DEPREL_LABELS)}
    flat = lambda rows: [x for row in rows for x in row]  # noqa: E731
    scores = klue_dp_scores(
        flat(gold_split.heads),
        [ids[x] for x in flat(gold_split.labels)],
        flat(predicted.heads),
        [ids[x] for x in flat(predicted.labels)],
    )
    assert dp["score"] == pytest.approx(100 * scores["las_macro_f1"])
    assert dp["scores"]["uas_macro_f1"] == pytest.approx(100 * scores["uas_macro_f1"])

    mrc = tasks["klue-mrc"]
    assert mrc["predictions"].endswith("predictions.json")
    with open(mrc["predictions"], encoding="utf-8") as f:
        answers = json.load(f)
    gold = read_gold_answers(mrc["file"])
    assert gold.has_unanswerable and set(answers) == set(gold.answers)
    recomputed = klue_mrc_scores(gold.answers, answers)
    assert mrc["score"] == pytest.approx(recomputed["rouge_w"])
    assert mrc["scores"]["exact_match"] == pytest.approx(recomputed["exact_match"])

    table = (out / "suite.md").read_text()
    assert (
        "| model | YNAT | KLUE-STS (Pearson r / F1) | KLUE-NLI | KLUE-NER (entity F1 / char F1) "
        "| KLUE-RE (F1 / AUPRC) | KLUE-DP (UAS / LAS) | KLUE-MRC (EM / ROUGE-W) |" in table
    )
