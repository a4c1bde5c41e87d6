"""File access for local paths and storage URLs such as `gs://bucket/dir/file`.

A path with a scheme (`gs://`, `s3://`, `ram://`, ... anything `tf.io.gfile`
supports) goes through `tf.io.gfile`. A local path keeps the `os` module and
Python's `open`/`glob`, because `tf.io.gfile` differs on local files in ways
that matter here: `stat` reports modification times in whole seconds (build
fingerprints record nanoseconds), `glob` matches hidden files, and every
call pays TensorFlow's overhead.
"""

from __future__ import annotations

import glob as _glob
import os
from typing import IO, NamedTuple

import tensorflow as tf


class FileStat(NamedTuple):
    size: int
    mtime_ns: int


def is_url(path: str) -> bool:
    """True for `scheme://...` paths (read and written through `tf.io.gfile`)."""
    return "://" in path


def abspath(path: str) -> str:
    """`os.path.abspath` for a local path; a URL is already absolute."""
    return path if is_url(path) else os.path.abspath(path)


def open_file(path: str, mode: str = "rb") -> IO:
    """Opens a file; text modes use UTF-8."""
    if is_url(path):
        return tf.io.gfile.GFile(path, mode)
    if "b" in mode:
        return open(path, mode)
    return open(path, mode, encoding="utf-8")


def exists(path: str) -> bool:
    return tf.io.gfile.exists(path) if is_url(path) else os.path.exists(path)


def isdir(path: str) -> bool:
    return tf.io.gfile.isdir(path) if is_url(path) else os.path.isdir(path)


def isfile(path: str) -> bool:
    if is_url(path):
        return tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path)
    return os.path.isfile(path)


def listdir(path: str) -> list[str]:
    """Entry names of a directory (not full paths), in no particular order."""
    if is_url(path):
        # Object stores list "subdirectories" with a trailing slash.
        return [name.rstrip("/") for name in tf.io.gfile.listdir(path)]
    return os.listdir(path)


def glob(pattern: str) -> list[str]:
    """Paths matching a `*`, `?`, `[...]` pattern."""
    return tf.io.gfile.glob(pattern) if is_url(pattern) else _glob.glob(pattern)


def stat(path: str) -> FileStat:
    if is_url(path):
        st = tf.io.gfile.stat(path)
        return FileStat(st.length, st.mtime_nsec)
    st = os.stat(path)
    return FileStat(st.st_size, st.st_mtime_ns)


def getsize(path: str) -> int:
    return stat(path).size


def makedirs(path: str) -> None:
    """Creates a directory and its parents; no error if it exists."""
    if is_url(path):
        tf.io.gfile.makedirs(path)
    else:
        os.makedirs(path, exist_ok=True)


def replace(src: str, dst: str) -> None:
    """Renames `src` to `dst`, replacing `dst`.

    Atomic on local file systems; on object stores (copy, then delete) the
    destination still only ever appears complete.
    """
    if is_url(src):
        tf.io.gfile.rename(src, dst, overwrite=True)
    else:
        os.replace(src, dst)


def remove(path: str) -> None:
    if is_url(path):
        tf.io.gfile.remove(path)
    else:
        os.remove(path)
