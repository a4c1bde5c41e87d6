import itertools

import numpy as np
import pytest
import tensorflow as tf
from conftest import make_batch
from test_pretrainer import LENGTH, SLOTS, VOCAB, build, tiny_config

from electra_tf.pretraining.evaluation import PretrainingEvaluator, format_summary, roc_auc


def pairwise_auc(scores, labels):
    """AUC by comparing every (positive, negative) pair: 1 if ordered, 1/2 if tied."""
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
    return wins / (len(pos) * len(neg))


def test_auc_of_a_hand_example():
    # Positives 0.9, 0.4; negatives 0.1, 0.4, 0.8. Pairs won by the positive:
    # 0.9 beats all three (3); 0.4 beats 0.1, ties 0.4 (1/2), loses to 0.8 -> 4.5 / 6.
    assert roc_auc([0.9, 0.1, 0.4, 0.4, 0.8], [1, 0, 1, 0, 0]) == pytest.approx(0.75)
    assert roc_auc([3, 2, 1], [1, 1, 0]) == 1.0
    assert roc_auc([1, 2, 3], [1, 1, 0]) == 0.0
    assert roc_auc([5, 5, 5, 5], [1, 0, 1, 0]) == 0.5
    assert np.isnan(roc_auc([1, 2], [0, 0]))


def test_auc_equals_pairwise_counting_with_many_ties():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 6, size=300).astype(np.float32)  # many ties
    labels = rng.random(300) < 0.3
    assert roc_auc(scores, labels) == pytest.approx(pairwise_auc(scores, labels), abs=1e-12)


def test_evaluation_matches_numpy_over_two_batches(rng):
    config = tiny_config(dropout_rate=0.3, attention_dropout_rate=0.3)
    batches = [make_batch(rng, 5, LENGTH, SLOTS, VOCAB) for _ in range(2)]
    model = build(config, batches[0])
    dataset = tf.data.Dataset.from_tensor_slices(
        {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}).batch(5)
    result = PretrainingEvaluator(model, dataset, num_samples=2)()
    again = PretrainingEvaluator(model, dataset)()
    assert again.metrics == result.metrics  # no dropout: the same weights give the same numbers

    logits, labels, masks, nll, weights, correct, sampled = [], [], [], [], [], [], []
    for batch in batches:
        sums = model.compute_sums(tf.nest.map_structure(tf.convert_to_tensor, batch))
        logits.append(sums["disc_logits"].numpy().astype(np.float64))
        labels.append(sums["labels"].numpy())
        masks.append(batch["input_mask"] > 0)
        gen = sums["gen_logits"].numpy().astype(np.float64)
        log_probs = gen - np.log(np.exp(gen - gen.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
            - gen.max(-1, keepdims=True)
        nll.append(-np.take_along_axis(log_probs, batch["masked_lm_ids"][..., None], -1)[..., 0])
        weights.append(batch["masked_lm_weights"])
        correct.append(gen.argmax(-1) == batch["masked_lm_ids"])
        sampled.append(sums["sampled_ids"].numpy() == batch["masked_lm_ids"])
    d, y, m = (np.concatenate(x)[np.concatenate(masks)] for x in (logits, labels, masks))
    w = np.concatenate(weights)
    p = 1 / (1 + np.exp(-d))
    predicted = d > 0
    expected = {
        "disc_auc": pairwise_auc(d, y),
        "disc_loss": np.mean(-(y * np.log(p) + (1 - y) * np.log(1 - p))),
        "disc_accuracy": np.mean(predicted == y),
        "disc_recall": (predicted & (y > 0)).sum() / max((y > 0).sum(), 1e-6),
        "masked_lm_loss": (np.concatenate(nll) * w).sum() / w.sum(),
        "masked_lm_accuracy": (np.concatenate(correct) * w).sum() / w.sum(),
        "sampled_masked_lm_accuracy": (np.concatenate(sampled) * w).sum() / w.sum(),
        "replaced_fraction": y.mean(),
    }
    for name, value in expected.items():
        assert result.metrics[name] == pytest.approx(value, rel=1e-4, abs=1e-6), name
    assert result.num_examples == 10 and result.num_tokens == d.size
    assert len(result.samples) == 2
    first = result.samples[0]
    np.testing.assert_allclose(first["probabilities"], 1 / (1 + np.exp(-logits[0][0])), rtol=1e-6)
    np.testing.assert_array_equal(first["fake_ids"] != first["input_ids"], first["labels"] > 0)
    positions = batches[0]["masked_lm_positions"][0][batches[0]["masked_lm_weights"][0] > 0]
    assert set(np.flatnonzero(first["masked"])) == set(positions)

    vocab = [f"w{i}" for i in range(VOCAB)]
    summary = format_summary(result, 7, vocab)
    assert "step 7" in summary and f"AUC {result.metrics['disc_auc']:.3f}" in summary


def test_mlm_objective_reports_only_the_masked_lm(rng):
    config = tiny_config(objective="mlm")
    batch = make_batch(rng, 4, LENGTH, SLOTS, VOCAB)
    model = build(config, batch)
    result = PretrainingEvaluator(model, tf.data.Dataset.from_tensor_slices(batch).batch(4))()
    assert "disc_auc" not in result.metrics and "disc_loss" not in result.metrics
    assert {"masked_lm_loss", "masked_lm_accuracy"} <= set(result.metrics)
    assert result.samples == []
