"""Serving signatures of a fine-tuned dependency parser (`model.ElectraDependencyParser`).

`serving_default` (words):
    inputs:  `words` string [B, W]: each row a sentence's words (eojeol for
             Korean), "" after the last word (padding; a "" before a word
             is refused)
    outputs: `heads` int32 [B, W']: each word's head, 0 for the root, j for
             the row's j-th word (-1 after the last word, and for words the
             model does not see: past `max_seq_length - 2` pieces);
             `labels` string [B, W']: its relation ("" after the last word,
             "_" for a word not seen); `label_ids` int32 [B, W'] (-1 for both);
             `head_probabilities` float32 [B, W', W' + 1]: the softmax over the
                 candidate heads, column 0 the root and column j word j
                 (zeros for padding and words not seen);
             `label_probabilities` float32 [B, W', K]: the softmax over the
                 relations at the predicted head (zeros likewise);
             `num_words` int32 [B].
    W' is the batch's largest word count.

`token_ids` (for clients that tokenize themselves):
    inputs:  `input_ids`, `input_mask`, `segment_ids` int32 [B, L];
             `word_starts` int32 [B, W]: each word's first-piece position
             (>= 1: position 0 is [CLS], the root), 0 after the last word
    outputs: as `serving_default` (every word given is seen; W' = W).

Every word is tokenized on its own and read at its first piece (an empty
piece list becomes `[UNK]`), as `features.encode` does. Heads are each
word's most likely one (no tree constraint), as in fine-tuning. Empty
batches give empty outputs.
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from electra_tf import text_packing as text_ops
from electra_tf.finetuning.dependency_parsing.data import NO_VALUE
from electra_tf.finetuning.kind.signatures import IDS_SIGNATURE, TEXT_SIGNATURE, TOKEN_ID_SPECS
from electra_tf.finetuning.kind.word_features import pack_words

WORD_STARTS_SPEC = tf.TensorSpec([None, None], tf.int32, name="word_starts")


def _padding_last(present: tf.Tensor, what: str) -> tf.Tensor:
    """An assertion that each row of bool [B, W] `present` is a run of True then False."""
    count = tf.reduce_sum(tf.cast(present, tf.int32), axis=1)
    prefix = tf.range(tf.shape(present)[1])[tf.newaxis] < count[:, tf.newaxis]
    return tf.debugging.Assert(
        tf.reduce_all(tf.equal(present, prefix)), [f"{what}: padding only after the last word"]
    )


class ParserServing(tf.Module):
    """Wraps a fine-tuned parser and its tokenizer with serving functions.

    Args:
        model: an `ElectraDependencyParser` (float32).
        tokenizer: the `WordPieceTokenizer` it was fine-tuned with.
        max_seq_length: truncation length (the fine-tuning one).
        label_names: the relations in id order.
    """

    def __init__(self, model, tokenizer, max_seq_length: int, label_names: Sequence[str]):
        super().__init__(name="parser_serving")
        self.model = model
        self.tokenizer = tokenizer
        self._max_seq_length = int(max_seq_length)
        self._label_names = self._no_dependency(list(label_names))

    def _parse(self, inputs: dict, word_starts, seen, present) -> dict:
        """The outputs for words at `word_starts` [B, W] (0 where not `seen`)."""
        model_inputs = {k: inputs[k] for k in ("input_ids", "input_mask", "segment_ids")}
        outputs = self.model({**model_inputs, "word_starts": word_starts}, training=False)
        visible = tf.cast(seen, tf.float32)[..., tf.newaxis]
        label_ids = tf.where(seen, outputs["label_ids"], -1)
        names = tf.gather(tf.constant(self._label_names, tf.string), tf.maximum(label_ids, 0))
        return {
            "heads": tf.where(seen, outputs["heads"], -1),
            "labels": tf.where(seen, names, tf.where(present, NO_VALUE, "")),
            "label_ids": label_ids,
            "head_probabilities": tf.nn.softmax(outputs["arc_scores"], axis=-1) * visible,
            "label_probabilities": tf.nn.softmax(outputs["label_scores"], axis=-1) * visible,
            "num_words": tf.reduce_sum(tf.cast(present, tf.int32), axis=1),
        }

    def _from_words(self, words) -> dict:
        words = tf.ensure_shape(words, [None, None], name="check_words_shape")
        present = tf.not_equal(words, "")
        with tf.control_dependencies([_padding_last(present, "words")]):
            words = tf.ragged.boolean_mask(words, tf.identity(present))
        packed = pack_words(self.tokenizer, words, self._max_seq_length)
        return self._parse(packed, packed["positions"], packed["seen"], packed["present"])

    def _from_ids(self, input_ids, input_mask, segment_ids, word_starts) -> dict:
        inputs = text_ops.checked_token_ids(
            self.model.encoder, input_ids, input_mask, segment_ids, pad_empty=False
        )
        word_starts = tf.ensure_shape(word_starts, [None, None], name="check_word_starts_shape")
        present = word_starts > 0
        checks = [
            tf.debugging.assert_equal(
                tf.shape(word_starts)[0],
                tf.shape(input_ids)[0],
                message="word_starts must have the batch size of input_ids",
            ),
            tf.debugging.assert_non_negative(word_starts, message="word_starts must be >= 0"),
            tf.debugging.assert_less(
                word_starts,
                tf.shape(input_ids)[1],
                message="word_starts must be < the sequence length",
            ),
            _padding_last(present, "word_starts"),
        ]
        with tf.control_dependencies(checks):
            word_starts = tf.identity(word_starts)
        return self._parse(inputs, word_starts, present, present)

    def signatures(self) -> dict:
        """`{signature name: concrete function}` for `tf.saved_model.save`."""

        @tf.function(input_signature=[tf.TensorSpec([None, None], tf.string, name="words")])
        def serve_words(words):
            return self._from_words(words)

        @tf.function(input_signature=[*TOKEN_ID_SPECS, WORD_STARTS_SPEC])
        def serve_ids(input_ids, input_mask, segment_ids, word_starts):
            return self._from_ids(input_ids, input_mask, segment_ids, word_starts)

        self.serve_words, self.serve_ids = serve_words, serve_ids
        return {
            TEXT_SIGNATURE: serve_words.get_concrete_function(),
            IDS_SIGNATURE: serve_ids.get_concrete_function(),
        }
