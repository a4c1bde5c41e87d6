"""Tagging data: CoNLL and JSONL files, tag formats, the words of raw text."""

import json

import pytest

from electra_tf.finetuning.kind.files import TaskDataError
from electra_tf.finetuning.tagging.data import (
    PLAIN,
    PREFIX,
    SUFFIX,
    detect_tag_format,
    load_tagging_files,
    order_tags,
    parse_tag,
    read_conll,
    read_jsonl,
    split_words,
)


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_conll_columns_word_first_tag_last(tmp_path):
    path = _write(
        tmp_path / "train.txt",
        "\ufeff-DOCSTART- -X- -X- O\n\n"
        "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n\n"
        "지미\tNNP\tPER-B\n카터는\tNNP\tPER-I\n"
        "Peter Blackburn\tB-PER\n",
    )  # tabs: the word may hold a space
    split = read_conll(path, "train", labelled=True)
    assert split.sentences == [["EU", "rejects"], ["지미", "카터는", "Peter Blackburn"]]
    assert split.tags == [["B-ORG", "O"], ["PER-B", "PER-I", "B-PER"]]
    assert split.lines == [3, 7]
    # A test file may hold words alone.
    test = read_conll(_write(tmp_path / "test.txt", "a\nb\n\nc\n"), "test", labelled=False)
    assert test.sentences == [["a", "b"], ["c"]] and test.tags is None


def test_conll_errors_name_file_and_line(tmp_path):
    with pytest.raises(TaskDataError, match=r"train.txt, line 3: 'orphan' has no tag column"):
        read_conll(_write(tmp_path / "train.txt", "a O\nb O\norphan\n"), "train", True)
    with pytest.raises(TaskDataError, match="no sentences"):
        read_conll(_write(tmp_path / "empty.txt", "\n\n"), "train", True)
    with pytest.raises(TaskDataError, match="no such file"):
        read_conll(str(tmp_path / "missing.txt"), "train", True)
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9 O\n")
    with pytest.raises(TaskDataError, match="not valid UTF-8"):
        read_conll(str(tmp_path / "latin1.txt"), "train", True)


def test_jsonl_sentences_and_errors(tmp_path):
    rows = [{"tokens": ["EU", "rejects"], "tags": ["B-ORG", "O"]}, {"tokens": [], "tags": []}]
    path = _write(tmp_path / "train.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n\n")
    split = read_jsonl(path, "train", True)
    assert split.sentences == [["EU", "rejects"], []] and split.tags == [["B-ORG", "O"], []]
    renamed = _write(tmp_path / "words.jsonl", json.dumps({"w": ["a"], "ner": ["O"]}) + "\n")
    assert read_jsonl(renamed, "train", True, "w", "ner").tags == [["O"]]
    cases = [
        ({"tokens": ["a", "b"], "tags": ["O"]}, "line 1: 2 tokens but 1 tags"),
        ({"tokens": "a b", "tags": ["O"]}, "'tokens' must be a list of strings"),
        ({"words": ["a"]}, "no 'tokens' field; this line has 'words'"),
        ([1, 2], "expected a JSON object per line, found list"),
    ]
    for record, message in cases:
        bad = _write(tmp_path / "bad.jsonl", json.dumps(record) + "\n")
        with pytest.raises(TaskDataError, match=message):
            read_jsonl(bad, "train", True)


def test_tag_formats():
    assert parse_tag("B-PER", PREFIX) == ("B", "PER")
    assert parse_tag("I-ORG-X", PREFIX) == ("I", "ORG-X")
    assert parse_tag("PER-E", SUFFIX) == ("E", "PER")
    assert parse_tag("B", PREFIX) == ("B", "_") and parse_tag("O", SUFFIX) == ("O", "_")
    assert parse_tag("NNP", PLAIN) == ("O", "_")
    with pytest.raises(ValueError, match="not of the prefix format"):
        parse_tag("PER-B", PREFIX)
    assert detect_tag_format(["O", "B-PER", "I-PER", "S-LOC", "E-LOC"]) == PREFIX
    assert detect_tag_format(["O", "PER-B", "PER-I"]) == SUFFIX
    assert detect_tag_format(["NNP", "VBZ", ".", "-LRB-"]) == PLAIN
    with pytest.raises(ValueError, match="--tag_format=plain"):
        detect_tag_format(["B-PER", "PERSON"])
    assert order_tags(["I-PER", "O", "B-PER", "O"]) == ["O", "B-PER", "I-PER"]


def test_load_tagging_files(tmp_path):
    train = _write(tmp_path / "train.txt", "지미 PER-B\n카터는 PER-I\n왔다 O\n\n서울 LOC-B\n")
    dev = _write(tmp_path / "dev.txt", "부산 LOC-B\n에 O\n\n김 ORG-B\n")
    warnings = []
    definition, data = load_tagging_files("ner", train, dev, warn=warnings.append)
    assert definition.tag_format == SUFFIX
    assert definition.tag_names == ["O", "LOC-B", "PER-B", "PER-I"]
    assert definition.primary_metric == "f1" and definition.outside_id == 0
    assert len(data.train) == 2 and len(data.dev) == 2 and data.test is None
    assert warnings and "1 tag(s) the training data lacks (ORG-B)" in warnings[0]
    round_trip = type(definition).from_dict(json.loads(json.dumps(definition.to_dict())))
    assert round_trip == definition
    # A dev tag outside the format: the file and the line.
    bad_dev = _write(tmp_path / "bad.txt", "a O\nb B-LOC\n")
    with pytest.raises(TaskDataError, match=r"bad.txt, line 2: tag 'B-LOC' is not of the suffix"):
        load_tagging_files("ner", train, bad_dev)
    with pytest.raises(TaskDataError, match="--labels lacks the tag"):
        load_tagging_files("ner", train, tag_names=["O", "PER-B"])
    pos = _write(tmp_path / "pos.txt", "EU NNP\nrejects VBZ\n")
    definition, _ = load_tagging_files("pos", pos)
    assert definition.tag_format == PLAIN and definition.metrics == ("accuracy",)
    assert definition.outside_id is None


def test_raw_text_words():
    assert split_words("지미 카터는  조지아주에서\t태어났다.") == [
        "지미",
        "카터는",
        "조지아주에서",
        "태어났다.",
    ]
    # Each CJK ideograph is a word; kana and Hangul are not ideographs.
    assert split_words("中文abc句子 カタカナ") == ["中", "文", "abc", "句", "子", "カタカナ"]
    # Unicode separators and ASCII control spaces split; zero-width characters do not.
    assert split_words("a\u00a0b\u3000c\u2028d\x0be\u200bf") == ["a", "b", "c", "d", "e\u200bf"]
    assert split_words("") == [] and split_words(" \n ") == []
