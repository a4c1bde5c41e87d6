"""Fine-tuning runs written by earlier code load, export and check with the current code.

`fixtures/finetuned/` was written by `fixtures/make_finetuned.py` at commit
d50acdc: for a classifier, a question-answering model and a tagger, the tiny
pre-trained run, the task's files, the fine-tuning output (results.json,
trial_0/) and the TF Serving export (`export.tar.xz`), with `expected.npz`
holding what that export's signatures answered. The slow test fine-tunes
again with the same command and compares the dev scores, the training
losses and the new export's answers with those.
"""

import json
import os
import subprocess
import tarfile

import numpy as np
import pytest
from fixtures.make_finetuned import RUNS, export_answers, finetune_command

from electra_tf.artifacts.finetuning_dir import best_saved_trial
from electra_tf.artifacts.results import read_results
from electra_tf.finetuning import kinds
from electra_tf.finetuning.saving import load_finetuned
from electra_tf.serving import check
from electra_tf.serving.exporter import export_checkpoint

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "finetuned")
KINDS = tuple(RUNS)
# Exporting or loading a question-answering or tagging export takes 10-20 s:
# the default suite takes the classifier, `-m slow` the others.
EXPORT_KINDS = [
    kind if kind == "classifier" else pytest.param(kind, marks=pytest.mark.slow) for kind in KINDS
]
MODEL_CLASSES = {
    "classifier": "ElectraClassifier",
    "question_answering": "ElectraQA",
    "tagger": "ElectraTagger",
}


def run_dir(kind: str) -> str:
    return os.path.join(FIXTURES, kind, "run")


def old_version_dir(kind: str, tmp_path) -> str:
    """The run's export, unpacked into `tmp_path`."""
    with tarfile.open(os.path.join(FIXTURES, kind, "export.tar.xz")) as archive:
        archive.extractall(tmp_path / "export", filter="data")
    return str(tmp_path / "export" / "1")


def expected_answers(kind: str) -> dict:
    with np.load(os.path.join(FIXTURES, kind, "expected.npz"), allow_pickle=True) as data:
        return dict(data)


def assert_same_answers(actual: dict, expected: dict) -> None:
    assert sorted(actual) == sorted(expected)
    for name, want in expected.items():
        got = actual[name]
        assert got.shape == want.shape, name
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("kind", KINDS)
def test_a_saved_trial_loads_as_its_kind(kind):
    model, info = load_finetuned(os.path.join(run_dir(kind), "trial_0"))
    assert type(model).__name__ == MODEL_CLASSES[kind]
    # Saved as "classifier" / "tagger", the names the kinds had then; loaded as today's.
    assert info["kind"] == kinds.kind_named(kind).KIND
    assert np.all([np.isfinite(w).all() for w in model.get_weights()])


@pytest.mark.parametrize("kind", KINDS)
def test_results_json_is_read_and_names_the_best_trial(kind):
    results = read_results(os.path.join(run_dir(kind), "results.json"))
    assert [t["trial"] for t in results["trials"]] == [0]
    assert results["median"] == {k: v[0] for k, v in results["all"].items()}
    assert best_saved_trial(run_dir(kind)).path == os.path.join(run_dir(kind), "trial_0")


@pytest.mark.parametrize("kind", EXPORT_KINDS)
def test_an_earlier_run_exports_to_the_same_answers(kind, tmp_path):
    version = export_checkpoint(run_dir(kind), str(tmp_path), "model")
    assert_same_answers(export_answers(version, kind), expected_answers(kind))


@pytest.mark.parametrize("kind", EXPORT_KINDS)
def test_an_earlier_export_is_read_by_the_check(kind, tmp_path):
    version = old_version_dir(kind, tmp_path)
    assert_same_answers(export_answers(version, kind), expected_answers(kind))
    reference = check.Reference.load(version)
    requests, expected, names = check.build_requests(reference)
    assert len(requests) == len(expected) == len(names) > 3
    # What the check expects of the first request (the in-process model on
    # the sample texts) comes from the export's own model and vocabulary.
    assert expected[0] is not None and all(np.size(v) for v in expected[0].values())


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_an_earlier_export_passes_the_check(kind, tmp_path):
    report = check.check_export(old_version_dir(kind, tmp_path))
    assert report.ok, "\n".join(report.lines)


def _epochs(results: dict) -> list:
    return [(e["epoch"], e["step"], e["train"], e["dev"]) for e in results["trials"][0]["epochs"]]


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_the_same_command_gives_the_same_scores_and_export(kind, tmp_path):
    out = str(tmp_path / "run")
    base = os.path.join(FIXTURES, kind)
    process = subprocess.run(
        finetune_command(
            kind, os.path.join(FIXTURES, "pretrained"), os.path.join(base, "data"), out
        ),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    with open(os.path.join(out, "results.json"), encoding="utf-8") as f:
        new = json.load(f)
    old = read_results(os.path.join(run_dir(kind), "results.json"))
    assert new["task"]["name"] == old["task"]["name"]
    assert new["data"] == old["data"]
    assert new["primary_metric"] == old["primary_metric"]
    for (epoch, step, train, dev), (old_epoch, old_step, old_train, old_dev) in zip(
        _epochs(new), _epochs(old), strict=True
    ):
        assert (epoch, step) == (old_epoch, old_step)
        assert sorted(train) == sorted(old_train)
        for name, value in train.items():
            assert value == pytest.approx(old_train[name], rel=1e-4, abs=1e-6), name
        assert dev == pytest.approx(old_dev, abs=1e-9)
    assert new["median"] == pytest.approx(old["median"], abs=1e-9)
    (name,) = os.listdir(os.path.join(out, "export"))
    assert_same_answers(
        export_answers(os.path.join(out, "export", name, "1"), kind), expected_answers(kind)
    )
