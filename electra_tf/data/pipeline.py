"""Pre-training input pipeline: TFRecord shards -> dynamically masked batches.

The training stream is an infinite, fully reproducible sequence of passes over
the shards. Every example in it has a global index ``g`` (0, 1, 2, ... across
passes) and its mask is a pure function of ``(seed, g)``. Consequences:

* Masks differ every time an example is seen again (dynamic masking).
* Resuming with ``start_example = steps_done * global_batch_size`` continues
  exactly the stream an uninterrupted run would have seen, masks included.
* An example's mask does not depend on which batch or replica it lands in, so
  splitting a global batch across replicas yields the same examples and masks
  as a single device (and resuming with another batch size keeps the masks).

Randomness comes only from stateless ops keyed by ``seed``; nothing depends on
the global TF seed. That is why records are shuffled within consecutive
windows with ``tf.random.experimental.stateless_shuffle`` rather than with
``Dataset.shuffle``, whose order also depends on ``tf.random.set_seed``.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
import tensorflow as tf

from electra_tf import fileio
from electra_tf.data.masking import mask_batch
from electra_tf.data.shard_layout import FEATURE_NAMES, METADATA_FILE

MASKING_OUTPUT_NAMES = (
    "masked_input_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "masked_lm_weights",
    "sampling_uniforms",
)
SPECIAL_ID_KEYS = ("pad_id", "cls_id", "sep_id", "mask_id")

# Purposes folded into the user seed so that the shard order, the record order
# and the masks draw from unrelated streams.
_SHARD_ORDER_STREAM = 1
_RECORD_ORDER_STREAM = 2
_MASK_STREAM = 3

_INT64_MAX = 2**63 - 1


class PipelineError(ValueError):
    """Raised for a missing or inconsistent shard directory or a bad argument."""


def load_shard_metadata(shard_dir):
    """Reads and checks ``<shard_dir>/metadata.json``.

    Args:
      shard_dir: directory written by the shard writer.

    Returns:
      A dict with ``max_seq_length`` (int), ``num_examples`` (int, the sum over
      shards), ``paths`` (absolute shard paths, metadata order) and
      ``counts`` (examples per shard).

    Raises:
      PipelineError: if the directory, metadata or a listed shard is missing,
        or the metadata is malformed or inconsistent.
    """
    if not fileio.isdir(shard_dir):
        raise PipelineError(f"Shard directory {shard_dir!r} does not exist.")
    meta_path = os.path.join(shard_dir, METADATA_FILE)
    if not fileio.isfile(meta_path):
        raise PipelineError(
            f"{meta_path!r} not found: {shard_dir!r} is not a directory of pre-training shards."
        )
    try:
        with fileio.open_file(meta_path, "r") as f:
            meta = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise PipelineError(f"Cannot read {meta_path!r}: {e}") from e
    if not isinstance(meta, dict):
        raise PipelineError(f"{meta_path!r}: expected a JSON object.")
    seq_len = meta.get("max_seq_length")
    if not isinstance(seq_len, int) or isinstance(seq_len, bool) or seq_len < 2:
        raise PipelineError(f"{meta_path!r}: bad or missing max_seq_length={seq_len!r}.")
    shards = meta.get("shards")
    if not isinstance(shards, list) or not shards:
        raise PipelineError(f"{meta_path!r} lists no shards.")
    paths, counts = [], []
    for i, shard in enumerate(shards):
        if (
            not isinstance(shard, dict)
            or not isinstance(shard.get("path"), str)
            or not isinstance(shard.get("num_examples"), int)
            or shard["num_examples"] < 0
        ):
            raise PipelineError(
                f"{meta_path!r}: shard entry {i} must be {{'path': str, 'num_examples': int >= 0}}, "
                f"got {shard!r}."
            )
        path = os.path.join(shard_dir, shard["path"])
        if not fileio.isfile(path):
            raise PipelineError(f"Shard {path!r} listed in {meta_path!r} does not exist.")
        paths.append(fileio.abspath(path))
        counts.append(shard["num_examples"])
    total = sum(counts)
    if "num_examples" in meta and meta["num_examples"] != total:
        raise PipelineError(
            f"{meta_path!r}: num_examples={meta['num_examples']!r} but the shards list "
            f"{total} examples in total; the directory is inconsistent, rewrite the shards."
        )
    if total == 0:
        raise PipelineError(f"{meta_path!r}: the shards hold no examples.")
    return {"max_seq_length": seq_len, "num_examples": total, "paths": paths, "counts": counts}


def _check_first_record(path, seq_len):
    """Fails early, with the file named, if records do not match the metadata."""
    record = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
    if record is None:
        return
    try:
        example = tf.train.Example.FromString(record.numpy())
    except Exception as e:  # protobuf raises its own DecodeError type
        raise PipelineError(f"{path!r} is not a TFRecord file of tf.train.Example: {e}") from e
    for name in FEATURE_NAMES:
        if name not in example.features.feature:
            raise PipelineError(f"{path!r}: records lack the int64 feature {name!r}.")
        n = len(example.features.feature[name].int64_list.value)
        if n != seq_len:
            raise PipelineError(
                f"{path!r}: feature {name!r} has length {n}, but metadata.json says "
                f"max_seq_length={seq_len}."
            )


def _check_int(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise PipelineError(f"{name}={value!r}: must be an integer >= {minimum}.")


def _stream_seed(seed, stream, index):
    """Stateless int64 ``[2]`` seed for ``index`` within one purpose stream."""
    return tf.random.experimental.stateless_fold_in(
        tf.constant([seed, stream], tf.int64), tf.cast(index, tf.int64)
    )


def make_pretraining_dataset(
    shard_dir,
    *,
    batch_size,
    max_predictions_per_seq,
    mask_rate,
    special_ids,
    seed,
    start_example=0,
    shuffle_buffer_size=1000,
    is_training=True,
    max_seq_length=None,
):
    """Builds the batched, dynamically masked pre-training dataset.

    Training (``is_training=True``) streams pass after pass forever. Pass ``p``
    reads the shards in an order shuffled with a seed derived from
    ``(seed, p)``, interleaves up to 4 of them record by record, and shuffles
    the records within consecutive windows of ``shuffle_buffer_size`` using
    seeds derived from ``(seed, p, window)``. Resuming skips raw, unparsed
    records, so it costs only reading. Evaluation (``is_training=False``) is
    one pass in file order, unshuffled, keeping the last partial batch.

    Args:
      shard_dir: directory with ``metadata.json`` and the TFRecord shards.
      batch_size: examples per batch (the global batch under a distribution
        strategy).
      max_predictions_per_seq: ``N``, masked positions per example.
      mask_rate: fraction of real tokens to predict.
      special_ids: dict with ``pad_id``, ``cls_id``, ``sep_id`` and ``mask_id``.
      seed: non-negative int; determines shard order, record order and masks.
      start_example: number of examples of the stream already consumed
        (``steps_done * global_batch_size`` when resuming).
      shuffle_buffer_size: window of records shuffled together; 0 or 1 keeps
        the interleaved order.
      is_training: infinite shuffled stream if True, else a single ordered pass.
      max_seq_length: if given, must equal the shards' ``max_seq_length``.

    Returns:
      A ``tf.data.Dataset`` of dicts (B = batch_size, L = max_seq_length,
      N = max_predictions_per_seq):
        input_ids, input_mask, segment_ids, masked_input_ids: int32 ``[B, L]``;
        masked_lm_positions, masked_lm_ids: int32 ``[B, N]``;
        masked_lm_weights, sampling_uniforms: float32 ``[B, N]``.
      B is static for training (drop_remainder) and ``None`` for evaluation.

    Raises:
      PipelineError: for a missing/inconsistent shard directory or bad argument.
    """
    meta = load_shard_metadata(shard_dir)
    seq_len = meta["max_seq_length"]
    if max_seq_length is not None and max_seq_length != seq_len:
        raise PipelineError(
            f"--max_seq_length={max_seq_length} but the shards in {shard_dir!r} were written with "
            f"max_seq_length={seq_len}; rewrite the shards or change the flag."
        )
    _check_int("batch_size", batch_size, 1)
    _check_int("max_predictions_per_seq", max_predictions_per_seq, 1)
    if max_predictions_per_seq > seq_len:
        raise PipelineError(
            f"max_predictions_per_seq={max_predictions_per_seq} exceeds the shards' "
            f"max_seq_length={seq_len} ({shard_dir!r})."
        )
    if (
        isinstance(mask_rate, bool)
        or not isinstance(mask_rate, (int, float))
        or not 0.0 < mask_rate <= 1.0
    ):
        raise PipelineError(f"mask_rate={mask_rate!r}: must be in (0, 1].")
    _check_int("seed", seed, 0)
    if seed > _INT64_MAX:
        raise PipelineError(f"seed={seed}: must fit in a signed 64-bit integer.")
    _check_int("start_example", start_example, 0)
    _check_int("shuffle_buffer_size", shuffle_buffer_size, 0)
    if not isinstance(special_ids, dict) or any(k not in special_ids for k in SPECIAL_ID_KEYS):
        raise PipelineError(
            f"special_ids={special_ids!r}: must be a dict with keys {', '.join(SPECIAL_ID_KEYS)}."
        )
    specials = {k: int(special_ids[k]) for k in SPECIAL_ID_KEYS}
    _check_first_record(meta["paths"][0], seq_len)

    num_examples = meta["num_examples"]
    paths = tf.constant(meta["paths"])
    cycle_length = min(4, len(meta["paths"]))
    window = max(1, shuffle_buffer_size)

    if is_training:
        first_pass, skip_in_first = divmod(start_example, num_examples)

        def one_pass(p):
            files = tf.random.experimental.stateless_shuffle(
                paths, seed=_stream_seed(seed, _SHARD_ORDER_STREAM, p)
            )
            records = tf.data.Dataset.from_tensor_slices(files).interleave(
                tf.data.TFRecordDataset,
                cycle_length=cycle_length,
                block_length=1,
                num_parallel_calls=tf.data.AUTOTUNE,
                deterministic=True,
            )
            skip = tf.where(
                tf.equal(p, first_pass),
                tf.constant(skip_in_first, tf.int64),
                tf.constant(0, tf.int64),
            )
            if window > 1:
                record_seed = _stream_seed(seed, _RECORD_ORDER_STREAM, p)
                # Windows are full except the last one, so whole windows can be
                # skipped before shuffling and only the rest record by record.
                windows = records.batch(window).enumerate().skip(skip // window)
                records = windows.map(
                    lambda w, recs: tf.random.experimental.stateless_shuffle(
                        recs, seed=tf.random.experimental.stateless_fold_in(record_seed, w)
                    )
                ).unbatch()
                skip = skip % window
            return records.skip(skip)

        records = tf.data.Dataset.counter(first_pass).flat_map(one_pass)
    else:
        records = tf.data.TFRecordDataset(paths).skip(start_example)

    features = {name: tf.io.FixedLenFeature([seq_len], tf.int64) for name in FEATURE_NAMES}
    mask_seed = tf.constant([seed, _MASK_STREAM], tf.int64)

    def parse_and_mask(index, serialized):
        parsed = tf.io.parse_example(serialized, features)
        out = {name: tf.cast(parsed[name], tf.int32) for name in FEATURE_NAMES}
        out.update(
            mask_batch(
                out["input_ids"],
                out["input_mask"],
                index,
                mask_seed,
                mask_rate=mask_rate,
                max_predictions_per_seq=max_predictions_per_seq,
                **specials,
            )
        )
        return out

    # Raw records are batched together with their global indices and then
    # parsed and masked batch-wise, which is several times faster than a
    # per-example map. Each row's mask still depends only on (seed, index),
    # so per-replica splits of a batch see exactly the same examples and masks.
    ds = records.enumerate(start=start_example)
    ds = ds.batch(batch_size, drop_remainder=is_training)
    ds = ds.map(parse_and_mask, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if is_training:
        ds = ds.apply(tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY))
    ds = ds.prefetch(tf.data.AUTOTUNE)

    options = tf.data.Options()
    options.deterministic = True  # the order is part of the resumable contract
    options.autotune.enabled = True
    # The stream is not file-shardable (files are re-ordered per pass); under
    # multi-worker strategies shard by element instead of failing over to it.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return ds.with_options(options)


def pipeline_throughput(dataset, num_batches, warmup_batches=10):
    """Measures how fast ``dataset`` yields batches after a warm-up.

    Args:
      dataset: a ``tf.data.Dataset`` (e.g. from ``make_pretraining_dataset``).
      num_batches: batches timed after the warm-up.
      warmup_batches: batches drawn first and not timed (pipeline start-up,
        autotuning, buffer filling).

    Returns:
      Batches per second over the timed window (``num_batches / wall time``).

    Raises:
      PipelineError: if ``num_batches < 1`` or the dataset runs out.
    """
    _check_int("num_batches", num_batches, 1)
    _check_int("warmup_batches", warmup_batches, 0)
    it = iter(dataset)
    try:
        for _ in range(warmup_batches):
            next(it)
        start = time.perf_counter()
        for _ in range(num_batches):
            next(it)
        elapsed = time.perf_counter() - start
    except StopIteration as e:
        raise PipelineError(
            f"The dataset ended before {warmup_batches} + {num_batches} batches."
        ) from e
    return num_batches / elapsed


def dummy_batch(config) -> dict:
    """A one-example batch of the pipeline's structure, to build the models.

    Args:
        config: a `PretrainingConfig` (sequence length and masked slots).

    Returns:
        NumPy arrays keyed like the batches of `make_pretraining_dataset`.
    """
    length, slots = config.max_seq_length, config.resolved_max_predictions_per_seq
    ints = lambda n: np.zeros((1, n), np.int32)  # noqa: E731
    return {
        "input_ids": ints(length),
        "input_mask": np.ones((1, length), np.int32),
        "segment_ids": ints(length),
        "masked_input_ids": ints(length),
        "masked_lm_positions": ints(slots),
        "masked_lm_ids": ints(slots),
        "masked_lm_weights": np.zeros((1, slots), np.float32),
        "sampling_uniforms": np.zeros((1, slots), np.float32),
    }
