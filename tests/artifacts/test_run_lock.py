"""One process per run directory: refused in one line, and a dead holder's lock taken over."""

import dataclasses
import errno
import os
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from electra_tf.artifacts import run_lock
from electra_tf.artifacts.run_lock import LOCK_FILE, Holder, RunLock, RunLocked

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOLD = """
import sys, time
from electra_tf.artifacts.run_lock import RunLock
lock = RunLock(sys.argv[1]).acquire()
print("locked", flush=True)
time.sleep(600)
"""


def _holder_process(directory):
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(directory)],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )
    assert process.stdout.readline().strip() == "locked"
    return process


def test_a_second_process_is_refused_naming_the_holder_and_a_killed_one_is_taken_over(tmp_path):
    directory = tmp_path / "run"
    holder = _holder_process(directory)
    try:
        with pytest.raises(RunLocked) as refused:
            RunLock(str(directory)).acquire()
        message = str(refused.value)
        assert message.startswith(
            f"--output_dir={directory} is in use by pid {holder.pid} on "
            f"{os.uname().nodename}, started 20"
        )
        assert "\n" not in message and "choose another --output_dir" in message
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    lines = []
    with RunLock(str(directory), lines.append):
        assert len(lines) == 1
        assert lines[0].startswith(
            f"Taking over the lock of {directory} from pid {holder.pid} "
            f"on {os.uname().nodename}, started 20"
        )
        assert lines[0].endswith(", which ended without releasing it.")
        assert Holder.parse((directory / LOCK_FILE).read_text()).pid == os.getpid()
    assert not (directory / LOCK_FILE).exists()  # released: the file goes with it


def test_the_same_process_cannot_hold_a_directory_twice(tmp_path):
    with RunLock(str(tmp_path / "run")):
        with pytest.raises(RunLocked, match=f"in use by pid {os.getpid()}"):
            RunLock(str(tmp_path / "run")).acquire()
    with RunLock(str(tmp_path / "run")):  # free again
        pass


def test_a_refused_or_unused_lock_leaves_no_directory_behind(tmp_path):
    lock = RunLock(str(tmp_path / "new")).acquire()
    lock.release()
    lock.release()  # twice is harmless
    assert not (tmp_path / "new").exists()
    (tmp_path / "kept").mkdir()
    RunLock(str(tmp_path / "kept")).acquire().release()
    assert (tmp_path / "kept").exists()


def _write_holder(path, holder):
    if tf.io.gfile.exists(path):  # ram:// appends to an existing file
        tf.io.gfile.remove(path)
    with tf.io.gfile.GFile(path, "w") as f:
        f.write(holder.to_json())


def test_file_locks_where_flock_is_missing(tmp_path, monkeypatch):
    """Object stores (ram:// here, like gs://) hold the lock in the file, with a heartbeat."""
    monkeypatch.setattr(run_lock.time, "sleep", lambda seconds: None)
    directory = "ram://locks/run"
    path = f"{directory}/{LOCK_FILE}"
    tf.io.gfile.makedirs(directory)
    me = run_lock.this_process()
    # A live process of this machine holds it.
    _write_holder(path, me)
    with pytest.raises(RunLocked, match=f"is in use by pid {me.pid} on {me.host}"):
        RunLock(directory).acquire()
    # One of this machine that ended: taken over.
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    _write_holder(path, dataclasses.replace(me, pid=int(dead)))
    lines = []
    lock = RunLock(directory, lines.append).acquire()
    assert lines == [
        f"Taking over the lock of {directory} from pid {dead} on {me.host}, started "
        f"{me.started}, which no longer runs."
    ]
    assert Holder.parse(tf.io.gfile.GFile(path).read()).pid == os.getpid()
    lock.release()
    assert not tf.io.gfile.exists(path)
    # One of another machine: refused while its heartbeat is fresh, taken over once stale.
    other = dataclasses.replace(me, host="elsewhere", pid=1, heartbeat=time.time() - 30)
    _write_holder(path, other)
    with pytest.raises(RunLocked, match="in use by pid 1 on elsewhere"):
        RunLock(directory).acquire()
    _write_holder(path, dataclasses.replace(other, heartbeat=time.time() - 3600))
    lines = []
    RunLock(directory, lines.append).acquire().release()
    assert lines == [
        f"Taking over the lock of {directory} from pid 1 on elsewhere, started "
        f"{me.started}, whose last heartbeat is 60 minutes old."
    ]


def test_a_local_file_system_without_flock_falls_back_to_the_file(tmp_path, monkeypatch):
    import fcntl

    def no_flock(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_flock)
    monkeypatch.setattr(run_lock.time, "sleep", lambda seconds: None)
    lock = RunLock(str(tmp_path / "run")).acquire()
    assert Holder.parse((tmp_path / "run" / LOCK_FILE).read_text()).pid == os.getpid()
    with pytest.raises(RunLocked, match=f"in use by pid {os.getpid()}"):
        RunLock(str(tmp_path / "run")).acquire()
    lock.release()
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("fails", ["pwrite", "makedirs"])
def test_a_full_disk_is_one_line_and_leaves_neither_a_lock_file_nor_a_directory(
    tmp_path, monkeypatch, fails
):
    def no_room(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    # On a full disk an empty file can still be created; writing into it fails.
    monkeypatch.setattr(run_lock.os if fails == "pwrite" else run_lock.fileio, fails, no_room)
    directory = tmp_path / "runs" / "run"
    with pytest.raises(run_lock.RunError) as refused:
        RunLock(str(directory)).acquire()
    assert str(refused.value) == (
        f"Could not write {directory / LOCK_FILE}: No space left on device. Nothing was written in "
        f"{directory}; free some space and re-run the same command."
    )
    assert os.listdir(tmp_path) == []
    # An existing directory is kept as it was (and a dead holder's lock file is not left empty).
    monkeypatch.undo()
    directory.mkdir(parents=True)
    (directory / "config.json").write_text("{}")
    monkeypatch.setattr(run_lock.os, "pwrite", no_room)
    with pytest.raises(run_lock.RunError):
        RunLock(str(directory)).acquire()
    assert os.listdir(directory) == ["config.json"]
