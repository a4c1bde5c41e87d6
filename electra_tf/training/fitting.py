"""Training until the optimizer reaches a step, however many float16 steps overflow."""

from __future__ import annotations

from typing import Callable

import keras
import tensorflow as tf

from electra_tf.errors import RunError
from electra_tf.training.callbacks import CheckpointSaver

# Consecutive skipped (non-finite) steps after which a run is declared diverged.
MAX_SKIPPED_BATCHES = 64


def fit_until(
    model: keras.Model,
    end_step: int,
    dataset_from: Callable[[int], tf.data.Dataset],
    seen_batches: tf.Variable,
    callbacks: list,
    saver: CheckpointSaver,
) -> tuple[int, bool, dict]:
    """Trains until the optimizer reaches `end_step` or a signal stops the run.

    Usually one `fit`. With float16, a step whose gradients overflow is
    skipped (the optimizer's step does not advance and the loss scale
    halves), so more batches are needed: the data stream continues from
    `seen_batches`, and the learning-rate schedule, keyed on the optimizer's
    step, still runs to its end.

    Args:
        model: the compiled model; `model.optimizer.iterations` counts the steps.
        end_step: the optimizer step to reach.
        dataset_from: batch index -> the training batches from that batch on.
        seen_batches: int64 variable counting the batches consumed so far
            (advanced during `fit` by the train step or a callback).
        callbacks: Keras callbacks for `fit`, `saver` among them.
        saver: the run's checkpoint saver; its stop signal ends training.

    Returns:
        (steps done, whether a signal interrupted training, the logs of the
        last step; {} when no step ran).

    Raises:
        RunError: `MAX_SKIPPED_BATCHES` batches in a row gave non-finite
            gradients (a checkpoint is saved first).
        NonFiniteError: a step's loss or gradients were not finite (see
            `CheckpointSaver`; nothing after the last checkpoint is saved).
    """
    optimizer = model.optimizer
    steps_done = int(optimizer.iterations.numpy())
    interrupted = False
    metrics: dict = {}
    seen_at_progress = int(seen_batches.numpy())
    while steps_done < end_step and not interrupted:
        try:
            history = model.fit(
                dataset_from(int(seen_batches.numpy())),
                epochs=1,
                steps_per_epoch=end_step - steps_done,
                verbose=0,
                shuffle=False,
                callbacks=callbacks,
            )
        except BaseException:
            saver.on_train_end()  # fit skips it on an error: give the signal handlers back
            raise
        metrics = {k: float(v[-1]) for k, v in history.history.items()} or metrics
        interrupted = saver.stop_signal is not None
        previous, steps_done = steps_done, int(optimizer.iterations.numpy())
        seen = int(seen_batches.numpy())
        if steps_done > previous:
            seen_at_progress = seen
        elif seen - seen_at_progress >= MAX_SKIPPED_BATCHES and not interrupted:
            # The loss scale halves on every skip, so this many in a row
            # means the gradients themselves are not finite.
            saver.save()
            raise RunError(
                f"{seen - seen_at_progress} batches in a row gave non-finite gradients at "
                f"step {steps_done} (the run diverged). Try a lower --learning_rate or "
                "--mixed_precision=bfloat16/none; the checkpoints are kept."
            )
    return steps_done, interrupted, metrics
