"""The original ELECTRA optimiser, shared by pre-training and fine-tuning.

AdamW without bias correction (`AdamWeightDecay`) and its learning-rate
schedules: warmup times polynomial decay (`WarmupLinearDecay`), and two such
schedules back to back for two-stage pre-training (`TwoStageSchedule`).
"""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import ops

from electra_tf.keras_compat import (
    DecayInUpdateStep,
    PresummedGradients,
    uses_weight_decay,
    variable_index,
)

# Substrings of variable names that get no weight decay: LayerNorm scale and
# offset (named gamma/beta in Keras) and every bias, as in the original code.
NO_WEIGHT_DECAY = ("gamma", "beta", "bias")


@keras.saving.register_keras_serializable(package="electra_tf")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """lr(step) = peak * (1 - step / total) ** power * min(1, step / warmup).

    The warmup factor *multiplies* the decaying schedule, as in the original
    code, so the peak reached at the end of warmup is slightly below `peak`.

    Args:
        peak_learning_rate: the nominal learning rate.
        num_train_steps: step at which the rate reaches 0.
        num_warmup_steps: length of the linear warmup (0 disables it).
        power: polynomial decay power (1.0 = linear).
    """

    def __init__(
        self,
        peak_learning_rate: float,
        num_train_steps: int,
        num_warmup_steps: int,
        power: float = 1.0,
    ):
        self.peak_learning_rate = peak_learning_rate
        self.num_train_steps = num_train_steps
        self.num_warmup_steps = num_warmup_steps
        self.power = power

    def __call__(self, step):
        step = ops.cast(step, "float32")
        progress = ops.minimum(step, float(self.num_train_steps)) / float(self.num_train_steps)
        rate = self.peak_learning_rate * ops.power(1.0 - progress, self.power)
        if self.num_warmup_steps > 0:
            rate = rate * ops.minimum(1.0, step / float(self.num_warmup_steps))
        return rate

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "power": self.power,
        }


@keras.saving.register_keras_serializable(package="electra_tf")
class AdamWeightDecay(PresummedGradients, DecayInUpdateStep, keras.optimizers.Optimizer):
    """Adam with decoupled weight decay and no bias correction (the original's update).

    update = m / (sqrt(v) + epsilon) + weight_decay * w;  w -= lr * update.

    Gradients must arrive already summed over replicas (see
    `electra_tf.modeling.train_step`): Keras clips *before* its own
    all-reduce, which under MirroredStrategy would clip each replica's partial
    gradient by its local norm. Summing first, then clipping, gives the
    global-norm clip of the original code, and this class skips the second
    all-reduce (`keras_compat.PresummedGradients`).

    Args:
        learning_rate: float or schedule.
        weight_decay: decoupled weight decay rate; variables whose name matches
            `NO_WEIGHT_DECAY` are excluded.
        beta_1, beta_2, epsilon: Adam moments and epsilon.
        global_clipnorm: clip the global gradient norm to this value (None: off).
    """

    def __init__(
        self,
        learning_rate=5e-4,
        weight_decay: float = 0.01,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-6,
        global_clipnorm=1.0,
        name: str = "adam_weight_decay",
        **kwargs,
    ):
        super().__init__(
            learning_rate=learning_rate,
            weight_decay=weight_decay or None,
            global_clipnorm=global_clipnorm or None,
            name=name,
            **kwargs,
        )
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.exclude_from_weight_decay(var_names=list(NO_WEIGHT_DECAY))

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._momentums, self._velocities = self.add_optimizer_variables(
            var_list, ["momentum", "velocity"]
        )

    def apply(self, grads, trainable_variables=None):
        # Dense before the global-norm clip. The norm of a sparse (IndexedSlices)
        # gradient is taken over its per-occurrence rows, so a token seen twice
        # would count as two rows instead of one summed row; the original
        # trained on TPUs with one-hot (dense) embedding gradients.
        if keras.backend.backend() == "tensorflow":
            grads = [g if g is None else tf.convert_to_tensor(g) for g in grads]
        return super().apply(grads, trainable_variables)

    def learning_rate_multiplier(self, index: int) -> float:
        """The learning-rate scale of the variable at `index` (1.0; fine-tuning sets them)."""
        del index
        return 1.0

    def update_step(self, gradient, variable, learning_rate):
        # Weight decay is applied here, where the variable's rate is known
        # (keras_compat.DecayInUpdateStep turns off Keras' separate pass).
        index = variable_index(self, variable)
        lr = ops.cast(learning_rate, variable.dtype) * self.learning_rate_multiplier(index)
        gradient = ops.cast(gradient, variable.dtype)  # dense, see apply()
        m, v = self._momentums[index], self._velocities[index]
        self.assign(m, self.beta_1 * m + (1.0 - self.beta_1) * gradient)
        self.assign(v, self.beta_2 * v + (1.0 - self.beta_2) * ops.square(gradient))
        update = m / (ops.sqrt(v) + self.epsilon)
        if self.weight_decay and uses_weight_decay(self, variable):
            # Decoupled decay on the pre-update weight, scaled by the same rate.
            update = update + ops.cast(self.weight_decay, variable.dtype) * variable
        self.assign_sub(variable, lr * update)

    def get_config(self):
        config = super().get_config()
        config.update(beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon)
        return config


@keras.saving.register_keras_serializable(package="electra_tf")
class TwoStageSchedule(WarmupLinearDecay):
    """Two-stage training: each stage has its own warmup and decay to zero.

    The discriminator starts from fresh Adam moments at `boundary`; without a
    warmup of its own it would take its first (uncorrected, oversized) Adam
    steps at the half-decayed rate the generator left off with.

    Args:
        peak_learning_rate, num_warmup_steps, power: as `WarmupLinearDecay`.
        boundary: the first step of the second stage.
        num_train_steps: the last step of the second stage.
    """

    def __init__(
        self,
        peak_learning_rate: float,
        boundary: int,
        num_train_steps: int,
        num_warmup_steps: int,
        power: float = 1.0,
    ):
        super().__init__(peak_learning_rate, num_train_steps, num_warmup_steps, power)
        self.boundary = boundary
        self._first = WarmupLinearDecay(peak_learning_rate, boundary, num_warmup_steps, power)
        self._second = WarmupLinearDecay(
            peak_learning_rate, num_train_steps - boundary, num_warmup_steps, power
        )

    def __call__(self, step):
        step = ops.cast(step, "float32")
        second = self._second(ops.maximum(step - float(self.boundary), 0.0))
        return ops.where(step < float(self.boundary), self._first(step), second)

    def get_config(self):
        return {**super().get_config(), "boundary": self.boundary}
