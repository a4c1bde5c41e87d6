"""Choosing the tf.distribute strategy and the mixed-precision policy."""

from __future__ import annotations

import keras
import tensorflow as tf

STRATEGIES = ("auto", "mirrored", "default")


def split_cpu(num_devices: int) -> None:
    """Splits the CPU into `num_devices` logical devices (tests and CPU demos).

    Must run before TensorFlow initialises its devices.
    """
    if num_devices <= 1:
        return
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(num_devices)])


def create_strategy(kind: str = "auto") -> tf.distribute.Strategy:
    """Returns the strategy to train under.

    `auto`: MirroredStrategy over all visible GPUs if there is one, else the
    default (single-device) strategy. `mirrored`: MirroredStrategy over all
    GPUs, or over all logical CPU devices when there is no GPU. `default`: no
    distribution.
    """
    if kind not in STRATEGIES:
        raise ValueError(f"--strategy={kind!r}: choose one of {', '.join(STRATEGIES)}.")
    gpus = tf.config.list_logical_devices("GPU")
    if kind == "default" or (kind == "auto" and not gpus):
        return tf.distribute.get_strategy()
    if gpus:
        return tf.distribute.MirroredStrategy()
    cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
    return tf.distribute.MirroredStrategy(cpus)


def set_precision_policy(mixed_precision: str) -> None:
    """Sets Keras' global dtype policy: float32, mixed_float16 or mixed_bfloat16."""
    policy = {"none": "float32", "float16": "mixed_float16", "bfloat16": "mixed_bfloat16"}
    if mixed_precision not in policy:
        raise ValueError(f"--mixed_precision={mixed_precision!r}: choose one of {', '.join(policy)}.")
    keras.mixed_precision.set_global_policy(policy[mixed_precision])
