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
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np
import tensorflow as tf

# A few held-out sequences are kept for display (TensorBoard text, inspect).
NUM_SAMPLES = 3


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
    """

    metrics: dict
    num_examples: int
    num_tokens: int
    samples: list


class PretrainingEvaluator:
    """Evaluates an `ElectraPretrainer` on a fixed held-out dataset.

    Args:
        model: the `ElectraPretrainer` (its current weights are evaluated).
        dataset: a finite `tf.data.Dataset` of pipeline batches (e.g.
            `make_pretraining_dataset(..., is_training=False)`); iterated
            from the start at every call.
        num_samples: sequences of the first batch kept for display.
    """

    def __init__(self, model, dataset: tf.data.Dataset, num_samples: int = NUM_SAMPLES):
        self.model = model
        self.dataset = dataset
        self.num_samples = num_samples

        def step(batch):
            sums = model.compute_sums(batch, training=False)
            out = {"sums": model.sum_vector(sums)}
            if "disc_logits" in sums:
                out.update(logits=tf.cast(sums["disc_logits"], tf.float32),
                           labels=sums["labels"], mask=tf.cast(sums["disc_mask"], tf.float32),
                           fake_ids=sums["fake_ids"])
            return out

        self._step = tf.function(step, reduce_retracing=True)

    def __call__(self) -> EvaluationResult:
        total = None
        scores, labels = [], []
        samples: list = []
        examples = 0
        for batch in self.dataset:
            out = self._step(batch)
            sums = out["sums"].numpy().astype(np.float64)
            total = sums if total is None else total + sums
            examples += int(batch["input_ids"].shape[0])
            if "logits" not in out:
                continue
            mask = out["mask"].numpy() > 0
            scores.append(out["logits"].numpy()[mask])
            labels.append(out["labels"].numpy()[mask])
            if len(samples) < self.num_samples:
                samples.extend(_samples(batch, out, self.num_samples - len(samples)))
        if total is None:
            raise ValueError("the evaluation dataset is empty")
        metrics = {name: float(value) for name, value in
                   self.model.metrics_from_sums(tf.constant(total, tf.float32)).items()}
        tokens = 0
        if scores:
            scores_all, labels_all = np.concatenate(scores), np.concatenate(labels)
            metrics["disc_auc"] = roc_auc(scores_all, labels_all)
            tokens = int(scores_all.size)
        return EvaluationResult(metrics, examples, tokens, samples)


def _samples(batch, out, count: int) -> list:
    """The first `count` sequences of an evaluated batch, as NumPy arrays."""
    input_ids = batch["input_ids"].numpy()
    mask = batch["input_mask"].numpy()
    positions = batch["masked_lm_positions"].numpy()
    weights = batch["masked_lm_weights"].numpy()
    logits = out["logits"].numpy()
    rows = []
    for row in range(min(count, input_ids.shape[0])):
        masked = np.zeros(input_ids.shape[1], np.int32)
        masked[positions[row][weights[row] > 0]] = 1
        rows.append({"input_ids": input_ids[row], "fake_ids": out["fake_ids"].numpy()[row],
                     "labels": out["labels"].numpy()[row],
                     "probabilities": 1.0 / (1.0 + np.exp(-logits[row].astype(np.float64))),
                     "input_mask": mask[row], "masked": masked})
    return rows


def evaluation_dataset(shard_dir: str, config, special_ids: dict,
                       num_examples: Optional[int] = None,
                       batch_size: Optional[int] = None) -> tf.data.Dataset:
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
        shard_dir, batch_size=batch_size,
        max_predictions_per_seq=config.resolved_max_predictions_per_seq,
        mask_rate=config.mask_rate, special_ids=special_ids, seed=config.seed,
        is_training=False, max_seq_length=config.max_seq_length)
    return dataset.unbatch().take(num_examples).batch(batch_size).cache()


def format_metrics(metrics: dict) -> str:
    """`disc_auc 0.912 | disc_precision 0.71 | ...`, the discriminator's numbers first."""
    order = ["disc_auc", "disc_precision", "disc_recall", "disc_accuracy", "disc_loss",
             "masked_lm_accuracy", "masked_lm_loss", "sampled_masked_lm_accuracy",
             "replaced_fraction"]
    names = [n for n in order if n in metrics] + sorted(
        n for n in metrics if n not in order and n != "total_loss")
    return " | ".join(f"{n} {metrics[n]:.4f}" for n in names)



def format_summary(result: EvaluationResult, step: int, vocab, ansi: bool = False) -> str:
    """A readable report of an evaluation, with one held-out sequence rendered."""
    from electra_tf.pretraining import display

    m = result.metrics
    lines = [f"Held-out evaluation at step {step:,} ({result.num_examples:,} sequences the "
             "training never saw, no dropout):"]
    if "disc_auc" in m:
        lines.append(
            f"  discriminator: AUC {m['disc_auc']:.3f} (0.5 = chance), precision "
            f"{m['disc_precision']:.3f}, recall {m['disc_recall']:.3f}, accuracy "
            f"{m['disc_accuracy']:.3f} over {result.num_tokens:,} tokens, "
            f"{100 * m.get('replaced_fraction', float('nan')):.1f}% of them replaced")
    if "masked_lm_accuracy" in m:
        sampled = m.get("sampled_masked_lm_accuracy")
        lines.append(
            f"  {'generator' if 'disc_auc' in m else 'masked LM'}: accuracy "
            f"{m['masked_lm_accuracy']:.3f}, loss {m['masked_lm_loss']:.3f} on the masked tokens"
            + (f"; its samples equal the original {100 * sampled:.1f}% of the time"
               if sampled is not None else ""))
    if result.samples:
        tokens = display.annotate(result.samples[0], vocab)
        lines.append("One held-out sequence as the discriminator saw it (" + display.LEGEND + "):")
        lines.append("  " + (display.to_ansi(tokens) if ansi else display.to_plain(tokens)))
    return "\n".join(lines)
