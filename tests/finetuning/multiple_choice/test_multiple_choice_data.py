"""Reading C3's JSON layout: good files, several files, and one line per refusal."""

import copy
import json
import os
import re

import numpy as np
import pytest
from mc_support import DOCUMENTS, write_c3

from electra_tf.finetuning.kind.files import TaskDataError
from electra_tf.finetuning.multiple_choice.data import (
    MultipleChoiceDataError,
    read_c3,
    read_files,
)

# The first documents of C3's c3-d-dev.json as distributed (tests/fixtures/c3/).
REAL_C3 = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "c3", "c3-d-dev.json"
)


def test_a_file_in_c3_s_layout_gives_its_questions(tmp_path):
    split = read_c3(write_c3(tmp_path / "train.json"))
    assert split.indices == ["12-34-0", "12-34-1", "m5-6-0"]
    assert split.contexts[0] == "A: the movie was very good.\nB: the plot was dull."
    assert split.contexts[1] == split.contexts[0] and split.contexts[2] == "the story is fun."
    assert split.questions == ["what was good?", "what was dull?", "is the story fun?"]
    assert split.options[2] == ["yes", "no", "a bit", "very dull"]
    np.testing.assert_array_equal(split.answers, [0, 0, 0])
    assert split.max_options == 4 and len(split) == 3


def test_several_files_are_read_one_after_another(tmp_path):
    second = copy.deepcopy(DOCUMENTS[:1])
    second[0][2] = "m1-1"
    second[0][1][1]["answer"] = "the film"
    paths = f"{write_c3(tmp_path / 'd.json')}, {write_c3(tmp_path / 'm.json', second)}"
    split = read_files(paths)
    assert split.indices == ["12-34-0", "12-34-1", "m5-6-0", "m1-1-0", "m1-1-1"]
    np.testing.assert_array_equal(split.answers, [0, 0, 0, 0, 1])
    # The same file twice repeats ids: fine for training, refused where predictions are written.
    twice = f"{tmp_path / 'd.json'},{tmp_path / 'd.json'}"
    assert len(read_files(twice, unique_ids=False)) == 6
    with pytest.raises(MultipleChoiceDataError, match="'12-34-0' is also in"):
        read_files(twice)


def test_a_test_file_may_leave_the_answers_out(tmp_path):
    documents = copy.deepcopy(DOCUMENTS)
    for document in documents:
        for question in document[1]:
            del question["answer"]
    split = read_files(write_c3(tmp_path / "test.json", documents), labelled=False)
    assert split.answers is None and len(split) == 3
    with pytest.raises(MultipleChoiceDataError, match=r"question \[0\]: no string 'answer'"):
        read_c3(str(tmp_path / "test.json"))


def _broken(change):
    documents = copy.deepcopy(DOCUMENTS)
    change(documents)
    return documents


@pytest.mark.parametrize(
    "documents, where, problem",
    [
        ({"data": DOCUMENTS}, "", "the top level is an object"),
        ([], "", "no documents"),
        ([DOCUMENTS[0][:2]], r"document \[0\]", "not an array of 3 items"),
        (_broken(lambda d: d[1].__setitem__(2, 56)), r"document \[1\]", "id is int, not a string"),
        (
            _broken(lambda d: d[0].__setitem__(0, "one line")),
            r"document \[0\] \('12-34'\)",
            "the context is not an array of strings",
        ),
        (
            _broken(lambda d: d[1].__setitem__(1, [])),
            r"document \[1\] \('m5-6'\)",
            "the questions are not a non-empty array",
        ),
        (
            _broken(lambda d: d[0][1][1].__setitem__("answer", "a dog")),
            r"document \[0\] \('12-34'\), question \[1\]",
            r"the answer 'a dog' must be the text of exactly one option; it is none",
        ),
        (
            _broken(lambda d: d[0][1][1].__setitem__("choice", ["the plot"])),
            r"question \[1\]",
            r"1 option\(s\); a question needs 2 or more",
        ),
        (
            _broken(lambda d: d[1][1][0].__setitem__("choice", ["yes", "", "no"])),
            r"document \[1\] \('m5-6'\), question \[0\]",
            r"option \[1\] is empty",
        ),
        (
            _broken(lambda d: d[1][1][0].__setitem__("choice", ["yes", "no", "yes"])),
            r"question \[0\]",
            r"it is options \[0, 2\]",
        ),
        (
            _broken(lambda d: d[0][1][0].pop("question")),
            r"question \[0\]",
            "no string 'question'",
        ),
        (
            _broken(lambda d: d[0][1].__setitem__(0, "what?")),
            r"question \[0\]",
            "a string, not an object",
        ),
    ],
)
def test_a_file_not_in_the_layout_is_refused_with_one_line(tmp_path, documents, where, problem):
    path = write_c3(tmp_path / "bad.json", documents)
    with pytest.raises(MultipleChoiceDataError) as error:
        read_c3(path)
    message = str(error.value)
    assert "\n" not in message and message.startswith(path)
    assert "expected C3's layout: a JSON array of documents" in message
    if where:
        assert re.search(where, message), message
    assert re.search(problem, message), message
    assert isinstance(error.value, TaskDataError)  # what the commands catch


def test_unreadable_files_are_named(tmp_path):
    with pytest.raises(MultipleChoiceDataError, match="no such file"):
        read_c3(str(tmp_path / "missing.json"))
    path = tmp_path / "broken.json"
    path.write_text('[\n  [["a"], [{"question": "q",\n', encoding="utf-8")
    with pytest.raises(MultipleChoiceDataError, match=r"broken.json, line 3: not valid JSON"):
        read_c3(str(path))
    path.write_bytes(b'[[["\xff"], [], "x"]]')
    with pytest.raises(MultipleChoiceDataError, match="not valid UTF-8"):
        read_c3(str(path))


def test_a_draw_keeps_questions_whole(tmp_path):
    split = read_c3(write_c3(tmp_path / "train.json"))
    drawn = split.sample(2)
    assert len(drawn) == 2 and drawn.sample(2) is drawn
    for i in range(2):
        at = split.indices.index(drawn.indices[i])
        assert drawn.options[i] == split.options[at] and drawn.answers[i] == split.answers[at]


def test_the_distributed_c3_file_is_read_whole():
    with open(REAL_C3, encoding="utf-8") as f:
        documents = json.load(f)
    split = read_c3(REAL_C3)
    assert len(split) == sum(len(d[1]) for d in documents)
    assert split.indices[0] == f"{documents[0][2]}-0"
    assert {len(o) for o in split.options} <= {2, 3, 4}
    # Every answer read is the position of the answer's text among the options.
    questions = [q for d in documents for q in d[1]]
    assert [q["choice"][a] for q, a in zip(questions, split.answers)] == [
        q["answer"] for q in questions
    ]
