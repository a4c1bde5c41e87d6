"""Sentences -> pieces, first-piece positions, training targets and padded batches."""

import numpy as np
import pytest
from finetuning_support import write_vocab

from electra_tf.finetuning.dependency_parsing import features as dp_features
from electra_tf.tokenization import WordPieceTokenizer

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "아이",
    "##는",
    "일찍",
    "태어",
    "##났다",
    ".",
]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return WordPieceTokenizer(write_vocab(str(tmp_path_factory.mktemp("v") / "vocab.txt"), VOCAB))


def _ids(tokenizer, *tokens):
    return tokenizer.convert_tokens_to_ids(tokens)


def test_each_word_is_read_at_its_first_piece(tokenizer):
    sentences = [["아이는", "일찍", "태어났다."], ["\u200b", "일찍"]]
    features = dp_features.encode(tokenizer, sentences, 16)
    assert features.input_ids[0] == _ids(
        tokenizer, "[CLS]", "아이", "##는", "일찍", "태어", "##났다", ".", "[SEP]"
    )
    # Word j (1-based, as HEAD counts) at its first piece; [CLS] (position 0) is the root.
    assert features.positions[0] == [1, 3, 4]
    # A word that gives no piece is one [UNK], so that it has a position.
    assert features.input_ids[1] == _ids(tokenizer, "[CLS]", "[UNK]", "일찍", "[SEP]")
    assert features.positions[1] == [1, 2] and features.num_words == [3, 2]


def test_long_sentences_keep_the_words_whose_first_piece_fits(tokenizer):
    features = dp_features.encode(tokenizer, [["아이는", "일찍", "태어났다."]], 5)
    # Room for three pieces: 아이 ##는 일찍; the third word is not seen.
    assert features.input_ids[0] == _ids(tokenizer, "[CLS]", "아이", "##는", "일찍", "[SEP]")
    assert features.positions[0] == [1, 3] and features.num_truncated == 1
    heads, labels, mask = dp_features.training_targets(features, [[3, 3, 0]], [[3, 5, 2]])
    # Only seen words are trained, and only those whose head is the root or a seen word.
    assert (heads, labels, mask) == ([[0, 0]], [[0, 0]], [[0.0, 0.0]])
    heads, labels, mask = dp_features.training_targets(features, [[2, 0, 2]], [[3, 2, 5]])
    assert (heads, labels, mask) == ([[2, 0]], [[3, 2]], [[1.0, 1.0]])


def test_batches_pad_words_and_pieces_to_the_batch_s_longest(tokenizer):
    sentences = [["아이는", "일찍", "태어났다."], ["일찍"]]
    features = dp_features.encode(tokenizer, sentences, 16)
    targets = dp_features.training_targets(features, [[3, 3, 0], [0]], [[3, 11, 2], [2]])
    inputs, labels = next(iter(dp_features.make_dataset(features, targets, 2)))
    np.testing.assert_array_equal(inputs["word_starts"], [[1, 3, 4], [1, 0, 0]])
    np.testing.assert_array_equal(inputs["input_mask"], [[1] * 8, [1, 1, 1] + [0] * 5])
    np.testing.assert_array_equal(
        inputs["input_ids"][1], _ids(tokenizer, "[CLS]", "일찍", "[SEP]") + [0] * 5
    )
    np.testing.assert_array_equal(labels["heads"], [[3, 3, 0], [0, 0, 0]])
    np.testing.assert_array_equal(labels["label_ids"], [[3, 11, 2], [2, 0, 0]])
    np.testing.assert_array_equal(labels["word_mask"], [[1, 1, 1], [1, 0, 0]])
    assert set(inputs) == {"input_ids", "input_mask", "segment_ids", "word_starts"}


def test_predictions_give_every_word_a_head_or_minus_one_when_not_seen(tokenizer):
    features = dp_features.encode(tokenizer, [["아이는", "일찍", "태어났다."], ["일찍"]], 5)

    def model(inputs, training=False):
        starts = np.asarray(inputs["word_starts"])
        # Each seen word's head is its first piece's position; its label that plus 10.
        return {"heads": starts, "label_ids": starts + 10}

    heads, labels = dp_features.predict(model, features, batch_size=1)
    assert heads == [[1, 3, -1], [1]] and labels == [[11, 13, -1], [11]]
