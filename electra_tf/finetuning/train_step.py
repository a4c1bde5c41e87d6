"""The train step of every fine-tuning model, on one device or several, in any precision.

`FinetuningTrainStep` is mixed into `ElectraClassifier` and `ElectraQA`. A
model supplies its per-example losses; one step then makes one optimizer
update from the global batch:

* the loss is the sum of the per-example losses divided by the number of
  examples of the *global* batch (`loss_reduction="mean"`), or not divided
  (`"sum"`, the original code's). Each replica computes its share and the
  replicas' gradients are summed before the update (and before the
  global-norm clip), so R replicas make the update one device makes on the
  same global batch;
* with `gradient_accumulation_steps` K, every replica's batch is cut into K
  micro-batches run one after the other, their gradients summed: the same
  update again, with the activations of one micro-batch;
* the loss is multiplied by the float16 loss scale before differentiation
  (`optimizer.scale_loss`); `optimizer.apply` divides it out and skips a
  step whose gradients overflow;
* with XLA on several replicas, each replica's forward and backward pass is
  compiled (a compiled step cannot span replicas, whose variables live on
  different devices); on one device Keras compiles the whole step
  (`compile(jit_compile=True)`).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from electra_tf.distribute import (global_batch_size, in_multi_worker_mode, micro_batch_sums,
                                   sum_over_replicas)
from electra_tf.finetuning.settings import LOSS_REDUCTIONS
from electra_tf.finiteness import gradient_norm


class FinetuningTrainStep:
    """The train step shared by the fine-tuning models; mix in before `keras.Model`.

    A model defines `log_names` (the values a step logs, "loss" first) and
    `example_losses(inputs, labels, training)`, which returns a float32 [B]
    tensor for each of them; "loss" is the one optimised. The logs of a step
    are their means over the global batch, whatever the loss reduction.
    `set_training_options` chooses the reduction, the accumulation and XLA;
    the defaults are the mean, no accumulation, no XLA.
    """

    loss_reduction = "mean"
    gradient_accumulation_steps = 1
    _replica_jit_compile = False
    _xla_gradients = None  # built on first use (see _replica_gradients)
    # A `finiteness.NonFiniteRecord` the trial loop attaches (untracked: not in checkpoints).
    nonfinite_record = None

    def set_training_options(self, loss_reduction: str = "mean",
                             gradient_accumulation_steps: int = 1,
                             jit_compile: bool = False) -> None:
        """How the next `fit` trains (call before it).

        Args:
            loss_reduction: "mean" over the global batch, or "sum" of the
                per-example losses (the original code's).
            gradient_accumulation_steps: micro-batches per replica batch.
            jit_compile: compile each replica's forward and backward pass
                with XLA when there are several replicas (with one, pass
                `jit_compile=True` to `compile` instead).
        """
        if loss_reduction not in LOSS_REDUCTIONS:
            raise ValueError(f"loss_reduction={loss_reduction!r}: choose one of "
                             f"{', '.join(LOSS_REDUCTIONS)}.")
        self.loss_reduction = loss_reduction
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self._replica_jit_compile = jit_compile
        self._xla_gradients = None
        self.train_function = None  # trace the step again with these options

    def _gradients(self, batch, divisor):
        """(scaled gradients of this (micro-)batch's loss share, sums of the logged values)."""
        inputs, labels = batch
        with tf.GradientTape() as tape:
            values = self.example_losses(inputs, labels, training=True)
            loss = tf.reduce_sum(values["loss"]) / divisor
            scaled = self.optimizer.scale_loss(loss)
        grads = tape.gradient(scaled, self.trainable_variables)
        return grads, tf.stack([tf.reduce_sum(values[name]) for name in self.log_names])

    def _replica_gradients(self, batch, divisor):
        """`_gradients`, XLA-compiled per replica when asked and the step itself is not."""
        if self._replica_jit_compile and tf.distribute.get_strategy().num_replicas_in_sync > 1:
            if self._xla_gradients is None:  # variables are captured, not arguments
                self._xla_gradients = tf.function(self._gradients, jit_compile=True)
            return self._xla_gradients(batch, divisor)
        return self._gradients(batch, divisor)

    def train_step(self, data):
        inputs, _ = data
        variables = self.trainable_variables
        # The replicas hold equal shares: the loop refuses a batch the
        # replicas and micro-batches do not divide.
        examples = global_batch_size(tf.nest.flatten(inputs)[0])
        divisor = examples if self.loss_reduction == "mean" else tf.constant(1.0)
        grads, sums = micro_batch_sums(
            lambda part: self._replica_gradients(part, divisor), data,
            self.gradient_accumulation_steps, variables, tf.zeros([len(self.log_names)]))
        grads = sum_over_replicas(grads)
        totals = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, sums)
        logs = dict(zip(self.log_names, tf.unstack(totals / examples)))
        if self.nonfinite_record is not None:
            # Global values: the same on every replica. A float16 step skipped
            # for overflow is the loss scale's business, not a fault.
            scaled = isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer)
            self.nonfinite_record.update(self.optimizer.iterations + 1, logs["loss"],
                                         None if scaled else gradient_norm(grads))
        self.optimizer.apply(grads, variables)
        if in_multi_worker_mode(tf.distribute.get_strategy()):
            # Keras averages logs across workers along axis 0, which scalars lack.
            logs = {name: value[None] for name, value in logs.items()}
        return logs

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        # Keras builds a model inside fit() from the replica-average of the
        # first batch, which MultiWorkerMirroredStrategy cannot take of a
        # dict of tensors. Built, with its optimizer, there is nothing to build.
        if self.built and self.optimizer is not None and self.optimizer.built:
            return
        super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)
