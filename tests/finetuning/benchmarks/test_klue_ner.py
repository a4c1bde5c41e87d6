"""KLUE-NER as distributed (one character per line), scored as KLUE-baseline scores it."""

import random

import pytest
from seqeval.metrics import f1_score as seqeval_f1
from seqeval.scheme import IOB2

from electra_tf.finetuning.kind.files import TaskDataError
from electra_tf.finetuning.tagging.data import load_tagging_files
from electra_tf.finetuning.tagging.klue_ner import (
    KLUE_NER_TAGS,
    char_macro_f1,
    entity_macro_f1,
    klue_ner_scores,
    scored_sequence,
    space_tags,
    strict_iob2_entities,
    write_klue_ner_predictions,
)
from electra_tf.finetuning.tagging.layouts import KLUE_NER, detect_layout, read_tagged_file

# KLUE's five header lines (their Korean text in English).
HEADER = [
    "## token, label separator : \\t",
    "## token separator : \\n",
    "## sentence separator : \\n\\n",
    "## comment : ##",
    "## column names : CHAR\tNE_TAG",
]


def klue_ner_text(sentences, guid="klue-ner-v1_dev"):
    """The file's text; `sentences` are lists of (character, tag), spaces included."""
    lines = list(HEADER)
    for n, chars in enumerate(sentences):
        lines.append(f"## {guid}_{n:05d}-wikitree\t{''.join(c for c, _ in chars)}")
        lines += [f"{c}\t{t}" for c, t in chars]
        lines.append("")
    return "\n".join(lines) + "\n"


def tagged(text, tags):
    assert len(text) == len(tags)
    return list(zip(text, tags))


SENTENCES = [
    tagged("박씨 딸", ["B-PS", "I-PS", "O", "O"]),
    tagged("1월 2일 서울", ["B-DT", "I-DT", "I-DT", "I-DT", "I-DT", "O", "B-LC", "I-LC"]),
]


def write(path, sentences=SENTENCES):
    path.write_text(klue_ner_text(sentences), encoding="utf-8")
    return str(path)


def test_the_layout_reads_characters_without_spaces(tmp_path):
    path = write(tmp_path / "klue-ner-v1.1_dev.tsv")
    assert detect_layout(path) == KLUE_NER
    split = read_tagged_file(path, "dev", True)
    assert split.layout == KLUE_NER
    assert split.sentences == [["박", "씨", "딸"], list("1월2일서울")]
    assert split.tags == [
        ["B-PS", "I-PS", "O"],
        ["B-DT", "I-DT", "I-DT", "I-DT", "B-LC", "I-LC"],  # the spaces' tags left out
    ]
    assert split.lines == [7, 13]  # the first character line of each sentence
    definition, data = load_tagging_files("klue-ner", path, path)
    assert definition.primary_metric == "entity_macro_f1"
    assert definition.metrics[:2] == ("entity_macro_f1", "char_macro_f1")
    assert definition.tag_format == "prefix"


@pytest.mark.parametrize(
    "line, problem",
    [("ab\tO", "'ab' is not one character"), ("가", "no tag after the character")],
)
def test_a_line_that_is_not_a_character_and_its_tag_is_refused(tmp_path, line, problem):
    text = klue_ner_text(SENTENCES).replace("딸\tO", line)
    path = tmp_path / "bad.tsv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TaskDataError) as refused:
        read_tagged_file(str(path), "dev", True, KLUE_NER)
    message = str(refused.value)
    assert (
        message.startswith(f"{path}, line 10: {problem}") and "klue_ner: one character" in message
    )


def test_klue_s_own_dev_file_reads(tmp_path):
    """The first 12 sentences of KLUE's dev file as KLUE distributes it (tests/fixtures/klue/)."""
    import os

    sample = os.path.join(
        os.path.dirname(os.path.abspath(__file__)),
        "..",
        "..",
        "fixtures",
        "klue",
        "klue-ner-v1.1_dev.tsv",
    )
    split = read_tagged_file(sample, "dev", True)
    assert len(split) == 12 and split.layout == KLUE_NER
    assert {t for tags in split.tags for t in tags} <= set(KLUE_NER_TAGS)


def test_strict_iob2_entities_by_hand():
    tags = ["B-PS", "I-PS", "I-LC", "O", "I-OG", "B-DT", "B-DT", "I-DT", "O"]
    # I-LC after a PS entity and I-OG after O start none (strict IOB2).
    assert strict_iob2_entities(tags) == {("PS", 0, 1), ("DT", 5, 5), ("DT", 6, 7)}


def test_entity_macro_f1_by_hand_and_as_seqeval_computes_it():
    gold = [["B-PS", "I-PS", "O", "B-LC", "I-LC"], ["B-DT", "O"]]
    predicted = [["B-PS", "I-PS", "O", "B-LC", "O"], ["B-DT", "O"]]
    # PS: 1/1 right; LC: predicted (LC, 3..3) is wrong -> P 0, R 0, F1 0; DT right.
    assert entity_macro_f1(scored_sequence(gold), scored_sequence(predicted)) == pytest.approx(
        2 / 3
    )
    rng = random.Random(0)
    for _ in range(200):
        length = rng.randint(1, 30)
        g = [rng.choice(KLUE_NER_TAGS) for _ in range(length)]
        p = [rng.choice(KLUE_NER_TAGS) for _ in range(length)]
        if not strict_iob2_entities(g) | strict_iob2_entities(p):
            assert entity_macro_f1(g, p) == 0.0  # seqeval: the mean of no types (nan)
            continue
        expected = seqeval_f1([g], [p], average="macro", mode="strict", scheme=IOB2)
        assert entity_macro_f1(g, p) == pytest.approx(expected), (g, p)


def test_char_macro_f1_by_hand():
    gold = ["O", "B-PS", "I-PS", "O", "O"]
    predicted = ["O", "B-PS", "O", "O", "B-LC"]
    # O: TP 2, FP 1, FN 1 -> 4/6; B-PS: 1; I-PS: TP 0 FN 1 -> 0; B-LC: FP 1 -> 0;
    # the other 9 tags are neither gold nor predicted -> 1 each (zero_division=1).
    expected = (4 / 6 + 1 + 0 + 0 + 9) / 13
    assert char_macro_f1(gold, predicted) == pytest.approx(expected)


def test_scores_join_sentences_between_outside_tags():
    gold = [["B-PS", "I-PS"], ["I-PS"]]
    predicted = [["B-PS", "I-PS"], ["I-PS"]]
    # The second sentence's I-PS does not continue the first's entity.
    assert scored_sequence(gold) == ["O", "B-PS", "I-PS", "O", "O", "I-PS", "O"]
    scores = klue_ner_scores(gold, predicted)
    assert scores == {"entity_macro_f1": 1.0, "char_macro_f1": 1.0}


def test_space_tags():
    chars = list("1월 2일 서울")
    tags = ["B-DT", "I-DT", "I-DT", "I-DT", "B-LC", "I-LC"]
    assert space_tags(chars, tags) == [
        "B-DT",
        "I-DT",
        "I-DT",  # inside the date
        "I-DT",
        "I-DT",
        "O",  # before B-LC: a new entity
        "B-LC",
        "I-LC",
    ]


def test_predictions_are_the_input_with_a_third_column(tmp_path):
    path = write(tmp_path / "dev.tsv")
    split = read_tagged_file(path, "dev", True)
    predicted = [["B-PS", "O", "O"], ["B-DT", "I-DT", "O", "I-DT", "B-LC", "I-LC"]]
    out = tmp_path / "dev_predictions.tsv"
    write_klue_ner_predictions(str(out), path, predicted)
    source = open(path, encoding="utf-8").read().split("\n")
    written = out.read_text(encoding="utf-8").split("\n")
    assert len(written) == len(source)
    for s, w in zip(source, written):
        if s.startswith("##") or not s:
            assert w == s
        else:
            assert w.startswith(s + "\t") and w.count("\t") == 2
    # Read back as KLUE-baseline reads it: the score recomputed from the file alone.
    gold, guess = [], []
    for block in out.read_text(encoding="utf-8").strip().split("\n\n"):
        rows = [line.split("\t") for line in block.split("\n") if not line.startswith("##")]
        gold.append([g for c, g, _ in rows if c != " "])
        guess.append([p for c, _, p in rows if c != " "])
    assert gold == split.tags and guess == predicted
    assert klue_ner_scores(gold, guess) == klue_ner_scores(split.tags, predicted)
    with pytest.raises(TaskDataError, match="changed since it was read"):
        write_klue_ner_predictions(str(out), path, predicted[:1])
