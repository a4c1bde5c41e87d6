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
  gradients are the batch's. They run one after another (`jax.lax.scan`),
  holding one micro-batch's activations.
* **State.** Dropout and sampling seeds advance (non-trainable variables),
  the optimizer applies the gradients to the variables the model trains now
  (all, or one stage's in two-stage training) and `after_update` counts the
  batch, each inside a `keras.StatelessScope` whose new values become the
  next state.
* **Checks.** With a `finiteness.NonFiniteRecord` attached, its variables
  (in the non-trainable state) record the first step whose loss or global
  gradient norm is not finite; under float16 loss scaling only the loss is
  checked, as on TensorFlow.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import keras


def micro_batches(batch: dict, steps: int) -> dict:
    """`batch` cut into `steps` micro-batches of rows k, k+steps, k+2*steps...

    Args:
        batch: {name: array [B, ...]}, B divisible by `steps`.
        steps: the number of micro-batches.

    Returns:
        {name: array [steps, B / steps, ...]}: micro-batch k at index k.
    """

    def stack(value):
        rows = value.reshape((value.shape[0] // steps, steps) + tuple(value.shape[1:]))
        return jnp.swapaxes(rows, 0, 1)

    return keras.tree.map_structure(stack, batch)


def _accumulated(gradient_of, trainable, non_trainable, batch, steps):
    """(summed gradients, summed sums, non-trainable values) over `steps` micro-batches.

    One micro-batch after another (`jax.lax.scan`), so only one micro-batch's
    activations are alive at a time.
    """
    if steps == 1:
        (_, (sums, non_trainable)), grads = gradient_of(trainable, non_trainable, batch)
        return grads, sums, non_trainable
    parts = micro_batches(batch, steps)
    first = keras.tree.map_structure(lambda value: value[0], parts)
    (_, (sums_shape, _)), grads_shape = jax.eval_shape(gradient_of, trainable, non_trainable, first)

    def zeros(shapes):
        return jax.tree.map(lambda shape: jnp.zeros(shape.shape, shape.dtype), shapes)

    def one(carry, part):
        grads, sums, non_trainable = carry
        (_, (part_sums, non_trainable)), part_grads = gradient_of(trainable, non_trainable, part)
        grads = jax.tree.map(jnp.add, grads, part_grads)
        return (grads, jax.tree.map(jnp.add, sums, part_sums), non_trainable), None

    carry = (zeros(grads_shape), zeros(sums_shape), non_trainable)
    (grads, sums, non_trainable), _ = jax.lax.scan(one, carry, parts)
    return grads, sums, non_trainable


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
    grads, sums, non_trainable = _accumulated(
        gradient_of, trainable, non_trainable, data, model.gradient_accumulation_steps
    )
    logs = model.step_logs(sums, denominators)
    scaled = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
    norm = (
        None if scaled else jnp.sqrt(sum(jnp.sum(jnp.square(g.astype("float32"))) for g in grads))
    )

    def bookkeeping():
        # Reads the optimizer's step before this update: the step being taken.
        if model.nonfinite_record is not None:
            model.nonfinite_record.update(optimizer.iterations + 1, logs[model.loss_log], norm)
        model.after_update()

    mapping = list(zip(trainable_variables, trainable))
    mapping += list(zip(non_trainable_variables, non_trainable)) + optimizer_mapping
    with keras.StatelessScope(state_mapping=mapping) as scope:
        bookkeeping()
        if not scaled:
            # The variables trained now (in two-stage training one model's).
            optimizer.apply(grads, trainable_variables)
    non_trainable = _current(non_trainable_variables, non_trainable, scope)
    if scaled:
        # Its skip-or-apply branches are pure only through its own
        # stateless_apply, which takes every variable it was built over.
        trainable, optimizer_values = optimizer.stateless_apply(optimizer_values, grads, trainable)
    else:
        trainable = _current(trainable_variables, trainable, scope)
        optimizer_values = _current(optimizer.variables, optimizer_values, scope)
    state = (trainable, non_trainable, optimizer_values, metrics_values)
    return logs, state
