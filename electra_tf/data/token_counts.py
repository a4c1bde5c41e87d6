"""How often each token id occurs in a directory of pre-training shards.

The unigram counts of the training text are the context-free baseline of
held-out evaluation (`electra_tf.pretraining.evaluation.rarity_metrics`):
a score that knows only how rare a token is.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from electra_tf.data.pipeline import load_shard_metadata

# Enough text for stable frequencies of all but the rarest pieces, read in
# seconds; the shards are read in their metadata order up to this many tokens.
DEFAULT_MAX_TOKENS = 20_000_000


def count_tokens(
    shard_dir: str, vocab_size: int, max_tokens: int = DEFAULT_MAX_TOKENS
) -> np.ndarray:
    """Counts the non-padding token ids of the shards (special tokens included).

    Args:
        shard_dir: a directory written by `electra_tf.data.shard_build.write_shards`.
        vocab_size: V; every id in the shards must be below it.
        max_tokens: stop after the example that reaches this many tokens.

    Returns:
        int64 [V]: occurrences of each id.
    """
    meta = load_shard_metadata(shard_dir)
    length = meta["max_seq_length"]
    features = {
        "input_ids": tf.io.FixedLenFeature([length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([length], tf.int64),
    }
    dataset = (
        tf.data.TFRecordDataset(meta["paths"])
        .batch(1024)
        .map(lambda records: tf.io.parse_example(records, features))
    )
    counts = np.zeros(vocab_size, np.int64)
    total = 0
    for batch in dataset:
        ids = batch["input_ids"].numpy()[batch["input_mask"].numpy() > 0]
        counts += np.bincount(ids, minlength=vocab_size)[:vocab_size]
        total += ids.size
        if total >= max_tokens:
            break
    return counts
