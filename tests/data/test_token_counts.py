"""Tests for electra_tf.data.token_counts on tiny shards written here."""

import numpy as np
from test_pipeline import _write_shards

from electra_tf.data.token_counts import count_tokens


def test_counts_every_unpadded_token_of_every_shard(tmp_path):
    examples = _write_shards(str(tmp_path), (5, 4, 6))
    expected = np.zeros(2000, np.int64)
    for ids, mask, _ in examples:
        np.add.at(expected, ids[mask > 0], 1)
    counts = count_tokens(str(tmp_path), 2000)
    np.testing.assert_array_equal(counts, expected)
    assert counts[0] == 0  # padding is not counted
    assert counts[2] == 15  # one [CLS] per example


def test_stops_after_the_example_that_reaches_the_limit(tmp_path):
    examples = _write_shards(str(tmp_path), (5, 4))
    # Reading is batched, so the limit is met within the first batch of records:
    # all 9 examples here (under one batch) are counted, never more.
    counts = count_tokens(str(tmp_path), 2000, max_tokens=1)
    assert counts.sum() == sum(int(m.sum()) for _, m, _ in examples)
