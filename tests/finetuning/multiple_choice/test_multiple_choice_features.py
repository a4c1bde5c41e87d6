"""One sequence per option: the truncation rule, the packing, and batches of [B, O, L]."""

import os

import numpy as np
import pytest
from finetuning_support import make_pretrained_dir

from electra_tf.finetuning.multiple_choice import features

CLS, SEP = 2, 3


@pytest.mark.parametrize(
    "context, second, length, expected",
    [
        (5, 3, 16, (5, 3)),  # fits: nothing is cut
        (20, 3, 16, (10, 3)),  # the context gives way first
        (20, 13, 16, (0, 13)),  # the question and option fill the budget
        (20, 30, 16, (0, 13)),  # then they keep their last 13 pieces
        (0, 0, 4, (0, 0)),
    ],
)
def test_the_context_is_cut_first(context, second, length, expected):
    assert features.choice_lengths(context, second, length) == expected


def test_an_option_s_sequence_by_hand():
    context, question, option = [10, 11, 12, 13, 14], [20, 21], [30]
    ids, segments, cut = features.build_option(context, question, option, 10, CLS, SEP)
    # Budget 7: question + option keep their 3 pieces, the context its first 4.
    assert ids == [CLS, 10, 11, 12, 13, SEP, 20, 21, 30, SEP] and cut
    assert segments == [0] * 6 + [1] * 4
    ids, _, cut = features.build_option(context, question, option, 5, CLS, SEP)
    # Budget 2: no context left, the question loses its first piece.
    assert ids == [CLS, SEP, 21, 30, SEP] and cut
    ids, _, cut = features.build_option([10], question, option, 10, CLS, SEP)
    assert ids == [CLS, 10, SEP, 20, 21, 30, SEP] and not cut


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from electra_tf.tokenization import TextPath

    directory = make_pretrained_dir(str(tmp_path_factory.mktemp("mc_features")))
    return TextPath(True, True, "bert", 16).tokenizer(os.path.join(directory, "vocab.txt"))


def test_encode_packs_every_option_and_counts_cut_questions(tokenizer):
    vocab = {
        t: i for i, t in enumerate(tokenizer.convert_ids_to_tokens(range(tokenizer.vocab_size)))
    }
    encoded = features.encode(
        tokenizer,
        ["the movie was good", "the plot " * 10],
        ["is film fun", "a"],
        [["good", "bad", "very dull"], ["fun", "film"]],
        max_seq_length=12,
    )
    assert len(encoded) == 2 and [len(row) for row in encoded.input_ids] == [3, 2]
    first = [CLS] + [vocab[w] for w in "the movie was good".split()] + [SEP]
    second = [vocab[w] for w in "is film fun".split()]
    assert encoded.input_ids[0][2] == first + second + [vocab["very"], vocab["dull"], SEP]
    assert encoded.segment_ids[0][2] == [0] * 6 + [1] * 6
    # The long context keeps 12 - 3 - 2 pieces.
    assert encoded.input_ids[1][0] == [CLS] + [vocab["the"], vocab["plot"]] * 3 + [vocab["the"]] + [
        SEP,
        vocab["a"],
        vocab["fun"],
        SEP,
    ]
    assert encoded.num_truncated == 1
    with pytest.raises(ValueError, match="max_seq_length=3"):
        features.encode(tokenizer, ["a"], ["a"], [["a", "b"]], 3)


def test_batches_pad_options_and_lengths(tokenizer):
    encoded = features.ChoiceFeatures(
        input_ids=[
            [[2, 5, 3], [2, 5, 6, 7, 3]],
            [[2, 8, 3], [2, 9, 3], [2, 3, 3]],
            [[2, 4, 4, 3]] * 2,
        ],
        segment_ids=[[[0, 0, 1], [0, 0, 1, 1, 1]], [[0, 0, 1]] * 3, [[0, 0, 1, 1]] * 2],
    )
    dataset = features.make_dataset(encoded, np.array([1, 2, 0]), 2, num_options=4, pad_id=0)
    batches = list(dataset)
    assert len(batches) == 2
    inputs, labels = batches[0]
    assert {k: tuple(v.shape) for k, v in inputs.items()} == {
        "input_ids": (2, 4, 5),
        "input_mask": (2, 4, 5),
        "segment_ids": (2, 4, 5),
    }
    np.testing.assert_array_equal(labels, [1, 2])
    ids = inputs["input_ids"].numpy()
    mask = inputs["input_mask"].numpy()
    np.testing.assert_array_equal(ids[0, 0], [2, 5, 3, 0, 0])
    np.testing.assert_array_equal(mask[0, 0], [1, 1, 1, 0, 0])
    np.testing.assert_array_equal(mask[0, 2:], 0)  # question 0 has 2 options of 4
    np.testing.assert_array_equal(mask[1, :3, 0], 1)
    np.testing.assert_array_equal(mask[1, 3], 0)
    np.testing.assert_array_equal(inputs["segment_ids"].numpy()[0, 1], [0, 0, 1, 1, 1])
    assert tuple(batches[1][0]["input_ids"].shape) == (1, 4, 4)
    # The same inputs in NumPy, for the serving check.
    padded = features.padded_inputs(encoded, 0)
    assert padded["input_ids"].shape == (3, 3, 5)
    np.testing.assert_array_equal(
        padded["input_ids"][:2, :, :5], np.pad(ids, ((0, 0), (0, 0), (0, 0)))[:, :3]
    )
    unlabelled = next(iter(features.make_dataset(encoded, None, 3, num_options=3)))
    assert set(unlabelled) == {"input_ids", "input_mask", "segment_ids"}
