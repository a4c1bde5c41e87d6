"""Words -> model inputs, each word read at its first piece: in Python and in the graph.

Kinds that label or relate words (tagging, dependency parsing) read every
word at its first word piece, as the original ELECTRA code tags words:

* every word is WordPiece-tokenized on its own; a word the tokenizer
  reduces to nothing (only control or zero-width characters) becomes one
  `[UNK]`, so every word has a first piece;
* segment ids are 0;
* a sentence longer than `max_seq_length - 2` pieces keeps its first
  pieces; a word whose first piece is cut off is not seen by the model.

`encode_words` builds the inputs in Python (fine-tuning, export checks),
`pack_words` the same inputs in a serving graph.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np
import tensorflow as tf

from electra_tf import text_packing as text_ops
from electra_tf.finetuning.kind.text_features import tokenize_texts


@dataclasses.dataclass
class WordFeatures:
    """Sentences as model inputs.

    Attributes:
        input_ids: N lists of piece ids with [CLS] and [SEP].
        positions: N lists: the first piece's position of each word the
            model sees (a prefix of the sentence's words).
        num_words: N word counts (seen or not).
    """

    input_ids: list[list[int]]
    positions: list[list[int]]
    num_words: list[int]

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def num_truncated(self) -> int:
        """Sentences with words the model does not see."""
        return sum(len(p) < n for p, n in zip(self.positions, self.num_words))


def word_pieces(tokenizer, words: Sequence[str]) -> list[list[int]]:
    """Piece ids of each word (tokenized on its own); `[UNK]` for a word that gives none."""
    return [pieces or [tokenizer.unk_id] for pieces in tokenize_texts(tokenizer, list(words))]


def encode_words(
    tokenizer, sentences: Sequence[Sequence[str]], max_seq_length: int
) -> WordFeatures:
    """Tokenizes and wraps every sentence.

    Args:
        tokenizer: a `WordPieceTokenizer`.
        sentences: N lists of words.
        max_seq_length: length limit with [CLS] and [SEP] (>= 3).

    Returns:
        The inputs and each seen word's first-piece position.
    """
    if max_seq_length < 3:
        raise ValueError(
            f"--max_seq_length={max_seq_length}: at least 3 tokens are needed for "
            "[CLS], [SEP] and one word piece."
        )
    flat = word_pieces(tokenizer, [w for words in sentences for w in words])
    budget = max_seq_length - 2
    input_ids, positions, num_words = [], [], []
    start = 0
    for words in sentences:
        ids, starts = [tokenizer.cls_id], []
        for pieces in flat[start : start + len(words)]:
            room = budget - (len(ids) - 1)
            if room <= 0:
                break
            starts.append(len(ids))
            ids.extend(pieces[:room])
        start += len(words)
        input_ids.append(ids + [tokenizer.sep_id])
        positions.append(starts)
        num_words.append(len(words))
    return WordFeatures(input_ids, positions, num_words)


def padded_word_inputs(features: WordFeatures, pad_id: int) -> dict:
    """The inputs of `encode_words` padded to the longest: int32 [B, L]."""
    length = max(len(ids) for ids in features.input_ids)
    ids = np.full((len(features), length), pad_id, np.int32)
    for row, example in enumerate(features.input_ids):
        ids[row, : len(example)] = example
    mask = (np.arange(length)[None] < np.array([[len(e)] for e in features.input_ids])).astype(
        np.int32
    )
    return {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}


def _first(values: tf.RaggedTensor, counts: tf.Tensor) -> tf.RaggedTensor:
    """The first `counts[i]` entries of each row."""
    positions = tf.ragged.range(values.row_lengths())
    return tf.ragged.boolean_mask(values, positions < tf.expand_dims(counts, 1))


def pack_words(tokenizer, words: tf.RaggedTensor, max_seq_length: int) -> dict[str, tf.Tensor]:
    """`[CLS] pieces [SEP]` of each sentence and its words' first-piece positions.

    Args:
        tokenizer: the `WordPieceTokenizer`.
        words: string ragged [B, (W)].
        max_seq_length: the fine-tuning length.

    Returns:
        `input_ids`, `input_mask`, `segment_ids` int32 [B, L];
        `positions` int32 [B, W] (each word's first piece; 0 where unseen
        or after the last word); `seen` bool [B, W] (the model sees the
        word); `present` bool [B, W] (a word, not padding).
    """
    pieces = tokenizer.tokenize(words.flat_values)  # [N, (P)]
    unk = tf.RaggedTensor.from_tensor(
        tf.fill([pieces.nrows(), 1], tf.constant(tokenizer.unk_id, tf.int32))
    )
    counts = pieces.row_lengths()
    pieces = _first(tf.concat([pieces, unk], axis=1), tf.maximum(counts, 1))
    counts = tf.maximum(counts, 1)
    sentence_pieces = tf.RaggedTensor.from_row_lengths(pieces, words.row_lengths())
    sentence_pieces = sentence_pieces.merge_dims(1, 2)  # [B, (T)]
    word_counts = tf.RaggedTensor.from_row_lengths(counts, words.row_lengths())  # [B, (W)]
    # Exclusive cumulative sum within each row: where each word's pieces begin.
    ends = tf.cumsum(word_counts.flat_values)
    row_start = tf.gather(
        tf.concat([tf.zeros([1], ends.dtype), ends], 0), word_counts.row_splits[:-1]
    )
    starts = word_counts.with_flat_values(
        ends - word_counts.flat_values - tf.gather(row_start, word_counts.value_rowids())
    )
    budget = max_seq_length - 2
    inputs = text_ops.pack(
        sentence_pieces, None, max_seq_length, tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id
    )
    present = tf.ones_like(starts, tf.bool).to_tensor(default_value=False)
    seen = (starts < budget).to_tensor(default_value=False)
    positions = tf.where(seen, tf.cast(starts.to_tensor(), tf.int32) + 1, 0)
    return {**inputs, "positions": positions, "seen": seen, "present": present}
