"""KLUE-DP files: the layout read, each refusal in one line, predictions written and read back."""

import os

import pytest
from dependency_parsing_support import HEADER, klue_dp_text, write_klue_dp

from electra_tf.finetuning.dependency_parsing import data as dp_data
from electra_tf.finetuning.dependency_parsing.data import (
    DEPREL_LABELS,
    DependencyDataError,
    read_parsed_file,
    write_predictions,
)
from electra_tf.finetuning.dependency_parsing.metrics import score_sentences
from electra_tf.finetuning.kind.files import TaskDataError

# The first 12 sentences of KLUE-DP's dev file as KLUE distributes it.
SAMPLE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "..",
    "..",
    "fixtures",
    "klue",
    "klue-dp-v1.1_dev.tsv",
)
SENTENCES = [
    [("유희열이", 3, "NP_SBJ"), ("눈물을", 3, "NP_OBJ"), ("흘렸다.", 0, "VP")],
    [("아이는", 2, "NP_SBJ"), ("태어났다.", 0, "VP")],
]


def test_a_file_in_klue_s_layout_is_read(tmp_path):
    path = write_klue_dp(tmp_path / "dev.tsv", SENTENCES)
    split = read_parsed_file(path, "dev")
    assert split.words == [["유희열이", "눈물을", "흘렸다."], ["아이는", "태어났다."]]
    assert split.heads == [[3, 3, 0], [2, 0]]
    assert split.labels == [["NP_SBJ", "NP_OBJ", "VP"], ["NP_SBJ", "VP"]]
    assert split.label_ids() == [[3, 5, 2], [3, 2]]
    # Five header lines, then each sentence's `## guid<TAB>text` line before its words.
    assert split.lines == [len(HEADER) + 2, len(HEADER) + 7]
    assert len(split) == 2 and split.num_words == 5
    assert split.sample(1).words in (split.words[:1], split.words[1:])


def test_a_byte_order_mark_crlf_line_ends_and_extra_blank_lines_are_read_alike(tmp_path):
    text = klue_dp_text(SENTENCES).replace("\n", "\r\n").replace("\r\n\r\n", "\r\n\r\n\r\n")
    path = tmp_path / "dev.tsv"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    split = read_parsed_file(str(path), "dev")
    assert split.words[1] == ["아이는", "태어났다."] and split.heads == [[3, 3, 0], [2, 0]]


def test_unlabelled_words_are_read_only_from_an_unlabelled_file(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text("## t_0\ta b c\n1\ta\ta\tNNG\n2\tb\tb\tNNG\t_\t_\n3\tc\tc\tVV\t0\tVP\n")
    split = read_parsed_file(str(path), "test", labelled=False)
    assert split.heads == [[-1, -1, 0]] and split.labels == [[None, None, "VP"]]
    assert split.label_ids() == [[-1, -1, 2]]
    with pytest.raises(DependencyDataError, match=r"line 2: a word line of 4 tab-separated"):
        read_parsed_file(str(path), "dev")


def _lines(*words):
    return "## g\tsentence\n" + "\n".join(words) + "\n"


WORD = "1\tx\tx\tNNG\t0\tVP"
REFUSALS = [
    ("five columns", _lines("1\tx\tx\tNNG\t0"), 2, "a word line of 5 tab-separated columns"),
    ("spaces for tabs", _lines("1 x x NNG 0 VP"), 2, "a word line of 1 tab-separated columns"),
    (
        "index out of sequence",
        _lines("1\tx\tx\tNNG\t3\tNP", "3\ty\ty\tVV\t0\tVP"),
        3,
        "INDEX '3' where 2 was expected",
    ),
    ("index from 0", _lines("0\tx\tx\tNNG\t0\tVP"), 2, "INDEX '0' where 1 was expected"),
    ("head not a number", _lines("1\tx\tx\tNNG\troot\tVP"), 2, "HEAD 'root' is not a word's"),
    ("negative head", _lines("1\tx\tx\tNNG\t-1\tVP"), 2, "HEAD '-1' is not a word's"),
    (
        "head past the sentence",
        _lines("1\tx\tx\tNNG\t0\tVP", "2\ty\ty\tNNG\t3\tNP"),
        3,
        "HEAD 3 of a sentence of 2 words (lines 2-3)",
    ),
    ("its own head", _lines("1\tx\tx\tNNG\t1\tVP"), 2, "word 1 is its own HEAD"),
    ("empty word", _lines("1\t \tx\tNNG\t0\tVP"), 2, "an empty WORD_FORM"),
    ("no head in a labelled file", _lines("1\tx\tx\tNNG\t_\t_"), 2, "HEAD '_' and DEPREL '_'"),
    (
        "a comment between words",
        _lines(WORD, "## g2\tnext", "1\ty\ty\tVV\t0\tVP"),
        3,
        "a comment line inside a sentence",
    ),
]


@pytest.mark.parametrize("name,text,line,problem", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_a_line_out_of_the_layout_is_refused_in_one_line(tmp_path, name, text, line, problem):
    path = tmp_path / "bad.tsv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DependencyDataError) as error:
        read_parsed_file(str(path), "train")
    message = str(error.value)
    assert "\n" not in message and isinstance(error.value, TaskDataError)
    assert message.startswith(f"{path}, line {line}: {problem}")
    assert message.endswith(
        "expected KLUE-DP's layout: comment lines beginning with ##, then one word per line "
        "INDEX<TAB>WORD_FORM<TAB>LEMMA<TAB>POS<TAB>HEAD<TAB>DEPREL (INDEX counting from 1, "
        "HEAD 0 = root), a blank line between sentences."
    )


def test_an_unknown_relation_is_refused_naming_klue_s_relations(tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_text(_lines("1\tx\tx\tNNG\t0\tROOT"), encoding="utf-8")
    with pytest.raises(DependencyDataError) as error:
        read_parsed_file(str(path), "train")
    message = str(error.value)
    assert message.startswith(f"{path}, line 2: DEPREL 'ROOT' is not one of KLUE's")
    assert "NP, NP_AJT, VP" in message and "NP_SVJ" in message and "\n" not in message


def test_files_that_are_no_klue_dp_text_are_refused(tmp_path, monkeypatch):
    missing = str(tmp_path / "missing.tsv")
    with pytest.raises(DependencyDataError, match=f"^{missing}: no such file"):
        read_parsed_file(missing, "train")
    comments = tmp_path / "comments.tsv"
    comments.write_text("\n".join(HEADER) + "\n\n", encoding="utf-8")
    with pytest.raises(DependencyDataError, match="comments.tsv: no sentence; expected KLUE-DP"):
        read_parsed_file(str(comments), "train")
    latin = tmp_path / "latin.tsv"
    latin.write_bytes(_lines(WORD).encode() + b"2\tcaf\xe9\tx\tNNG\t1\tNP\n")
    with pytest.raises(DependencyDataError, match=r"latin.tsv, line 3: not valid UTF-8"):
        read_parsed_file(str(latin), "train")
    # A line or a "sentence" too long for the layout stops before it takes memory.
    monkeypatch.setattr(dp_data, "MAX_LINE_BYTES", 40)
    long_line = tmp_path / "long_line.tsv"
    long_line.write_text(_lines(WORD, "2\t" + "y" * 60 + "\tx\tNNG\t1\tNP"), encoding="utf-8")
    with pytest.raises(DependencyDataError, match=r"line 3: a line of more than 40 bytes"):
        read_parsed_file(str(long_line), "train")
    monkeypatch.setattr(dp_data, "MAX_LINE_BYTES", 1 << 16)
    monkeypatch.setattr(dp_data, "MAX_SENTENCE_WORDS", 2)
    words = [f"{i}\tw\tw\tNNG\t{i + 1 if i < 3 else 0}\tNP" for i in range(1, 4)]
    many = write_klue_dp(tmp_path / "many.tsv", [])
    with open(many, "a", encoding="utf-8") as f:
        f.write("\n".join(words) + "\n")
    with pytest.raises(DependencyDataError, match=r"line 8: a sentence of more than 2 words"):
        read_parsed_file(many, "train")


def test_predictions_keep_every_line_and_are_read_back_with_the_same_scores(tmp_path):
    gold_path = write_klue_dp(tmp_path / "dev.tsv", SENTENCES)
    gold = read_parsed_file(gold_path, "dev")
    # The last word of the first sentence was not seen by the model: no prediction.
    heads = [[2, 3, -1], [2, 0]]
    labels = [["NP_SBJ", "NP_OBJ", None], ["NP_OBJ", "VP"]]
    out = str(tmp_path / "dev_predictions.tsv")
    write_predictions(out, gold_path, heads, labels)
    source = open(gold_path, encoding="utf-8").read().splitlines()
    written = open(out, encoding="utf-8").read().splitlines()
    assert len(written) == len(source)
    for before, after in zip(source, written):
        if before.startswith("#") or not before:
            assert after == before
        else:
            assert after.split("\t")[:4] == before.split("\t")[:4]
    assert written[len(HEADER) + 1 : len(HEADER) + 4] == [
        "1\t유희열이\t유희열이\tNNG+JKS\t2\tNP_SBJ",
        "2\t눈물을\t눈물을\tNNG+JKS\t3\tNP_OBJ",
        "3\t흘렸다.\t흘렸다.\tNNG+JKS\t_\t_",
    ]
    again = read_parsed_file(out, "dev", labelled=False)
    assert again.words == gold.words and again.heads == heads and again.labels == labels
    assert score_sentences(
        gold.heads, gold.label_ids(), again.heads, again.label_ids()
    ) == score_sentences(gold.heads, gold.label_ids(), heads, [[3, 5, -1], [5, 2]])
    with pytest.raises(DependencyDataError, match="changed since it was read"):
        write_predictions(out, gold_path, heads[:1], labels[:1])


def test_klue_s_own_dev_file_is_read_and_written_back_unchanged(tmp_path):
    split = read_parsed_file(SAMPLE, "dev")
    assert len(split) == 12
    assert split.words[0][:2] == ["'K팝스타3’", "유희열이"] and split.heads[0] == [2, 6, 4, 6, 6, 0]
    assert split.labels[0] == ["NP", "NP_SBJ", "NP_MOD", "NP_AJT", "NP_OBJ", "VP"]
    assert all(0 <= h <= len(row) for row in split.heads for h in row)
    assert {x for row in split.labels for x in row} <= set(DEPREL_LABELS)
    # Its own heads and relations as "predictions" give the file again, byte for byte.
    out = tmp_path / "same.tsv"
    write_predictions(str(out), SAMPLE, split.heads, split.labels)
    original = open(SAMPLE, "rb").read().replace(b"\r\n", b"\n")
    assert out.read_bytes() == (original if original.endswith(b"\n") else original + b"\n")
    scores = score_sentences(split.heads, split.label_ids(), split.heads, split.label_ids())
    assert scores == {k: 1.0 for k in scores}
