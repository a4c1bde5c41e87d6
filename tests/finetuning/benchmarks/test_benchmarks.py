"""Benchmark suites: their records, and their tasks built from data directories as distributed."""

import json
import os
import shutil

import pytest

from electra_tf.finetuning.benchmarks import SUITES
from electra_tf.finetuning.benchmarks.building import build_suite, build_task
from electra_tf.finetuning.benchmarks.chinese_electra import CHINESE_ELECTRA
from electra_tf.finetuning.benchmarks.koelectra import KOELECTRA
from electra_tf.finetuning.classification.data import CLASSIFICATION, REGRESSION
from electra_tf.finetuning.question_answering.data import SquadDataError, read_squad_json
from electra_tf.finetuning.question_answering.task import QUESTION_ANSWERING
from electra_tf.finetuning.tagging.data import TAGGING

# The first rows of five of KoELECTRA's task files (tests/fixtures/README.md).
SAMPLE_KOELECTRA = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "koelectra")


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return str(path)


def _squad(articles, version):
    return json.dumps({"version": version, "data": articles}, ensure_ascii=False)


# ---------------------------------------------------------------------------
# The records.


def test_suites_are_complete():
    assert set(SUITES) == {"koelectra", "chinese_electra", "klue", "clue"}
    assert [t.name for t in KOELECTRA.tasks] == [
        "nsmc",
        "naver-ner",
        "paws",
        "kornli",
        "korsts",
        "question-pair",
        "korquad",
        "hate-speech",
    ]
    assert [t.name for t in CHINESE_ELECTRA.tasks] == [
        "cmrc2018",
        "drcd",
        "xnli",
        "chnsenticorp",
        "lcqmc",
        "bqcorpus",
    ]
    # KLUE's (test-set) rows: test_klue_suite.py; CLUE's come from three pages, not every one
    # for every model (tests/finetuning/benchmarks/test_clue_records.py).
    for suite in (KOELECTRA, CHINESE_ELECTRA):
        assert suite.source.startswith("https://github.com/")
        for task in suite.tasks:
            assert set(task.recipes) == {"small", "base"}, task.name
            assert task.recipes["small"].learning_rate > 0
            assert {p.model for p in task.published} == set(suite.models), task.name
            for entry in task.published:
                # Every model has the headline number on the scored split.
                headline = task.published_score(entry.model, task.metric)
                assert 0 < headline.value <= 100
                for score in entry.scores:
                    assert score.metric in (task.metric, "exact_match"), task.name
                    assert score.mean is None or score.mean <= score.value
    with pytest.raises(KeyError, match="its tasks are nsmc, naver-ner"):
        KOELECTRA.task("klue")
    with pytest.raises(KeyError, match="no published accuracy on dev"):
        KOELECTRA.task("nsmc").published_score("KoELECTRA-Small-v3", "accuracy", "dev")


def test_the_readers_and_metrics_the_tables_are_scored_by():
    kinds = {t.name: (t.kind, t.metric) for s in SUITES.values() for t in s.tasks}
    assert kinds["naver-ner"] == (TAGGING, "f1")
    assert kinds["korsts"] == (REGRESSION, "spearman")
    assert kinds["hate-speech"] == (CLASSIFICATION, "macro_f1")
    assert kinds["korquad"] == kinds["cmrc2018"] == kinds["drcd"] == (QUESTION_ANSWERING, "f1")
    assert KOELECTRA.task("korquad").qa_metric == "korquad"
    assert CHINESE_ELECTRA.task("drcd").qa_metric == "drcd"
    assert KOELECTRA.task("naver-ner").tagging_layout == "sentence_per_line"
    # KoELECTRA's published numbers are on its configs' test files (KorQuAD: its dev file).
    assert KOELECTRA.task("paws").files["test"] == "test_2k.tsv"
    assert KOELECTRA.task("paws").scored_split == "test"
    assert KOELECTRA.task("hate-speech").files["dev"] == "val.tsv"


# ---------------------------------------------------------------------------
# Building tasks from a data directory.


def test_koelectra_tasks_built_from_its_layout(tmp_path):
    root = tmp_path / "data"
    sts = "genre\tfilename\tyear\tid\tscore\tsentence1\tsentence2\n"
    _write(
        root / "korsts" / "sts-train.tsv",
        sts + "g\tf\t2012\t1\t4.5\t가\t나\ng\tf\t2012\t2\t1\t다\t라\n",
    )
    _write(root / "korsts" / "sts-test.tsv", sts + "g\tf\t2012\t3\t2.0\t마\t바\n")
    # No sts-dev.tsv: listed, the task still built.
    _write(root / "naver-ner" / "train.tsv", "지미 카터는\tPER-B PER-I\n서울\tLOC-B\n")
    _write(root / "naver-ner" / "test.tsv", "부산 에\tLOC-B O\n")
    context = "1989년 2월 15일 시위"
    article = {
        "title": "임종석",
        "paragraphs": [
            {
                "context": context,
                "qas": [
                    {
                        "id": "6548850-0-0",
                        "question": "언제?",
                        "answers": [{"text": "1989년 2월 15일", "answer_start": 0}],
                    }
                ],
            }
        ],
    }
    for name, version in (("train", "KorQuAD_v1.0_train"), ("dev", "KorQuAD_v1.0_dev")):
        _write(root / "korquad" / f"KorQuAD_v1.0_{name}.json", _squad([article], version))
    said = []
    built = {
        b.benchmark.name: b for b in build_suite(KOELECTRA, str(root), "base", warn=said.append)
    }
    assert [n for n, b in built.items() if b.skipped] == [
        "nsmc",
        "paws",
        "kornli",
        "question-pair",
        "hate-speech",
    ]
    assert built["nsmc"].missing == [
        str(root / "nsmc" / "ratings_train.txt"),
        str(root / "nsmc" / "ratings_test.txt"),
    ]
    assert "nsmc: skipped (no " in built["nsmc"].describe()

    korsts = built["korsts"]
    assert korsts.missing == [str(root / "korsts" / "sts-dev.tsv")]
    task = korsts.task
    assert type(task).__name__ == "ClassificationTask"
    assert task.definition.task_type == "regression" and task.definition.label_scale == 5.0
    assert task.primary_metric == "spearman" and task.max_seq_length == 128
    assert task.data.train.labels.tolist() == [4.5, 1.0]
    assert list(task.data.dev) == ["dev"] and task.data.dev["dev"].texts_a == ["마"]
    assert task.definition.num_train_epochs == 10.0  # KoELECTRA's config

    ner = built["naver-ner"].task
    assert type(ner).__name__ == "TaggingTask"
    assert ner.definition.tag_format == "suffix" and ner.definition.num_train_epochs == 20.0
    assert ner.data.train.sentences == [["지미", "카터는"], ["서울"]]
    assert ner.data.dev.tags == [["LOC-B", "O"]]

    korquad = built["korquad"]
    assert type(korquad.task).__name__ == "SquadTask"
    assert korquad.task.qa_metric == "korquad" and korquad.task.max_seq_length == 512
    assert korquad.recipe.train_batch_size == 8  # the base config's
    assert len(korquad.task.train) == len(korquad.task.evaluation) == 1


def test_classification_evaluation_splits(tmp_path):
    """The scored split is `dev`; the project's other labelled files are scored with a suffix."""
    root = tmp_path / "chinese" / "finetuning_data"
    for split, rows in (("train", "1\t好\n0\t差\n"), ("dev", "1\t很好\n"), ("test", "0\t很差\n")):
        _write(root / "chnsenticorp" / f"{split}.tsv", "label\ttext_a\n" + rows)
    pair = "text_a\ttext_b\tlabel\n"
    _write(root / "lcqmc" / "train.tsv", pair + "甲\t乙\t1\n丙\t丁\t0\n")
    _write(root / "lcqmc" / "dev.tsv", pair + "甲\t乙\t1\n")
    # Chinese-ELECTRA's data directory, or the folder above its finetuning_data/.
    built = build_task(CHINESE_ELECTRA, "chnsenticorp", str(tmp_path / "chinese"))
    data = built.task.data
    assert data.train.texts_a == ["好", "差"] and data.train.labels.tolist() == [1, 0]
    assert list(data.dev) == ["dev", "dev_test"]
    assert data.dev["dev"].texts_a == ["很好"] and data.dev["dev_test"].texts_a == ["很差"]
    assert built.task.definition.metrics[0] == "accuracy" and built.recipe.learning_rate == 3e-4
    lcqmc = build_task(CHINESE_ELECTRA, "lcqmc", str(root), "base")
    assert lcqmc.task.definition.is_pair and list(lcqmc.task.data.dev) == ["dev"]
    assert lcqmc.missing == [str(root / "lcqmc" / "test.tsv")]
    assert lcqmc.recipe.learning_rate == 1e-4 and lcqmc.task.max_seq_length == 128
    with pytest.raises(KeyError, match="no recipe for model size 'large'"):
        build_task(CHINESE_ELECTRA, "lcqmc", str(root), "large")


def test_chinese_reading_comprehension_layouts(tmp_path):
    """CMRC 2018's SQuAD-style files (simplified) and DRCD's (traditional), as distributed."""
    root = tmp_path / "finetuning_data"
    cmrc = {
        "id": "DEV_0",
        "title": "战国无双3",
        "paragraphs": [
            {
                "id": "DEV_0",
                "context": "《战国无双3》是由光荣和ω-force开发的。",
                "qas": [
                    {
                        "id": "DEV_0_QUERY_0",
                        "question": "由哪两个公司开发？",
                        "answers": [{"text": "光荣和ω-force", "answer_start": 9}] * 3,
                    }
                ],
            }
        ],
    }
    drcd = {
        "id": "1147",
        "title": "梵文",
        "paragraphs": [
            {
                "id": "1147-5",
                "context": "在歐洲，梵語的學術研究，由德國學者開創。",
                "qas": [
                    {
                        "id": "1147-5-1",
                        "question": "哪一地區？",
                        "answers": [
                            {"id": "1", "text": "歐洲", "answer_start": 1},
                            {"id": "2", "text": "歐洲", "answer_start": 1},
                        ],
                    }
                ],
            }
        ],
    }
    for split in ("train", "dev"):
        _write(root / "cmrc2018" / f"{split}.json", _squad([cmrc], "v1.0"))
        _write(root / "drcd" / f"{split}.json", _squad([drcd], "1.3"))
    train = read_squad_json(str(root / "cmrc2018" / "train.json"), "1.1", is_training=True)
    assert train.examples[0].answer_span == (9, 19) and train.skipped == 0
    built = build_task(CHINESE_ELECTRA, "drcd", str(tmp_path))
    assert built.task.qa_metric == "drcd" and built.missing == [str(root / "drcd" / "test.json")]
    example = built.task.evaluation.examples[0]
    assert example.context[example.answer_span[0] : example.answer_span[1]] == "歐洲"
    assert example.answers == [("歐洲", 1), ("歐洲", 1)]
    assert build_task(CHINESE_ELECTRA, "cmrc2018", str(tmp_path)).task.qa_metric == "cmrc2018"
    # CMRC 2018's original layout is named, not read.
    original = [{"context_id": "DEV_0", "context_text": "…", "qas": [{"query_text": "?"}]}]
    path = _write(tmp_path / "cmrc2018_dev.json", json.dumps(original))
    with pytest.raises(SquadDataError, match="CMRC 2018's original layout.*squad-style-data"):
        read_squad_json(path, "1.1", is_training=False)


# ---------------------------------------------------------------------------
# Real samples.


def test_koelectra_samples_build(tmp_path):
    """KoELECTRA's files (their first rows), each also standing in for the training file."""
    root = tmp_path / "data"
    for benchmark in KOELECTRA.tasks:
        folder = os.path.join(SAMPLE_KOELECTRA, benchmark.directory)
        if not os.path.isdir(folder):
            continue
        (sample,) = os.listdir(folder)
        os.makedirs(root / benchmark.directory)
        for name in benchmark.files.values():
            shutil.copy(os.path.join(folder, sample), root / benchmark.directory / name)
    built = {b.benchmark.name: b for b in build_suite(KOELECTRA, str(root), warn=lambda m: None)}
    assert sorted(n for n, b in built.items() if b.skipped) == ["korquad", "nsmc", "question-pair"]
    for name in ("paws", "kornli", "korsts", "hate-speech"):
        data = built[name].task.data
        assert len(data.train) == 5, name
        assert all(len(split) == 5 for split in data.dev.values()), name
    korsts = built["korsts"].task.data.train
    assert korsts.texts_a[0] == "안전모를 가진 한 남자가 춤을 추고 있다."
    assert korsts.labels[:2].tolist() == [5.0, 4.75] and korsts.indices[:2] == ["0000", "0002"]
    kornli = built["kornli"].task.data.train
    assert kornli.texts_a[0] == '그리고 그가 말했다, "엄마, 저 왔어요."'
    assert kornli.labels[:2].tolist() == [2, 0]  # neutral, contradiction
    hate = built["hate-speech"].task.data.train
    assert hate.texts_a[:2] == ["송중기 시대극은 믿고본다. 첫회 신선하고 좋았다.", "지현우 나쁜놈"]
    assert hate.labels[:2].tolist() == [0, 1]  # none, offensive
    paws = built["paws"].task.data.train
    assert paws.indices[:2] == ["4", "6"] and paws.labels[:2].tolist() == [1, 1]
    ner = built["naver-ner"].task.data
    assert len(ner.train) == 20 and ner.train.sentences[0][:3] == ["나아가", "한", "스트로크를"]
    assert ner.train.tags[0] == ["O", "NUM-B", "NUM-I", "O", "O", "O", "O", "O", "O"]
