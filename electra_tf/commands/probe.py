"""Linear probe of a pre-trained encoder: frozen features, logistic regression, dev score.

    python -m electra_tf.commands.probe --init_checkpoint=runs/small-builtin \\
        --task=sst2 --data_dir=glue_data
    python -m electra_tf.commands.probe --init_checkpoint=runs/ko \\
        --train_file=train.tsv --dev_file=dev.tsv --text_column=document

The encoder is not trained: every example becomes the mean of its final
hidden states, and a logistic regression (regularisation chosen on a tenth of
the training data) is fitted on the training split and scored on the dev
split with the task's metrics. There is no fine-tuning noise, so two
pre-trained models (or one and no pre-training) are compared in minutes.
<output_dir>/results.json has the fine-tuning results schema, with one
trial; re-running with the same flags reuses it.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Optional

import numpy as np
from absl import app, flags, logging

from electra_tf import cli
from electra_tf.config import flag_field
from electra_tf.finetuning.kind.files import QUOTINGS

WORKING_DIR = os.getcwd()


@dataclasses.dataclass
class ProbeOptions:
    """The command's flags."""

    init_checkpoint: Optional[str] = flag_field(
        None,
        "Pre-training run directory, its export/ directory or the discriminator .keras file.",
        required=True,
    )
    task: Optional[str] = flag_field(
        None, "GLUE task name (with --data_dir), or the name of your task (with --train_file)."
    )
    data_dir: Optional[str] = flag_field(
        None, "GLUE data in the standard layout (SST-2/, QNLI/, ...)."
    )
    train_file: Optional[str] = flag_field(None, "Your training data: .csv, .tsv/.txt or .jsonl.")
    dev_file: Optional[str] = flag_field(None, "Your dev data (same format): what is scored.")
    text_column: str = flag_field("text", "Column of the (first) text.")
    text_pair_column: Optional[str] = flag_field(None, "Column of the second text of a pair task.")
    label_column: str = flag_field("label", "Column of the label.")
    quoting: str = flag_field(
        "csv",
        "CSV/TSV files: csv = fields may be quoted; none = every character is literal.",
        choices=QUOTINGS,
    )
    max_seq_length: int = flag_field(128, "Tokens per example, special tokens included.")
    max_train_examples: Optional[int] = flag_field(
        None, "Fit on this many training examples drawn with a fixed seed (default: all)."
    )
    batch_size: int = flag_field(64, "Examples per forward pass.")
    seed: int = flag_field(0, "Which tenth of the training data chooses the regularisation.")
    output_dir: Optional[str] = flag_field(None, "Default: runs/probe/<task>-<checkpoint name>.")


cli.define_option_flags(ProbeOptions)
FLAGS = flags.FLAGS


def _say(message: str) -> None:
    print(message, flush=True)


def _load_task():
    from electra_tf.finetuning.classification import data as tasks

    if FLAGS.train_file:
        if not FLAGS.dev_file:
            raise app.UsageError("--train_file needs --dev_file: the probe is scored on it.")
        options = tasks.FileTaskOptions(
            text_column=FLAGS.text_column,
            text_pair_column=FLAGS.text_pair_column,
            label_column=FLAGS.label_column,
            index_column=None,
            task_type="classification",
            labels=None,
            quoting=FLAGS.quoting,
        )
        return tasks.load_user_files(
            FLAGS.task or "custom", options, FLAGS.train_file, FLAGS.dev_file, None
        )
    if FLAGS.task is None or FLAGS.data_dir is None:
        raise app.UsageError("Give --task with --data_dir (GLUE), or --train_file and --dev_file.")
    task = tasks.glue_task(FLAGS.task)
    return task, tasks.load_glue_dir(task, FLAGS.data_dir, warn=_say)


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    from electra_tf.artifacts.finetuning_dir import FinetuningDir
    from electra_tf.artifacts.pretrained import (
        Pretrained,
        load_discriminator,
        resolve_pretrained,
        run_name,
    )
    from electra_tf.artifacts.results import make_results, read_results, write_results
    from electra_tf.errors import RunError
    from electra_tf.finetuning import probe
    from electra_tf.finetuning.classification.data import REGRESSION
    from electra_tf.finetuning.classification.task import encode_split
    from electra_tf.finetuning.kind import metrics
    from electra_tf.finetuning.kind.files import TaskDataError
    from electra_tf.training.finetuning_loop import checkpoint_tokenizer

    try:
        pretrained: Pretrained = resolve_pretrained(FLAGS.init_checkpoint)
        task, data = _load_task()
        if task.task_type == REGRESSION:
            raise RunError(f"--task={task.name} is a regression task; the probe classifies.")
        dev = data.dev.get("dev")
        if dev is None or dev.labels is None:
            raise RunError(f"--task={task.name}: no labelled dev split to score the probe on.")
        tokenizer = checkpoint_tokenizer(pretrained, FLAGS.max_seq_length)
    except (RunError, TaskDataError) as error:
        raise app.UsageError(str(error))
    output_dir = FLAGS.output_dir or os.path.join(
        WORKING_DIR, "runs", "probe", f"{task.name}-{run_name(pretrained.model_file)}"
    )
    results_file = FinetuningDir(output_dir).results_file
    train = data.train
    if FLAGS.max_train_examples:
        train = train.sample(FLAGS.max_train_examples)
    settings = {
        "probe": "logistic_regression",
        "pooling": "mean",
        "c_grid": list(probe.C_GRID),
        "max_seq_length": FLAGS.max_seq_length,
        "seed": FLAGS.seed,
        "max_train_examples": FLAGS.max_train_examples,
    }
    identity = {
        "task": task.to_dict(),
        "init_checkpoint": os.path.abspath(pretrained.model_file),
        "vocab_file": os.path.abspath(pretrained.vocab_file),
        "settings": settings,
    }
    previous = read_results(results_file)
    if previous and all(previous.get(k) == v for k, v in identity.items()) and previous["trials"]:
        _say(f"Probe finished earlier: {results_file}")
        return

    started = time.perf_counter()
    encoder = load_discriminator(pretrained.model_file).encoder
    pad_id = tokenizer.special_ids["pad_id"]
    pooled = {}
    for name, split in (("train", train), ("dev", dev)):
        encoded = encode_split(split, tokenizer, FLAGS.max_seq_length).encoded
        pooled[name] = probe.mean_pooled_features(encoder, encoded, FLAGS.batch_size, pad_id)
        _say(f"Features of {len(split):,} {name} examples ({time.perf_counter() - started:.0f}s)")
    fit = probe.fit_logistic_regression(pooled["train"], train.labels, pooled["dev"], FLAGS.seed)
    scores = metrics.compute(task.metrics, dev.labels, fit.predictions)
    majority = float((dev.labels == np.bincount(train.labels).argmax()).mean())
    trial = {
        "trial": 0,
        "seed": FLAGS.seed,
        "steps": 0,
        "dev": scores,
        "epochs": [],
        "train_seconds": time.perf_counter() - started,
        "predict_seconds": 0.0,
        "model": None,
        "predictions": {},
        "probe_c": fit.c,
        "probe_held_out_accuracy": {str(c): a for c, a in fit.held_out_accuracy.items()},
        "majority_class_accuracy": majority,
    }
    results = make_results(
        identity, {"num_train_examples": len(train)}, task.glue_score_metric, [trial]
    )
    os.makedirs(output_dir, exist_ok=True)
    write_results(results_file, results)
    _say(
        f"Linear probe on {task.name} (C={fit.c:g}): "
        + ", ".join(f"{k} {100 * v:.2f}" for k, v in scores.items())
        + f" (majority class: accuracy {100 * majority:.2f})"
    )
    _say(f"Results: {results_file}")


def run() -> None:
    """`python -m electra_tf.commands.probe`."""
    cli.run(main, __name__)


if __name__ == "__main__":
    run()
