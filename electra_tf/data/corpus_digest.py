"""Content digests of corpus files: the same text is recognised wherever it lies and whenever it was written.

Vocabulary caches, shard builds and default run directories are keyed on
what a local corpus holds (each file's size and SHA-256), not on its paths
or modification times, so a corpus that is copied, re-downloaded or touched
keeps its vocabulary, its finished shards and its run, which resumes.

Hashing reads every byte (about 0.9 GB/s on one core), so the digests are
cached in a JSON file (`DIGEST_CACHE_FILE`) keyed by absolute path, size and
modification time: an unchanged file costs one `stat`, and only a new or
changed file is read again. A cache that cannot be read or written is
ignored (the digests are recomputed).

Files behind URLs (`gs://...`, see `electra_tf.fileio`) get no digest: a
corpus on an object store can be far larger than one machine reads in
reasonable time, and an object's modification time changes only when it is
written again, so such files stay named by path, size and modification time.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from typing import Callable, Optional, Sequence

import tensorflow as tf

from electra_tf import fileio
from electra_tf.data.shard_layout import DIGEST_CACHE_FILE, write_json_atomic

__all__ = ["DIGEST_CACHE_FILE", "corpus_digests", "file_digest", "source_identity"]
_BLOCK_BYTES = 8 << 20
# Hashing less than this says nothing: it takes well under a second.
_REPORT_BYTES = 256 << 20
_SHA256_HEX = re.compile("[0-9a-f]{64}")


def file_digest(path: str, on_block: Optional[Callable[[int], None]] = None) -> str:
    """SHA-256 (hex) of a whole file, read in blocks; `on_block(n)` after each n bytes."""
    digest = hashlib.sha256()
    with fileio.open_file(path, "rb") as f:
        while True:
            block = f.read(_BLOCK_BYTES)
            if not block:
                return digest.hexdigest()
            digest.update(block)
            if on_block is not None:
                on_block(len(block))


def source_identity(path: str, size: int, mtime_ns: int, digest: Optional[str]) -> list:
    """What names one input file's text in keys and fingerprints.

    `[size, sha256]` for a local file; `[path, size, mtime_ns]` for a file
    behind a URL, which has no digest.
    """
    return [size, digest] if digest else [path, size, mtime_ns]


def _load_cache(cache_file: Optional[str]) -> dict:
    if cache_file is None or not fileio.exists(cache_file):
        return {}
    try:
        with fileio.open_file(cache_file, "r") as f:
            files = json.load(f).get("files")
    except (OSError, ValueError, AttributeError, tf.errors.OpError):
        return {}
    return files if isinstance(files, dict) else {}


def corpus_digests(
    paths: Sequence[str],
    cache_file: Optional[str] = None,
    progress: Optional[Callable[[str], None]] = None,
) -> list[Optional[str]]:
    """The SHA-256 of each local file, from the cache when its size and mtime are unchanged.

    Args:
        paths: the corpus files.
        cache_file: JSON cache of earlier digests (read, then updated with
            the new ones); None: no cache.
        progress: called with a status line, with rate and ETA, while more
            than 256 MB are being read.

    Returns:
        One hex digest per path, in order; None for a URL (not read).
    """
    cache = _load_cache(cache_file)
    stats = [(fileio.abspath(p), fileio.stat(p)) for p in paths if not fileio.is_url(p)]

    def cached(path, stat) -> Optional[str]:
        entry = cache.get(path)
        if (
            isinstance(entry, dict)
            and entry.get("bytes") == stat.size
            and entry.get("mtime_ns") == stat.mtime_ns
            and isinstance(entry.get("sha256"), str)
            and _SHA256_HEX.fullmatch(entry["sha256"])
        ):
            return entry["sha256"]
        return None

    todo = sum(stat.size for path, stat in stats if cached(path, stat) is None)
    say = progress if progress is not None and todo >= _REPORT_BYTES else None
    if say:
        say(f"Reading {todo / 1e6:,.0f} MB of corpus text to fingerprint its content...")
    started, done, last_report = time.monotonic(), 0, time.monotonic()

    def on_block(n: int) -> None:
        nonlocal done, last_report
        done += n
        now = time.monotonic()
        if say and now - last_report >= 10:
            rate = done / max(now - started, 1e-6)
            say(
                f"  {done / 1e6:,.0f}/{todo / 1e6:,.0f} MB, {rate / 1e6:.0f} MB/s, "
                f"ETA {(todo - done) / rate:.0f}s"
            )
            last_report = now

    local, changed = {}, False
    for path, stat in stats:
        digest = cached(path, stat)
        if digest is None:
            digest = file_digest(path, on_block)
            if fileio.stat(path) == stat:  # not cached if the file changed while it was read
                cache[path] = {"bytes": stat.size, "mtime_ns": stat.mtime_ns, "sha256": digest}
                changed = True
        local[path] = digest
    digests = [None if fileio.is_url(p) else local[fileio.abspath(p)] for p in paths]
    if changed and cache_file is not None:
        try:
            fileio.makedirs(os.path.dirname(cache_file) or ".")
            write_json_atomic(cache_file, {"files": cache})
        except (OSError, ValueError, tf.errors.OpError):
            pass  # a read-only place: the digests are computed again next time
    return digests
