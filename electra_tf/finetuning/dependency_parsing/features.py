"""Sentences -> parser inputs: `[CLS] pieces [SEP]` and the position of each word's first piece.

Words are cut into pieces as the tagger cuts them (`kind.word_features.encode_words`:
each word tokenized on its own, `[UNK]` for a word that gives no piece,
the first pieces kept when a sentence is longer than `max_seq_length - 2`
pieces). The parser reads each word at its first piece and [CLS] (position
0) as the root, so `word_starts` never holds 0 for a word: 0 is padding.

A word whose first piece is cut off is not seen: it gets no prediction,
is not trained on, and neither is a word whose gold head is such a word.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

from electra_tf.finetuning.kind.text_features import padded_batches
from electra_tf.finetuning.kind.word_features import WordFeatures, encode_words
from electra_tf.modeling.encoder import INPUT_NAMES

# The model inputs: the token ids and `word_starts`.
PARSER_INPUTS = (*INPUT_NAMES, "word_starts")


def encode(tokenizer, sentences: Sequence[Sequence[str]], max_seq_length: int) -> WordFeatures:
    """Pieces of every sentence and the first-piece position of each word the model sees.

    Returns:
        `input_ids` (N lists with [CLS] and [SEP]), `positions` (N lists:
        the seen words' first pieces, a prefix of the sentence's words) and
        `num_words`.
    """
    return encode_words(tokenizer, sentences, max_seq_length)


def training_targets(
    features: WordFeatures, heads: Sequence[Sequence[int]], label_ids: Sequence[Sequence[int]]
) -> tuple[list[list[int]], list[list[int]], list[list[float]]]:
    """Gold heads, labels and the word mask over the words the model sees.

    A seen word is trained on when it has a gold head (>= 0) that is the
    root or a seen word; the others get head 0, label 0 and mask 0.

    Returns:
        (heads, label ids, mask): N lists, one entry per seen word.
    """
    out_heads, out_labels, out_mask = [], [], []
    for positions, gold_heads, gold_labels in zip(features.positions, heads, label_ids):
        seen = len(positions)
        row_heads, row_labels, row_mask = [], [], []
        for head, label in zip(gold_heads[:seen], gold_labels[:seen]):
            trained = 0 <= head <= seen and label >= 0
            row_heads.append(head if trained else 0)
            row_labels.append(label if trained else 0)
            row_mask.append(1.0 if trained else 0.0)
        out_heads.append(row_heads)
        out_labels.append(row_labels)
        out_mask.append(row_mask)
    return out_heads, out_labels, out_mask


def _ragged(rows, dtype) -> tf.RaggedTensor:
    lengths = np.array([len(r) for r in rows], np.int64)
    flat = np.fromiter((v for r in rows for v in r), dtype.as_numpy_dtype, count=int(lengths.sum()))
    return tf.RaggedTensor.from_row_lengths(flat, lengths)


def make_dataset(
    features: WordFeatures,
    targets: Optional[tuple],
    batch_size: int,
    pad_id: int = 0,
    shuffle_seed: Optional[int] = None,
    repeat: bool = False,
    by_length: bool = False,
) -> tf.data.Dataset:
    """Padded batches (each padded to its longest sentence and its most words, or,
    `by_length`, grouped by length and padded to the bucket's length:
    `text_features.length_grouped_batches`).

    Args:
        features: from `encode`.
        targets: from `training_targets`, or None (inputs only).

    Returns:
        Dataset of `inputs` or `(inputs, labels)`: inputs int32 [B, L]
        `input_ids`, `input_mask`, `segment_ids` and int32 [B, W]
        `word_starts` (0: no word); labels int32 [B, W] `heads` (0: root,
        j: word j), int32 [B, W] `label_ids` and float32 [B, W] `word_mask`.
    """
    columns = {
        "input_ids": _ragged(features.input_ids, tf.int32),
        "word_starts": _ragged(features.positions, tf.int32),
    }
    padding = {"input_ids": pad_id, "input_mask": 0, "segment_ids": 0, "word_starts": 0}
    if targets is not None:
        heads, label_ids, mask = targets
        columns.update(
            heads=_ragged(heads, tf.int32),
            label_ids=_ragged(label_ids, tf.int32),
            word_mask=_ragged(mask, tf.float32),
        )
        padding.update(heads=0, label_ids=0, word_mask=0.0)

    def split(batch):
        inputs = {k: batch[k] for k in PARSER_INPUTS}
        if targets is None:
            return inputs
        return inputs, {k: batch[k] for k in ("heads", "label_ids", "word_mask")}

    return padded_batches(
        columns, len(features), batch_size, padding, split, shuffle_seed, repeat, by_length
    )


def predict(
    model, features: WordFeatures, batch_size: int, pad_id: int = 0
) -> tuple[list[list[int]], list[list[int]]]:
    """The predicted head and label id of every word (-1 for words the model does not see).

    Returns:
        (heads, label ids): N lists of `num_words` entries.
    """
    heads, labels = [], []
    start = 0
    for inputs in make_dataset(features, None, batch_size, pad_id):
        outputs = model(inputs, training=False)
        batch_heads = np.asarray(outputs["heads"])
        batch_labels = np.asarray(outputs["label_ids"])
        for row in range(batch_heads.shape[0]):
            seen = len(features.positions[start + row])
            unseen = [-1] * (features.num_words[start + row] - seen)
            heads.append(batch_heads[row, :seen].tolist() + unseen)
            labels.append(batch_labels[row, :seen].tolist() + unseen)
        start += batch_heads.shape[0]
    return heads, labels
