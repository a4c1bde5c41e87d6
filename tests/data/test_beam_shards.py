"""Shards built on Apache Beam (electra_tf/data/beam_shards.py) against the local builder.

The Beam tests run on the DirectRunner when `apache_beam` is importable and
are skipped otherwise.
"""

import os
import random
import subprocess
import sys

import pytest

from electra_tf.data.shard_build import write_shards
from electra_tf.data.shard_layout import read_metadata, shard_paths

WORDS = [f"w{i}" for i in range(100)]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
PROJECT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def beam_shards():
    pytest.importorskip("apache_beam")
    from electra_tf.commands import beam_shards

    return beam_shards


@pytest.fixture
def corpus(tmp_path):
    """Two text files of random documents and a vocabulary; returns their paths."""
    rng = random.Random(0)
    paths = []
    for name, lines in (("a.txt", 900), ("b.txt", 500)):
        text = "\n".join(
            ""
            if rng.random() < 0.08
            else " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 9)))
            for _ in range(lines)
        )
        (tmp_path / name).write_text(text, encoding="utf-8")
        paths.append(str(tmp_path / name))
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return {"files": paths, "vocab_file": str(tmp_path / "vocab.txt")}


def local_build(corpus, output_dir, **kwargs):
    return write_shards(
        corpus["files"],
        str(output_dir),
        {"vocab_file": corpus["vocab_file"], "do_lower_case": True},
        max_seq_length=24,
        seed=7,
        **kwargs,
    )


def beam_build(beam_shards, corpus, output_dir, *args):
    """Runs the command line; returns its exit code."""
    return beam_shards.main(
        [
            f"--corpus={','.join(corpus['files'])}",
            f"--vocab_file={corpus['vocab_file']}",
            f"--output_dir={output_dir}",
            "--max_seq_length=24",
            "--seed=7",
            "--runner=DirectRunner",
            *args,
        ]
    )


def shard_files(output_dir):
    """{name: bytes} of the shards listed in the build's metadata."""
    out = {}
    for path in shard_paths(output_dir):
        with open(path, "rb") as f:
            out[os.path.basename(path)] = f.read()
    return out


def assert_same_build(local_dir, beam_dir):
    assert shard_files(beam_dir) == shard_files(local_dir)
    local, beam = read_metadata(local_dir), read_metadata(beam_dir)
    assert beam["shards"] == local["shards"] and beam["num_examples"] == local["num_examples"]
    # The rest of the metadata too, but for how the run went.
    for meta in (local, beam):
        del meta["seconds"], meta["reused_shards"]
    assert beam == local


def test_beam_writes_the_local_builders_shards(tmp_path, beam_shards, corpus):
    local = local_build(corpus, tmp_path / "local", num_shards=3)
    assert local["num_examples"] > 0
    assert beam_build(beam_shards, corpus, tmp_path / "beam", "--num_shards=3") == 0
    assert_same_build(tmp_path / "local", tmp_path / "beam")
    names = sorted(os.listdir(tmp_path / "beam"))
    assert names == sorted(os.listdir(tmp_path / "local"))  # no temporary files left


def test_text_range_build_and_reuse_of_finished_shards(tmp_path, beam_shards, corpus, capsys):
    local_build(corpus, tmp_path / "local", num_shards=2, text_range=(0.2, 0.9))
    out = tmp_path / "beam"
    args = ("--num_shards=2", "--text_range=0.2,0.9")
    assert beam_build(beam_shards, corpus, out, *args) == 0
    assert_same_build(tmp_path / "local", out)

    # One shard lost: the re-run rebuilds it and leaves the other alone.
    names = sorted(shard_files(out))
    os.remove(out / names[0])
    kept_mtime = os.stat(out / names[1]).st_mtime_ns
    capsys.readouterr()
    assert beam_build(beam_shards, corpus, out, *args) == 0
    assert "reusing 1 finished shard(s); building 1" in capsys.readouterr().out
    assert os.stat(out / names[1]).st_mtime_ns == kept_mtime
    assert read_metadata(out)["reused_shards"] == 1
    assert_same_build(tmp_path / "local", out)

    # Nothing left to build: the pipeline only writes the metadata.
    assert beam_build(beam_shards, corpus, out, *args) == 0
    assert read_metadata(out)["reused_shards"] == 2
    assert_same_build(tmp_path / "local", out)


def test_errors_before_the_pipeline_are_one_line(tmp_path, beam_shards, corpus, capsys):
    local_build(corpus, tmp_path / "out", num_shards=2)
    assert beam_build(beam_shards, corpus, tmp_path / "out", "--num_shards=3") == 2
    error = capsys.readouterr().err
    assert error.startswith("error: output directory") and "different build" in error
    assert error.count("\n") == 1

    assert beam_build(beam_shards, corpus, tmp_path / "new", "--runner=DataflowRunner") == 2
    assert "cannot read local paths" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()

    # A boolean's value as a separate argument would reach Beam and be ignored.
    assert beam_build(beam_shards, corpus, tmp_path / "new", "--do_lower_case", "false") == 2
    error = capsys.readouterr().err
    assert "'false'" in error and "--do_lower_case=false" in error
    assert not (tmp_path / "new").exists()


def test_missing_beam_is_one_line_with_the_install_command(tmp_path):
    # Runs with or without Beam installed: the import is blocked in the child.
    code = (
        "import runpy, sys; sys.modules['apache_beam'] = None; "
        "runpy.run_module('electra_tf.commands.beam_shards', run_name='__main__')"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, "--corpus=x", "--vocab_file=v", "--output_dir=o"],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1
    # One line of ours (TensorFlow, imported with the package, may log its start-up first).
    ours = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(ours) == 1 and "Traceback" not in result.stderr
    assert result.stderr.endswith(ours[0] + "\n")
    assert 'pip install "electra-tf[beam]"' in result.stderr
    assert "pip install apache-beam" in result.stderr
