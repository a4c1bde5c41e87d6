"""The evaluate_qa command: official-style scores of a predictions file, as one JSON object."""

import json

import pytest

from electra_tf.commands.evaluate_qa import main


def _data(path, version, questions, impossible=()):
    """A SQuAD-format file: one paragraph per (id, context, answers)."""
    paragraphs = [
        {
            "context": context,
            "qas": [
                {
                    "id": qid,
                    "question": "?",
                    "is_impossible": qid in impossible,
                    "answers": [
                        {"text": a, "answer_start": max(0, context.find(a))} for a in answers
                    ],
                }
            ],
        }
        for qid, context, answers in questions
    ]
    path.write_text(
        json.dumps(
            {"version": version, "data": [{"title": "t", "paragraphs": paragraphs}]},
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    return str(path)


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


KOREAN = [
    ("q1", "서울에서 만났다", ["서울"]),
    ("q2", "조선은 1392년에 세워졌다", ["1392년"]),
    ("q3", "태조는 이성계이다", ["이성계"]),
]


def test_korquad_file_is_scored_with_korquads_metric(tmp_path, capsys):
    data = _data(tmp_path / "KorQuAD_v1.0_dev.json", "KorQuAD_v1.0_dev", KOREAN)
    predictions = tmp_path / "predictions.json"
    predictions.write_text(json.dumps({"q1": "서울에서", "q2": "1392년"}), encoding="utf-8")
    code, result, err = _run(capsys, data, predictions)
    assert code == 0
    # q1: character F1 2/3, q2 exact, q3 unanswered (0).
    assert result == pytest.approx(
        {"metric": "korquad", "exact_match": 100 / 3, "f1": 100 * (2 / 3 + 1) / 3}
    )
    assert "1 question(s) have no prediction and score 0" in err
    # The same predictions under SQuAD's whitespace-word metric.
    code, squad, _ = _run(capsys, data, predictions, "--metric=squad")
    assert squad == pytest.approx({"metric": "squad", "exact_match": 100 / 3, "f1": 100 / 3})


def test_cmrc_metric_prints_the_official_keys(tmp_path, capsys):
    data = _data(
        tmp_path / "cmrc.json",
        "v1.0",
        [("a", "范廷颂枢机是主教", ["范廷颂枢机"]), ("b", "成立于1948年", ["1948年"])],
    )
    predictions = tmp_path / "p.json"
    predictions.write_text(
        json.dumps({"a": "范廷颂", "b": "1948年"}, ensure_ascii=False), encoding="utf-8"
    )
    code, result, _ = _run(capsys, data, predictions, "--metric=cmrc2018")
    f1 = 100 * (0.75 + 1) / 2
    assert code == 0 and result == pytest.approx(
        {
            "metric": "cmrc2018",
            "exact_match": 50.0,
            "f1": f1,
            "average": (50 + f1) / 2,
            "total": 2,
            "skip": 0,
        }
    )


def test_squad_v2_file_with_null_odds(tmp_path, capsys):
    data = _data(
        tmp_path / "dev-v2.0.json",
        "v2.0",
        [("q1", "Paris is big", ["Paris"]), ("q2", "no answer here", [])],
        impossible={"q2"},
    )
    predictions = tmp_path / "p.json"
    predictions.write_text(json.dumps({"q1": "Paris", "q2": "here"}), encoding="utf-8")
    odds = tmp_path / "odds.json"
    odds.write_text(json.dumps({"q1": -2.0, "q2": 3.0}), encoding="utf-8")
    code, result, _ = _run(capsys, data, predictions, f"--null_odds_file={odds}")
    # Threshold 1.0: q2 (odds 3) is answered "" (right), q1 kept (right).
    assert code == 0 and result["metric"] == "squad" and result["exact_match"] == 100.0
    assert result["best_exact"] == 100.0 and result["HasAns_total"] == 1


@pytest.mark.parametrize(
    "case,message",
    [
        ("missing", "no such file"),
        ("not_json", "not a UTF-8 JSON file"),
        ("odds_v1", "--null_odds_file"),
    ],
)
def test_bad_input_is_one_line_naming_the_file(tmp_path, capsys, case, message):
    data = _data(tmp_path / "d.json", "1.1", KOREAN)
    predictions = tmp_path / "p.json"
    predictions.write_text("{}", encoding="utf-8")
    argv = [data, predictions]
    if case == "missing":
        argv = [tmp_path / "nope.json", predictions]
    elif case == "not_json":
        predictions.write_text("{oops", encoding="utf-8")
    else:
        argv.append(f"--null_odds_file={predictions}")
    code, _, err = _run(capsys, *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
