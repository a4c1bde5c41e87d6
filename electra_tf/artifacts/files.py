"""Files of a layout: where they are (`Within`), and writing them so that a reader never
sees half of one (a temporary sibling, then a rename).

A write that fails (a full disk) removes its temporary file and leaves the
previous version of the file as it was.

JSON written here is strict JSON, which has no NaN or infinity: a float that
is not finite is written as the string "nan", "inf" or "-inf" (`json_safe`;
`float()` reads each back).
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import shutil
from typing import Any, Optional

# errno values of a write that failed for lack of room.
NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


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


def no_room(error: BaseException) -> Optional[str]:
    """What a write that failed for lack of room says ("No space left on device"); else None.

    Python's writes raise OSError (ENOSPC, EDQUOT, EFBIG); TensorFlow's raise
    ResourceExhaustedError, whose message ends with the system's reason.
    """
    if isinstance(error, OSError):
        return error.strerror if error.errno in NO_ROOM else None
    if type(error).__name__ == "ResourceExhaustedError":  # tf.errors, not imported here
        reason = str(getattr(error, "message", error)).strip().splitlines()[0].split("; ")[-1]
        return re.sub(r"\s*\[Op:\w+\]$", "", reason)  # eager ops append their name
    return None


@contextlib.contextmanager
def atomic_open(path: str, mode: str = "w"):
    """Opens `path + ".tmp"` for writing (text, or bytes with mode "wb"); renames it to `path` once closed without error."""
    tmp = path + ".tmp"
    try:
        with open(tmp, mode, encoding=None if "b" in mode else "utf-8") as f:
            yield f
        os.replace(tmp, path)
    except OSError as error:
        if error.filename is None:  # a failed write names no file: name the one written
            error.filename = tmp
        raise
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def json_safe(value: Any) -> Any:
    """`value` with every float that is not finite replaced by "nan", "inf" or "-inf"."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


def json_line(record: dict) -> str:
    """One line of a JSON-lines log: strict JSON (see `json_safe`)."""
    return json.dumps(json_safe(record), allow_nan=False)


def write_json(path: str, data) -> None:
    """Writes `data` as indented UTF-8 JSON (strict, see `json_safe`), atomically."""
    with atomic_open(path) as f:
        json.dump(json_safe(data), f, indent=2, ensure_ascii=False, allow_nan=False)
        f.write("\n")


def read_json(path: str):
    """The JSON in `path`, or None when there is no such file."""
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def copy_file(source: str, target: str) -> None:
    """Copies `source` to `target`, atomically.

    Raises:
        OSError: reading or writing failed; a failed write (a full disk)
            names `target`, where `shutil` names `source`.
    """
    try:
        try:
            shutil.copyfile(source, target + ".tmp")
        except OSError as error:
            if error.errno in NO_ROOM:
                raise OSError(error.errno, error.strerror, target) from None
            raise
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
