"""results.json: one schema for every task, the older schemas still read, the best trial."""

import json

import numpy as np
import pytest

from electra_tf.artifacts.results import (
    FORMAT_VERSION,
    finished_trials,
    make_results,
    read_results,
    write_results,
)
from electra_tf.errors import RunError
from electra_tf.finetuning.question_answering.task import SquadTask

IDENTITY = {
    "task": {"name": "rte", "task_type": "classification"},
    "init_checkpoint": "/d.keras",
    "vocab_file": "/vocab.txt",
    "settings": {"learning_rate": 3e-4, "seed": 0},
}


def _trial(number, **dev):
    return {
        "trial": number,
        "seed": number,
        "steps": 10,
        "dev": dev,
        "epochs": [],
        "train_seconds": 1.0,
        "predict_seconds": 0.5,
        "model": None,
        "predictions": {},
    }


def test_round_trip_and_summary(tmp_path):
    trials = [
        _trial(2, accuracy=0.7, f1=0.1),
        _trial(0, accuracy=0.5, f1=0.3),
        _trial(1, accuracy=0.9, f1=0.2),
    ]
    results = make_results(IDENTITY, {"num_train_examples": 8}, "accuracy", trials)
    path = str(tmp_path / "results.json")
    write_results(path, results)
    assert read_results(path) == results
    with open(path, encoding="utf-8") as f:
        on_disk = json.load(f)
    assert list(on_disk) == [
        "format_version",
        "task",
        "init_checkpoint",
        "vocab_file",
        "settings",
        "data",
        "primary_metric",
        "trials",
        "median",
        "all",
        "best_trial",
    ]
    assert on_disk["format_version"] == FORMAT_VERSION
    assert [t["trial"] for t in on_disk["trials"]] == [0, 1, 2]
    assert on_disk["all"] == {"accuracy": [0.5, 0.9, 0.7], "f1": [0.3, 0.2, 0.1]}
    assert on_disk["median"] == {
        "accuracy": float(np.median([0.5, 0.9, 0.7])),
        "f1": float(np.median([0.3, 0.2, 0.1])),
    }
    assert on_disk["best_trial"] == 1


def test_a_metric_that_is_not_finite_is_written_as_strict_json_and_read_back(tmp_path):
    trials = [_trial(0, pearson=float("nan")), _trial(1, pearson=0.5), _trial(2, pearson=0.7)]
    path = str(tmp_path / "results.json")
    write_results(path, make_results(IDENTITY, {}, "pearson", trials))

    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    on_disk = json.loads(open(path).read(), parse_constant=refuse)
    assert on_disk["all"] == {"pearson": ["nan", 0.5, 0.7]}
    # Read back (a later trial added), the string is the number again.
    again = finished_trials(path, IDENTITY, 4)
    summary = make_results(IDENTITY, {}, "pearson", [*again, _trial(3, pearson=0.6)])
    assert np.isnan(summary["median"]["pearson"])


def test_best_trial_ties_go_to_the_lower_number_and_no_dev_data_to_trial_zero():
    tied = make_results(
        IDENTITY, {}, "f1", [_trial(3, f1=80.0), _trial(1, f1=80.0), _trial(2, f1=79.0)]
    )
    assert tied["best_trial"] == 1
    assert make_results(IDENTITY, {}, "accuracy", [_trial(1), _trial(0)])["best_trial"] == 0
    assert make_results(IDENTITY, {}, "accuracy", [])["best_trial"] is None


def test_older_classification_results_are_converted(tmp_path):
    old = {
        **IDENTITY,
        "num_train_examples": 8,
        "glue_score_metric": "accuracy",
        "trials": [
            {"trial": 0, "seed": 0, "dev": {"accuracy": 0.6}, "epochs": [], "train_seconds": 2.0},
            {"trial": 1, "seed": 1, "dev": {"accuracy": 0.8}, "epochs": [], "train_seconds": 2.0},
        ],
        "median": {"accuracy": 0.7},
        "all": {"accuracy": [0.6, 0.8]},
    }
    path = str(tmp_path / "results.json")
    write_results(path, old)
    results = read_results(path)
    assert results["primary_metric"] == "accuracy"
    assert results["data"] == {"num_train_examples": 8}
    assert results["best_trial"] == 1 and results["median"] == {"accuracy": pytest.approx(0.7)}
    assert {k: results[k] for k in IDENTITY} == IDENTITY
    # The same run, resumed: its finished trials are recognised.
    assert [t["trial"] for t in finished_trials(path, IDENTITY, 2)] == [0, 1]


def test_older_squad_results_are_converted(tmp_path):
    old = {
        "task": "squad",
        "squad_version": "2.0",
        "train_data": "train.json",
        "predict_data": "dev.json",
        "init_checkpoint": "/d.keras",
        "vocab_file": "/v.txt",
        "settings": {"version": "2.0", "doc_stride": 128},
        "num_train_questions": 6,
        "num_train_windows": 7,
        "skipped_train_questions": 0,
        "trials": [
            {
                "trial": 0,
                "seed": 0,
                "train_seconds": 1.0,
                "steps": 2,
                "scores": {"exact_match": 50.0, "f1": 60.0},
            }
        ],
        "median": {"exact_match": 50.0, "f1": 60.0},
        "exact_match": 50.0,
        "f1": 60.0,
    }
    path = str(tmp_path / "results.json")
    write_results(path, old)
    results = read_results(path)
    assert results["task"] == {
        "name": "squad20",
        "task_type": "question_answering",
        "squad_version": "2.0",
        "train_data": "train.json",
        "predict_data": "dev.json",
        "qa_metric": "squad",
    }
    assert results["settings"] == {"doc_stride": 128}
    assert results["data"] == {
        "num_train_questions": 6,
        "num_train_windows": 7,
        "skipped_train_questions": 0,
    }
    assert results["primary_metric"] == "f1" and results["best_trial"] == 0
    assert results["trials"][0]["dev"] == {"exact_match": 50.0, "f1": 60.0}
    assert "scores" not in results["trials"][0] and "f1" not in results


def test_finished_trials_refuses_another_run(tmp_path):
    path = str(tmp_path / "results.json")
    assert finished_trials(path, IDENTITY, 3) == []
    write_results(
        path,
        make_results(IDENTITY, {}, "accuracy", [_trial(0, accuracy=0.5), _trial(1, accuracy=0.6)]),
    )
    assert [t["trial"] for t in finished_trials(path, IDENTITY, 1)] == [0]
    other = {**IDENTITY, "settings": {"learning_rate": 1e-4, "seed": 0}}
    with pytest.raises(RunError, match="(?s)holds results of a different run.*learning_rate"):
        finished_trials(path, other, 3)


def test_question_answering_results_without_a_metric_were_scored_as_squad(tmp_path):
    task = {
        "name": "squad11",
        "task_type": "question_answering",
        "squad_version": "1.1",
        "train_data": "train.json",
        "predict_data": "dev.json",
    }
    identity = {**IDENTITY, "task": task}
    path = str(tmp_path / "results.json")
    write_results(path, make_results(identity, {}, "f1", [_trial(0, f1=50.0)]))
    upgrade = SquadTask.upgrade_description
    assert upgrade(read_results(path)["task"])["qa_metric"] == "squad"
    resumed = {**identity, "task": {**task, "qa_metric": "squad"}}
    assert [t["trial"] for t in finished_trials(path, resumed, 2, upgrade)] == [0]
    with pytest.raises(RunError, match="qa_metric"):
        finished_trials(path, {**identity, "task": {**task, "qa_metric": "korquad"}}, 2, upgrade)
