"""ELECTRA 15% (paper Section 3.5): the discriminator is scored on the masked positions only."""

from __future__ import annotations

import keras
from keras import ops

from electra_tf.pretraining import objective
from electra_tf.pretraining.objectives.electra import ElectraPretrainer


@keras.saving.register_keras_serializable(package="electra_tf")
class Electra15Pretrainer(ElectraPretrainer):
    """ELECTRA whose discriminator loss covers only the (about 15%) masked positions.

    It tells how much of ELECTRA's gain comes from learning from every token.
    L_Disc is divided by the global batch's masked slots instead of its tokens.
    """

    OBJECTIVE = "electra_15"

    def discriminator_mask(self, batch, fake_ids):
        """float32 [B, L]: 1 at the positions a used masked slot points to."""
        return objective.positions_mask(
            batch["masked_lm_positions"],
            batch["masked_lm_weights"],
            fake_ids.shape[1] or ops.shape(fake_ids)[1],
        )

    def discriminator_loss(self, sums, counts):
        return objective.safe_ratio(sums["disc"]["loss"], counts["masked"])
