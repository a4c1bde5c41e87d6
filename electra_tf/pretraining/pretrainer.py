"""`ElectraPretrainer`: generator + discriminator trained jointly with a custom `train_step`."""

from __future__ import annotations

import keras
import tensorflow as tf

from electra_tf.config import PretrainingConfig
from electra_tf.modeling.electra import build_generator_and_discriminator
from electra_tf.pretraining import objective
from electra_tf.pretraining.optimization import sum_over_replicas

# TensorBoard / console names, as in the original code.
METRIC_NAMES = ("total_loss", "masked_lm_loss", "disc_loss", "masked_lm_accuracy",
                "sampled_masked_lm_accuracy", "disc_accuracy", "disc_precision", "disc_recall",
                "replaced_fraction")


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraPretrainer(keras.Model):
    """Replaced token detection: loss = gen_weight * L_MLM + disc_weight * L_Disc.

    Consumes the batches of `electra_tf.data.pipeline.make_pretraining_dataset`
    (masking already applied on the fly). One step:

    1. the generator predicts the masked slots of `masked_input_ids`;
    2. tokens are sampled from it at `temperature` (no gradient flows back
       through the sample);
    3. the samples replace the original tokens; a position is labelled
       "replaced" only if the sample differs from the original;
    4. the discriminator classifies every non-pad token.

    Losses are normalised by the token counts of the *global* batch, so
    training on R replicas gives the same update as one device on the same
    global batch.

    Args:
        config: the run's `PretrainingConfig`.
    """

    def __init__(self, config: PretrainingConfig, **kwargs):
        super().__init__(**kwargs)
        self.config = config
        self.generator, self.discriminator = build_generator_and_discriminator(config.model)
        # Batches consumed so far: the data position to resume from. Separate
        # from optimizer.iterations, which skips float16 overflow steps.
        self.seen_batches = tf.Variable(0, dtype=tf.int64, trainable=False, name="seen_batches",
                                        aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

    def call(self, inputs, training=False):
        """Runs the forward pass and returns the summed statistics (see `compute_sums`)."""
        return self.compute_sums(inputs, training=training)

    def compute_sums(self, batch, training=False):
        """Forward pass over one (per-replica) batch.

        Args:
            batch: dict of the pipeline's tensors (see the pipeline module).
            training: enables dropout.

        Returns:
            dict with `mlm` and `disc` (the sums of `objective`), `sampled_correct`,
            and the tensors `gen_logits` [B, N, V], `disc_logits` [B, L],
            `fake_ids` [B, L], `labels` [B, L], `sampled_ids` [B, N].
        """
        weights = batch["masked_lm_weights"]
        gen_logits = self.generator({
            "input_ids": batch["masked_input_ids"], "input_mask": batch["input_mask"],
            "segment_ids": batch["segment_ids"],
            "masked_lm_positions": batch["masked_lm_positions"]}, training=training)
        mlm = objective.masked_lm_sums(gen_logits, batch["masked_lm_ids"], weights)
        sampled_ids = objective.sample_tokens(gen_logits, batch["sampling_uniforms"],
                                              self.config.temperature)
        fake_ids, labels = objective.replace_tokens(batch["input_ids"], batch["masked_lm_positions"],
                                                    sampled_ids, weights)
        disc_logits = self.discriminator({
            "input_ids": fake_ids, "input_mask": batch["input_mask"],
            "segment_ids": batch["segment_ids"]}, training=training)["logits"]
        disc = objective.discriminator_sums(disc_logits, labels, batch["input_mask"])
        sampled_correct = tf.reduce_sum(
            tf.cast(weights, tf.float32)
            * tf.cast(tf.equal(sampled_ids, batch["masked_lm_ids"]), tf.float32))
        return {"mlm": mlm, "disc": disc, "sampled_correct": sampled_correct,
                "gen_logits": gen_logits, "disc_logits": disc_logits, "fake_ids": fake_ids,
                "labels": labels, "sampled_ids": sampled_ids}

    def _loss_and_stats(self, batch, training):
        sums = self.compute_sums(batch, training=training)
        mlm, disc = sums["mlm"], sums["disc"]
        context = tf.distribute.get_replica_context()
        # One all-reduce for every statistic: global denominators for the loss,
        # global numerators for the logged metrics.
        local = tf.stack([mlm["nll"], mlm["count"], mlm["correct"], sums["sampled_correct"],
                          disc["loss"], disc["count"], disc["correct"], disc["true_positive"],
                          disc["predicted_positive"], disc["actual_positive"]])
        total = tf.stop_gradient(context.all_reduce(tf.distribute.ReduceOp.SUM, local))
        (g_nll, g_mlm_count, g_mlm_correct, g_sampled_correct, g_disc_loss, g_disc_count,
         g_disc_correct, g_tp, g_pred_pos, g_actual_pos) = tf.unstack(total)
        # Local sums over global counts: summing gradients over replicas gives
        # the gradient of the global mean.
        loss = (self.config.gen_weight * objective.safe_ratio(mlm["nll"], g_mlm_count)
                + self.config.disc_weight * objective.safe_ratio(disc["loss"], g_disc_count))
        mlm_loss = objective.safe_ratio(g_nll, g_mlm_count)
        disc_loss = objective.safe_ratio(g_disc_loss, g_disc_count)
        stats = {
            "total_loss": self.config.gen_weight * mlm_loss + self.config.disc_weight * disc_loss,
            "masked_lm_loss": mlm_loss,
            "disc_loss": disc_loss,
            "masked_lm_accuracy": objective.safe_ratio(g_mlm_correct, g_mlm_count),
            "sampled_masked_lm_accuracy": objective.safe_ratio(g_sampled_correct, g_mlm_count),
            "disc_accuracy": objective.safe_ratio(g_disc_correct, g_disc_count),
            "disc_precision": objective.safe_ratio(g_tp, g_pred_pos),
            "disc_recall": objective.safe_ratio(g_tp, g_actual_pos),
            "replaced_fraction": objective.safe_ratio(g_actual_pos, g_disc_count),
        }
        return loss, stats

    def train_step(self, data):
        with tf.GradientTape() as tape:
            loss, stats = self._loss_and_stats(data, training=True)
            scaled_loss = self.optimizer.scale_loss(loss)
        variables = self.trainable_variables
        grads = sum_over_replicas(tape.gradient(scaled_loss, variables))
        self.optimizer.apply(grads, variables)
        self.seen_batches.assign_add(1)
        return stats

    def test_step(self, data):
        _, stats = self._loss_and_stats(data, training=False)
        return stats

    def build_from_batch(self, batch) -> None:
        """Creates every variable by running one forward pass (call inside the strategy scope)."""
        self.compute_sums(tf.nest.map_structure(tf.convert_to_tensor, batch), training=False)
        # Tells Keras not to attempt its own symbolic build inside fit(), which
        # under a strategy would average the (integer) first batch.
        self.built = True

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(PretrainingConfig.from_dict(config["config"]), name=config.get("name"))
