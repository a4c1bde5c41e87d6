"""Replace MLM (paper Section 3.5): a masked LM that sees the generator's samples, not [MASK]."""

from __future__ import annotations

import keras

from electra_tf.pretraining import objective
from electra_tf.pretraining.objectives.mlm import GeneratorSamplesMLM


@keras.saving.register_keras_serializable(package="electra_tf")
class ReplaceMLMPretrainer(GeneratorSamplesMLM):
    """ELECTRA's generator and samples, but the full-size model predicts the original tokens.

    It tells how much of ELECTRA's gain comes from removing the [MASK]
    pre-train/fine-tune mismatch. The loss is gen_weight * L_MLM(generator)
    + the full-size model's NLL per masked slot (weight 1); its replaced-token
    head is built but not trained.
    """

    OBJECTIVE = "replace_mlm"

    def _build_networks(self) -> None:
        super()._build_networks()
        self.discriminator.rtd_head.trainable = False  # unused

    def forward(self, batch, training=False):
        """Generator and samples as ELECTRA's; then {"replace_mlm": sums} of the full-size MLM."""
        out = self.generate(batch, training)
        out.update(self.corrupt(batch, out["gen_logits"]))
        _, logits = self._full_size_mlm(
            out["fake_ids"], batch, batch["masked_lm_positions"], training
        )
        out["replace_mlm"] = objective.masked_lm_sums(
            logits, batch["masked_lm_ids"], batch["masked_lm_weights"], self.kernels
        )
        return out
