"""finetune.py --task_type=dependency_parsing end to end: scores, predictions, export, check."""

import json
import os
import subprocess
import sys

import pytest
from dependency_parsing_support import toy_parses, write_klue_dp
from finetuning_support import make_pretrained_dir

PROJECT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)


def _run(*args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=PROJECT,
        env=env,
        timeout=600,
    )


@pytest.mark.slow
def test_klue_dp_files_train_score_predict_export_and_pass_the_check(tmp_path):
    from electra_tf.finetuning.dependency_parsing.data import read_parsed_file
    from electra_tf.finetuning.dependency_parsing.metrics import score_sentences

    pretrained = make_pretrained_dir(str(tmp_path / "pretrained"))
    train = write_klue_dp(tmp_path / "train.tsv", toy_parses(32))
    dev = write_klue_dp(tmp_path / "dev.tsv", toy_parses(8, seed=1))
    out = tmp_path / "out"
    result = _run(
        os.path.join(PROJECT, "finetune.py"),
        f"--init_checkpoint={pretrained}",
        "--task=toydp",
        "--task_type=dependency_parsing",
        f"--train_file={train}",
        f"--dev_file={dev}",
        f"--test_file={dev}",
        "--num_train_epochs=2",
        "--train_batch_size=8",
        "--max_seq_length=16",
        f"--output_dir={out}",
        "--kernels=reference",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "dependency parsing, 38 relations" in result.stdout
    with open(out / "results.json", encoding="utf-8") as f:
        results = json.load(f)
    assert results["primary_metric"] == "las_macro_f1"
    assert results["task"]["task_type"] == "dependency_parsing"
    assert set(results["median"]) == {
        "uas_macro_f1",
        "uas_micro_f1",
        "las_macro_f1",
        "las_micro_f1",
    }
    trial = results["trials"][0]
    assert set(trial["predictions"]) == {"dev", "test"}
    # The predictions file is the dev file with predicted columns: read back, it scores the same.
    gold = read_parsed_file(dev, "dev")
    predicted = read_parsed_file(trial["predictions"]["dev"], "dev", labelled=False)
    assert predicted.words == gold.words
    rescored = score_sentences(gold.heads, gold.label_ids(), predicted.heads, predicted.label_ids())
    assert rescored == pytest.approx(trial["dev"], abs=1e-9)
    # The run's own export and a later one both pass the check in a fresh process.
    export = _run(
        "-m",
        "electra_tf.commands.export",
        f"--checkpoint={out}",
        f"--export_base={tmp_path / 'serving'}",
        "--model_name=dp",
    )
    assert export.returncode == 0, export.stderr[-3000:]
    version = tmp_path / "serving" / "dp" / "1"
    with open(version / "assets" / "serving_config.json", encoding="utf-8") as f:
        assert json.load(f)["kind"] == "dependency_parsing"
    check = _run("-m", "electra_tf.commands.check_export", str(version))
    assert check.returncode == 0 and check.stdout.strip().endswith("PASSED"), check.stdout[-3000:]
    assert (out / "export" / "toydp" / "1" / "saved_model.pb").is_file()


def test_a_file_out_of_the_layout_stops_the_run_in_one_line(tmp_path):
    pretrained = make_pretrained_dir(str(tmp_path / "pretrained"))
    bad = tmp_path / "bad.tsv"
    bad.write_text("## g\tx y\n1\tx\tx\tNNG\t2\tNP\n2\ty\ty\tVV\t0\tROOT\n", encoding="utf-8")
    result = _run(
        os.path.join(PROJECT, "finetune.py"),
        f"--init_checkpoint={pretrained}",
        "--task_type=dependency_parsing",
        f"--train_file={bad}",
        f"--output_dir={tmp_path / 'out'}",
    )
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("finetune.py")]
    assert len(errors) == 1 and f"{bad}, line 3: DEPREL 'ROOT' is not one of KLUE's" in errors[0]
    assert not os.path.exists(tmp_path / "out")
