"""Backs a tool's large buffers with transparent huge pages, when asked (Linux, glibc).

A training step streams gigabytes of activations through buffers that glibc's
malloc maps with ordinary 4 KiB pages; on machines whose kernel gives huge
pages only on request (`/sys/kernel/mm/transparent_hugepage/enabled` set to
`madvise`, a common default) every pass over them pays TLB misses. glibc asks
for huge pages when the tunable `glibc.malloc.hugetlb=1` is set, but reads
tunables only at process start. The simplest way is to start the process with
it:

    GLIBC_TUNABLES=glibc.malloc.hugetlb=1 python pretrain.py ...

For the benchmark, `--huge_pages` does the same from inside:
`python -m tools.benchmark --huge_pages` re-executes itself once, with the
same interpreter and arguments, with the tunable added to `GLIBC_TUNABLES`.
The re-execution happens at the top of the tool's `__main__` module, before
TensorFlow (or `electra_tf`, which imports it) is imported; `reexec_for_huge_pages`
refuses to run later. On a 2-core Xeon this made the small model's XLA
training step 1.5-3% faster.

Without the flag nothing happens: re-executing a process surprises debuggers
and job launchers. Other platforms and C libraries are left alone. This
module imports only the standard library and absl's flags.
"""

from __future__ import annotations

import os
import platform
import sys
from typing import Mapping, Optional, Sequence

from absl import flags

TUNABLE = "glibc.malloc.hugetlb=1"
FLAG = "huge_pages"
FLAG_HELP = (
    "Re-execute this process once at start-up, before TensorFlow is imported, with "
    f"GLIBC_TUNABLES={TUNABLE}, so large buffers get transparent huge pages (Linux "
    "with glibc and THP enabled; elsewhere nothing happens)."
)
_THP_MODE = "/sys/kernel/mm/transparent_hugepage/enabled"


def transparent_huge_page_mode() -> Optional[str]:
    """The kernel's THP mode (`always`, `madvise` or `never`), or None if unknown."""
    try:
        with open(_THP_MODE) as f:
            text = f.read()
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1 : end] if 0 <= start < end else None


def asked_for(argv: Sequence[str]) -> bool:
    """Whether a command line (program name first) sets `--huge_pages`.

    Read on its own, before the tool's flags are defined (they need
    TensorFlow); absl's syntax: `--huge_pages`, `--huge_pages=true`,
    `--nohuge_pages`, and `--flagfile`.
    """
    early = flags.FlagValues()
    flags.DEFINE_boolean(FLAG, False, FLAG_HELP, flag_values=early)
    try:
        early(list(argv), known_only=True)
    except flags.Error:
        return False  # the tool's own parsing reports the error
    return bool(early[FLAG].value)


def reexec_environment(
    environ: Mapping[str, str], system: str, libc: str, thp_mode: Optional[str]
) -> Optional[dict]:
    """The environment to re-execute with, or None to keep the process as it is.

    Args:
        environ: the current environment (a mapping).
        system: `platform.system()`.
        libc: the C library's name from `platform.libc_ver()`.
        thp_mode: `transparent_huge_page_mode()`.
    """
    tunables = environ.get("GLIBC_TUNABLES", "")
    if (
        system != "Linux"
        or libc != "glibc"
        or thp_mode in (None, "never")
        or "glibc.malloc.hugetlb" in tunables
    ):
        return None
    env = dict(environ)
    env["GLIBC_TUNABLES"] = f"{tunables}:{TUNABLE}" if tunables else TUNABLE
    return env


def reexec_for_huge_pages(argv: Optional[Sequence[str]] = None) -> None:
    """With `--huge_pages` in `argv`, re-executes this process with `TUNABLE` set.

    Same interpreter, same arguments (`sys.orig_argv`). Call it first thing
    in a tool's `__main__` block: nothing done before it survives the exec.
    Returns without doing anything without the flag, when
    `reexec_environment` says so, and in the re-executed process (its
    tunables already hold the setting).

    Args:
        argv: the command line, program name first (default `sys.argv`).

    Raises:
        RuntimeError: called after TensorFlow was imported (the exec would
            throw away the import, and callers are promised it comes first).
    """
    if not asked_for(sys.argv if argv is None else argv):
        return
    if "tensorflow" in sys.modules:
        raise RuntimeError("reexec_for_huge_pages must run before TensorFlow is imported.")
    env = reexec_environment(
        os.environ, platform.system(), platform.libc_ver()[0], transparent_huge_page_mode()
    )
    if env is None:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, sys.orig_argv, env)
