"""A run's checkpoint on a backend other than TensorFlow: `tf.train` checkpoints of host copies.

A run's checkpoints are `tf.train` checkpoints on every backend, so that
resuming, setting aside a damaged checkpoint and keeping the last N work the
same way (`electra_tf.training.resuming`, `artifacts.checkpoint_dir`). On
TensorFlow they hold the model's own variables. On JAX they hold one
`tf.Variable` (on the host) per model and optimizer variable, in the order of
`model.variables` and `optimizer.variables`: `pull` copies the Keras
variables into them before a save, `push` copies them back after a restore.
Dropout and sampling seeds are among the model's variables, so a resumed run
draws what an uninterrupted one draws. The checkpoint also holds the model
variables' paths in that order (`MODEL_PATHS`), which is how a model built on
another backend finds its weights there (`read_model_values`).
"""

from __future__ import annotations

import json

import keras
import numpy as np
import tensorflow as tf

from electra_tf.errors import RunError
from electra_tf.keras_compat import sync_variables

# The checkpoint's entry holding the model variables' paths (a JSON list, in order).
MODEL_PATHS = "model_paths"
_VALUE = ".ATTRIBUTES/VARIABLE_VALUE"


class VariableMirror:
    """Host `tf.Variable` copies of a model's and its optimizer's variables.

    Args:
        model: the built model.
        optimizer: its built optimizer.

    Attributes:
        checkpoint: the `tf.train.Checkpoint` of the copies (`model`,
            `optimizer`: lists in variable order).
    """

    def __init__(self, model: keras.Model, optimizer: keras.optimizers.Optimizer):
        self.model = model
        self._pairs = []
        groups = {}
        with tf.device("CPU:0"):
            for group, variables in (
                ("model", model.variables),
                ("optimizer", optimizer.variables),
            ):
                copies = []
                for variable in variables:
                    copy = tf.Variable(np.asarray(variable.value), trainable=False)
                    self._pairs.append((variable, copy))
                    copies.append(copy)
                groups[group] = copies
            self._paths = [v.path for v in model.variables]
            self._saved_paths = tf.Variable(json.dumps(self._paths), trainable=False)
        self.checkpoint = tf.train.Checkpoint(**groups, **{MODEL_PATHS: self._saved_paths})

    def pull(self) -> None:
        """Copies the Keras variables' current values into the copies (before a save)."""
        sync_variables(self.model)
        for variable, copy in self._pairs:
            copy.assign(np.asarray(variable.value))

    def push(self) -> None:
        """Copies the copies' values into the Keras variables (after a restore).

        Raises:
            RunError: the checkpoint restored holds another model's variables
                (their paths, in order, are not this model's); nothing is assigned.
        """
        saved = json.loads(self._saved_paths.numpy())
        if saved != self._paths:
            first = next(
                (i for i, (a, b) in enumerate(zip(saved, self._paths)) if a != b),
                min(len(saved), len(self._paths)),
            )
            found = saved[first] if first < len(saved) else "(nothing)"
            raise RunError(
                f"The checkpoint holds another model's variables (its variable {first} is "
                f"{found}, this model's is "
                f"{self._paths[first] if first < len(self._paths) else '(nothing)'}): it was "
                "written by another version or configuration; resume with that one, or pass "
                "--restart."
            )
        for variable, copy in self._pairs:
            variable.assign(copy.numpy())


def holds_mirrored_values(prefix: str) -> bool:
    """Whether the checkpoint `prefix` was written through a `VariableMirror`."""
    return f"{MODEL_PATHS}/{_VALUE}" in tf.train.load_checkpoint(prefix).get_variable_to_shape_map()


def read_model_values(prefix: str, variables) -> None:
    """Assigns the model values of a mirrored checkpoint to `variables`, on any backend.

    Args:
        prefix: a checkpoint written through a `VariableMirror`.
        variables: the same model's `variables`, built here (on TensorFlow
            the two step counters are not among them: the checkpoint's
            entries that no variable here has are skipped).

    Raises:
        ValueError: the paths of `variables`, in order, are not the
            checkpoint's (another model), naming the first that differs.
    """
    reader = tf.train.load_checkpoint(prefix)
    saved = json.loads(reader.get_tensor(f"{MODEL_PATHS}/{_VALUE}"))
    wanted = [v.path for v in variables]
    present = set(wanted)
    kept = [index for index, path in enumerate(saved) if path in present]
    if [saved[index] for index in kept] != wanted:
        found = [saved[index] for index in kept] + ["(nothing)"] * len(wanted)
        first = next(i for i, path in enumerate(wanted) if found[i] != path)
        raise ValueError(
            f"{prefix} holds another model: its variable {first} is {found[first]}, "
            f"not {wanted[first]}."
        )
    for variable, index in zip(variables, kept):
        variable.assign(reader.get_tensor(f"model/{index}/{_VALUE}"))
