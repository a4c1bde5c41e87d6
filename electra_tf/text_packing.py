"""Raw text -> `input_ids`, `input_mask`, `segment_ids` with graph ops only.

Gives exactly what `electra_tf.finetuning.classification.features.encode` gives in Python:
`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, a single text cut to
`max_seq_length - 2` word pieces, and a pair shortened one piece at a time
from the end of the longer text (from B on a tie). That loop has a closed
form, used here so the graph needs no `while_loop`:

* if `la + lb <= m` nothing is cut (`m = max_seq_length - 3`);
* else if the shorter text has at most `m // 2` pieces it is kept whole and
  the longer one gets the rest;
* else A keeps `ceil(m / 2)` and B `floor(m / 2)`.

Only core ragged ops are used (no `RoundRobinTrimmer`, whose op is missing
from TF Serving releases that bundle TensorFlow Text 2.12).
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf


def pair_lengths(len_a: tf.Tensor, len_b: tf.Tensor, budget: int) -> tuple[tf.Tensor, tf.Tensor]:
    """Lengths after `finetuning.features.truncate_pair` (int64 [B] each)."""
    len_a = tf.cast(len_a, tf.int64)
    len_b = tf.cast(len_b, tf.int64)
    m = tf.constant(budget, tf.int64)
    fits = len_a + len_b <= m
    half_up, half_down = (m + 1) // 2, m // 2
    a_short = (len_a <= len_b) & (2 * len_a <= m)
    b_short = (len_a > len_b) & (2 * len_b <= m)
    new_a = tf.where(fits, len_a, tf.where(a_short, len_a, tf.where(b_short, m - len_b, half_up)))
    new_b = tf.where(fits, len_b, tf.where(a_short, m - len_a, tf.where(b_short, len_b, half_down)))
    return new_a, new_b


def _head(pieces: tf.RaggedTensor, lengths: tf.Tensor) -> tf.RaggedTensor:
    """The first `lengths[i]` pieces of each row."""
    positions = tf.ragged.range(pieces.row_lengths())
    return tf.ragged.boolean_mask(pieces, positions < tf.expand_dims(lengths, 1))


def pack(
    pieces_a: tf.RaggedTensor,
    pieces_b: Optional[tf.RaggedTensor],
    max_seq_length: int,
    cls_id: int,
    sep_id: int,
    pad_id: int,
) -> dict[str, tf.Tensor]:
    """Adds the special tokens, truncates and pads to the batch's longest example.

    Args:
        pieces_a: int32 ragged [B, (n_a)] word pieces of the first texts.
        pieces_b: int32 ragged [B, (n_b)] of the second texts, or None.
        max_seq_length: limit including the special tokens.
        cls_id, sep_id, pad_id: special token ids.

    Returns:
        `input_ids`, `input_mask`, `segment_ids`: int32 [B, L], L <= max_seq_length.
    """
    batch = pieces_a.nrows()
    cls = tf.RaggedTensor.from_tensor(tf.fill([batch, 1], tf.constant(cls_id, tf.int32)))
    sep = tf.RaggedTensor.from_tensor(tf.fill([batch, 1], tf.constant(sep_id, tf.int32)))
    if pieces_b is None:
        keep = tf.minimum(pieces_a.row_lengths(), max_seq_length - 2)
        first = tf.concat([cls, _head(pieces_a, keep), sep], axis=1)
        ids = first
        segments = tf.zeros_like(first)
    else:
        keep_a, keep_b = pair_lengths(
            pieces_a.row_lengths(), pieces_b.row_lengths(), max_seq_length - 3
        )
        first = tf.concat([cls, _head(pieces_a, keep_a), sep], axis=1)
        second = tf.concat([_head(pieces_b, keep_b), sep], axis=1)
        ids = tf.concat([first, second], axis=1)
        segments = tf.concat([tf.zeros_like(first), tf.ones_like(second)], axis=1)
    mask = tf.ones_like(ids)
    return {
        "input_ids": ids.to_tensor(default_value=pad_id),
        "input_mask": mask.to_tensor(default_value=0),
        "segment_ids": segments.to_tensor(default_value=0),
    }


def pack_flat(
    pieces_a: tuple[tf.Tensor, tf.Tensor],
    pieces_b: Optional[tuple[tf.Tensor, tf.Tensor]],
    max_seq_length: int,
    cls_id: int,
    sep_id: int,
    pad_id: int,
) -> dict[str, tf.Tensor]:
    """`pack` for pieces given as (ids, row_splits), with dense ops only.

    The same outputs as `pack`, computed position by position: every output
    cell picks its id from one flat array, so no ragged op (with its shape
    checks) runs. That matters at batch 1, where a graph's cost is mostly
    the number of ops it runs.

    Args:
        pieces_a: (ids int32 [N], row_splits int64 [B + 1]) of the first
            texts (`WordPieceTokenizer.tokenize_flat`), B >= 1.
        pieces_b: the same for the second texts, or None.
        max_seq_length, cls_id, sep_id, pad_id: as in `pack`.

    Returns:
        `input_ids`, `input_mask`, `segment_ids`: int32 [B, L], L <= max_seq_length.
    """
    ids_a, splits_a = pieces_a
    start_a = splits_a[:-1, tf.newaxis]
    len_a = splits_a[1:, tf.newaxis] - start_a
    if pieces_b is None:
        keep_a = tf.minimum(len_a, max_seq_length - 2)
        values = tf.concat([ids_a, [cls_id, sep_id, pad_id]], axis=0)
        special = tf.size(ids_a, out_type=tf.int64)
        total = keep_a + 2
    else:
        ids_b, splits_b = pieces_b
        start_b = splits_b[:-1, tf.newaxis]
        keep_a, keep_b = pair_lengths(len_a, splits_b[1:, tf.newaxis] - start_b, max_seq_length - 3)
        values = tf.concat([ids_a, ids_b, [cls_id, sep_id, pad_id]], axis=0)
        special = tf.size(ids_a, out_type=tf.int64) + tf.size(ids_b, out_type=tf.int64)
        total = keep_a + keep_b + 3
    # Position p of a row: [CLS] at 0, A's pieces at 1..keep_a, [SEP], then B's.
    positions = tf.range(tf.reduce_max(total), dtype=tf.int64)[tf.newaxis, :]  # [1, L]
    sep_a = keep_a + 1
    tail = tf.where(positions < total, special + 1, special + 2)  # [SEP] or padding
    if pieces_b is not None:
        in_b = (positions > sep_a) & (positions < total - 1)
        tail = tf.where(
            in_b,
            special - tf.size(ids_b, out_type=tf.int64) + start_b + positions - sep_a - 1,
            tail,
        )
    index = tf.where(
        positions == 0,
        special,
        tf.where(
            positions < sep_a,
            start_a + positions - 1,
            tf.where(positions == sep_a, special + 1, tail),
        ),
    )
    input_ids = tf.gather(values, index)
    input_mask = tf.cast(positions < total, tf.int32)
    if pieces_b is None:
        segment_ids = tf.zeros_like(input_ids)
    else:
        segment_ids = tf.cast((positions > sep_a) & (positions < total), tf.int32)
    return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}


def ensure_texts(texts: tf.Tensor, name: str) -> tf.Tensor:
    """Rejects at run time a string input that is not of shape [B].

    A signature's declared shape is not enforced when a server feeds it (a
    [1, 2] tensor would reach the tokenizer), so the check is an op.
    """
    return tf.ensure_shape(texts, [None], name=f"check_{name}_shape")


def ensure_text_pairs(first: tf.Tensor, second: tf.Tensor, names: tuple) -> tuple:
    """`ensure_texts` of both inputs; `second` checked at run time to be as long as `first`.

    Args:
        first, second: string [B] inputs of one signature.
        names: their input names, for the error messages.

    Returns:
        (first, second), `second` depending on the length check.
    """
    first = ensure_texts(first, names[0])
    second = ensure_texts(second, names[1])
    same = tf.debugging.assert_equal(
        tf.size(first),
        tf.size(second),
        message=f"{names[0]} and {names[1]} must have the same batch size",
    )
    with tf.control_dependencies([same]):
        return first, tf.identity(second)


def at_least_one_row(texts: tf.Tensor) -> tf.Tensor:
    """`texts` [B] with one empty string appended when B is 0 (otherwise unchanged).

    The model needs a sequence of at least [CLS] [SEP] to run: an empty
    request is answered by running one empty text and returning no row
    (see `first_rows`).
    """
    return tf.concat([texts, tf.fill([tf.maximum(1 - tf.size(texts), 0)], "")], axis=0)


def at_least_one_column(ids: tf.Tensor) -> tf.Tensor:
    """int32 [B, L] padded with zeros to L >= 1 (an empty request may come as [0, 0])."""
    return tf.pad(ids, [[0, 0], [0, tf.maximum(1 - tf.shape(ids)[1], 0)]])


def first_rows(outputs: dict, count: tf.Tensor) -> dict:
    """Every output cut to its first `count` rows (the rows of the request)."""
    return {name: value[:count] for name, value in outputs.items()}


def check_token_ids(
    input_ids: tf.Tensor,
    input_mask: tf.Tensor,
    segment_ids: tf.Tensor,
    vocab_size: int,
    max_length: int,
    type_vocab_size: int,
) -> list:
    """Assertions that turn bad token-id requests into per-request errors.

    Without them an out-of-range id fails deep inside an embedding gather
    with an unhelpful message (or, on some devices, silently reads zeros).

    Returns:
        The assertion ops, to be used as control dependencies.
    """
    input_ids = tf.ensure_shape(input_ids, [None, None], name="check_input_ids_shape")
    shape = tf.shape(input_ids)
    return [
        tf.debugging.assert_equal(
            tf.shape(input_mask),
            shape,
            message="input_mask must have the shape of input_ids [B, L]",
        ),
        tf.debugging.Assert(
            tf.logical_or(shape[0] == 0, shape[1] > 0),
            ["input_ids must hold at least one token ([CLS]) per row"],
        ),
        tf.debugging.assert_equal(
            tf.shape(segment_ids),
            shape,
            message="segment_ids must have the shape of input_ids [B, L]",
        ),
        tf.debugging.assert_less_equal(
            shape[1], max_length, message=f"sequence length must be <= {max_length}"
        ),
        tf.debugging.assert_non_negative(input_ids, message="input_ids must be >= 0"),
        tf.debugging.assert_less(
            input_ids, vocab_size, message=f"input_ids must be < the vocabulary size {vocab_size}"
        ),
        tf.debugging.assert_non_negative(segment_ids, message="segment_ids must be >= 0"),
        tf.debugging.assert_less(
            segment_ids, type_vocab_size, message=f"segment_ids must be < {type_vocab_size}"
        ),
        tf.debugging.assert_non_negative(input_mask, message="input_mask must be 0 or 1"),
        tf.debugging.assert_less_equal(input_mask, 1, message="input_mask must be 0 or 1"),
    ]


def checked_token_ids(
    encoder, input_ids: tf.Tensor, input_mask: tf.Tensor, segment_ids: tf.Tensor, pad_empty: bool
) -> dict[str, tf.Tensor]:
    """A token-id request's inputs, each behind the `check_token_ids` assertions.

    Args:
        encoder: the model's encoder, whose tables bound the ids (`vocab_size`,
            `max_position_embeddings`, `type_vocab_size`).
        input_ids, input_mask, segment_ids: int32 [B, L] each.
        pad_empty: give a request of no tokens (B = 0) one padding column, for
            models whose outputs need L >= 1 (every other row has a token: checked).

    Returns:
        {"input_ids", "input_mask", "segment_ids"}: int32 [B, L] (L >= 1 with `pad_empty`).
    """
    checks = check_token_ids(
        input_ids,
        input_mask,
        segment_ids,
        int(encoder.vocab_size),
        int(encoder.max_position_embeddings),
        int(encoder.type_vocab_size),
    )
    with tf.control_dependencies(checks):
        inputs = {
            "input_ids": tf.identity(input_ids),
            "input_mask": tf.identity(input_mask),
            "segment_ids": tf.identity(segment_ids),
        }
    if pad_empty:
        inputs = {name: at_least_one_column(ids) for name, ids in inputs.items()}
    return inputs
