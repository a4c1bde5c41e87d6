"""Text features every task kind builds: word pieces of many texts, pair truncation, batches.

The rows of a task's features are Python lists of ids (one tokenizer call
per chunk of texts); `padded_batches` turns ragged columns of them into
`tf.data` batches padded to each batch's longest row, or, for training,
grouped by length (`length_grouped_batches`).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import tensorflow as tf

# Texts per tokenizer call: large enough to amortise the op dispatch, small
# enough to keep the ragged intermediate tensors modest.
_TOKENIZE_CHUNK = 4096


def truncate_pair(tokens_a: list, tokens_b: list, max_tokens: int) -> None:
    """Truncates in place until `len(a) + len(b) <= max_tokens`.

    One token at a time from the end of the longer list (from B on a tie), as
    BERT and ELECTRA do: a short sentence keeps all its tokens instead of both
    losing the same fraction.
    """
    while len(tokens_a) + len(tokens_b) > max_tokens:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def tokenize_texts(tokenizer, texts: Sequence[str]) -> list[list[int]]:
    """Word-piece ids of each text (chunked tokenizer calls)."""
    out: list[list[int]] = []
    for start in range(0, len(texts), _TOKENIZE_CHUNK):
        out.extend(tokenizer.tokenize_to_lists(list(texts[start : start + _TOKENIZE_CHUNK])))
    return out


def bucket_lengths(longest: int) -> list[int]:
    """The lengths training batches are padded to when grouped by length, up to `longest`.

    16, 32, 48, 64, 96, 128, 192, 256, 384, 512, ...: powers of two and the
    midpoints between them, so that a row is padded by at most a third of its
    bucket, and a model of length 128 sees six shapes (XLA compiles each once).
    The last bucket is `longest` itself.
    """
    lengths, power = [16], 32
    while lengths[-1] < longest:
        lengths += [power, power * 3 // 2]
        power *= 2
    return [length for length in lengths if length < longest] + [longest]


def length_grouped_batches(
    rows: tf.data.Dataset,
    batch_size: int,
    longest: int,
    padded_shapes: Callable[[tf.Tensor], dict],
    padding: dict,
) -> tf.data.Dataset:
    """Batches of rows of the same bucket (`bucket_lengths(longest)`), each padded to it.

    A batch takes the first `batch_size` rows of its bucket in the order
    `rows` come (shuffled rows give random batches within a bucket); a
    bucket's rows wait until it has a batch (the stream of a repeated
    dataset never ends, so every batch is whole).

    Args:
        rows: dict rows whose `input_ids` has the token axis last.
        longest: the longest row's token count.
        padded_shapes: the bucket length (an int64 scalar tensor) -> the
            rows' `padded_shapes` for `padded_batch`.
        padding: column name -> padding value.
    """
    buckets = tf.constant(bucket_lengths(longest), tf.int64)

    def bucket(row):
        length = tf.shape(row["input_ids"], out_type=tf.int64)[-1:]
        return tf.searchsorted(buckets, length, out_type=tf.int64)[0]

    def batches(key, same_bucket):
        return same_bucket.padded_batch(
            batch_size, padded_shapes=padded_shapes(buckets[key]), padding_values=padding
        )

    return rows.group_by_window(bucket, batches, window_size=batch_size)


def padded_batches(
    columns: dict,
    num_rows: int,
    batch_size: int,
    padding: dict,
    split: Callable[[dict], Any],
    shuffle_seed: Optional[int] = None,
    repeat: bool = False,
    by_length: bool = False,
) -> tf.data.Dataset:
    """Rows of ragged `columns` as batches padded to their longest row, or grouped by length.

    Args:
        columns: name -> ragged [N, None] tensor (or [N] per-row values); at
            least `input_ids`. Each row gets `input_mask` (ones) and, when
            it has none, `segment_ids` (zeros).
        num_rows: N (the shuffle buffer holds them all).
        batch_size: rows per batch (the last batch may be smaller).
        padding: column name -> padding value.
        split: a padded batch (a dict) -> what the dataset yields.
        shuffle_seed: if set, shuffle with this seed, differently each epoch.
        repeat: repeat forever (training).
        by_length: batches of rows of similar length, each padded to its
            bucket's length on every ragged column (`length_grouped_batches`;
            word columns are never longer than the token column).
    """
    dataset = tf.data.Dataset.from_tensor_slices(columns)
    if shuffle_seed is not None:
        dataset = dataset.shuffle(num_rows, seed=shuffle_seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()

    def complete(row):
        row = dict(row)
        row["input_mask"] = tf.ones_like(row["input_ids"])
        if "segment_ids" not in row:
            row["segment_ids"] = tf.zeros_like(row["input_ids"])
        return row

    dataset = dataset.map(complete)
    if by_length:
        ragged = {name for name, value in columns.items() if isinstance(value, tf.RaggedTensor)}
        ragged |= {"input_mask", "segment_ids"}

        def shapes(length):
            return {name: [length] if name in ragged else [] for name in dataset.element_spec}

        longest = int(tf.reduce_max(columns["input_ids"].row_lengths()))
        dataset = length_grouped_batches(dataset, batch_size, longest, shapes, padding)
    else:
        dataset = dataset.padded_batch(batch_size, padding_values=padding)
    return dataset.map(split).prefetch(tf.data.AUTOTUNE)
