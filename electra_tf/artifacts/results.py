"""`results.json` of a fine-tuning run: one schema for classification, regression, SQuAD, tagging.

It is rewritten (atomically) after every trial, so a crash loses at most the
trial in progress, and a run of the same command skips the trials it lists.

Top level:

    format_version   2
    task             what is learned. Classification / regression: the task's
                     definition (name, task_type, label_names, metrics,
                     glue_score_metric, is_pair, num_train_epochs, label_scale).
                     SQuAD: name (squad11 / squad20), task_type
                     (question_answering), squad_version, train_data, predict_data.
                     Tagging: name, task_type (tagging), tag_names, tag_format
                     (prefix, suffix or plain), metrics, primary_metric,
                     num_train_epochs.
    init_checkpoint  the pre-trained discriminator file fine-tuned
    vocab_file       the vocabulary
    settings         the hyperparameters that define the run (not the ones a
                     resumed run may change: num_trials, eval_batch_size, ...)
    data             training data counts: num_train_examples (SQuAD:
                     num_train_questions, num_train_windows, skipped_train_questions;
                     tagging: num_train_sentences, num_train_words,
                     num_train_entities {type: count})
    primary_metric   the dev metric trials are compared by (GLUE: the paper's
                     metric for the task; SQuAD and tagging: f1; plain tags: accuracy)
    trials           the finished trials in trial order (below)
    median           {metric: median over the trials' final dev metrics}
    all              {metric: every trial's value, in trial order}
    best_trial       the trial with the highest primary metric (the lowest
                     number on a tie, so trial 0 without dev data); null
                     before the first trial

Each trial:

    trial, seed      its number k and its seed (the run's seed + k)
    steps            optimizer steps trained
    dev              final dev metrics ({} without dev data)
    epochs           per epoch: epoch, step, train (the losses of its last
                     step), dev (its dev metrics; {} when not evaluated then)
    train_seconds    seconds spent training in the process that finished the
                     trial (a resumed trial counts its last part)
    predict_seconds  seconds of the final evaluation and predictions
    model            the saved model's description file (null with
                     --nosave_models)
    predictions      {name: path} of the prediction files written

GLUE and tagging metrics are fractions (accuracy and F1 in [0, 1],
correlations in [-1, 1]; tagging: precision, recall, f1 micro at the entity
level, accuracy over words, then `<metric>/<type>` per entity type); SQuAD's
are percentages, as the official scripts print them.

Results written before this schema (see `upgrade_results`) are still read.
"""

from __future__ import annotations

import os
from typing import Callable, Optional

import numpy as np

from electra_tf.artifacts.files import read_json, write_json
from electra_tf.errors import RunError

FORMAT_VERSION = 2
# The keys that say which run the file belongs to: a run with other values is refused.
IDENTITY_KEYS = ("task", "init_checkpoint", "vocab_file", "settings")


def summarize(trials: list[dict], primary_metric: str) -> dict:
    """`median`, `all` and `best_trial` over the trials' final dev metrics."""
    names = []
    for trial in trials:
        names.extend(k for k in trial["dev"] if k not in names)
    values = {name: [t["dev"][name] for t in trials if name in t["dev"]] for name in names}
    best = best_trial(trials, primary_metric)
    return {
        # float(): a value that is not finite is stored as a string ("nan", see files.json_safe).
        "median": {name: float(np.median([float(x) for x in v])) for name, v in values.items()},
        "all": values,
        "best_trial": None if best is None else best["trial"],
    }


def best_trial(trials: list[dict], primary_metric: str) -> Optional[dict]:
    """The trial with the highest primary metric; ties and trials without it: lowest number."""
    if not trials:
        return None
    return max(
        trials, key=lambda t: (float(t["dev"].get(primary_metric, float("-inf"))), -t["trial"])
    )


def make_results(identity: dict, data: dict, primary_metric: str, trials: list[dict]) -> dict:
    """A complete results.json: the run's identity, its data, the trials and their summary.

    Args:
        identity: values for `IDENTITY_KEYS`.
        data: training data counts.
        primary_metric: the dev metric trials are compared by.
        trials: finished trial records (any order).
    """
    trials = sorted(trials, key=lambda t: t["trial"])
    return {
        "format_version": FORMAT_VERSION,
        **{k: identity[k] for k in IDENTITY_KEYS},
        "data": data,
        "primary_metric": primary_metric,
        "trials": trials,
        **summarize(trials, primary_metric),
    }


def read_results(path: str) -> Optional[dict]:
    """A results.json in this schema (older schemas converted), or None if there is none."""
    results = read_json(path)
    if results is None or "format_version" in results:
        return results
    upgraded = upgrade_results(results)
    return make_results(upgraded, upgraded["data"], upgraded["primary_metric"], upgraded["trials"])


def write_results(path: str, results: dict) -> None:
    """Writes results.json atomically."""
    write_json(path, results)


def finished_trials(
    path: str,
    identity: dict,
    num_trials: int,
    upgrade_task: Callable[[dict], dict] = lambda task: task,
) -> list[dict]:
    """The trials an earlier run of the same settings finished, to be skipped.

    Args:
        path: the run's results.json (it may not exist yet).
        identity: the new run's values for `IDENTITY_KEYS`.
        num_trials: trials wanted; finished trials beyond them are left out.
        upgrade_task: the task kind's reading of a `task` entry written by
            an earlier version (`TaskKind.upgrade_description`).

    Raises:
        RunError: `path` holds results of a run whose identity differs; it is
            left untouched.
    """
    previous = read_results(path)
    if previous is None:
        return []
    if isinstance(previous.get("task"), dict):
        previous["task"] = upgrade_task(previous["task"])
    differences = [
        f"{k}: {previous.get(k)!r} -> {identity[k]!r}"
        for k in IDENTITY_KEYS
        if previous.get(k) != identity[k]
    ]
    if differences:
        raise RunError(
            f"--output_dir={os.path.dirname(path)} holds results of a different run:"
            "\n  "
            + "\n  ".join(differences)
            + "\nChoose another --output_dir (or delete that one)."
        )
    return [t for t in previous["trials"] if t["trial"] < num_trials]


# ---------------------------------------------------------------------------
# The schemas before this one.


def upgrade_results(old: dict) -> dict:
    """Results of the two schemas written before `FORMAT_VERSION` 2, converted.

    Classification and regression runs wrote task (the definition),
    init_checkpoint, vocab_file, settings, num_train_examples,
    glue_score_metric, trials (trial, seed, dev, epochs, train_seconds,
    model, predictions), median and all. SQuAD runs wrote task ("squad"),
    squad_version, train_data, predict_data, init_checkpoint, vocab_file,
    settings (with the version), the training counts, trials (trial, seed,
    train_seconds, steps, scores, predict_seconds, model), median, and the
    median's metrics again at the top level.

    Returns:
        The identity, `data`, `primary_metric` and `trials` in this schema.
    """
    if old.get("task") == "squad":
        settings = {k: v for k, v in old.get("settings", {}).items() if k != "version"}
        version = old.get("squad_version", "1.1")
        # The task entry a SQuAD run of the current schema has (scored with SQuAD's metric).
        task = {
            "name": f"squad{version.replace('.', '')}",
            "task_type": "question_answering",
            "squad_version": version,
            "train_data": old.get("train_data"),
            "predict_data": old.get("predict_data"),
            "qa_metric": "squad",
        }
        data = {
            k: old[k]
            for k in ("num_train_questions", "num_train_windows", "skipped_train_questions")
            if k in old
        }
        trials = [
            {**{k: v for k, v in t.items() if k != "scores"}, "dev": t.get("scores", {})}
            for t in old.get("trials", [])
        ]
        primary_metric = "f1"
    else:
        settings, task = old.get("settings", {}), old.get("task")
        data = (
            {"num_train_examples": old["num_train_examples"]} if "num_train_examples" in old else {}
        )
        trials = [{**t, "dev": t.get("dev", {})} for t in old.get("trials", [])]
        primary_metric = old.get("glue_score_metric") or next(iter(old.get("median", {})), None)
    return {
        "task": task,
        "init_checkpoint": old.get("init_checkpoint"),
        "vocab_file": old.get("vocab_file"),
        "settings": settings,
        "data": data,
        "primary_metric": primary_metric,
        "trials": trials,
    }
