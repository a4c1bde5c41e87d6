"""Distribution helpers: the replica sum, the global batch size and micro-batch sums."""

import numpy as np
import tensorflow as tf

from electra_tf.distribute import micro_batch_sums, sum_over_replicas


def test_sum_over_replicas_adds_per_replica_values(two_replica_strategy):
    strategy = two_replica_strategy

    def fn():
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        return sum_over_replicas([tf.cast(replica + 1, tf.float32) * tf.ones(2), None])

    result = strategy.run(fn)
    for value in strategy.experimental_local_results(result[0]):
        np.testing.assert_array_equal(value.numpy(), [3.0, 3.0])
    assert result[1] is None


def test_micro_batch_sums_add_named_statistics_with_or_without_their_zeros():
    weight = tf.Variable([1.0, 2.0])
    rows = tf.constant([[1.0, 0.0], [0.0, 3.0], [2.0, 2.0], [5.0, 1.0]])

    def compute(part):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(part * weight)
        return [tape.gradient(loss, weight)], {
            "loss": {"sum": loss},
            "rows": tf.cast(tf.shape(part)[0], tf.float32),
        }

    zeros = {"loss": {"sum": tf.constant(0.0)}, "rows": tf.constant(0.0)}
    for zero_stats in (zeros, None):
        grads, stats = tf.function(
            lambda zero_stats=zero_stats: micro_batch_sums(compute, rows, 2, [weight], zero_stats)
        )()
        # Column sums [8, 6] are the whole batch's gradient; 1*8 + 2*6 its loss.
        np.testing.assert_array_equal(grads[0].numpy(), [8.0, 6.0])
        assert float(stats["loss"]["sum"]) == 20.0 and float(stats["rows"]) == 4.0
