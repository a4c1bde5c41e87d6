"""A fine-tuning output directory and its trial directories.

    results.json          every finished trial and their summary (see `results`)
    trial_<k>/            trial k (seed: the run's seed + k):
        model.keras       a classifier or regressor (float32), with task.json:
        task.json         the task, casing and length its text path needs
        qa_model.json     a SQuAD model's encoder config, head and text settings,
        model.weights.h5  with its weights
        vocab.txt         the vocabulary it was fine-tuned with
        <TASK>.tsv        GLUE-format test predictions
        predictions.json, null_odds.json, nbest_predictions.json   SQuAD answers
        checkpoints/      training checkpoints while the trial runs
        tensorboard/      scalars
    predictions.json      (SQuAD) trial 0's answers, and null_odds.json for 2.0
    export/               TF Serving exports of the best trial (see `serving_dir`)
    imported_checkpoint/  --init_checkpoint converted into a run directory
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

from electra_tf.artifacts.results import best_trial, read_results
from electra_tf.artifacts.run_dir import VOCAB_FILE

RESULTS_FILE = "results.json"


@dataclasses.dataclass(frozen=True)
class SavedModelDir:
    """A directory holding a fine-tuned model: a trial's, or `assets.extra/` of an export."""

    path: str

    @property
    def keras_file(self) -> str:
        return os.path.join(self.path, "model.keras")

    @property
    def task_file(self) -> str:
        return os.path.join(self.path, "task.json")

    @property
    def qa_description_file(self) -> str:
        return os.path.join(self.path, "qa_model.json")

    @property
    def weights_file(self) -> str:
        return os.path.join(self.path, "model.weights.h5")

    @property
    def vocab_file(self) -> str:
        return os.path.join(self.path, VOCAB_FILE)

    @property
    def holds_classifier(self) -> bool:
        return os.path.isfile(self.keras_file) and os.path.isfile(self.task_file)

    @property
    def holds_qa_model(self) -> bool:
        return os.path.isfile(self.qa_description_file) and os.path.isfile(self.weights_file)


@dataclasses.dataclass(frozen=True)
class TrialDir(SavedModelDir):
    """The paths of one trial directory (nothing is created or checked)."""

    @property
    def checkpoints(self) -> str:
        return os.path.join(self.path, "checkpoints")

    @property
    def tensorboard(self) -> str:
        return os.path.join(self.path, "tensorboard")

    def file(self, name: str) -> str:
        """A prediction file of the trial."""
        return os.path.join(self.path, name)


@dataclasses.dataclass(frozen=True)
class FinetuningDir:
    """The paths of one fine-tuning output directory (nothing is created or checked)."""

    path: str

    @property
    def results_file(self) -> str:
        return os.path.join(self.path, RESULTS_FILE)

    @property
    def export_base(self) -> str:
        """TF Serving exports go to `<export_base>/<model name>/<version>/`."""
        return os.path.join(self.path, "export")

    @property
    def imported_checkpoint(self) -> str:
        return os.path.join(self.path, "imported_checkpoint")

    def trial(self, number: int) -> TrialDir:
        return TrialDir(os.path.join(self.path, f"trial_{number}"))

    def file(self, name: str) -> str:
        """A file of the whole run (SQuAD's predictions.json)."""
        return os.path.join(self.path, name)


def holds_saved_model(path: str) -> bool:
    """Whether `path` holds a saved fine-tuned model."""
    saved = SavedModelDir(path)
    return saved.holds_classifier or saved.holds_qa_model


def best_saved_trial(path: str) -> Optional[TrialDir]:
    """The trial with the best dev score among those with a saved model (None: no such trial).

    The score is the run's primary metric (see `results.best_trial`).
    """
    run = FinetuningDir(path)
    results = read_results(run.results_file)
    if results is None:
        return None
    saved = [t for t in results["trials"] if holds_saved_model(run.trial(t["trial"]).path)]
    best = best_trial(saved, results["primary_metric"])
    return None if best is None else run.trial(best["trial"])
