"""Held-out evaluation of pre-training, as the original code's `do_eval` reports it.

The generator and discriminator run without dropout over a fixed set of
held-out sequences (the same examples, masks and sampling draws at every
evaluation, so successive evaluations differ only by the weights) and give:

    masked_lm_loss, masked_lm_accuracy      the generator (or BERT's MLM)
    sampled_masked_lm_accuracy              how often its sample is the original
    disc_loss, disc_accuracy                the discriminator over its tokens
    disc_precision, disc_recall             at the 0.5 threshold
    disc_auc                                ranking quality, threshold-free
    replaced_fraction, total_loss

`disc_auc` is the probability that a replaced token gets a higher score than
an original one (ties count one half), computed exactly from the ranks of
every scored token. It is the number to watch while the generator is still
improving: precision and recall read 0 whenever no token crosses 0.5 even
though the discriminator ranks replacements well above originals.

A high `disc_auc` does not by itself show that the discriminator reads
context: a generator sampling at a high temperature draws rare tokens far
more often than text contains them, so "rare = replaced" already ranks well.
Given the unigram counts of the training text, the evaluation also reports

    disc_auc_rarity                   the same AUC for a context-free score,
                                      -log unigram frequency of the token seen
    disc_auc_within_frequency         the discriminator's AUC among tokens of
                                      similar frequency (decile bins of that
                                      score), pair-weighted over the bins: what
                                      it detects beyond rarity (0.5 = nothing)
    disc_auc_rarity_within_frequency  the rarity score's own AUC within those
                                      bins: how much rarity the bins leave
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from electra_tf.pretraining.pretrainer import statistics

# A few held-out sequences are kept for display (TensorBoard text, inspect).
NUM_SAMPLES = 3
# Sequences searched for the one shown in the summary (see `EvaluationResult.showcase`).
NUM_SHOWCASE_CANDIDATES = 64
# Frequency bins of `disc_auc_within_frequency` (deciles of the rarity score).
NUM_FREQUENCY_BINS = 10


def roc_auc(scores, labels) -> float:
    """Area under the ROC curve of `scores` for binary `labels` (Mann-Whitney U).

    Args:
        scores: float array [n], higher = more likely positive.
        labels: array [n] of 0/1 (or bools).

    Returns:
        P(score of a random positive > score of a random negative), ties
        counted as 1/2; NaN when one of the classes is absent.
    """
    scores = np.asarray(scores, np.float64).reshape(-1)
    labels = np.asarray(labels).reshape(-1).astype(bool)
    positives = int(labels.sum())
    negatives = labels.size - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    # Average ranks (1-based) with ties sharing the mean of their ranks.
    order = np.argsort(scores, kind="mergesort")
    sorted_scores = scores[order]
    starts = np.flatnonzero(np.r_[True, sorted_scores[1:] != sorted_scores[:-1]])
    ends = np.r_[starts[1:], scores.size]
    mean_rank = (starts + ends + 1) / 2.0  # ranks start..end-1 (0-based) -> mean, 1-based
    ranks = np.empty(scores.size, np.float64)
    ranks[order] = np.repeat(mean_rank, ends - starts)
    u = ranks[labels].sum() - positives * (positives + 1) / 2.0
    return float(u / (positives * negatives))


def rarity_scores(token_ids, token_counts) -> np.ndarray:
    """The context-free score of each token: -log of its unigram frequency.

    Args:
        token_ids: int array [n], the tokens the discriminator saw.
        token_counts: int array [V], occurrences of each id in the training
            text (add-one smoothed, so unseen ids get the highest score).

    Returns:
        float64 [n]; higher = rarer.
    """
    counts = np.asarray(token_counts, np.float64).reshape(-1)
    log_probabilities = np.log(counts + 1.0) - np.log(counts.sum() + counts.size)
    return -log_probabilities[np.asarray(token_ids, np.int64).reshape(-1)]


def frequency_bins(rarity, num_bins: int = NUM_FREQUENCY_BINS) -> np.ndarray:
    """Bin index of each token by quantiles of `rarity` (equal values share a bin).

    Args:
        rarity: float [n], e.g. `rarity_scores`.
        num_bins: at most this many bins of about equal size (fewer when many
            tokens share a value, as frequent words do).

    Returns:
        int [n] in [0, num_bins).
    """
    rarity = np.asarray(rarity, np.float64).reshape(-1)
    edges = np.unique(np.quantile(rarity, np.linspace(0.0, 1.0, num_bins + 1)[1:-1]))
    return np.searchsorted(edges, rarity, side="right")


def auc_within_bins(scores, labels, bins) -> float:
    """AUC of `scores` counting only pairs of tokens that share a bin.

    Each bin's AUC is weighted by its number of (positive, negative) pairs,
    so the result is the probability that, for a replaced and an original
    token drawn from the same bin, the replaced one scores higher (ties 1/2).

    Args:
        scores: float [n]; labels: 0/1 [n]; bins: int [n] (`frequency_bins`).

    Returns:
        That probability; NaN when no bin holds both classes.
    """
    scores = np.asarray(scores, np.float64).reshape(-1)
    labels = np.asarray(labels).reshape(-1).astype(bool)
    bins = np.asarray(bins).reshape(-1)
    total, pairs = 0.0, 0.0
    for b in np.unique(bins):
        inside = bins == b
        positives = int(labels[inside].sum())
        negatives = int(inside.sum()) - positives
        if positives and negatives:
            weight = float(positives) * negatives
            total += weight * roc_auc(scores[inside], labels[inside])
            pairs += weight
    return total / pairs if pairs else float("nan")


def rarity_metrics(scores, labels, token_ids, token_counts) -> dict:
    """`disc_auc_rarity`, `disc_auc_within_frequency`, `disc_auc_rarity_within_frequency`.

    Args:
        scores: the discriminator's logits [n] of the scored tokens.
        labels: 0/1 [n], 1 = replaced.
        token_ids: int [n], the token the discriminator saw at each.
        token_counts: int [V], unigram counts of the training text.
    """
    rarity = rarity_scores(token_ids, token_counts)
    bins = frequency_bins(rarity)
    return {
        "disc_auc_rarity": roc_auc(rarity, labels),
        "disc_auc_within_frequency": auc_within_bins(scores, labels, bins),
        "disc_auc_rarity_within_frequency": auc_within_bins(rarity, labels, bins),
    }


@dataclasses.dataclass
class EvaluationResult:
    """One evaluation: metrics, how much it covered, and a few sequences to show.

    Attributes:
        metrics: name -> float (see the module docstring).
        num_examples: held-out sequences evaluated.
        num_tokens: tokens the discriminator was scored on.
        samples: up to `NUM_SAMPLES` dicts, each with NumPy arrays for one
            sequence: `input_ids`, `fake_ids`, `labels`, `probabilities`
            (the discriminator's P(replaced)), `input_mask`, `masked`
            (1 where the generator was asked to fill the position). Empty
            for objectives without a discriminator.
        showcase: the sequence the summary shows: one of the first
            `NUM_SHOWCASE_CANDIDATES`, the one where the discriminator's
            ranking beats the rarity score's by the most (a dict like a
            sample, plus `disc_auc`, `rarity_auc` of its own tokens and
            `candidates`), or the first sequence when there are no unigram
            counts. None without a discriminator.
    """

    metrics: dict
    num_examples: int
    num_tokens: int
    samples: list
    showcase: Optional[dict] = None


def compiled_forward(model, function):
    """`function(batch)` (a forward pass of `model`'s current weights) compiled for the backend.

    TensorFlow traces it once (`tf.function`); on JAX it becomes a jitted
    pure function of the model's variables, given their current values at
    every call (random state it advances is not kept).
    """
    if keras.backend.backend() != "jax":
        return tf.function(function, reduce_retracing=True)
    import jax

    variables = model.trainable_variables + model.non_trainable_variables

    def pure(values, batch):
        with keras.StatelessScope(state_mapping=list(zip(variables, values))):
            return function(batch)

    jitted = jax.jit(pure)
    return lambda batch: jitted([v.value for v in variables], batch)


class PretrainingEvaluator:
    """Evaluates a pretrainer on a fixed held-out dataset.

    Args:
        model: the `Pretrainer` (its current weights are evaluated).
        dataset: a finite `tf.data.Dataset` of pipeline batches (e.g.
            `make_pretraining_dataset(..., is_training=False)`); iterated
            from the start at every call.
        num_samples: sequences of the first batch kept for display.
        token_counts: int [V], unigram counts of the training text
            (`electra_tf.data.token_counts`); adds the rarity baseline.
    """

    def __init__(
        self,
        model,
        dataset: tf.data.Dataset,
        num_samples: int = NUM_SAMPLES,
        token_counts: Optional[np.ndarray] = None,
    ):
        self.model = model
        self.dataset = dataset
        self.num_samples = num_samples
        self.token_counts = token_counts

        def step(batch):
            sums = model.compute_sums(batch, training=False)
            out = {"sums": statistics(sums)}
            if "disc_logits" in sums:
                out.update(
                    logits=ops.cast(sums["disc_logits"], "float32"),
                    labels=sums["labels"],
                    mask=ops.cast(sums["disc_mask"], "float32"),
                    fake_ids=sums["fake_ids"],
                )
            return out

        self._step = compiled_forward(model, step)

    def __call__(self) -> EvaluationResult:
        total = None
        scores, labels, seen = [], [], []
        candidates: list = []
        examples = 0
        wanted = max(
            self.num_samples, NUM_SHOWCASE_CANDIDATES if self.token_counts is not None else 1
        )
        for batch in self.dataset.as_numpy_iterator():
            out = keras.tree.map_structure(np.asarray, self._step(batch))
            sums = keras.tree.map_structure(lambda t: t.astype(np.float64), out["sums"])
            total = sums if total is None else keras.tree.map_structure(np.add, total, sums)
            examples += int(batch["input_ids"].shape[0])
            if "logits" not in out:
                continue
            mask = out["mask"] > 0
            scores.append(out["logits"][mask])
            labels.append(out["labels"][mask])
            seen.append(out["fake_ids"][mask])
            if len(candidates) < wanted:
                candidates.extend(_samples(batch, out, wanted - len(candidates)))
        if total is None:
            raise ValueError("the evaluation dataset is empty")
        metrics = {
            name: float(value)
            for name, value in self.model.metrics_from_sums(
                keras.tree.map_structure(lambda v: ops.convert_to_tensor(v, "float32"), total)
            ).items()
        }
        tokens = 0
        showcase = None
        if scores:
            scores_all, labels_all = np.concatenate(scores), np.concatenate(labels)
            metrics["disc_auc"] = roc_auc(scores_all, labels_all)
            if self.token_counts is not None:
                metrics.update(
                    rarity_metrics(scores_all, labels_all, np.concatenate(seen), self.token_counts)
                )
            tokens = int(scores_all.size)
            showcase = _showcase(candidates, self.token_counts)
        return EvaluationResult(metrics, examples, tokens, candidates[: self.num_samples], showcase)


def _showcase(candidates: list, token_counts: Optional[np.ndarray]) -> Optional[dict]:
    """The candidate where the discriminator's AUC exceeds rarity's by the most.

    Only sequences with both replaced and original tokens compete; without
    counts (or such a sequence) the first candidate is returned.
    """
    if not candidates:
        return None
    best, best_margin = None, None
    if token_counts is not None:
        for sample in candidates:
            mask = sample["input_mask"] > 0
            labels = sample["labels"][mask]
            if labels.min() == labels.max():
                continue
            disc = roc_auc(sample["probabilities"][mask], labels)
            rarity = roc_auc(rarity_scores(sample["fake_ids"][mask], token_counts), labels)
            # Ties broken by the number of replacements: more evidence on show.
            margin = (disc - rarity, labels.sum())
            if best is None or margin > best_margin:
                best, best_margin = {**sample, "disc_auc": disc, "rarity_auc": rarity}, margin
    if best is None:
        best = dict(candidates[0])
    best["candidates"] = len(candidates)
    return best


def _samples(batch, out, count: int) -> list:
    """The first `count` sequences of an evaluated batch (NumPy arrays), as NumPy arrays."""
    input_ids = batch["input_ids"]
    mask = batch["input_mask"]
    positions = batch["masked_lm_positions"]
    weights = batch["masked_lm_weights"]
    logits = out["logits"]
    rows = []
    for row in range(min(count, input_ids.shape[0])):
        masked = np.zeros(input_ids.shape[1], np.int32)
        masked[positions[row][weights[row] > 0]] = 1
        rows.append(
            {
                "input_ids": input_ids[row],
                "fake_ids": out["fake_ids"][row],
                "labels": out["labels"][row],
                "probabilities": 1.0 / (1.0 + np.exp(-logits[row].astype(np.float64))),
                "input_mask": mask[row],
                "masked": masked,
            }
        )
    return rows


def evaluation_dataset(
    shard_dir: str,
    config,
    special_ids: dict,
    num_examples: Optional[int] = None,
    batch_size: Optional[int] = None,
) -> tf.data.Dataset:
    """The first `num_examples` held-out sequences of `shard_dir`, masked with the run's seed.

    Args:
        shard_dir: shards of held-out text (never read by training).
        config: the run's `PretrainingConfig` (length, masking, seed).
        special_ids: `pad_id`, `cls_id`, `sep_id`, `mask_id`.
        num_examples: how many sequences (default `config.num_eval_examples`;
            fewer if the held-out text has fewer).
        batch_size: sequences per batch (default: one training micro-batch).
    """
    from electra_tf.data.pipeline import make_pretraining_dataset

    num_examples = num_examples or config.num_eval_examples
    batch_size = batch_size or config.train_batch_size // config.gradient_accumulation_steps
    dataset = make_pretraining_dataset(
        shard_dir,
        batch_size=batch_size,
        max_predictions_per_seq=config.resolved_max_predictions_per_seq,
        mask_rate=config.mask_rate,
        special_ids=special_ids,
        seed=config.seed,
        is_training=False,
        max_seq_length=config.max_seq_length,
    )
    return dataset.unbatch().take(num_examples).batch(batch_size).cache()


def format_metrics(metrics: dict) -> str:
    """`disc_auc 0.912 | disc_precision 0.71 | ...`, the discriminator's numbers first."""
    order = [
        "disc_auc",
        "disc_precision",
        "disc_recall",
        "disc_accuracy",
        "disc_loss",
        "masked_lm_accuracy",
        "masked_lm_loss",
        "sampled_masked_lm_accuracy",
        "replaced_fraction",
    ]
    names = [n for n in order if n in metrics] + sorted(
        n for n in metrics if n not in order and n != "total_loss"
    )
    return " | ".join(f"{n} {metrics[n]:.4f}" for n in names)


def format_summary(result: EvaluationResult, step: int, vocab, ansi: bool = False) -> str:
    """A readable report of an evaluation, with one held-out sequence rendered."""
    from electra_tf.pretraining import display

    m = result.metrics
    lines = [
        f"Held-out evaluation at step {step:,} ({result.num_examples:,} sequences the "
        "training never saw, no dropout):"
    ]
    if "disc_auc" in m:
        lines.append(
            f"  discriminator: AUC {m['disc_auc']:.3f} (0.5 = chance"
            + (
                f"; token rarity alone: {m['disc_auc_rarity']:.3f}"
                if "disc_auc_rarity" in m
                else ""
            )
            + f"), precision {m['disc_precision']:.3f}, recall {m['disc_recall']:.3f}, "
            f"accuracy {m['disc_accuracy']:.3f} over {result.num_tokens:,} tokens, "
            f"{100 * m.get('replaced_fraction', float('nan')):.1f}% of them replaced"
        )
        if "disc_auc_within_frequency" in m:
            lines.append("  " + _beyond_rarity(m))
    if "masked_lm_accuracy" in m:
        sampled = m.get("sampled_masked_lm_accuracy")
        lines.append(
            f"  {'generator' if 'disc_auc' in m else 'masked LM'}: accuracy "
            f"{m['masked_lm_accuracy']:.3f}, loss {m['masked_lm_loss']:.3f} on the masked tokens"
            + (
                f"; its samples equal the original {100 * sampled:.1f}% of the time"
                if sampled is not None
                else ""
            )
        )
    shown = result.showcase
    if shown is not None:
        tokens = display.annotate(shown, vocab)
        if "rarity_auc" in shown and shown["disc_auc"] > shown["rarity_auc"]:
            why = (
                f"of the first {shown['candidates']} held-out sequences, the one where the "
                f"discriminator ranks replacements best against rarity: AUC "
                f"{shown['disc_auc']:.2f} on its tokens, rarity alone {shown['rarity_auc']:.2f}"
            )
        elif "rarity_auc" in shown:
            why = (
                f"in none of the first {shown['candidates']} held-out sequences does the "
                "discriminator rank replacements better than rarity does; this one comes "
                f"closest: AUC {shown['disc_auc']:.2f} against {shown['rarity_auc']:.2f}"
            )
        else:
            why = "the first held-out sequence"
        lines.append(
            f"One held-out sequence as the discriminator saw it ({why}; "
            + display.legend(ansi)
            + "):"
        )
        lines.append("  " + (display.to_ansi(tokens) if ansi else display.to_plain(tokens)))
    return "\n".join(lines)


def _beyond_rarity(m: dict) -> str:
    """One sentence on what the discriminator detects beyond token rarity."""
    within = m["disc_auc_within_frequency"]
    text = (
        f"beyond rarity: AUC {within:.3f} among tokens of similar frequency (decile bins; "
        f"rarity alone within them: {m['disc_auc_rarity_within_frequency']:.3f})"
    )
    if math.isnan(within):  # no bin holds both classes
        return text + "."
    # A margin of 0.02 over both chance and the rarity the bins leave.
    if within - max(0.5, m["disc_auc_rarity_within_frequency"]) < 0.02:
        return text + ": it detects little beyond how rare a token is."
    return (
        text + f": given two tokens of similar frequency, one replaced, it scores the "
        f"replaced one higher {100 * within:.0f}% of the time."
    )
