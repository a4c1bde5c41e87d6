"""`ElectraPretrainer`: generator + discriminator trained jointly with a custom `train_step`."""

from __future__ import annotations

import keras
import tensorflow as tf

from electra_tf.config import PretrainingConfig
from electra_tf.distribute import in_multi_worker_mode, micro_batch_sums, sum_over_replicas
from electra_tf.finiteness import gradient_norm
from electra_tf.modeling.electra import build_generator_and_discriminator
from electra_tf.modeling.heads import MaskedLMHead
from electra_tf.modeling.kernels import resolve_kernels
from electra_tf.pretraining import objective

# TensorBoard / console names of the default objective, as in the original code.
METRIC_NAMES = ("total_loss", "masked_lm_loss", "disc_loss", "masked_lm_accuracy",
                "sampled_masked_lm_accuracy", "disc_accuracy", "disc_precision", "disc_recall",
                "replaced_fraction")


def _label_counts(labels, mask):
    """{"replaced": tokens labelled 1, "tokens": non-pad tokens}, float32 sums; mask [B, L]."""
    return {"replaced": tf.reduce_sum(mask * tf.cast(labels, tf.float32)),
            "tokens": tf.reduce_sum(mask)}


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraPretrainer(keras.Model):
    """Replaced token detection: loss = gen_weight * L_MLM + disc_weight * L_Disc.

    Consumes the batches of `electra_tf.data.pipeline.make_pretraining_dataset`
    (masking already applied on the fly). One step of the default objective:

    1. the generator predicts the masked slots of `masked_input_ids`;
    2. tokens are sampled from it at `temperature` (no gradient flows back
       through the sample);
    3. the samples replace the original tokens; a position is labelled
       "replaced" only if the sample differs from the original;
    4. the discriminator classifies every non-pad token.

    `config.objective` selects one of the paper's comparisons instead
    (Section 3.5): `electra_15` scores only the masked positions; `mlm` is
    BERT (the full-size model is a masked LM on `masked_input_ids`, no
    generator); `replace_mlm` trains the full-size model as a masked LM on
    the generator's samples instead of [MASK]; `all_tokens_mlm` predicts the
    original token at every position of the corrupted input, mixing "copy the
    input" (probability from the token head) with a softmax. The MLM-type
    losses of the full-size model have weight 1; `disc_weight` is lambda of
    the two discriminator objectives.

    `config.training` selects how the generator learns: `joint` (maximum
    likelihood, with the discriminator), `adversarial` (REINFORCE on the
    discriminator's loss, Appendix F) or `two_stage` (see `set_stage`).

    Losses are normalised by the token counts of the *global* batch, so
    training on R replicas gives the same update as one device on the same
    global batch.

    Args:
        config: the run's `PretrainingConfig`.
    """

    def __init__(self, config: PretrainingConfig, **kwargs):
        super().__init__(**kwargs)
        self.config = config
        # The kernel set every part of the model and the objective runs.
        self.kernels = resolve_kernels(config.kernels)
        self.generator, self.discriminator = build_generator_and_discriminator(
            config.model, weight_sharing=config.weight_sharing,
            with_generator=config.uses_generator,
            generator_kind="two_tower_cloze" if config.objective == "electric" else "masked_lm",
            kernels=self.kernels)
        encoder = self.discriminator.encoder
        if config.objective in ("mlm", "replace_mlm", "all_tokens_mlm"):
            # The full-size model's masked-LM output, tied to the shared table.
            self.mlm_head = MaskedLMHead(encoder.embeddings, encoder.initializer_range,
                                         encoder.layer_norm_epsilon, kernels=self.kernels,
                                         dtype=encoder.dtype_policy, name="mlm_predictions")
        if config.objective in ("mlm", "replace_mlm"):
            self.discriminator.rtd_head.trainable = False  # unused by these objectives
        # Batches consumed so far: the data position to resume from. Separate
        # from optimizer.iterations, which skips float16 overflow steps.
        self.seen_batches = tf.Variable(0, dtype=tf.int64, trainable=False, name="seen_batches",
                                        aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        # Two-stage training: set once the discriminator holds the generator's weights.
        self.discriminator_initialised = tf.Variable(
            0, dtype=tf.int64, trainable=False, name="discriminator_initialised",
            aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self.stage = "joint"
        self._xla_gradients = None  # built on first use (see _replica_gradients)
        # A `finiteness.NonFiniteRecord` the loop attaches (untracked: not in checkpoints).
        self.nonfinite_record = None

    def set_stage(self, stage: str) -> None:
        """Chooses what the next steps train: "joint", "generator" or "discriminator".

        Two-stage training runs "generator" steps (the MLM loss alone), then
        `initialise_discriminator_from_generator`, then "discriminator" steps
        (the discriminator loss, the generator frozen and run without
        dropout). Call before `fit`; the optimizer must already be built
        over all the variables.
        """
        if stage not in ("joint", "generator", "discriminator"):
            raise ValueError(f"stage={stage!r}: choose joint, generator or discriminator.")
        self.stage = stage
        if self.generator is not None:
            self.generator.trainable = stage != "discriminator"
        self.discriminator.trainable = stage != "generator"
        if self.config.objective in ("mlm", "replace_mlm"):
            self.discriminator.rtd_head.trainable = False
        self.train_function = None  # the variables trained changed: trace again
        self._xla_gradients = None

    def initialise_discriminator_from_generator(self) -> None:
        """Copies the generator's embeddings and encoder into the discriminator (two-stage)."""
        def by_role(encoder):
            # Weight paths within the encoder, with the embedding layer's own name
            # (generator_embeddings / embeddings) made common. The dropout seed
            # states stay each model's own.
            prefix = encoder.embeddings.name + "/"
            return {("embeddings/" + w.path[len(prefix):]) if w.path.startswith(prefix)
                    else w.path: w for w in encoder.weights if "seed_generator" not in w.path}

        source, target = by_role(self.generator.encoder), by_role(self.discriminator.encoder)
        if sorted(source) != sorted(target) or any(
                tuple(source[k].shape) != tuple(target[k].shape) for k in target):
            raise ValueError("two-stage training needs a generator of the discriminator's exact "
                             "architecture (--generator_hidden_fraction=1, "
                             "--generator_layers_fraction=1, default heads and FFN size).")
        for name, variable in target.items():
            variable.assign(source[name])
        self.discriminator_initialised.assign(1)

    def call(self, inputs, training=False):
        """Runs the forward pass and returns the summed statistics (see `compute_sums`)."""
        return self.compute_sums(inputs, training=training)

    def _generator_logits(self, batch, training):
        """Logits [B, N, V] of the generator at the masked slots (zeros if uniform)."""
        if self.generator is None:
            slots = tf.shape(batch["masked_lm_positions"])
            return tf.zeros([slots[0], slots[1], self.config.model.vocab_size], tf.float32)
        return self.generator({
            "input_ids": batch["masked_input_ids"], "input_mask": batch["input_mask"],
            "segment_ids": batch["segment_ids"],
            "masked_lm_positions": batch["masked_lm_positions"]},
            training=training and self.stage != "discriminator")

    def _full_size_mlm(self, input_ids, batch, positions, training):
        """The full-size encoder on `input_ids` with the masked-LM output at `positions`."""
        sequence = self.discriminator.encoder({
            "input_ids": input_ids, "input_mask": batch["input_mask"],
            "segment_ids": batch["segment_ids"]}, training=training)
        return sequence, self.mlm_head(sequence, positions)

    def _replace_with_samples(self, batch, gen_logits):
        """Fills the masked slots with the generator's samples (no gradient flows back).

        Returns:
            (sampled_ids [B, N], fake_ids [B, L], replaced [B, L] int32: 1
            where a sample differs from the original, sampled_correct: float32
            scalar, how many samples equal the original).
        """
        weights = batch["masked_lm_weights"]
        sampled_ids = objective.sample_tokens(
            gen_logits, batch["sampling_uniforms"], self.config.temperature,
            disallow_ids=batch["masked_lm_ids"] if self.config.disallow_correct else None,
            kernels=self.kernels)
        fake_ids, replaced = objective.replace_tokens(
            batch["input_ids"], batch["masked_lm_positions"], sampled_ids, weights)
        sampled_correct = tf.reduce_sum(
            tf.cast(weights, tf.float32)
            * tf.cast(tf.equal(sampled_ids, batch["masked_lm_ids"]), tf.float32))
        return sampled_ids, fake_ids, replaced, sampled_correct

    def compute_sums(self, batch, training=False):
        """Forward pass over one (per-replica) batch.

        Args:
            batch: dict of the pipeline's tensors (see the pipeline module).
            training: enables dropout.

        Returns:
            dict with the sums of `objective`: `mlm` (the generator's, or the
            full-size model's for `mlm`), and as the objective has them
            `disc` (electra, electra_15), `main` (replace_mlm, all_tokens_mlm),
            `reinforce` (adversarial), `sampled_correct`, `replaced`
            (replaced tokens) and `tokens` (non-pad tokens); plus the tensors
            it computed among `gen_logits` [B, N, V], `cloze_logits` [B, L, V]
            (electric), `disc_logits` [B, L],
            `disc_mask` [B, L] (the tokens the discriminator is scored on),
            `fake_ids` [B, L], `labels` [B, L], `sampled_ids` [B, N].
        """
        config = self.config
        weights = batch["masked_lm_weights"]
        if config.objective == "electric":
            return self._electric_sums(batch, training)
        if config.objective == "mlm":
            _, logits = self._full_size_mlm(batch["masked_input_ids"], batch,
                                            batch["masked_lm_positions"], training)
            return {"mlm": objective.masked_lm_sums(logits, batch["masked_lm_ids"], weights,
                                                    self.kernels),
                    "gen_logits": logits}
        gen_logits = self._generator_logits(batch, training)
        out = {"mlm": objective.masked_lm_sums(gen_logits, batch["masked_lm_ids"], weights,
                                               self.kernels),
               "gen_logits": gen_logits}
        sampled_ids, fake_ids, labels, sampled_correct = self._replace_with_samples(
            batch, gen_logits)
        mask = tf.cast(batch["input_mask"], tf.float32)
        out.update(sampled_ids=sampled_ids, fake_ids=fake_ids, labels=labels,
                   sampled_correct=sampled_correct, **_label_counts(labels, mask))
        if self.stage == "generator":
            return out
        if config.objective == "replace_mlm":
            _, logits = self._full_size_mlm(fake_ids, batch, batch["masked_lm_positions"], training)
            out["main"] = objective.masked_lm_sums(logits, batch["masked_lm_ids"], weights,
                                                   self.kernels)
            return out
        inputs = {"input_ids": fake_ids, "input_mask": batch["input_mask"],
                  "segment_ids": batch["segment_ids"]}
        outputs = self.discriminator(inputs, training=training)
        if config.objective == "all_tokens_mlm":
            length = tf.shape(fake_ids)[1]
            every_position = tf.broadcast_to(tf.range(length)[None], tf.shape(fake_ids))
            logits = self.mlm_head(outputs["sequence_output"], every_position)
            out["main"] = objective.all_tokens_sums(logits, outputs["logits"], fake_ids,
                                                    batch["input_ids"], batch["input_mask"])
            return out
        disc_logits = outputs["logits"]
        if config.objective == "electra_15":
            mask = objective.positions_mask(batch["masked_lm_positions"], weights,
                                            fake_ids.shape[1] or tf.shape(fake_ids)[1])
        out["disc"] = objective.discriminator_sums(disc_logits, labels, mask)
        out["disc_logits"] = disc_logits
        out["disc_mask"] = mask
        if config.training == "adversarial":
            # The generator's reward: the discriminator's loss on each sampled token.
            token_loss = tf.nn.sigmoid_cross_entropy_with_logits(
                labels=tf.cast(labels, tf.float32), logits=tf.cast(disc_logits, tf.float32))
            rewards = tf.gather(token_loss, batch["masked_lm_positions"], batch_dims=1)
            out["reinforce"] = objective.reinforce_sums(
                gen_logits, sampled_ids, rewards, weights, config.temperature,
                disallow_ids=batch["masked_lm_ids"] if config.disallow_correct else None)
        return out

    def _electric_sums(self, batch, training):
        """Electric (Clark et al., EMNLP 2020): noise-contrastive estimation of an energy model.

        The two-tower cloze generator reads the unmasked sequence and gives
        q(x_t | rest) at every position; its loss is the cloze NLL over every
        target token. The masked positions are filled with samples of q, and
        every one of them is labelled noise, even a sample equal to the
        original. The discriminator's head gives an energy per token, turned
        into the probability of noise by `objective.electric_logits`.
        """
        config = self.config
        weights = batch["masked_lm_weights"]
        cloze_logits = self.generator({
            "input_ids": batch["input_ids"], "input_mask": batch["input_mask"],
            "segment_ids": batch["segment_ids"]}, training=training)  # [B, L, V]
        gen_logits = tf.gather(cloze_logits, batch["masked_lm_positions"], batch_dims=1)
        out = {"cloze": objective.masked_lm_sums(
                   cloze_logits, batch["input_ids"],
                   objective.cloze_targets(batch["input_ids"], batch["input_mask"]), self.kernels),
               "mlm": objective.masked_lm_sums(gen_logits, batch["masked_lm_ids"], weights,
                                               self.kernels),
               "gen_logits": gen_logits, "cloze_logits": cloze_logits}
        sampled_ids, fake_ids, _, sampled_correct = self._replace_with_samples(batch, gen_logits)
        labels = tf.cast(objective.positions_mask(batch["masked_lm_positions"], weights,
                                                  fake_ids.shape[1] or tf.shape(fake_ids)[1]),
                         tf.int32)
        energy = self.discriminator({"input_ids": fake_ids, "input_mask": batch["input_mask"],
                                     "segment_ids": batch["segment_ids"]},
                                    training=training)["logits"]
        disc_logits = objective.electric_logits(energy, cloze_logits, fake_ids, config.mask_rate)
        mask = tf.cast(batch["input_mask"], tf.float32)
        out.update(sampled_ids=sampled_ids, fake_ids=fake_ids, labels=labels,
                   sampled_correct=sampled_correct, **_label_counts(labels, mask),
                   disc=objective.discriminator_sums(disc_logits, labels, mask),
                   disc_logits=disc_logits, disc_mask=mask)
        return out

    # The statistics every step sums over its examples, in this order; summed
    # over replicas (and micro-batches) they give the global loss and metrics.
    # "main" is the full-size model's loss: the discriminator's for electra,
    # electra_15 and electric, the masked LM's for the other objectives;
    # "cloze" is Electric's generator loss over every target token.
    _SUM_NAMES = ("mlm_nll", "mlm_count", "mlm_correct", "sampled_correct", "main_loss",
                  "main_count", "main_correct", "true_positive", "predicted_positive",
                  "actual_positive", "reinforce_loss", "reward", "replaced", "tokens",
                  "cloze_nll", "cloze_count", "cloze_correct")

    def _local_sums(self, batch, training):
        """Forward pass -> float32 [17] vector of this replica's sums (see _SUM_NAMES)."""
        return self.sum_vector(self.compute_sums(batch, training=training))

    @staticmethod
    def sum_vector(sums):
        """The float32 [17] vector of `compute_sums`' statistics (see _SUM_NAMES)."""
        zero = tf.constant(0.0)
        mlm = sums["mlm"]
        main = sums.get("disc") or sums.get("main") or {}
        reinforce = sums.get("reinforce", {})
        cloze = sums.get("cloze", {})
        return tf.stack([
            mlm["nll"], mlm["count"], mlm["correct"], sums.get("sampled_correct", zero),
            main.get("loss", main.get("nll", zero)), main.get("count", zero),
            main.get("correct", zero), main.get("true_positive", zero),
            main.get("predicted_positive", zero), main.get("actual_positive", zero),
            reinforce.get("loss", zero), reinforce.get("reward", zero),
            sums.get("replaced", zero), sums.get("tokens", zero),
            cloze.get("nll", zero), cloze.get("count", zero), cloze.get("correct", zero)])

    def _global_counts(self, batch):
        """Masked slots, non-pad tokens (and Electric's cloze targets) of the *global* batch.

        Known from the inputs alone, so every replica (and every micro-batch)
        can divide its loss sums by the global counts before the forward pass.

        Returns:
            float32 [3]: masked slots, non-pad tokens, cloze targets (0
            unless the objective is electric).
        """
        cloze = (tf.reduce_sum(objective.cloze_targets(batch["input_ids"], batch["input_mask"]))
                 if self.config.objective == "electric" else tf.constant(0.0))
        local = tf.stack([tf.reduce_sum(tf.cast(batch["masked_lm_weights"], tf.float32)),
                          tf.reduce_sum(tf.cast(batch["input_mask"], tf.float32)), cloze])
        return tf.stop_gradient(
            tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, local))

    def _loss(self, local, counts):
        """This replica's share of the global loss: local sums over global counts."""
        config = self.config
        masked, tokens = counts[0], counts[1]
        loss = tf.constant(0.0)
        if config.objective == "electric":
            # The cloze model's NLL over every target token, and the NCE loss.
            return (config.gen_weight * objective.safe_ratio(local[14], counts[2])
                    + config.disc_weight * objective.safe_ratio(local[4], tokens))
        if self.stage != "discriminator" and (config.uses_generator or config.objective == "mlm"):
            # The generator's objective: likelihood of the originals, or (adversarial) REINFORCE.
            generator_sum = local[10] if config.training == "adversarial" else local[0]
            weight = 1.0 if config.objective == "mlm" else config.gen_weight
            loss += weight * objective.safe_ratio(generator_sum, masked)
        if self.stage == "generator" or config.objective == "mlm":
            return loss
        if config.objective in ("electra", "electra_15"):
            # electra_15 scores the masked positions only: as many as the masked slots.
            count = masked if config.objective == "electra_15" else tokens
            return loss + config.disc_weight * objective.safe_ratio(local[4], count)
        count = masked if config.objective == "replace_mlm" else tokens
        return loss + objective.safe_ratio(local[4], count)

    def _stats(self, local):
        """The logged metrics from the replica's sums (one all-reduce for all of them)."""
        total = tf.stop_gradient(tf.distribute.get_replica_context().all_reduce(
            tf.distribute.ReduceOp.SUM, local))
        return self.metrics_from_sums(total)

    def metrics_from_sums(self, total):
        """The metrics (original code's names) of a [17] vector of sums over examples.

        Args:
            total: float32 [17], `sum_vector` summed over replicas, batches
                or a whole evaluation set.

        Returns:
            dict of float32 scalars: the losses, accuracies, precision and
            recall this objective has, and `total_loss`.
        """
        (nll, mlm_count, mlm_correct, sampled_correct, main_loss, main_count, main_correct, tp,
         pred_pos, actual_pos, reinforce_loss, reward, replaced, tokens, cloze_nll, cloze_count,
         cloze_correct) = tf.unstack(total)
        config = self.config
        ratio = objective.safe_ratio
        stats = {}
        if not config.uniform_generator:  # a uniform "generator" has nothing to report
            stats.update(masked_lm_loss=ratio(nll, mlm_count),
                         masked_lm_accuracy=ratio(mlm_correct, mlm_count))
        if config.objective != "mlm":
            stats["sampled_masked_lm_accuracy"] = ratio(sampled_correct, mlm_count)
            stats["replaced_fraction"] = ratio(replaced, tokens)
        if config.training == "adversarial":
            stats["generator_reward"] = ratio(reward, mlm_count)
            stats["reinforce_loss"] = ratio(reinforce_loss, mlm_count)
        if config.objective == "electric":
            stats.update(cloze_loss=ratio(cloze_nll, cloze_count),
                         cloze_accuracy=ratio(cloze_correct, cloze_count))
        if config.objective in ("electra", "electra_15", "electric") and self.stage != "generator":
            stats.update(disc_loss=ratio(main_loss, main_count),
                         disc_accuracy=ratio(main_correct, main_count),
                         disc_precision=ratio(tp, pred_pos), disc_recall=ratio(tp, actual_pos))
        elif config.objective in ("replace_mlm", "all_tokens_mlm"):
            stats[f"{config.objective}_loss"] = ratio(main_loss, main_count)
            stats[f"{config.objective}_accuracy"] = ratio(main_correct, main_count)
        # The optimised quantity, from the global sums (the same value on every replica).
        stats["total_loss"] = self._loss(total, tf.stack([mlm_count, tokens, cloze_count]))
        return stats

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
        # Every micro-batch's loss is divided by the counts of the whole
        # batch, so the summed gradients are those of the full batch.
        grads, local = micro_batch_sums(
            lambda part: self._replica_gradients(part, counts, variables), data,
            self.config.gradient_accumulation_steps, variables,
            tf.zeros([len(self._SUM_NAMES)], tf.float32))
        grads = sum_over_replicas(grads)
        stats = self._stats(local)
        if self.nonfinite_record is not None:
            # Global values (summed over replicas): the same on every replica.
            # Under float16 loss scaling an overflowing step is skipped, not a fault.
            scaled = isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer)
            self.nonfinite_record.update(self.optimizer.iterations + 1, stats["total_loss"],
                                         None if scaled else gradient_norm(grads))
        self.optimizer.apply(grads, variables)
        self.seen_batches.assign_add(1)
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
