"""Non-finite losses, gradients and weights: noticed while training, refused when loading.

A train step records the first step whose loss or gradient norm is not
finite in a few variables (`NonFiniteRecord.update`), with no host round
trip; the loop reads them only when it logs or saves a checkpoint
(`NonFiniteRecord.first`), so the run stops before a non-finite state is
saved. The loss and the gradients are the global ones (already summed over
replicas), so every replica and worker records the same thing.

Under float16 loss scaling, a step whose scaled gradients overflow is
skipped by the optimizer and the loss scale halves: that is the normal
working of dynamic loss scaling, not a fault, so only the loss (which the
scale does not touch) is recorded there; gradients that stay non-finite
however small the scale are caught by `training.fitting` instead.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Optional

import numpy as np
import tensorflow as tf

from electra_tf.errors import RunError

# The log a step without a variable record (JAX) returns the global gradient norm in.
GRADIENT_NORM_LOG = "gradient_norm"


class NonFiniteError(RunError):
    """A loss, a gradient or weights are not finite (NaN or infinite)."""


@dataclasses.dataclass(frozen=True)
class NonFiniteStep:
    """The first step whose loss or gradient norm was not finite.

    Attributes:
        step: the optimizer step (1-based, as progress lines count them).
        loss: the step's loss.
        gradient_norm: the global norm of its (summed) gradients, or None
            when the gradients are not checked (float16 loss scaling).
    """

    step: int
    loss: float
    gradient_norm: Optional[float]

    def describe(self) -> str:
        """`step 17: the loss is nan` (or the gradient norm, when the loss is finite)."""
        if not math.isfinite(self.loss) or self.gradient_norm is None:
            return f"step {self.step}: the loss is {self.loss}"
        return f"step {self.step}: the gradient norm is {self.gradient_norm} (loss {self.loss:.4g})"


class NonFiniteRecord:
    """Variables holding the first non-finite step of a run (step -1: none yet).

    Create it inside the distribution strategy's scope; every replica writes
    the same values. It is deliberately not tracked by checkpoints: a run
    resumed from a (finite) checkpoint starts with a clean record.
    """

    def __init__(self):
        only_first = tf.VariableAggregation.ONLY_FIRST_REPLICA
        self.step = tf.Variable(
            -1, dtype=tf.int64, trainable=False, name="nonfinite_step", aggregation=only_first
        )
        self.loss = tf.Variable(
            0.0, dtype=tf.float32, trainable=False, name="nonfinite_loss", aggregation=only_first
        )
        self.gradient_norm = tf.Variable(
            -1.0,
            dtype=tf.float32,
            trainable=False,
            name="nonfinite_gradient_norm",
            aggregation=only_first,
        )

    def update(self, step, loss, gradient_norm=None) -> None:
        """Records `step` if it is the first non-finite one (graph code, inside the train step).

        Args:
            step: int64 scalar, the step being taken (1-based).
            loss: float scalar, the global loss.
            gradient_norm: float scalar, the global gradient norm, or None
                to check the loss alone.
        """
        loss = tf.cast(loss, tf.float32)
        bad = tf.logical_not(tf.math.is_finite(loss))
        if gradient_norm is not None:
            gradient_norm = tf.cast(gradient_norm, tf.float32)
            bad = tf.logical_or(bad, tf.logical_not(tf.math.is_finite(gradient_norm)))
        first = tf.logical_and(bad, self.step < 0)
        self.step.assign(tf.where(first, tf.cast(step, tf.int64), self.step))
        self.loss.assign(tf.where(first, loss, self.loss))
        if gradient_norm is not None:
            self.gradient_norm.assign(tf.where(first, gradient_norm, self.gradient_norm))

    def observe(self, step: int, logs: dict) -> None:
        """Nothing: the train step itself records (see `HostNonFiniteRecord.observe`)."""

    def first(self) -> Optional[NonFiniteStep]:
        """The recorded step, or None (reads the variables: a host round trip)."""
        step = int(self.step.numpy())
        if step < 0:
            return None
        norm = float(self.gradient_norm.numpy())
        return NonFiniteStep(step, float(self.loss.numpy()), None if norm == -1.0 else norm)


class HostNonFiniteRecord:
    """`NonFiniteRecord` kept on the host, from the logs of each step (Keras' JAX backend).

    A jit-compiled JAX step has no variable outside its state to write, so it
    returns the global gradient norm among its logs
    (`jax_train_step.GRADIENT_NORM_LOG`) and the callback that checks the
    record passes them here. With several steps per execution the logs are
    those of a group's last step, which a non-finite step earlier in the group
    also leaves non-finite (its weights are).

    Args:
        loss_log: the log holding the optimised loss (`TrainStep.loss_log`).
        gradient_norm_log: the log holding the global gradient norm (absent
            under float16 loss scaling: only the loss is checked).
    """

    def __init__(self, loss_log: str, gradient_norm_log: str = GRADIENT_NORM_LOG):
        self.loss_log = loss_log
        self.gradient_norm_log = gradient_norm_log
        self._first: Optional[NonFiniteStep] = None

    def observe(self, step: int, logs: dict) -> None:
        """Records `step` if it is the first whose logged loss or gradient norm is not finite."""
        if self._first is not None or not logs or self.loss_log not in logs:
            return
        loss = float(logs[self.loss_log])
        norm = logs.get(self.gradient_norm_log)
        norm = None if norm is None else float(norm)
        if not math.isfinite(loss) or (norm is not None and not math.isfinite(norm)):
            self._first = NonFiniteStep(step, loss, norm)

    def first(self) -> Optional[NonFiniteStep]:
        """The recorded step, or None."""
        return self._first


def gradient_norm(grads) -> tf.Tensor:
    """The global L2 norm of a list of gradients (None entries skipped): float32 scalar.

    A sparse (`IndexedSlices`) gradient counts by its rows as they come, not
    densified: finite exactly when its rows are, and no [V, E] copy is made.
    """
    present = [
        tf.cast(g.values if isinstance(g, tf.IndexedSlices) else g, tf.float32)
        for g in grads
        if g is not None
    ]
    return tf.linalg.global_norm(present)


def nonfinite_weights(weights: Iterable) -> list[str]:
    """Names (`path` or `name`) of the weights holding a NaN or an infinity.

    Args:
        weights: Keras or TensorFlow variables, or (name, array) pairs.
    """
    found = []
    for weight in weights:
        if isinstance(weight, tuple):
            name, value = weight
        else:
            name = getattr(weight, "path", None) or weight.name
            value = weight.numpy() if hasattr(weight, "numpy") else weight
        value = np.asarray(value)
        if value.dtype.kind == "f" and not np.isfinite(value).all():
            found.append(name)
    return found


def check_finite_weights(weights: Iterable, source: str) -> None:
    """Raises NonFiniteError naming `source` if any of `weights` is not finite.

    Args:
        weights: as `nonfinite_weights`, e.g. `model.weights`.
        source: the file or directory they came from (the message names it).
    """
    weights = list(weights)
    bad = nonfinite_weights(weights)
    if bad:
        raise NonFiniteError(
            f"{source}: {len(bad)} of {len(weights)} weight tensors hold NaN or infinite values "
            f"(e.g. {bad[0]}); the model diverged. Use an earlier checkpoint of its run (see "
            "docs/pretraining.md, 'After a NaN')."
        )
