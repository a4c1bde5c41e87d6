import os
import platform
import subprocess
import sys

import pytest

from tools import huge_pages
from tools.huge_pages import TUNABLE, asked_for, reexec_environment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_reexec_environment_adds_the_tunable_once_and_keeps_the_rest():
    env = reexec_environment({"PATH": "/bin"}, "Linux", "glibc", "madvise")
    assert env == {"PATH": "/bin", "GLIBC_TUNABLES": TUNABLE}
    env = reexec_environment(
        {"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}, "Linux", "glibc", "always"
    )
    assert env["GLIBC_TUNABLES"] == f"glibc.malloc.arena_max=2:{TUNABLE}"
    # Already set (the re-executed process, or the user's own choice): nothing to do.
    assert reexec_environment({"GLIBC_TUNABLES": TUNABLE}, "Linux", "glibc", "madvise") is None
    assert (
        reexec_environment(
            {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}, "Linux", "glibc", "madvise"
        )
        is None
    )


@pytest.mark.parametrize(
    "system, libc, mode",
    [
        ("Darwin", "", "madvise"),  # not Linux
        ("Linux", "musl", "madvise"),  # not glibc
        ("Linux", "glibc", "never"),  # THP disabled by the kernel
        ("Linux", "glibc", None),  # no THP at all
    ],
)
def test_reexec_environment_leaves_other_setups_alone(system, libc, mode):
    assert reexec_environment({}, system, libc, mode) is None


@pytest.mark.parametrize(
    "argv, asked",
    [
        (["tool"], False),  # the default
        (["tool", "--mode=inference", "--steps", "3"], False),  # other flags only
        (["tool", "--huge_pages"], True),
        (["tool", "--steps=3", "--huge_pages=true", "x"], True),
        (["tool", "--huge_pages", "--nohuge_pages"], False),  # the last one wins
        (["tool", "--huge_pages=maybe"], False),  # left to the tool's parsing
    ],
)
def test_only_the_flag_asks_for_it(argv, asked):
    assert asked_for(argv) is asked


def test_the_module_loads_neither_tensorflow_nor_the_package():
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, tools.huge_pages\n"
            "print(sorted(m for m in ('tensorflow', 'electra_tf', 'keras') if m in sys.modules))",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert done.stdout.split() == ["[]"]


def test_refuses_to_run_after_tensorflow_is_imported(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow", sys.modules.get("tensorflow", object()))
    with pytest.raises(RuntimeError, match="before TensorFlow"):
        huge_pages.reexec_for_huge_pages(["tool", "--huge_pages"])
    huge_pages.reexec_for_huge_pages(["tool"])  # not asked for: nothing to refuse


@pytest.mark.skipif(
    reexec_environment(
        {}, platform.system(), platform.libc_ver()[0], huge_pages.transparent_huge_page_mode()
    )
    is None,
    reason="needs Linux, glibc and transparent huge pages",
)
@pytest.mark.parametrize("flag", ["", "--huge_pages"])
def test_process_reexecutes_itself_only_when_asked(flag):
    script = (
        "import os, sys\n"
        "print('start', flush=True)\n"
        "from tools.huge_pages import reexec_for_huge_pages\n"
        "reexec_for_huge_pages()\n"
        "print(os.environ.get('GLIBC_TUNABLES', ''), sys.argv[1:])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    arguments = ["a b", "--flag=1"] + ([flag] if flag else [])
    done = subprocess.run(
        [sys.executable, "-c", script, *arguments],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    lines = done.stdout.splitlines()
    if not flag:  # the default: the process runs as started
        assert lines == ["start", f" {arguments}"]
    else:  # printed once before the exec, then the new process runs from the top
        assert lines == ["start", "start", f"{TUNABLE} {arguments}"]
