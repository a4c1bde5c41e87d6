"""A run's checkpoint on a backend other than TensorFlow: `tf.train` checkpoints of mirrored values.

A run's checkpoints are `tf.train` checkpoints on every backend, so that
resuming, setting aside a damaged checkpoint and keeping the last N work the
same way (`electra_tf.training.resuming`, `artifacts.checkpoint_dir`). On
TensorFlow they hold the model's own variables. On JAX they hold one
`tf.Variable` (on the host) per model and optimizer variable, in the order of
`model.variables` and `optimizer.variables`: `pull` copies the Keras
variables into them before a save, `push` copies them back after a restore.
Dropout and sampling seeds are among the model's variables, so a resumed run
draws what an uninterrupted one draws.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from electra_tf.keras_compat import sync_variables


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
        self.checkpoint = tf.train.Checkpoint(**groups)

    def pull(self) -> None:
        """Copies the Keras variables' current values into the copies (before a save)."""
        sync_variables(self.model)
        for variable, copy in self._pairs:
            copy.assign(np.asarray(variable.value))

    def push(self) -> None:
        """Copies the copies' values into the Keras variables (after a restore)."""
        for variable, copy in self._pairs:
            variable.assign(copy.numpy())
