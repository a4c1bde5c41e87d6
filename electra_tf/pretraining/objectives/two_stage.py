"""Two-stage ELECTRA (paper Section 3.2): train the generator alone, then the discriminator."""

from __future__ import annotations

import keras
from keras import ops

from electra_tf.pretraining.objectives.electra import ElectraPretrainer

STAGES = ("joint", "generator", "discriminator")


@keras.saving.register_keras_serializable(package="electra_tf")
class TwoStageElectraPretrainer(ElectraPretrainer):
    """ELECTRA trained in two stages (`set_stage`) instead of jointly.

    "generator" steps train the generator on L_MLM alone; then
    `initialise_discriminator_from_generator`; then "discriminator" steps
    train the discriminator on L_Disc alone, the generator frozen and run
    without dropout. Until `set_stage` is called the model is ELECTRA's
    ("joint").
    """

    OBJECTIVE = "electra"
    TRAINING = "two_stage"

    def __init__(self, config, **kwargs):
        super().__init__(config, **kwargs)
        self.stage = "joint"

    def set_stage(self, stage: str) -> None:
        """Chooses what the next steps train: "joint", "generator" or "discriminator".

        Call before `fit`; the optimizer must already be built over all the variables.
        """
        if stage not in STAGES:
            raise ValueError(f"stage={stage!r}: choose joint, generator or discriminator.")
        self.stage = stage
        self.generator.trainable = stage != "discriminator"
        self.discriminator.trainable = stage != "generator"
        self.train_function = None  # the variables trained changed: trace again
        self._xla_gradients = None

    def initialise_discriminator_from_generator(self) -> None:
        """Copies the generator's embeddings and encoder into the discriminator."""

        def by_role(encoder):
            # Weight paths within the encoder, with the embedding layer's own name
            # (generator_embeddings / embeddings) made common. The dropout seed
            # states stay each model's own.
            prefix = encoder.embeddings.name + "/"
            return {
                ("embeddings/" + w.path[len(prefix) :]) if w.path.startswith(prefix) else w.path: w
                for w in encoder.weights
                if "seed_generator" not in w.path
            }

        source, target = by_role(self.generator.encoder), by_role(self.discriminator.encoder)
        if sorted(source) != sorted(target) or any(
            tuple(source[k].shape) != tuple(target[k].shape) for k in target
        ):
            raise ValueError(
                "two-stage training needs a generator of the discriminator's exact "
                "architecture (--generator_hidden_fraction=1, "
                "--generator_layers_fraction=1, default heads and FFN size)."
            )
        for name, variable in target.items():
            # A copy: on JAX assigning would share the array, which a jitted
            # step may not take (donate) twice.
            variable.assign(ops.copy(source[name].value))
        self.discriminator_initialised.assign(1)

    def generator_logits(self, batch, training):
        # A frozen generator runs without dropout.
        return super().generator_logits(batch, training and self.stage != "discriminator")

    def forward(self, batch, training=False):
        if self.stage != "generator":
            return super().forward(batch, training)
        out = self.generate(batch, training)  # the discriminator does not run
        out.update(self.corrupt(batch, out["gen_logits"]))
        return out

    def _loss(self, sums, counts):
        if self.stage == "generator":
            return self.config.gen_weight * self.generator_loss(sums, counts)
        if self.stage == "discriminator":
            return self.config.disc_weight * self.discriminator_loss(sums, counts)
        return super()._loss(sums, counts)

    def discriminator_metrics(self, sums):
        return {} if self.stage == "generator" else super().discriminator_metrics(sums)
