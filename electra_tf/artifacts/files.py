"""Writing files so that a reader never sees half of one: a temporary sibling, then a rename."""

from __future__ import annotations

import contextlib
import json
import os
import shutil


@contextlib.contextmanager
def atomic_open(path: str):
    """Opens `path + ".tmp"` for writing text; renames it to `path` once closed without error."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        yield f
    os.replace(tmp, path)


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
    shutil.copyfile(source, target + ".tmp")
    os.replace(target + ".tmp", target)
