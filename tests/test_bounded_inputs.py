"""One bound on every reader's records: a 50 MB line, field, context or word is refused.

Each reader runs in a subprocess on a file holding one 50 MB record; the test
checks the one-line message (file and line) and the subprocess's peak
resident memory (`resource.getrusage`), which must stay under 1.5 GB (each
takes about 4 s, most of it importing TensorFlow).
"""

import io
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from electra_tf.bounded_lines import bounded_byte_lines, bounded_lines, utf8_chars

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIG = 50_000_000  # characters of the oversize record
PEAK_LIMIT_KB = 1_500_000  # ru_maxrss is in KiB on Linux


def _run_reader(code: str) -> tuple[list[str], int]:
    """(the error messages the code printed, peak RSS in KiB) of `code` run in a fresh Python."""
    script = textwrap.dedent(code) + textwrap.dedent(
        """
        import resource
        print("PEAK", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        """
    )
    env = dict(os.environ, PYTHONPATH=REPOSITORY, CUDA_VISIBLE_DEVICES="")
    # A process's peak (ru_maxrss) starts at the resident size of the process it
    # was forked from: the reader is started from a small Python, not from pytest.
    starter = (
        "import subprocess, sys; sys.exit(subprocess.call([sys.executable, '-c', sys.argv[1]]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", starter, script],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    messages = [line[len("ERROR ") :] for line in lines if line.startswith("ERROR ")]
    peak = int(next(line.split()[1] for line in lines if line.startswith("PEAK ")))
    return messages, peak


def _refused(call: str, error: str) -> str:
    """Code that runs `call` and prints the message of the `error` it raises."""
    return f"""
    try:
        {call}
    except {error} as refused:
        print("ERROR", str(refused).replace("\\n", " "))
    else:
        print("ERROR none")
    """.replace("\n    ", "\n")


# ----------------------------------------------------------------- the helper


def test_bounded_lines_counts_characters_without_the_line_end():
    text = "abc\nabcd\n\nxy"
    f = io.StringIO(text)
    assert list(bounded_lines(f, "t.txt", 4, "--max_row_chars")) == [
        (1, "abc"),
        (2, "abcd"),
        (3, ""),
        (4, "xy"),
    ]
    f = io.StringIO("abc\nabcde\nab\n")
    lines = bounded_lines(f, "t.txt", 4, "--max_row_chars", KeyError)
    assert next(lines) == (1, "abc")
    with pytest.raises(KeyError, match=r"t\.txt, line 2: the line is longer than "):
        next(lines)
    # The last line, without an end, is bounded too.
    with pytest.raises(ValueError, match="line 2"):
        list(bounded_lines(io.StringIO("a\nabcde"), "t.txt", 4, "--max_row_chars"))


def test_bounded_byte_lines_counts_utf8_characters():
    korean = "가나다라"  # 4 characters, 12 bytes
    assert utf8_chars(korean.encode()) == 4 and utf8_chars(b"") == 0
    data = (korean + "\n" + "ab\n" + korean + "마\n").encode()
    lines = bounded_byte_lines(io.BytesIO(data), "t.txt", 4, "--max_row_chars")
    assert next(lines) == (1, (korean + "\n").encode())
    assert next(lines) == (2, b"ab\n")
    with pytest.raises(ValueError, match=r"t\.txt, line 3: the line is longer than "):
        next(lines)
    # Four-byte characters: a line of exactly `limit` of them is whole.
    emoji = "😀" * 4
    got = list(bounded_byte_lines(io.BytesIO(emoji.encode()), "e", 4, "--max_row_chars"))
    assert got == [(1, emoji.encode())]
    # Bytes that never start a character cannot make the line unbounded.
    with pytest.raises(ValueError, match="line 1"):
        list(bounded_byte_lines(io.BytesIO(b"\x80" * 100), "x", 4, "--max_row_chars"))


# ------------------------------------------------------- every reader, 50 MB


def _write_big(path, before: str, after: str, fill: str = "word ") -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(before)
        f.write(fill * (BIG // len(fill)))
        f.write(after)


def test_a_50_mb_json_line_is_refused_with_little_memory(tmp_path):
    path = tmp_path / "train.jsonl"
    _write_big(path, '{"text": "short", "label": "1"}\n{"text": "', '", "label": "0"}\n')
    [message], peak = _run_reader(
        "from electra_tf.finetuning.classification.data import FileTaskOptions, "
        "TaskDataError, load_user_files\n"
        + _refused(f"load_user_files('t', FileTaskOptions(), {str(path)!r})", "TaskDataError")
    )
    assert message == (
        f"{path}, line 2: the line is longer than --max_row_chars=1,048,576 characters; "
        "shorten that text or raise the limit."
    )
    assert peak < PEAK_LIMIT_KB, peak


def test_a_50_mb_squad_context_is_refused_with_little_memory(tmp_path):
    path = tmp_path / "train.json"
    head = '{"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "'
    tail = '", "qas": [{"id": "q", "question": "why?", "answers": [{"text": "word", '
    tail += '"answer_start": 0}]}]}]}]}'
    _write_big(path, head, tail)
    [message], peak = _run_reader(
        "from electra_tf.finetuning.question_answering.data import SquadDataError, "
        "read_squad_json\n"
        + _refused(f"read_squad_json({str(path)!r}, '1.1', True)", "SquadDataError")
    )
    assert message == (
        f"{path}: data[0].paragraphs[0] (50,000,000 characters): the context is longer than "
        "--max_row_chars=1,048,576 characters; shorten that text or raise the limit."
    )
    assert peak < PEAK_LIMIT_KB, peak


def test_a_squad_question_over_the_bound_and_a_file_over_its_size_are_refused(
    tmp_path, monkeypatch
):
    from electra_tf.finetuning.question_answering import data as squad_data

    document = {
        "data": [
            {
                "paragraphs": [
                    {
                        "context": "a short context",
                        "qas": [
                            {
                                "id": "q1",
                                "question": "short?",
                                "answers": [],
                                "is_impossible": True,
                            },
                            {
                                "id": "q2",
                                "question": "x" * 21,
                                "answers": [{"text": "short", "answer_start": 2}],
                            },
                        ],
                    }
                ]
            }
        ]
    }
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(document))
    with pytest.raises(squad_data.SquadDataError) as refused:
        squad_data.read_squad_json(str(path), "2.0", False, max_text_chars=20)
    assert str(refused.value).startswith(
        f"{path}: data[0].paragraphs[0].qas[1] (21 characters): the question is longer than "
        "--max_row_chars=20 characters"
    )
    assert len(squad_data.read_squad_json(str(path), "2.0", False, max_text_chars=21).examples) == 2
    # The file is parsed whole, so its size is checked first.
    monkeypatch.setattr(squad_data, "MAX_FILE_BYTES", path.stat().st_size - 1)
    with pytest.raises(squad_data.SquadDataError, match=r"dev\.json: \d[\d,]* bytes, more than"):
        squad_data.read_squad_json(str(path), "2.0", False)


@pytest.mark.parametrize(
    "layout, before, after",
    [
        ("conll", "EU\tB-ORG\nrejects\tO\n\n", "\tO\n"),
        ("sentence_per_line", "EU rejects\tB-ORG O\n", "\tO\n"),
        ("naver_original", "1\t비토리오\tPER_B\n\n1\t", "\t-\n"),
        ("jsonl", '{"tokens": ["EU"], "tags": ["B-ORG"]}\n{"tokens": ["', '"], "tags": ["O"]}\n'),
    ],
    ids=lambda value: value if value.isidentifier() else "",
)
def test_a_50_mb_word_is_refused_in_every_tagging_layout(tmp_path, layout, before, after):
    path = tmp_path / ("train.jsonl" if layout == "jsonl" else "train.tsv")
    _write_big(path, before, after, fill="x")
    line = {"conll": 4, "naver_original": 3}.get(layout, 2)
    [message], peak = _run_reader(
        "from electra_tf.finetuning.tagging.layouts import read_tagged_file\n"
        "from electra_tf.finetuning.classification.data import TaskDataError\n"
        + _refused(f"read_tagged_file({str(path)!r}, 'train', True)", "TaskDataError")
    )
    assert message == (
        f"{path}, line {line}: the line is longer than --max_row_chars=1,048,576 characters; "
        "shorten that text or raise the limit."
    )
    assert peak < PEAK_LIMIT_KB, peak


def test_every_tagging_layout_takes_the_bound_given(tmp_path):
    from electra_tf.finetuning.classification.data import TaskDataError
    from electra_tf.finetuning.tagging.data import load_tagging_files

    path = tmp_path / "train.tsv"
    path.write_text("EU\tB-ORG\nrejects\tO\n\nGerman\tB-MISC\ncall\tO\n")
    definition, data = load_tagging_files("t", str(path), max_line_chars=13)
    assert data.train.sentences == [["EU", "rejects"], ["German", "call"]]
    with pytest.raises(TaskDataError, match=r"train\.tsv, line 4: the line is longer than "):
        load_tagging_files("t", str(path), max_line_chars=12)


def test_a_50_mb_corpus_line_stops_the_vocabulary_and_the_shard_build(tmp_path):
    path = tmp_path / "corpus.txt"
    _write_big(path, "a first sentence.\n\n", "\nthe end.\n")
    messages, peak = _run_reader(
        "from electra_tf.vocab_learning.corpus_text import line_batches\n"
        "from electra_tf.vocab_learning.options import VocabLearningError\n"
        "from electra_tf.data.text_input import iter_piece_lines\n"
        "from electra_tf.data.shard_layout import ShardError\n"
        + _refused(f"list(line_batches([{str(path)!r}], None))", "VocabLearningError")
        + _refused(
            f"list(iter_piece_lines([({str(path)!r}, 0, {BIG + 28})], 'error', "
            "{'replaced_lines': 0}))",
            "ShardError",
        )
    )
    tail = "the line is longer than --max_row_chars=1,048,576 characters; shorten that text "
    tail += "or raise the limit."
    assert messages == [f"{path}, line 3: {tail}", f"input file {str(path)!r}, line 3: {tail}"]
    assert peak < PEAK_LIMIT_KB, peak


def test_the_shard_reader_refuses_a_long_line_inside_a_block_or_at_the_end(tmp_path):
    from electra_tf.data.shard_layout import ShardError
    from electra_tf.data.text_input import iter_piece_lines

    text = "one\n\ntwo three\nfour\n"
    path = tmp_path / "c.txt"
    path.write_text(text)
    stats = {"replaced_lines": 0}
    segments = [(str(path), 0, len(text))]
    assert list(iter_piece_lines(segments, "error", stats, 9)) == [
        "one",
        "",
        "two three",
        "four",
        "",
    ]
    with pytest.raises(ShardError, match=r"c\.txt', line 3: the line is longer than "):
        list(iter_piece_lines(segments, "error", stats, 8))
    path.write_text(text + "a longer last line")
    segments = [(str(path), 0, len(text) + 18)]
    with pytest.raises(ShardError, match=r"c\.txt', line 5: the line is longer than "):
        list(iter_piece_lines(segments, "error", stats, 9))


def test_pretrain_refuses_a_corpus_line_over_its_max_row_chars_in_one_line(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a first sentence.\n\n" + "word " * 20 + "\nthe end.\n")
    done = subprocess.run(
        [
            sys.executable,
            os.path.join(REPOSITORY, "pretrain.py"),
            f"--corpus={corpus}",
            "--max_row_chars=99",
            "--model_size=tiny",
            f"--output_dir={tmp_path}/run",
            f"--data_dir={tmp_path}/data",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=REPOSITORY, CUDA_VISIBLE_DEVICES=""),
    )
    output = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 2, output
    assert output[-2] == (
        f"pretrain.py: error: {corpus}, line 3: the line is longer than --max_row_chars=99 "
        "characters; shorten that text or raise the limit."
    ), output
    assert not any("Traceback" in line for line in output), output


def test_the_first_invalid_utf8_byte_is_found_block_by_block(tmp_path):
    """Line, column, offset and byte as decoding the whole file finds them, whatever the block."""
    from electra_tf.bounded_lines import first_invalid_utf8

    rng = np.random.default_rng(0)
    pieces = ["a", "é", "한", "😀", "\n", "\ufeff"]
    for trial in range(40):
        text = "".join(rng.choice(pieces, size=int(rng.integers(1, 30))))
        data = text.encode()
        if trial % 4:  # a bad byte somewhere: a stray continuation or a cut character
            at = int(rng.integers(0, len(data) + 1))
            data = data[:at] + (b"\x80" if trial % 2 else "한".encode()[:2]) + data[at:]
        path = tmp_path / f"{trial}.txt"
        path.write_bytes(data)
        try:
            data.decode("utf-8")
            expected = None
        except UnicodeDecodeError as error:
            start = error.start
            expected = (
                data.count(b"\n", 0, start) + 1,
                start - (data.rfind(b"\n", 0, start) + 1) + 1,
                start,
                data[start],
            )
        for block in (1, 2, 3, 7, 1 << 20):
            found = first_invalid_utf8(str(path), block)
            got = None if found is None else (found.line, found.column, found.offset, found.byte)
            assert got == expected, (trial, block, data)


@pytest.mark.parametrize("value", [0, -2])
def test_a_bound_that_is_not_positive_is_refused_naming_the_flag(value):
    from electra_tf.errors import RunError
    from electra_tf.finetuning.kind.files import FileTaskOptions

    with pytest.raises(RunError, match=rf"--max_row_chars={value}: must be a positive integer"):
        FileTaskOptions(max_row_chars=value)
