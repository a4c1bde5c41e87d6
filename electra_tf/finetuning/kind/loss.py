"""The loss of every fine-tuning model, for the shared train step, and its saved config.

`FinetuningLoss` is mixed into `ElectraClassifier`, `ElectraQA` and
`ElectraTagger`. A model supplies its per-example losses
(`example_losses`); this turns them into the loss of one step of
`electra_tf.modeling.train_step.TrainStep`: the sum of the per-example losses
divided by the number of examples of the *global* batch
(`loss_reduction="mean"`), or not divided (`"sum"`, the original code's). The
train step does the rest (replicas, accumulation, loss scaling, XLA).
Every such model is an encoder with a head: its Keras config holds the
encoder's (`config_with_encoder`, `from_config`).
"""

from __future__ import annotations

import tensorflow as tf

from electra_tf.finetuning.kind.settings import LOSS_REDUCTIONS
from electra_tf.modeling.encoder import BuiltOnEncoder
from electra_tf.modeling.train_step import TrainStep


class FinetuningLoss(TrainStep, BuiltOnEncoder):
    """Mix in before `keras.Model`: a fine-tuning model's loss and logs for `TrainStep`.

    A model defines `log_names` (the values a step logs, "loss" first) and
    `example_losses(inputs, labels, training)`, which returns a float32 [B]
    tensor for each of them; "loss" is the one optimised. The logs of a step
    are their means over the global batch, whatever the loss reduction.
    `set_training_options` chooses the reduction, the accumulation and XLA;
    the defaults are the mean, no accumulation, no XLA.
    """

    loss_reduction = "mean"

    def set_training_options(
        self,
        loss_reduction: str = "mean",
        gradient_accumulation_steps: int = 1,
        jit_compile: bool = False,
    ) -> None:
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
            raise ValueError(
                f"loss_reduction={loss_reduction!r}: choose one of {', '.join(LOSS_REDUCTIONS)}."
            )
        self.loss_reduction = loss_reduction
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.replica_jit_compile = jit_compile
        self._xla_gradients = None
        self.train_function = None  # trace the step again with these options

    def step_denominators(self, data):
        inputs, _ = data
        # The replicas hold equal shares: the loop refuses a batch the
        # replicas and micro-batches do not divide.
        return {"examples": tf.cast(tf.shape(tf.nest.flatten(inputs)[0])[0], tf.float32)}

    def step_loss(self, batch, denominators, training):
        inputs, labels = batch
        values = self.example_losses(inputs, labels, training=training)
        divisor = denominators["examples"] if self.loss_reduction == "mean" else 1.0
        sums = {name: tf.reduce_sum(values[name]) for name in self.log_names}
        return sums["loss"] / divisor, sums

    def step_logs(self, sums, denominators):
        return {name: sums[name] / denominators["examples"] for name in self.log_names}

    def zero_sums(self):
        return {name: tf.zeros([]) for name in self.log_names}
