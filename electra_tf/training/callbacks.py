"""Keras callbacks for long runs: progress with ETA, TensorBoard scalars, checkpoints, signals."""

from __future__ import annotations

import os
import signal
import time
from typing import Callable, Optional

import keras
import tensorflow as tf
from keras import ops

from electra_tf.artifacts import checkpoint_dir
from electra_tf.artifacts.files import append_line, json_line
from electra_tf.errors import RunError
from electra_tf.finiteness import NonFiniteError, NonFiniteRecord
from electra_tf.keras_compat import current_value, sync_variables


def optimizer_step(model: keras.Model) -> int:
    """The optimizer's step count, also read inside a JAX `fit` (no host sync of the weights)."""
    return int(current_value(model, model.optimizer.iterations))


def format_duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


class ProgressMonitor(keras.callbacks.Callback):
    """Every `every` steps: a console line with losses, throughput and ETA, and TensorBoard scalars.

    Throughput is sequences over wall time for the window since the previous
    report (not a mean of per-step rates). The values logged are the ones the
    train step returns, which are already global over replicas.

    Args:
        writer: a `tf.summary` file writer.
        total_steps: the run's target step count (for the ETA).
        global_batch_size: sequences per step across all replicas.
        every: report interval in optimizer steps.
        learning_rate_fn: maps a step to the learning rate (for logging).
        print_fn: where console lines go.
        console_keys: which metrics appear on the console line.
        train_flops: maps a step to the training FLOPs done by then; if
            given, TensorBoard also gets `train_flops`, the cumulative count
            (to compare runs at equal compute rather than equal steps).
        log_file: if given, every report is also appended to this file as
            one JSON object per line (step, metrics, learning rate, FLOPs).
    """

    def __init__(
        self,
        writer,
        total_steps: int,
        global_batch_size: int,
        every: int,
        learning_rate_fn: Callable,
        print_fn: Callable[[str], None] = print,
        console_keys=("total_loss", "masked_lm_loss", "disc_loss", "disc_accuracy"),
        train_flops: Optional[Callable[[int], float]] = None,
        log_file: Optional[str] = None,
    ):
        super().__init__()
        self.writer = writer
        self.total_steps = total_steps
        self.global_batch_size = global_batch_size
        self.every = every
        self.learning_rate_fn = learning_rate_fn
        self.print_fn = print_fn
        self.console_keys = console_keys
        self.train_flops = train_flops
        self.log_file = log_file
        self._window_start: Optional[tuple[int, float]] = None

    def _step(self) -> int:
        return optimizer_step(self.model)

    def on_train_begin(self, logs=None):
        self._window_start = (self._step(), time.perf_counter())

    def on_train_batch_end(self, batch, logs=None):
        step = self._step()
        if step % self.every and step != self.total_steps:
            return
        now = time.perf_counter()
        start_step, start_time = self._window_start
        if step <= start_step:
            return
        steps_per_sec = (step - start_step) / (now - start_time)
        seqs_per_sec = steps_per_sec * self.global_batch_size
        self._window_start = (step, now)
        values = {k: float(v) for k, v in (logs or {}).items()}
        values["learning_rate"] = float(self.learning_rate_fn(step))
        values["sequences_per_second"] = seqs_per_sec
        if self.train_flops is not None:
            values["train_flops"] = float(self.train_flops(step))
        with self.writer.as_default(step=step):
            for name, value in values.items():
                tf.summary.scalar(name, value)
        self.writer.flush()
        if self.log_file:
            append_line(self.log_file, json_line({"step": step, **values}))
        eta = (self.total_steps - step) / steps_per_sec
        parts = [f"step {step}/{self.total_steps} ({100.0 * step / self.total_steps:.1f}%)"]
        parts += [f"{k} {values[k]:.4f}" for k in self.console_keys if k in values]
        parts += [
            f"lr {values['learning_rate']:.2e}",
            f"{seqs_per_sec:.1f} seq/s",
            f"ETA {format_duration(eta)}",
        ]
        self.print_fn(" | ".join(parts))


class CheckpointWriteError(RunError):
    """A checkpoint could not be written (disk full, quota, permissions)."""


class CheckpointSaver(keras.callbacks.Callback):
    """Saves every `every` steps, and stops cleanly (after saving) on SIGINT/SIGTERM.

    A second SIGINT while the first is being handled raises KeyboardInterrupt
    as usual.

    With a `NonFiniteRecord`, nothing is saved once a step's loss or
    gradients were not finite: the record is read before every save and
    every `check_every` steps, and training stops with `NonFiniteError`,
    the last checkpoint (finite) intact. A save that fails (a full disk)
    removes what it left and raises `CheckpointWriteError`; the earlier
    checkpoints are untouched.

    Args:
        manager: a `tf.train.CheckpointManager`.
        every: save interval in optimizer steps.
        print_fn: where messages go.
        nonfinite: the train step's record of non-finite steps (None: not checked).
        check_every: also read `nonfinite` every this many steps (the logging
            interval: a host round trip that is made then anyway).
        before_save: called before each save, once the model's variables are
            current (e.g. copies a JAX model's state into the variables the
            checkpoint holds).
    """

    def __init__(
        self,
        manager: tf.train.CheckpointManager,
        every: int,
        print_fn: Callable[[str], None] = print,
        nonfinite: Optional[NonFiniteRecord] = None,
        check_every: int = 0,
        before_save: Optional[Callable[[], None]] = None,
    ):
        super().__init__()
        self.manager = manager
        self.before_save = before_save
        self.every = every
        self.print_fn = print_fn
        self.nonfinite = nonfinite
        self.check_every = check_every
        self.stop_signal: Optional[int] = None
        self._previous_handlers: dict[int, object] = {}

    def _handle(self, signum, frame):
        if self.stop_signal is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.stop_signal = signum
        self.print_fn(
            f"Received {signal.Signals(signum).name}: saving a checkpoint and stopping "
            "after this step (press Ctrl-C again to abort without saving)."
        )

    def on_train_begin(self, logs=None):
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                self._previous_handlers[signum] = signal.signal(signum, self._handle)
            except ValueError:  # not the main thread: leave signals alone
                pass

    def on_train_end(self, logs=None):
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)
        self._previous_handlers.clear()

    def check_finite(self) -> None:
        """Raises NonFiniteError if a step so far had a non-finite loss or gradient."""
        if self.nonfinite is None:
            return
        first = self.nonfinite.first(lambda variable: current_value(self.model, variable))
        if first is None:
            return
        raise NonFiniteError(
            f"Training stopped at {first.describe()} (not finite); nothing "
            f"after it was saved: {self._kept()}."
        )

    def check_finite_weights(self) -> None:
        """Raises NonFiniteError if the weights are not finite (an update that overflowed).

        A step's loss and gradients can be finite and its update not (a huge
        learning rate): the record sees it only at the next step.
        """
        # Reduced where the weights live: one boolean per tensor comes to the host.
        bad = [
            weight.path
            for weight in self.model.trainable_weights
            if not bool(ops.all(ops.isfinite(weight)))
        ]
        if bad:
            step = optimizer_step(self.model)
            raise NonFiniteError(
                f"Training stopped at step {step}: the weights after it are not finite "
                f"(e.g. {bad[0]}); nothing after it was saved: {self._kept()}."
            )

    def _kept(self) -> str:
        latest = self.manager.latest_checkpoint
        return (
            f"the last checkpoint, {latest}, is finite and intact"
            if latest
            else "no checkpoint had been saved"
        )

    def save(self) -> str:
        """Saves unless the latest checkpoint already holds this step.

        Raises:
            NonFiniteError: a step since the last save was not finite, or
                the weights are not.
            CheckpointWriteError: the checkpoint could not be written.
        """
        sync_variables(self.model)
        step = int(self.model.optimizer.iterations.numpy())
        if self.manager.latest_checkpoint and self.manager.latest_checkpoint.endswith(f"-{step}"):
            return self.manager.latest_checkpoint
        self.check_finite()
        self.check_finite_weights()
        try:
            if self.before_save is not None:
                self.before_save()
            return self.manager.save(checkpoint_number=step)
        except (tf.errors.OpError, OSError) as error:
            directory = self.manager.directory
            checkpoint_dir.remove_temporary(directory)
            cause = (getattr(error, "message", None) or str(error)).strip().splitlines()[0]
            cause = cause.split("}} ")[-1]  # without TensorFlow's function-node prefix
            latest = self.manager.latest_checkpoint
            raise CheckpointWriteError(
                f"Could not write the checkpoint of step {step} in {directory}: {cause}. "
                + (
                    f"The previous checkpoints are intact (newest: {os.path.basename(latest)}); "
                    if latest
                    else ""
                )
                + "free some space and re-run the same command to resume."
            ) from None

    def on_train_batch_end(self, batch, logs=None):
        step = optimizer_step(self.model)
        if self.stop_signal is not None:
            path = self.save()
            self.print_fn(f"Checkpoint saved at step {step}: {path}")
            self.model.stop_training = True
        elif step and step % self.every == 0:
            # A float16 step skipped for overflow leaves `step` unchanged; save()
            # then finds this step already saved.
            self.save()
        elif self.check_every and step % self.check_every == 0:
            self.check_finite()


class HeldOutEvaluation(keras.callbacks.Callback):
    """Held-out evaluation every `every` steps: console, TensorBoard `eval/...`, metrics.jsonl.

    TensorBoard also gets a text summary, `eval/replacements`, showing a few
    held-out sequences with the generator's replacements and the
    discriminator's probability on every token (see
    `electra_tf.pretraining.display`).

    Args:
        evaluator: a `PretrainingEvaluator` (called with no arguments).
        every: evaluation interval in optimizer steps (0: only through `evaluate`).
        writer: a `tf.summary` file writer.
        vocab: id -> word piece, for the text summary.
        print_fn: where console lines go.
        log_file: if given, each evaluation is appended to this JSON-lines
            file as `{"step": s, "eval/<metric>": value, ...}`.
    """

    def __init__(
        self,
        evaluator,
        every: int,
        writer,
        vocab,
        print_fn: Callable[[str], None] = print,
        log_file: Optional[str] = None,
    ):
        super().__init__()
        self.evaluator = evaluator
        self.every = every
        self.writer = writer
        self.vocab = vocab
        self.print_fn = print_fn
        self.log_file = log_file
        self.last_step: Optional[int] = None
        self.last_result = None
        self._next_step: Optional[int] = None

    def _step(self) -> int:
        return optimizer_step(self.model)

    def on_train_begin(self, logs=None):
        if self.every:
            self._next_step = (self._step() // self.every + 1) * self.every

    def on_train_batch_end(self, batch, logs=None):
        # Steps may advance by steps_per_execution at a time: evaluate once an
        # interval boundary is reached or passed.
        step = self._step()
        if self._next_step is not None and step >= self._next_step:
            self._next_step = (step // self.every + 1) * self.every
            self.evaluate(step)

    def evaluate(self, step: int):
        """Evaluates now (once per step) and records the result; returns it."""
        from electra_tf.pretraining import display
        from electra_tf.pretraining.evaluation import format_metrics

        if self.last_step == step and self.last_result is not None:
            return self.last_result
        started = time.perf_counter()
        sync_variables(self.model)
        result = self.evaluator()
        self.last_step, self.last_result = step, result
        with self.writer.as_default(step=step):
            for name, value in result.metrics.items():
                tf.summary.scalar(f"eval/{name}", value)
            if result.samples:
                text = "\n\n".join(
                    f"{i + 1}. " + display.to_markdown(display.annotate(sample, self.vocab))
                    for i, sample in enumerate(result.samples)
                )
                tf.summary.text("eval/replacements", f"{display.LEGEND}\n\n{text}")
        self.writer.flush()
        if self.log_file:
            append_line(
                self.log_file,
                json_line({"step": step, **{f"eval/{k}": v for k, v in result.metrics.items()}}),
            )
        self.print_fn(
            f"eval at step {step} ({result.num_examples:,} held-out sequences, "
            f"{time.perf_counter() - started:.0f}s): {format_metrics(result.metrics)}"
        )
        return result
