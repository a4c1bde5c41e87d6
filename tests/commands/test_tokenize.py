"""The tokenize command: one line of ids (or pieces) per line of standard input."""

import os
import subprocess
import sys

import pytest

from electra_tf.tokenization import WordPieceTokenizer

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOKENS = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "中",
    "国",
    "，",
    "！",
    ",",
    "!",
    "hello",
    "한국어",
    "문장",
    "##입니다",
]


def _run(args, text):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    return subprocess.run(
        [sys.executable, "-m", "electra_tf.commands.tokenize", *args],
        input=text,
        capture_output=True,
        text=True,
        cwd=PROJECT,
        env=env,
        timeout=300,
    )


@pytest.mark.slow
def test_ids_and_pieces_of_each_line(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(TOKENS) + "\n", encoding="utf-8")
    lines = ["中国，Hello！", "", "한국어 문장입니다"]
    done = _run(
        [f"--vocab_file={vocab}", "--normalization=bert", "--do_lower_case=false", "--pieces"],
        "\n".join(lines) + "\n",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["中 国 ， [UNK] ！", "", "한국어 문장 ##입니다"]
    done = _run([f"--vocab_file={vocab}", "--normalization=bert"], "\n".join(lines) + "\n")
    expected = WordPieceTokenizer(str(vocab), normalization="bert").tokenize_to_lists(lines)
    assert done.stdout.splitlines() == [" ".join(map(str, ids)) for ids in expected]
    assert expected[0] == [5, 6, 7, 11, 8]  # uncased: Hello -> hello; ，！ stay full-width
    # Today's default folds the full-width punctuation.
    done = _run([f"--vocab_file={vocab}"], "中国，Hello！\n")
    assert done.stdout.split() == ["5", "6", "9", "11", "10"]


def test_a_bad_vocabulary_is_one_line(tmp_path):
    done = _run([f"--vocab_file={tmp_path / 'missing.txt'}"], "text\n")
    assert done.returncode == 2
    assert "--vocab_file: vocab file" in done.stderr and "does not exist" in done.stderr
