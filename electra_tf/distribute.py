"""Distribution helpers: the tf.distribute strategy, the precision policy, replica sums."""

from __future__ import annotations

import json
import os
from typing import Callable

import keras
import tensorflow as tf

from electra_tf.errors import RunError

STRATEGIES = ("auto", "mirrored", "multi_worker", "default")


def tf_config_task_count() -> int:
    """Number of chief + worker tasks in the TF_CONFIG environment variable (0 if unset)."""
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        return 0
    try:
        cluster = json.loads(raw).get("cluster", {})
    except ValueError as error:
        raise ValueError(f"TF_CONFIG is not valid JSON ({error}).")
    return len(cluster.get("chief", [])) + len(cluster.get("worker", []))


def split_cpu(num_devices: int) -> None:
    """Splits the CPU into `num_devices` logical devices (tests and CPU demos).

    Must run before TensorFlow initialises its devices.
    """
    if num_devices <= 1:
        return
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(num_devices)]
    )


def create_strategy(kind: str = "auto") -> tf.distribute.Strategy:
    """Returns the strategy to train under.

    `auto`: MultiWorkerMirroredStrategy when TF_CONFIG describes several
    workers; else MirroredStrategy over all visible GPUs if there is one, else
    the default (single-device) strategy. `multi_worker`: always
    MultiWorkerMirroredStrategy (configured by TF_CONFIG, the standard
    TensorFlow way, which is also how TPU and parameter-server setups are
    described). `mirrored`: MirroredStrategy over all
    GPUs, or over all logical CPU devices when there is no GPU. `default`: no
    distribution.
    """
    if kind not in STRATEGIES:
        raise ValueError(f"--strategy={kind!r}: choose one of {', '.join(STRATEGIES)}.")
    workers = tf_config_task_count()
    if kind == "multi_worker" or (kind == "auto" and workers > 1):
        if workers == 0:
            raise ValueError(
                "--strategy=multi_worker needs the TF_CONFIG environment variable "
                "(the cluster's workers and this process's task)."
            )
        # Every GPU of every worker; CPU-only workers contribute one replica each.
        return tf.distribute.MultiWorkerMirroredStrategy()
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
        raise ValueError(
            f"--mixed_precision={mixed_precision!r}: choose one of {', '.join(policy)}."
        )
    keras.mixed_precision.set_global_policy(policy[mixed_precision])


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """True for the process that writes checkpoints, logs and exports.

    That is the `chief` task, or worker 0 when the cluster has no chief;
    every single-process strategy is its own chief.
    """
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def task_name(strategy: tf.distribute.Strategy) -> str:
    """`worker-1`-style name of this process (`local` without a cluster)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return "local"
    return f"{resolver.task_type}-{resolver.task_id}"


def in_multi_worker_mode(strategy: tf.distribute.Strategy) -> bool:
    """True when `strategy` spans several worker processes."""
    check = getattr(strategy.extended, "_in_multi_worker_mode", None)  # no public equivalent
    return bool(check and check())


def worker_print(
    print_fn: Callable[[str], None], strategy: tf.distribute.Strategy
) -> Callable[[str], None]:
    """`print_fn` for this process: the chief's as it is, another worker's lines labelled."""
    if is_chief(strategy):
        return print_fn
    label = task_name(strategy)
    return lambda message: print_fn(f"[{label}] {message}")


def check_same_on_all_workers(strategy: tf.distribute.Strategy, values: dict) -> None:
    """Raises RunError unless every worker holds the same integer for each named value."""
    names = list(values)
    local = tf.constant([values[n] for n in names], tf.int64)

    gathered = strategy.run(
        lambda: tf.distribute.get_replica_context().all_gather(local[None], axis=0)
    )
    every = strategy.experimental_local_results(gathered)[0].numpy()  # [replicas, values]
    differing = [n for n, column in zip(names, every.T) if len(set(column.tolist())) > 1]
    if differing:
        raise RunError("The workers disagree on " + "; ".join(differing) + ".")


def true_on_all_workers(strategy: tf.distribute.Strategy, value: bool) -> bool:
    """Whether `value` is True on every worker (a collective: every worker must call it)."""
    local = tf.constant([int(bool(value))], tf.int64)
    gathered = strategy.run(lambda: tf.distribute.get_replica_context().all_gather(local, axis=0))
    return bool(strategy.experimental_local_results(gathered)[0].numpy().min())


def sum_over_replicas(grads):
    """All-reduces (sums) gradients across replicas; identity on one replica.

    Args:
        grads: per-replica gradients, None for variables without one.

    Returns:
        The sums, in the same order (None stays None).
    """
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return grads
    present = [g for g in grads if g is not None]
    reduced = iter(context.all_reduce(tf.distribute.ReduceOp.SUM, present))
    return [None if g is None else next(reduced) for g in grads]


def replica_count(strategy: tf.distribute.Strategy) -> int:
    """The devices a step's batch is split over: the strategy's replicas on TensorFlow,
    the devices of Keras' distribution (`create_jax_distribution`) on JAX."""
    if keras.backend.backend() == "tensorflow":
        return strategy.num_replicas_in_sync
    distribution = keras.distribution.distribution()
    return 1 if distribution is None else int(distribution.device_mesh.devices.size)


def create_jax_distribution(kind: str = "auto") -> int:
    """Keras' distribution on the JAX backend for --strategy; returns the device count.

    `auto` and `mirrored`: `keras.distribution.DataParallel` over every
    device JAX sees when it sees several (GPUs, a TPU slice's chips, or host
    CPU devices made with XLA_FLAGS=--xla_force_host_platform_device_count=N),
    one device otherwise; `default`: one device. A multi-host run is not
    set up here (`multi_worker` is refused).

    TensorFlow, which only reads the data, is kept off the accelerators.
    """
    if kind not in STRATEGIES:
        raise ValueError(f"--strategy={kind!r}: choose one of {', '.join(STRATEGIES)}.")
    if kind == "multi_worker":
        raise ValueError(
            f"--strategy=multi_worker is TensorFlow's (TF_CONFIG); on KERAS_BACKEND="
            f"{keras.backend.backend()} one process trains on all its devices: use "
            "--strategy=auto, or KERAS_BACKEND=tensorflow for several workers."
        )
    tf.config.set_visible_devices([], "GPU")
    devices = keras.distribution.list_devices()
    if kind == "default" or len(devices) == 1:
        return 1
    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
    return len(devices)


def check_batch_split(
    strategy: tf.distribute.Strategy, train_batch_size: int, gradient_accumulation_steps: int
) -> None:
    """Raises RunError unless the global batch splits evenly into replicas and micro-batches.

    Equal shares are what make the replicas' summed gradients the gradient of
    the global batch (see `electra_tf.modeling.train_step`).
    """
    replicas = replica_count(strategy)
    if train_batch_size % (replicas * gradient_accumulation_steps):
        raise RunError(
            f"--train_batch_size={train_batch_size} is not divisible by the "
            f"{replicas} replicas of the distribution strategy times "
            f"--gradient_accumulation_steps={gradient_accumulation_steps}."
        )


def micro_batch_sums(compute, batch, steps: int, variables, zero_stats=None):
    """Sums the gradients and statistics of `compute` over `steps` micro-batches of `batch`.

    The micro-batches run one after the other in a `tf.while_loop`, so only
    one micro-batch's activations are alive at a time. When `compute`
    normalises each micro-batch's loss by the size of the whole batch, the
    sums are the gradients of the whole batch: the same update, less memory.

    Args:
        compute: micro-batch -> (gradients in the order of `variables`, None
            for a variable without one; a nest of float32 statistics shaped
            like `zero_stats`).
        batch: a nest of [B, ...] tensors; B divisible by `steps`. Micro-batch
            i holds rows [i * B / steps, (i + 1) * B / steps).
        steps: number of micro-batches; 1 calls `compute(batch)` alone.
        variables: the variables differentiated (shapes and dtypes of the sums).
        zero_stats: zeros in the structure of the statistics; None takes the
            structure from the first micro-batch, which then runs before the
            loop (so `compute` is traced twice).

    Returns:
        (gradients, statistics), each summed over the micro-batches. Gradients
        are dense when steps > 1 (embedding gradients arrive as IndexedSlices),
        and zeros where `compute` gives None.
    """
    if steps == 1:
        return compute(batch)
    micro = tf.nest.map_structure(
        lambda t: tf.reshape(t, tf.concat([[steps, -1], tf.shape(t)[1:]], 0)), batch
    )

    def body(i, grad_sums, stat_sums):
        grads, stats = compute(tf.nest.map_structure(lambda t: t[i], micro))
        return (
            i + 1,
            [a if g is None else a + tf.convert_to_tensor(g) for a, g in zip(grad_sums, grads)],
            stats if stat_sums is None else tf.nest.map_structure(tf.add, stat_sums, stats),
        )

    start = tf.constant(0)
    grads = [tf.zeros(v.shape, v.dtype) for v in variables]
    if zero_stats is None:
        start, grads, zero_stats = body(start, grads, None)
    _, grads, stats = tf.while_loop(lambda i, *_: i < steps, body, (start, grads, zero_stats))
    return grads, stats
