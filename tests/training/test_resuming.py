"""Resuming from the newest whole checkpoint: damaged ones named and set aside, never lost."""

import os
import re

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.artifacts import checkpoint_dir
from electra_tf.errors import RunError
from electra_tf.training import resuming


def _checkpoints(directory, steps=(2, 4, 6)):
    """A directory of checkpoints of one variable; ckpt-<s> holds the value s everywhere."""
    variable = tf.Variable(np.zeros(1000, np.float32))
    checkpoint = tf.train.Checkpoint(v=variable)
    manager = tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=5)
    for step in steps:
        variable.assign(np.full(1000, step, np.float32))
        manager.save(checkpoint_number=step)
    variable.assign(np.zeros(1000, np.float32))
    return checkpoint, variable


def _flip_byte(path, offset):
    data = bytearray(open(path, "rb").read())
    data[offset] ^= 0xFF
    open(path, "wb").write(bytes(data))


def _data(directory, step):
    return os.path.join(directory, f"ckpt-{step}.data-00000-of-00001")


def _resume(checkpoint, directory):
    lines = []
    resumption = resuming.restore_newest_usable(checkpoint, str(directory))
    resuming.tidy_after_resuming(str(directory), resumption, lines.append)
    return resumption, lines


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda d: os.remove(os.path.join(d, "ckpt-6.index")), r"ckpt-6\.index is missing"),
        (lambda d: os.remove(_data(d, 6)), r"ckpt-6 has no \.data file"),
        (lambda d: os.truncate(_data(d, 6), 100), "unreadable: Read less bytes than requested"),
        (lambda d: _flip_byte(_data(d, 6), 300), "unreadable: .*Checksum does not match"),
        (lambda d: os.truncate(os.path.join(d, "ckpt-6.index"), 20), "unreadable"),
    ],
)
def test_a_damaged_newest_checkpoint_is_named_skipped_and_kept(tmp_path, damage, reason):
    directory = tmp_path / "checkpoints"
    checkpoint, variable = _checkpoints(directory)
    before = sorted(os.listdir(directory))
    damage(str(directory))
    resumption, lines = _resume(checkpoint, directory)
    assert resumption.restored.step == 4 and float(variable[0]) == 4.0
    assert len(lines) == 1
    assert lines[0].startswith(f"Checkpoint {directory}/ckpt-6 is damaged (")
    assert re.search(reason, lines[0]), lines[0]
    # Its files are kept, moved aside; the others are untouched.
    kept = os.path.join(
        directory,
        checkpoint_dir.SET_ASIDE_DIR,
        os.listdir(directory / checkpoint_dir.SET_ASIDE_DIR)[0],
    )
    assert lines[0].endswith(f"its files are kept in {kept}.")
    assert {n for n in before if n.startswith("ckpt-6")} >= set(os.listdir(kept))
    assert os.listdir(kept)
    assert [c.step for c in checkpoint_dir.list_checkpoints(str(directory))] == [4, 2]
    # The state file lists the usable ones, the restored one last.
    state = tf.train.get_checkpoint_state(str(directory))
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["ckpt-2", "ckpt-4"]
    assert tf.train.latest_checkpoint(str(directory)).endswith("ckpt-4")


def test_rotation_after_resuming_never_deletes_the_checkpoint_resumed_from(tmp_path):
    directory = tmp_path / "checkpoints"
    checkpoint, variable = _checkpoints(directory, steps=(2, 4, 6))
    os.remove(directory / "ckpt-6.index")
    _resume(checkpoint, directory)
    manager = tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=2)
    manager.save(checkpoint_number=6)
    assert [c.step for c in checkpoint_dir.list_checkpoints(str(directory))] == [6, 4]
    manager.save(checkpoint_number=8)
    assert [c.step for c in checkpoint_dir.list_checkpoints(str(directory))] == [8, 6]


def test_non_finite_checkpoint_is_skipped(tmp_path):
    directory = tmp_path / "checkpoints"
    checkpoint, variable = _checkpoints(directory, steps=(2, 4))
    variable.assign(np.full(1000, np.nan, np.float32))
    tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=5).save(checkpoint_number=6)
    resumption, lines = _resume(checkpoint, directory)
    assert resumption.restored.step == 4 and np.isfinite(variable.numpy()).all()
    assert "ckpt-6 is damaged (it holds NaN or infinite values (e.g. v))" in lines[0]


@pytest.mark.parametrize("content", [b"", b'model_checkpoint_path: "ckpt-6"\ngarbage {'])
def test_an_empty_or_garbled_state_file_is_rewritten(tmp_path, content):
    directory = tmp_path / "checkpoints"
    checkpoint, variable = _checkpoints(directory)
    (directory / "checkpoint").write_bytes(content)
    resumption, lines = _resume(checkpoint, directory)
    assert resumption.restored.step == 6 and float(variable[0]) == 6.0
    assert len(lines) == 1 and lines[0].startswith(f"{directory}/checkpoint is ")
    assert lines[0].endswith(": rewritten from the checkpoint files.")
    # TensorFlow reads it again, and a manager rotates among all three.
    tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=3).save(checkpoint_number=8)
    assert [c.step for c in checkpoint_dir.list_checkpoints(str(directory))] == [8, 6, 4]


def test_no_usable_checkpoint_is_an_error_that_changes_nothing(tmp_path):
    directory = tmp_path / "checkpoints"
    checkpoint, _ = _checkpoints(directory, steps=(2, 4))
    os.remove(directory / "ckpt-4.index")
    os.truncate(_data(directory, 2), 10)
    before = sorted(os.listdir(directory))
    with pytest.raises(
        RunError,
        match=r"holds checkpoints but none can be resumed from \(ckpt-4: "
        r"ckpt-4\.index is missing; ckpt-2: unreadable: .*\)\. "
        r"Nothing was changed; pass --restart",
    ):
        resuming.restore_newest_usable(checkpoint, str(directory))
    assert sorted(os.listdir(directory)) == before


def test_an_empty_directory_starts_from_step_zero(tmp_path):
    checkpoint, _ = _checkpoints(tmp_path / "unused", steps=())
    resumption, lines = _resume(checkpoint, tmp_path / "checkpoints")
    assert resumption.restored is None and lines == []


def test_unfinished_saves_are_removed(tmp_path):
    directory = tmp_path / "checkpoints"
    checkpoint, _ = _checkpoints(directory, steps=(2,))
    (directory / "ckpt-4_temp").mkdir()
    (directory / "ckpt-4_temp" / "part-00000-of-00001.data-00000-of-00001.tempstate1").write_text(
        "x"
    )
    resumption, lines = _resume(checkpoint, directory)
    assert resumption.restored.step == 2
    assert lines == [f"Removed {directory}/ckpt-4_temp, left by a save that did not finish."]
    assert not (directory / "ckpt-4_temp").exists()


def test_restart_moves_the_checkpoints_aside_with_a_warning(tmp_path):
    directory = tmp_path / "checkpoints"
    _checkpoints(directory, steps=(2,))
    lines = []
    resuming.restart(str(directory), lines.append)
    assert not directory.exists()
    moved = [p for p in tmp_path.iterdir() if p.name.startswith("checkpoints.before-restart-")]
    assert len(moved) == 1 and (moved[0] / "ckpt-2.index").exists()
    assert lines == [
        f"Warning: --restart: training starts again from step 0; the previous "
        f"checkpoints are kept in {moved[0]}."
    ]
    resuming.restart(str(directory), lines.append)  # nothing to move: nothing said
    assert len(lines) == 1
