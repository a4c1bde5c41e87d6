"""Checking the shards already on disk: which to reuse, which are damaged, which belong elsewhere.

A re-run with the same build fingerprint (input sizes and SHA-256, or
paths, sizes and mtimes for inputs behind URLs; vocabulary hash; casing
flags; `max_seq_length`; `seed`; `num_shards`;
probabilities) reuses finished shards and rebuilds only missing or damaged
ones (`reusable_shards`); shards whose fingerprint is an earlier form of
this build's (input paths, sizes and mtimes) are kept and get the current
fingerprint recorded. Checking a finished shard costs one `stat` while
its size and modification time are those its sidecar records; a shard whose
size differs (truncated) is rebuilt, and one whose modification time differs
is read once and compared with its checksum: a shard changed in place is
named, with the byte offset of its first bad record, and rebuilt (an
unchanged one gets its new time recorded). Output from a different build is
never deleted: it raises `ShardError`. Concurrent builds into one directory
are not supported.

Readers verify every record's own checksum as they read; a shard damaged
after the build is named by `find_damaged_shard`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

from electra_tf import fileio
from electra_tf.data.shard_layout import (
    METADATA_FILE,
    SHARD_PREFIX,
    SIDECAR_SUFFIX,
    ShardError,
    file_crc32,
    load_json,
    shard_name,
    shard_paths,
    write_json_atomic,
)


def _build_differences(old: Optional[dict], new: dict) -> str:
    if not isinstance(old, dict):
        return "unknown earlier parameters"
    diffs = [
        f"{key} {old.get(key)!r} -> {new.get(key)!r}"
        for key in sorted(new)
        if key not in ("fingerprint", "invalid_utf8", "tokenizer_config")
        and old.get(key) != new.get(key)
    ]
    return (
        "; ".join(diffs)
        if diffs
        else "different input text (or, for a build of an earlier release, input files "
        "moved or touched since)"
    )


def _different_build_error(output_dir: str, found: str, detail: str) -> ShardError:
    return ShardError(
        f"output directory {output_dir!r} already holds shards from a different build "
        f"({found}: {detail}). Existing shards are never deleted automatically: write to "
        "another directory (pretrain.py --data_dir), or delete the old shards and metadata.json "
        "yourself if they are no longer needed"
    )


def record_problem(path: str) -> Optional[str]:
    """Reads every record of a TFRecord file; what is wrong with the first bad one, or None.

    TensorFlow checks each record's length and data checksums; the answer
    names the byte offset, e.g. "corrupted record at byte 28947".
    """
    try:
        tf.data.TFRecordDataset(path).reduce(np.int64(0), lambda count, _: count + 1)
    except tf.errors.OpError as error:
        message = (error.message or str(error)).strip()
        found = re.search(r"(corrupted|truncated) record at (\d+)", message)
        if found:
            return f"{found.group(1)} record at byte {found.group(2)}"
        return message.split("}} ")[-1].splitlines()[0][:200]
    return None


@dataclass(frozen=True)
class DamagedShard:
    """A shard that cannot be read whole: its path and what is wrong (with the byte offset)."""

    path: str
    problem: str


def find_damaged_shard(output_dir: str) -> Optional[DamagedShard]:
    """The first shard listed in `output_dir/metadata.json` with a bad record, or None.

    Reads every shard (a full pass): for naming the file after a reader
    reported a bad record, not for routine checks.
    """
    try:
        paths = shard_paths(output_dir)
    except ShardError:
        return None
    for path in paths:
        problem = record_problem(path)
        if problem is not None:
            return DamagedShard(path, problem)
    return None


def _shard_damage(shard_path: str, sidecar: dict) -> tuple[Optional[str], bool]:
    """(what is wrong with a finished shard or None, whether its sidecar needs rewriting).

    One `stat` while the file's size and modification time are those the
    sidecar records; otherwise the file is read once and compared with the
    recorded CRC-32. Shards built before checksums are checked record by
    record once and get their checksum recorded.
    """
    stat = fileio.stat(shard_path)
    if stat.size != sidecar.get("bytes"):
        return (
            f"truncated or extended: {stat.size:,} bytes, {sidecar.get('bytes'):,} when built",
            False,
        )
    if sidecar.get("crc32") is None:  # built before checksums were recorded
        problem = record_problem(shard_path)
        if problem is not None:
            return problem, False
    elif stat.mtime_ns == sidecar.get("mtime_ns"):
        return None, False
    elif file_crc32(shard_path) != sidecar["crc32"]:
        return (
            record_problem(shard_path)
            or "its checksum differs from the one recorded when it was built"
        ), False
    sidecar["crc32"] = sidecar.get("crc32") or file_crc32(shard_path)
    sidecar["mtime_ns"] = stat.mtime_ns
    return None, True


def reusable_shards(
    output_dir: str,
    num_shards: int,
    build: dict,
    invalid_utf8: str,
    earlier_fingerprints: Sequence[str] = (),
) -> tuple[dict[int, dict], dict[int, str]]:
    """Checks the directory against this build.

    Args:
        output_dir: the shard directory.
        num_shards: shards of this build.
        build: this build's parameters and `fingerprint`.
        invalid_utf8: this build's policy; under "error", shards built with
            replaced lines are rebuilt (which reports the invalid bytes).
        earlier_fingerprints: earlier forms of this build's fingerprint;
            their shards are reused and get `build["fingerprint"]` recorded.

    Returns:
        ({index: sidecar} of the finished shards to reuse, {index: what is
        wrong} of the finished shards found damaged, to rebuild).

    Raises:
        ShardError: files from a different build are present.
    """
    fingerprint = build["fingerprint"]
    accepted = {fingerprint, *earlier_fingerprints}
    meta_path = os.path.join(output_dir, METADATA_FILE)
    if fileio.exists(meta_path):
        meta = load_json(meta_path)
        old_build = meta.get("build") if isinstance(meta, dict) else None
        if not isinstance(old_build, dict) or old_build.get("fingerprint") not in accepted:
            raise _different_build_error(
                output_dir, METADATA_FILE, _build_differences(old_build, build)
            )
        if old_build["fingerprint"] != fingerprint:  # record the current form at once
            old_build["fingerprint"] = fingerprint
            try:
                write_json_atomic(meta_path, meta)
            except (OSError, tf.errors.OpError):
                pass  # read-only: the earlier form is accepted again next time

    expected = {shard_name(i, num_shards): i for i in range(num_shards)}
    for fname in sorted(fileio.listdir(output_dir)):
        if not fname.startswith(SHARD_PREFIX):
            continue
        base = fname[: -len(SIDECAR_SUFFIX)] if fname.endswith(SIDECAR_SUFFIX) else fname
        if base not in expected:
            raise _different_build_error(
                output_dir, fname, f"this build writes {num_shards} shards"
            )

    reusable, damaged = {}, {}
    for name, index in expected.items():
        shard_path = os.path.join(output_dir, name)
        sidecar_path = shard_path + SIDECAR_SUFFIX
        if not fileio.exists(sidecar_path):
            if fileio.exists(shard_path):
                raise _different_build_error(
                    output_dir, name, f"it has no {name + SIDECAR_SUFFIX} build record"
                )
            continue
        sidecar = load_json(sidecar_path)
        if not isinstance(sidecar, dict) or sidecar.get("fingerprint") not in accepted:
            old = sidecar.get("build") if isinstance(sidecar, dict) else None
            raise _different_build_error(
                output_dir, name + SIDECAR_SUFFIX, _build_differences(old, build)
            )
        if not fileio.exists(shard_path):
            continue  # Interrupted between the two renames: rebuild.
        problem, refreshed = _shard_damage(shard_path, sidecar)
        if problem is not None:
            damaged[index] = problem
            continue
        if sidecar["fingerprint"] != fingerprint:  # an earlier form of this build's
            sidecar["fingerprint"] = fingerprint
            if isinstance(sidecar.get("build"), dict):
                sidecar["build"]["fingerprint"] = fingerprint
            refreshed = True
        if refreshed:  # unchanged content: record the new time, checksum or fingerprint
            try:
                write_json_atomic(sidecar_path, sidecar)
            except (OSError, tf.errors.OpError):
                pass  # read-only: checked again next time
        if invalid_utf8 == "error" and sidecar.get("replaced_lines"):
            continue  # Rebuilding reports the invalid bytes as an error.
        reusable[index] = sidecar
    return reusable, damaged
