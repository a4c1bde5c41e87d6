"""Text -> model inputs: `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]` with segment ids.

Token ids are built as Python lists (one tokenizer call per chunk of texts)
and padded per batch by `make_dataset`, so short sentences do not pay for
`max_seq_length` positions.
"""

from __future__ import annotations

import itertools
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

from electra_tf.finetuning.kind.text_features import padded_batches, tokenize_texts, truncate_pair
from electra_tf.modeling.encoder import INPUT_NAMES


def build_inputs(
    tokens_a: list[int],
    tokens_b: Optional[list[int]],
    max_seq_length: int,
    cls_id: int,
    sep_id: int,
) -> tuple[list[int], list[int]]:
    """Wraps one example's word pieces with the special tokens.

    Args:
        tokens_a: word-piece ids of the first text.
        tokens_b: of the second text, or None for a single-text task.
        max_seq_length: total length limit including the special tokens.
        cls_id, sep_id: ids of [CLS] and [SEP].

    Returns:
        (input_ids, segment_ids), each of length <= max_seq_length.
    """
    tokens_a = list(tokens_a)
    if tokens_b is None:
        del tokens_a[max_seq_length - 2 :]
        ids = [cls_id] + tokens_a + [sep_id]
        return ids, [0] * len(ids)
    tokens_b = list(tokens_b)
    truncate_pair(tokens_a, tokens_b, max_seq_length - 3)
    ids = [cls_id] + tokens_a + [sep_id] + tokens_b + [sep_id]
    segments = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
    return ids, segments


def encode(
    tokenizer, texts_a: Sequence[str], texts_b: Optional[Sequence[str]], max_seq_length: int
) -> list[tuple[list[int], list[int]]]:
    """Tokenizes and wraps every example.

    Args:
        tokenizer: a `WordPieceTokenizer`.
        texts_a: N first texts.
        texts_b: N second texts, or None for single-text tasks.
        max_seq_length: length limit including special tokens (>= 3, or >= 5
            for pairs).

    Returns:
        N pairs `(input_ids, segment_ids)`.
    """
    minimum = 5 if texts_b is not None else 3
    if max_seq_length < minimum:
        raise ValueError(
            f"--max_seq_length={max_seq_length}: at least {minimum} tokens are "
            "needed for the special tokens and one word piece per text."
        )
    pieces_a = tokenize_texts(tokenizer, texts_a)
    pieces_b = tokenize_texts(tokenizer, texts_b) if texts_b is not None else [None] * len(pieces_a)
    return [
        build_inputs(a, b, max_seq_length, tokenizer.cls_id, tokenizer.sep_id)
        for a, b in zip(pieces_a, pieces_b)
    ]


def _flat(rows: Sequence[list[int]]) -> np.ndarray:
    """The rows concatenated into one int32 array."""
    return np.fromiter(
        itertools.chain.from_iterable(rows), np.int32, count=sum(len(row) for row in rows)
    )


def make_dataset(
    encoded: Sequence[tuple[list[int], list[int]]],
    labels: Optional[np.ndarray],
    batch_size: int,
    pad_id: int = 0,
    shuffle_seed: Optional[int] = None,
    repeat: bool = False,
    by_length: bool = False,
) -> tf.data.Dataset:
    """A `tf.data` pipeline of padded batches.

    Each batch is padded to its own longest example (or, `by_length`, to its bucket).

    Args:
        encoded: output of `encode`.
        labels: [N] int class ids or float targets; None for unlabelled data
            (the dataset then yields only the inputs).
        batch_size: examples per batch (the last batch may be smaller).
        pad_id: id used for padding positions.
        shuffle_seed: if set, shuffle with this seed, differently each epoch.
        repeat: repeat forever (training).
        by_length: group rows of similar length into batches, each padded to
            its bucket (`text_features.length_grouped_batches`).

    Returns:
        Dataset of `inputs` or `(inputs, labels)`; inputs is a dict of int32
        [B, L_batch] tensors `input_ids`, `input_mask`, `segment_ids`.
    """
    # Flat values and row lengths: `tf.ragged.constant` walks every nested
    # Python list and takes minutes on a training set of ~100,000 examples.
    lengths = np.array([len(e[0]) for e in encoded], np.int64)
    ids = tf.RaggedTensor.from_row_lengths(_flat([e[0] for e in encoded]), lengths)
    segments = tf.RaggedTensor.from_row_lengths(_flat([e[1] for e in encoded]), lengths)
    columns = {"input_ids": ids, "segment_ids": segments}
    if labels is not None:
        columns["label"] = tf.convert_to_tensor(labels)
    padding = {"input_ids": pad_id, "segment_ids": 0, "input_mask": 0}
    if labels is not None:
        padding["label"] = tf.zeros([], dtype=columns["label"].dtype)

    def split(batch):
        inputs = {k: batch[k] for k in INPUT_NAMES}
        return (inputs, batch["label"]) if labels is not None else inputs

    return padded_batches(
        columns, len(encoded), batch_size, padding, split, shuffle_seed, repeat, by_length
    )
