"""One process at a time in a run directory: the lock file `<dir>/.lock`.

A pre-training run directory and a fine-tuning output directory are written
by one process (the chief of a multi-worker run). A second process that
asks for the same directory is refused in one line naming the holder: its
pid, host, start time and command, as the lock file records them.

On a local (or NFS) file system the lock is an `flock` on that file, which
the kernel releases when its process ends in any way, `kill -9` included:
a later run finds the file unlocked, says in one line that it takes over
from the dead holder, and goes on. Where `flock` is unavailable (object
stores such as `gs://`, some FUSE mounts), the file itself is the lock: its
holder rewrites a heartbeat in it every `HEARTBEAT_SECONDS`, and a lock is
taken over when its holder is a process of this machine that no longer
runs, or when its heartbeat is older than `STALE_SECONDS` (a holder on
another machine that was killed). Two processes racing for such a lock at
the same instant are told apart by reading the file back after writing it;
object stores give no stronger guarantee.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import socket
import sys
import threading
import time
from typing import Callable, Optional

from electra_tf import fileio
from electra_tf.errors import RunError

LOCK_FILE = ".lock"
HEARTBEAT_SECONDS = 60.0
STALE_SECONDS = 600.0


class RunLocked(RunError):
    """Another live process holds the directory."""


@dataclasses.dataclass(frozen=True)
class Holder:
    """Who holds a lock (what the lock file records)."""

    pid: int
    host: str
    started: str  # local time, for people
    command: str
    process_start: Optional[int] = None  # /proc start time: tells a reused pid apart
    heartbeat: Optional[float] = None  # time.time() of the last heartbeat (file locks)

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}, started {self.started}"

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self)) + "\n"

    @classmethod
    def parse(cls, text: str) -> Optional["Holder"]:
        """The holder recorded in `text`, or None (empty or not a lock file of ours)."""
        try:
            data = json.loads(text)
            return cls(**{f.name: data.get(f.name) for f in dataclasses.fields(cls)})
        except (ValueError, TypeError, AttributeError):
            return None


def _process_start(pid: int) -> Optional[int]:
    """When process `pid` started (clock ticks since boot), or None where /proc is absent."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            # The command name may hold spaces: fields follow its closing parenthesis.
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def this_process() -> Holder:
    command = " ".join([os.path.basename(sys.argv[0] or "python"), *sys.argv[1:]])
    return Holder(
        os.getpid(),
        socket.gethostname(),
        time.strftime("%Y-%m-%d %H:%M:%S"),
        command[:160],
        _process_start(os.getpid()),
        time.time(),
    )


def _runs(holder: Holder) -> bool:
    """Whether the process `holder` names still runs on this machine."""
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    start = _process_start(holder.pid)
    return holder.process_start is None or start is None or start == holder.process_start


class RunLock:
    """The lock of one directory; `with RunLock(dir, print_fn):` holds it for the block.

    Args:
        directory: the run or output directory (created if missing; removed
            again on release if the lock file was all it held).
        print_fn: where the take-over line goes.
        flag: the flag that chose the directory (messages).
    """

    def __init__(
        self, directory: str, print_fn: Callable[[str], None] = print, flag: str = "--output_dir"
    ):
        self.directory = directory
        self.path = os.path.join(directory, LOCK_FILE)
        self.print_fn = print_fn
        self.flag = flag
        self.me = this_process()
        self._fd: Optional[int] = None
        self._created: list[str] = []  # directories made for the lock, innermost first
        self._heartbeat: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._beat = self.me.heartbeat

    # ----------------------------------------------------------------- public
    def acquire(self) -> "RunLock":
        """Takes the lock.

        Raises:
            RunLocked: a live process holds it (nothing is changed).
            RunError: the lock file cannot be written (a full disk): nothing
                is left behind, neither the file nor a directory created for it.
        """
        self._created = _missing_directories(self.directory)
        try:
            fileio.makedirs(self.directory)
            if fileio.is_url(self.path) or not self._acquire_flock():
                self._acquire_file()
        except RunLocked:
            self._remove_created_directory()
            raise
        except OSError as error:
            self._remove_created_directory()
            raise RunError(
                f"Could not write {error.filename or self.path}: {error.strerror or error}. "
                f"Nothing was written in {self.directory}; free some space and re-run the "
                "same command."
            ) from None
        return self

    def release(self) -> None:
        """Gives the lock back (removing the lock file); safe to call twice."""
        if self._fd is not None:
            try:
                os.remove(self.path)  # before unlocking: see _acquire_flock
            except OSError:
                pass
            os.close(self._fd)  # releases the flock
            self._fd = None
        elif self._heartbeat is not None:
            self._stop.set()
            self._heartbeat.join()
            self._heartbeat = None
            if self._read_holder() == self._current():
                fileio.remove(self.path)
        self._remove_created_directory()

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    # ---------------------------------------------------------------- details
    def _refuse(self, holder: Optional[Holder]) -> RunLocked:
        who = (
            holder.describe() + (f" ({holder.command})" if holder.command else "")
            if holder
            else "another process"
        )
        return RunLocked(
            f"{self.flag}={self.directory} is in use by {who}. Wait for that run to "
            f"end or stop it, or choose another {self.flag}."
        )

    def _take_over(self, holder: Optional[Holder], why: str) -> None:
        if holder is not None:
            self.print_fn(
                f"Taking over the lock of {self.directory} from {holder.describe()}, {why}."
            )

    def _acquire_flock(self) -> bool:
        """Locks with flock; False where the file system does not support it."""
        import fcntl

        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = Holder.parse(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
                os.close(fd)
                raise self._refuse(holder)
            except OSError as error:
                os.close(fd)
                if error.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                    return False
                raise
            # A releasing holder removes the file before unlocking it: if the
            # locked file is no longer the one at `path`, try again.
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            previous = Holder.parse(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, self.me.to_json().encode(), 0)
                os.fsync(fd)
            except OSError as error:
                # Held, but unwritable (a full disk): the file goes, before the
                # lock is let go (see release), an empty file with it.
                os.remove(self.path)
                os.close(fd)
                raise OSError(error.errno, error.strerror, self.path) from None
            self._take_over(previous, "which ended without releasing it")
            self._fd = fd
            return True

    def _read_holder(self) -> Optional[Holder]:
        try:
            with fileio.open_file(self.path, "r") as f:
                return Holder.parse(f.read())
        except Exception:  # gone, or unreadable: nobody we can name
            return None

    def _current(self) -> Holder:
        return dataclasses.replace(self.me, heartbeat=self._beat)

    def _write(self) -> None:
        tmp = f"{self.path}.{self.me.pid}.tmp"
        with fileio.open_file(tmp, "w") as f:
            f.write(self._current().to_json())
        fileio.replace(tmp, self.path)

    def _acquire_file(self) -> None:
        """The lock file itself as the lock (no flock), with a heartbeat."""
        holder = self._read_holder() if fileio.exists(self.path) else None
        if holder is not None:
            if holder.host == self.me.host:
                if _runs(holder):
                    raise self._refuse(holder)
                self._take_over(holder, "which no longer runs")
            else:
                age = time.time() - (holder.heartbeat or 0.0)
                if age < STALE_SECONDS:
                    raise self._refuse(holder)
                self._take_over(holder, f"whose last heartbeat is {age / 60:.0f} minutes old")
        self._beat = time.time()
        self._write()
        time.sleep(0.2)  # a concurrent writer's file replaces ours within this time
        if self._read_holder() != self._current():
            raise self._refuse(self._read_holder())
        self._stop.clear()
        self._heartbeat = threading.Thread(
            target=self._beat_loop, daemon=True, name="run-lock-heartbeat"
        )
        self._heartbeat.start()

    def _beat_loop(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            try:
                self._beat = time.time()
                self._write()
            except Exception:  # a transient storage error: the next beat retries
                pass

    def _remove_created_directory(self) -> None:
        """Removes the directories the lock created, if they are still empty."""
        for directory in self._created:
            if not fileio.isdir(directory) or fileio.listdir(directory):
                break
            try:
                os.rmdir(directory) if not fileio.is_url(directory) else fileio.remove(directory)
            except OSError:
                break
        self._created = []


def _missing_directories(directory: str) -> list[str]:
    """`directory` and those of its parents that do not exist, innermost first."""
    missing = []
    while directory and not fileio.exists(directory):
        missing.append(directory)
        parent = os.path.dirname(directory.rstrip("/"))
        if parent == directory or fileio.is_url(directory):
            break
        directory = parent
    return missing
