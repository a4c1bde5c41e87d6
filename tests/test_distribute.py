"""Distribution helpers: the replica sum and the global batch size."""

import numpy as np
import tensorflow as tf

from electra_tf.distribute import global_batch_size, sum_over_replicas


def test_sum_over_replicas_adds_per_replica_values(two_replica_strategy):
    strategy = two_replica_strategy

    def fn():
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        return sum_over_replicas([tf.cast(replica + 1, tf.float32) * tf.ones(2), None])

    result = strategy.run(fn)
    for value in strategy.experimental_local_results(result[0]):
        np.testing.assert_array_equal(value.numpy(), [3.0, 3.0])
    assert result[1] is None


def test_global_batch_size_counts_every_replica(two_replica_strategy):
    strategy = two_replica_strategy
    result = strategy.run(lambda: global_batch_size(tf.zeros([3])))
    assert [float(v) for v in strategy.experimental_local_results(result)] == [6.0, 6.0]
    assert float(global_batch_size(tf.zeros([5]))) == 5.0  # no strategy: one replica
