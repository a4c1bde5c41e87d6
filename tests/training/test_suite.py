"""Benchmark suites in one command: tasks present run, others skipped, scores in the table's units.

Data directories are written here in KoELECTRA's and Chinese-ELECTRA's
layouts from the toy words of `finetuning_support`, so a tiny encoder with
that vocabulary reads every word.
"""

import dataclasses
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from finetuning_support import make_pretrained_dir, toy_sentences, toy_tagged_sentences

from electra_tf.artifacts.pretrained import resolve_pretrained
from electra_tf.commands import suite as suite_command
from electra_tf.errors import RunError
from electra_tf.finetuning.benchmarks.chinese_electra import CHINESE_ELECTRA
from electra_tf.finetuning.benchmarks.koelectra import KOELECTRA
from electra_tf.finetuning.benchmarks.options import (
    SuiteOptions,
    recipe_size,
    select_tasks,
    suite_named,
    task_settings,
)
from electra_tf.finetuning.benchmarks.table import render_table, task_entry
from electra_tf.finetuning.kind.settings import FinetuneSettings
from electra_tf.training.suite_run import plan_tasks, run_suite


def _write(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("".join(line + "\n" for line in lines))
    return str(path)


def _nsmc(path, count, seed):
    rows = toy_sentences(count, seed)
    _write(
        path, ["id\tdocument\tlabel"] + [f"{900 + i}\t{t}\t{y}" for i, (t, y) in enumerate(rows)]
    )


def _naver_ner(path, count, seed):
    rows = toy_tagged_sentences(count, seed, tag_format="suffix")
    _write(path, [" ".join(words) + "\t" + " ".join(tags) for words, tags in rows])


def _korsts(path, count, seed):
    header = "genre\tfilename\tyear\tid\tscore\tsentence1\tsentence2"
    rows = toy_sentences(count, seed)
    lines = [
        f"main-captions\tMSRvid\t2012test\t{i:04d}\t{4.0 * y + 0.25 * (i % 4):.3f}\t{t}\tthe film"
        for i, (t, y) in enumerate(rows)
    ]
    _write(path, [header] + lines)


def koelectra_data(root, count=8):
    """NSMC, Naver NER and KorSTS in KoELECTRA's finetune/data layout; the other tasks absent."""
    _nsmc(root / "nsmc" / "ratings_train.txt", count, 0)
    _nsmc(root / "nsmc" / "ratings_test.txt", count, 1)
    _naver_ner(root / "naver-ner" / "train.tsv", count, 0)
    _naver_ner(root / "naver-ner" / "test.tsv", count, 1)
    _korsts(root / "korsts" / "sts-train.tsv", count, 0)
    _korsts(root / "korsts" / "sts-test.tsv", count, 1)
    return str(root)


@pytest.fixture(scope="module")
def pretrained_dir(tmp_path_factory):
    return make_pretrained_dir(str(tmp_path_factory.mktemp("pretrained")))


# ---------------------------------------------------------------------------
# Choosing the suite, its tasks and their settings.


def test_suites_and_tasks_by_name():
    assert suite_named("koelectra") is KOELECTRA
    assert suite_named("chinese-electra") is suite_named("chinese_electra") is CHINESE_ELECTRA
    with pytest.raises(RunError, match="--suite=glue: choose one of koelectra, chinese-electra"):
        suite_named("glue")
    assert [t.name for t in select_tasks(KOELECTRA, None)] == [t.name for t in KOELECTRA.tasks]
    # The table's order, whatever the order asked.
    assert [t.name for t in select_tasks(KOELECTRA, ["korsts", "nsmc"])] == ["nsmc", "korsts"]
    with pytest.raises(RunError) as refused:
        select_tasks(KOELECTRA, ["nsmc", "klue-ner"])
    message = str(refused.value)
    assert "\n" not in message
    assert message == (
        "--tasks: klue-ner is not a task of koelectra; its tasks are nsmc, naver-ner, paws, "
        "kornli, korsts, question-pair, korquad, hate-speech."
    )
    assert [recipe_size(s) for s in ("tiny", "small", "base", "large")] == [
        "small",
        "small",
        "base",
        "base",
    ]


def test_task_settings_follow_the_recipe_unless_overridden():
    base = FinetuneSettings(output_dir="out", num_trials=3, seed=5)
    paws = KOELECTRA.task("paws").recipes["small"]  # 3e-5, batch 64, 15 epochs
    settings = task_settings(base, paws, SuiteOptions(), "out/paws")
    assert (settings.learning_rate, settings.train_batch_size, settings.num_train_epochs) == (
        3e-5,
        64,
        15.0,
    )
    # KoELECTRA trains with Hugging Face's AdamW: no warmup, weight decay or layer-wise decay.
    assert (settings.warmup_proportion, settings.weight_decay_rate) == (0.0, 0.0)
    assert settings.layerwise_lr_decay == 1.0
    assert (settings.output_dir, settings.num_trials, settings.seed) == ("out/paws", 3, 5)
    assert settings.random_init is False
    overridden = task_settings(
        base,
        paws,
        SuiteOptions(learning_rate=1e-3, train_batch_size=8, num_train_epochs=2.0),
        "out/random_init/paws",
        random_init=True,
    )
    assert (overridden.learning_rate, overridden.train_batch_size) == (1e-3, 8)
    assert overridden.num_train_epochs == 2.0 and overridden.random_init
    # Chinese-ELECTRA states no batch or epochs for DRCD: ours, and the task's default epochs.
    drcd = CHINESE_ELECTRA.task("drcd").recipes["base"]
    open_values = task_settings(base, drcd, SuiteOptions(), "out/drcd")
    assert open_values.learning_rate == 1e-4 and open_values.train_batch_size == 32
    assert open_values.num_train_epochs is None and open_values.warmup_proportion == 0.1
    assert open_values.layerwise_lr_decay == 0.8 and open_values.weight_decay_rate == 0.01


def test_tasks_without_their_files_are_skipped_naming_them(tmp_path):
    root = tmp_path / "data"
    koelectra_data(root)
    os.remove(root / "korsts" / "sts-test.tsv")
    present, skipped = plan_tasks(KOELECTRA, list(KOELECTRA.tasks), str(root))
    assert [t.name for t in present] == ["nsmc", "naver-ner"]
    assert list(skipped) == ["paws", "kornli", "korsts", "question-pair", "korquad", "hate-speech"]
    assert skipped["korsts"]["missing"] == [
        str(root / "korsts" / "sts-dev.tsv"),
        str(root / "korsts" / "sts-test.tsv"),
    ]
    assert skipped["korquad"]["missing"] == [
        str(root / "korquad" / "KorQuAD_v1.0_train.json"),
        str(root / "korquad" / "KorQuAD_v1.0_dev.json"),
    ]


# ---------------------------------------------------------------------------
# Scores in the published units, and the table (hand-made results).


def _results(metrics_per_trial, predictions_name):
    trials = [
        {
            "trial": k,
            "seed": k,
            "dev": dev,
            "predictions": {predictions_name: f"t{k}/{predictions_name}"},
        }
        for k, dev in enumerate(metrics_per_trial)
    ]
    return trials


def test_entries_in_the_tables_units():
    settings = {
        "learning_rate": 5e-5,
        "train_batch_size": 32,
        "num_train_epochs": 10.0,
        "max_seq_length": 128,
    }
    nsmc = KOELECTRA.task("nsmc")
    trials = _results(
        [
            {"accuracy": 0.8125, "f1": 0.8},
            {"accuracy": 0.875, "f1": 0.9},
            {"accuracy": 0.75, "f1": 0.7},
        ],
        "dev",
    )
    results = {"trials": trials, "median": {"accuracy": 0.8125, "f1": 0.8}, "best_trial": 1}
    entry = task_entry(
        nsmc, results, "out/nsmc/results.json", "data/nsmc/ratings_test.txt", settings
    )
    assert entry["score"] == pytest.approx(81.25) and entry["scores"] == {
        "accuracy": pytest.approx(81.25)
    }
    assert entry["trials"] == 3 and entry["best_trial"] == 1
    assert entry["predictions"] == "t1/dev" and entry["results"] == "out/nsmc/results.json"
    assert (entry["metric"], entry["split"], entry["unit"]) == (
        "accuracy",
        "test",
        "accuracy x 100",
    )

    korsts = KOELECTRA.task("korsts")
    trials = _results([{"spearman": 0.4321, "pearson": 0.5}], "dev")
    entry = task_entry(
        korsts,
        {"trials": trials, "median": {"spearman": 0.4321, "pearson": 0.5}, "best_trial": 0},
        "r",
        "f",
        settings,
    )
    assert entry["score"] == pytest.approx(43.21)

    ner = KOELECTRA.task("naver-ner")
    trials = _results([{"f1": 0.5, "precision": 0.4}], "dev_predictions.txt")
    entry = task_entry(
        ner,
        {"trials": trials, "median": {"f1": 0.5, "precision": 0.4}, "best_trial": 0},
        "r",
        "f",
        settings,
    )
    assert entry["score"] == 50.0 and entry["predictions"] == "t0/dev_predictions.txt"

    # QA scores are already percentages, as the official scripts print them.
    korquad = KOELECTRA.task("korquad")
    trials = _results(
        [{"exact_match": 40.0, "f1": 61.5}, {"exact_match": 42.0, "f1": 60.0}], "predictions.json"
    )
    entry = task_entry(
        korquad,
        {"trials": trials, "median": {"exact_match": 41.0, "f1": 60.75}, "best_trial": 0},
        "r",
        "f",
        settings,
    )
    assert entry["score"] == 60.75 and entry["scores"] == {"exact_match": 41.0, "f1": 60.75}
    assert entry["predictions"] == "t0/predictions.json"


def _entry(scores, trials=3):
    return {
        "scores": scores,
        "trials": trials,
        "split": "dev",
        "file": "/data/x/dev.tsv",
        "settings": {
            "learning_rate": 3e-4,
            "train_batch_size": 32,
            "num_train_epochs": 3.0,
            "max_seq_length": 128,
        },
    }


def test_the_table_sets_our_rows_beside_the_published_ones():
    summary = {
        "init_checkpoint": "runs/zh-tiny/export/discriminator.keras",
        "model_name": "zh-tiny",
        "model_size": "tiny",
        "recipe": "small",
        "data_dir": "/data",
        "tasks": {
            "xnli": _entry({"accuracy": 40.5}),
            "cmrc2018": _entry({"exact_match": 10.0, "f1": 25.25}),
        },
        "baseline": {"random_init": {"tasks": {"xnli": _entry({"accuracy": 33.0}, 2)}}},
        "skipped": {"drcd": {"missing": ["/data/drcd/train.json"]}},
        "not_selected": ["lcqmc"],
    }
    table = render_table(CHINESE_ELECTRA, summary)
    lines = table.splitlines()
    # The table's order: CMRC 2018 before XNLI.
    assert "| model | CMRC 2018 (EM / F1) | XNLI |" in lines
    assert "| ours: zh-tiny | 10.00 / 25.25 | 40.50 |" in lines
    assert "| random init, tiny (no pre-training) | – | 33.00 |" in lines
    # Chinese-ELECTRA prints the best of 10 runs and their mean; none for the 180g models.
    assert "| published: ELECTRA-small | 63.40 (62.90) / 80.80 (80.20) | 73.30 (72.50) |" in lines
    assert "| published: ELECTRA-180g-base | 69.30 / 87.00 | 79.60 |" in lines
    assert CHINESE_ELECTRA.source in table and "best of 10" in table
    assert "- drcd: /data/drcd/train.json" in lines
    assert "Not selected (--tasks): lcqmc." in lines
    assert "random init: of 2" in table

    korean = render_table(
        KOELECTRA,
        {
            **summary,
            "tasks": {"nsmc": _entry({"accuracy": 61.2})},
            "skipped": {},
            "not_selected": [],
        },
    )
    assert "| published: KoELECTRA-Small-v3 | 89.36 |" in korean.splitlines()
    assert "| published: KoELECTRA-Base-v3 | 90.63 |" in korean.splitlines()
    assert "| random init, tiny (no pre-training) | – |" in korean.splitlines()


# ---------------------------------------------------------------------------
# The suite's course with a stand-in trial loop (no training).


def test_suite_logic_with_a_stand_in_trial_loop(tmp_path, pretrained_dir, monkeypatch):
    """Which runs are made with which settings, what is tabulated, what a second run skips."""
    from electra_tf.artifacts.results import make_results
    from electra_tf.training import suite_run
    from electra_tf.training.finetuning_loop import run_identity

    # Each run's trials score these (results.json's units: fractions), trial by trial.
    dev = {
        "nsmc": [{"accuracy": 0.6}, {"accuracy": 0.7}, {"accuracy": 0.65}],
        "naver-ner": [
            {"f1": 0.25, "precision": 0.5},
            {"f1": 0.5, "precision": 0.5},
            {"f1": 0.125, "precision": 0.5},
        ],
        "korsts": [
            {"spearman": -0.1, "pearson": 0.0},
            {"spearman": 0.3, "pearson": 0.0},
            {"spearman": 0.2, "pearson": 0.0},
        ],
    }
    files = {"nsmc": "dev", "naver-ner": "dev_predictions.txt", "korsts": "dev"}
    calls = []

    def trial_loop(task, pretrained, settings, print_fn=print, strategy=None, restart=False):
        resolved = settings.resolve(pretrained.config.model_size, task.default_epochs)
        calls.append(
            (
                task.name,
                os.path.relpath(resolved.output_dir, tmp_path),
                resolved.random_init,
                resolved.learning_rate,
                resolved.train_batch_size,
                resolved.num_train_epochs,
            )
        )
        trials = []
        for number, scores in enumerate(dev[task.name]):
            path = os.path.join(resolved.output_dir, f"trial_{number}", "predictions")
            _write(path, ["made by the stand-in"])
            trials.append(
                {
                    "trial": number,
                    "seed": number,
                    "dev": scores,
                    "predictions": {files[task.name]: path},
                }
            )
        results = make_results(
            run_identity(task, pretrained, resolved), {}, task.primary_metric, trials
        )
        _write(os.path.join(resolved.output_dir, "results.json"), [json.dumps(results)])
        print_fn("--- Trial 1/3 ---")
        return results

    monkeypatch.setattr(suite_run, "run_trials", trial_loop)
    data = koelectra_data(tmp_path / "data")
    out = tmp_path / "out"
    options = SuiteOptions(
        suite="koelectra", data_dir=data, output_dir=str(out), baseline="random_init"
    )
    base = FinetuneSettings(output_dir=str(out), num_trials=3)
    pretrained = resolve_pretrained(pretrained_dir)
    said = []
    summary = run_suite(options, pretrained, base, print_fn=said.append)
    # Task by task in the table's order, each from the pre-trained encoder and then from
    # fresh weights, with KoELECTRA's small settings (the checkpoint is tiny).
    assert calls == [
        ("nsmc", "out/nsmc", False, 5e-5, 32, 10.0),
        ("nsmc", "out/random_init/nsmc", True, 5e-5, 32, 10.0),
        ("naver-ner", "out/naver-ner", False, 5e-5, 32, 20.0),
        ("naver-ner", "out/random_init/naver-ner", True, 5e-5, 32, 20.0),
        ("korsts", "out/korsts", False, 5e-5, 32, 10.0),
        ("korsts", "out/random_init/korsts", True, 5e-5, 32, 10.0),
    ]
    # Medians by hand: accuracy 0.65, F1 0.25, Spearman 0.2; in the table's unit, x 100.
    scores = {name: entry["score"] for name, entry in summary["tasks"].items()}
    assert scores == pytest.approx({"nsmc": 65.0, "naver-ner": 25.0, "korsts": 20.0})
    baseline = summary["baseline"]["random_init"]["tasks"]
    assert {n: e["score"] for n, e in baseline.items()} == pytest.approx(scores)
    # The best trial's predictions: trial 1 everywhere (the highest headline metric).
    for name, entry in summary["tasks"].items():
        assert entry["predictions"] == str(out / name / "trial_1" / "predictions")
        assert entry["best_trial"] == 1 and entry["trials"] == 3
        assert entry["results"] == str(out / name / "results.json")
    assert baseline["korsts"]["predictions"] == str(
        out / "random_init" / "korsts" / "trial_1" / "predictions"
    )
    written = json.loads((out / "suite.json").read_text())
    assert written["format_version"] == 1
    assert {k: v for k, v in written.items() if k != "format_version"} == summary
    assert list(written["skipped"]) == ["paws", "kornli", "question-pair", "korquad", "hate-speech"]
    table = (out / "suite.md").read_text().splitlines()
    assert "| model | NSMC | Naver NER | KorSTS |" in table
    assert "| ours: " + os.path.basename(pretrained_dir) + " | 65.00 | 25.00 | 20.00 |" in table
    assert "| random init, tiny (no pre-training) | 65.00 | 25.00 | 20.00 |" in table
    assert "| published: KoELECTRA-Base-v3 | 90.63 | 88.11 | 85.53 |" in table
    assert "[3/3 korsts, random init] --- Trial 1/3 ---" in said

    # Again: every run is on record, so nothing is run and the same tables come out.
    calls.clear()
    said.clear()
    again = run_suite(options, pretrained, base, print_fn=said.append)
    assert calls == [] and again == summary
    assert sum("already finished: 3 trial(s)" in line for line in said) == 6
    # More trials than on record: every run is taken up again (the loop adds the trials).
    run_suite(options, pretrained, dataclasses.replace(base, num_trials=4), print_fn=said.append)
    assert [c[:3] for c in calls] == [
        (name, os.path.join("out", *prefix, name), bool(prefix))
        for name in ("nsmc", "naver-ner", "korsts")
        for prefix in ((), ("random_init",))
    ]


def test_a_suite_without_files_says_what_it_looked_for(tmp_path, pretrained_dir):
    out = tmp_path / "out"
    options = SuiteOptions(suite="chinese-electra", data_dir=str(tmp_path), output_dir=str(out))
    said = []
    summary = run_suite(
        options,
        resolve_pretrained(pretrained_dir),
        FinetuneSettings(output_dir=str(out)),
        print_fn=said.append,
    )
    assert summary["tasks"] == {} and list(summary["skipped"]) == [
        t.name for t in CHINESE_ELECTRA.tasks
    ]
    assert summary["skipped"]["xnli"]["missing"] == [
        str(tmp_path / "xnli" / f"{split}.tsv") for split in ("train", "dev", "test")
    ]
    assert json.loads((out / "suite.json").read_text())["skipped"] == summary["skipped"]
    table = (out / "suite.md").read_text()
    assert "No task was run." in table and f"- drcd: {tmp_path / 'drcd' / 'train.json'}" in table
    assert said[0].startswith("Chinese-ELECTRA (ymcui/Chinese-ELECTRA): 0 of 6 task(s) to run")


# ---------------------------------------------------------------------------
# The command line.


def test_an_unknown_task_is_one_line_naming_the_known_ones(tmp_path, capsys):
    code = suite_command.main(
        [
            "--suite=chinese-electra",
            f"--data_dir={tmp_path}",
            f"--init_checkpoint={tmp_path / 'none'}",
            f"--output_dir={tmp_path / 'out'}",
            "--tasks=xnli,nsmc",
        ]
    )
    assert code == 2
    error = capsys.readouterr().err.splitlines()[0]
    assert error == (
        "python -m electra_tf.commands.suite: error: --tasks: nsmc is not a task of "
        "chinese-electra; its tasks are cmrc2018, drcd, xnli, chnsenticorp, lcqmc, bqcorpus."
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_one_task_of_eight_examples_runs_in_one_step(tmp_path, pretrained_dir):
    """The suite's logic end to end at its smallest: one task present, one trial of one step."""
    root = tmp_path / "data"
    _korsts(root / "korsts" / "sts-train.tsv", 8, 0)
    _korsts(root / "korsts" / "sts-test.tsv", 8, 1)
    out = tmp_path / "out"
    said = []
    options = SuiteOptions(
        suite="koelectra", data_dir=str(root), output_dir=str(out), num_train_epochs=1.0
    )
    base = FinetuneSettings(output_dir=str(out), save_models=False)
    summary = run_suite(options, resolve_pretrained(pretrained_dir), base, print_fn=said.append)
    assert list(summary["tasks"]) == ["korsts"]
    assert len(summary["skipped"]) == 7 and summary["not_selected"] == []
    results = json.loads((out / "korsts" / "results.json").read_text())
    assert results["trials"][0]["steps"] == 1
    entry = summary["tasks"]["korsts"]
    assert entry["score"] == pytest.approx(100 * results["median"]["spearman"])
    assert json.loads((out / "suite.json").read_text())["tasks"]["korsts"] == entry
    assert any(line.startswith("[1/1 korsts] spearman ") for line in said)
    assert os.path.isfile(entry["predictions"])


# ---------------------------------------------------------------------------
# Whole suites (slow).


def _spearman(gold, predicted):
    from scipy.stats import spearmanr

    return spearmanr(gold, predicted).statistic


def _from_tsv(path):
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    return [r[1] for r in rows], [r[2] for r in rows]


def _recomputed(task, trial):
    """The trial's headline metric recomputed from its predictions file, as a fraction."""
    if task == "nsmc":
        gold, predicted = _from_tsv(trial["predictions"]["dev"])
        return float(np.mean([g == p for g, p in zip(gold, predicted)]))
    if task == "korsts":
        gold, predicted = _from_tsv(trial["predictions"]["dev"])
        return _spearman(np.array(gold, float), np.array(predicted, float))
    from seqeval.metrics import f1_score

    from electra_tf.artifacts.tagged_predictions import read_tagged

    sentences = read_tagged(trial["predictions"]["dev_predictions.txt"])
    gold = [[w[1] for w in s] for s in sentences]
    predicted = [[w[2] for w in s] for s in sentences]
    return f1_score(gold, predicted, suffix=True)


@pytest.mark.slow
def test_koelectra_suite_runs_resumes_and_filters(tmp_path, pretrained_dir, capsys):
    data = koelectra_data(tmp_path / "data")
    out = tmp_path / "out"
    flags = [
        "--suite=koelectra",
        f"--data_dir={data}",
        f"--init_checkpoint={pretrained_dir}",
        f"--output_dir={out}",
        "--num_train_epochs=1",
        "--num_trials=2",
        "--learning_rate=1e-3",
        "--nosave_models",
    ]
    assert suite_command.main(flags) == 0
    first = capsys.readouterr().out
    suite = json.loads((out / "suite.json").read_text())
    assert list(suite["tasks"]) == ["nsmc", "naver-ner", "korsts"]
    assert list(suite["skipped"]) == ["paws", "kornli", "question-pair", "korquad", "hate-speech"]
    assert suite["skipped"]["paws"]["missing"][0] == os.path.join(
        data, "paws", "translated_train.tsv"
    )
    assert (suite["suite"], suite["model_size"], suite["recipe"]) == ("koelectra", "tiny", "small")
    assert suite["init_checkpoint"] == os.path.join(pretrained_dir, "discriminator.keras")
    assert "baseline" not in suite
    for name, entry in suite["tasks"].items():
        results = json.loads(open(entry["results"]).read())
        assert entry["results"] == str(out / name / "results.json")
        assert entry["trials"] == 2 == len(results["trials"])
        # The score: the median of the trials' metric recomputed from their predictions, x 100.
        recomputed = [_recomputed(name, t) for t in results["trials"]]
        assert entry["score"] == pytest.approx(100 * float(np.median(recomputed)), abs=1e-4), name
        assert (
            entry["metric"] == {"nsmc": "accuracy", "naver-ner": "f1", "korsts": "spearman"}[name]
        )
        best = results["trials"][results["best_trial"]]
        assert os.path.isfile(entry["predictions"])
        assert os.path.dirname(entry["predictions"]) == str(out / name / f"trial_{best['trial']}")
        assert entry["settings"]["learning_rate"] == 1e-3
        assert entry["settings"]["train_batch_size"] == 32  # KoELECTRA's small config
    table = (out / "suite.md").read_text().splitlines()
    ours = next(line for line in table if line.startswith("| ours: "))
    cells = [c.strip() for c in ours.strip("|").split("|")][1:]
    assert cells == [f"{suite['tasks'][n]['score']:.2f}" for n in ("nsmc", "naver-ner", "korsts")]
    assert "| published: KoELECTRA-Small-v3 | 89.36 | 85.40 | 80.79 |" in table
    assert "[1/3 nsmc] nsmc: train ratings_train.txt, test ratings_test.txt" in first
    assert "  paws: skipped (no " in first

    # Again: nothing trains, every task says so.
    started = time.perf_counter()
    assert suite_command.main(flags) == 0
    elapsed = time.perf_counter() - started
    second = capsys.readouterr().out
    assert "--- Trial" not in second and elapsed < 5, elapsed
    for number, name in enumerate(("nsmc", "naver-ner", "korsts"), 1):
        assert (
            f"[{number}/3 {name}] already finished: 2 trial(s) in {out / name / 'results.json'}; skipped."
            in second
        )
    assert json.loads((out / "suite.json").read_text())["tasks"] == suite["tasks"]

    # Some tasks only: the others are not selected (and nothing trains either).
    assert suite_command.main(flags + ["--tasks=korsts,nsmc"]) == 0
    third = capsys.readouterr().out
    assert "--- Trial" not in third and "[2/2 korsts] already finished" in third
    only = json.loads((out / "suite.json").read_text())
    assert list(only["tasks"]) == ["nsmc", "korsts"]
    assert only["not_selected"] == [
        "naver-ner",
        "paws",
        "kornli",
        "question-pair",
        "korquad",
        "hate-speech",
    ]
    assert list(only["skipped"]) == []


@pytest.mark.slow
def test_random_init_baseline_adds_a_row(tmp_path, pretrained_dir, capsys):
    data = koelectra_data(tmp_path / "data")
    out = tmp_path / "out"
    flags = [
        "--suite=koelectra",
        f"--data_dir={data}",
        f"--init_checkpoint={pretrained_dir}",
        f"--output_dir={out}",
        "--tasks=korsts",
        "--num_train_epochs=1",
        "--baseline=random_init",
        "--nosave_models",
    ]
    assert suite_command.main(flags) == 0
    said = capsys.readouterr().out
    assert "[1/1 korsts, random init] tiny model with freshly drawn weights" in said
    suite = json.loads((out / "suite.json").read_text())
    baseline = suite["baseline"]["random_init"]["tasks"]["korsts"]
    results = json.loads((out / "random_init" / "korsts" / "results.json").read_text())
    assert baseline["results"] == str(out / "random_init" / "korsts" / "results.json")
    assert results["settings"]["random_init"] is True
    assert (
        "random_init" not in json.loads((out / "korsts" / "results.json").read_text())["settings"]
    )
    assert baseline["score"] == pytest.approx(
        100 * _recomputed("korsts", results["trials"][0]), abs=1e-4
    )
    row = f"| random init, tiny (no pre-training) | {baseline['score']:.2f} |"
    assert row in (out / "suite.md").read_text().splitlines()


@pytest.mark.slow
def test_chinese_electra_suite_with_reading_comprehension(tmp_path, pretrained_dir):
    """Chinese-ELECTRA's finetuning_data/ layout; QA scores stay in the official scripts' percent."""
    root = tmp_path / "chinese" / "finetuning_data"
    for split, seed in (("train", 0), ("dev", 1)):
        rows = toy_sentences(8, seed)
        _write(
            root / "chnsenticorp" / f"{split}.tsv",
            ["label\ttext_a"] + [f"{y}\t{t}" for t, y in rows],
        )
    article = {
        "title": "t",
        "paragraphs": [
            {
                "id": "p0",
                "context": "the actor was very good",
                "qas": [
                    {
                        "id": f"q{i}",
                        "question": "who was good",
                        "answers": [{"text": "actor", "answer_start": 4}],
                    }
                    for i in range(3)
                ],
            }
        ],
    }
    for split in ("train", "dev"):
        _write(
            root / "cmrc2018" / f"{split}.json",
            [json.dumps({"version": "v1.0", "data": [article]})],
        )
    out = tmp_path / "out"
    options = SuiteOptions(
        suite="chinese-electra",
        data_dir=str(tmp_path / "chinese"),
        output_dir=str(out),
        num_train_epochs=1.0,
        max_seq_length=32,
    )
    base = FinetuneSettings(output_dir=str(out), save_models=False)
    summary = run_suite(options, resolve_pretrained(pretrained_dir), base, print_fn=lambda m: None)
    assert list(summary["tasks"]) == ["cmrc2018", "chnsenticorp"]
    assert list(summary["skipped"]) == ["drcd", "xnli", "lcqmc", "bqcorpus"]
    cmrc = summary["tasks"]["cmrc2018"]
    results = json.loads(open(cmrc["results"]).read())
    assert results["task"]["qa_metric"] == "cmrc2018"
    assert cmrc["scores"] == {
        "exact_match": results["median"]["exact_match"],
        "f1": results["median"]["f1"],
    }
    assert cmrc["predictions"].endswith("predictions.json") and os.path.isfile(cmrc["predictions"])
    # Every answer is scored: EM is the share of questions answered "actor" exactly.
    answers = json.loads(open(cmrc["predictions"]).read())
    assert cmrc["scores"]["exact_match"] == pytest.approx(
        100 * np.mean([a == "actor" for a in answers.values()])
    )
    senti = summary["tasks"]["chnsenticorp"]
    assert senti["settings"]["learning_rate"] == 3e-4  # Chinese-ELECTRA's small rate
    gold, predicted = _from_tsv(senti["predictions"])
    assert senti["score"] == pytest.approx(100 * np.mean([g == p for g, p in zip(gold, predicted)]))


def test_sample_files_are_split_into_koelectra_layout(tmp_path):
    """tools/koelectra_samples: the first rows train, the next ones are scored, headers kept."""
    from tools.koelectra_samples import lay_out

    samples = tmp_path / "samples"
    header = "genre\tfilename\tyear\tid\tscore\tsentence1\tsentence2"
    sts = [f"g\tf\t2012\t{i:04d}\t{i}.0\ta {i}\tb {i}" for i in range(5)]
    _write(samples / "korsts" / "sts-dev.tsv", [header] + sts)
    ner = [f"word{i}\tO" for i in range(5)]  # no header
    _write(samples / "naver-ner" / "test.tsv", ner)
    nsmc = _write(
        tmp_path / "ratings_test.txt", ["id\tdocument\tlabel"] + [f"{i}\tr{i}\t1" for i in range(6)]
    )
    said = []
    counts = lay_out(str(samples), nsmc, str(tmp_path / "data"), 3, 1, said.append)
    assert counts == {"nsmc": (3, 1), "naver-ner": (3, 1), "korsts": (3, 1)}

    def lines(*parts):
        return (tmp_path.joinpath("data", *parts)).read_text().splitlines()

    assert lines("korsts", "sts-train.tsv") == [header] + sts[:3]
    assert lines("korsts", "sts-test.tsv") == [header, sts[3]]
    assert lines("naver-ner", "train.tsv") == ner[:3] and lines("naver-ner", "test.tsv") == [ner[3]]
    assert lines("nsmc", "ratings_train.txt")[1:] == ["0\tr0\t1", "1\tr1\t1", "2\tr2\t1"]
    assert lines("nsmc", "ratings_test.txt") == ["id\tdocument\tlabel", "3\tr3\t1"]
    assert not (tmp_path / "data" / "paws").exists()
    assert any(line.startswith("paws: no single sample file in ") for line in said)
    # The layout is what the suite reads: KorSTS's dev file is the only one missing.
    present, skipped = plan_tasks(KOELECTRA, list(KOELECTRA.tasks), str(tmp_path / "data"))
    assert [t.name for t in present] == ["nsmc", "naver-ner", "korsts"]


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_sample_layout_refuses_a_missing_file_in_one_line(tmp_path):
    """tools/koelectra_samples with a missing NSMC file or samples folder: one line, exit 2."""
    samples = tmp_path / "samples"
    samples.mkdir()
    for args, fragment in (
        ([str(samples), str(tmp_path / "no.txt"), str(tmp_path / "out")], "is not a file"),
        (
            [str(tmp_path / "none"), str(tmp_path / "no.txt"), str(tmp_path / "out")],
            "not a directory",
        ),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "tools.koelectra_samples", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0]
        assert "Traceback" not in done.stderr
