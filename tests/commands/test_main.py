"""One entry point: `python -m electra_tf <command>` / `electra-tf <command>` (electra_tf/__main__.py)."""

import ast
import os
import runpy
import subprocess
import sys

import pytest

from electra_tf import __main__ as entry

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMANDS_DIR = os.path.join(ROOT, "electra_tf", "commands")


def _on_disk() -> dict:
    """{command: first line of its docstring} of every module file in electra_tf/commands/."""
    found = {}
    for name in os.listdir(COMMANDS_DIR):
        if name.endswith(".py") and not name.startswith("_"):
            with open(os.path.join(COMMANDS_DIR, name), encoding="utf-8") as f:
                found[name[:-3]] = ast.get_docstring(ast.parse(f.read())).splitlines()[0]
    return found


def test_no_arguments_and_help_list_every_command_with_its_description(capsys):
    commands = _on_disk()
    assert len(commands) == 15 and {"pretrain", "finetune", "convert", "flops"} <= set(commands)
    for argv in ([], ["--help"], ["-h"]):
        assert entry.main(argv) == 0
        out = capsys.readouterr().out
        assert out.startswith("usage: electra-tf <command> [flags]")
        listed = [line.split(None, 1) for line in out.split("commands:\n")[1].splitlines()]
        assert {name: description for name, description in listed} == commands


def test_an_unknown_command_is_one_line_naming_the_known_ones(capsys):
    assert entry.main(["pretrian", "--model_size=small"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("electra-tf: error: unknown command 'pretrian'; the commands are ")
    assert all(name in line for name in _on_disk())


def _flops_output(capsys, run) -> str:
    with pytest.raises(SystemExit) as exited:
        run()
    assert exited.value.code in (None, 0)
    return capsys.readouterr().out


def test_a_command_runs_as_its_module_does(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["flops.py"])
    direct = _flops_output(
        capsys,
        lambda: runpy.run_module("electra_tf.commands.flops", run_name="__main__", alter_sys=True),
    )
    through = _flops_output(capsys, lambda: entry.run_as_main("flops", []))
    assert through == direct and direct.startswith("size ")
    assert [line.split()[0] for line in direct.splitlines()[1:5]] == [
        "tiny",
        "small",
        "base",
        "large",
    ]
    # Its own checks, under its new name.
    with pytest.raises(SystemExit) as exited:
        entry.run_as_main("flops", ["extra"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.startswith(
        "electra-tf flops: error: unexpected arguments: extra\n"
    )
    assert sys.argv == ["flops.py"]  # the process's arguments are given back


def _python(*arguments, stdin=None):
    """`python <arguments>` in the repository root (TensorFlow's start-up logs silenced)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    output = dict(capture_output=True, text=True, timeout=300)
    return subprocess.run([sys.executable, *arguments], input=stdin, cwd=ROOT, env=env, **output)


@pytest.mark.slow
def test_python_m_electra_tf_lists_and_runs_commands(tmp_path):
    listing = _python("-m", "electra_tf")
    assert listing.returncode == 0, listing.stderr
    assert all(f"  {name} " in listing.stdout for name in _on_disk())
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"]))
    text = "hello world\nworld hello hello\n"
    new = _python("-m", "electra_tf", "tokenize", f"--vocab_file={vocab}", stdin=text)
    old = _python("-m", "electra_tf.commands.tokenize", f"--vocab_file={vocab}", stdin=text)
    assert new.returncode == old.returncode == 0, new.stderr + old.stderr
    assert new.stdout == old.stdout == "5 6\n6 5 5\n"
    # A command's errors and help name it as the entry point's.
    refused = _python("-m", "electra_tf", "tokenize", stdin=text)
    assert refused.returncode != 0 and "electra-tf tokenize" in refused.stderr
    assert "vocab_file" in refused.stderr
    helped = _python("-m", "electra_tf", "pretrain", "--helpshort")
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("Pre-train ELECTRA: text -> WordPiece vocab")
    assert "--corpus" in helped.stdout and "--learning_rate" in helped.stdout
