"""Training batches grouped by length (electra_tf.finetuning.kind.text_features)."""

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.finetuning.classification.features import make_dataset as classification_batches
from electra_tf.finetuning.dependency_parsing.features import make_dataset as parsing_batches
from electra_tf.finetuning.kind.text_features import bucket_lengths
from electra_tf.finetuning.kind.word_features import WordFeatures
from electra_tf.finetuning.multiple_choice.features import ChoiceFeatures
from electra_tf.finetuning.multiple_choice.features import make_dataset as choice_batches


@pytest.mark.parametrize(
    "longest, expected",
    [
        (128, [16, 32, 48, 64, 96, 128]),
        (100, [16, 32, 48, 64, 96, 100]),
        (512, [16, 32, 48, 64, 96, 128, 192, 256, 384, 512]),
        (16, [16]),
        (10, [10]),
        (17, [16, 17]),
    ],
)
def test_bucket_lengths(longest, expected):
    assert bucket_lengths(longest) == expected


def _rows(count: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, 121, count)
    return [(list(range(1, n + 1)), [0] * n) for n in lengths]


def _unpadded(batch):
    ids, mask = batch["input_ids"].numpy(), batch["input_mask"].numpy()
    return [tuple(row[: int(m.sum())]) for row, m in zip(ids, mask)]


def test_every_row_once_per_pass_in_a_batch_of_its_own_bucket():
    rows = _rows(300)
    labels = np.arange(300, dtype=np.int32)
    seen = []
    for inputs, label in classification_batches(rows, labels, 16, shuffle_seed=0, by_length=True):
        length = inputs["input_ids"].shape[1]
        real = inputs["input_mask"].numpy().sum(1)
        assert length in bucket_lengths(120)
        lower = max([b for b in bucket_lengths(120) if b < length], default=0)
        assert (real > lower).all() and (real <= length).all()
        # Padding is the pad id (0) with mask 0; a row's ids are its own.
        ids = inputs["input_ids"].numpy()
        assert (ids[inputs["input_mask"].numpy() == 0] == 0).all()
        for row, index in zip(_unpadded(inputs), label.numpy()):
            assert row == tuple(rows[index][0])
        seen.extend(label.numpy().tolist())
    assert sorted(seen) == list(range(300))


def test_batches_are_whole_and_fewer_tokens_are_padding_than_at_random():
    rows = _rows(400)
    labels = np.zeros(400, np.int32)

    def padding_fraction(by_length):
        dataset = classification_batches(
            rows, labels, 32, shuffle_seed=1, repeat=True, by_length=by_length
        )
        padded = real = 0
        for inputs, label in dataset.take(40):
            assert label.shape == (32,)
            padded += inputs["input_ids"].shape[0] * inputs["input_ids"].shape[1]
            real += int(inputs["input_mask"].numpy().sum())
        return 1 - real / padded

    grouped, at_random = padding_fraction(True), padding_fraction(False)
    # Lengths uniform in 3..120: random batches pad to ~117 (about half padding);
    # buckets pad a row by less than a third of its bucket.
    assert at_random > 0.4
    assert grouped < 0.2


def test_the_same_seed_gives_the_same_batches():
    rows = _rows(200)
    labels = np.arange(200, dtype=np.int32)

    def first(seed):
        dataset = classification_batches(
            rows, labels, 8, shuffle_seed=seed, repeat=True, by_length=True
        )
        return [label.numpy().tolist() for _, label in dataset.take(30)]

    assert first(3) == first(3)
    assert first(3) != first(4)


def test_word_columns_are_padded_to_the_bucket_too():
    """Parsing batches: tokens and words share the bucket's length (one shape per bucket)."""
    rng = np.random.default_rng(2)
    ids, positions, heads = [], [], []
    for _ in range(64):
        words = int(rng.integers(2, 30))
        ids.append([2] + [7] * (2 * words) + [3])
        positions.append([1 + 2 * w for w in range(words)])
        heads.append([int(h) for h in rng.integers(0, words + 1, words)])
    features = WordFeatures(input_ids=ids, positions=positions, num_words=[len(h) for h in heads])
    targets = (heads, [[1] * len(h) for h in heads], [[1.0] * len(h) for h in heads])
    for inputs, labels in parsing_batches(features, targets, 8, shuffle_seed=0, by_length=True):
        length = inputs["input_ids"].shape[1]
        assert length in bucket_lengths(max(len(row) for row in ids))
        assert inputs["word_starts"].shape == (inputs["input_ids"].shape[0], length)
        assert labels["heads"].shape == inputs["word_starts"].shape
        words = labels["word_mask"].numpy().sum(1)
        starts = inputs["word_starts"].numpy()
        assert ((starts > 0).sum(1) == words).all()
        assert tf.reduce_all(labels["heads"] <= tf.cast(words[:, None], tf.int32)).numpy()


def test_multiple_choice_questions_are_grouped_by_their_longest_option():
    rng = np.random.default_rng(4)
    questions = []
    for _ in range(40):
        options = int(rng.integers(2, 5))
        questions.append([[2] + [9] * int(rng.integers(1, 60)) + [3] for _ in range(options)])
    features = ChoiceFeatures(
        input_ids=questions, segment_ids=[[[0] * len(o) for o in q] for q in questions]
    )
    answers = np.arange(40) % 2
    buckets = bucket_lengths(max(len(o) for q in questions for o in q))
    seen = []
    for inputs, label in choice_batches(features, answers, 4, 4, shuffle_seed=0, by_length=True):
        batch, options, length = inputs["input_ids"].shape
        assert options == 4 and length in buckets
        longest = inputs["input_mask"].numpy().sum(-1).max(-1)  # each question's longest option
        lower = max([b for b in buckets if b < length], default=0)
        assert (longest > lower).all() and (longest <= length).all()
        seen.extend(label.numpy().tolist())
    assert len(seen) == 40 and sorted(seen) == sorted(answers.tolist())
