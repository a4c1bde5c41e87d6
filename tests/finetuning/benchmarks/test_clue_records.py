"""CLUE's suite record: its tasks, files, labels, settings and published rows as copied."""

import pytest

from electra_tf.finetuning.benchmarks import SUITES
from electra_tf.finetuning.benchmarks.clue import CLUE
from electra_tf.finetuning.benchmarks.options import SUITE_NAMES, suite_named
from electra_tf.finetuning.kind.benchmark import BenchmarkTask


def test_the_seven_tasks_their_kinds_files_and_submissions():
    assert SUITES["clue"] is CLUE is suite_named("clue") and SUITE_NAMES["clue"] == "clue"
    rows = {t.name: (t.kind, t.metric, t.scored_split, t.submission) for t in CLUE.tasks}
    assert rows == {
        "tnews": ("classification", "accuracy", "dev", "tnews11_predict.json"),
        "iflytek": ("classification", "accuracy", "dev", "iflytek_predict.json"),
        "afqmc": ("classification", "accuracy", "dev", "afqmc_predict.json"),
        "ocnli": ("classification", "accuracy", "dev", "ocnli_50k_predict.json"),
        "cmnli": ("classification", "accuracy", "dev", "cmnli_predict.json"),
        "cluener": ("tagging", "clue_f1", "dev", "cluener_predict.json"),
        "c3": ("multiple_choice", "accuracy", "dev", "c311_predict.json"),
    }
    for task in CLUE.tasks:
        if task.name != "c3":
            assert task.files == {"train": "train.json", "dev": "dev.json", "test": "test.json"}
    assert CLUE.task("c3").files == {
        "train": "d-train.json,m-train.json",
        "dev": "d-dev.json,m-dev.json",
        "test": "test1.1.json",
    }
    assert CLUE.task("cluener").tagging_layout == "cluener"


def test_label_lists_are_the_baselines():
    # processors/clue.py: TNEWS 100..116 without 105 and 111; IFLYTEK 0..118.
    tnews = CLUE.task("tnews").labels
    assert len(tnews) == 15 and tnews[0] == "100" and tnews[-1] == "116"
    assert "105" not in tnews and "111" not in tnews
    assert CLUE.task("iflytek").labels == tuple(str(i) for i in range(119))
    assert CLUE.task("afqmc").labels == ("0", "1")
    assert CLUE.task("ocnli").labels == CLUE.task("cmnli").labels
    assert CLUE.task("cmnli").labels == ("contradiction", "entailment", "neutral")
    assert CLUE.task("ocnli").tables["dev"].skip_labels == ("-",)
    assert CLUE.task("afqmc").tables["train"].text_pair == "sentence2"
    assert CLUE.task("tnews").tables["test"].text == "sentence"


def test_recipes_as_the_readme_and_scripts_print_them():
    def row(task, size):
        r = CLUE.task(task).recipes[size]
        return (r.train_batch_size, r.max_seq_length, r.num_train_epochs, r.learning_rate)

    # README 各任务详细对比: ALBERT-tiny (small) and BERT-base (base) rows.
    assert row("iflytek", "small") == (32, 128, 10.0, 2e-5)
    assert row("iflytek", "base") == (32, 128, 3.0, 2e-5)
    assert row("afqmc", "base") == row("tnews", "base") == (16, 128, 3.0, 2e-5)
    assert row("cmnli", "small") == row("cmnli", "base") == (64, 128, 2.0, 3e-5)
    assert row("c3", "small") == (32, 512, 8.0, 5e-5)
    assert row("c3", "base") == (24, 512, 8.0, 2e-5)
    # run_classifier_ocnli.sh and CLUENER2020's run_ner_crf.sh.
    assert row("ocnli", "base") == (16, 128, 2.0, 3e-5)
    assert row("cluener", "small") == (24, 128, 5.0, 3e-5)
    for task in CLUE.tasks:
        for recipe in task.recipes.values():
            assert "github.com/CLUEbenchmark/" in recipe.source, task.name


def test_published_rows_and_their_sources():
    assert CLUE.models == ("ALBERT-tiny", "BERT-base", "RoBERTa-wwm-large-ext")
    assert CLUE.task("afqmc").published_score("BERT-base", "accuracy").value == 74.16
    assert CLUE.task("afqmc").published_score("BERT-base", "accuracy", "test").value == 73.70
    assert CLUE.task("tnews").published_score("ALBERT-tiny", "accuracy").value == 53.55
    assert CLUE.task("cmnli").published_score("RoBERTa-wwm-large-ext", "accuracy").value == 83.20
    assert CLUE.task("c3").published_score("BERT-base", "accuracy").value == 65.70
    assert CLUE.task("ocnli").published_score("BERT-base", "accuracy").value == 74.5
    assert CLUE.task("cluener").published_score("BERT-base", "clue_f1", "test").value == 78.82
    with pytest.raises(KeyError):  # CLUENER2020 prints no dev F1
        CLUE.task("cluener").published_score("BERT-base", "clue_f1")
    with pytest.raises(KeyError):  # OCNLI's README has no ALBERT-tiny row
        CLUE.task("ocnli").published_score("ALBERT-tiny", "accuracy")
    for page in ("CLUEbenchmark/CLUE/blob/", "CLUEbenchmark/OCNLI/blob/", "CLUENER2020/blob/"):
        assert page in CLUE.source
    for task in CLUE.tasks:
        assert {p.model for p in task.published} <= set(CLUE.models)
        for entry in task.published:
            for score in entry.scores:
                assert score.metric == task.metric and 0 < score.value <= 100


def test_a_submission_needs_an_unscored_test_file():
    task = CLUE.task("tnews")
    with pytest.raises(ValueError, match="submission file needs an unscored test file"):
        BenchmarkTask(**{**task.__dict__, "scored_split": "test"})
