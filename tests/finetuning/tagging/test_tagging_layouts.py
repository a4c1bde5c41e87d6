"""Tagging files in their distributed layouts: words, tags and refusals, worked by hand."""

import json
import os
import random

import pytest

from electra_tf.finetuning.kind.files import TaskDataError
from electra_tf.finetuning.tagging import layouts
from electra_tf.finetuning.tagging.data import SUFFIX, load_tagging_files
from electra_tf.finetuning.tagging.metrics import entities, score

# The first 20 sentences of KoELECTRA's naver-ner/test.tsv (tests/fixtures/README.md).
SAMPLE_NER = os.path.join(
    os.path.dirname(__file__), "..", "..", "fixtures", "koelectra", "naver-ner", "test.tsv"
)


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def _refusal(call, *fragments):
    """The call stops with one line holding every fragment."""
    with pytest.raises(TaskDataError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


# ---------------------------------------------------------------------------
# Sentence per line (KoELECTRA's naver-ner/*.tsv).


def test_sentence_per_line(tmp_path):
    path = _write(
        tmp_path / "train.tsv",
        "지미 카터는 왔다 .\tPER-B PER-I O O\r\n"
        "\n"
        "서울\tLOC-B\n"
        "1990년  3월에\tDAT-B DAT-I\n",  # two spaces: split at any whitespace
    )
    split = layouts.read_sentence_per_line(path, "train", labelled=True)
    assert split.sentences == [["지미", "카터는", "왔다", "."], ["서울"], ["1990년", "3월에"]]
    assert split.tags == [["PER-B", "PER-I", "O", "O"], ["LOC-B"], ["DAT-B", "DAT-I"]]
    assert split.lines == [1, 3, 4] and split.layout == layouts.SENTENCE_PER_LINE
    test = layouts.read_sentence_per_line(
        _write(tmp_path / "test.tsv", "지미 카터는\n서울\n"), "test", labelled=False
    )
    assert test.sentences == [["지미", "카터는"], ["서울"]] and test.tags is None


def test_sentence_per_line_refusals(tmp_path):
    def read(text):
        path = _write(tmp_path / "bad.tsv", text)
        return lambda: layouts.read_sentence_per_line(path, "train", True)

    _refusal(
        read("a b\tO O\na b c\tO O\n"), "bad.tsv, line 2", "3 words but 2 tags", "words<TAB>tags"
    )
    _refusal(read("a\tb\tO\n"), "bad.tsv, line 1", "3 tab-separated field(s)", "sentence_per_line")
    _refusal(
        read(" ".join(["w"] * 501) + "\t" + " ".join(["O"] * 501) + "\n"),
        "bad.tsv, line 1",
        "501 words (more than 500)",
        "sentence_per_line",
    )


def test_koelectra_file_is_never_one_conll_sentence(tmp_path):
    """300 sentences a line each: detected, read as 300 sentences; read as CoNLL, refused."""
    rng = random.Random(0)
    rows = []
    for _ in range(300):
        count = rng.randint(1, 12)
        words = [f"w{rng.randint(0, 99)}" for _ in range(count)]
        tags = [rng.choice(["O", "PER-B", "PER-I", "LOC-B"]) for _ in range(count)]
        rows.append((words, tags))
    path = _write(
        tmp_path / "test.tsv", "".join(f"{' '.join(w)}\t{' '.join(t)}\n" for w, t in rows)
    )
    definition, data = load_tagging_files("naver-ner", path, path)
    assert data.train.layout == layouts.SENTENCE_PER_LINE and definition.tag_format == SUFFIX
    assert len(data.train) == len(data.dev) == 300
    assert data.train.sentences == [w for w, _ in rows] and data.dev.tags == [t for _, t in rows]
    first = rows[0]
    _refusal(
        lambda: load_tagging_files("naver-ner", path, layout="conll"),
        "test.tsv, line 1",
        "the tag '" + " ".join(first[1])[:30],  # clipped at 40 characters
        "holds spaces",
        "sentence-per-line",
        "expected conll",
    )


# ---------------------------------------------------------------------------
# The Naver NLP Challenge's own files.


def test_naver_original(tmp_path):
    path = _write(
        tmp_path / "train_data",
        "1\t비토리오\tPER_B\n2\t양일\tDAT_B\n3\t만에\t-\n4\t영사관\tORG_B\n5\t감호\tCVL_I\n"
        "\n\n"
        "1\t이\t-\n2\t감독은\tCVL_B\n",
    )
    split = layouts.read_naver_original(path, "train", labelled=True)
    assert split.sentences == [["비토리오", "양일", "만에", "영사관", "감호"], ["이", "감독은"]]
    assert split.tags == [["PER-B", "DAT-B", "O", "ORG-B", "CVL-I"], ["O", "CVL-B"]]
    assert split.lines == [1, 8]
    assert layouts.detect_layout(path) == layouts.NAVER_ORIGINAL
    # Scored as KoELECTRA scores its converted files: suffix entities.
    definition, data = load_tagging_files("ner", path)
    assert definition.tag_format == SUFFIX
    assert entities(data.train.tags[0], SUFFIX) == [
        ("PER", 0, 0),
        ("DAT", 1, 1),
        ("ORG", 3, 3),
        ("CVL", 4, 4),
    ]
    # The test file may hold index and word alone.
    test = layouts.read_naver_original(
        _write(tmp_path / "test_data", "1\t이\n2\t감독은\t-\n"), "test", labelled=False
    )
    assert test.sentences == [["이", "감독은"]] and test.tags is None


def test_naver_original_refusals(tmp_path):
    def read(text):
        path = _write(tmp_path / "train_data", text)
        return lambda: layouts.read_naver_original(path, "train", True)

    _refusal(read("1\ta\t-\n2\tb\tB-PER\n"), "line 2", "tag 'B-PER' is not the challenge's")
    # Two sentences without the blank line between them.
    _refusal(read("1\ta\t-\n2\tb\t-\n1\tc\t-\n"), "line 3", "index '1' where 3 was expected")
    _refusal(read("1\ta\n"), "line 1", "2 tab-separated field(s)", "index<TAB>word<TAB>tag")
    _refusal(
        read("".join(f"{i}\tw\t-\n" for i in range(1, 502))),
        "line 1",
        "501 words",
        "naver_original",
    )


def test_naver_original_read_as_conll_is_refused(tmp_path):
    """The index taken as the word and PER_B as a plain class: refused, the layout named."""
    path = _write(tmp_path / "train_data", "1\t이\t-\n2\t감독은\tCVL_B\n\n1\t김\tPER_B\n")
    _refusal(
        lambda: load_tagging_files("ner", path, layout="conll"),
        "train_data, line 2",
        "CVL_B",
        "--tagging_layout=naver_original",
    )


# ---------------------------------------------------------------------------
# CLUENER 2020.


def test_cluener(tmp_path):
    rows = [
        {
            "text": "王小明在北京大学读书",
            "label": {"name": {"王小明": [[0, 2]]}, "organization": {"北京大学": [[4, 7]]}},
        },
        {"text": "他是记者", "label": {"position": {"记者": [[2, 3]]}}},
        {"text": "京沪两地", "label": {"address": {"京": [[0, 0]], "沪": [[1, 1]]}}},
        {"text": "没有实体"},
    ]
    path = _write(
        tmp_path / "train.json", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    )
    assert layouts.detect_layout(path) == layouts.CLUENER
    split = layouts.read_cluener(path, "train", labelled=True)
    assert split.sentences[0] == list("王小明在北京大学读书")
    assert split.tags == [
        ["B-name", "I-name", "I-name", "O", "B-organization"] + ["I-organization"] * 3 + ["O", "O"],
        ["O", "O", "B-position", "I-position"],
        ["S-address", "S-address", "O", "O"],
        ["O"] * 4,
    ]
    # The entities are the spans, end included.
    assert entities(split.tags[0], "prefix") == [("name", 0, 2), ("organization", 4, 7)]
    assert entities(split.tags[2], "prefix") == [("address", 0, 0), ("address", 1, 1)]
    test = layouts.read_cluener(
        _write(tmp_path / "test.json", '{"id": 0, "text": "京沪"}\n'), "test", labelled=False
    )
    assert test.sentences == [["京", "沪"]] and test.tags is None


def test_cluener_refusals(tmp_path):
    def read(record):
        path = _write(tmp_path / "dev.json", '{"text": "好"}\n' + json.dumps(record) + "\n")
        return lambda: layouts.read_cluener(path, "dev", True)

    _refusal(
        read({"text": "北京大学", "label": {"organization": {"北京大学": [[0, 4]]}}}),
        "dev.json, line 2",
        "not [start, end] inside the text's 4 characters",
    )
    _refusal(
        read({"text": "北京大学", "label": {"organization": {"北京大学": [[1, 3]]}}}),
        "line 2",
        "span [1, 3] is '京大学', not '北京大学'",
    )
    _refusal(
        read(
            {
                "text": "北京大学",
                "label": {"address": {"北京": [[0, 1]]}, "organization": {"北京大学": [[0, 3]]}},
            }
        ),
        "line 2",
        "overlaps address '北京' at [0, 1]",
    )
    _refusal(read({"words": ["a"]}), "line 2", "no string 'text'", "cluener")


# ---------------------------------------------------------------------------
# CoNLL, JSONL and detection.


def test_conll_and_jsonl_refuse_overlong_sentences(tmp_path):
    conll = _write(tmp_path / "train.txt", "".join(f"w{i} O\n" for i in range(501)))
    _refusal(
        lambda: layouts.read_conll(conll, "train", True),
        "train.txt, line 1",
        "501 words",
        "one word per line",
    )
    jsonl = _write(
        tmp_path / "train.jsonl", json.dumps({"tokens": ["a"] * 501, "tags": ["O"] * 501})
    )
    _refusal(lambda: layouts.read_jsonl(jsonl, "train", True), "train.jsonl, line 1", "501 words")


def test_layout_detection(tmp_path):
    cases = {
        "conll.txt": ("EU B-ORG\nrejects O\n\nPeter Blackburn\tB-PER\n", layouts.CONLL),
        "tab.txt": ("지미\tNNP\tPER-B\n카터는\tNNP\tPER-I\n", layouts.CONLL),
        "one_word_lines.tsv": ("서울\tLOC-B\n부산\tLOC-B\n", layouts.CONLL),
        "spl.tsv": ("서울\tLOC-B\n지미 카터\tPER-B PER-I\n", layouts.SENTENCE_PER_LINE),
        "naver": ("1\ta\t-\n2\tb\tPER_B\n\n1\tc\t-\n", layouts.NAVER_ORIGINAL),
        # An index that does not restart after a blank line is no challenge file.
        "numbered.txt": ("1\ta\tO\n2\tb\tO\n\n3\tc\tO\n", layouts.CONLL),
        "s.jsonl": ('{"tokens": ["a"], "tags": ["O"]}\n', layouts.JSONL),
        "c.json": ('{"text": "京", "label": {}}\n', layouts.CLUENER),
    }
    for name, (text, expected) in cases.items():
        assert layouts.detect_layout(_write(tmp_path / name, text)) == expected, name
    # Dev and test files are read in the training file's layout (a test file
    # of words alone is otherwise ambiguous).
    train = _write(tmp_path / "train.tsv", "지미 카터\tPER-B PER-I\n")
    test = _write(tmp_path / "test.tsv", "지미 카터는 왔다\n")
    _, data = load_tagging_files("ner", train, test_file=test)
    assert data.test.sentences == [["지미", "카터는", "왔다"]]
    _refusal(
        lambda: load_tagging_files("ner", train, layout="xml"),
        "--tagging_layout='xml'",
        "sentence_per_line",
    )


def test_a_tagless_line_of_a_sentence_per_line_file_is_named_by_its_own_number(tmp_path):
    """KoELECTRA's layout with line 34 missing its tags: line 34 is named, not line 1."""
    lines = ["지미 카터는 왔다\tPER-B PER-I O"] * 40
    lines[33] = "지미 카터는 왔다"
    train = _write(tmp_path / "train.tsv", "\n".join(lines) + "\n")
    assert layouts.detect_layout(train) == layouts.SENTENCE_PER_LINE
    _refusal(
        lambda: load_tagging_files("ner", train),
        "train.tsv, line 34: 1 tab-separated field(s); expected sentence_per_line",
    )


def test_dev_tag_error_names_the_sentence_line(tmp_path):
    train = _write(tmp_path / "train.tsv", "a b\tPER-B O\n")
    dev = _write(tmp_path / "dev.tsv", "a\tO\nb c\tO B-PER\n")
    _refusal(
        lambda: load_tagging_files("ner", train, dev),
        "dev.tsv, line 2",
        "tag 'B-PER' is not of the suffix format",
    )


# ---------------------------------------------------------------------------
# A real sample.


def test_koelectra_naver_ner_sample_against_seqeval():
    """KoELECTRA's naver-ner/test.tsv (its first 20 lines): one sentence a line, suffix tags,
    and our entity F1 equal to seqeval's with suffix=True (KoELECTRA's scorer)."""
    seqeval_metrics = pytest.importorskip("seqeval.metrics")
    with open(SAMPLE_NER, encoding="utf-8") as f:
        expected = [line.strip().split("\t") for line in f if line.strip()]
    definition, data = load_tagging_files("naver-ner", SAMPLE_NER, SAMPLE_NER)
    assert data.train.layout == layouts.SENTENCE_PER_LINE
    assert definition.tag_format == SUFFIX
    assert len(data.train) == len(expected) == 20
    assert data.train.sentences == [words.split() for words, _ in expected]
    assert data.train.tags == [tags.split() for _, tags in expected]
    assert set(definition.tag_names) <= {"O"} | {
        f"{t}-{p}"
        for t in "PER FLD AFW ORG LOC CVL DAT TIM NUM EVT ANM PLT MAT TRM".split()
        for p in "BI"
    }
    gold = data.dev.tags
    rng = random.Random(7)
    predicted = [
        [rng.choice(definition.tag_names) if rng.random() < 0.15 else t for t in sentence]
        for sentence in gold
    ]
    ours = score(gold, predicted, SUFFIX)
    assert ours["f1"] == pytest.approx(seqeval_metrics.f1_score(gold, predicted, suffix=True))
    assert ours["precision"] == pytest.approx(
        seqeval_metrics.precision_score(gold, predicted, suffix=True)
    )
    assert ours["recall"] == pytest.approx(
        seqeval_metrics.recall_score(gold, predicted, suffix=True)
    )
    assert 0.3 < ours["f1"] < 0.95  # the perturbation changed entities, not all of them
