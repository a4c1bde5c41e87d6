"""finetune.py --task_type=multiple_choice on tiny C3 files, then its export passes the check."""

import json
import os
import subprocess
import sys

import pytest
from finetuning_support import make_pretrained_dir
from mc_support import write_c3

PROJECT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)


def _documents(count, offset=0):
    """Documents of the toy vocabulary: the right option is the word the context repeats."""
    words = ["movie", "film", "plot", "actor", "story"]
    documents = []
    for i in range(count):
        word = words[(i + offset) % len(words)]
        options = [w for w in words if w != word][: 1 + i % 3] + [word]
        documents.append(
            [
                [f"the {word} was good", f"the {word} is fun"],
                [{"question": "what was good ?", "choice": options, "answer": word}],
                f"{i + offset}-1",
            ]
        )
    return documents


def _run(*command):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    return subprocess.run(
        [sys.executable, *command],
        capture_output=True,
        text=True,
        cwd=PROJECT,
        env=env,
        timeout=600,
    )


@pytest.mark.slow
def test_fine_tuning_scores_writes_predictions_and_exports_a_checked_model(tmp_path):
    pretrained = make_pretrained_dir(str(tmp_path / "pretrained"))
    train_d = write_c3(tmp_path / "c3-d-train.json", _documents(8))
    train_m = write_c3(tmp_path / "c3-m-train.json", _documents(4, offset=20))
    dev = write_c3(tmp_path / "c3-d-dev.json", _documents(5, offset=40))
    out = tmp_path / "out"
    result = _run(
        os.path.join(PROJECT, "finetune.py"),
        f"--init_checkpoint={pretrained}",
        "--task=c3",
        "--task_type=multiple_choice",
        f"--train_file={train_d},{train_m}",
        f"--dev_file={dev}",
        "--num_train_epochs=1",
        "--train_batch_size=4",
        "--max_seq_length=16",
        f"--output_dir={out}",
        "--kernels=reference",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "12 train questions, 5 dev" in result.stdout
    with open(out / "results.json", encoding="utf-8") as f:
        results = json.load(f)
    assert results["task"]["task_type"] == "multiple_choice"
    assert results["primary_metric"] == "accuracy" and set(results["median"]) == {"accuracy"}
    trial = results["trials"][0]
    predictions = trial["predictions"]["dev_predictions.tsv"]
    with open(predictions, encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert lines[0] == "index\tgold\tprediction" and len(lines) == 6
    index, gold, predicted = lines[1].split("\t")
    assert index == "40-1-0" and gold == "movie" and predicted in ("film", "movie")
    version = out / "export" / "c3" / "1"
    with open(version / "assets" / "serving_config.json", encoding="utf-8") as f:
        config = json.load(f)
    assert config["kind"] == "multiple_choice" and config["max_seq_length"] == 16
    check = _run(
        "-m",
        "electra_tf.commands.check_export",
        "--benchmark_requests=2",
        "--benchmark_batch_sizes=1,2",
        str(version),
    )
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-2000:]
    assert "PASSED" in check.stdout and "a question without options" in check.stdout
    # The latency benchmark sends a row of options per question.
    assert "latency batch 2: p50" in check.stdout
