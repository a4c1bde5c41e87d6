"""KorQuAD 1.0 and CMRC 2018 / DRCD scores against values worked out by hand from the definitions."""

import pytest

from electra_tf.finetuning.question_answering import metrics as qa_metrics
from electra_tf.finetuning.question_answering import squad_metrics
from electra_tf.finetuning.question_answering.metrics import (
    cmrc_exact_match,
    cmrc_f1,
    cmrc_segments,
    korquad_exact_match,
    korquad_f1,
    korquad_normalize,
)

# --------------------------------------------------------------------------- KorQuAD 1.0


def test_korquad_normalization_spaces_quotes_and_brackets():
    assert korquad_normalize("《어린 왕자》") == "어린 왕자"
    assert korquad_normalize("‘KBS’ 뉴스!") == "kbs 뉴스"
    # ( and ) become spaces, so "(주)삼성" is two words.
    assert korquad_normalize("(주)삼성전자") == "주 삼성전자"
    # No English article removal (SQuAD would drop "the").
    assert korquad_normalize("The Beatles") == "the beatles"


def test_korquad_scores_by_hand():
    # Characters 서 울 에 서 against 서 울: 2 in common, P = 2/4, R = 2/2.
    assert korquad_f1("서울에서", "서울") == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert squad_metrics.f1_score("서울에서", "서울") == 0.0  # whitespace words: nothing shared
    assert korquad_exact_match("‘어린 왕자’", "어린 왕자") == 1.0
    assert korquad_exact_match("KBS", "kbs") == 1.0
    # 주 삼 성 전 자 against 삼 성 전 자: P = 4/5, R = 1.
    assert korquad_f1("(주)삼성전자", "삼성전자") == pytest.approx(2 * 0.8 / 1.8)
    # Spaces are not characters: "세종 대왕" and "세종대왕" are the same four.
    assert korquad_f1("세종 대왕", "세종대왕") == 1.0
    assert korquad_exact_match("세종 대왕", "세종대왕") == 0.0
    assert korquad_f1("", "서울") == 0.0 and korquad_f1("부산", "서울") == 0.0


def test_korquad_evaluation_totals_every_question():
    gold = {"q1": ["서울"], "q2": ["1392년", "1392"], "q3": ["이성계"]}
    predictions = {"q1": "서울에서", "q2": "1392"}  # q3 unanswered: 0
    results = qa_metrics.evaluate("korquad", gold, predictions)
    assert results == pytest.approx({"exact_match": 100 / 3, "f1": 100 * (2 / 3 + 1) / 3})


# --------------------------------------------------------------------------- CMRC 2018


def test_cmrc_mixed_segmentation():
    assert cmrc_segments("范廷颂枢机") == ["范", "廷", "颂", "枢", "机"]
    assert cmrc_segments("2018年5月") == ["2018", "年", "5", "月"]
    assert cmrc_segments(" NBA总冠军 ") == ["nba", "总", "冠", "军"]
    assert cmrc_segments("《红楼梦》") == ["《", "红", "楼", "梦", "》"]
    assert cmrc_segments("《红楼梦》", remove_punctuation=True) == ["红", "楼", "梦"]
    assert cmrc_segments("michael jordan jr") == ["michael", "jordan", "jr"]


def test_cmrc_scores_by_hand():
    # The example: whitespace-word F1 gives 0; the longest common run
    # is 范廷颂 (3 segments): P = 3/3, R = 3/5.
    assert squad_metrics.f1_score("范廷颂", "范廷颂枢机") == 0.0
    assert cmrc_f1("范廷颂", "范廷颂枢机") == pytest.approx(2 * 0.6 / 1.6)
    assert cmrc_exact_match("范廷颂", "范廷颂枢机") == 0.0
    # [2018, 年] against [2018, 年, 5, 月]: P = 1, R = 1/2.
    assert cmrc_f1("2018年", "2018年5月") == pytest.approx(2 / 3)
    # Listed punctuation is removed for both scores.
    assert (
        cmrc_exact_match("《红楼梦》", "红楼梦") == 1.0 and cmrc_f1("《红楼梦》", "红楼梦") == 1.0
    )
    # A contiguous run, not a bag: 北京 (or 大学) is the longest, P = R = 2/4.
    assert cmrc_f1("北京大学", "大学北京") == pytest.approx(0.5)
    # Words in Latin script: [michael, jordan] inside [michael, jordan, jr].
    assert cmrc_f1("Michael Jordan", "michael jordan jr") == pytest.approx(2 * (2 / 3) / (5 / 3))
    # The script lists "……" as one entry, so a single "…" is text: not removed.
    assert cmrc_exact_match("好…", "好") == 0.0
    assert cmrc_f1("好…", "好") == pytest.approx(2 * 0.5 / 1.5)


def test_cmrc_and_drcd_evaluation_report_the_official_keys():
    gold = {"a": ["范廷颂枢机", "范廷颂"], "b": ["1948年"], "c": ["北京"]}
    predictions = {"a": "范廷颂", "b": "1948"}  # c unanswered: counted, scored 0, skipped
    for metric in ("cmrc2018", "drcd"):
        results = qa_metrics.evaluate(metric, gold, predictions)
        # a: exact against its second answer. b: [1948] in [1948, 年]: P = 1, R = 1/2.
        f1 = 100 * (1 + 2 / 3 + 0) / 3
        assert results == pytest.approx(
            {"exact_match": 100 / 3, "f1": f1, "average": (100 / 3 + f1) / 2, "total": 3, "skip": 1}
        )


# --------------------------------------------------------------------------- choosing a metric


def test_metric_from_the_files_version_field():
    assert qa_metrics.metric_for_version("KorQuAD_v1.0_dev") == "korquad"
    assert qa_metrics.metric_for_version("KorQuAD_v1.0_train") == "korquad"
    assert qa_metrics.metric_for_version("cmrc2018-dev") == "cmrc2018"
    assert qa_metrics.metric_for_version("DRCD v1.3") == "drcd"
    assert qa_metrics.metric_for_version("1.1") == "squad"
    assert qa_metrics.metric_for_version(None) == "squad"


def test_squad_scores_are_unchanged_through_the_common_entry_point():
    gold = {"q1": ["Denver Broncos", "Broncos"], "q2": ["Santa Clara, California"], "q3": ["1990"]}
    predictions = {"q1": "Broncos", "q2": "Santa Clara", "q3": "in 1991"}
    assert qa_metrics.evaluate("squad", gold, predictions) == squad_metrics.evaluate_v1(
        gold, predictions
    )
    v2 = qa_metrics.evaluate(
        "squad",
        {"q1": ["Paris"], "q2": []},
        {"q1": "Paris", "q2": ""},
        squad_version="2.0",
        null_odds={"q1": -1.0, "q2": 3.0},
    )
    assert v2["exact_match"] == v2["exact"] == 100.0 and "best_f1" in v2
    with pytest.raises(ValueError, match="--qa_metric=korquad"):
        qa_metrics.evaluate("korquad", {"q1": []}, {}, squad_version="2.0")
    with pytest.raises(ValueError, match="choose one of squad, korquad, cmrc2018, drcd"):
        qa_metrics.evaluate("bleu", {"q1": ["x"]}, {})


def test_a_missing_nltk_stops_a_cmrc_run_before_training(monkeypatch):
    import builtins

    from electra_tf.errors import RunError
    from electra_tf.finetuning.question_answering.data import SquadSplit
    from electra_tf.finetuning.question_answering.task import SquadTask

    real_import = builtins.__import__

    def no_nltk(name, *args, **kwargs):
        if name.startswith("nltk"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_nltk)
    split = SquadSplit([], "train.json")
    with pytest.raises(RunError, match="pip install nltk"):
        SquadTask(split, split, qa_metric="cmrc2018")
    SquadTask(split, split, qa_metric="korquad")  # needs nothing more
    with pytest.raises(RunError, match="--qa_metric=korquad scores answerable questions only"):
        SquadTask(split, split, version="2.0", qa_metric="korquad")
