"""In-graph packing and tokenization give exactly the ids of the Python fine-tuning path."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from electra_tf import text_packing as text_ops
from electra_tf.finetuning.classification import features
from electra_tf.tokenization import WordPieceTokenizer

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = [
    "한국어",
    "문장",
    "##도",
    "##입니다",
    "中",
    "文",
    "cafe",
    "café",
    "Café",
    "creme",
    "crème",
    "the",
    "movie",
    "was",
    "good",
    ".",
    "?",
    "!",
    "##s",
]
TEXTS = [
    "한국어 문장도 문장입니다.",
    "Café CRÈME crème",
    "中文 中文文",
    "",
    "the movie was good " * 9,
    "the\u00a0movie\u200b was\tgood!",
    "movies?",
]


def test_pair_lengths_equal_the_truncation_loop():
    lengths = list(itertools.product(range(13), range(13)))
    for budget in range(0, 12):
        got_a, got_b = text_ops.pair_lengths(
            tf.constant([a for a, _ in lengths]), tf.constant([b for _, b in lengths]), budget
        )
        for (a, b), ga, gb in zip(lengths, got_a.numpy(), got_b.numpy()):
            tokens_a, tokens_b = list(range(a)), list(range(b))
            features.truncate_pair(tokens_a, tokens_b, budget)
            assert (ga, gb) == (len(tokens_a), len(tokens_b)), (a, b, budget)


@pytest.mark.parametrize("lower,strip", [(True, True), (False, False), (True, False)])
@pytest.mark.parametrize("max_seq_length", [5, 9, 32])
def test_packing_matches_features_encode(tmp_path, lower, strip, max_seq_length):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(SPECIALS + WORDS) + "\n", encoding="utf-8")
    tokenizer = WordPieceTokenizer(str(vocab), lower, strip)
    texts_a = TEXTS + [b"bad \xff bytes caf\xc3".decode("utf-8", "ignore")]
    texts_b = list(reversed(texts_a))
    for b in (None, texts_b):
        expected = features.encode(tokenizer, texts_a, b, max_seq_length)
        packed = text_ops.pack(
            tokenizer.tokenize(tf.constant(texts_a)),
            None if b is None else tokenizer.tokenize(tf.constant(b)),
            max_seq_length,
            tokenizer.cls_id,
            tokenizer.sep_id,
            tokenizer.pad_id,
        )
        ids, mask, segments = (
            packed[k].numpy() for k in ("input_ids", "input_mask", "segment_ids")
        )
        assert ids.shape[1] == max(len(e[0]) for e in expected) <= max_seq_length
        for row, (want_ids, want_segments) in enumerate(expected):
            n = len(want_ids)
            assert ids[row, :n].tolist() == want_ids
            assert segments[row, :n].tolist() == want_segments
            assert mask[row].tolist() == [1] * n + [0] * (ids.shape[1] - n)
            assert not ids[row, n:].any() and not segments[row, n:].any()
        flat = text_ops.pack_flat(
            tokenizer.tokenize_flat(tf.constant(texts_a)),
            None if b is None else tokenizer.tokenize_flat(tf.constant(b)),
            max_seq_length,
            tokenizer.cls_id,
            tokenizer.sep_id,
            tokenizer.pad_id,
        )
        for name, value in packed.items():
            assert flat[name].dtype == tf.int32
            np.testing.assert_array_equal(flat[name].numpy(), value.numpy(), err_msg=name)
    # The Korean and accented pieces really are in-vocabulary ids, not [UNK].
    first = tokenizer.tokenize_to_lists(TEXTS[:2])
    assert tokenizer.unk_id not in first[0]
    if strip:
        assert tokenizer.unk_id not in first[1]


def test_token_id_checks_reject_bad_requests():
    ids = tf.constant([[2, 5, 3]], tf.int32)
    ones = tf.ones_like(ids)

    def run(input_ids, mask, segments):
        for op in text_ops.check_token_ids(
            input_ids, mask, segments, vocab_size=10, max_length=4, type_vocab_size=2
        ):
            del op

    run(ids, ones, tf.zeros_like(ids))
    for bad, message in [
        ((tf.constant([[2, 10, 3]]), ones, ones * 0), "vocabulary size 10"),
        ((tf.constant([[2, -1, 3]]), ones, ones * 0), "input_ids must be >= 0"),
        ((ids, ones, ones * 2), "segment_ids must be < 2"),
        ((ids, ones * 3, ones * 0), "input_mask must be 0 or 1"),
        ((ids, tf.ones([1, 2], tf.int32), ones * 0), "input_mask must have"),
        (
            (tf.ones([1, 5], tf.int32), tf.ones([1, 5], tf.int32), tf.zeros([1, 5], tf.int32)),
            "sequence length must be <= 4",
        ),
    ]:
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            run(*bad)
    np.testing.assert_array_equal(ids.numpy(), [[2, 5, 3]])


@pytest.mark.slow
@pytest.mark.parametrize("max_seq_length", [3, 4, 5, 8, 64])
def test_dense_packing_equals_ragged_packing_on_every_length_mix(tmp_path, max_seq_length):
    """`pack_flat` against `pack` for single texts and pairs of 0 to 12 pieces, at batch 1
    (as a serving request) and with all the rows in one batch."""
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(SPECIALS + WORDS) + "\n", encoding="utf-8")
    tokenizer = WordPieceTokenizer(str(vocab))
    texts = [" ".join(["movie"] * n) for n in range(13)]
    pairs = list(itertools.product(texts, texts))
    specials = (tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id)
    batches = [([a], [b]) for a, b in pairs[::7]] + [([a for a, _ in pairs], [b for _, b in pairs])]
    for texts_a, texts_b in batches:
        a, b = tf.constant(texts_a), tf.constant(texts_b)
        for second in (None, b):
            packed = text_ops.pack(
                tokenizer.tokenize(a),
                None if second is None else tokenizer.tokenize(second),
                max_seq_length,
                *specials,
            )
            flat = text_ops.pack_flat(
                tokenizer.tokenize_flat(a),
                None if second is None else tokenizer.tokenize_flat(second),
                max_seq_length,
                *specials,
            )
            for name, value in packed.items():
                np.testing.assert_array_equal(flat[name].numpy(), value.numpy(), err_msg=name)
