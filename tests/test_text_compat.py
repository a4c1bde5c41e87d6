"""The private TF Text API electra-tf relies on is still there and does what the public API does."""

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from electra_tf import text_compat

TEXTS = ["Hello, world! (ELECTRA)", "", "中文字 한국어 문장입니다", "tabs\tand   spaces...?!"]


def test_installed_tf_text_is_a_checked_version():
    # A new TF Text release: check each function of text_compat against its source, then add it.
    release = ".".join(tf_text.__version__.split(".")[:2])
    assert release in text_compat.CHECKED_TF_TEXT_VERSIONS, (
        f"tensorflow-text {tf_text.__version__} is not among the versions "
        f"electra_tf.text_compat was checked on: {text_compat.CHECKED_TF_TEXT_VERSIONS}"
    )


def test_flat_split_equals_the_public_split_with_bert_patterns():
    bert = tf_text.BertTokenizer(
        tf.lookup.StaticVocabularyTable(
            tf.lookup.KeyValueTensorInitializer(["[UNK]"], [0], value_dtype=tf.int64), 1
        )
    )
    delim, keep = text_compat.bert_split_patterns(bert)
    assert isinstance(delim, str) and isinstance(keep, str) and delim and keep
    words, splits = text_compat.regex_split_flat(tf.constant(TEXTS), delim, keep)
    public = tf_text.regex_split(tf.constant(TEXTS), delim, keep)
    np.testing.assert_array_equal(words.numpy(), public.flat_values.numpy())
    np.testing.assert_array_equal(splits.numpy(), public.row_splits.numpy())
    # BERT's split: punctuation is a word of its own, each CJK character too.
    assert [w.decode() for w in words.numpy()[:5]] == ["Hello", ",", "world", "!", "("]
    assert ["中", "文", "字"] == [w.decode() for w in words.numpy()[7:10]]


def test_fast_wordpiece_model_tokenizes_pre_split_words_greedily():
    vocab = ["[UNK]", "un", "##aff", "##able", "aff"]
    model = text_compat.fast_wordpiece_model(vocab, 100, "##", "[UNK]")
    tokenizer = tf_text.FastWordpieceTokenizer(
        model_buffer=tf.constant(np.frombuffer(model, np.uint8)), token_out_type=tf.int32
    )
    ids = tokenizer.tokenize(tf.constant(["unaffable", "aff", "xyz"]))
    assert ids.to_list() == [[1, 2, 3], [4], [0]]
