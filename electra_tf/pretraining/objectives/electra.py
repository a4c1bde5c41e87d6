"""ELECTRA (Clark et al., ICLR 2020): replaced token detection, the paper's Figure 1.

    L = gen_weight * L_MLM(generator) + disc_weight * L_Disc(discriminator)

The other objectives and training algorithms of the paper subclass
`ElectraPretrainer` and change only what differs (see the package).
"""

from __future__ import annotations

import keras
from keras import ops

from electra_tf.pretraining import objective
from electra_tf.pretraining.pretrainer import Pretrainer

ratio = objective.safe_ratio


def sample_statistics(batch, sampled_ids, labels) -> dict:
    """{"correct": used slots whose sample is the original, "replaced": tokens labelled 1}.

    Args:
        batch: the pipeline's tensors (`masked_lm_ids`, `masked_lm_weights`, `input_mask`).
        sampled_ids: int32 [B, N].
        labels: int32 [B, L], 1 = replaced.
    """
    weights = ops.cast(batch["masked_lm_weights"], "float32")
    same = ops.cast(ops.equal(sampled_ids, batch["masked_lm_ids"]), "float32")
    return {
        "correct": ops.sum(weights * same),
        "replaced": ops.sum(ops.cast(batch["input_mask"], "float32") * ops.cast(labels, "float32")),
    }


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraPretrainer(Pretrainer):
    """Replaced token detection: a generator and a discriminator trained jointly.

    One step (`forward`):

    1. the generator, a small masked LM, predicts the masked slots of
       `masked_input_ids` (its loss is L_MLM);
    2. a token is sampled from it at every slot at `temperature`; no gradient
       flows back through the sample; the samples replace the original
       tokens, and a position is labelled "replaced" only if its sample
       differs from the original;
    3. the discriminator says, for every non-pad token of that sequence,
       whether it was replaced (its loss is L_Disc, per token).

    The loss (`_loss`) is `gen_weight * L_MLM + disc_weight * L_Disc`, each
    a sum over the batch divided by the global batch's count (masked slots;
    non-pad tokens). With `uniform_generator` there is no generator to train
    (the samples are uniform over the vocabulary) and L_Disc alone is optimised.

    Args:
        config: the run's `PretrainingConfig` (`objective="electra"`).
    """

    OBJECTIVE = "electra"

    def _build_networks(self) -> None:
        self._build_pair(with_generator=self.config.uses_generator)

    # ------------------------------------------------------------------ the step
    def forward(self, batch, training=False):
        """Generator, sampling, discriminator over one batch (see the class docstring).

        Returns:
            {"mlm": the generator's masked-LM sums, "samples": `sample_statistics`,
            "disc": the discriminator's sums} and the tensors `gen_logits`
            [B, N, V], `sampled_ids` [B, N], `fake_ids` [B, L], `labels`
            [B, L], `disc_logits` [B, L], `disc_mask` [B, L].
        """
        out = self.generate(batch, training)
        out.update(self.corrupt(batch, out["gen_logits"]))
        out.update(self.discriminate(batch, out["fake_ids"], out["labels"], training))
        return out

    def generate(self, batch, training):
        """The generator at the masked slots: {"gen_logits": [B, N, V], "mlm": sums}."""
        gen_logits = self.generator_logits(batch, training)
        return {
            "gen_logits": gen_logits,
            "mlm": objective.masked_lm_sums(
                gen_logits, batch["masked_lm_ids"], batch["masked_lm_weights"], self.kernels
            ),
        }

    def generator_logits(self, batch, training):
        """Logits [B, N, V] of the generator at the masked slots (zeros if uniform)."""
        if self.generator is None:
            slots = ops.shape(batch["masked_lm_positions"])
            return ops.zeros((slots[0], slots[1], self.config.model.vocab_size), "float32")
        return self.generator(
            {
                "input_ids": batch["masked_input_ids"],
                "input_mask": batch["input_mask"],
                "segment_ids": batch["segment_ids"],
                "masked_lm_positions": batch["masked_lm_positions"],
            },
            training=training,
        )

    def corrupt(self, batch, gen_logits):
        """Samples the generator (no gradient flows back) into the masked slots.

        Returns:
            {"sampled_ids": [B, N], "fake_ids": [B, L], "labels": int32 [B, L],
            1 where a sample differs from the original, "samples":
            `sample_statistics`}.
        """
        config = self.config
        sampled_ids = objective.sample_tokens(
            gen_logits,
            batch["sampling_uniforms"],
            config.temperature,
            disallow_ids=batch["masked_lm_ids"] if config.disallow_correct else None,
            kernels=self.kernels,
        )
        fake_ids, labels = objective.replace_tokens(
            batch["input_ids"],
            batch["masked_lm_positions"],
            sampled_ids,
            batch["masked_lm_weights"],
        )
        return {
            "sampled_ids": sampled_ids,
            "fake_ids": fake_ids,
            "labels": labels,
            "samples": sample_statistics(batch, sampled_ids, labels),
        }

    def discriminate(self, batch, fake_ids, labels, training):
        """The discriminator on the corrupted sequence.

        Returns:
            {"disc": its sums, "disc_logits": [B, L], "disc_mask": [B, L]}.
        """
        disc_logits = self.discriminator_logits(batch, fake_ids, training)
        mask = self.discriminator_mask(batch, fake_ids)
        return {
            "disc": objective.discriminator_sums(disc_logits, labels, mask),
            "disc_logits": disc_logits,
            "disc_mask": mask,
        }

    def discriminator_logits(self, batch, fake_ids, training):
        """The discriminator's logits on the corrupted sequence: float32 [B, L]."""
        inputs = {
            "input_ids": fake_ids,
            "input_mask": batch["input_mask"],
            "segment_ids": batch["segment_ids"],
        }
        return self.discriminator(inputs, training=training)["logits"]

    def discriminator_mask(self, batch, fake_ids):
        """The tokens the discriminator is scored on: float32 [B, L], every non-pad token."""
        return ops.cast(batch["input_mask"], "float32")

    # ------------------------------------------------------------------ the loss
    def _loss(self, sums, counts):
        """gen_weight * L_MLM + disc_weight * L_Disc, this replica's share of the global batch."""
        return self.config.gen_weight * self.generator_loss(
            sums, counts
        ) + self.config.disc_weight * self.discriminator_loss(sums, counts)

    def generator_loss(self, sums, counts):
        """L_MLM: the generator's NLL per masked slot (0 without a generator to train)."""
        if self.generator is None:
            return ops.convert_to_tensor(0.0)
        return ratio(sums["mlm"]["nll"], counts["masked"])

    def discriminator_loss(self, sums, counts):
        """L_Disc: the discriminator's cross-entropy per non-pad token."""
        return ratio(sums["disc"]["loss"], counts["tokens"])

    # --------------------------------------------------------------- the metrics
    def metrics_from_sums(self, sums):
        """The original code's metrics of sums over any set of examples.

        Args:
            sums: `statistics` summed over replicas, batches or a whole
                evaluation set.

        Returns:
            dict of float32 scalars: the generator's, the discriminator's and
            `total_loss`.
        """
        stats = self.generator_metrics(sums)
        stats.update(self.discriminator_metrics(sums))
        # The optimised quantity, from the global sums (the same value on every replica).
        stats["total_loss"] = self._loss(sums, sums["counts"])
        return stats

    def generator_metrics(self, sums):
        """masked_lm_loss/accuracy (unless uniform), sampled accuracy, replaced fraction."""
        mlm, samples = sums["mlm"], sums["samples"]
        stats = {}
        if self.generator is not None:  # a uniform "generator" has nothing to report
            stats.update(objective.loss_and_accuracy(mlm, "masked_lm"))
        stats["sampled_masked_lm_accuracy"] = ratio(samples["correct"], mlm["count"])
        stats["replaced_fraction"] = ratio(samples["replaced"], sums["counts"]["tokens"])
        return stats

    def discriminator_metrics(self, sums):
        """disc_loss, disc_accuracy, disc_precision, disc_recall."""
        disc = sums["disc"]
        return {
            "disc_loss": ratio(disc["loss"], disc["count"]),
            "disc_accuracy": ratio(disc["correct"], disc["count"]),
            "disc_precision": ratio(disc["true_positive"], disc["predicted_positive"]),
            "disc_recall": ratio(disc["true_positive"], disc["actual_positive"]),
        }
