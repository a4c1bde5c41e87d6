"""Words -> inputs with first-piece positions, labels at those positions, predictions back."""

import numpy as np
import pytest
from finetuning_support import write_vocab

from electra_tf.finetuning.kind.word_features import encode_words
from electra_tf.finetuning.tagging import features as tagging_features
from electra_tf.tokenization import WordPieceTokenizer

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "the",
    "movie",
    "play",
    "##ing",
    "##s",
    ",",
    "한국",
    "##어",
]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return WordPieceTokenizer(write_vocab(str(tmp_path_factory.mktemp("v") / "vocab.txt"), VOCAB))


def _ids(tokenizer, *tokens):
    return tokenizer.convert_tokens_to_ids(tokens)


def test_first_pieces_unknown_and_empty_words(tokenizer):
    sentences = [["the", "playings", "movie,"], ["\u200b", "한국어"], []]
    features = encode_words(tokenizer, sentences, 16)
    # Word by word: playings -> play ##ing ##s; "movie," -> movie , (punctuation split).
    assert features.input_ids[0] == _ids(
        tokenizer, "[CLS]", "the", "play", "##ing", "##s", "movie", ",", "[SEP]"
    )
    assert features.positions[0] == [1, 2, 5]
    # A word that tokenizes to nothing becomes [UNK] and keeps its position.
    assert features.input_ids[1] == _ids(tokenizer, "[CLS]", "[UNK]", "한국", "##어", "[SEP]")
    assert features.positions[1] == [1, 2]
    assert features.input_ids[2] == _ids(tokenizer, "[CLS]", "[SEP]")
    assert features.positions[2] == []
    assert features.num_words == [3, 2, 0] and features.num_truncated == 0


def test_truncation_keeps_words_whose_first_piece_fits(tokenizer):
    features = encode_words(tokenizer, [["the", "playings", "movie"]], 5)
    # Room for 3 pieces: the, play, ##ing; "movie" is not seen.
    assert features.input_ids[0] == _ids(tokenizer, "[CLS]", "the", "play", "##ing", "[SEP]")
    assert features.positions[0] == [1, 2] and features.num_truncated == 1
    with pytest.raises(ValueError, match="at least 3"):
        encode_words(tokenizer, [["the"]], 2)


def test_labels_sit_on_first_pieces_and_batches_pad(tokenizer):
    features = encode_words(tokenizer, [["the", "playings"], ["movie"]], 16)
    ids, mask = tagging_features.position_labels(features, [[2, 1], [-1]])
    assert ids == [[0, 2, 1, 0, 0, 0], [0, 0, 0]]
    assert mask == [[0, 1, 1, 0, 0, 0], [0, 0, 0]]
    inputs, labels = next(iter(tagging_features.make_dataset(features, [[2, 1], [-1]], 2)))
    assert inputs["input_ids"].shape == (2, 6) and inputs["segment_ids"].numpy().sum() == 0
    np.testing.assert_array_equal(inputs["input_mask"].numpy(), [[1] * 6, [1, 1, 1, 0, 0, 0]])
    np.testing.assert_array_equal(labels["tag_ids"].numpy(), [[0, 2, 1, 0, 0, 0], [0] * 6])
    np.testing.assert_array_equal(labels["tag_mask"].numpy(), [[0, 1, 1, 0, 0, 0], [0] * 6])


def test_word_logits_and_predicted_ids(tokenizer):
    features = encode_words(tokenizer, [["the", "playings", "movie"], ["movie"]], 5)

    def model(inputs, training=False):
        # Logits that encode the position: tag (position mod 3).
        ids = inputs["input_ids"].numpy()
        positions = np.arange(ids.shape[1]) % 3
        return np.eye(3, dtype=np.float32)[np.broadcast_to(positions, ids.shape)]

    logits = tagging_features.word_logits(model, features, batch_size=1)
    assert [v.shape for v in logits] == [(2, 3), (1, 3)]
    # Positions 1 and 2, then 1; the third word of the first sentence is cut off.
    assert tagging_features.predicted_ids(logits, features.num_words, unseen_id=0) == [
        [1, 2, 0],
        [1],
    ]
