"""Words -> model inputs for tagging: `[CLS] pieces [SEP]`, each word labelled on its first piece.

As in the original ELECTRA code, every word is WordPiece-tokenized on its
own and only its first piece is tagged (trained and predicted); the other
pieces get no label. Differences, chosen for one rule everywhere:

* a word the tokenizer reduces to nothing (only control or zero-width
  characters) becomes one `[UNK]`, so every word has a first piece;
* segment ids are 0 (the original code feeds 1, a quirk);
* a sentence longer than `max_seq_length - 2` pieces keeps its first
  pieces; a word whose first piece is cut off is not seen by the model and
  is predicted `O` (see `predicted_ids`).

The serving graph (`electra_tf.finetuning.tagging.serving`) builds the same inputs.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

from electra_tf.finetuning.kind.text_features import padded_batches
from electra_tf.finetuning.kind.word_features import WordFeatures
from electra_tf.modeling.encoder import INPUT_NAMES


def position_labels(
    features: WordFeatures, tag_ids: Sequence[Sequence[int]]
) -> tuple[list[list[int]], list[list[float]]]:
    """Per-position tag ids and label mask: each seen word's tag at its first piece.

    Args:
        features: from `encode`.
        tag_ids: N lists of word tag ids (-1: a tag the model has no id for,
            left unlabelled).

    Returns:
        (ids, mask), N lists as long as the inputs; 0 where unlabelled.
    """
    ids, masks = [], []
    for input_ids, starts, tags in zip(features.input_ids, features.positions, tag_ids):
        row, mask = [0] * len(input_ids), [0.0] * len(input_ids)
        for position, tag in zip(starts, tags):
            if tag >= 0:
                row[position], mask[position] = int(tag), 1.0
        ids.append(row)
        masks.append(mask)
    return ids, masks


def make_dataset(
    features: WordFeatures,
    tag_ids: Optional[Sequence[Sequence[int]]],
    batch_size: int,
    pad_id: int = 0,
    shuffle_seed: Optional[int] = None,
    repeat: bool = False,
    by_length: bool = False,
) -> tf.data.Dataset:
    """Padded batches (each padded to its longest sentence, or, `by_length`,
    grouped by length: `text_features.length_grouped_batches`).

    Returns:
        Dataset of `inputs` or `(inputs, labels)`: inputs int32 [B, L]
        `input_ids`, `input_mask`, `segment_ids`; labels `tag_ids` int32
        [B, L] and `tag_mask` float32 [B, L] (1 at labelled first pieces).
    """
    columns = {"input_ids": tf.ragged.constant(features.input_ids, tf.int32, ragged_rank=1)}
    if tag_ids is not None:
        ids, masks = position_labels(features, tag_ids)
        columns["tag_ids"] = tf.ragged.constant(ids, tf.int32, ragged_rank=1)
        columns["tag_mask"] = tf.ragged.constant(masks, tf.float32, ragged_rank=1)
    padding = {"input_ids": pad_id, "input_mask": 0, "segment_ids": 0}
    if tag_ids is not None:
        padding.update(tag_ids=0, tag_mask=0.0)

    def split(batch):
        inputs = {k: batch[k] for k in INPUT_NAMES}
        if tag_ids is None:
            return inputs
        return inputs, {"tag_ids": batch["tag_ids"], "tag_mask": batch["tag_mask"]}

    return padded_batches(
        columns, len(features), batch_size, padding, split, shuffle_seed, repeat, by_length
    )


def word_logits(
    model, features: WordFeatures, batch_size: int, pad_id: int = 0
) -> list[np.ndarray]:
    """The model's logits at each seen word's first piece.

    Returns:
        N float32 arrays [seen words, T].
    """
    results = []
    start = 0
    for inputs in make_dataset(features, None, batch_size, pad_id):
        logits = np.asarray(model(inputs, training=False), np.float32)  # [B, L, T]
        for row in range(logits.shape[0]):
            results.append(logits[row, features.positions[start + row]])
        start += logits.shape[0]
    return results


def predicted_ids(
    logits: Sequence[np.ndarray], num_words: Sequence[int], unseen_id: int
) -> list[list[int]]:
    """The predicted tag id of every word: the argmax, `unseen_id` for words cut off."""
    return [
        np.argmax(values, axis=-1).tolist() + [unseen_id] * (count - len(values))
        for values, count in zip(logits, num_words)
    ]
