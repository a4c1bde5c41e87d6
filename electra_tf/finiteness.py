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
from typing import Callable, Iterable, Optional

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from electra_tf.errors import RunError


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
    the same values. On TensorFlow it is deliberately not tracked by
    checkpoints: a run resumed from a (finite) checkpoint starts with a clean
    record. On JAX its variables are part of the model's state (a jitted step
    writes nothing else), and so of its checkpoints, which are only ever
    saved while the record is clean.
    """

    def __init__(self):
        if keras.backend.backend() == "tensorflow":
            only_first = {"aggregation": tf.VariableAggregation.ONLY_FIRST_REPLICA}
            make = tf.Variable
        else:  # on JAX the model's state (see `TrainStep.attach_nonfinite_record`)
            only_first = {}
            make = keras.Variable
        self.step = make(-1, dtype="int64", trainable=False, name="nonfinite_step", **only_first)
        self.loss = make(0.0, dtype="float32", trainable=False, name="nonfinite_loss", **only_first)
        self.gradient_norm = make(
            -1.0, dtype="float32", trainable=False, name="nonfinite_gradient_norm", **only_first
        )

    @property
    def variables(self) -> list:
        """The record's three variables."""
        return [self.step, self.loss, self.gradient_norm]

    def update(self, step, loss, gradient_norm=None) -> None:
        """Records `step` if it is the first non-finite one (traced code, inside the train step).

        Args:
            step: int scalar, the step being taken (1-based).
            loss: float scalar, the global loss.
            gradient_norm: float scalar, the global gradient norm, or None
                to check the loss alone.
        """
        loss = ops.cast(loss, "float32")
        bad = ops.logical_not(ops.isfinite(loss))
        if gradient_norm is not None:
            gradient_norm = ops.cast(gradient_norm, "float32")
            bad = ops.logical_or(bad, ops.logical_not(ops.isfinite(gradient_norm)))
        recorded = ops.convert_to_tensor(self.step)
        first = ops.logical_and(bad, ops.less(recorded, 0))
        self.step.assign(ops.where(first, ops.cast(step, recorded.dtype), recorded))
        self.loss.assign(ops.where(first, loss, ops.convert_to_tensor(self.loss)))
        if gradient_norm is not None:
            previous = ops.convert_to_tensor(self.gradient_norm)
            self.gradient_norm.assign(ops.where(first, gradient_norm, previous))

    def first(self, read: Callable = np.asarray) -> Optional[NonFiniteStep]:
        """The recorded step, or None (reads the variables: a host round trip).

        Args:
            read: variable -> its value as NumPy (inside a JAX `fit`, where the
                state lives outside the variables: `keras_compat.current_value`).
        """
        step = int(read(self.step))
        if step < 0:
            return None
        norm = float(read(self.gradient_norm))
        return NonFiniteStep(step, float(read(self.loss)), None if norm == -1.0 else norm)


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
