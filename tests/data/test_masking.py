"""Tests for electra_tf.data.masking against NumPy re-computations of ELECTRA's rules."""

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.data.masking import mask_batch, mask_example

OWN_VOCAB = {"pad_id": 0, "cls_id": 2, "sep_id": 3, "mask_id": 4}
BERT_VOCAB = {"pad_id": 0, "cls_id": 101, "sep_id": 102, "mask_id": 103}


def _row(tokens, seq_len, pad_id):
    ids = np.full(seq_len, pad_id, np.int32)
    ids[: len(tokens)] = tokens
    mask = np.zeros(seq_len, np.int32)
    mask[: len(tokens)] = 1
    return ids, mask


def _expected(ids, mask, rate, n, sp):
    """NumPy version of the rules: candidate set and the number of predictions."""
    special = np.isin(ids, [sp["pad_id"], sp["cls_id"], sp["sep_id"], sp["mask_id"]])
    candidates = set(np.flatnonzero((mask == 1) & ~special).tolist())
    num_tokens = int(mask.sum())
    count = max(1, min(n, int(np.round(rate * num_tokens))))  # np.round: half to even
    return candidates, min(count, len(candidates))


def _random_rows(rng, sp, seq_len, lengths):
    """[CLS] A [SEP] B [SEP] rows, with stray [MASK] tokens mixed in."""
    rows = []
    normal = np.array([t for t in range(5, 400) if t not in sp.values()])
    for length in lengths:
        tokens = rng.choice(normal, size=length)
        tokens[0] = sp["cls_id"]
        tokens[-1] = sp["sep_id"]
        if length > 4:
            tokens[rng.integers(1, length - 1)] = sp["sep_id"]
            tokens[rng.integers(1, length - 1)] = sp["mask_id"]
        rows.append(_row(tokens, seq_len, sp["pad_id"]))
    return rows


def _check_output(out, ids, mask, rate, n, sp):
    """Asserts every rule on one example's output; returns the used positions."""
    out = {k: np.asarray(v) for k, v in out.items()}
    candidates, count = _expected(ids, mask, rate, n, sp)
    assert out["masked_lm_positions"].dtype == np.int32
    assert out["masked_lm_ids"].dtype == np.int32
    assert out["masked_input_ids"].dtype == np.int32
    assert out["masked_lm_weights"].dtype == np.float32
    assert out["sampling_uniforms"].dtype == np.float32
    weights = out["masked_lm_weights"]
    np.testing.assert_array_equal(weights, (np.arange(n) < count).astype(np.float32))
    pos = out["masked_lm_positions"]
    used = pos[:count]
    assert len(set(used.tolist())) == count, "positions must be distinct"
    assert set(used.tolist()) <= candidates
    np.testing.assert_array_equal(pos[count:], 0)
    np.testing.assert_array_equal(out["masked_lm_ids"][:count], ids[used])
    np.testing.assert_array_equal(out["masked_lm_ids"][count:], 0)
    changed = np.flatnonzero(out["masked_input_ids"] != ids)
    assert set(changed.tolist()) <= set(used.tolist())
    np.testing.assert_array_equal(out["masked_input_ids"][changed], sp["mask_id"])
    u = out["sampling_uniforms"]
    assert u.shape == (n,) and np.all(u >= 0.0) and np.all(u < 1.0)
    return used


@pytest.mark.parametrize("sp", [OWN_VOCAB, BERT_VOCAB], ids=["own_vocab", "bert_vocab"])
def test_rules_on_rows_of_many_lengths(sp):
    rng = np.random.default_rng(0)
    seq_len, n, rate = 48, 7, 0.15
    rows = _random_rows(rng, sp, seq_len, lengths=range(2, seq_len + 1))
    ids = np.stack([r[0] for r in rows])
    mask = np.stack([r[1] for r in rows])
    # Per-example API, several seeds per row.
    fn = tf.function(
        lambda i, m, s: mask_example(i, m, s, mask_rate=rate, max_predictions_per_seq=n, **sp)
    )
    for r in range(len(rows)):
        for s in range(3):
            _check_output(
                fn(ids[r], mask[r], tf.constant([s, r], tf.int64)), ids[r], mask[r], rate, n, sp
            )
    # Batched API.
    out = mask_batch(
        ids, mask, np.arange(len(rows)), [5, 6], mask_rate=rate, max_predictions_per_seq=n, **sp
    )
    for r in range(len(rows)):
        _check_output({k: v[r] for k, v in out.items()}, ids[r], mask[r], rate, n, sp)


@pytest.mark.parametrize(
    "num_tokens,rate,expected",
    [
        (30, 0.15, 4),  # 4.5 rounds half to even -> 4
        (190, 0.15, 28),  # 28.5 -> 28 (float32 arithmetic would give 28.500002 -> 29)
        (10, 0.15, 2),  # 1.5 -> 2
        (50, 0.15, 8),  # 7.5 -> 8
        (3, 0.15, 1),  # 0.45 -> 0, floored at 1
        (40, 0.5, 10),  # 20 capped at N = 10
    ],
)
def test_count_hand_examples(num_tokens, rate, expected):
    sp = OWN_VOCAB
    tokens = np.r_[2, np.arange(10, 10 + num_tokens - 2), 3]
    ids, mask = _row(tokens, 200, 0)
    n = 10 if num_tokens < 190 else 40
    out = mask_example(ids, mask, [1, 2], mask_rate=rate, max_predictions_per_seq=n, **sp)
    assert float(out["masked_lm_weights"].numpy().sum()) == expected
    _check_output(out, ids, mask, rate, n, sp)


@pytest.mark.parametrize("tokens", [[101, 102], [101, 103, 103, 102, 102], [101]])
def test_row_without_candidates_masks_nothing(tokens):
    ids, mask = _row(tokens, 16, 0)
    out = mask_example(ids, mask, [3, 4], mask_rate=0.15, max_predictions_per_seq=5, **BERT_VOCAB)
    np.testing.assert_array_equal(out["masked_lm_weights"].numpy(), np.zeros(5, np.float32))
    np.testing.assert_array_equal(out["masked_lm_positions"].numpy(), 0)
    np.testing.assert_array_equal(out["masked_lm_ids"].numpy(), 0)
    np.testing.assert_array_equal(out["masked_input_ids"].numpy(), ids)
    assert np.all(np.isfinite(out["sampling_uniforms"].numpy()))


def test_all_padding_row_masks_nothing():
    ids = np.zeros(16, np.int32)
    out = mask_example(
        ids, np.zeros(16, np.int32), [3, 4], mask_rate=0.15, max_predictions_per_seq=5, **OWN_VOCAB
    )
    assert out["masked_lm_weights"].numpy().sum() == 0
    np.testing.assert_array_equal(out["masked_input_ids"].numpy(), ids)


def test_fewer_candidates_than_count():
    # 8 real tokens at rate 0.5 -> 4 predictions wanted, but only 2 candidates.
    tokens = [2, 50, 3, 4, 4, 60, 3, 3]
    ids, mask = _row(tokens, 12, 0)
    for s in range(10):
        out = mask_example(ids, mask, [s, 0], mask_rate=0.5, max_predictions_per_seq=6, **OWN_VOCAB)
        used = _check_output(out, ids, mask, 0.5, 6, OWN_VOCAB)
        assert sorted(used.tolist()) == [1, 5]


def test_pad_positions_never_chosen_even_if_ids_look_real():
    # Padding is defined by input_mask; ids beyond it are ignored whatever they are.
    ids = np.array([2, 10, 11, 3, 12, 13, 14, 15], np.int32)
    mask = np.array([1, 1, 1, 1, 0, 0, 0, 0], np.int32)
    out = mask_batch(
        np.tile(ids, (200, 1)),
        np.tile(mask, (200, 1)),
        np.arange(200),
        [0, 1],
        mask_rate=0.5,
        max_predictions_per_seq=3,
        **OWN_VOCAB,
    )
    w = out["masked_lm_weights"].numpy()
    pos = out["masked_lm_positions"].numpy()
    # round(0.5 * 4) = 2 predictions among the 2 candidates {1, 2}.
    np.testing.assert_array_equal(w.sum(axis=1), 2)
    assert set(pos[w > 0].tolist()) == {1, 2}


def test_statistics_over_many_seeds():
    sp = BERT_VOCAB
    rng = np.random.default_rng(1)
    body = rng.integers(1000, 2000, size=20)
    tokens = np.r_[101, body[:8], 102, body[8:], 102]  # 23 tokens, 20 candidates
    ids, mask = _row(tokens, 32, 0)
    cand = np.flatnonzero((mask == 1) & ~np.isin(ids, list(sp.values())))
    n_rows, n, rate = 4000, 5, 0.15
    count = int(np.round(rate * len(tokens)))  # 3
    out = mask_batch(
        np.tile(ids, (n_rows, 1)),
        np.tile(mask, (n_rows, 1)),
        np.arange(n_rows),
        [11, 12],
        mask_rate=rate,
        max_predictions_per_seq=n,
        **sp,
    )
    pos = out["masked_lm_positions"].numpy()[:, :count]
    masked = out["masked_input_ids"].numpy()
    np.testing.assert_array_equal(out["masked_lm_weights"].numpy().sum(axis=1), count)

    became_mask = masked[np.arange(n_rows)[:, None], pos] == sp["mask_id"]
    kept = masked[np.arange(n_rows)[:, None], pos] == ids[pos]
    assert np.all(became_mask ^ kept)
    # 12000 draws: sd of the fraction is 0.0033.
    assert abs(became_mask.mean() - 0.85) < 0.015
    assert abs(kept.mean() - 0.15) < 0.015

    freq = np.bincount(pos.ravel(), minlength=32)
    assert freq[np.setdiff1d(np.arange(32), cand)].sum() == 0
    expected = n_rows * count / len(cand)
    chi2 = ((freq[cand] - expected) ** 2 / expected).sum()
    assert chi2 < 45.3  # chi-square, 19 degrees of freedom, p = 0.0006

    u = out["sampling_uniforms"].numpy().ravel()
    assert u.min() >= 0.0 and u.max() < 1.0
    hist = np.histogram(u, bins=10, range=(0.0, 1.0))[0]
    assert np.all(np.abs(hist - len(u) / 10) < 5 * np.sqrt(len(u) / 10))


def test_mask_example_statistics():
    ids, mask = _row(np.r_[2, np.arange(10, 30), 3], 24, 0)
    fn = tf.function(
        lambda seeds: tf.map_fn(
            lambda s: mask_example(
                ids, mask, s, mask_rate=0.15, max_predictions_per_seq=4, **OWN_VOCAB
            ),
            seeds,
            fn_output_signature={
                "masked_input_ids": tf.int32,
                "masked_lm_positions": tf.int32,
                "masked_lm_ids": tf.int32,
                "masked_lm_weights": tf.float32,
                "sampling_uniforms": tf.float32,
            },
        )
    )
    seeds = np.stack([np.arange(3000), np.full(3000, 9)], axis=1)
    out = fn(tf.constant(seeds, tf.int64))
    pos = out["masked_lm_positions"].numpy()[:, :3]  # round(0.15 * 22) = 3
    np.testing.assert_array_equal(out["masked_lm_weights"].numpy().sum(axis=1), 3)
    is_mask = out["masked_input_ids"].numpy()[np.arange(3000)[:, None], pos] == 4
    assert abs(is_mask.mean() - 0.85) < 0.02
    freq = np.bincount(pos.ravel(), minlength=24)[1:21]
    assert np.all(np.abs(freq - 450) < 5 * np.sqrt(450))  # 9000 draws over 20 candidates


def test_determinism_and_seed_sensitivity():
    ids, mask = _row(np.r_[2, np.arange(10, 60), 3], 64, 0)
    kw = dict(mask_rate=0.15, max_predictions_per_seq=10, **OWN_VOCAB)
    a = mask_example(ids, mask, [7, 8], **kw)
    b = mask_example(ids, mask, tf.constant([7, 8], tf.int32), **kw)
    for k in a:
        np.testing.assert_array_equal(a[k].numpy(), b[k].numpy())
    c = mask_example(ids, mask, [7, 9], **kw)
    assert not np.array_equal(a["masked_lm_positions"].numpy(), c["masked_lm_positions"].numpy())


def test_batch_rows_depend_only_on_seed_and_index():
    # Realistic sizes: one batch of 128 rows of 128 tokens must equal the rows
    # masked one at a time, and a shuffled (non-consecutive) index order.
    rng = np.random.default_rng(2)
    rows = _random_rows(rng, BERT_VOCAB, 128, rng.integers(2, 129, size=128))
    ids = np.stack([r[0] for r in rows])
    mask = np.stack([r[1] for r in rows])
    index = np.arange(1000, 1128)
    kw = dict(mask_rate=0.15, max_predictions_per_seq=19, **BERT_VOCAB)
    full = {k: v.numpy() for k, v in mask_batch(ids, mask, index, [3, 4], **kw).items()}
    assert full["sampling_uniforms"].shape == (128, 19)
    for r in [0, 1, 63, 127]:
        one = mask_batch(ids[r : r + 1], mask[r : r + 1], index[r : r + 1], [3, 4], **kw)
        for k in full:
            np.testing.assert_array_equal(one[k].numpy()[0], full[k][r], err_msg=k)
    perm = rng.permutation(128)
    shuffled = mask_batch(ids[perm], mask[perm], index[perm], [3, 4], **kw)
    for k in full:
        np.testing.assert_array_equal(shuffled[k].numpy(), full[k][perm], err_msg=k)
    # Halves of the batch (as per-replica splits) agree with the whole.
    half = mask_batch(ids[64:], mask[64:], index[64:], [3, 4], **kw)
    for k in full:
        np.testing.assert_array_equal(half[k].numpy(), full[k][64:], err_msg=k)
    other = mask_batch(ids, mask, index + 1, [3, 4], **kw)
    assert not np.array_equal(other["masked_lm_positions"].numpy(), full["masked_lm_positions"])
    other_seed = mask_batch(ids, mask, index, [3, 5], **kw)
    assert not np.array_equal(other_seed["sampling_uniforms"].numpy(), full["sampling_uniforms"])


def test_empty_batch():
    out = mask_batch(
        np.zeros((0, 8), np.int32),
        np.zeros((0, 8), np.int32),
        np.zeros(0, np.int64),
        [1, 2],
        mask_rate=0.15,
        max_predictions_per_seq=2,
        **OWN_VOCAB,
    )
    assert out["masked_lm_positions"].shape == (0, 2)
    assert out["masked_input_ids"].shape == (0, 8)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(mask_rate=0.15, max_predictions_per_seq=9), "max_predictions_per_seq=9"),
        (dict(mask_rate=0.0, max_predictions_per_seq=2), "mask_rate=0.0"),
        (dict(mask_rate=1.5, max_predictions_per_seq=2), "mask_rate=1.5"),
        (dict(mask_rate=0.15, max_predictions_per_seq=0), "max_predictions_per_seq=0"),
    ],
)
def test_bad_arguments(kwargs, match):
    ids, mask = _row([2, 10, 3], 8, 0)
    with pytest.raises(ValueError, match=match):
        mask_example(ids, mask, [0, 0], **kwargs, **OWN_VOCAB)
