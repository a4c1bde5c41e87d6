"""One trial loop for every fine-tuning task: seeds, resuming, results, saved models.

`run_trials` runs `settings.num_trials` trials of a task of any kind
(`electra_tf.finetuning.kind.contract.TaskKind`; the kinds are listed in
`electra_tf.finetuning.kinds`) from one pre-trained checkpoint.
Trial k

* starts from the pre-trained encoder (or, with `settings.random_init`, the
  same encoder with freshly drawn weights) with a new head, seeded with `seed + k`;
* trains with progress lines (ETA) and TensorBoard scalars, saving a
  checkpoint every `save_checkpoints_steps` steps and on SIGINT / SIGTERM;
* records every epoch's end, with dev metrics when the task evaluates every
  epoch, evaluates and writes its predictions at the end, saves its model.

results.json (see `electra_tf.artifacts.results`) is rewritten after every
trial. Running the same command again skips the trials it lists and resumes
an interrupted trial from its last checkpoint, with the same batches and
dropout masks as an uninterrupted trial.

Trials train under a tf.distribute strategy (one device, several, or several
machines; see `electra_tf.modeling.train_step` for the step) in the
precision of `settings.mixed_precision`. Dev metrics and predictions come
from a float32 single-device copy of the weights, on every worker, so they
cover every dev example exactly once whatever the number of replicas. Only
the chief writes files: results.json, trial files, TensorBoard logs (other
workers write their share of each checkpoint to a scratch directory).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
import time
import zlib
from typing import Optional

import keras
import tensorflow as tf

from electra_tf.artifacts.export_dir import float32_copy
from electra_tf.artifacts.files import copy_file, no_room
from electra_tf.artifacts.finetuning_dir import (
    FinetuningDir,
    TrialDir,
    clear_progress,
    read_history,
    write_history,
)
from electra_tf.artifacts.pretrained import Pretrained, load_discriminator
from electra_tf.artifacts.results import finished_trials, make_results, write_results
from electra_tf.distribute import (
    check_batch_split,
    check_same_on_all_workers,
    in_multi_worker_mode,
    is_chief,
    set_precision_policy,
    worker_print,
)
from electra_tf.errors import RunError
from electra_tf.finetuning.kind.contract import TaskKind
from electra_tf.finetuning.kind.optimization import create_optimizer, learning_rate_schedule
from electra_tf.finetuning.kind.settings import FinetuneSettings
from electra_tf.finetuning.saving import save_finetuned
from electra_tf.finiteness import NonFiniteError, NonFiniteRecord, check_finite_weights
from electra_tf.modeling.encoder import copy_encoder, with_kernels
from electra_tf.tokenization import TextPath, VocabError, WordPieceTokenizer
from electra_tf.training import resuming as resume
from electra_tf.training.callbacks import CheckpointSaver, ProgressMonitor, format_duration
from electra_tf.training.fitting import fit_until
from electra_tf.training.run_holding import holding_run_dir


def checkpoint_tokenizer(
    pretrained: Pretrained, max_seq_length: int, vocab_flag_given: bool = False
) -> WordPieceTokenizer:
    """The tokenizer of the checkpoint's vocabulary and casing, checked against the checkpoint.

    Raises:
        RunError: the vocabulary cannot be read or does not fit the embeddings,
            or `max_seq_length` exceeds the position embeddings.
    """
    config = pretrained.config
    flag = "--vocab_file" if vocab_flag_given else "the checkpoint's vocab.txt"
    try:
        tokenizer = WordPieceTokenizer(
            pretrained.vocab_file,
            config.do_lower_case,
            config.resolved_strip_accents,
            config.normalization,
        )
    except VocabError as error:
        raise RunError(f"{flag}: {error}")
    if config.model.vocab_size != tokenizer.vocab_size:
        raise RunError(
            f"{flag} ({tokenizer.vocab_file}) has {tokenizer.vocab_size} tokens but the "
            f"checkpoint was pre-trained with {config.model.vocab_size}; use the "
            "vocab.txt the model was pre-trained with."
        )
    if max_seq_length > config.model.max_position_embeddings:
        raise RunError(
            f"--max_seq_length={max_seq_length} exceeds the checkpoint's "
            f"{config.model.max_position_embeddings} position embeddings."
        )
    return tokenizer


def trial_steps(task: TaskKind, settings: FinetuneSettings) -> tuple[int, int]:
    """(steps per epoch, total steps) of a trial; the last epoch may be cut short."""
    steps_per_epoch = math.ceil(task.num_train_examples / settings.train_batch_size)
    return steps_per_epoch, max(1, int(round(steps_per_epoch * settings.num_train_epochs)))


def _report(entry: dict, num_epochs: int, task: TaskKind, writer, print_fn) -> None:
    """An epoch's end on the console, and its dev metrics in TensorBoard."""
    if not entry["dev"]:
        print_fn(f"epoch {entry['epoch']}/{num_epochs} (step {entry['step']}) done")
        return
    with writer.as_default(step=entry["step"]):
        for name, value in entry["dev"].items():
            tf.summary.scalar(f"dev/{name}", value)
    writer.flush()
    print_fn(
        f"epoch {entry['epoch']}/{num_epochs} (step {entry['step']}) dev: "
        f"{task.format_metrics(entry['dev'])}"
    )


def _evaluate(
    task: TaskKind, model, evaluation_model, batch_size: int, trial: Optional[TrialDir] = None
) -> tuple[dict, dict]:
    """`task.evaluate` with the weights of `model` in its float32 single-device copy.

    Predicting on one device, every dev example is scored exactly once (a
    last partial batch split among replicas could drop or repeat examples),
    and every worker computes the same metrics.
    """
    evaluation_model.set_weights(model.get_weights())
    return task.evaluate(evaluation_model, batch_size, trial)


class _EpochEnds(keras.callbacks.Callback):
    """Records every epoch's end in the trial's history (dev metrics if the task asks).

    The last epoch is evaluated after training, with the predictions.

    Args:
        evaluate: () -> (dev metrics, prediction files), as `_evaluate`.
        history_trial: where the history is written (None: nowhere, on
            workers other than the chief).
        check_finite: raises `NonFiniteError` if a step so far, or the
            weights, were not finite (called before an epoch is recorded).
    """

    def __init__(
        self,
        task: TaskKind,
        evaluate,
        steps_per_epoch: int,
        total_steps: int,
        history: list,
        history_trial: Optional[TrialDir],
        writer,
        print_fn,
        check_finite=lambda: None,
    ):
        super().__init__()
        self.check_finite = check_finite
        self.task = task
        self.evaluate = evaluate
        self.steps_per_epoch = steps_per_epoch
        self.total_steps = total_steps
        self.history = history
        self.history_trial = history_trial
        self.writer = writer
        self.print_fn = print_fn

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        if step == 0 or (step % self.steps_per_epoch and step != self.total_steps):
            return  # (step 0: a first float16 step skipped for overflow ends no epoch)
        if self.history and self.history[-1]["step"] == step:
            return  # a float16 step skipped for overflow: this step is recorded
        # A model that is no longer finite gets no score and no record: it stops the trial.
        self.check_finite()
        entry = {
            "epoch": math.ceil(step / self.steps_per_epoch),
            "step": step,
            "train": {k: float(v) for k, v in (logs or {}).items()},
            "dev": {},
        }
        if step != self.total_steps:
            if self.task.evaluate_every_epoch:
                entry["dev"], _ = self.evaluate()
            _report(
                entry,
                math.ceil(self.total_steps / self.steps_per_epoch),
                self.task,
                self.writer,
                self.print_fn,
            )
        self.history.append(entry)
        if self.history_trial is not None:
            write_history(self.history_trial, self.history)


class _BatchCounter(keras.callbacks.Callback):
    """Counts the batches trained on: the data position a resumed trial continues from.

    Ahead of the optimizer's step when float16 skips overflowing steps.
    """

    def __init__(self, counter: tf.Variable):
        super().__init__()
        self.counter = counter

    def on_train_batch_end(self, batch, logs=None):
        self.counter.assign_add(1)


def _training_batches(task: TaskKind, batch_size: int, seed: int, by_length: bool):
    """Batch index -> the trial's batch stream from that batch on (for `fit_until`).

    The stream of an uninterrupted trial, the batches done skipped. Under a
    strategy, Keras splits every global batch among the replicas; across
    workers each keeps its part of every batch (sharding by element: the
    stream is not read from files).
    """
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA

    def from_batch(start: int) -> tf.data.Dataset:
        return task.train_dataset(batch_size, seed, by_length).skip(start).with_options(options)

    return from_batch


def run_trial(
    model,
    task: TaskKind,
    settings: FinetuneSettings,
    trial: TrialDir,
    seed: int,
    print_fn=print,
    extra_callbacks=(),
    strategy: Optional[tf.distribute.Strategy] = None,
    restart: bool = False,
) -> dict:
    """Trains one trial (resuming from its checkpoint), evaluates it, writes its predictions.

    The trial resumes from its newest whole checkpoint (see
    `training.resuming`); a step whose loss or gradients are not finite
    stops it (`NonFiniteError`) with its last checkpoint intact.

    Args:
        model: `task.build_model(...)`, fresh from the pre-trained encoder,
            built in `strategy`'s scope.
        task: the task, prepared.
        settings: resolved settings.
        trial: the trial's directory.
        seed: the trial's seed (shuffling).
        print_fn: console output.
        extra_callbacks: more Keras callbacks for `fit`.
        strategy: the strategy `model` was built under (default: the current one).
        restart: start the trial again from step 0 although it has
            checkpoints (they are moved aside, not deleted).

    Returns:
        The trial's record for results.json but its number; `model` is None.
    """
    strategy = strategy or tf.distribute.get_strategy()
    chief = is_chief(strategy)
    steps_per_epoch, total_steps = trial_steps(task, settings)
    schedule = learning_rate_schedule(
        settings.learning_rate, total_steps, settings.warmup_proportion
    )
    with strategy.scope():
        optimizer = create_optimizer(
            model,
            model.encoder.num_layers,
            settings.learning_rate,
            total_steps,
            settings.warmup_proportion,
            settings.layerwise_lr_decay,
            settings.weight_decay_rate,
            settings.layerwise_lr_decay_quirk,
            settings.clip_norm,
            settings.mixed_precision,
        )
        optimizer.build(model.trainable_variables)
        model.set_training_options(
            settings.loss_reduction, settings.gradient_accumulation_steps, settings.jit_compile
        )
        # One device compiles the whole step; several replicas compile their
        # own passes inside it (see set_training_options).
        model.compile(
            optimizer=optimizer,
            jit_compile=settings.jit_compile and strategy.num_replicas_in_sync == 1,
        )
        # Not in checkpoints: a resumed trial starts with a clean record.
        model.attach_nonfinite_record(NonFiniteRecord())
    # Dropout's random state lives in Keras SeedGenerators, which tf.train does
    # not track: checkpointed with the rest, a resumed trial draws the same masks.
    rng_state = [v for v in model.non_trainable_variables if "seed_generator" in v.path]
    seen_batches = tf.Variable(0, dtype=tf.int64, trainable=False, name="seen_batches")
    checkpoint = tf.train.Checkpoint(
        model=model, optimizer=optimizer, rng_state=rng_state, seen_batches=seen_batches
    )
    # Every worker takes part in saving (the variables are read collectively);
    # only the chief's copy is kept. The others write to a scratch directory.
    own_checkpoints = (
        contextlib.nullcontext(trial.checkpoints)
        if chief
        else tempfile.TemporaryDirectory(prefix="electra-ckpt-")
    )
    with own_checkpoints as checkpoint_dir:
        if restart:
            resume.restart_on_all_workers(trial.checkpoints, strategy, print_fn)
        resumption = resume.restore_newest_usable(checkpoint, trial.checkpoints)
        latest = resumption.restored.prefix if resumption.restored else None
        if latest:
            print_fn(f"Resumed from {latest} (step {int(optimizer.iterations.numpy())}).")
        done = int(optimizer.iterations.numpy())
        if latest and not any(
            name.startswith("seen_batches/") for name, _ in tf.train.list_variables(latest)
        ):
            seen_batches.assign(done)  # saved before batches were counted: one batch per step
        resume.settle_resumption(
            trial.checkpoints,
            resumption,
            strategy,
            {
                "the step the trial resumed from (put --output_dir on storage all workers share)": done
            },
            print_fn,
        )
        manager = tf.train.CheckpointManager(checkpoint, checkpoint_dir, max_to_keep=1)
        # Entries recorded after the checkpoint are recorded again.
        history = [entry for entry in read_history(trial) if entry["step"] <= done]
        writer = (
            tf.summary.create_file_writer(trial.tensorboard)
            if chief
            else tf.summary.create_noop_writer()
        )
        evaluation_model = float32_copy(model)
        started = time.perf_counter()
        if done < total_steps:
            progress = ProgressMonitor(
                writer,
                total_steps,
                settings.train_batch_size,
                settings.log_every_steps,
                schedule,
                print_fn=print_fn,
                console_keys=task.console_keys,
            )
            saver = CheckpointSaver(
                manager,
                settings.save_checkpoints_steps,
                print_fn=print_fn,
                nonfinite=model.nonfinite_record,
                check_every=settings.log_every_steps,
            )
            epoch_ends = _EpochEnds(
                task,
                lambda: _evaluate(task, model, evaluation_model, settings.eval_batch_size),
                steps_per_epoch,
                total_steps,
                history,
                trial if chief else None,
                writer,
                print_fn,
                check_finite=lambda: (saver.check_finite(), saver.check_finite_weights()),
            )
            try:
                _, interrupted, _ = fit_until(
                    model,
                    total_steps,
                    _training_batches(
                        task, settings.train_batch_size, seed, settings.group_by_length
                    ),
                    seen_batches,
                    [_BatchCounter(seen_batches), *extra_callbacks, progress, epoch_ends, saver],
                    saver,
                )
                if not interrupted:
                    saver.save()
            except NonFiniteError as error:
                raise NonFiniteError(
                    f"{error} Try a lower --learning_rate with another --output_dir."
                ) from None
            if interrupted:
                raise KeyboardInterrupt
        train_seconds = time.perf_counter() - started

        started = time.perf_counter()
        scores, predictions = _evaluate(
            task, model, evaluation_model, settings.eval_batch_size, trial if chief else None
        )
        if not history or history[-1]["step"] != total_steps:
            history.append(
                {
                    "epoch": math.ceil(total_steps / steps_per_epoch),
                    "step": total_steps,
                    "train": {},
                    "dev": {},
                }
            )
        history[-1]["dev"] = scores
        _report(history[-1], history[-1]["epoch"], task, writer, print_fn)
        writer.close()
        return {
            "seed": seed,
            "steps": total_steps,
            "dev": scores,
            "epochs": history,
            "train_seconds": round(train_seconds, 1),
            "predict_seconds": round(time.perf_counter() - started, 1),
            "model": None,
            "predictions": predictions,
        }


def check_vocab(encoder, tokenizer: WordPieceTokenizer, vocab_flag_given: bool) -> None:
    """Refuses a vocabulary whose size differs from the loaded encoder's embedding table."""
    if encoder.vocab_size != tokenizer.vocab_size:
        flag = "--vocab_file" if vocab_flag_given else "the checkpoint's vocab.txt"
        raise RunError(
            f"{flag} ({tokenizer.vocab_file}) has {tokenizer.vocab_size} tokens but the "
            f"checkpoint's embeddings have {encoder.vocab_size}; use the vocab.txt the "
            "model was pre-trained with."
        )


def run_identity(task: TaskKind, pretrained: Pretrained, settings: FinetuneSettings) -> dict:
    """What results.json says the run is (`results.IDENTITY_KEYS`); `settings` resolved."""
    return {
        "task": task.describe(),
        "init_checkpoint": pretrained.model_file,
        "vocab_file": os.path.abspath(pretrained.vocab_file),
        "settings": {**settings.identity(), **task.settings()},
    }


def pending_trials(task: TaskKind, pretrained: Pretrained, settings: FinetuneSettings) -> list[int]:
    """The numbers of the trials `run_trials` would still train: none once the run is complete.

    Reads results.json only (the task need not be prepared), so a caller can
    pass over a finished run without tokenizing its data.

    Raises:
        RunError: an impossible setting, or the output directory holds
            results of another run (as `run_trials` would).
    """
    settings = settings.resolve(pretrained.config.model_size, task.default_epochs)
    finished = finished_trials(
        FinetuningDir(settings.output_dir).results_file,
        run_identity(task, pretrained, settings),
        settings.num_trials,
        task.upgrade_description,
    )
    done = {t["trial"] for t in finished}
    return [number for number in range(settings.num_trials) if number not in done]


def run_trials(
    task: TaskKind,
    pretrained: Pretrained,
    settings: FinetuneSettings,
    vocab_flag_given: bool = False,
    print_fn=print,
    extra_callbacks=(),
    strategy: Optional[tf.distribute.Strategy] = None,
    restart: bool = False,
) -> dict:
    """Runs the trials of `task` not yet in results.json; returns the results (also written).

    One process at a time holds the output directory (`artifacts.run_lock`).

    Args:
        task: the task (not yet prepared).
        pretrained: the checkpoint to start every trial from.
        settings: hyperparameters and the output directory (defaults unresolved).
        vocab_flag_given: whether the vocabulary came from --vocab_file (messages).
        print_fn: console output.
        extra_callbacks: more Keras callbacks for every trial's `fit`.
        strategy: the tf.distribute strategy to train under (default: the
            current one). Every worker returns the same results; only the
            chief writes them.
        restart: start unfinished trials again from step 0 although they
            have checkpoints (moved aside, not deleted).

    Raises:
        RunError: the settings, the vocabulary or the output directory do not
            fit (nothing is written then); another process holds the output
            directory (`RunLocked`); the pre-trained weights or a training
            step are not finite (`NonFiniteError`).
    """
    strategy = strategy or tf.distribute.get_strategy()
    with holding_run_dir(settings.output_dir, strategy, worker_print(print_fn, strategy)):
        config = pretrained.config
        settings = settings.resolve(config.model_size, task.default_epochs)
        check_batch_split(strategy, settings.train_batch_size, settings.gradient_accumulation_steps)
        replicas = strategy.num_replicas_in_sync
        chief = is_chief(strategy)
        print_fn = worker_print(print_fn, strategy)
        tokenizer = checkpoint_tokenizer(pretrained, task.max_seq_length, vocab_flag_given)
        output = FinetuningDir(settings.output_dir)
        identity = run_identity(task, pretrained, settings)
        trials = finished_trials(
            output.results_file, identity, settings.num_trials, task.upgrade_description
        )
        finished = {t["trial"] for t in trials}
        if in_multi_worker_mode(strategy):
            check_same_on_all_workers(
                strategy,
                {
                    "the trials already finished (put --output_dir on storage all workers share)": zlib.crc32(
                        json.dumps(sorted(finished)).encode()
                    )
                },
            )
        if chief:
            os.makedirs(output.path, exist_ok=True)
        data = task.prepare(tokenizer, print_fn)
        _, total_steps = trial_steps(task, settings)
        print_fn(
            f"{settings.model_size} model"
            + (
                " with freshly drawn weights (--random_init: no pre-training)"
                if settings.random_init
                else ""
            )
            + f", lr {settings.learning_rate:g}, layer-wise decay "
            f"{settings.layerwise_lr_decay:g}"
            + (" (original code's top-layer decay^2)" if settings.layerwise_lr_decay_quirk else "")
            + f", weight decay {settings.weight_decay_rate:g}, batch {settings.train_batch_size}"
            + (" (summed loss, as the original code)" if settings.loss_reduction == "sum" else "")
            + f", {settings.num_train_epochs:g} epochs = {total_steps} steps, "
            f"{settings.num_trials} trial(s); {replicas} replica(s)"
            + (f", {settings.mixed_precision}" if settings.mixed_precision != "none" else "")
            + "."
        )
        info = {
            "kind": task.KIND,
            **task.model_info(),
            **TextPath.of(tokenizer, task.max_seq_length).to_dict(),
        }
        # Each trial trains in the run's precision; the caller's policy is restored after.
        policy = keras.config.dtype_policy()
        try:
            for number in range(settings.num_trials):
                if number in finished:
                    print_fn(
                        f"Trial {number}: already finished (in {output.results_file}), skipped."
                    )
                    continue
                seed = settings.seed + number
                trial = output.trial(number)
                print_fn(f"--- Trial {number + 1}/{settings.num_trials} (seed {seed}) ---")
                keras.backend.clear_session()  # which also resets the precision policy
                set_precision_policy(settings.mixed_precision)
                keras.utils.set_random_seed(seed)
                with strategy.scope():
                    encoder = load_discriminator(pretrained.model_file).encoder
                    if settings.random_init:  # the same architecture, weights drawn afresh
                        encoder = copy_encoder(encoder, settings.kernels, with_weights=False)
                    else:
                        check_finite_weights(encoder.weights, pretrained.model_file)
                    # The run's kernel set (a loaded encoder runs the reference kernels).
                    encoder = with_kernels(encoder, settings.kernels)
                    check_vocab(encoder, tokenizer, vocab_flag_given)
                    model = task.build_model(encoder, seed)
                try:
                    record = {
                        "trial": number,
                        **run_trial(
                            model,
                            task,
                            settings,
                            trial,
                            seed,
                            print_fn,
                            extra_callbacks,
                            strategy,
                            restart,
                        ),
                    }
                    trials.append(record)
                    if not chief:
                        continue
                    if settings.save_models:
                        record["model"] = save_finetuned(
                            model, trial.path, info, pretrained.vocab_file
                        )
                    if number == 0:
                        for name in task.run_files:
                            if name in record["predictions"]:
                                copy_file(record["predictions"][name], output.file(name))
                    write_results(
                        output.results_file,
                        make_results(identity, data, task.primary_metric, trials),
                    )
                except (OSError, tf.errors.ResourceExhaustedError) as error:
                    cause = no_room(error)
                    if cause is None:
                        raise
                    raise RunError(
                        f"Could not write {getattr(error, 'filename', None) or trial.path}: "
                        f"{cause}. Trial {number}'s checkpoints are intact (nothing half-written "
                        "was left); free some space and re-run the same command to resume it."
                    ) from None
                # Only once the trial is on record: a crash before this point resumes it.
                clear_progress(trial)
                print_fn(
                    f"Trial {number}: trained in {format_duration(record['train_seconds'])}; "
                    f"results in {output.results_file}"
                )
        finally:
            keras.config.set_dtype_policy(policy)
        results = make_results(identity, data, task.primary_metric, trials)
        if trials and chief:
            write_results(output.results_file, results)
        return results
