"""A training checkpoint directory (`<run>/checkpoints/`, `trial_<k>/checkpoints/`).

    ckpt-<step>.index, ckpt-<step>.data-<i>-of-<n>   one checkpoint per saved step
    checkpoint                                       TensorFlow's state file: the checkpoints
                                                     kept, newest last
    ckpt-<step>_temp/                                a save in progress (removed once merged)
    set_aside/<time>/ckpt-<step>.*                   checkpoints found damaged or not finite
                                                     when a run resumed: kept, never read again

Which checkpoint a run resumes from is decided from the checkpoint files
themselves, not from the state file, which may be missing, empty or point at a
checkpoint that lost a file: `list_checkpoints` finds them and
`checkpoint_problem` reads one completely (TensorFlow verifies every tensor's
checksum on the way) and checks that its values are finite. `write_state`
then rewrites the state file to list the usable checkpoints, so that
`tf.train.CheckpointManager` rotates among them and never deletes the one
resumed from because of a damaged or newer one.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import time
from typing import Optional

import numpy as np
import tensorflow as tf

from electra_tf import fileio

CHECKPOINT_NAME = "ckpt"  # tf.train.CheckpointManager's default prefix
STATE_FILE = "checkpoint"
SET_ASIDE_DIR = "set_aside"
_FILE = re.compile(rf"^{CHECKPOINT_NAME}-(\d+)\.(index|data-(\d+)-of-(\d+))$")
_TEMPORARY = re.compile(rf"^{CHECKPOINT_NAME}-\d+_temp$")
# The fields of TensorFlow's CheckpointState, one per line in its text format.
_STATE_LINE = re.compile(
    r'^(model_checkpoint_path|all_model_checkpoint_paths): "[^"]*"$'
    r"|^(all_model_checkpoint_timestamps|last_preserved_timestamp): \S+$"
)


@dataclasses.dataclass(frozen=True)
class CheckpointFiles:
    """The files of one checkpoint found in a directory.

    Attributes:
        step: the step it was saved at.
        prefix: its path without extension (`<dir>/ckpt-<step>`), what
            `tf.train.Checkpoint.restore` takes.
        files: the names of its files in the directory.
        missing: what is missing when it is incomplete (None when complete).
    """

    step: int
    prefix: str
    files: tuple[str, ...]
    missing: Optional[str]

    @property
    def name(self) -> str:
        return os.path.basename(self.prefix)


def list_checkpoints(directory: str) -> list[CheckpointFiles]:
    """Every checkpoint with at least one file in `directory`, newest first ([]: none)."""
    if not fileio.isdir(directory):
        return []
    by_step: dict[int, list[str]] = {}
    for name in fileio.listdir(directory):
        match = _FILE.match(name)
        if match:
            by_step.setdefault(int(match.group(1)), []).append(name)
    found = []
    for step in sorted(by_step, reverse=True):
        names = tuple(sorted(by_step[step]))
        stem = f"{CHECKPOINT_NAME}-{step}"
        shards = {int(m.group(4)) for m in map(_FILE.match, names) if m.group(3) is not None}
        missing = None
        if f"{stem}.index" not in names:
            missing = f"{stem}.index is missing"
        elif not shards:
            missing = f"{stem} has no .data file"
        elif len(shards) > 1:
            missing = f"{stem} has .data files of different builds"
        else:
            count = shards.pop()
            absent = [
                f"{stem}.data-{i:05d}-of-{count:05d}"
                for i in range(count)
                if f"{stem}.data-{i:05d}-of-{count:05d}" not in names
            ]
            if absent:
                missing = f"{absent[0]} is missing"
        found.append(CheckpointFiles(step, os.path.join(directory, stem), names, missing))
    return found


def checkpoint_problem(checkpoint: CheckpointFiles) -> Optional[str]:
    """Why `checkpoint` cannot be resumed from, or None when it can.

    Reads every tensor (TensorFlow checks each one's checksum, so a file
    truncated or changed in place is found) and checks the floating-point
    ones for NaN and infinities.
    """
    if checkpoint.missing:
        return checkpoint.missing
    try:
        reader = tf.train.load_checkpoint(checkpoint.prefix)
        names = sorted(reader.get_variable_to_shape_map())
        for name in names:
            value = reader.get_tensor(name)
            if (
                isinstance(value, np.ndarray)
                and value.dtype.kind == "f"
                and not np.isfinite(value).all()
            ):
                return f"it holds NaN or infinite values (e.g. {name.split('/.ATTRIBUTES')[0]})"
    except (tf.errors.OpError, IndexError, ValueError, OSError) as error:
        return f"unreadable: {_first_line(error)}"
    return None


def _first_line(error: Exception) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0][:200]


def state_problem(directory: str) -> Optional[str]:
    """What is wrong with the state file (`checkpoint`), or None when it is absent or readable."""
    path = os.path.join(directory, STATE_FILE)
    if not fileio.exists(path):
        return None
    try:
        with fileio.open_file(path, "r") as f:
            lines = [line.strip() for line in f.read().splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError, tf.errors.OpError) as error:
        return f"{path} is unreadable ({_first_line(error)})"
    if not lines:
        return f"{path} is empty"
    # TensorFlow's reader logs a parse error and acts as if there were no file.
    if not all(_STATE_LINE.match(line) for line in lines) or not any(
        line.startswith("model_checkpoint_path:") for line in lines
    ):
        return f"{path} is unreadable"
    return None


def write_state(directory: str, checkpoints: list[CheckpointFiles]) -> None:
    """Rewrites the state file to list `checkpoints` (oldest to newest; the last is the latest).

    The timestamps are the index files' modification times, so that
    `tf.train.CheckpointManager` rotates these checkpoints as if it had
    written them itself.
    """
    path = os.path.join(directory, STATE_FILE)
    if not checkpoints:
        if fileio.exists(path):
            fileio.remove(path)
        return
    ordered = sorted(checkpoints, key=lambda c: c.step)
    stamps = [fileio.stat(c.prefix + ".index").mtime_ns / 1e9 for c in ordered]
    lines = [f'model_checkpoint_path: "{ordered[-1].name}"']
    lines += [f'all_model_checkpoint_paths: "{c.name}"' for c in ordered]
    lines += [f"all_model_checkpoint_timestamps: {stamp!r}" for stamp in stamps]
    lines.append(f"last_preserved_timestamp: {min(stamps) - 1.0!r}")
    tmp = path + ".tmp"
    with fileio.open_file(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    fileio.replace(tmp, path)


def set_aside(checkpoints: list[CheckpointFiles]) -> Optional[str]:
    """Moves the files of `checkpoints` into `set_aside/<time>/` beside them; returns that folder.

    They are kept (nothing is deleted), out of the way of the checkpoints a
    resumed run saves under the same names.
    """
    if not checkpoints:
        return None
    directory = os.path.dirname(checkpoints[0].prefix)
    target = os.path.join(directory, SET_ASIDE_DIR, time.strftime("%Y%m%d-%H%M%S"))
    fileio.makedirs(target)
    for checkpoint in checkpoints:
        for name in checkpoint.files:
            fileio.replace(os.path.join(directory, name), os.path.join(target, name))
    return target


def remove_temporary(directory: str) -> list[str]:
    """Removes the `ckpt-<step>_temp/` folders of saves that never finished; returns their names."""
    if not fileio.isdir(directory):
        return []
    removed = []
    for name in sorted(fileio.listdir(directory)):
        if _TEMPORARY.match(name):
            path = os.path.join(directory, name)
            if fileio.is_url(path):
                tf.io.gfile.rmtree(path)
            else:
                shutil.rmtree(path, ignore_errors=True)
            removed.append(name)
    return removed


def move_directory_aside(directory: str, reason: str) -> Optional[str]:
    """Renames `directory` to `<directory>.<reason>-<time>` (None if it does not exist)."""
    if not fileio.isdir(directory):
        return None
    target = f"{directory.rstrip('/')}.{reason}-{time.strftime('%Y%m%d-%H%M%S')}"
    fileio.replace(directory, target)
    return target
