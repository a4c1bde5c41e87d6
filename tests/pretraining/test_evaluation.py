import itertools

import numpy as np
import pytest
import tensorflow as tf
from conftest import make_batch
from test_pretrainer import LENGTH, SLOTS, VOCAB, build, tiny_config

from electra_tf.pretraining.evaluation import (
    PretrainingEvaluator,
    auc_within_bins,
    format_summary,
    frequency_bins,
    rarity_metrics,
    rarity_scores,
    roc_auc,
)


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
        {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
    ).batch(5)
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
        log_probs = (
            gen
            - np.log(np.exp(gen - gen.max(-1, keepdims=True)).sum(-1, keepdims=True))
            - gen.max(-1, keepdims=True)
        )
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


def test_rarity_scores_are_smoothed_negative_log_frequencies():
    counts = np.array([0, 6, 2, 0])  # 8 tokens, 4 ids: add-one gives 12 in the denominator
    np.testing.assert_allclose(
        rarity_scores([1, 2, 3, 1], counts), -np.log([7 / 12, 3 / 12, 1 / 12, 7 / 12])
    )


def test_frequency_bins_are_quantiles_and_equal_values_share_a_bin():
    rarity = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    bins = frequency_bins(rarity, num_bins=5)
    # Edges at the 20/40/60/80% quantiles (linear interpolation between the
    # sorted values, positions 1.8, 3.6, 5.4, 7.2): 1.0, 1.0, 2.4, 4.2 -> unique
    # 1.0, 2.4, 4.2; a value equal to an edge goes above it.
    np.testing.assert_array_equal(bins, [1, 1, 1, 1, 1, 1, 2, 2, 3, 3])


def test_auc_within_bins_weights_each_bin_by_its_pairs():
    # Bin 0: positives 0.9, 0.2; negatives 0.5 -> AUC 1/2 over 2 pairs.
    # Bin 1: positive 0.1; negatives 0.0, 0.3, 0.05 -> 2 of 3 pairs won.
    # Bin 2: only negatives, no pairs. Pooled: (1 + 2) / (2 + 3) = 0.6.
    scores = [0.9, 0.2, 0.5, 0.1, 0.0, 0.3, 0.05, 0.7]
    labels = [1, 1, 0, 1, 0, 0, 0, 0]
    bins = [0, 0, 0, 1, 1, 1, 1, 2]
    assert auc_within_bins(scores, labels, bins) == pytest.approx(0.6)
    assert np.isnan(auc_within_bins([1, 2], [1, 1], [0, 0]))


def test_a_score_that_only_knows_rarity_detects_nothing_within_one_frequency():
    rng = np.random.default_rng(3)
    counts = rng.integers(1, 1000, size=50)
    ids = rng.integers(0, 50, size=2000)
    rarity = rarity_scores(ids, counts)
    labels = rng.random(2000) < 1 / (1 + np.exp(-(rarity - rarity.mean())))  # rare -> replaced
    metrics = rarity_metrics(rarity, labels, ids, counts)
    assert metrics["disc_auc_rarity"] > 0.6
    # Scoring with rarity itself: the plain AUC equals the baseline's exactly.
    assert roc_auc(rarity, labels) == pytest.approx(metrics["disc_auc_rarity"])
    assert metrics["disc_auc_within_frequency"] == metrics["disc_auc_rarity_within_frequency"]
    # A score constant within each id detects nothing when every bin holds one id.
    one_id_per_bin = auc_within_bins(rarity, labels, ids)
    assert one_id_per_bin == pytest.approx(0.5)


def test_evaluation_reports_the_rarity_baseline_and_a_showcase(rng):
    config = tiny_config()
    batch = make_batch(rng, 6, LENGTH, SLOTS, VOCAB)
    model = build(config, batch)
    counts = rng.integers(0, 50, size=VOCAB)
    dataset = tf.data.Dataset.from_tensor_slices(batch).batch(3)
    result = PretrainingEvaluator(model, dataset, num_samples=1, token_counts=counts)()

    sums = model.compute_sums(tf.nest.map_structure(tf.convert_to_tensor, batch))
    mask = batch["input_mask"] > 0
    logits = sums["disc_logits"].numpy().astype(np.float64)[mask]
    labels = sums["labels"].numpy()[mask]
    seen = sums["fake_ids"].numpy()[mask]
    rarity = -np.log((counts[seen] + 1.0) / (counts.sum() + VOCAB))
    assert result.metrics["disc_auc_rarity"] == pytest.approx(pairwise_auc(rarity, labels))
    # Independent within-bin pairwise count over the same decile bins.
    bins = frequency_bins(rarity)
    wins = pairs = 0.0
    for b in set(bins):
        inside = bins == b
        pos = logits[inside & (labels > 0)]
        neg = logits[inside & (labels == 0)]
        wins += sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
        pairs += len(pos) * len(neg)
    assert result.metrics["disc_auc_within_frequency"] == pytest.approx(wins / pairs, rel=1e-5)
    assert len(result.samples) == 1 and result.showcase["candidates"] == 6

    summary = format_summary(result, 3, [f"w{i}" for i in range(VOCAB)])
    assert f"token rarity alone: {result.metrics['disc_auc_rarity']:.3f}" in summary
    assert "beyond rarity: AUC" in summary
