"""JSON-array files (KLUE's layout) read one object at a time, and read like JSON lines."""

import json

import numpy as np
import pytest

from electra_tf.finetuning.classification import json_arrays
from electra_tf.finetuning.classification.data import load_user_files
from electra_tf.finetuning.classification.json_arrays import iter_array_objects, starts_with_array
from electra_tf.finetuning.kind.files import FileTaskOptions, TaskDataError

ROWS = [
    {
        "guid": "klue-nli-v1_dev_00000",
        "premise": "흡연자분들은 발코니에서",
        "gold_label": "neutral",
    },
    {"guid": "b", "premise": 'a "quoted" [text] {x}', "gold_label": "entailment"},
    {"guid": "c", "premise": "three", "gold_label": "contradiction", "nested": {"a": [1, 2]}},
]


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 16])
def test_objects_and_their_lines_in_any_chunk_size(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(json_arrays, "CHUNK_CHARS", chunk)
    # Laid out as KLUE writes its files: json.dump(..., indent=4, ensure_ascii=False).
    path = _write(tmp_path / "dev.json", json.dumps(ROWS, indent=4, ensure_ascii=False))
    read = list(iter_array_objects(path))
    assert [r for _, r in read] == ROWS
    # Each object's line: where its "{" is (line 2, then after 5 lines each, nested longer).
    text = open(path, encoding="utf-8").read().split("\n")
    assert [text[line - 1].strip() for line, _ in read] == ["{", "{", "{"]
    assert [line for line, _ in read] == [2, 7, 12]
    assert starts_with_array(path)


def test_a_compact_array_an_empty_one_and_a_byte_order_mark(tmp_path):
    path = _write(tmp_path / "a.json", "\ufeff" + json.dumps(ROWS, ensure_ascii=False))
    assert [r for _, r in iter_array_objects(path)] == ROWS
    assert [line for line, _ in iter_array_objects(path)] == [1, 1, 1]
    assert list(iter_array_objects(_write(tmp_path / "e.json", " [ ] \n"))) == []
    assert not starts_with_array(_write(tmp_path / "l.jsonl", '{"a": 1}\n{"a": 2}\n'))


@pytest.mark.parametrize(
    "text, line, problem",
    [
        ('{"a": 1}', 1, "does not start with '['"),
        ('[\n{"a": 1},\n2\n]', 3, "'2' where an object belongs"),
        ('[\n{"a": 1}\n{"a": 2}\n]', 3, "after an object, where ',' or ']' belongs"),
        ('[\n{"a": 1}\n]\nx', 4, "text after the array"),
        ('[\n{"a": 1},\n{"a": tru}\n]', 3, "not valid JSON"),
        ('[\n{"a": 1},\n{"a": "never closes', 3, "not valid JSON"),
        ('[\n{"a": 1}', 2, "the end of the file after an object"),
    ],
)
def test_refusals_name_the_file_and_line(tmp_path, text, line, problem):
    path = _write(tmp_path / "bad.json", text)
    with pytest.raises(TaskDataError) as refused:
        list(iter_array_objects(path))
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"{path}, line {line}: "), message
    assert problem in message
    assert "expected a JSON array of objects" in message


def test_an_object_longer_than_the_limit_is_refused_before_it_is_read_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(json_arrays, "CHUNK_CHARS", 16)
    long = {"guid": "x", "premise": "y" * 500}
    path = _write(tmp_path / "long.json", json.dumps([{"a": 1}, long]))
    with pytest.raises(TaskDataError, match=r"line 1: an object longer than --max_row_chars=100"):
        list(iter_array_objects(path, max_row_chars=100))
    assert len(list(iter_array_objects(path, max_row_chars=1000))) == 2


def test_a_large_array_is_streamed(tmp_path, monkeypatch):
    """Memory holds one object and one chunk: the buffer never grows with the file."""
    rows = [{"guid": str(i), "title": "제목 " * 20, "label": "정치"} for i in range(3000)]
    path = _write(tmp_path / "big.json", json.dumps(rows, ensure_ascii=False, indent=4))
    largest = []
    original = json_arrays._Stream.more

    def watched(self):
        largest.append(len(self.buffer))
        return original(self)

    monkeypatch.setattr(json_arrays._Stream, "more", watched)
    assert sum(1 for _ in iter_array_objects(path)) == 3000
    assert max(largest) < 2 * json_arrays.CHUNK_CHARS


def test_the_users_json_array_file_is_read_like_json_lines(tmp_path):
    train = _write(tmp_path / "train.json", json.dumps(ROWS, ensure_ascii=False, indent=2))
    lines = _write(
        tmp_path / "dev.jsonl", "\n".join(json.dumps(r, ensure_ascii=False) for r in ROWS)
    )
    options = FileTaskOptions(text_column="premise", label_column="gold_label", index_column="guid")
    task, data = load_user_files("nli", options, train, lines)
    assert task.label_names == ["contradiction", "entailment", "neutral"]
    assert data.train.texts_a == [r["premise"] for r in ROWS]
    np.testing.assert_array_equal(data.train.labels, [2, 1, 0])
    np.testing.assert_array_equal(data.dev["dev"].labels, data.train.labels)
    bad = _write(tmp_path / "bad.json", '[{"premise": "x"}]')
    with pytest.raises(TaskDataError, match="bad.json: no column 'gold_label'"):
        load_user_files("nli", options, bad)


def test_a_mistake_inside_a_long_object_is_named_as_one_not_read_to_the_limit(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(json_arrays, "CHUNK_CHARS", 16)
    text = '[\n{"a": 1},\n{"a": tru, "b": "' + "y" * 5000 + '"}\n]'
    path = _write(tmp_path / "typo.json", text)
    reads = []
    original = json_arrays._Stream.more

    def counted(self):
        reads.append(len(self.buffer))
        return original(self)

    monkeypatch.setattr(json_arrays._Stream, "more", counted)
    with pytest.raises(TaskDataError, match=r"typo.json, line 3: not valid JSON \(Expecting value"):
        list(iter_array_objects(path, max_row_chars=4000))
    assert max(reads) < 100  # refused where the mistake is, not after 4,000 characters
