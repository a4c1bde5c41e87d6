"""The one owner of a shard directory's layout on disk: file names, records, checksums.

A finished build of pre-training shards is a directory holding

    pretrain_data.tfrecord-<i:05d>-of-<n:05d>        the records of shard i (TFRecord)
    pretrain_data.tfrecord-<i:05d>-of-<n:05d>.json   its sidecar: example count, byte size,
                                                     CRC-32 and modification time of the
                                                     file, and the build fingerprint
    metadata.json                                    the manifest, written last: the build's
                                                     parameters and every shard's path and
                                                     example count
    corpus-digests.json                              the input files' SHA-256, cached by path,
                                                     size and mtime (`electra_tf.data.corpus_digest`;
                                                     a caller may keep it elsewhere)

Each record is a `tf.train.Example` with the int64 features `FEATURE_NAMES`,
each of shape [L] with L = `max_seq_length` (see
`electra_tf.data.example_packing`).

Files are written under temporary names `.tmp-<name>-<pid>-<random>` and
renamed into place, a shard's sidecar before the shard, so a shard file that
exists is always complete. Readers should take shard paths from
`metadata.json` (`shard_paths`): the sidecars share the shard name prefix, so
a glob `pretrain_data.tfrecord-*` would match them too.

Paths may be local or URLs such as `gs://bucket/dir` (see `electra_tf.fileio`).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import zlib

from electra_tf import fileio

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
SHARD_PREFIX = "pretrain_data.tfrecord-"
METADATA_FILE = "metadata.json"
DIGEST_CACHE_FILE = "corpus-digests.json"
SIDECAR_SUFFIX = ".json"
TMP_PREFIX = ".tmp-"
FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids")

# Raw bytes read per file access when computing a checksum.
CHECKSUM_BLOCK_BYTES = 4 << 20


class ShardError(ValueError):
    """Bad input or output for shard building; the message names the file or directory."""


def shard_name(index: int, num_shards: int) -> str:
    """`pretrain_data.tfrecord-<i:05d>-of-<n:05d>`."""
    return f"{SHARD_PREFIX}{index:05d}-of-{num_shards:05d}"


def tmp_path(directory: str, name: str) -> str:
    """A fresh temporary path for `name` in `directory`, renamed into place when complete."""
    # The random part keeps two attempts at the same file apart when a
    # cluster retries work elsewhere: other machines may reuse the pid.
    return os.path.join(directory, f"{TMP_PREFIX}{name}-{os.getpid()}-{secrets.token_hex(4)}")


def write_json_atomic(path: str, data: dict) -> None:
    """Writes `data` as indented JSON to `path` through a temporary file and a rename."""
    tmp = tmp_path(os.path.dirname(path), os.path.basename(path))
    try:
        with fileio.open_file(tmp, "w") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
        fileio.replace(tmp, path)
    finally:
        if fileio.exists(tmp):
            fileio.remove(tmp)


def load_json(path: str) -> dict:
    """Reads a sidecar or `metadata.json`; a file that cannot be read raises ShardError."""
    try:
        with fileio.open_file(path, "r") as f:
            return json.load(f)
    except (OSError, ValueError) as err:
        raise ShardError(f"cannot read {path!r}: {err}") from None


def remove_stale_tmp(output_dir: str) -> None:
    """Removes the temporary files that interrupted runs left in `output_dir`."""
    for fname in fileio.listdir(output_dir):
        if fname.startswith(
            tuple(TMP_PREFIX + name for name in (SHARD_PREFIX, METADATA_FILE, DIGEST_CACHE_FILE))
        ):
            path = os.path.join(output_dir, fname)
            logger.info("Removing %s left by an interrupted run.", path)
            fileio.remove(path)


def file_crc32(path: str) -> int:
    """CRC-32 (zlib's) of a whole file, read in blocks."""
    crc = 0
    with fileio.open_file(path, "rb") as f:
        while True:
            block = f.read(CHECKSUM_BLOCK_BYTES)
            if not block:
                return crc
            crc = zlib.crc32(block, crc)


def read_metadata(output_dir: str) -> dict:
    """Loads and checks `output_dir/metadata.json`.

    Raises:
        ShardError: the file is missing, unreadable or of another format version.
    """
    path = os.path.join(os.fspath(output_dir), METADATA_FILE)
    if not fileio.exists(path):
        raise ShardError(
            f"{path!r} does not exist: {output_dir!r} holds no finished shard "
            "build (build the shards first, or check the directory)"
        )
    meta = load_json(path)
    if not isinstance(meta, dict) or meta.get("format_version") != FORMAT_VERSION:
        version = meta.get("format_version") if isinstance(meta, dict) else None
        raise ShardError(
            f"{path!r} has format_version {version!r}; this code reads version {FORMAT_VERSION}"
        )
    for key in ("max_seq_length", "shards", "num_examples"):
        if key not in meta:
            raise ShardError(f"{path!r} lacks the field {key!r}")
    return meta


def shard_paths(output_dir: str) -> list[str]:
    """Absolute shard paths listed in `output_dir/metadata.json`, in shard order.

    Raises:
        ShardError: no metadata, or a listed shard is missing.
    """
    meta = read_metadata(output_dir)
    root = fileio.abspath(os.fspath(output_dir))
    paths = [os.path.join(root, shard["path"]) for shard in meta["shards"]]
    missing = [p for p in paths if not fileio.exists(p)]
    if missing:
        raise ShardError(
            f"{len(missing)} shard(s) listed in {os.path.join(root, METADATA_FILE)!r} "
            f"are missing, e.g. {missing[0]!r}; rebuild them by re-running the "
            "shard build with the same arguments"
        )
    return paths
