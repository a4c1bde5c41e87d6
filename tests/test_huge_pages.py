import os
import platform
import subprocess
import sys

import pytest

from electra_tf import huge_pages
from electra_tf.huge_pages import OPT_IN, TUNABLE, reexec_environment


def test_reexec_environment_adds_the_tunable_once_and_keeps_the_rest():
    env = reexec_environment({"PATH": "/bin", OPT_IN: "1"}, "Linux", "glibc", "madvise")
    assert env == {"PATH": "/bin", OPT_IN: "1", "GLIBC_TUNABLES": TUNABLE}
    env = reexec_environment({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2", OPT_IN: "1"},
                             "Linux", "glibc", "always")
    assert env["GLIBC_TUNABLES"] == f"glibc.malloc.arena_max=2:{TUNABLE}"
    # Already set (the re-executed process, or the user's own choice): nothing to do.
    assert reexec_environment({"GLIBC_TUNABLES": TUNABLE, OPT_IN: "1"}, "Linux", "glibc",
                              "madvise") is None
    assert reexec_environment({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0", OPT_IN: "1"}, "Linux",
                              "glibc", "madvise") is None


@pytest.mark.parametrize("environ, system, libc, mode", [
    ({}, "Linux", "glibc", "madvise"),                 # not asked for: the default
    ({OPT_IN: "0"}, "Linux", "glibc", "madvise"),      # asked not to
    ({OPT_IN: "1"}, "Darwin", "", "madvise"),          # not Linux
    ({OPT_IN: "1"}, "Linux", "musl", "madvise"),       # not glibc
    ({OPT_IN: "1"}, "Linux", "glibc", "never"),        # THP disabled by the kernel
    ({OPT_IN: "1"}, "Linux", "glibc", None),           # no THP at all
])
def test_reexec_environment_leaves_other_setups_alone(environ, system, libc, mode):
    assert reexec_environment(environ, system, libc, mode) is None


@pytest.mark.skipif(reexec_environment({OPT_IN: "1"}, platform.system(), platform.libc_ver()[0],
                                       huge_pages.transparent_huge_page_mode()) is None,
                    reason="needs Linux, glibc and transparent huge pages")
@pytest.mark.parametrize("opt_in", ["", "1"])
def test_process_reexecutes_itself_only_when_asked(opt_in):
    script = ("import os, sys\n"
              "print('start', flush=True)\n"
              "from electra_tf.huge_pages import use_huge_page_malloc\n"
              "use_huge_page_malloc()\n"
              "print(os.environ.get('GLIBC_TUNABLES', ''), sys.argv[1:])\n")
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", OPT_IN)}
    env[OPT_IN] = opt_in
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", script, "a b", "--flag=1"], env=env, cwd=root,
                          capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    if not opt_in:  # the default: the process runs as started
        assert lines == ["start", " ['a b', '--flag=1']"]
    else:  # printed once before the exec, then the new process runs from the top
        assert lines == ["start", "start", f"{TUNABLE} ['a b', '--flag=1']"]
