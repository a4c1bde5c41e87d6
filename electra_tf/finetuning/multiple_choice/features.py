"""Questions -> model inputs: one `[CLS] context [SEP] question option [SEP]` per option.

The context is segment 0, the question and the option (their word pieces
one after the other) segment 1. When an option's sequence is longer than
`max_seq_length`, the context is cut first, from its end; only when the
question and the option alone exceed the `max_seq_length - 3` pieces left
beside the special tokens are they cut too, keeping their last pieces (the
option whole, and the end of the question), as ALBERT's RACE reader cuts
them. The serving graph (`serving.pack_choices`) applies the same rule.

Inputs of a batch are int32 [B, O, L]: O the most options of the split
(a question with fewer has rows of padding, `input_mask` all 0, which the
model scores as absent), L the longest option sequence of the batch.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

from electra_tf.finetuning.kind.text_features import length_grouped_batches, tokenize_texts

# [CLS], [SEP] after the context and [SEP] at the end.
NUM_SPECIAL = 3


def choice_lengths(context: int, second: int, max_seq_length: int) -> tuple[int, int]:
    """(context pieces kept, question + option pieces kept) of one option's sequence.

    Args:
        context: the context's pieces.
        second: the question's and the option's pieces together.
        max_seq_length: the sequence length limit, special tokens included.
    """
    budget = max_seq_length - NUM_SPECIAL
    keep_second = min(second, budget)
    return min(context, budget - keep_second), keep_second


def build_option(
    context: Sequence[int],
    question: Sequence[int],
    option: Sequence[int],
    max_seq_length: int,
    cls_id: int,
    sep_id: int,
) -> tuple[list[int], list[int], bool]:
    """(input_ids, segment_ids, whether anything was cut) of one option."""
    second = list(question) + list(option)
    keep_context, keep_second = choice_lengths(len(context), len(second), max_seq_length)
    cut = keep_context < len(context) or keep_second < len(second)
    second = second[len(second) - keep_second :]
    first = [cls_id] + list(context[:keep_context]) + [sep_id]
    ids = first + second + [sep_id]
    return ids, [0] * len(first) + [1] * (len(second) + 1), cut


@dataclasses.dataclass
class ChoiceFeatures:
    """Every question's options as token ids.

    Attributes:
        input_ids: N questions, each a list of its options' ids.
        segment_ids: the same shape.
        num_truncated: questions with an option whose context (or question) was cut.
    """

    input_ids: list[list[list[int]]]
    segment_ids: list[list[list[int]]]
    num_truncated: int = 0

    def __len__(self) -> int:
        return len(self.input_ids)


def encode(
    tokenizer,
    contexts: Sequence[str],
    questions: Sequence[str],
    options: Sequence[Sequence[str]],
    max_seq_length: int,
) -> ChoiceFeatures:
    """Tokenizes and packs every option of every question (see the module docstring).

    Raises:
        ValueError: `max_seq_length` leaves no room for a piece of the option.
    """
    if max_seq_length < NUM_SPECIAL + 1:
        raise ValueError(
            f"--max_seq_length={max_seq_length}: at least {NUM_SPECIAL + 1} tokens are "
            "needed for the special tokens and one piece of an option."
        )
    unique = list(dict.fromkeys(contexts))
    context_pieces = dict(zip(unique, tokenize_texts(tokenizer, unique)))
    question_pieces = tokenize_texts(tokenizer, questions)
    flat = tokenize_texts(tokenizer, [o for row in options for o in row])
    ids, segments, truncated = [], [], 0
    start = 0
    for context, question, row in zip(contexts, question_pieces, options):
        built = [
            build_option(
                context_pieces[context],
                question,
                pieces,
                max_seq_length,
                tokenizer.cls_id,
                tokenizer.sep_id,
            )
            for pieces in flat[start : start + len(row)]
        ]
        start += len(row)
        ids.append([b[0] for b in built])
        segments.append([b[1] for b in built])
        truncated += any(b[2] for b in built)
    return ChoiceFeatures(ids, segments, truncated)


def _nested(rows: list[list[list[int]]]) -> tf.RaggedTensor:
    """int32 ragged [N, (O), (L)] of nested lists (built from flat values: fast)."""
    options = [o for row in rows for o in row]
    values = np.fromiter(
        itertools.chain.from_iterable(options), np.int32, count=sum(len(o) for o in options)
    )
    return tf.RaggedTensor.from_nested_row_lengths(
        values,
        [np.array([len(r) for r in rows], np.int64), np.array([len(o) for o in options], np.int64)],
    )


def make_dataset(
    features: ChoiceFeatures,
    labels: Optional[np.ndarray],
    batch_size: int,
    num_options: int,
    pad_id: int = 0,
    shuffle_seed: Optional[int] = None,
    repeat: bool = False,
    by_length: bool = False,
) -> tf.data.Dataset:
    """Batches of int32 [B, num_options, L] inputs (and int32 [B] labels when given).

    Every batch has `num_options` options per question (padding rows for a
    question with fewer: `input_mask` all 0) and is padded to its longest
    option sequence.

    Args:
        features: output of `encode`.
        labels: [N] positions of the right options, or None (inputs only).
        batch_size: questions per batch (the last may be smaller).
        num_options: O, at least the most options of any question.
        pad_id: id of padding positions.
        shuffle_seed: if set, shuffle with this seed, differently each epoch.
        repeat: repeat forever (training).
        by_length: group questions by their longest option into batches, each
            padded to its bucket (`text_features.length_grouped_batches`).
    """
    columns = {
        "input_ids": _nested(features.input_ids),
        "segment_ids": _nested(features.segment_ids),
    }
    if labels is not None:
        columns["label"] = tf.constant(np.asarray(labels, np.int32))
    dataset = tf.data.Dataset.from_tensor_slices(columns)
    if shuffle_seed is not None:
        dataset = dataset.shuffle(len(features), seed=shuffle_seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()

    def dense(row):
        ids = row["input_ids"]  # ragged [O, (L)]
        out = {
            "input_ids": ids.to_tensor(default_value=pad_id),
            "input_mask": tf.ones_like(ids).to_tensor(default_value=0),
            "segment_ids": row["segment_ids"].to_tensor(default_value=0),
        }
        if labels is not None:
            out["label"] = row["label"]
        return out

    shapes = {name: [num_options, None] for name in ("input_ids", "input_mask", "segment_ids")}
    padding = {"input_ids": pad_id, "input_mask": 0, "segment_ids": 0}
    if labels is not None:
        shapes["label"], padding["label"] = [], 0
    dataset = dataset.map(dense)
    if by_length:
        longest = max(len(option) for row in features.input_ids for option in row)

        def bucket_shapes(length):
            return {name: [num_options, length] if shape else [] for name, shape in shapes.items()}

        dataset = length_grouped_batches(dataset, batch_size, longest, bucket_shapes, padding)
    else:
        dataset = dataset.padded_batch(batch_size, padded_shapes=shapes, padding_values=padding)

    def split(batch):
        inputs = {k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")}
        return (inputs, batch["label"]) if labels is not None else inputs

    return dataset.map(split).prefetch(tf.data.AUTOTUNE)


def padded_inputs(features: ChoiceFeatures, pad_id: int, num_options: Optional[int] = None):
    """All of `features` as NumPy int32 [N, O, L] inputs (O: `num_options` or the most)."""
    count = num_options or max(len(row) for row in features.input_ids)
    length = max(len(o) for row in features.input_ids for o in row)
    shape = (len(features), count, length)
    ids = np.full(shape, pad_id, np.int32)
    mask, segments = np.zeros(shape, np.int32), np.zeros(shape, np.int32)
    for i, (row, row_segments) in enumerate(zip(features.input_ids, features.segment_ids)):
        for k, (option, option_segments) in enumerate(zip(row, row_segments)):
            ids[i, k, : len(option)] = option
            mask[i, k, : len(option)] = 1
            segments[i, k, : len(option)] = option_segments
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}
