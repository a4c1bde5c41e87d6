"""The pre-training run: build under a strategy, resume, fit, checkpoint, export.

Everything a run produces goes to its run directory (see
`electra_tf.artifacts.run_dir`), which one process at a time holds (see
`electra_tf.artifacts.run_lock`). Re-running with the same run directory
resumes from the newest checkpoint that is complete, readable and finite
(see `electra_tf.training.resuming`). A step whose loss or gradients are not
finite stops the run before anything non-finite is saved or exported.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import shutil
import sys
import tempfile
import time
from typing import Callable, Optional, Sequence

import keras
import tensorflow as tf

from electra_tf.artifacts.checkpoint_dir import list_checkpoints
from electra_tf.artifacts.export_dir import export_pretrained
from electra_tf.artifacts.mirrored_checkpoint import VariableMirror
from electra_tf.artifacts.run_dir import (
    RunDir,
    RunIdentity,
    checkpoint_backend,
    read_config,
    read_identity,
    write_data_file,
    write_result,
    write_run_files,
)
from electra_tf.config import ConfigError, PretrainingConfig, config_differences
from electra_tf.data.pipeline import dummy_batch, make_pretraining_dataset
from electra_tf.data.shard_verification import find_damaged_shard
from electra_tf.data.token_counts import count_tokens
from electra_tf.distribute import (
    check_batch_split,
    is_chief,
    replica_count,
    set_precision_policy,
    worker_print,
)
from electra_tf.errors import RunError
from electra_tf.finiteness import (
    NonFiniteError,
    NonFiniteRecord,
    check_finite_weights,
)
from electra_tf.flops import steps_within_budget, train_flops
from electra_tf.pretraining.evaluation import (
    PretrainingEvaluator,
    evaluation_dataset,
    format_summary,
)
from electra_tf.pretraining.objectives import make_pretrainer
from electra_tf.pretraining.optimization import create_optimizer, learning_rate_schedule
from electra_tf.pretraining.pretrainer import Pretrainer
from electra_tf.tokenization import load_vocab, vocab_fingerprint
from electra_tf.training import resuming as resume
from electra_tf.training.callbacks import (
    CheckpointSaver,
    HeldOutEvaluation,
    ProgressMonitor,
    format_duration,
)
from electra_tf.training.fitting import fit_until
from electra_tf.training.run_holding import hold_run_dir

# Fields a resumed run may change: they do not alter what a checkpoint means.
RESUMABLE_FIELDS = (
    "num_train_steps",
    "save_checkpoints_steps",
    "keep_checkpoint_max",
    "log_every_steps",
    "steps_per_execution",
    "gradient_accumulation_steps",
    "jit_compile",
    "kernels",
    "eval_every_steps",
    "num_eval_examples",
)
# Optimisation hyperparameters a resumed run may change when asked to
# (`change_hyperparameters`, --change_hyperparameters), e.g. a lower learning
# rate after a divergence: they are Python values, not variables of the
# checkpoint, so the weights and optimizer moments carry on unchanged.
HYPERPARAMETER_FIELDS = (
    "learning_rate",
    "lr_decay_power",
    "num_warmup_steps",
    "weight_decay_rate",
    "adam_beta_1",
    "adam_beta_2",
    "adam_epsilon",
    "clip_norm",
    "gen_weight",
    "disc_weight",
    "temperature",
)
# errno values of a write that failed for lack of room.
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class RunConfigMismatch(RunError):
    """The run directory holds a run of a different configuration."""


@dataclasses.dataclass
class PretrainingResult:
    run_dir: str
    steps_done: int
    finished: bool
    interrupted: bool
    metrics: dict
    export_dir: Optional[str]
    seconds: float
    # The held-out evaluation at the end (metrics), when the run has held-out text.
    evaluation: Optional[dict] = None


def check_run_dir(
    config: PretrainingConfig,
    run_dir: str,
    vocab_file: str,
    change_hyperparameters: bool = False,
    vocab_label: Optional[str] = None,
) -> tuple[bool, list[str]]:
    """Checks that `run_dir` is empty or holds this same run.

    Args:
        config: the run's configuration.
        run_dir: the run directory.
        vocab_file: the run's vocabulary.
        change_hyperparameters: allow `HYPERPARAMETER_FIELDS` to differ.
        vocab_label: how messages name `vocab_file` (e.g. `--vocab_file=...`;
            default: its path).

    Returns:
        (whether the directory holds this run, the hyperparameters that
        change, as `field: old -> new`).

    Raises:
        RunConfigMismatch: the directory holds a run with another configuration
            or vocabulary (nothing in it is modified).
        RunError: its config.json or identity.json cannot be read.
    """
    run = RunDir(run_dir)
    check_vocabulary(run, config, vocab_file, vocab_label or vocab_file)
    previous = read_config(run)
    if previous is None:
        return False, []
    differences = config_differences(previous, config, ignore=RESUMABLE_FIELDS)
    changeable = [d for d in differences if d.split(":")[0] in HYPERPARAMETER_FIELDS]
    fixed = [d for d in differences if d not in changeable]
    if fixed or (changeable and not change_hyperparameters):
        hint = "Use another --output_dir for a new run, or pass the same flags to resume"
        if changeable and not fixed:
            hint += (
                " (or add --change_hyperparameters to resume with the new "
                + ", ".join(d.split(":")[0] for d in changeable)
                + ")"
            )
        raise RunConfigMismatch(
            f"{run_dir} holds a run with a different configuration:\n  "
            + "\n  ".join(differences)
            + f"\n{hint}."
        )
    return True, changeable


def lost_vocabulary(run: RunDir) -> RunConfigMismatch:
    """The refusal of a run of an earlier version (no identity.json) that lost its vocab.txt."""
    return RunConfigMismatch(
        f"{run.vocab_file} is missing and {run.path} records no hash of its vocabulary "
        "(a run of an earlier version), so no file can be checked against it: put "
        f"the run's vocabulary back as {run.vocab_file}, or choose another --output_dir."
    )


def check_vocabulary(run: RunDir, config: PretrainingConfig, vocab_file: str, label: str) -> None:
    """Refuses a vocabulary, casing or normalization other than the run's (identity.json).

    A run of an earlier version records no identity: its vocab.txt stands for
    it, and a lost one cannot be replaced (nothing says what it held).

    Raises:
        RunConfigMismatch: naming the recorded value and the one given.
    """
    recorded = read_identity(run)
    if recorded is None and not os.path.exists(run.vocab_file):
        if os.path.exists(run.config_file):
            raise lost_vocabulary(run)
        return  # a new run
    if recorded is not None:
        given_tokenization = RunIdentity.of(config, vocab_file).tokenization()
        for name, value in recorded.tokenization().items():
            if given_tokenization[name] != value:
                raise RunConfigMismatch(
                    f"--{name}={given_tokenization[name]} but {run.path} was trained with "
                    f"{name}={value} ({run.identity_file}); drop the flag to resume, or "
                    "choose another --output_dir."
                )
        expected = recorded.vocab_sha256
        source = f"{recorded.vocab_size:,} tokens, recorded in {run.identity_file}"
        if os.path.exists(run.vocab_file):
            own = vocab_fingerprint(run.vocab_file)
            if own != expected:
                raise RunConfigMismatch(
                    f"{run.vocab_file} (sha256 {own[:16]}) is not the vocabulary {run.path} "
                    f"was trained with (sha256 {expected[:16]}, {source}): put back the "
                    "run's vocabulary, or choose another --output_dir."
                )
    else:
        expected = vocab_fingerprint(run.vocab_file)
        source = f"{len(load_vocab(run.vocab_file)):,} tokens, {run.vocab_file}"
    given = vocab_fingerprint(vocab_file)
    if given != expected:
        raise RunConfigMismatch(
            f"{label} (sha256 {given[:16]}, {len(load_vocab(vocab_file)):,} tokens) is not "
            f"the vocabulary {run.path} was trained with (sha256 {expected[:16]}, {source}). "
            "Pass that vocabulary, or choose another --output_dir."
        )


def resolve_steps(
    config: PretrainingConfig, run_dir: str, print_fn: Callable[[str], None] = print
) -> PretrainingConfig:
    """Fixes the step counts a run trains for: from a FLOPs budget, and the two-stage boundary.

    Both are written to config.json, so a resumed run keeps them (the
    boundary is compared like any other field; a different one is refused).

    Raises:
        RunError: the budget is smaller than one step or gives impossible steps.
    """
    config.validate()
    if config.max_train_flops is not None:
        steps = steps_within_budget(config, config.max_train_flops)
        if steps < 1:
            raise RunError(
                f"--max_train_flops={config.max_train_flops:.3g} is less than "
                f"{config.steps_per_execution} training step(s) "
                f"({train_flops(config, config.steps_per_execution):.3g} FLOPs)."
            )
        # The schedule (warmup, decay) is laid out over the budget's steps.
        config = dataclasses.replace(config, num_train_steps=steps)
        print_fn(
            f"--max_train_flops={config.max_train_flops:.3g}: {steps:,} steps "
            f"({train_flops(config):.3g} FLOPs; --num_train_steps is set by the budget)."
        )
    if config.training == "two_stage" and config.two_stage_generator_steps is None:
        saved = read_config(RunDir(run_dir))
        previous = saved.two_stage_generator_steps if saved is not None else None
        config = dataclasses.replace(
            config, two_stage_generator_steps=previous or config.resolved_two_stage_generator_steps
        )
    try:
        config.validate()
    except ConfigError as error:
        raise RunError(str(error))
    return config


def training_stages(config: PretrainingConfig) -> list[tuple[str, int]]:
    """(stage, last step) pairs: one joint stage, or the two stages of two-stage training."""
    if config.training == "two_stage":
        return [
            ("generator", config.resolved_two_stage_generator_steps),
            ("discriminator", config.num_train_steps),
        ]
    return [("joint", config.num_train_steps)]


def _pretraining_batches(config: PretrainingConfig, shard_dir: str, special_ids: dict):
    """Batch index -> the run's batch stream from that batch on (for `fit_until`)."""

    def from_batch(start: int):
        return make_pretraining_dataset(
            shard_dir,
            batch_size=config.train_batch_size,
            max_predictions_per_seq=config.resolved_max_predictions_per_seq,
            mask_rate=config.mask_rate,
            special_ids=special_ids,
            seed=config.seed,
            start_example=start * config.train_batch_size,
            shuffle_buffer_size=config.shuffle_buffer_size,
        )

    return from_batch


def run_pretraining(
    config: PretrainingConfig,
    run_dir: str,
    shard_dir: str,
    vocab_file: str,
    special_ids: dict,
    *,
    strategy: Optional[tf.distribute.Strategy] = None,
    export: bool = True,
    print_fn: Callable[[str], None] = print,
    extra_callbacks: Sequence[keras.callbacks.Callback] = (),
    init_weights=None,
    eval_shard_dir: Optional[str] = None,
    eval_only: bool = False,
    restart: bool = False,
    change_hyperparameters: bool = False,
    run_dir_held: bool = False,
    vocab_learned_with: Optional[dict] = None,
) -> PretrainingResult:
    """Pre-trains (or resumes pre-training), exports at the end, writes result.json.

    Args:
        config: validated configuration; `config.model.vocab_size` must match the vocab.
        run_dir: where config, checkpoints, TensorBoard logs and the export go.
        shard_dir: directory written by `electra_tf.data.shard_build.write_shards`.
        vocab_file: the vocabulary the shards were built with.
        special_ids: `pad_id`, `cls_id`, `sep_id`, `mask_id` of that vocabulary.
        strategy: a tf.distribute strategy (default: the current one).
        export: export the discriminator and generator once training is done.
        print_fn: where progress lines go.
        extra_callbacks: more Keras callbacks for `fit`.
        init_weights: an `electra_tf.interop.checkpoints.LoadedCheckpoint` to
            start from (used only when the run has no checkpoint of its own).
        eval_shard_dir: shards of held-out text: evaluated every
            `config.resolved_eval_every_steps` and when training ends.
        eval_only: evaluate the latest checkpoint on `eval_shard_dir` and stop.
        restart: start again from step 0 although the run directory holds
            checkpoints (they are moved aside, not deleted).
        change_hyperparameters: resume although `HYPERPARAMETER_FIELDS`
            differ from the run's config.json (which then records the new values).
        run_dir_held: the caller holds the run directory (`hold_run_dir`), as
            `pretraining_run.run` does before it builds the data.
        vocab_learned_with: the flags `vocab_file` was learned with, by name,
            for the run's identity.json (`RunIdentity.learned_with`; None: a
            vocabulary given as a file).

    Raises:
        RunError: the run cannot start or go on, in one line naming the flag,
            file or step: another configuration in `run_dir`
            (`RunConfigMismatch`), another live process holding it
            (`RunLocked`), checkpoints none of which is usable, a loss or
            gradient that is not finite (`NonFiniteError`), a corrupt shard,
            a full disk. What was saved before stays intact.
    """
    config = resolve_steps(config, run_dir, print_fn)
    set_precision_policy(config.mixed_precision)
    # Same seed, same initial weights and dropout streams: a resumed run
    # continues exactly where the interrupted one stopped.
    keras.utils.set_random_seed(config.seed)
    started = time.perf_counter()
    strategy = strategy or tf.distribute.get_strategy()
    check_batch_split(strategy, config.train_batch_size, config.gradient_accumulation_steps)
    chief = is_chief(strategy)
    # Progress lines of other workers are labelled; their files go nowhere.
    print_fn = worker_print(print_fn, strategy)
    lock = None if run_dir_held else hold_run_dir(run_dir, strategy, print_fn)
    try:
        result = _run_locked(
            config,
            run_dir,
            shard_dir,
            vocab_file,
            special_ids,
            strategy,
            export,
            print_fn,
            extra_callbacks,
            init_weights,
            eval_shard_dir,
            eval_only,
            restart,
            change_hyperparameters,
            started,
            vocab_learned_with,
        )
        if chief:  # the other workers write nothing to the run directory
            write_result(
                RunDir(run_dir),
                {
                    "steps_done": result.steps_done,
                    "finished": result.finished,
                    "metrics": result.metrics,
                    "evaluation": result.evaluation,
                    "seconds": result.seconds,
                },
            )
        return result
    except OSError as error:
        if error.errno not in _NO_ROOM:
            raise
        raise RunError(_no_room_message(error, run_dir)) from None
    finally:
        if lock is not None:
            lock.release()


def _no_room_message(error: OSError, run_dir: str) -> str:
    """One line for a write that found no room: the file written and the disk that is full."""
    path = error.filename or run_dir
    where = (
        f" (the disk holding {os.path.dirname(path) or '.'} is full)"
        if error.errno == errno.ENOSPC
        else ""
    )
    return (
        f"Could not write {path}: {error.strerror}{where}. Nothing half-written was left and "
        "the checkpoints saved so far are intact; free some space there and re-run the same "
        "command to resume."
    )


def _event_writer(directory: str):
    """TensorBoard's writer in `directory`; a full disk raises OSError(ENOSPC) naming it.

    TensorFlow reports a full disk as ResourceExhaustedError, after creating
    the directory and an empty events file: those are removed again when the
    directory is new.
    """
    new = not os.path.exists(directory)
    try:
        return tf.summary.create_file_writer(directory)
    except tf.errors.ResourceExhaustedError:
        if new:
            shutil.rmtree(directory, ignore_errors=True)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), directory) from None


def _run_locked(
    config: PretrainingConfig,
    run_dir: str,
    shard_dir: str,
    vocab_file: str,
    special_ids: dict,
    strategy: tf.distribute.Strategy,
    export: bool,
    print_fn,
    extra_callbacks,
    init_weights,
    eval_shard_dir: Optional[str],
    eval_only: bool,
    restart: bool,
    change_hyperparameters: bool,
    started: float,
    vocab_learned_with: Optional[dict],
) -> PretrainingResult:
    """`run_pretraining` once the run directory is held (the same arguments)."""
    replicas = replica_count(strategy)
    on_tensorflow = keras.backend.backend() == "tensorflow"
    if not on_tensorflow and config.training == "two_stage" and config.mixed_precision == "float16":
        # Keras' loss-scale optimizer updates, statelessly, every variable it
        # was built over; the second stage trains the discriminator alone.
        raise RunError(
            f"--training=two_stage --mixed_precision=float16 runs on KERAS_BACKEND=tensorflow; "
            f"on {keras.backend.backend()} use --mixed_precision=bfloat16 or none."
        )
    resuming, changed = check_run_dir(config, run_dir, vocab_file, change_hyperparameters)
    chief = is_chief(strategy)
    run = RunDir(run_dir)
    checkpoint_dir = run.checkpoints
    if restart:
        resume.restart_on_all_workers(checkpoint_dir, strategy, print_fn)
    written_on = checkpoint_backend(run)
    if written_on != keras.backend.backend() and list_checkpoints(checkpoint_dir):
        # Each backend's checkpoints hold its own layout (see artifacts.mirrored_checkpoint).
        raise RunConfigMismatch(
            f"{checkpoint_dir} holds checkpoints written on KERAS_BACKEND={written_on}, and "
            f"this run is on {keras.backend.backend()}: resume with KERAS_BACKEND={written_on} "
            "(its export fine-tunes and serves the same either way), pass --restart to "
            "start again from step 0, or choose another --output_dir."
        )
    # Every worker takes part in saving (the variables are read collectively);
    # only the chief's copy is kept. The others write to a scratch directory.
    own_checkpoint_dir = checkpoint_dir if chief else tempfile.mkdtemp(prefix="electra-ckpt-")
    with strategy.scope():
        model = make_pretrainer(config)
        print_fn(f"Kernels: {model.kernels} (--kernels={config.kernels}).")
        model.build_from_batch(dummy_batch(config))
        optimizer = create_optimizer(config, config.mixed_precision)
        optimizer.build(model.trainable_variables)
        model.compile(
            optimizer=optimizer,
            steps_per_execution=config.steps_per_execution,
            # JAX always compiles its step (see modeling.jax_train_step).
            jit_compile=(config.jit_compile and replicas == 1) or not on_tensorflow,
        )
        # Not in checkpoints: a resumed run starts with a clean record.
        model.attach_nonfinite_record(NonFiniteRecord())
        mirror = None
        if on_tensorflow:
            # Dropout's random state lives in Keras SeedGenerators, which tf.train
            # does not track: checkpoint it explicitly so a resumed run draws the
            # same dropout masks as an uninterrupted one.
            rng_state = [v for v in model.non_trainable_variables if "seed_generator" in v.path]
            checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, rng_state=rng_state)
        else:
            mirror = VariableMirror(model, optimizer)
            checkpoint = mirror.checkpoint
        resumption = resume.restore_newest_usable(checkpoint, checkpoint_dir)
        if mirror is not None and resumption.restored is not None:
            mirror.push()
        if resumption.restored is not None:
            print_fn(
                f"Resumed from {resumption.restored.prefix} "
                f"(step {int(optimizer.iterations.numpy())})."
            )
            if changed:
                print_fn(
                    "Resuming with changed hyperparameters (--change_hyperparameters): "
                    + "; ".join(changed)
                    + "."
                )
        else:
            if resuming:
                print_fn(f"{run_dir} has a config but no checkpoint yet: starting from step 0.")
            if init_weights is not None:
                from electra_tf.interop.checkpoints import CheckpointError, assign_canonical

                try:
                    assign_canonical(model.generator, model.discriminator, init_weights)
                except CheckpointError as error:
                    raise RunError(f"--init_checkpoint: {error}")
                check_finite_weights(
                    model.trainable_weights, f"--init_checkpoint={init_weights.source}"
                )
                which = (
                    "the generator and discriminator"
                    if init_weights.has_generator
                    else "the discriminator (the generator is new)"
                )
                print_fn(f"Initialised {which} from {init_weights.source} ({init_weights.format}).")
    resume.settle_resumption(
        checkpoint_dir,
        resumption,
        strategy,
        {
            "the step resumed from (put the run directory on storage all workers share)": int(
                optimizer.iterations.numpy()
            ),
            "the vocabulary (fingerprint)": int(vocab_fingerprint(vocab_file)[:12], 16),
        },
        print_fn,
    )
    manager = tf.train.CheckpointManager(
        checkpoint,
        own_checkpoint_dir,
        max_to_keep=(config.keep_checkpoint_max or None) if chief else 1,
    )
    # Only now that the model and optimizer exist is the run directory written,
    # so a configuration that fails to build never locks it.
    # With --change_hyperparameters, config.json records the new values; until
    # a checkpoint is saved with them it is the previous one that describes
    # the checkpoints, and is put back if the run stops before.
    before_change = None
    if chief and changed:
        previous = read_config(run)
        before_change = dataclasses.replace(
            config, **{name: getattr(previous, name) for name in HYPERPARAMETER_FIELDS}
        )
    # The event writer comes first: a disk too full for it stops the run before
    # any of the run's own files is written.
    writer = _event_writer(run.tensorboard) if chief else tf.summary.create_noop_writer()
    if chief:
        write_run_files(run, config, vocab_file, vocab_learned_with)
        write_data_file(run, shard_dir, eval_shard_dir, keras.backend.backend())

    steps_done = int(optimizer.iterations.numpy())
    interrupted = False
    metrics: dict = {}
    evaluation = None
    if eval_shard_dir is not None:
        # The rarity baseline's unigram counts come from the training text.
        try:
            token_counts = count_tokens(shard_dir, config.model.vocab_size)
        except tf.errors.DataLossError as error:
            stopped = f"training stopped before step {steps_done + 1}, nothing was saved"
            raise _corrupt_shard_error(error, shard_dir, eval_shard_dir, stopped) from None
        evaluation = HeldOutEvaluation(
            PretrainingEvaluator(
                model,
                evaluation_dataset(eval_shard_dir, config, special_ids),
                token_counts=token_counts,
            ),
            0 if eval_only else config.resolved_eval_every_steps,
            writer,
            load_vocab(vocab_file),
            print_fn=print_fn,
            log_file=run.metrics_log if chief else None,
        )
        evaluation.set_model(model)
    elif eval_only:
        raise RunError("--eval_only needs held-out text (--eval_fraction > 0 or --eval_corpus).")
    if steps_done < config.num_train_steps and not eval_only:
        global_batch = config.train_batch_size
        monitor = ProgressMonitor(
            writer,
            config.num_train_steps,
            global_batch,
            config.log_every_steps,
            learning_rate_schedule(config),
            print_fn=print_fn,
            train_flops=lambda step: train_flops(config, step),
            log_file=run.metrics_log if chief else None,
        )
        saver = CheckpointSaver(
            manager,
            config.save_checkpoints_steps,
            print_fn=print_fn,
            nonfinite=model.nonfinite_record,
            check_every=config.log_every_steps,
            before_save=mirror.pull if mirror is not None else None,
        )
        print_fn(
            f"Training steps {steps_done + 1}..{config.num_train_steps} "
            f"({replicas} replica(s), global batch {global_batch}). "
            f"TensorBoard: tensorboard --logdir {run.tensorboard}"
        )
        callbacks = [*extra_callbacks, monitor, saver] + ([evaluation] if evaluation else [])
        resumed_from = manager.latest_checkpoint
        try:
            steps_done, interrupted, metrics = _train_stages(
                config, model, shard_dir, special_ids, steps_done, print_fn, callbacks, saver
            )
            saver.save()
        except BaseException as error:
            stop: BaseException = error
            if isinstance(error, NonFiniteError):
                stop = NonFiniteError(
                    f"{error} To go on from there with other hyperparameters, e.g. a lower "
                    "learning rate, re-run the same command with --learning_rate=<lower> "
                    "--change_hyperparameters (docs/pretraining.md, 'After a NaN')."
                )
            elif isinstance(error, tf.errors.DataLossError):
                stop = _corrupt_data_error(error, shard_dir, eval_shard_dir, saver)
            if before_change is not None and manager.latest_checkpoint == resumed_from:
                before_change.save_json(run.config_file)
                print_fn(
                    f"{run.config_file} keeps the run's previous hyperparameters: no "
                    "checkpoint was saved with the new ones (" + "; ".join(changed) + ")."
                )
            if stop is error:
                raise
            raise stop from None
        finally:
            writer.flush()

    finished = steps_done >= config.num_train_steps
    final_evaluation = None
    if evaluation is not None and (finished or eval_only) and not interrupted:
        result = evaluation.evaluate(steps_done)
        final_evaluation = result.metrics
        print_fn(format_summary(result, steps_done, evaluation.vocab, ansi=sys.stdout.isatty()))
    writer.close()
    if not chief:
        shutil.rmtree(own_checkpoint_dir, ignore_errors=True)
    export_dir = None
    if finished and export and chief and not eval_only:
        try:
            export_dir = export_pretrained(
                model.generator, model.discriminator, run.export, vocab_file, run.config_file
            )
        except (OSError, tf.errors.ResourceExhaustedError) as error:
            # TensorFlow's writes (the SavedModel) fail with ResourceExhaustedError
            # on a full disk, Python's (the .keras files) with OSError.
            cause = getattr(error, "strerror", None) or getattr(error, "message", None) or error
            cause = str(cause).strip().splitlines()[0].split("; ")[-1]
            raise RunError(
                f"Could not write the export {run.export}: {cause}. Training is done and "
                "its checkpoints are intact (nothing of the export was left); free some "
                "space and re-run the same command to export."
            ) from None
    seconds = time.perf_counter() - started
    if interrupted:
        print_fn(f"Stopped at step {steps_done}. Re-run the same command to resume.")
    print_fn(f"Run directory: {run_dir} ({format_duration(seconds)})")
    return PretrainingResult(
        run_dir, steps_done, finished, interrupted, metrics, export_dir, seconds, final_evaluation
    )


def _train_stages(
    config: PretrainingConfig,
    model: Pretrainer,
    shard_dir: str,
    special_ids: dict,
    steps_done: int,
    print_fn,
    callbacks: list,
    saver: CheckpointSaver,
) -> tuple[int, bool, dict]:
    """Trains the run's stages from `steps_done` on; returns (steps done, interrupted, metrics)."""
    interrupted = False
    metrics: dict = {}
    for stage, stage_end in training_stages(config):
        if steps_done >= stage_end or interrupted:
            continue
        if stage == "generator" and int(model.discriminator_initialised.numpy()):
            continue  # the discriminator already took over
        if config.training == "two_stage":
            model.set_stage(stage)
            if stage == "discriminator" and not int(model.discriminator_initialised.numpy()):
                model.initialise_discriminator_from_generator()
                print_fn(
                    f"Step {steps_done}: the discriminator starts from the generator's "
                    "weights; the generator is frozen from now on."
                )
            else:
                print_fn(f"Training the {stage} (steps {steps_done + 1}..{stage_end}).")
        steps_done, interrupted, stage_metrics = fit_until(
            model,
            stage_end,
            _pretraining_batches(config, shard_dir, special_ids),
            model.seen_batches,
            callbacks,
            saver,
        )
        metrics = stage_metrics or metrics
    return steps_done, interrupted, metrics


def _corrupt_data_error(
    error: tf.errors.DataLossError,
    shard_dir: str,
    eval_shard_dir: Optional[str],
    saver: CheckpointSaver,
) -> RunError:
    """The one line for a shard found corrupt while training (after saving a checkpoint).

    The batch that could not be read left no trace of its step (see
    `TrainStep.train_step`): the model holds the last whole step, which is
    saved, unless it falls inside a group of `steps_per_execution` steps,
    from which a resumed run could not keep the groups of an uninterrupted
    one; it then resumes from the last checkpoint.
    """
    step = int(saver.model.optimizer.iterations.numpy())
    group = saver.model.steps_per_execution
    latest = saver.manager.latest_checkpoint
    try:
        if step % group == 0:
            stopped = f"training stopped at step {step}, saved in {saver.save()}"
        else:
            saver.check_finite()
            kept = f"resumes from {latest}" if latest else "starts again from step 0"
            stopped = (
                f"training stopped at step {step}, inside a group of --steps_per_execution="
                f"{group} steps, so the run {kept}"
            )
    except RunError as save_error:
        stopped = f"training stopped at step {step} ({save_error})"
    return _corrupt_shard_error(error, shard_dir, eval_shard_dir, stopped)


def _corrupt_shard_error(
    error: tf.errors.DataLossError, shard_dir: str, eval_shard_dir: Optional[str], stopped: str
) -> RunError:
    """The one line naming the shard that could not be read, with what became of the run."""
    damaged = find_damaged_shard(shard_dir) or (
        find_damaged_shard(eval_shard_dir) if eval_shard_dir else None
    )
    if damaged is None:
        reason = (error.message or str(error)).strip().splitlines()[0]
        return RunError(f"Reading the shards of {shard_dir} failed ({reason}); {stopped}.")
    return RunError(
        f"Shard {damaged.path} is corrupt ({damaged.problem}); {stopped}. Delete "
        "that file and re-run the same command: the shard is rebuilt and training "
        "resumes (with --shard_dir, rebuild the shards where they were built)."
    )
