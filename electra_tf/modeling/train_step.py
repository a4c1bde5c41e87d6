"""The one train step of electra-tf: pre-training and fine-tuning models mix it in.

One step makes one optimizer update from the global batch, on one device or
several, in any precision:

* **Global-batch normalisation.** A model first reads its loss denominators
  from the inputs alone (`step_denominators`: masked slots, tokens,
  examples...); the step sums them over the replicas, and every replica
  divides its loss sums by those *global* denominators. The replicas'
  gradients are then summed (before the optimizer's global-norm clip), so R
  replicas make the update one device makes on the same global batch.
* **Accumulation.** With `gradient_accumulation_steps` K, every replica's
  batch is cut into K micro-batches run one after the other
  (`distribute.micro_batch_sums`) and their gradients summed: the same
  update again, with the activations of one micro-batch.
* **Loss scaling.** The loss is multiplied by the float16 loss scale before
  differentiation (`optimizer.scale_loss`); `optimizer.apply` divides it
  out and skips a step whose gradients overflow.
* **XLA.** On one device Keras compiles the whole step
  (`compile(jit_compile=True)`). A compiled step cannot span replicas,
  whose variables live on different devices, so with several replicas each
  replica's forward and backward pass is compiled instead
  (`replica_jit_compile`).
* **JAX.** On Keras' JAX backend the same update is a pure function of
  the training state (`electra_tf.modeling.jax_train_step`).
* **Logging.** The step returns the model's logs of the global sums
  (`step_logs`), checks the loss and gradient norm for non-finite values
  when a `finiteness.NonFiniteRecord` is attached, and gives multi-worker
  Keras the shape it averages.

A model says what its loss is, by name, in three methods:

    step_denominators(batch)            -> nest of float32 scalars (this replica's)
    step_loss(batch, denominators, training)
                                        -> (this replica's loss share, nest of sums)
    step_logs(sums, denominators)       -> {name: float32 scalar}, from global sums
"""

from __future__ import annotations

import keras
import tensorflow as tf

from electra_tf.distribute import in_multi_worker_mode, micro_batch_sums, sum_over_replicas
from electra_tf.finiteness import gradient_norm
from electra_tf.keras_compat import PrebuiltModel


def replica_sum(values):
    """A nest of float32 tensors summed over the replicas, without gradient.

    On another backend than TensorFlow the arrays are already global (see
    `jax_train_step`) and are returned as they are.
    """
    if keras.backend.backend() != "tensorflow":
        return values
    total = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, values)
    return tf.nest.map_structure(tf.stop_gradient, total)


class TrainStep(PrebuiltModel):
    """Mix in before `keras.Model`: the `train_step` of every electra-tf model.

    Attributes:
        gradient_accumulation_steps: micro-batches per replica batch.
        replica_jit_compile: compile each replica's forward and backward
            pass with XLA when there are several replicas.
        loss_log: the log `step_logs` returns the optimised loss under,
            checked for non-finite values.
        nonfinite_record: a `finiteness.NonFiniteRecord` the training loop
            attaches (None: no check). Not tracked: not in checkpoints.
    """

    gradient_accumulation_steps = 1
    replica_jit_compile = False
    loss_log = "loss"
    nonfinite_record = None
    _xla_gradients = None  # built on first use (see _replica_gradients)

    # ------------------------------------------------------- what a model defines
    def step_denominators(self, batch):
        """This replica's loss denominators, read from the inputs alone.

        Args:
            batch: the (per-replica) batch `fit` passes to `train_step`.

        Returns:
            A nest of float32 scalars; the step sums it over the replicas.
        """
        raise NotImplementedError

    def step_loss(self, batch, denominators, training: bool):
        """The forward pass over one (micro-)batch of this replica.

        Args:
            batch: the (micro-)batch.
            denominators: `step_denominators` of the *global* batch.
            training: enables dropout.

        Returns:
            (float32 scalar, this replica's share of the global loss: its loss
            sums divided by `denominators`; a nest of float32 scalar sums for
            the logs).
        """
        raise NotImplementedError

    def step_logs(self, sums, denominators) -> dict:
        """The logged values of one step from the global `sums` (float32 scalars by name)."""
        raise NotImplementedError

    def zero_sums(self):
        """Zeros shaped like `step_loss`'s sums, or None to trace one micro-batch to learn it."""
        return None

    def after_update(self) -> None:
        """Runs after each optimizer update (e.g. counts the batches consumed)."""

    def attach_nonfinite_record(self, record) -> None:
        """Checks every step's loss and gradient norm into `record` (a `NonFiniteRecord`).

        On JAX its variables join the model's non-trainable state, the only
        variables a jit-compiled step writes.
        """
        self.nonfinite_record = record
        if keras.backend.backend() != "tensorflow":
            self._nonfinite_state = list(record.variables)

    # ------------------------------------------------------------------ the step
    def _gradients(self, batch, denominators):
        """(scaled gradients of this (micro-)batch's loss share, its sums)."""
        with tf.GradientTape() as tape:
            loss, sums = self.step_loss(batch, denominators, training=True)
            scaled = self.optimizer.scale_loss(loss)
        return tape.gradient(scaled, self.trainable_variables), sums

    def _replica_gradients(self, batch, denominators):
        """`_gradients`, XLA-compiled per replica when asked and the step itself is not."""
        if self.replica_jit_compile and tf.distribute.get_strategy().num_replicas_in_sync > 1:
            if self._xla_gradients is None:  # variables are captured, not arguments
                self._xla_gradients = tf.function(self._gradients, jit_compile=True)
            return self._xla_gradients(batch, denominators)
        return self._gradients(batch, denominators)

    def train_step(self, *args):
        if keras.backend.backend() == "jax":  # Keras passes (state, data)
            from electra_tf.modeling import jax_train_step

            return jax_train_step.train_step(self, *args)
        (data,) = args
        # Keras calls this step inside a function that also takes the batch
        # from the input iterator. TensorFlow inlines the step, and an inlined
        # op starts as soon as its own inputs are ready: the step counter,
        # the batch counter and the dropout seeds, which read no input, would
        # advance even when taking the batch fails (a damaged shard), leaving
        # the state of no step. Every op of the step waits for the batch.
        # The optimizer's variables are made first, outside that dependency: a
        # variable created under it cannot be lifted out of an XLA-compiled step.
        if not self.optimizer.built:
            self.optimizer.build(self.trainable_variables)
        with tf.control_dependencies(tf.nest.flatten(data)):
            return self._train_step(data)

    def _train_step(self, data):
        variables = self.trainable_variables
        denominators = replica_sum(self.step_denominators(data))
        # Every micro-batch's loss is divided by the denominators of the whole
        # batch, so the summed gradients are those of the full batch.
        grads, sums = micro_batch_sums(
            lambda part: self._replica_gradients(part, denominators),
            data,
            self.gradient_accumulation_steps,
            variables,
            self.zero_sums(),
        )
        grads = sum_over_replicas(grads)
        logs = self.step_logs(replica_sum(sums), denominators)
        if self.nonfinite_record is not None:
            # Global values: the same on every replica. A float16 step skipped
            # for overflow is the loss scale's business, not a fault.
            scaled = isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer)
            self.nonfinite_record.update(
                self.optimizer.iterations + 1,
                logs[self.loss_log],
                None if scaled else gradient_norm(grads),
            )
        self.optimizer.apply(grads, variables)
        self.after_update()
        if in_multi_worker_mode(tf.distribute.get_strategy()):
            # Keras averages logs across workers along axis 0, which scalars lack.
            logs = {name: value[None] for name, value in logs.items()}
        return logs
