"""The fine-tuning output directory: trial directories and the best trial with a saved model."""

import os

from electra_tf.artifacts.finetuning_dir import FinetuningDir, best_saved_trial, holds_saved_model
from electra_tf.artifacts.results import make_results, write_results

IDENTITY = {
    "task": {"name": "toy"},
    "init_checkpoint": "/d.keras",
    "vocab_file": "/v.txt",
    "settings": {},
}


def _save_placeholder_model(trial):
    os.makedirs(trial.path, exist_ok=True)
    for path in (trial.description_file, trial.weights_file):
        with open(path, "w", encoding="utf-8") as f:
            f.write("{}")


def _trial(number, f1):
    return {"trial": number, "seed": number, "dev": {"f1": f1}}


def test_best_trial_among_those_with_a_saved_model(tmp_path):
    run = FinetuningDir(str(tmp_path))
    write_results(
        run.results_file,
        make_results(
            IDENTITY, {}, "f1", [_trial(0, 70.0), _trial(1, 90.0), _trial(2, 80.0), _trial(3, 80.0)]
        ),
    )
    assert best_saved_trial(run.path) is None  # nothing saved
    for number in (0, 2, 3):
        _save_placeholder_model(run.trial(number))
    assert holds_saved_model(run.trial(2).path) and not holds_saved_model(run.trial(1).path)
    # Trial 1 scores best but saved nothing; 2 and 3 tie: the lower number wins.
    assert best_saved_trial(run.path) == run.trial(2)
    assert run.trial(2).path == os.path.join(str(tmp_path), "trial_2")


def test_no_results_no_best_trial(tmp_path):
    assert best_saved_trial(str(tmp_path)) is None
