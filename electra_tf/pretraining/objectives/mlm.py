"""BERT's masked LM (paper Section 3.5 baseline): the full-size model alone, no generator.

Also the full-size masked-LM head and pass that Replace MLM and All-Tokens
MLM build on.
"""

from __future__ import annotations

import keras

from electra_tf.modeling.heads import MaskedLMHead
from electra_tf.pretraining import objective
from electra_tf.pretraining.objectives.electra import ElectraPretrainer
from electra_tf.pretraining.pretrainer import Pretrainer


def full_size_mlm_head(discriminator, kernels: str) -> MaskedLMHead:
    """The full-size model's masked-LM output, tied to its (shared) token table."""
    return MaskedLMHead.tied_to(discriminator.encoder, "mlm_predictions", kernels=kernels)


class FullSizeMLM:
    """A mixin: the full-size encoder read as a masked LM through `self.mlm_head`."""

    def _full_size_mlm(self, input_ids, batch, positions, training):
        """The encoder on `input_ids` [B, L].

        Returns:
            (sequence [B, L, H], logits [B, N, V] at `positions` [B, N]).
        """
        sequence = self.discriminator.encoder(
            {
                "input_ids": input_ids,
                "input_mask": batch["input_mask"],
                "segment_ids": batch["segment_ids"],
            },
            training=training,
        )
        return sequence, self.mlm_head(sequence, positions)


@keras.saving.register_keras_serializable(package="electra_tf")
class GeneratorSamplesMLM(FullSizeMLM, ElectraPretrainer):
    """ELECTRA's generator and samples, with a masked-LM term in place of the discriminator's.

    The base of Replace MLM and All-Tokens MLM. A subclass's `forward` puts
    its term's sums under its `OBJECTIVE`; `PER` names the count that
    normalises it ("masked": per masked slot, "tokens": per non-pad token).
    The loss is gen_weight * L_MLM(generator) + the term's NLL per `PER`
    (weight 1).
    """

    PER = "masked"

    def _build_networks(self) -> None:
        super()._build_networks()
        self.mlm_head = full_size_mlm_head(self.discriminator, self.kernels)

    def _loss(self, sums, counts):
        return self.config.gen_weight * self.generator_loss(sums, counts) + objective.safe_ratio(
            sums[self.OBJECTIVE]["nll"], counts[self.PER]
        )

    def metrics_from_sums(self, sums):
        return {
            **self.generator_metrics(sums),
            **objective.loss_and_accuracy(sums[self.OBJECTIVE], self.OBJECTIVE),
            "total_loss": self._loss(sums, sums["counts"]),
        }


@keras.saving.register_keras_serializable(package="electra_tf")
class MaskedLMPretrainer(FullSizeMLM, Pretrainer):
    """BERT with dynamic masking: the full-size model as a masked LM on `masked_input_ids`.

    The loss is the NLL per masked slot (weight 1). The model that is
    fine-tuned afterwards is the same encoder (`discriminator.encoder`); its
    replaced-token head is built (one checkpoint layout for every objective)
    but not trained.
    """

    OBJECTIVE = "mlm"

    def _build_networks(self) -> None:
        self._build_pair(with_generator=False)
        self.mlm_head = full_size_mlm_head(self.discriminator, self.kernels)
        self.discriminator.rtd_head.trainable = False  # unused

    def forward(self, batch, training=False):
        """{"mlm": sums, "gen_logits": [B, N, V]} (the logits keep the generator's name)."""
        _, logits = self._full_size_mlm(
            batch["masked_input_ids"], batch, batch["masked_lm_positions"], training
        )
        return {
            "mlm": objective.masked_lm_sums(
                logits, batch["masked_lm_ids"], batch["masked_lm_weights"], self.kernels
            ),
            "gen_logits": logits,
        }

    def _loss(self, sums, counts):
        return objective.safe_ratio(sums["mlm"]["nll"], counts["masked"])

    def metrics_from_sums(self, sums):
        return {
            **objective.loss_and_accuracy(sums["mlm"], "masked_lm"),
            "total_loss": self._loss(sums, sums["counts"]),
        }
