"""The vocab command: a vocabulary learned with the flags pretrain.py shares."""

import os
import subprocess
import sys

from electra_tf.tokenization import load_vocab

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(*args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    return subprocess.run(
        [sys.executable, "-m", "electra_tf.commands.vocab", *args],
        capture_output=True,
        text=True,
        cwd=PROJECT,
        env=env,
        timeout=300,
    )


def test_learns_a_cased_korean_vocabulary_with_unused_slots(tmp_path):
    corpus = tmp_path / "ko.txt"
    words = ["한국어", "문장입니다", "학교에서", "공부합니다", "서울은", "도시입니다", "Seoul"]
    corpus.write_text(
        "\n".join(" ".join(words[(i + j) % 7] for j in range(5)) + "." for i in range(200)) + "\n",
        encoding="utf-8",
    )
    output = tmp_path / "vocab.txt"
    done = _run(
        f"--corpus={corpus}",
        f"--output={output}",
        "--vocab_size=150",
        "--do_lower_case=false",
        "--normalization=bert",
        "--vocab_unused=3",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Wrote {output}: ")
    tokens = load_vocab(str(output))
    assert tokens[:8] == [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        "[unused0]",
        "[unused1]",
        "[unused2]",
    ]
    assert "Seoul" in tokens and len(tokens) <= 150


def test_an_impossible_option_is_one_line_naming_the_flag(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("some text\n", encoding="utf-8")
    done = _run(f"--corpus={corpus}", f"--output={tmp_path / 'v.txt'}", "--vocab_unused=-1")
    assert done.returncode == 2
    assert "error: --vocab_unused=-1: must be >= 0." in done.stderr
    assert not os.path.exists(tmp_path / "v.txt")
