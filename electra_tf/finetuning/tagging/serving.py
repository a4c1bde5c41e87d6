"""Serving signatures of a fine-tuned tagger (`finetuning.tagging_model.ElectraTagger`).

`serving_default` (raw text):
    inputs:  `text` string [B]
    outputs: `words` string [B, W]: the words of each text (split as
                 `finetuning.tagging_data.split_words` splits them: at
                 whitespace, each CJK ideograph a word of its own; "" after
                 the last word);
             `tags` string [B, W]: one tag per word ("" after the last word);
             `tag_ids` int32 [B, W] (-1 after the last word);
             `probabilities` float32 [B, W, T]: the softmax over the tags at
                 the word's first piece (zeros after the last word);
             `num_words` int32 [B].
    W is the batch's largest word count. Words past `max_seq_length - 2`
    pieces are not seen by the model: tag `O`, the id of `O` (-1 without an
    `O` tag) and zero probabilities, as in fine-tuning's evaluation.

`words` (for clients that split text themselves, e.g. CoNLL tokens or
Chinese word segmentation):
    inputs:  `words` string [B, W], `num_words` int32 [B] (the words of row
             i are its first num_words[i]; the rest is ignored)
    outputs: as `serving_default`.

`token_ids` (for clients that tokenize themselves):
    inputs:  `input_ids`, `input_mask`, `segment_ids` int32 [B, L]
    outputs: per position: `logits`, `probabilities` float32 [B, L, T],
             `tag_ids` int32 [B, L], `tags` string [B, L]; a word's tag is
             the one at its first piece.

Every word is tokenized on its own and labelled at its first piece (an
empty piece list becomes `[UNK]`), as `kind.word_features.encode_words`
does. Empty batches give empty outputs.
"""

from __future__ import annotations

from typing import Optional, Sequence

import tensorflow as tf
import tensorflow_text as tf_text

from electra_tf import text_packing as text_ops
from electra_tf.finetuning.kind.signatures import IDS_SIGNATURE, TEXT_SIGNATURE, token_ids_function
from electra_tf.finetuning.kind.word_features import pack_words
from electra_tf.finetuning.tagging.data import OUTSIDE
from electra_tf.tokenization import CJK_RANGES

WORDS_SIGNATURE = "words"
# How raw text is cut into words (recorded in a tagger's serving_config.json).
WORD_SPLITTING = "whitespace; each CJK ideograph a word of its own"
_CJK_CLASS = "[" + "".join(f"\\x{{{low:X}}}-\\x{{{high:X}}}" for low, high in CJK_RANGES) + "]"
# Tab, line feed, vertical tab, form feed, carriage return and Unicode
# separators split words; each CJK ideograph is kept as a word.
WORD_DELIMITERS = r"[\x{09}-\x{0D}\p{Z}]+|" + _CJK_CLASS
KEPT_DELIMITERS = _CJK_CLASS


def split_text(texts: tf.Tensor) -> tf.RaggedTensor:
    """string [B] -> string ragged [B, (W)] words (invalid UTF-8 bytes dropped first)."""
    texts = tf.strings.unicode_transcode(
        texts, input_encoding="UTF-8", output_encoding="UTF-8", errors="ignore"
    )
    return tf_text.regex_split(texts, WORD_DELIMITERS, KEPT_DELIMITERS)


class TaggerServing(tf.Module):
    """Wraps a fine-tuned tagger and its tokenizer with serving functions.

    Args:
        model: an `ElectraTagger` (float32).
        tokenizer: the `WordPieceTokenizer` it was fine-tuned with.
        max_seq_length: truncation length (the fine-tuning one).
        tag_names: tags in id order.
    """

    def __init__(self, model, tokenizer, max_seq_length: int, tag_names: Sequence[str]):
        super().__init__(name="tagger_serving")
        self.model = model
        self.tokenizer = tokenizer
        self._max_seq_length = int(max_seq_length)
        self._tag_names = self._no_dependency(list(tag_names))
        outside: Optional[int] = (
            self._tag_names.index(OUTSIDE) if OUTSIDE in self._tag_names else None
        )
        self._unseen_id = -1 if outside is None else outside

    def _names(self, ids: tf.Tensor) -> tf.Tensor:
        return tf.gather(tf.constant(self._tag_names, tf.string), tf.maximum(ids, 0))

    def _logits(self, inputs: dict) -> tf.Tensor:
        model_inputs = {k: inputs[k] for k in ("input_ids", "input_mask", "segment_ids")}
        return tf.cast(self.model(model_inputs, training=False), tf.float32)

    def _tag_words(self, words: tf.RaggedTensor) -> dict:
        packed = pack_words(self.tokenizer, words, self._max_seq_length)
        logits = tf.gather(self._logits(packed), packed["positions"], batch_dims=1)  # [B, W, T]
        seen, present = packed["seen"], packed["present"]
        ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
        ids = tf.where(seen, ids, tf.where(present, self._unseen_id, -1))
        tags = tf.where(seen, self._names(ids), tf.where(present, OUTSIDE, ""))
        probabilities = tf.nn.softmax(logits, axis=-1) * tf.cast(seen, tf.float32)[..., None]
        return {
            "words": words.to_tensor(default_value=""),
            "tags": tags,
            "tag_ids": ids,
            "probabilities": probabilities,
            "num_words": tf.cast(words.row_lengths(), tf.int32),
        }

    def _from_text(self, text) -> dict:
        return self._tag_words(split_text(text_ops.ensure_texts(text, "text")))

    def _from_words(self, words, num_words) -> dict:
        words = tf.ensure_shape(words, [None, None], name="check_words_shape")
        num_words = tf.ensure_shape(num_words, [None], name="check_num_words_shape")
        checks = [
            tf.debugging.assert_equal(
                tf.shape(words)[0],
                tf.shape(num_words)[0],
                message="words and num_words must have the same batch size",
            ),
            tf.debugging.assert_non_negative(num_words, message="num_words must be >= 0"),
            tf.debugging.assert_less_equal(
                num_words, tf.shape(words)[1], message="num_words must be <= the words per row"
            ),
        ]
        with tf.control_dependencies(checks):
            mask = tf.range(tf.shape(words)[1])[tf.newaxis] < tf.identity(num_words)[:, None]
        return self._tag_words(tf.ragged.boolean_mask(words, mask))

    def _from_ids(self, input_ids, input_mask, segment_ids) -> dict:
        inputs = text_ops.checked_token_ids(
            self.model.encoder, input_ids, input_mask, segment_ids, pad_empty=False
        )
        logits = self._logits(inputs)
        ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {
            "logits": logits,
            "probabilities": tf.nn.softmax(logits, axis=-1),
            "tag_ids": ids,
            "tags": self._names(ids),
        }

    def signatures(self) -> dict:
        """`{signature name: concrete function}` for `tf.saved_model.save`."""

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve_text(text):
            return self._from_text(text)

        @tf.function(
            input_signature=[
                tf.TensorSpec([None, None], tf.string, name="words"),
                tf.TensorSpec([None], tf.int32, name="num_words"),
            ]
        )
        def serve_words(words, num_words):
            return self._from_words(words, num_words)

        self.serve_text, self.serve_words = serve_text, serve_words
        self.serve_ids = token_ids_function(self._from_ids)
        return {
            TEXT_SIGNATURE: serve_text.get_concrete_function(),
            WORDS_SIGNATURE: serve_words.get_concrete_function(),
            IDS_SIGNATURE: self.serve_ids.get_concrete_function(),
        }
