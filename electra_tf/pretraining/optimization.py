"""The pre-training optimiser and learning-rate schedule of a `PretrainingConfig`."""

from __future__ import annotations

import keras

from electra_tf.optimization import AdamWeightDecay, TwoStageSchedule, WarmupLinearDecay


def learning_rate_schedule(config) -> keras.optimizers.schedules.LearningRateSchedule:
    """The pre-training learning-rate schedule of a `PretrainingConfig`."""
    if config.training == "two_stage":
        return TwoStageSchedule(
            config.learning_rate,
            config.resolved_two_stage_generator_steps,
            config.num_train_steps,
            config.num_warmup_steps,
            config.lr_decay_power,
        )
    return WarmupLinearDecay(
        config.learning_rate, config.num_train_steps, config.num_warmup_steps, config.lr_decay_power
    )


def create_optimizer(config, mixed_precision: str = "none") -> keras.optimizers.Optimizer:
    """The pre-training optimiser for a `PretrainingConfig`.

    float16 wraps it in a `LossScaleOptimizer` (dynamic loss scaling); bfloat16
    needs none.
    """
    optimizer = AdamWeightDecay(
        learning_rate=learning_rate_schedule(config),
        weight_decay=config.weight_decay_rate,
        beta_1=config.adam_beta_1,
        beta_2=config.adam_beta_2,
        epsilon=config.adam_epsilon,
        global_clipnorm=config.clip_norm,
    )
    if mixed_precision == "float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer
