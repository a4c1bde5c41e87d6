"""Building one shard: a piece of text -> packed, shuffled records in a TFRecord file + sidecar.

`build_shard` reads the piece's lines (`electra_tf.data.text_input`),
tokenizes them in batches, packs them into examples
(`electra_tf.data.example_packing`), encodes them
(`electra_tf.data.example_encoding`) and writes the shard and its sidecar
atomically (`electra_tf.data.shard_layout`). Its random generators are
seeded from (seed, shard index) alone, so any process or machine writes the
same bytes for the same job.

Within a shard, examples are written in a deterministic shuffled order
(windows of up to `SHUFFLE_WINDOW` examples). The original interleaves every
job's output round-robin over all files; without shuffling, consecutive
records of a shard would be consecutive text of one article, which a small
reader shuffle buffer cannot decorrelate.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from typing import Callable, Iterator, Optional

import numpy as np
import tensorflow as tf

from electra_tf import fileio
from electra_tf.data.example_encoding import serialize_examples
from electra_tf.data.example_packing import ExampleBuilder, example_arrays
from electra_tf.data.shard_layout import SIDECAR_SUFFIX, file_crc32, tmp_path
from electra_tf.data.text_input import iter_piece_lines

# Non-blank lines per tokenizer call: large enough to amortize op dispatch,
# small enough to keep memory flat.
TOKENIZE_BATCH_LINES = 512
# Examples encoded per NumPy batch.
ENCODE_BATCH = 1024
# Examples shuffled together before writing (bounds memory for huge shards).
SHUFFLE_WINDOW = 1 << 16


def _shard_rng(seed: int, index: int, purpose: str) -> random.Random:
    # Hash-derived so that nearby (seed, index) pairs give unrelated streams.
    digest = hashlib.sha256(f"{purpose}:{seed}:{index}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "little"))


def _tokenized_batches(
    lines: Iterator[str], tokenize: Callable, batch_lines: int
) -> Iterator[Optional[np.ndarray]]:
    """Yields one id array per non-blank line and None per blank line, in order."""
    pending: list[str] = []  # "" marks a document end.
    texts: list[str] = []

    def flush():
        if texts:
            ragged = tokenize(texts)
            flat = ragged.flat_values.numpy()
            splits = ragged.row_splits.numpy()
        k = 0
        for line in pending:
            if line:
                yield flat[splits[k] : splits[k + 1]]
                k += 1
            else:
                yield None
        pending.clear()
        texts.clear()

    for line in lines:
        pending.append(line)
        if line:
            texts.append(line)
            if len(texts) >= batch_lines:
                yield from flush()
    yield from flush()


def graph_tokenize(tokenizer) -> Callable[[list[str]], tf.RaggedTensor]:
    """`tokenizer.tokenize` traced once for string batches [n].

    About 15% faster than eager calls; tracing takes ~0.5 s, so each process
    makes one and reuses it for all its shards.
    """
    # No autograph: the tokenizer has no data-dependent Python control flow,
    # and converting its code costs seconds.
    traced = tf.function(
        tokenizer.tokenize, autograph=False, input_signature=[tf.TensorSpec([None], tf.string)]
    )

    def tokenize(texts: list[str]):
        return traced(tf.constant(texts, dtype=tf.string))

    return tokenize


def build_shard(job: dict, tokenizer, tokenize: Callable) -> dict:
    """Builds one shard file and its sidecar; returns the sidecar contents.

    The shard depends on the job alone, so any process or machine that reads
    the inputs writes the same bytes.

    Args:
        job: one of `ShardPlan.jobs`: the shard's piece of text and the build
            parameters.
        tokenizer: provides `cls_id` and `sep_id`.
        tokenize: list of n strings -> int RaggedTensor [n, (wordpieces)].
    """
    start_time = time.monotonic()
    out_dir, name = job["output_dir"], job["name"]
    length = job["max_seq_length"]
    builder = ExampleBuilder(
        length,
        _shard_rng(job["seed"], job["index"], "examples"),
        job["single_segment_prob"],
        job["short_seq_prob"],
    )
    shuffle_rng = _shard_rng(job["seed"], job["index"], "order")
    stats = {"replaced_lines": 0, "first_replaced": None}

    tmp_shard = tmp_path(out_dir, name)
    tmp_sidecar = tmp_path(out_dir, name + SIDECAR_SUFFIX)
    num_examples = 0
    pending: list[tuple] = []
    window: list[bytes] = []

    def encode_pending():
        window.extend(
            serialize_examples(*example_arrays(pending, length, tokenizer.cls_id, tokenizer.sep_id))
        )
        pending.clear()

    def flush_window(writer):
        shuffle_rng.shuffle(window)
        for record in window:
            writer.write(record)
        window.clear()

    try:
        with tf.io.TFRecordWriter(tmp_shard) as writer:
            lines = iter_piece_lines(
                job["segments"], job["invalid_utf8"], stats, job["max_line_chars"]
            )
            for ids in _tokenized_batches(lines, tokenize, TOKENIZE_BATCH_LINES):
                example = builder.end_document() if ids is None else builder.add_sentence(ids)
                if example is None:
                    continue
                pending.append(example)
                num_examples += 1
                if len(pending) >= ENCODE_BATCH:
                    encode_pending()
                    if len(window) >= SHUFFLE_WINDOW:
                        flush_window(writer)
            # Every piece ends with a file end, so nothing is pending here.
            encode_pending()
            flush_window(writer)
        written = fileio.stat(tmp_shard)  # a rename keeps the modification time
        sidecar = {
            "shard": name,
            "index": job["index"],
            "num_examples": num_examples,
            "bytes": written.size,
            "crc32": file_crc32(tmp_shard),
            "mtime_ns": written.mtime_ns,
            "fingerprint": job["fingerprint"],
            "text_bytes": sum(e - s for _, s, e in job["segments"]),
            "replaced_lines": stats["replaced_lines"],
            "first_replaced": stats["first_replaced"],
            "seconds": round(time.monotonic() - start_time, 3),
            "build": job["build"],
        }
        with fileio.open_file(tmp_sidecar, "w") as f:
            json.dump(sidecar, f, indent=1, sort_keys=True)
        # Sidecar first: a shard file that exists is always complete, and a
        # sidecar without its shard just means "rebuild".
        fileio.replace(tmp_sidecar, os.path.join(out_dir, name + SIDECAR_SUFFIX))
        fileio.replace(tmp_shard, os.path.join(out_dir, name))
    finally:
        for tmp in (tmp_shard, tmp_sidecar):
            if fileio.exists(tmp):
                fileio.remove(tmp)
    return sidecar
