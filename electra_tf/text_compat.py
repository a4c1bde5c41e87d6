"""Every use of private TensorFlow Text API in electra-tf, in one place.

The classifier's serving signature tokenizes one text in a few dozen graph
ops (`WordPieceTokenizer.tokenize_flat`), which needs three things TF Text
keeps private: the two regular expressions `BertTokenizer` splits words
with, the raw split op (flat outputs, no ragged wrappers), and the model
builder of `FastWordpieceTokenizer`. `tests/test_text_compat.py` checks them
on the TensorFlow Text releases in `CHECKED_TF_TEXT_VERSIONS` and that the
flat split equals the public one.
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.python.ops import regex_split_ops

# TensorFlow Text releases (major.minor) on which the names below were checked.
CHECKED_TF_TEXT_VERSIONS = ("2.21",)


def bert_split_patterns(bert_tokenizer: tf_text.BertTokenizer) -> tuple[str, str]:
    """(delimiters, delimiters kept as words): the word split of `bert_tokenizer`."""
    basic = bert_tokenizer._basic_tokenizer
    return basic._delim_regex_pattern, basic._keep_delim_regex_pattern


def regex_split_flat(texts: tf.Tensor, delim_pattern: str, keep_delim_pattern: str):
    """`tf_text.regex_split` of texts [B], as flat words [W] and their row splits int64 [B + 1].

    The patterns are wrapped in a group, as `tf_text.regex_split` does.
    """
    words, _, _, row_splits = regex_split_ops.gen_regex_split_ops.regex_split_with_offsets(
        texts, f"({delim_pattern})", f"({keep_delim_pattern})"
    )
    return words, row_splits


def fast_wordpiece_model(
    vocab: Sequence[str], max_bytes_per_word: int, suffix_indicator: str, unknown_token: str
) -> bytes:
    """The serialized trie of `tf_text.FastWordpieceTokenizer` for words split beforehand."""
    # Positional only: vocab, max_bytes_per_word, suffix_indicator, unknown_token,
    # no_pretokenization, support_detokenization.
    return tf_text.build_fast_wordpiece_model(
        list(vocab), max_bytes_per_word, suffix_indicator, unknown_token, True, False
    )
