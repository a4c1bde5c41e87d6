"""All-Tokens MLM (paper Section 3.5): predict the original token at every position."""

from __future__ import annotations

import keras
from keras import ops

from electra_tf.pretraining import objective
from electra_tf.pretraining.objectives.mlm import GeneratorSamplesMLM


@keras.saving.register_keras_serializable(package="electra_tf")
class AllTokensMLMPretrainer(GeneratorSamplesMLM):
    """ELECTRA's generator and samples; the full-size model predicts every original token.

    Its output mixes "copy the input" (probability D from the replaced-token
    head) with a softmax over the vocabulary (`objective.all_tokens_sums`).
    The loss is gen_weight * L_MLM(generator) + the full-size model's NLL
    per non-pad token (weight 1).
    """

    OBJECTIVE = "all_tokens_mlm"
    PER = "tokens"

    def forward(self, batch, training=False):
        """Generator and samples as ELECTRA's; then {"all_tokens_mlm": sums} at every position."""
        out = self.generate(batch, training)
        out.update(self.corrupt(batch, out["gen_logits"]))
        fake_ids = out["fake_ids"]
        outputs = self.discriminator(
            {
                "input_ids": fake_ids,
                "input_mask": batch["input_mask"],
                "segment_ids": batch["segment_ids"],
            },
            training=training,
        )
        every_position = ops.broadcast_to(
            ops.arange(ops.shape(fake_ids)[1], dtype="int32")[None], ops.shape(fake_ids)
        )
        logits = self.mlm_head(outputs["sequence_output"], every_position)
        out["all_tokens_mlm"] = objective.all_tokens_sums(
            logits, outputs["logits"], fake_ids, batch["input_ids"], batch["input_mask"]
        )
        return out
