"""Every use of private Keras API in electra-tf, in one place.

Keras' public API has no hook for some things the training code needs. Each
is wrapped here, so a Keras upgrade has one module to check;
`tests/test_keras_compat.py` checks that the private names still exist with
the signatures below and names the Keras versions they were checked on
(`CHECKED_KERAS_VERSIONS`).

* `PrebuiltModel`: `fit()` builds a model from the replica-average of its
  first batch (`Model._maybe_symbolic_build`), which
  MultiWorkerMirroredStrategy cannot take of a dict of integer tensors. A
  model built beforehand, with its optimizer, skips that build.
* `PresummedGradients`: an optimizer whose gradients arrive already summed
  over replicas (so the global-norm clip sees the global gradient) skips
  Keras' own all-reduce (`Optimizer._all_reduce_sum_gradients`).
* `DecayInUpdateStep`: an optimizer that applies weight decay inside its
  `update_step` turns off Keras' separate decay pass
  (`Optimizer._apply_weight_decay`); `variable_index` and
  `uses_weight_decay` read the optimizer's per-variable bookkeeping.
* `weights_h5`: `save_weights` writes only to a path, and HDF5 that meets a
  full disk leaves its file open and may crash the process when it is
  collected; the same file is built in memory (Keras' own `H5IOStore` and
  `_save_state`, as `save_weights` calls them) for the caller to write.
* `current_value`: during `fit` on the JAX backend the training state lives
  outside the variables (`JAXTrainer._jax_state`) until the next sync; a
  callback that reads one counter (the step) reads it there instead of
  syncing every variable at every step.
"""

from __future__ import annotations

import io

import keras
import numpy as np
from keras.src.saving import saving_lib

# Keras releases (major.minor) on which the private names below were checked.
CHECKED_KERAS_VERSIONS = ("3.15",)

# (Keras class, private method, its parameters after self): what this module relies on.
PRIVATE_API = (
    (keras.Model, "_maybe_symbolic_build", ("iterator", "data_batch")),
    (keras.optimizers.Optimizer, "_all_reduce_sum_gradients", ("grads_and_vars",)),
    (keras.optimizers.Optimizer, "_apply_weight_decay", ("variables",)),
    (keras.optimizers.Optimizer, "_get_variable_index", ("variable",)),
    (keras.optimizers.Optimizer, "_use_weight_decay", ("variable",)),
    # A function of the module: its first parameter is the object saved.
    (
        saving_lib,
        "_save_state",
        ("weights_store", "assets_store", "inner_path", "visited_saveables"),
    ),
)


class PrebuiltModel:
    """Mix in before `keras.Model`: `fit()` does not rebuild a model built with its optimizer.

    The model builds itself beforehand (e.g. one forward pass on a real
    batch, inside the strategy scope) and sets `built`.
    """

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        if self.built and self.optimizer is not None and self.optimizer.built:
            return
        super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)


class PresummedGradients:
    """Mix in before a `keras.optimizers.Optimizer`: gradients arrive summed over replicas.

    Keras clips *before* its own all-reduce, which under MirroredStrategy
    would clip each replica's partial gradient by its local norm. The train
    step sums first (`electra_tf.modeling.train_step`), so the clip is the
    global-norm clip, and this skips the second sum.
    """

    def _all_reduce_sum_gradients(self, grads_and_vars):
        return list(grads_and_vars)


class DecayInUpdateStep:
    """Mix in before a `keras.optimizers.Optimizer` whose `update_step` applies weight decay."""

    def _apply_weight_decay(self, variables):
        return


def variable_index(optimizer: keras.optimizers.Optimizer, variable) -> int:
    """The position of `variable` in the optimizer's slot lists (momentums, velocities...)."""
    return optimizer._get_variable_index(variable)


def uses_weight_decay(optimizer: keras.optimizers.Optimizer, variable) -> bool:
    """Whether `variable` is decayed (not excluded by `exclude_from_weight_decay`)."""
    return optimizer._use_weight_decay(variable)


def weights_h5(model: keras.Model) -> io.BytesIO:
    """The bytes `model.save_weights("x.weights.h5")` would write, in memory."""
    buffer = io.BytesIO()
    store = saving_lib.H5IOStore(buffer, mode="w")
    saving_lib._save_state(
        model, weights_store=store, assets_store=None, inner_path="", visited_saveables=set()
    )
    store.close()
    return buffer


def current_value(model: keras.Model, variable) -> np.ndarray:
    """The value of one of `model`'s (or its optimizer's) variables, also inside a JAX `fit`.

    Args:
        model: the model being trained.
        variable: one of `model.trainable_variables`,
            `model.non_trainable_variables` or `model.optimizer.variables`
            (or a variable of neither, read as it is).

    Returns:
        Its value, as NumPy (a host copy).
    """
    state = getattr(model, "_jax_state", None)
    if state and not getattr(model, "_jax_state_synced", True):
        groups = (
            ("trainable_variables", model.trainable_variables),
            ("non_trainable_variables", model.non_trainable_variables),
            ("optimizer_variables", model.optimizer.variables),
        )
        for group, variables in groups:
            for index, candidate in enumerate(variables):
                if candidate is variable:
                    return np.asarray(state[group][index])
    return np.asarray(variable)


def sync_variables(model: keras.Model) -> None:
    """Writes the JAX training state back into the model's variables (no-op on TensorFlow)."""
    sync = getattr(model, "jax_state_sync", None)
    if sync is not None:
        sync()
