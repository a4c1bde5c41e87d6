"""Files of a layout: where they are (`Within`), and writing them so that a reader never
sees half of one (a temporary sibling, then a rename).

A write that fails (a full disk) removes its temporary file and leaves the
previous version of the file as it was.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil


class Within:
    """A path inside the directory of a layout: `config_file = Within("config.json")`.

    A class attribute of a layout (a dataclass with a `path` field); read on an
    instance, it is `os.path.join(instance.path, *parts)`. Nothing is created
    or checked.
    """

    def __init__(self, *parts: str):
        self.parts = parts

    def __get__(self, layout, owner=None):
        if layout is None:
            return self
        return os.path.join(layout.path, *self.parts)


@contextlib.contextmanager
def atomic_open(path: str):
    """Opens `path + ".tmp"` for writing text; renames it to `path` once closed without error."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            yield f
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_json(path: str, data) -> None:
    """Writes `data` as indented UTF-8 JSON, atomically."""
    with atomic_open(path) as f:
        json.dump(data, f, indent=2, ensure_ascii=False)
        f.write("\n")


def read_json(path: str):
    """The JSON in `path`, or None when there is no such file."""
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def copy_file(source: str, target: str) -> None:
    """Copies `source` to `target`, atomically."""
    try:
        shutil.copyfile(source, target + ".tmp")
        os.replace(target + ".tmp", target)
    finally:
        if os.path.exists(target + ".tmp"):
            os.remove(target + ".tmp")


def append_line(path: str, line: str) -> None:
    """Appends one line to a log of lines (JSON lines); a failed write leaves no partial line."""
    data = memoryview((line.rstrip("\n") + "\n").encode("utf-8"))
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        try:
            while data:
                data = data[os.write(fd, data) :]
        except OSError:
            os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)
