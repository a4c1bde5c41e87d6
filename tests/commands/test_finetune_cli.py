"""finetune.py from the command line (few runs: each pays TensorFlow's start-up)."""

import json
import os
import subprocess
import sys

import pytest
from finetuning_support import VOCAB, make_pretrained_dir, toy_sentences, write_vocab

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(*args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    return subprocess.run(
        [sys.executable, os.path.join(PROJECT, "finetune.py"), *args],
        capture_output=True,
        text=True,
        cwd=PROJECT,
        env=env,
        timeout=300,
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    pretrained = make_pretrained_dir(str(root / "pretrained"))
    with open(root / "train.tsv", "w", encoding="utf-8") as f:
        f.write("id\tdocument\tlabel\n")
        for i, (text, label) in enumerate(toy_sentences(8)):
            f.write(f"{i}\t{text}\t{'pos' if label else 'neg'}\n")
    with open(root / "test.tsv", "w", encoding="utf-8") as f:
        f.write("id\tdocument\n7\tgood film\n9\tbad film\n")
    return root, pretrained


def test_user_task_trains_and_writes_results(files):
    root, pretrained = files
    out = root / "out"
    result = _run(
        f"--init_checkpoint={pretrained}",
        f"--train_file={root / 'train.tsv'}",
        f"--dev_file={root / 'train.tsv'}",
        f"--test_file={root / 'test.tsv'}",
        "--task=reviews",
        "--text_column=document",
        "--index_column=id",
        "--num_train_epochs=1",
        "--train_batch_size=4",
        f"--output_dir={out}",
        "--kernels=reference",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "median" in result.stdout and "accuracy" in result.stdout
    with open(out / "results.json", encoding="utf-8") as f:
        results = json.load(f)
    assert results["task"]["label_names"] == ["neg", "pos"]
    assert set(results["median"]) == {"accuracy", "f1", "mcc"}
    assert results["settings"]["learning_rate"] == 3e-4  # tiny/small default (paper Table 7)
    with open(out / "trial_0" / "reviews.tsv", encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert lines[0] == "index\tprediction" and [row.split("\t")[0] for row in lines[1:]] == [
        "7",
        "9",
    ]
    assert all(row.split("\t")[1] in ("neg", "pos") for row in lines[1:])
    # The best trial is exported for TF Serving: <output_dir>/export/<task>/<version>/.
    version_dir = out / "export" / "reviews" / "1"
    assert (version_dir / "saved_model.pb").is_file()
    assert (version_dir / "assets" / "labels.txt").read_text(encoding="utf-8") == "neg\npos\n"
    assert f"TF Serving export of trial_0: {version_dir}" in result.stdout


def test_missing_column_error(files):
    root, pretrained = files
    result = _run(
        f"--init_checkpoint={pretrained}",
        f"--train_file={root / 'train.tsv'}",
        f"--output_dir={root / 'unused'}",
    )
    assert result.returncode != 0
    assert "no column 'text' (--text_column)" in result.stderr
    assert "'id', 'document', 'label'" in result.stderr
    assert not os.path.exists(root / "unused")


def test_vocab_size_mismatch_error(files):
    root, pretrained = files
    vocab = write_vocab(str(root / "bigger_vocab.txt"), VOCAB + ["extra"])
    result = _run(
        f"--init_checkpoint={pretrained}",
        f"--train_file={root / 'train.tsv'}",
        "--text_column=document",
        f"--vocab_file={vocab}",
        f"--output_dir={root / 'out_vocab'}",
    )
    assert result.returncode != 0
    assert "--vocab_file" in result.stderr and f"has {len(VOCAB) + 1} tokens" in result.stderr
    assert not os.path.exists(root / "out_vocab")


@pytest.mark.slow
def test_two_replicas_in_bfloat16_with_accumulation(files):
    root, pretrained = files
    out = root / "out_mirrored"
    result = _run(
        f"--init_checkpoint={pretrained}",
        f"--train_file={root / 'train.tsv'}",
        f"--dev_file={root / 'train.tsv'}",
        "--task=reviews",
        "--text_column=document",
        "--num_train_epochs=1",
        "--train_batch_size=4",
        f"--output_dir={out}",
        "--strategy=mirrored",
        "--num_cpu_devices=2",
        "--mixed_precision=bfloat16",
        "--gradient_accumulation_steps=2",
        "--loss_reduction=sum",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "2 replica(s), bfloat16" in result.stdout
    assert "(summed loss, as the original code)" in result.stdout
    with open(out / "results.json", encoding="utf-8") as f:
        results = json.load(f)
    assert results["settings"]["mixed_precision"] == "bfloat16"
    assert results["settings"]["loss_reduction"] == "sum"
    assert set(results["median"]) == {"accuracy", "f1", "mcc"}
    # The saved model and its TF Serving export are float32.
    assert "bfloat16" not in (out / "trial_0" / "model.json").read_text(encoding="utf-8")
    assert (out / "export" / "reviews" / "1" / "saved_model.pb").is_file()


def test_a_batch_the_replicas_do_not_divide_is_one_line_naming_the_flags(files):
    root, pretrained = files
    result = _run(
        f"--init_checkpoint={pretrained}",
        f"--train_file={root / 'train.tsv'}",
        "--text_column=document",
        "--train_batch_size=6",
        "--gradient_accumulation_steps=2",
        "--strategy=mirrored",
        "--num_cpu_devices=2",
        f"--output_dir={root / 'out_indivisible'}",
    )
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("finetune.py")]
    assert errors == [
        "finetune.py: error: --train_batch_size=6 is not divisible by the 2 replicas of the "
        "distribution strategy times --gradient_accumulation_steps=2."
    ]
    assert not os.path.exists(root / "out_indivisible")


def _write_conll(path, rows, labelled=True):
    with open(path, "w", encoding="utf-8") as f:
        for words, tags in rows:
            f.write(
                "".join(f"{w}\tX\t{t}\n" if labelled else f"{w}\n" for w, t in zip(words, tags))
                + "\n"
            )


@pytest.mark.slow
def test_tagging_task_from_conll_files_trains_scores_and_exports(files):
    from finetuning_support import toy_tagged_sentences

    root, pretrained = files
    train = toy_tagged_sentences(64, tag_format="suffix")
    assert {t for _, tags in train for t in tags} == {"O", "PER-B", "WORK-B", "WORK-I"}
    _write_conll(root / "ner_train.conll", train)
    _write_conll(root / "ner_dev.conll", toy_tagged_sentences(12, seed=1, tag_format="suffix"))
    _write_conll(root / "ner_test.conll", toy_tagged_sentences(3, seed=2), labelled=False)
    out = root / "out_ner"
    result = _run(
        f"--init_checkpoint={pretrained}",
        "--task=ner",
        "--task_type=tagging",
        f"--train_file={root / 'ner_train.conll'}",
        f"--dev_file={root / 'ner_dev.conll'}",
        f"--test_file={root / 'ner_test.conll'}",
        "--num_train_epochs=2",
        "--train_batch_size=8",
        "--max_seq_length=16",
        f"--output_dir={out}",
        "--kernels=reference",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "suffix tags O, PER-B, WORK-B, WORK-I" in result.stdout
    assert "Per entity type (median):" in result.stdout
    with open(out / "results.json", encoding="utf-8") as f:
        results = json.load(f)
    assert results["task"]["task_type"] == "tagging" and results["primary_metric"] == "f1"
    assert results["settings"]["max_seq_length"] == 16
    assert {"precision", "recall", "f1", "accuracy", "f1/PER", "f1/WORK"} <= set(results["median"])
    lines = (out / "trial_0" / "dev_predictions.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines[0].split(" ")) == 3 and lines[0].split(" ")[1] in ("O", "PER-B", "WORK-B")
    assert (out / "trial_0" / "test_predictions.txt").is_file()
    version_dir = out / "export" / "ner" / "1"
    assert (version_dir / "assets" / "labels.txt").read_text(
        encoding="utf-8"
    ) == "O\nPER-B\nWORK-B\nWORK-I\n"
    with open(version_dir / "assets" / "serving_config.json", encoding="utf-8") as f:
        assert json.load(f)["kind"] == "tagging"


def test_tagging_tags_of_two_kinds_are_one_line(files):
    root, pretrained = files
    _write_conll(root / "mixed.conll", [(["a", "b", "c"], ["B-PER", "PERSON", "O"])])
    result = _run(
        f"--init_checkpoint={pretrained}",
        "--task_type=tagging",
        f"--train_file={root / 'mixed.conll'}",
        f"--output_dir={root / 'out_mixed'}",
    )
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("finetune.py")]
    assert (
        len(errors) == 1
        and "mixed.conll, line 2: some tags look like entity tags (B-PER)" in errors[0]
        and "--tag_format=plain" in errors[0]
    )
    assert not os.path.exists(root / "out_mixed")
