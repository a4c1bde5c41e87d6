"""Adversarial ELECTRA (paper Appendix F): the generator is trained to fool the discriminator."""

from __future__ import annotations

import keras
from keras import ops

from electra_tf.pretraining import objective
from electra_tf.pretraining.objectives.electra import ElectraPretrainer

ratio = objective.safe_ratio


@keras.saving.register_keras_serializable(package="electra_tf")
class AdversarialElectraPretrainer(ElectraPretrainer):
    """ELECTRA whose generator learns by REINFORCE on the discriminator's loss.

    The reward of a sampled token is the discriminator's cross-entropy on
    it; the generator's loss is the REINFORCE surrogate per masked slot
    (`objective.reinforce_sums`) in place of L_MLM. The discriminator learns
    as in ELECTRA.
    """

    OBJECTIVE = "electra"
    TRAINING = "adversarial"

    def forward(self, batch, training=False):
        """ELECTRA's step with {"reinforce": sums}: the surrogate `loss` and the `reward`."""
        out = super().forward(batch, training)
        config = self.config
        token_loss = ops.binary_crossentropy(
            ops.cast(out["labels"], "float32"),
            ops.cast(out["disc_logits"], "float32"),
            from_logits=True,
        )
        rewards = ops.take_along_axis(token_loss, batch["masked_lm_positions"], axis=1)
        out["reinforce"] = objective.reinforce_sums(
            out["gen_logits"],
            out["sampled_ids"],
            rewards,
            batch["masked_lm_weights"],
            config.temperature,
            disallow_ids=batch["masked_lm_ids"] if config.disallow_correct else None,
        )
        return out

    def generator_loss(self, sums, counts):
        """The REINFORCE surrogate per masked slot."""
        return ratio(sums["reinforce"]["loss"], counts["masked"])

    def generator_metrics(self, sums):
        mlm, reinforce = sums["mlm"], sums["reinforce"]
        return {
            **super().generator_metrics(sums),
            "generator_reward": ratio(reinforce["reward"], mlm["count"]),
            "reinforce_loss": ratio(reinforce["loss"], mlm["count"]),
        }
