"""A fine-tuning output directory and its trial directories.

    results.json            every finished trial and their summary (see `results`)
    trial_<k>/              trial k (seed: the run's seed + k):
        model.json          the fine-tuned model's Keras config, and what its text
                            path needs (kind, task or SQuAD settings, length, casing)
        model.weights.h5    its weights (float32)
        vocab.txt           the vocabulary it was fine-tuned with
        dev_predictions.tsv `index gold prediction` of the scored split (classification,
                            regression; then every class's probability where a
                            metric ranks by them; `<split>_predictions.tsv` for
                            each other one)
        <TASK>.tsv          GLUE-format test predictions (classification, regression)
        predictions.json, nbest_predictions.json, null_odds.json   SQuAD answers
        dev_predictions.txt, test_predictions.txt   tagging: `word gold predicted` /
                            `word predicted` (see `tagged_predictions`)
        checkpoints/        training checkpoints while the trial runs
        history.json        its per-epoch entries while it runs
        tensorboard/        scalars
    predictions.json        (SQuAD) trial 0's answers, and null_odds.json for 2.0
    export/                 TF Serving exports of the best trial (see `serving_dir`)
    imported_checkpoint/    --init_checkpoint converted into a run directory

checkpoints/ and history.json go once the trial is in results.json.

Trials saved before `model.json` are still read: a classifier or regressor
as `model.keras` with `task.json`, a SQuAD model as `qa_model.json` with
`model.weights.h5`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import zipfile
from typing import Optional

from electra_tf.artifacts.files import Within, read_json, write_json
from electra_tf.artifacts.results import best_trial, read_results
from electra_tf.artifacts.run_dir import VOCAB_FILE

RESULTS_FILE = "results.json"
DESCRIPTION_FORMAT = 1
# The key of model.json holding the Keras config; every other key is the model's info.
_KERAS_CONFIG = "keras_config"


@dataclasses.dataclass(frozen=True)
class SavedModelDir:
    """A directory holding a fine-tuned model: a trial's, or `assets.extra/` of an export."""

    path: str

    description_file = Within("model.json")
    weights_file = Within("model.weights.h5")
    vocab_file = Within(VOCAB_FILE)


@dataclasses.dataclass(frozen=True)
class TrialDir(SavedModelDir):
    """The paths of one trial directory (nothing is created or checked)."""

    checkpoints = Within("checkpoints")
    history_file = Within("history.json")
    tensorboard = Within("tensorboard")

    def file(self, name: str) -> str:
        """A prediction file of the trial."""
        return os.path.join(self.path, name)


@dataclasses.dataclass(frozen=True)
class FinetuningDir:
    """The paths of one fine-tuning output directory (nothing is created or checked)."""

    path: str

    results_file = Within(RESULTS_FILE)
    # TF Serving exports go to `<export_base>/<model name>/<version>/`.
    export_base = Within("export")
    imported_checkpoint = Within("imported_checkpoint")

    def trial(self, number: int) -> TrialDir:
        return TrialDir(os.path.join(self.path, f"trial_{number}"))

    def file(self, name: str) -> str:
        """A file of the whole run (SQuAD's predictions.json)."""
        return os.path.join(self.path, name)


# ---------------------------------------------------------------------------
# The saved model.


@dataclasses.dataclass(frozen=True)
class SavedModel:
    """A fine-tuned model found on disk.

    Attributes:
        model_config: the Keras config to deserialize it from.
        weights_file: the file to load its weights from.
        info: what its text path needs: its task kind's name (`kind`; absent
            from models saved before model.json, whose kind is their
            class's), the casing, the length, and the task or the SQuAD
            settings.
    """

    model_config: dict
    weights_file: str
    info: dict


def write_description(saved: SavedModelDir, model_config: dict, info: dict) -> None:
    """Writes model.json: the Keras config and `info` (the weights are written beside it)."""
    write_json(
        saved.description_file,
        {"format_version": DESCRIPTION_FORMAT, _KERAS_CONFIG: model_config, **info},
    )


def read_saved_model(path: str) -> SavedModel:
    """The fine-tuned model saved in `path`, in this format or an earlier one.

    Raises:
        FileNotFoundError: there is none.
    """
    saved = SavedModelDir(path)
    if os.path.isfile(saved.description_file) and os.path.isfile(saved.weights_file):
        info = read_json(saved.description_file)
        del info["format_version"]
        return SavedModel(info.pop(_KERAS_CONFIG), saved.weights_file, info)
    legacy = _LegacyFiles(path)
    if legacy.holds_classifier:
        # A .keras file is a zip archive of the model's config.json and its weights.
        with zipfile.ZipFile(legacy.keras_file) as archive:
            model_config = json.loads(archive.read("config.json"))
        return SavedModel(model_config, legacy.keras_file, read_json(legacy.task_file))
    if legacy.holds_qa_model:
        return SavedModel(*_legacy_qa(legacy))
    raise FileNotFoundError(f"{path}: no fine-tuned model (model.json and model.weights.h5).")


def load_saved_model(path: str) -> tuple:
    """(the Keras model saved in `path`, its info), in this format or an earlier one.

    The model's class must be registered with Keras (`electra_tf.finetuning.kinds` defines
    every kind's; `electra_tf.register_keras_classes()` all of them).

    Raises:
        FileNotFoundError: no fine-tuned model is saved there.
    """
    import keras

    saved = read_saved_model(path)
    model = keras.saving.deserialize_keras_object(saved.model_config)
    model.load_weights(saved.weights_file)
    return model, saved.info


def holds_saved_model(path: str) -> bool:
    """Whether `path` holds a saved fine-tuned model (in any format)."""
    saved, legacy = SavedModelDir(path), _LegacyFiles(path)
    return (
        (os.path.isfile(saved.description_file) and os.path.isfile(saved.weights_file))
        or legacy.holds_classifier
        or legacy.holds_qa_model
    )


@dataclasses.dataclass(frozen=True)
class _LegacyFiles:
    """Where trials saved their models before model.json."""

    path: str

    keras_file = Within("model.keras")
    task_file = Within("task.json")
    qa_file = Within("qa_model.json")

    @property
    def holds_classifier(self) -> bool:
        return os.path.isfile(self.keras_file) and os.path.isfile(self.task_file)

    @property
    def holds_qa_model(self) -> bool:
        weights = SavedModelDir(self.path).weights_file
        return os.path.isfile(self.qa_file) and os.path.isfile(weights)


def _legacy_qa(legacy: _LegacyFiles) -> tuple[dict, str, dict]:
    """(Keras config, weights, info) of a SQuAD model saved as qa_model.json.

    The answer settings missing from the oldest of these come from the run's
    results.json.
    """
    info = read_json(legacy.qa_file)
    head = {key: info.pop(key) for key in ("encoder", "beam_size", "hidden_units")}
    model_config = {
        "module": "electra_tf.finetuning.question_answering.model",
        "class_name": "ElectraQA",
        "config": {"name": "qa", "trainable": True, **head},
        "registered_name": "electra_tf>ElectraQA",
    }
    results = read_results(
        os.path.join(os.path.dirname(os.path.abspath(legacy.path)), RESULTS_FILE)
    )
    for key in ("max_answer_length", "null_score_threshold"):
        if results and key in results["settings"]:
            info.setdefault(key, results["settings"][key])
    return (
        model_config,
        SavedModelDir(legacy.path).weights_file,
        info,
    )


# ---------------------------------------------------------------------------
# A trial in progress, and the best trial.


def read_history(trial: TrialDir) -> list[dict]:
    """The per-epoch entries recorded so far by a trial in progress ([] if none)."""
    return read_json(trial.history_file) or []


def write_history(trial: TrialDir, entries: list[dict]) -> None:
    """Records a trial's per-epoch entries (rewritten whole, atomically)."""
    os.makedirs(trial.path, exist_ok=True)
    write_json(trial.history_file, entries)


def clear_progress(trial: TrialDir) -> None:
    """Removes what a trial keeps only while it runs (checkpoints/, history.json)."""
    shutil.rmtree(trial.checkpoints, ignore_errors=True)
    if os.path.exists(trial.history_file):
        os.remove(trial.history_file)


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
