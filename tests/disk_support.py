"""A real full disk for the tests: a small tmpfs when the tests run as root, else a stand-in.

`small_disk(path)` mounts a tmpfs of a few megabytes at `path` and always
unmounts it; where mounting is not permitted it yields False and the test
makes the write raise OSError(ENOSPC) instead (`fill` tells which).
"""

import contextlib
import errno
import os
import subprocess


@contextlib.contextmanager
def small_disk(path, size="16m"):
    """Yields True with a tmpfs of `size` at `path` (created), False where none can be mounted."""
    os.makedirs(path, exist_ok=True)
    mounted = (
        os.geteuid() == 0
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
            capture_output=True,
        ).returncode
        == 0
    )
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], check=True)


def fill(path, leave=0):
    """Writes `path/filler` until the disk has about `leave` bytes free; returns the filler."""
    filler = os.path.join(path, "filler")
    block = b"\0" * (1 << 16)
    with open(filler, "wb", buffering=0) as f:
        while True:
            free = os.statvfs(path).f_bavail * os.statvfs(path).f_frsize
            if free <= leave:
                break
            try:
                f.write(block[: max(1, min(len(block), free - leave))])
            except OSError as error:
                assert error.errno == errno.ENOSPC
                break
    return filler


def no_space(path):
    """The OSError a write to `path` raises on a full disk."""
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
