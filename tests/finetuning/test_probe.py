"""Tests for the linear probe (electra_tf.finetuning.probe) and its command."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from finetuning_support import make_pretrained_dir, toy_sentences

from electra_tf.finetuning.probe import fit_logistic_regression, mean_pooled_features

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_features_are_the_mean_over_each_examples_own_tokens(tmp_path):
    from electra_tf.artifacts.pretrained import load_discriminator

    encoder = load_discriminator(make_pretrained_dir(str(tmp_path))).encoder
    encoded = [
        ([2, 5, 6, 3], [0, 0, 0, 0]),
        ([2, 7, 3, 8, 9, 10, 3], [0, 0, 0, 1, 1, 1, 1]),
        ([2, 11, 3], [0, 0, 0]),
    ]
    pooled = mean_pooled_features(encoder, encoded, batch_size=3)  # padded to 7 together
    for row, (ids, segments) in enumerate(encoded):
        alone = encoder(
            {
                "input_ids": np.array([ids], np.int32),
                "input_mask": np.ones((1, len(ids)), np.int32),
                "segment_ids": np.array([segments], np.int32),
            },
            training=False,
        )
        np.testing.assert_allclose(pooled[row], np.asarray(alone)[0].mean(axis=0), atol=1e-5)
    assert pooled.shape == (3, encoder.hidden_size)


def test_separable_classes_are_found_and_the_strongest_sufficient_regularisation_wins():
    rng = np.random.default_rng(0)
    labels = np.arange(400) % 2
    x = rng.normal(size=(400, 8))
    x[:, 3] += 20.0 * labels  # far apart along one axis: every C separates them
    fit = fit_logistic_regression(x[:300], labels[:300], x[300:])
    assert (fit.predictions == labels[300:]).all()
    assert set(fit.held_out_accuracy) == {0.01, 0.1, 1.0, 10.0, 100.0}
    assert fit.c == 0.01


def test_features_without_signal_score_near_chance():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2000, 4))
    labels = rng.integers(0, 2, size=2000)
    fit = fit_logistic_regression(x[:1000], labels[:1000], x[1000:])
    assert abs(np.mean(fit.predictions == labels[1000:]) - 0.5) < 0.06


@pytest.mark.slow
def test_the_command_writes_results_in_the_fine_tuning_schema(tmp_path):
    pretrained = make_pretrained_dir(str(tmp_path / "pretrained"))
    for name, count, seed in (("train.tsv", 200, 0), ("dev.tsv", 60, 1)):
        with open(tmp_path / name, "w", encoding="utf-8") as f:
            f.write("text\tlabel\n")
            f.writelines(f"{text}\t{label}\n" for text, label in toy_sentences(count, seed))
    out = tmp_path / "probe"
    command = [
        sys.executable,
        "-m",
        "electra_tf.commands.probe",
        f"--init_checkpoint={pretrained}",
        f"--train_file={tmp_path / 'train.tsv'}",
        f"--dev_file={tmp_path / 'dev.tsv'}",
        "--task=toy",
        "--max_seq_length=16",
        f"--output_dir={out}",
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((out / "results.json").read_text())
    trial = results["trials"][0]
    assert results["primary_metric"] == "accuracy" and results["data"]["num_train_examples"] == 200
    # "good" vs "bad" is one token: even a random encoder's mean features separate it.
    assert trial["dev"]["accuracy"] > 0.9
    assert trial["majority_class_accuracy"] == pytest.approx(0.5)
    assert "Linear probe on toy" in done.stdout
    again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "finished earlier" in again.stdout
