"""Fine-tuning runs: trials from one pre-trained checkpoint, dev metrics, results, predictions.

The output directory and results.json are described in
`electra_tf.artifacts.finetuning_dir` and `electra_tf.artifacts.results`.
results.json is rewritten after every trial, so a crash loses at most the
trial in progress; running the same command again skips finished trials.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import time
from typing import Callable, Optional

import keras
import numpy as np
import tensorflow as tf

from electra_tf.artifacts.files import atomic_open
from electra_tf.artifacts.finetuning_dir import FinetuningDir
from electra_tf.artifacts.pretrained import Pretrained, load_discriminator
from electra_tf.artifacts.results import finished_trials, make_results, write_results
from electra_tf.errors import RunError
from electra_tf.finetuning import features, metrics
from electra_tf.finetuning.model import build_classifier, save_finetuned
from electra_tf.finetuning.optimization import (DEFAULT_LAYERWISE_DECAY, DEFAULT_LEARNING_RATES,
                                                create_optimizer, learning_rate_schedule)
from electra_tf.finetuning.tasks import REGRESSION, Split, Task, TaskData
from electra_tf.training.callbacks import ProgressMonitor, format_duration

# Settings that may change between a run and its resumption.
_RESUMABLE = ("num_trials", "output_dir", "log_every_steps", "save_models", "eval_batch_size")


@dataclasses.dataclass
class FinetuneSettings:
    """Hyperparameters of a fine-tuning run (defaults: paper Table 7).

    None for `learning_rate`, `layerwise_lr_decay` and `num_train_epochs`
    means: the default for the model size / task (see `resolve`).
    """

    output_dir: str
    model_size: Optional[str] = None
    max_seq_length: int = 128
    train_batch_size: int = 32
    eval_batch_size: int = 32
    learning_rate: Optional[float] = None
    num_train_epochs: Optional[float] = None
    warmup_proportion: float = 0.1
    layerwise_lr_decay: Optional[float] = None
    layerwise_lr_decay_quirk: bool = False
    weight_decay_rate: float = 0.0
    clip_norm: float = 1.0
    num_trials: int = 1
    seed: int = 0
    double_unordered: bool = False
    log_every_steps: int = 50
    save_models: bool = True
    # Train on this many examples drawn from the training set (None: all of it).
    max_train_examples: Optional[int] = None

    def resolve(self, task: Task, model_size: str) -> "FinetuneSettings":
        """Fills the size- and task-dependent defaults and checks every value."""
        resolved = dataclasses.replace(self, model_size=model_size)
        if resolved.learning_rate is None:
            resolved.learning_rate = DEFAULT_LEARNING_RATES[model_size]
        if resolved.layerwise_lr_decay is None:
            resolved.layerwise_lr_decay = DEFAULT_LAYERWISE_DECAY[model_size]
        if resolved.num_train_epochs is None:
            resolved.num_train_epochs = task.num_train_epochs
        check_settings(resolved, ("max_seq_length", "train_batch_size", "eval_batch_size",
                                  "num_trials", "log_every_steps"))
        if resolved.max_train_examples is not None and resolved.max_train_examples <= 0:
            raise RunError(f"--max_train_examples={resolved.max_train_examples}: must be a "
                           "positive integer.")
        return resolved


def check_settings(settings, positive_integers) -> None:
    """Raises RunError naming the flag of the first impossible fine-tuning setting.

    Args:
        settings: resolved settings (GLUE or SQuAD) with the optimisation fields.
        positive_integers: names of the fields that must be positive integers.
    """
    for name in positive_integers:
        if getattr(settings, name) <= 0:
            raise RunError(f"--{name}={getattr(settings, name)}: must be a positive integer.")
    checks = [("learning_rate", settings.learning_rate > 0, "must be > 0"),
              ("num_train_epochs", settings.num_train_epochs > 0, "must be > 0"),
              ("warmup_proportion", 0 <= settings.warmup_proportion < 1, "must be in [0, 1)"),
              ("layerwise_lr_decay", 0 < settings.layerwise_lr_decay <= 1, "must be in (0, 1]"),
              ("weight_decay_rate", settings.weight_decay_rate >= 0, "must be >= 0"),
              ("clip_norm", getattr(settings, "clip_norm", 0) >= 0, "must be >= 0"),
              ("seed", 0 <= settings.seed < 2 ** 31, "must be in [0, 2**31)")]
    for name, ok, rule in checks:
        if not ok:
            raise RunError(f"--{name}={getattr(settings, name)}: {rule}.")


def check_vocab(encoder, tokenizer, vocab_flag_given: bool) -> None:
    """Refuses a vocabulary whose size differs from the checkpoint's embedding table."""
    if encoder.vocab_size != tokenizer.vocab_size:
        flag = "--vocab_file" if vocab_flag_given else "the checkpoint's vocab.txt"
        raise RunError(f"{flag} ({tokenizer.vocab_file}) has {tokenizer.vocab_size} tokens but the "
                       f"checkpoint's embeddings have {encoder.vocab_size}; use the vocab.txt the "
                       "model was pre-trained with.")


# ---------------------------------------------------------------------------
# Data -> features.

@dataclasses.dataclass
class EncodedSplit:
    """A split tokenized for the model."""

    split: Split
    encoded: list

    def dataset(self, batch_size: int, task: Task, shuffle_seed=None, repeat=False,
                pad_id: int = 0, with_labels: bool = True) -> tf.data.Dataset:
        labels = None
        if with_labels and self.split.labels is not None:
            labels = self.split.labels
            labels = (labels / task.label_scale).astype(np.float32) if task.task_type == REGRESSION \
                else labels.astype(np.int32)
        return features.make_dataset(self.encoded, labels, batch_size, pad_id, shuffle_seed, repeat)


def encode_split(split: Split, tokenizer, max_seq_length: int,
                 double_unordered: bool = False) -> EncodedSplit:
    """Tokenizes a split; `double_unordered` appends every pair in the B, A order too."""
    encoded = features.encode(tokenizer, split.texts_a, split.texts_b, max_seq_length)
    if double_unordered and split.texts_b is not None:
        swapped = features.encode(tokenizer, split.texts_b, split.texts_a, max_seq_length)
        split = dataclasses.replace(
            split, texts_a=split.texts_a + split.texts_b, texts_b=split.texts_b + split.texts_a,
            labels=None if split.labels is None else np.concatenate([split.labels, split.labels]),
            indices=split.indices + split.indices)
        encoded = encoded + swapped
    return EncodedSplit(split, encoded)


def predict(model, encoded: EncodedSplit, task: Task, batch_size: int,
            pad_id: int = 0) -> np.ndarray:
    """Predicted class ids [N] (int), or regression values [N] in the label scale."""
    outputs = model.predict(encoded.dataset(batch_size, task, pad_id=pad_id, with_labels=False),
                            verbose=0)
    if task.task_type == REGRESSION:
        return np.asarray(outputs, np.float64).reshape(-1) * task.label_scale
    return np.argmax(outputs, axis=-1)


def evaluate(model, dev: dict[str, EncodedSplit], task: Task, batch_size: int,
             pad_id: int = 0) -> dict[str, float]:
    """Dev metrics; splits other than `dev` get their name's suffix (`accuracy_mismatched`)."""
    results = {}
    for name, encoded in dev.items():
        suffix = "" if name == "dev" else "_" + name.replace("dev_", "")
        scores = metrics.compute(task.metrics, encoded.split.labels,
                                 predict(model, encoded, task, batch_size, pad_id))
        results.update({f"{k}{suffix}": v for k, v in scores.items()})
    return results


def write_predictions(path: str, split: Split, predictions: np.ndarray, task: Task) -> None:
    """GLUE submission format: a header `index<TAB>prediction`, then one line per example."""
    with atomic_open(path) as f:
        f.write("index\tprediction\n")
        for index, value in zip(split.indices, predictions):
            if task.task_type == REGRESSION:
                text = f"{float(value):.3f}"
            else:
                text = task.label_names[int(value)]
            f.write(f"{index}\t{text}\n")


# ---------------------------------------------------------------------------
# Results file.

def format_table(results: dict) -> str:
    """The trials and their median as a text table (metrics in percent)."""
    trials = results["trials"]
    names = list(results["median"])
    header = ["trial", "seed"] + names
    rows = [[str(t["trial"]), str(t["seed"])] + [f"{100 * t['dev'].get(n, float('nan')):.2f}"
                                                for n in names] for t in trials]
    rows.append(["median", ""] + [f"{100 * results['median'][n]:.2f}" for n in names])
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in [header] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Training.

class _EpochEnd(keras.callbacks.Callback):
    """Dev evaluation after every epoch (console + TensorBoard); stops at `total_steps`."""

    def __init__(self, run_eval: Callable[[], dict], writer, total_steps: int, num_epochs: int,
                 print_fn):
        super().__init__()
        self.run_eval = run_eval
        self.writer = writer
        self.total_steps = total_steps
        self.num_epochs = num_epochs
        self.print_fn = print_fn
        self.history: list[dict] = []

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) >= self.total_steps:
            self.model.stop_training = True  # a fractional last epoch

    def on_epoch_end(self, epoch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        scores = self.run_eval()
        entry = {"epoch": epoch + 1, "step": step,
                 "train": {k: float(v) for k, v in (logs or {}).items()}, "dev": scores}
        self.history.append(entry)
        if scores:
            with self.writer.as_default(step=step):
                for name, value in scores.items():
                    tf.summary.scalar(f"dev/{name}", value)
            self.writer.flush()
            shown = ", ".join(f"{k} {100 * v:.2f}" for k, v in scores.items())
            self.print_fn(f"epoch {epoch + 1}/{self.num_epochs} (step {step}) dev: {shown}")
        else:
            self.print_fn(f"epoch {epoch + 1}/{self.num_epochs} (step {step}) done "
                          "(no dev set)")


def _settings_dict(settings: FinetuneSettings) -> dict:
    values = {k: v for k, v in dataclasses.asdict(settings).items() if k not in _RESUMABLE}
    if values["max_train_examples"] is None:  # results written before the option still match
        del values["max_train_examples"]
    return values


def run_finetuning(task: Task, data: TaskData, pretrained: Pretrained, settings: FinetuneSettings,
                   vocab_flag_given: bool = False, print_fn=print) -> dict:
    """Runs `settings.num_trials` trials and returns the results (also in results.json).

    Each trial reloads the pre-trained weights, builds a new head with seed
    `seed + trial`, trains, evaluates on dev after every epoch, saves the model
    and writes test predictions.

    Raises:
        RunError: the output directory holds a run with other settings, or
            the vocabulary does not fit the checkpoint.
    """
    from electra_tf.tokenization import VocabError, WordPieceTokenizer

    settings = settings.resolve(task, pretrained.config.model_size)
    config = pretrained.config
    try:
        tokenizer = WordPieceTokenizer(pretrained.vocab_file, config.do_lower_case,
                                       config.resolved_strip_accents)
    except VocabError as error:
        raise RunError(f"{'--vocab_file' if vocab_flag_given else 'vocab.txt'}: {error}")
    if config.model.vocab_size != tokenizer.vocab_size:  # before any work; rechecked on load
        flag = "--vocab_file" if vocab_flag_given else "the checkpoint's vocab.txt"
        raise RunError(f"{flag} ({tokenizer.vocab_file}) has {tokenizer.vocab_size} tokens but the "
                       f"checkpoint was pre-trained with {config.model.vocab_size}; use the "
                       "vocab.txt the model was pre-trained with.")
    if settings.max_seq_length > config.model.max_position_embeddings:
        raise RunError(f"--max_seq_length={settings.max_seq_length} exceeds the checkpoint's "
                       f"{config.model.max_position_embeddings} position embeddings.")

    os.makedirs(settings.output_dir, exist_ok=True)
    output = FinetuningDir(settings.output_dir)
    results_path = output.results_file
    identity = {"task": task.to_dict(), "init_checkpoint": pretrained.model_file,
                "vocab_file": os.path.abspath(pretrained.vocab_file),
                "settings": _settings_dict(settings)}
    if settings.max_train_examples is not None and settings.max_train_examples < len(data.train):
        print_fn(f"Training on {settings.max_train_examples:,} of the {len(data.train):,} "
                 "training examples (--max_train_examples; the same draw for every run).")
        data = dataclasses.replace(data, train=data.train.sample(settings.max_train_examples))
    trials = finished_trials(results_path, identity, settings.num_trials)
    data_counts = {"num_train_examples": len(data.train)}

    print_fn(f"Task {task.name} ({task.task_type}"
             + (f", labels {', '.join(task.label_names)}" if task.label_names else "") + "): "
             f"{len(data.train):,} train, "
             + ", ".join(f"{len(s):,} {n}" for n, s in data.dev.items())
             + "".join(f", {len(s):,} test ({n})" for n, s in data.test.items()))
    print_fn("Tokenizing...")
    train = encode_split(data.train, tokenizer, settings.max_seq_length,
                         settings.double_unordered)
    dev = {name: encode_split(split, tokenizer, settings.max_seq_length)
           for name, split in data.dev.items()}
    test = {name: encode_split(split, tokenizer, settings.max_seq_length)
            for name, split in data.test.items()}
    truncated = sum(len(ids) == settings.max_seq_length for ids, _ in train.encoded)
    print_fn(f"Training examples: {len(train.encoded):,}"
             + (" (both orders of every pair)" if settings.double_unordered else "")
             + f"; {truncated:,} reach --max_seq_length={settings.max_seq_length}.")

    steps_per_epoch = math.ceil(len(train.encoded) / settings.train_batch_size)
    total_steps = max(1, int(round(steps_per_epoch * settings.num_train_epochs)))
    num_epochs = math.ceil(total_steps / steps_per_epoch)
    print_fn(f"{settings.model_size} model, lr {settings.learning_rate:g}, layer-wise decay "
             f"{settings.layerwise_lr_decay:g}"
             + (" (original code's top-layer decay^2)" if settings.layerwise_lr_decay_quirk else "")
             + f", weight decay {settings.weight_decay_rate:g}, batch {settings.train_batch_size},"
             f" {settings.num_train_epochs:g} epochs = {total_steps} steps, "
             f"{settings.num_trials} trial(s).")
    finished = {t["trial"] for t in trials}
    pad_id = tokenizer.pad_id

    for trial in range(settings.num_trials):
        if trial in finished:
            print_fn(f"Trial {trial}: already finished (in {results_path}), skipped.")
            continue
        seed = settings.seed + trial
        trial_dir = output.trial(trial)
        print_fn(f"--- Trial {trial + 1}/{settings.num_trials} (seed {seed}) ---")
        started = time.perf_counter()
        keras.backend.clear_session()
        keras.utils.set_random_seed(seed)
        encoder = load_discriminator(pretrained.model_file).encoder
        check_vocab(encoder, tokenizer, vocab_flag_given)
        model = build_classifier(encoder, task.num_outputs, task.task_type == REGRESSION, seed)
        optimizer = create_optimizer(
            model, encoder.num_layers, settings.learning_rate, total_steps,
            settings.warmup_proportion, settings.layerwise_lr_decay,
            settings.weight_decay_rate, settings.layerwise_lr_decay_quirk, settings.clip_norm)
        model.compile(optimizer=optimizer, jit_compile=False)
        schedule = learning_rate_schedule(settings.learning_rate, total_steps,
                                          settings.warmup_proportion)
        writer = tf.summary.create_file_writer(trial_dir.tensorboard)
        progress = ProgressMonitor(writer, total_steps, settings.train_batch_size,
                                   settings.log_every_steps, schedule,
                                   print_fn=print_fn, console_keys=("loss", "accuracy"))
        epoch_end = _EpochEnd(lambda: evaluate(model, dev, task, settings.eval_batch_size, pad_id),
                              writer, total_steps, num_epochs, print_fn)
        train_data = train.dataset(settings.train_batch_size, task, shuffle_seed=seed,
                                   repeat=True, pad_id=pad_id)
        model.fit(train_data, epochs=num_epochs, steps_per_epoch=steps_per_epoch,
                  callbacks=[progress, epoch_end], verbose=0)
        train_seconds = time.perf_counter() - started
        started = time.perf_counter()
        predictions = {}
        for name, encoded in test.items():
            path = trial_dir.file(f"{name}.tsv")
            os.makedirs(trial_dir.path, exist_ok=True)
            write_predictions(path, encoded.split,
                              predict(model, encoded, task, settings.eval_batch_size, pad_id), task)
            predictions[name] = path
        task_info = {"task": task.to_dict(), "max_seq_length": settings.max_seq_length,
                     "do_lower_case": config.do_lower_case,
                     "strip_accents": config.resolved_strip_accents,
                     "regression_output_scale": task.label_scale}
        model_file = None
        if settings.save_models:
            model_file = save_finetuned(model, trial_dir.path, task_info)
            shutil.copyfile(pretrained.vocab_file, trial_dir.vocab_file)
        trials.append({"trial": trial, "seed": seed, "steps": total_steps,
                       "dev": epoch_end.history[-1]["dev"] if epoch_end.history else {},
                       "epochs": epoch_end.history, "train_seconds": round(train_seconds, 1),
                       "predict_seconds": round(time.perf_counter() - started, 1),
                       "model": model_file, "predictions": predictions})
        write_results(results_path, make_results(identity, data_counts, task.glue_score_metric,
                                                 trials))
        print_fn(f"Trial {trial}: {format_duration(train_seconds)}; results in {results_path}")
    results = make_results(identity, data_counts, task.glue_score_metric, trials)
    if trials:
        write_results(results_path, results)
    return results
