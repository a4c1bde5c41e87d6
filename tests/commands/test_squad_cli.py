"""finetune.py --task=squad end to end (each run pays TensorFlow's start-up)."""

import json
import os
import subprocess
import sys

import pytest
from finetuning_support import make_pretrained_dir

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(*args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    return subprocess.run(
        [sys.executable, os.path.join(PROJECT, "finetune.py"), "--task=squad", *args],
        capture_output=True,
        text=True,
        cwd=PROJECT,
        env=env,
        timeout=300,
    )


def _squad_v2(path):
    contexts = ["the movie was very good", "a film is fun", "the actor was bad"]
    paragraphs = []
    for p, context in enumerate(contexts):
        words = context.split()
        qas = [
            {
                "id": f"p{p}a",
                "question": words[-1],
                "answers": [{"text": words[-1], "answer_start": context.rindex(words[-1])}],
                "is_impossible": False,
            },
            {"id": f"p{p}n", "question": "plot story", "answers": [], "is_impossible": True},
        ]
        paragraphs.append({"context": context, "qas": qas})
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"version": "v2.0", "data": [{"title": "toy", "paragraphs": paragraphs}]}, f)
    return contexts


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("squad_cli")
    pretrained = make_pretrained_dir(str(root / "pretrained"))
    contexts = _squad_v2(root / "train.json")
    return root, pretrained, contexts


@pytest.mark.slow
def test_squad_v2_writes_official_files_and_resumes(files):
    root, pretrained, contexts = files
    out = root / "out"
    args = [
        f"--init_checkpoint={pretrained}",
        "--squad_version=2.0",
        f"--train_file={root / 'train.json'}",
        f"--predict_file={root / 'train.json'}",
        "--max_seq_length=24",
        "--train_batch_size=4",
        "--num_train_epochs=1",
        f"--output_dir={out}",
    ]
    result = _run(*args)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "6 training questions" in result.stdout and "ETA" in result.stdout
    with open(out / "results.json", encoding="utf-8") as f:
        results = json.load(f)
    for key in (
        "exact_match",
        "f1",
        "HasAns_exact",
        "HasAns_f1",
        "NoAns_exact",
        "NoAns_f1",
        "best_exact",
        "best_exact_thresh",
        "best_f1",
        "best_f1_thresh",
    ):
        assert key in results["median"], key
    assert results["median"]["HasAns_total"] == 3 and results["median"]["NoAns_total"] == 3
    assert results["settings"]["num_train_epochs"] == 1.0
    with open(out / "predictions.json", encoding="utf-8") as f:
        predictions = json.load(f)
    with open(out / "null_odds.json", encoding="utf-8") as f:
        null_odds = json.load(f)
    ids = {f"p{p}{kind}" for p in range(3) for kind in "an"}
    assert set(predictions) == ids and set(null_odds) == ids
    for qid, text in predictions.items():
        # Empty (null odds above the -2.75 default threshold) or a span of its context.
        assert (text == "") == (null_odds[qid] > -2.75)
        assert text in contexts[int(qid[1])]
    assert os.path.exists(out / "trial_0" / "model.weights.h5")
    assert not os.path.exists(out / "trial_0" / "checkpoints")
    # The best trial is exported for TF Serving, as for classification tasks.
    version_dir = out / "export" / "squad20" / "1"
    assert f"TF Serving export of trial_0: {version_dir}" in result.stdout
    with open(version_dir / "assets" / "serving_config.json", encoding="utf-8") as f:
        config = json.load(f)
    assert config["kind"] == "question_answering" and config["version_2"]
    assert config["max_seq_length"] == 24 and config["null_score_threshold"] == -2.75

    again = _run(*args)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "already finished" in again.stdout


def test_not_squad_json_is_a_clear_error(files):
    root, pretrained, _ = files
    bad = root / "bad.json"
    bad.write_text('{"rows": [1, 2]}', encoding="utf-8")
    result = _run(
        f"--init_checkpoint={pretrained}", f"--train_file={bad}", f"--output_dir={root / 'unused'}"
    )
    assert result.returncode != 0
    assert f"{bad}: top level: has no 'data' key" in result.stderr
    assert not os.path.exists(root / "unused")


@pytest.mark.slow
def test_korquad_files_are_scored_with_korquads_metric(files, tmp_path):
    _, pretrained, _ = files
    contexts = ["서울에서 영화를 보았다", "조선은 1392년에 세워졌다", "태조는 이성계이다"]
    answers = ["영화를", "1392년에", "이성계이다"]
    paragraphs = [
        {
            "context": c,
            "qas": [
                {
                    "id": f"k{i}",
                    "question": "무엇",
                    "answers": [{"text": a, "answer_start": c.index(a)}],
                }
            ],
        }
        for i, (c, a) in enumerate(zip(contexts, answers))
    ]
    data = tmp_path / "KorQuAD_v1.0_dev.json"
    data.write_text(
        json.dumps(
            {"version": "KorQuAD_v1.0_dev", "data": [{"title": "t", "paragraphs": paragraphs}]},
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    out = tmp_path / "out"
    result = _run(
        f"--init_checkpoint={pretrained}",
        f"--train_file={data}",
        f"--predict_file={data}",
        "--max_seq_length=24",
        "--train_batch_size=4",
        "--num_train_epochs=1",
        "--noexport",
        f"--output_dir={out}",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Scoring with korquad's official metric" in result.stdout
    assert "KorQuAD 1.0 scores (median over 1 trial(s), percent)" in result.stdout
    with open(out / "results.json", encoding="utf-8") as f:
        results = json.load(f)
    assert results["task"]["qa_metric"] == "korquad"
    # The scores are those of the stand-alone scorer on the predictions written.
    scored = subprocess.run(
        [
            sys.executable,
            "-m",
            "electra_tf.commands.evaluate_qa",
            str(data),
            str(out / "predictions.json"),
        ],
        capture_output=True,
        text=True,
        cwd=PROJECT,
        timeout=120,
    )
    assert scored.returncode == 0, scored.stderr
    official = json.loads(scored.stdout)
    assert official["metric"] == "korquad"
    assert results["median"]["f1"] == pytest.approx(official["f1"])
    assert results["median"]["exact_match"] == pytest.approx(official["exact_match"])
