"""Text features every task kind builds: word pieces of many texts, pair truncation, batches.

The rows of a task's features are Python lists of ids (one tokenizer call
per chunk of texts); `padded_batches` turns ragged columns of them into
`tf.data` batches padded to each batch's longest row.
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


def padded_batches(
    columns: dict,
    num_rows: int,
    batch_size: int,
    padding: dict,
    split: Callable[[dict], Any],
    shuffle_seed: Optional[int] = None,
    repeat: bool = False,
) -> tf.data.Dataset:
    """Rows of ragged `columns` as batches padded to their longest row.

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

    dataset = dataset.map(complete).padded_batch(batch_size, padding_values=padding)
    return dataset.map(split).prefetch(tf.data.AUTOTUNE)
