"""Electric (Clark et al., EMNLP 2020): noise-contrastive estimation of an energy model."""

from __future__ import annotations

import keras
from keras import ops

from electra_tf.pretraining import objective
from electra_tf.pretraining.objectives.electra import ElectraPretrainer, sample_statistics

ratio = objective.safe_ratio


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectricPretrainer(ElectraPretrainer):
    """ELECTRA's step with Electric's noise model and energy-based discriminator.

    The two-tower cloze generator reads the unmasked sequence and gives
    q(x_t | rest) at every position; its loss is the cloze NLL over every
    target token (`objective.cloze_targets`). The masked positions are filled
    with samples of q, and every one of them is labelled noise, even a sample
    equal to the original. The discriminator's head gives an energy per
    token, turned into the probability of noise by `objective.electric_logits`.
    The loss is gen_weight * cloze NLL per target + disc_weight * L_Disc.
    """

    OBJECTIVE = "electric"

    def _build_networks(self) -> None:
        self._build_pair(generator_kind="two_tower_cloze")

    def counts(self, batch):
        """ELECTRA's counts and `cloze_targets`, the tokens the cloze model is trained on."""
        return {
            **super().counts(batch),
            "cloze_targets": ops.sum(
                objective.cloze_targets(batch["input_ids"], batch["input_mask"])
            ),
        }

    def forward(self, batch, training=False):
        """Cloze generator, noise samples, energy discriminator.

        Returns:
            ELECTRA's sums and tensors (the masked-LM sums read the cloze
            model at the masked slots, as the original's), with "cloze": the
            cloze model's sums over its targets and `cloze_logits` [B, L, V].
        """
        weights = batch["masked_lm_weights"]
        cloze_logits = self.generator(
            {
                "input_ids": batch["input_ids"],
                "input_mask": batch["input_mask"],
                "segment_ids": batch["segment_ids"],
            },
            training=training,
        )  # [B, L, V]
        gen_logits = objective.at_positions(cloze_logits, batch["masked_lm_positions"])
        out = {
            "cloze": objective.masked_lm_sums(
                cloze_logits,
                batch["input_ids"],
                objective.cloze_targets(batch["input_ids"], batch["input_mask"]),
                self.kernels,
            ),
            "mlm": objective.masked_lm_sums(
                gen_logits, batch["masked_lm_ids"], weights, self.kernels
            ),
            "gen_logits": gen_logits,
            "cloze_logits": cloze_logits,
        }
        out.update(self.corrupt(batch, gen_logits))
        fake_ids = out["fake_ids"]
        # Every masked position holds noise, whatever was sampled.
        labels = ops.cast(
            objective.positions_mask(
                batch["masked_lm_positions"], weights, fake_ids.shape[1] or ops.shape(fake_ids)[1]
            ),
            "int32",
        )
        out.update(labels=labels, samples=sample_statistics(batch, out["sampled_ids"], labels))
        energy = self.discriminator_logits(batch, fake_ids, training)
        disc_logits = objective.electric_logits(
            energy, cloze_logits, fake_ids, self.config.mask_rate
        )
        mask = self.discriminator_mask(batch, fake_ids)
        out.update(
            disc=objective.discriminator_sums(disc_logits, labels, mask),
            disc_logits=disc_logits,
            disc_mask=mask,
        )
        return out

    def generator_loss(self, sums, counts):
        """The cloze model's NLL per target token."""
        return ratio(sums["cloze"]["nll"], counts["cloze_targets"])

    def generator_metrics(self, sums):
        return {
            **super().generator_metrics(sums),
            **objective.loss_and_accuracy(sums["cloze"], "cloze"),
        }
