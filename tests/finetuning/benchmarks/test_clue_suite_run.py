"""`--suite=clue` end to end on tiny files: scores, predictions and submission files (slow)."""

import json
import os

import numpy as np
import pytest
from clue_support import clue_data
from finetuning_support import make_pretrained_dir

from electra_tf.commands import suite as suite_command


def _tsv_accuracy(path):
    rows = [line.split("\t") for line in open(path, encoding="utf-8").read().splitlines()[1:]]
    return float(np.mean([gold == predicted for _, gold, predicted in rows]))


def _entity_texts(line, type_):
    return set((line.get("label") or {}).get(type_, {}))


def _clue_f1(predictions_file, gold_file):
    """CLUENER2020's score.py over the ten types (0 where it would divide by zero)."""
    predicted = [json.loads(x) for x in open(predictions_file, encoding="utf-8")]
    gold = [json.loads(x) for x in open(gold_file, encoding="utf-8")]
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
    for type_ in types:
        tp = fp = fn = 0
        for p, g in zip(predicted, gold):
            p, g = _entity_texts(p, type_), _entity_texts(g, type_)
            tp, fp, fn = tp + len(p & g), fp + len(p - g), fn + len(g - p)
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        total += 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return total / len(types)


@pytest.mark.slow
def test_clue_suite_scores_from_its_predictions_and_writes_submissions(tmp_path, capsys):
    pretrained = make_pretrained_dir(str(tmp_path / "pretrained"))
    data = clue_data(tmp_path / "data")
    out = tmp_path / "out"
    flags = [
        "--suite=clue",
        f"--data_dir={data}",
        f"--init_checkpoint={pretrained}",
        f"--output_dir={out}",
        "--num_train_epochs=1",
        "--max_seq_length=32",
        "--learning_rate=1e-3",
        "--nosave_models",
    ]
    assert suite_command.main(flags) == 0
    capsys.readouterr()
    suite = json.loads((out / "suite.json").read_text())
    assert list(suite["tasks"]) == ["tnews", "ocnli", "cluener", "c3"]
    assert list(suite["skipped"]) == ["iflytek", "afqmc", "cmnli"]
    for name, entry in suite["tasks"].items():
        results = json.loads(open(entry["results"]).read())
        trial = results["trials"][0]
        predictions = trial["predictions"]
        if name == "cluener":
            recomputed = _clue_f1(
                predictions["dev_predictions.json"], os.path.join(data, "cluener", "dev.json")
            )
        else:
            recomputed = _tsv_accuracy(entry["predictions"])
        assert entry["score"] == pytest.approx(100 * recomputed, abs=1e-4), name
    # The submission files, in the trial and copied beside results.json.
    tnews = [json.loads(x) for x in open(out / "tnews" / "tnews11_predict.json")]
    assert [r["id"] for r in tnews] == [0, 1, 2]
    assert all(set(r) == {"id", "label"} and r["label"].isdigit() for r in tnews)
    c3 = [json.loads(x) for x in open(out / "c3" / "c311_predict.json")]
    assert [r["id"] for r in c3] == [0, 1, 2] and all(r["label"] in (0, 1, 2, 3) for r in c3)
    cluener = [json.loads(x) for x in open(out / "cluener" / "cluener_predict.json")]
    assert [r["id"] for r in cluener] == [10, 11, 12, 13]
    assert not (out / "ocnli" / "ocnli_50k_predict.json").exists()  # no test.json given
    table = (out / "suite.md").read_text()
    assert "| model | TNEWS' | OCNLI | CLUENER | C3 |" in table
    # CLUENER's published F1 is on the leaderboard's test set only: marked so.
    assert "| published: BERT-base | 56.09 | 74.50 | 78.82 (test) | 65.70 |" in table
