"""`TrainStep`'s update on Keras' JAX backend: a pure function of the training state.

Keras' JAX trainer jit-compiles `train_step(state, data)` and threads the
state (trainable, non-trainable, optimizer and metrics variables, as arrays)
through it. This step makes the update `TrainStep` makes on TensorFlow, from
the same three methods of the model (`step_denominators`, `step_loss`,
`step_logs`):

* **Global batch.** Under `keras.distribution.DataParallel` the batch is one
  array sharded over the devices, so the denominators and sums computed from
  it are already global: XLA inserts the cross-device sums that TensorFlow's
  replicas make with `all_reduce`.
* **Accumulation.** With K micro-batches, micro-batch k takes rows k, k+K,
  k+2K... of the batch: each device's shard keeps its own rows, and every
  micro-batch is divided by the whole batch's denominators, so the summed
  gradients are the batch's.
* **State.** Dropout and sampling seeds advance (non-trainable variables),
  the optimizer applies the gradients to the variables the model trains now
  (all, or one stage's in two-stage training) and `after_update` counts the
  batch, each inside a `keras.StatelessScope` whose new values become the
  next state.
* **Checks.** With a `finiteness` record attached, the logs carry the global
  gradient norm (`GRADIENT_NORM_LOG`) for the host to check; under float16
  loss scaling only the loss is checked, as on TensorFlow.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import keras

from electra_tf.finiteness import GRADIENT_NORM_LOG


def micro_batches(batch: dict, steps: int) -> list[dict]:
    """`batch` cut into `steps` micro-batches of rows k, k+steps, k+2*steps...

    Args:
        batch: {name: array [B, ...]}, B divisible by `steps`.
        steps: the number of micro-batches.
    """
    if steps == 1:
        return [batch]

    def take(value, k):
        rows = value.reshape((value.shape[0] // steps, steps) + tuple(value.shape[1:]))
        return rows[:, k]

    return [keras.tree.map_structure(lambda v, k=k: take(v, k), batch) for k in range(steps)]


def _current(variables, values, scope):
    """The values of `variables` after a stateless scope (unchanged ones as they were)."""
    out = []
    for variable, value in zip(variables, values):
        new = scope.get_current_value(variable)
        out.append(value if new is None else new)
    return out


def train_step(model, state, data):
    """One optimizer update of `model` (a `TrainStep`) on the global batch `data`.

    Args:
        model: the compiled model.
        state: (trainable, non-trainable, optimizer, metrics) lists of arrays,
            in the order of the model's and optimizer's variable lists.
        data: the batch, a dict of arrays [B, ...].

    Returns:
        (logs: {name: float32 scalar}, the new state).
    """
    trainable, non_trainable, optimizer_values, metrics_values = state
    trainable_variables = model.trainable_variables
    non_trainable_variables = model.non_trainable_variables
    optimizer = model.optimizer
    optimizer_mapping = list(zip(optimizer.variables, optimizer_values))
    denominators = model.step_denominators(data)

    def scaled_loss(trainable, non_trainable, part):
        mapping = list(zip(trainable_variables, trainable))
        mapping += list(zip(non_trainable_variables, non_trainable)) + optimizer_mapping
        with keras.StatelessScope(state_mapping=mapping) as scope:
            loss, sums = model.step_loss(part, denominators, training=True)
            scaled = optimizer.scale_loss(loss)
        return scaled, (sums, _current(non_trainable_variables, non_trainable, scope))

    gradient_of = jax.value_and_grad(scaled_loss, has_aux=True)
    grads = sums = None
    for part in micro_batches(data, model.gradient_accumulation_steps):
        (_, (part_sums, non_trainable)), part_grads = gradient_of(trainable, non_trainable, part)
        grads = part_grads if grads is None else jax.tree.map(jnp.add, grads, part_grads)
        sums = part_sums if sums is None else jax.tree.map(jnp.add, sums, part_sums)
    logs = dict(model.step_logs(sums, denominators))
    if model.nonfinite_record is not None and not isinstance(
        optimizer, keras.optimizers.LossScaleOptimizer
    ):
        logs[GRADIENT_NORM_LOG] = jnp.sqrt(
            sum(jnp.sum(jnp.square(g.astype("float32"))) for g in grads)
        )

    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        # Its skip-or-apply branches are pure only through its own
        # stateless_apply, which takes every variable it was built over.
        trainable, optimizer_values = optimizer.stateless_apply(optimizer_values, grads, trainable)
        with keras.StatelessScope(
            state_mapping=list(zip(non_trainable_variables, non_trainable))
        ) as scope:
            model.after_update()
        return logs, (
            trainable,
            _current(non_trainable_variables, non_trainable, scope),
            optimizer_values,
            metrics_values,
        )
    # The variables trained now (in two-stage training one model's) get the update.
    mapping = list(zip(trainable_variables, trainable))
    mapping += list(zip(non_trainable_variables, non_trainable)) + optimizer_mapping
    with keras.StatelessScope(state_mapping=mapping) as scope:
        optimizer.apply(grads, trainable_variables)
        model.after_update()
    state = (
        _current(trainable_variables, trainable, scope),
        _current(non_trainable_variables, non_trainable, scope),
        _current(optimizer.variables, optimizer_values, scope),
        metrics_values,
    )
    return logs, state
