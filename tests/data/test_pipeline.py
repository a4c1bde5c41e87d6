"""Tests for electra_tf.data.pipeline on tiny shards written here."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.data.pipeline import make_pretraining_dataset, pipeline_throughput

L = 16
N = 4
SPECIALS = {"pad_id": 0, "cls_id": 2, "sep_id": 3, "mask_id": 4}
SHARD_SIZES = (13, 12, 12)
NUM_EXAMPLES = sum(SHARD_SIZES)
KEYS = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "masked_input_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "masked_lm_weights",
    "sampling_uniforms",
)


def _int64_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))


def _make_examples(rng, count, first_id):
    """[CLS] A [SEP] B [SEP] examples; token 1000 + k makes example k identifiable."""
    examples = []
    for k in range(count):
        n = int(rng.integers(6, L + 1))
        ids = np.zeros(L, np.int64)
        ids[:n] = rng.integers(10, 500, size=n)
        ids[1] = first_id + k
        a_end = int(rng.integers(3, n - 1))
        ids[0], ids[a_end], ids[n - 1] = 2, 3, 3
        mask = (np.arange(L) < n).astype(np.int64)
        seg = ((np.arange(L) > a_end) & (np.arange(L) < n)).astype(np.int64)
        examples.append((ids, mask, seg))
    return examples


def _write_shards(out_dir, sizes, seq_len=L, feature_len=None, seed=0):
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(seed)
    all_examples, shards = [], []
    for i, size in enumerate(sizes):
        name = f"pretrain_data.tfrecord-{i:05d}-of-{len(sizes):05d}"
        examples = _make_examples(rng, size, 1000 + len(all_examples))
        with tf.io.TFRecordWriter(os.path.join(out_dir, name)) as w:
            for ids, mask, seg in examples:
                cut = feature_len or seq_len
                feats = {
                    "input_ids": _int64_feature(ids[:cut]),
                    "input_mask": _int64_feature(mask[:cut]),
                    "segment_ids": _int64_feature(seg[:cut]),
                }
                w.write(
                    tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString()
                )
        all_examples.extend(examples)
        shards.append({"path": name, "num_examples": size})
    meta = {
        "format_version": 1,
        "max_seq_length": seq_len,
        "num_examples": sum(sizes),
        "shards": shards,
    }
    with open(os.path.join(out_dir, "metadata.json"), "w") as f:
        json.dump(meta, f)
    return all_examples


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("shards"))
    examples = _write_shards(d, SHARD_SIZES)
    return d, {int(ex[0][1]): ex for ex in examples}


def _dataset(shard_dir, **kw):
    args = dict(
        batch_size=5,
        max_predictions_per_seq=N,
        mask_rate=0.15,
        special_ids=SPECIALS,
        seed=3,
        shuffle_buffer_size=8,
    )
    args.update(kw)
    return make_pretraining_dataset(shard_dir, **args)


def _stream(ds, num_examples):
    """First num_examples rows of the dataset as a dict of NumPy arrays."""
    parts = {k: [] for k in KEYS}
    got = 0
    for batch in ds:
        for k in KEYS:
            parts[k].append(batch[k].numpy())
        got += batch["input_ids"].shape[0]
        if got >= num_examples:
            break
    return {k: np.concatenate(v)[:num_examples] for k, v in parts.items()}


def _check_rows(stream, originals, rate=0.15):
    """Each row holds an original example and a mask that follows the rules."""
    for r in range(len(stream["input_ids"])):
        ids = stream["input_ids"][r]
        orig_ids, orig_mask, orig_seg = originals[int(ids[1])]
        np.testing.assert_array_equal(ids, orig_ids)
        np.testing.assert_array_equal(stream["input_mask"][r], orig_mask)
        np.testing.assert_array_equal(stream["segment_ids"][r], orig_seg)
        cand = set(np.flatnonzero((orig_mask == 1) & (orig_ids > 4)).tolist())
        count = min(len(cand), max(1, min(N, int(np.round(rate * orig_mask.sum())))))
        w = stream["masked_lm_weights"][r]
        np.testing.assert_array_equal(w, (np.arange(N) < count).astype(np.float32))
        pos = stream["masked_lm_positions"][r]
        assert len(set(pos[:count].tolist())) == count and set(pos[:count].tolist()) <= cand
        np.testing.assert_array_equal(pos[count:], 0)
        np.testing.assert_array_equal(stream["masked_lm_ids"][r][:count], ids[pos[:count]])
        changed = np.flatnonzero(stream["masked_input_ids"][r] != ids)
        assert set(changed.tolist()) <= set(pos[:count].tolist())
        assert np.all(stream["masked_input_ids"][r][changed] == SPECIALS["mask_id"])


def _assert_streams_equal(a, b):
    for k in KEYS:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_element_spec_is_the_contract(shards):
    d, _ = shards
    spec = _dataset(d).element_spec
    assert set(spec) == set(KEYS)
    for k in ("input_ids", "input_mask", "segment_ids", "masked_input_ids"):
        assert spec[k].dtype == tf.int32 and spec[k].shape.as_list() == [5, L], k
    for k in ("masked_lm_positions", "masked_lm_ids"):
        assert spec[k].dtype == tf.int32 and spec[k].shape.as_list() == [5, N], k
    for k in ("masked_lm_weights", "sampling_uniforms"):
        assert spec[k].dtype == tf.float32 and spec[k].shape.as_list() == [5, N], k
    eval_spec = _dataset(d, is_training=False).element_spec
    assert set(eval_spec) == set(KEYS)
    assert eval_spec["input_ids"].shape.as_list() == [None, L]
    assert eval_spec["masked_lm_weights"].shape.as_list() == [None, N]


def test_every_example_once_per_pass_and_masks_follow_rules(shards):
    d, originals = shards
    stream = _stream(_dataset(d), 3 * NUM_EXAMPLES)
    _check_rows(stream, originals)
    passes = stream["input_ids"][:, 1].reshape(3, NUM_EXAMPLES)
    for p in range(3):
        assert sorted(passes[p].tolist()) == sorted(originals), f"pass {p}"
    # Passes are shuffled differently.
    assert not np.array_equal(passes[0], passes[1])
    assert not np.array_equal(passes[1], passes[2])


def test_dynamic_masking_across_passes(shards):
    d, originals = shards
    stream = _stream(_dataset(d), 2 * NUM_EXAMPLES)
    ident = stream["input_ids"][:, 1]
    differs = 0
    for key in originals:
        r0, r1 = np.flatnonzero(ident == key)
        assert not np.array_equal(stream["sampling_uniforms"][r0], stream["sampling_uniforms"][r1])
        differs += not np.array_equal(
            stream["masked_input_ids"][r0], stream["masked_input_ids"][r1]
        )
    assert differs > NUM_EXAMPLES // 2


def test_first_pass_order_without_shuffling_single_shard(tmp_path):
    examples = _write_shards(str(tmp_path), (9,))
    stream = _stream(_dataset(str(tmp_path), batch_size=3, shuffle_buffer_size=0), 18)
    expected = np.stack([ex[0] for ex in examples]).astype(np.int32)
    np.testing.assert_array_equal(stream["input_ids"][:9], expected)
    np.testing.assert_array_equal(stream["input_ids"][9:], expected)  # one shard, no shuffle


@pytest.mark.parametrize("start", [7, 35, NUM_EXAMPLES + 11, 2 * NUM_EXAMPLES + 3])
def test_resume_continues_the_exact_stream(shards, start):
    d, _ = shards
    total = 2 * NUM_EXAMPLES + 20
    reference = _stream(_dataset(d, batch_size=4), total)
    resumed = _stream(_dataset(d, batch_size=4, start_example=start), total - start)
    _assert_streams_equal(resumed, {k: v[start:] for k, v in reference.items()})


def test_stream_does_not_depend_on_batch_size(shards):
    # A global batch of 8 split in two per-replica halves sees the same
    # examples and masks as two batches of 4.
    d, _ = shards
    _assert_streams_equal(
        _stream(_dataset(d, batch_size=8), 48), _stream(_dataset(d, batch_size=4), 48)
    )


def test_deterministic_and_seed_dependent(shards):
    d, _ = shards
    a = _stream(_dataset(d, seed=11), NUM_EXAMPLES + 10)
    b = _stream(_dataset(d, seed=11), NUM_EXAMPLES + 10)
    _assert_streams_equal(a, b)
    c = _stream(_dataset(d, seed=12), NUM_EXAMPLES + 10)
    assert not np.array_equal(a["input_ids"][:, 1], c["input_ids"][:, 1])


def test_independent_of_global_tf_seed(shards):
    d, _ = shards
    try:
        tf.random.set_seed(1)
        a = _stream(_dataset(d), 30)
        tf.random.set_seed(2)
        b = _stream(_dataset(d), 30)
    finally:
        tf.random.set_seed(None)
    c = _stream(_dataset(d), 30)
    _assert_streams_equal(a, b)
    _assert_streams_equal(a, c)


def test_evaluation_is_one_ordered_pass(shards):
    d, originals = shards
    ds = _dataset(d, is_training=False, batch_size=5)
    batches = list(ds)
    assert [b["input_ids"].shape[0] for b in batches] == [5] * 7 + [2]
    stream = {k: np.concatenate([b[k].numpy() for b in batches]) for k in KEYS}
    assert stream["input_ids"][:, 1].tolist() == list(range(1000, 1000 + NUM_EXAMPLES))
    _check_rows(stream, originals)
    _assert_streams_equal(
        stream, _stream(_dataset(d, is_training=False, batch_size=5), NUM_EXAMPLES)
    )
    tail = _stream(_dataset(d, is_training=False, batch_size=5, start_example=30), 7)
    _assert_streams_equal(tail, {k: v[30:] for k, v in stream.items()})


def test_pipeline_throughput_counts_batches(shards):
    d, _ = shards
    assert pipeline_throughput(_dataset(d), num_batches=5, warmup_batches=1) > 0
    with pytest.raises(ValueError, match="ended"):
        pipeline_throughput(_dataset(d, is_training=False), num_batches=50, warmup_batches=0)


def _rewrite_metadata(d, **changes):
    path = os.path.join(d, "metadata.json")
    with open(path) as f:
        meta = json.load(f)
    meta.update(changes)
    with open(path, "w") as f:
        json.dump(meta, f)


def test_error_missing_directory(tmp_path):
    missing = str(tmp_path / "nope")
    with pytest.raises(ValueError, match="nope"):
        _dataset(missing)


def test_error_missing_metadata(tmp_path):
    with pytest.raises(ValueError, match="metadata.json"):
        _dataset(str(tmp_path))


def test_error_no_shards(tmp_path):
    _write_shards(str(tmp_path), (3,))
    _rewrite_metadata(str(tmp_path), shards=[], num_examples=0)
    with pytest.raises(ValueError, match="no shards"):
        _dataset(str(tmp_path))


def test_error_listed_shard_missing(tmp_path):
    _write_shards(str(tmp_path), (3, 2))
    os.remove(tmp_path / "pretrain_data.tfrecord-00001-of-00002")
    with pytest.raises(ValueError, match="pretrain_data.tfrecord-00001-of-00002"):
        _dataset(str(tmp_path))


def test_error_inconsistent_counts(tmp_path):
    _write_shards(str(tmp_path), (3, 2))
    _rewrite_metadata(str(tmp_path), num_examples=7)
    with pytest.raises(ValueError, match="num_examples=7"):
        _dataset(str(tmp_path))


def test_error_max_seq_length_mismatch(shards, tmp_path):
    d, _ = shards
    with pytest.raises(ValueError, match="max_seq_length=32"):
        _dataset(d, max_seq_length=32)
    assert _dataset(d, max_seq_length=L) is not None
    # Records shorter than metadata says.
    _write_shards(str(tmp_path), (3,), feature_len=8)
    with pytest.raises(ValueError, match="length 8"):
        _dataset(str(tmp_path))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(batch_size=0), "batch_size=0"),
        (dict(batch_size=-2), "batch_size=-2"),
        (dict(max_predictions_per_seq=L + 1), f"max_predictions_per_seq={L + 1}"),
        (dict(mask_rate=0.0), "mask_rate=0.0"),
        (dict(start_example=-1), "start_example=-1"),
        (dict(seed=-5), "seed=-5"),
        (dict(special_ids={"pad_id": 0}), "special_ids"),
    ],
)
def test_error_bad_arguments(shards, kwargs, match):
    d, _ = shards
    with pytest.raises(ValueError, match=match):
        _dataset(d, **kwargs)
