"""`ElectraPretrainer`: generator + discriminator trained jointly with a custom `train_step`."""

from __future__ import annotations

import keras
import tensorflow as tf

from electra_tf.config import PretrainingConfig
from electra_tf.modeling.electra import build_generator_and_discriminator
from electra_tf.pretraining import objective
from electra_tf.pretraining.optimization import sum_over_replicas
from electra_tf.training.strategy import in_multi_worker_mode

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
        self._xla_gradients = None  # built on first use (see _replica_gradients)

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

    # The statistics every step sums over its examples, in this order; summed
    # over replicas (and micro-batches) they give the global loss and metrics.
    _SUM_NAMES = ("mlm_nll", "mlm_count", "mlm_correct", "sampled_correct", "disc_loss",
                  "disc_count", "disc_correct", "true_positive", "predicted_positive",
                  "actual_positive")

    def _local_sums(self, batch, training):
        """Forward pass -> float32 [10] vector of this replica's sums (see _SUM_NAMES)."""
        sums = self.compute_sums(batch, training=training)
        mlm, disc = sums["mlm"], sums["disc"]
        return tf.stack([mlm["nll"], mlm["count"], mlm["correct"], sums["sampled_correct"],
                         disc["loss"], disc["count"], disc["correct"], disc["true_positive"],
                         disc["predicted_positive"], disc["actual_positive"]])

    @staticmethod
    def _global_counts(batch):
        """Masked slots and non-pad tokens of the *global* batch, [2] float32.

        Known from the inputs alone, so every replica (and every micro-batch)
        can divide its loss sums by the global counts before the forward pass.
        """
        local = tf.stack([tf.reduce_sum(tf.cast(batch["masked_lm_weights"], tf.float32)),
                          tf.reduce_sum(tf.cast(batch["input_mask"], tf.float32))])
        return tf.stop_gradient(
            tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, local))

    def _loss(self, local, counts):
        """This replica's share of the global loss: local sums over global counts."""
        return (self.config.gen_weight * objective.safe_ratio(local[0], counts[0])
                + self.config.disc_weight * objective.safe_ratio(local[4], counts[1]))

    def _stats(self, local):
        """The logged metrics from the replica's sums (one all-reduce for all of them)."""
        total = tf.stop_gradient(tf.distribute.get_replica_context().all_reduce(
            tf.distribute.ReduceOp.SUM, local))
        (g_nll, g_mlm_count, g_mlm_correct, g_sampled_correct, g_disc_loss, g_disc_count,
         g_disc_correct, g_tp, g_pred_pos, g_actual_pos) = tf.unstack(total)
        mlm_loss = objective.safe_ratio(g_nll, g_mlm_count)
        disc_loss = objective.safe_ratio(g_disc_loss, g_disc_count)
        return {
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

    def _loss_and_stats(self, batch, training):
        """(this replica's loss share, global metrics) for one batch."""
        local = self._local_sums(batch, training)
        return self._loss(local, self._global_counts(batch)), self._stats(local)

    def _gradients(self, batch, counts, variables):
        """Scaled gradients of this replica's loss share and its sums, for one (micro-)batch."""
        with tf.GradientTape() as tape:
            local = self._local_sums(batch, training=True)
            scaled_loss = self.optimizer.scale_loss(self._loss(local, counts))
        return tape.gradient(scaled_loss, variables), local

    def _replica_gradients(self, batch, counts, variables):
        """`_gradients`, XLA-compiled per replica when asked and the step itself is not.

        Keras cannot compile a whole step that spans several replicas (their
        variables live on different devices), but each replica's forward and
        backward pass compiles.
        """
        if self.config.jit_compile and tf.distribute.get_strategy().num_replicas_in_sync > 1:
            if self._xla_gradients is None:  # variables are captured, not arguments
                self._xla_gradients = tf.function(
                    lambda b, c: self._gradients(b, c, self.trainable_variables),
                    jit_compile=True)
            return self._xla_gradients(batch, counts)
        return self._gradients(batch, counts, variables)

    def train_step(self, data):
        variables = self.trainable_variables
        counts = self._global_counts(data)
        steps = self.config.gradient_accumulation_steps
        if steps == 1:
            grads, local = self._replica_gradients(data, counts, variables)
        else:
            # The batch is cut into `steps` micro-batches run one after the
            # other; each one's loss is already divided by the counts of the
            # whole batch, so the summed gradients are those of the full batch
            # while only one micro-batch's activations are alive at a time.
            micro = tf.nest.map_structure(
                lambda t: tf.reshape(t, tf.concat([[steps, -1], tf.shape(t)[1:]], 0)), data)

            def body(i, grad_sums, local_sum):
                part = tf.nest.map_structure(lambda t: t[i], micro)
                grads, local = self._replica_gradients(part, counts, variables)
                # Dense sums: embedding gradients arrive as IndexedSlices.
                return (i + 1, [a if g is None else a + tf.convert_to_tensor(g)
                                for a, g in zip(grad_sums, grads)], local_sum + local)

            zeros = [tf.zeros(v.shape, v.dtype) for v in variables]
            _, grads, local = tf.while_loop(
                lambda i, *_: i < steps, body,
                (tf.constant(0), zeros, tf.zeros([len(self._SUM_NAMES)], tf.float32)))
        self.optimizer.apply(sum_over_replicas(grads), variables)
        self.seen_batches.assign_add(1)
        stats = self._stats(local)
        if in_multi_worker_mode(tf.distribute.get_strategy()):
            # Keras averages logs across workers along axis 0, which scalars lack.
            stats = {name: value[None] for name, value in stats.items()}
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

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        # Keras builds a model inside fit() from the replica-average of the
        # first batch; MultiWorkerMirroredStrategy cannot average a dict of
        # tensors. Built by build_from_batch, with its optimizer, there is
        # nothing left to build.
        if self.built and self.optimizer is not None and self.optimizer.built:
            return
        super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(PretrainingConfig.from_dict(config["config"]), name=config.get("name"))
