"""KLUE-MRC as distributed (SQuAD's layout, questions named by `guid`, unanswerable ones), scored as
KLUE-baseline scores it (exact match and ROUGE-W)."""

import json
import os

import numpy as np
import pytest

from electra_tf.finetuning.benchmarks.building import build_task
from electra_tf.finetuning.benchmarks.klue import KLUE
from electra_tf.finetuning.kind.benchmark import DEV, TEST
from electra_tf.finetuning.question_answering import metrics as qa_metrics
from electra_tf.finetuning.question_answering.metrics import (
    klue_mrc_normalize,
    klue_mrc_rouge_w,
    klue_mrc_scores,
    longest_common_run,
)

CONTEXT = "세종은 1418년 조선의 네 번째 왕으로 즉위하였다. 그는 훈민정음을 창제하였다."


def question(guid, text, answers, question_type=1):
    """One question as KLUE writes it (an unanswerable one: type 3, no answer)."""
    return {
        "question": text,
        "answers": [{"text": a, "answer_start": CONTEXT.index(a)} for a in answers],
        "question_type": question_type,
        "is_impossible": question_type == 3,
        "guid": guid,
    }


def mrc_document(prefix="klue-mrc-v1_dev", count=3):
    """`count` questions about one news paragraph, every third unanswerable."""
    qas = []
    for i in range(count):
        guid = f"{prefix}_{i:05d}"
        if i % 3 == 2:
            qas.append(question(guid, "세종의 아버지는 누구인가?", [], question_type=3))
        elif i % 3 == 1:
            qas.append(question(guid, "훈민정음을 만든 왕은?", ["세종"], question_type=2))
        else:
            qas.append(question(guid, "세종은 언제 즉위하였나?", ["1418년"]))
    return {
        "version": "v1.1",
        "data": [
            {
                "title": "세종의 즉위",
                "paragraphs": [{"context": CONTEXT, "qas": qas}],
                "news_category": "문화",
                "source": "hankyung",
            }
        ],
    }


def write_mrc(root, count=3):
    folder = root / "klue_benchmark" / "klue-mrc-v1.1"
    os.makedirs(folder, exist_ok=True)
    for split in ("train", "dev"):
        document = mrc_document(f"klue-mrc-v1_{split}", count)
        text = json.dumps(document, indent=4, ensure_ascii=False)
        (folder / f"klue-mrc-v1.1_{split}.json").write_text(text, encoding="utf-8")
    return str(root)


# ---------------------------------------------------------------------------
# The metrics, as klue_mrc_em and klue_mrc_rouge_w compute them.


def test_normalization_by_hand():
    assert klue_mrc_normalize("  The  Seoul-City! ") == "the seoulcity"
    # KLUE-baseline's pattern replaces a quote or bracket only when "()‘’" follows it; the
    # remaining ASCII quotes go with the punctuation, the others stay.
    assert klue_mrc_normalize('"()‘’서울') == "서울"
    assert klue_mrc_normalize("《서울》 ‘시’") == "《서울》 ‘시’"
    assert klue_mrc_normalize("'서울'") == "서울"


def test_rouge_w_by_hand():
    # 서울 in 서울에서: P 2/4, R 2/2 -> 2/3.
    assert klue_mrc_rouge_w("서울에서", "서울") == pytest.approx(2 / 3)
    # The longest contiguous run of 서울 특별시 and 서울특별시 is 특별시 (spaces count): P 3/6,
    # R 3/5 -> 6/11.
    assert klue_mrc_rouge_w("서울 특별시", "서울특별시") == pytest.approx(6 / 11)
    assert klue_mrc_rouge_w("부산", "서울") == 0.0
    # An empty gold text (an unanswerable question) is matched only by the empty prediction.
    assert klue_mrc_rouge_w("", "") == 1.0 and klue_mrc_rouge_w("서울", "") == 0.0
    assert klue_mrc_rouge_w("", "서울") == 0.0


def test_rouge_w_is_the_longest_common_run_of_characters():
    rng = np.random.default_rng(5)
    for _ in range(50):
        a = "".join(rng.choice(list("가나다 라"), size=rng.integers(1, 12)))
        b = "".join(rng.choice(list("가나다 라"), size=rng.integers(1, 12)))
        common = longest_common_run(list(a), list(b))
        expected = 0.0 if common == 0 else 2 * common / (len(a) + len(b))
        assert klue_mrc_rouge_w(a, b) == pytest.approx(expected)


def test_scores_by_hand():
    gold = {"q1": ["1418년", "1418"], "q2": ["세종"], "q3": [], "q4": [], "q5": ["조선"]}
    predictions = {"q1": "1418", "q2": "세종대왕", "q3": "", "q4": "태종"}
    # EM: q1 (1418 = 1418), q3 ("" = "") -> 2 of 5. ROUGE-W: q1 1, q2 2 * 2/4 * 1 / 1.5 = 2/3,
    # q3 1, q4 0, q5 no prediction 0.
    scores = klue_mrc_scores(gold, predictions)
    assert scores["exact_match"] == pytest.approx(40.0)
    assert scores["rouge_w"] == pytest.approx(100 * (1 + 2 / 3 + 1) / 5)
    # Null odds above the threshold answer "": q4 becomes right, q1 wrong.
    null_odds = {"q1": 1.0, "q2": -5.0, "q3": -5.0, "q4": 0.5}
    scores = qa_metrics.evaluate("klue_mrc", gold, predictions, "2.0", null_odds, 0.0)
    assert scores == {
        "exact_match": pytest.approx(40.0),
        "rouge_w": pytest.approx(100 * (2 / 3 + 1 + 1) / 5),
    }


# ---------------------------------------------------------------------------
# The record and the files.


def test_the_record():
    task = KLUE.task("klue-mrc")
    assert task.files[DEV] == "klue-mrc-v1.1_dev.json" and task.directory == "klue-mrc-v1.1"
    assert (task.metric, task.table_metrics, task.qa_metric) == (
        "rouge_w",
        ("exact_match", "rouge_w"),
        "klue_mrc",
    )
    recipe = task.recipes["small"]
    assert (recipe.learning_rate, recipe.train_batch_size, recipe.num_train_epochs) == (3e-5, 16, 5)
    assert (recipe.max_seq_length, recipe.warmup_proportion) == (510, 0.0)
    assert task.published_score("KLUE-RoBERTa-base", "rouge_w", TEST).value == 73.98
    assert task.published_score("koELECTRA-base", "exact_match", TEST).value == 59.82


def test_the_files_are_read_as_squad_2_with_guids(tmp_path):
    built = build_task(KLUE, "klue-mrc", write_mrc(tmp_path, count=6))
    task = built.task
    assert built.files[DEV].endswith(os.path.join("klue-mrc-v1.1", "klue-mrc-v1.1_dev.json"))
    assert (task.version, task.qa_metric, task.primary_metric) == ("2.0", "klue_mrc", "rouge_w")
    assert task.max_seq_length == 510
    examples = task.evaluation.examples
    assert [e.qas_id for e in examples] == [f"klue-mrc-v1_dev_{i:05d}" for i in range(6)]
    assert [e.is_impossible for e in examples] == [False, False, True] * 2
    assert examples[0].answers == [("1418년", CONTEXT.index("1418년"))]
    assert examples[2].answers == []
    assert len(task.train) == 6 and task.train.skipped == 0
