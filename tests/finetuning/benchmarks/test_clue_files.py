"""CLUE's files read as distributed, and the submission files written as its leaderboard takes them."""

import json
import os

import numpy as np
import pytest
from clue_support import CLUENER_LINES, clue_data

from electra_tf.artifacts.finetuning_dir import TrialDir
from electra_tf.finetuning.benchmarks.building import build_task
from electra_tf.finetuning.benchmarks.clue import CLUE
from electra_tf.finetuning.classification.json_tables import read_json_lines
from electra_tf.finetuning.kind.files import TaskDataError


def _read(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_classification_lines_read_by_their_fields(tmp_path):
    root = clue_data(tmp_path, tasks=("tnews", "ocnli"))
    said = []
    built = build_task(CLUE, "tnews", root, "base", warn=said.append)
    task = built.task
    assert task.max_seq_length == 128 and task.definition.num_train_epochs == 3.0
    dev = task.data.dev["dev"]
    assert dev.texts_a[0] == "新闻标题0号101" and dev.texts_b is None
    # Labels are class ids in the baseline's order (101 is the second code).
    assert dev.labels[:3].tolist() == [1, 2, 3]
    assert list(task.data.test) == ["tnews11_predict.json"]
    test = task.data.test["tnews11_predict.json"]
    assert test.labels is None and test.indices == ["0", "1", "2"]
    assert task.run_files == ("tnews11_predict.json",)

    ocnli = build_task(CLUE, "ocnli", root, "small", warn=said.append).task
    dev = ocnli.data.dev["dev"]
    # Of 8 pairs the fifth (position 4) is labelled '-': left out, the others keep their number.
    assert dev.indices == ["0", "1", "2", "3", "5", "6", "7"]
    assert dev.texts_b[0] == "假设1"
    assert [ocnli.definition.label_names[i] for i in dev.labels[:2]] == ["neutral", "contradiction"]
    assert any("left out 1 row(s) labelled '-'" in line and "dev.json" in line for line in said)
    assert ocnli.data.test == {} and ocnli.run_files == ()


@pytest.mark.parametrize(
    "line, problem",
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "a JSON list, not an object"),
        ('{"label": "100"}', "no 'sentence' field"),
        ('{"sentence": 3, "label": "100"}', "'sentence' must be strings"),
        ('{"sentence": "x", "label": "105"}', "label '105' is none of 100, 101"),
    ],
)
def test_a_line_outside_the_layout_is_refused_naming_file_and_line(tmp_path, line, problem):
    path = tmp_path / "train.json"
    path.write_text('{"sentence": "好", "label": "100"}\n\n' + line + "\n", encoding="utf-8")
    task = build_task(CLUE, "tnews", clue_data(tmp_path / "d", tasks=("tnews",))).task.definition
    layout = CLUE.task("tnews").tables["train"]
    with pytest.raises(TaskDataError) as error:
        read_json_lines(str(path), layout, task, "train")
    message = str(error.value)
    assert message.startswith(f"{path}, line 3: {problem}")
    assert message.endswith(
        'expected one JSON object per line, {"sentence": text, "label": a code 100-116, ...}.'
    )
    assert "\n" not in message


def test_an_overlong_line_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    from electra_tf.finetuning.classification import json_tables

    definition = build_task(
        CLUE, "tnews", clue_data(tmp_path / "d", tasks=("tnews",))
    ).task.definition
    monkeypatch.setattr(json_tables, "MAX_ROW_CHARS", 40)
    path = tmp_path / "dev.json"
    path.write_text('{"sentence": "短", "label": "100"}\n{"sentence": "' + "长" * 60 + '"}\n')
    with pytest.raises(TaskDataError, match=r"dev.json, line 2: the line is longer than 40"):
        read_json_lines(str(path), CLUE.task("tnews").tables["dev"], definition, "dev")


def test_classification_submission_and_scored_predictions(tmp_path, monkeypatch):
    root = clue_data(tmp_path / "data", tasks=("tnews",))
    task = build_task(CLUE, "tnews", root).task
    from electra_tf.finetuning.classification import task as classification_task

    class Encoded:
        def __init__(self, split):
            self.split = split

    task._encoded = classification_task._Encoded(
        None,
        {n: Encoded(s) for n, s in task.data.dev.items()},
        {n: Encoded(s) for n, s in task.data.test.items()},
        0,
    )

    # A stand-in model: every dev example predicted as class 1 ("101"), every test one as 2.
    def predict(model, encoded_split, definition, batch_size, pad_id=0):
        return np.full(len(encoded_split.split), 1 if encoded_split.split.name == "dev" else 2)

    monkeypatch.setattr(classification_task, "predict", predict)
    scores, files = task.evaluate(None, 4, _trial(tmp_path))
    # dev.json's labels cycle over 8 codes from 101: "101" is right for row 0 only; 1/8.
    assert scores["accuracy"] == pytest.approx(1 / 8)
    rows = (tmp_path / "trial_0" / "dev_predictions.tsv").read_text().splitlines()
    assert rows[0] == "index\tgold\tprediction"
    recomputed = np.mean([r.split("\t")[1] == r.split("\t")[2] for r in rows[1:]])
    assert recomputed == pytest.approx(scores["accuracy"])
    submission = files["tnews11_predict.json"]
    assert os.path.basename(submission) == "tnews11_predict.json"
    assert (tmp_path / "trial_0" / "tnews11_predict.json").read_text() == (
        '{"id": 0, "label": "102"}\n{"id": 1, "label": "102"}\n{"id": 2, "label": "102"}\n'
    )


def test_cluener_scored_as_clue_scores_it_and_its_submission(tmp_path):
    root = clue_data(tmp_path / "data", tasks=("cluener",))
    task = build_task(CLUE, "cluener", root).task
    assert task.primary_metric == "clue_f1" and "clue_f1" in task.definition.metrics
    assert task.data.test.ids == [10, 11, 12, 13]
    dev = task.data.dev
    # Predictions: line 0 right but for the position (博士 missed) and one false company
    # (企业); line 1 right; line 2 a false name (天气); line 3 one 北京 of two and no scene.
    predicted = [list(tags) for tags in dev.tags]
    predicted[0][12:14] = ["O", "O"]
    predicted[0][4:6] = ["B-company", "I-company"]
    predicted[2][2:4] = ["B-name", "I-name"]
    predicted[3][3:5] = ["O", "O"]
    predicted[3][6:8] = ["O", "O"]
    test_tags = [["O"] * len(s) for s in task.data.test.sentences]
    test_tags[0][9:12] = ["B-name", "I-name", "I-name"]
    task.predict = lambda model, features, batch_size: predicted if features == "dev" else test_tags
    task._encoded = type("E", (), {"dev": "dev", "test": "test"})()
    scores, files = task.evaluate(None, 4, _trial(tmp_path))
    # score.py per type, by hand: company tp 1 fp 1 fn 0 -> P 1/2 R 1 F 2/3; name tp 1 fp 1
    # fn 0 -> 2/3; position tp 0 fp 0 fn 1 -> 0 (score.py would divide by zero); game 1;
    # address: 北京 predicted and gold on line 3 (texts, not spans) -> 1; scene tp 0 fn 1 -> 0;
    # book, government, movie, organization: nothing anywhere -> 0.
    per_type = {"company": 2 / 3, "name": 2 / 3, "game": 1.0, "address": 1.0}
    for type_ in (
        "address",
        "book",
        "company",
        "game",
        "government",
        "movie",
        "name",
        "organization",
        "position",
        "scene",
    ):
        assert scores[f"clue_f1/{type_}"] == pytest.approx(per_type.get(type_, 0.0)), type_
    assert scores["clue_f1"] == pytest.approx((2 / 3 + 2 / 3 + 1 + 1) / 10)
    # The dev predictions as CLUENER lines, recomputable with score.py against dev.json.
    lines = _read(files["dev_predictions.json"])
    assert [line["text"] for line in lines] == [line["text"] for line in CLUENER_LINES]
    assert lines[0]["label"] == {
        "name": {"叶老桂": [[9, 11]]},
        "company": {"浙商银行": [[0, 3]], "企业": [[4, 5]]},
    }
    assert lines[3]["label"] == {"address": {"北京": [[0, 1]]}}
    assert _score_py(lines, _read(os.path.join(root, "cluener", "dev.json"))) == pytest.approx(
        scores["clue_f1"]
    )
    # The submission: the test file's ids, the label object, no text.
    assert _read(files["cluener_predict.json"]) == [
        {"id": 10, "label": {"name": {"叶老桂": [[9, 11]]}}},
        {"id": 11, "label": {}},
        {"id": 12, "label": {}},
        {"id": 13, "label": {}},
    ]
    assert task.run_files == ("cluener_predict.json",)


def _score_py(predicted_lines, gold_lines):
    """CLUENER2020's score.py, written out again (a type with nothing to divide scores 0)."""
    types = [
        "address",
        "book",
        "company",
        "game",
        "government",
        "movie",
        "name",
        "organization",
        "position",
        "scene",
    ]
    total = 0.0
    for label in types:
        tp = fp = fn = 0
        for pre, gold in zip(predicted_lines, gold_lines):
            pre = pre["label"].get(label, {}).keys()
            gold = (gold.get("label") or {}).get(label, {}).keys()
            tp += sum(1 for i in pre if i in gold)
            fp += sum(1 for i in pre if i not in gold)
            fn += sum(1 for i in gold if i not in pre)
        p = tp / (tp + fp) if tp + fp else 0.0
        r = tp / (tp + fn) if tp + fn else 0.0
        total += 2 * p * r / (p + r) if p + r else 0.0
    return total / len(types)


def test_c3_reads_both_parts_and_writes_clue_submission(tmp_path):
    root = clue_data(tmp_path / "data", tasks=("c3",))
    built = build_task(CLUE, "c3", root, "base")
    task = built.task
    assert built.files["train"] == ",".join(
        os.path.join(root, "c3", name) for name in ("d-train.json", "m-train.json")
    )
    assert "train d-train.json,m-train.json" in built.describe()
    assert len(task.data.train) == 8 and len(task.data.dev) == 4 and len(task.data.test) == 3
    assert task.data.test.answers is None and task.max_seq_length == 512
    assert task.SCORED_PREDICTIONS == "dev_predictions.tsv"
    dev = task.data.dev
    picked = np.array([0, 1, 0, 0])
    right = np.mean(picked == dev.answers)
    task.predict = lambda model, split, encoded, batch_size: (
        picked if split is dev else np.array([2, 0, 1])
    )
    task._encoded = type("E", (), {"dev": None, "test": None})()
    scores, files = task.evaluate(None, 2, _trial(tmp_path))
    assert scores["accuracy"] == pytest.approx(right)
    rows = [r.split("\t") for r in open(files["dev_predictions.tsv"]).read().splitlines()[1:]]
    assert np.mean([g == p for _, g, p in rows]) == pytest.approx(right)
    assert open(files["c311_predict.json"]).read() == (
        '{"id": 0, "label": 2}\n{"id": 1, "label": 0}\n{"id": 2, "label": 1}\n'
    )


def test_a_c3_part_missing_skips_the_task_naming_it(tmp_path):
    root = clue_data(tmp_path / "data", tasks=("c3",))
    os.remove(os.path.join(root, "c3", "m-train.json"))
    built = build_task(CLUE, "c3", root)
    assert built.skipped and built.missing == [os.path.join(root, "c3", "m-train.json")]


def test_an_empty_answer_in_a_test_file_reads_as_none(tmp_path):
    from electra_tf.finetuning.multiple_choice.data import read_c3

    path = tmp_path / "test1.1.json"
    path.write_text(
        json.dumps(
            [[["文"], [{"question": "问", "choice": ["甲", "乙"], "answer": "", "id": 0}], "0"]]
        ),
        encoding="utf-8",
    )
    assert read_c3(str(path), labelled=False).options == [["甲", "乙"]]


def _trial(tmp_path):
    (tmp_path / "trial_0").mkdir()
    return TrialDir(str(tmp_path / "trial_0"))
