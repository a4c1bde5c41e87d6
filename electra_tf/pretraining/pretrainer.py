"""`Pretrainer`: what every pre-training objective shares, the train step under tf.distribute.

An objective (`electra_tf.pretraining.objectives`) is a subclass that says
three things, by name:

* `forward(batch, training)`: the forward pass over one (per-replica,
  per-micro-batch) batch, returning its statistics as *sums over examples*,
  grouped by name (`{"mlm": {"nll": ..., "count": ...}, "disc": {...}}`),
  beside the tensors it computed (logits, labels...);
* `_loss(sums, counts)`: the loss from those sums and the counts of the
  *global* batch (`counts(batch)`, summed over replicas before the step);
* `metrics_from_sums(sums)`: the logged metrics from sums over any number of
  examples (a global batch, or a whole evaluation set).

The train step is the one every electra-tf model shares
(`electra_tf.modeling.train_step`): every (micro-)batch's loss is its local
sums over the global counts, so the gradients summed over replicas and
micro-batches are the gradients of the whole batch; the statistics are summed
the same way, by name (`tf.nest`), for the metrics.
"""

from __future__ import annotations

import keras
from keras import ops

from electra_tf.config import PretrainingConfig
from electra_tf.modeling.electra import build_generator_and_discriminator
from electra_tf.modeling.kernels import resolve_kernels
from electra_tf.modeling.train_step import TrainStep, replica_sum

# TensorBoard / console names of the default objective, as in the original code.
METRIC_NAMES = (
    "total_loss",
    "masked_lm_loss",
    "disc_loss",
    "masked_lm_accuracy",
    "sampled_masked_lm_accuracy",
    "disc_accuracy",
    "disc_precision",
    "disc_recall",
    "replaced_fraction",
)


def statistics(outputs: dict) -> dict:
    """The sums among `compute_sums`' outputs: its dict entries (tensors are the rest).

    Args:
        outputs: what `compute_sums` returned.

    Returns:
        {group: {name: float32 scalar sum}}, e.g. {"mlm": {"nll", "correct",
        "count"}, "counts": {"masked", "tokens"}}.
    """
    return {name: value for name, value in outputs.items() if isinstance(value, dict)}


def input_counts(batch) -> dict:
    """What every objective divides by, read from the inputs alone (float32 sums).

    Returns:
        {"masked": masked slots (sum of `masked_lm_weights`), "tokens":
        non-pad tokens (sum of `input_mask`)}.
    """
    return {
        "masked": ops.sum(ops.cast(batch["masked_lm_weights"], "float32")),
        "tokens": ops.sum(ops.cast(batch["input_mask"], "float32")),
    }


def counter_variable(name: str):
    """A non-trainable int64 scalar at 0 that the train step advances.

    On TensorFlow a `tf.Variable` that only the first replica writes (the
    layout of every run's checkpoint); on another backend a Keras variable,
    part of the model's non-trainable state.
    """
    if keras.backend.backend() != "tensorflow":
        return keras.Variable(0, dtype="int64", trainable=False, name=name)
    import tensorflow as tf

    return tf.Variable(
        0,
        dtype=tf.int64,
        trainable=False,
        name=name,
        aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
    )


@keras.saving.register_keras_serializable(package="electra_tf")
class Pretrainer(TrainStep, keras.Model):
    """The generator/discriminator pair of one objective, with its custom `train_step`.

    Consumes the batches of `electra_tf.data.pipeline.make_pretraining_dataset`
    (masking already applied on the fly). Build one with
    `electra_tf.pretraining.objectives.make_pretrainer(config)`, which picks
    the subclass of `config.objective` and `config.training`. Its
    `train_step` is `electra_tf.modeling.train_step.TrainStep`'s.

    Losses are normalised by the counts of the *global* batch, so training
    on R replicas (and in A accumulated micro-batches) gives the same update
    as one device on the same global batch.

    Subclasses set `OBJECTIVE` (and `TRAINING` unless "joint") and define
    `_build_networks`, `forward`, `_loss` and `metrics_from_sums`.

    Args:
        config: the run's `PretrainingConfig`.
    """

    OBJECTIVE: str = ""
    TRAINING: str = "joint"

    def __init__(self, config: PretrainingConfig, **kwargs):
        super().__init__(**kwargs)
        if (config.objective, config.training) != (self.OBJECTIVE, self.TRAINING):
            raise ValueError(
                f"{type(self).__name__} trains --objective={self.OBJECTIVE} "
                f"--training={self.TRAINING}, not --objective={config.objective} "
                f"--training={config.training}: build it with make_pretrainer(config)."
            )
        self.config = config
        self.gradient_accumulation_steps = config.gradient_accumulation_steps
        self.replica_jit_compile = config.jit_compile
        # The kernel set every part of the model and the objective runs.
        self.kernels = resolve_kernels(config.kernels)
        self._build_networks()
        # Batches consumed so far: the data position to resume from. Separate
        # from optimizer.iterations, which skips float16 overflow steps.
        self.seen_batches = counter_variable("seen_batches")
        # Two-stage training: set once the discriminator holds the generator's
        # weights. Every objective has it, so every run's checkpoint has one layout.
        self.discriminator_initialised = counter_variable("discriminator_initialised")

    # ------------------------------------------------------ what an objective defines
    def _build_networks(self) -> None:
        """Creates `self.generator` (or None), `self.discriminator` and any head."""
        raise NotImplementedError

    def _build_pair(self, **options) -> None:
        """`self.generator` and `self.discriminator` of the config's architecture and sharing.

        Args:
            **options: more arguments of `build_generator_and_discriminator`.
        """
        self.generator, self.discriminator = build_generator_and_discriminator(
            self.config.model,
            weight_sharing=self.config.weight_sharing,
            kernels=self.kernels,
            **options,
        )

    def forward(self, batch, training=False) -> dict:
        """Forward pass over one batch: named sums (dicts) beside the tensors computed."""
        raise NotImplementedError

    def _loss(self, sums, counts):
        """This replica's share of the global loss: float32 scalar.

        Args:
            sums: `statistics` of this replica's (micro-)batch.
            counts: `counts` of the global batch.
        """
        raise NotImplementedError

    def metrics_from_sums(self, sums) -> dict:
        """The logged metrics (float32 scalars) of sums over any set of examples."""
        raise NotImplementedError

    def counts(self, batch) -> dict:
        """This batch's loss denominators, from its inputs alone (see `input_counts`)."""
        return input_counts(batch)

    # ---------------------------------------------------------------- the machinery
    def compute_sums(self, batch, training=False) -> dict:
        """`forward` over one batch, with the batch's own `counts` among its sums.

        Args:
            batch: dict of the pipeline's tensors (see the pipeline module).
            training: enables dropout.

        Returns:
            dict: the groups of sums (dicts of float32 scalars, see
            `statistics`), among them `counts`, and the tensors the objective
            computed (e.g. `gen_logits` [B, N, V], `disc_logits` [B, L],
            `disc_mask` [B, L], `fake_ids` [B, L], `labels` [B, L],
            `sampled_ids` [B, N]).
        """
        return {"counts": self.counts(batch), **self.forward(batch, training=training)}

    def call(self, inputs, training=False):
        """Runs the forward pass and returns its sums and tensors (see `compute_sums`)."""
        return self.compute_sums(inputs, training=training)

    def _global_counts(self, batch):
        """`counts` of the *global* batch (summed over replicas), without gradient.

        Known from the inputs alone, so every replica (and every micro-batch)
        can divide its loss sums by the global counts before the forward pass.
        """
        return replica_sum(self.counts(batch))

    def _local_sums(self, batch, training):
        """Forward pass -> this replica's named sums (see `statistics`)."""
        return statistics(self.compute_sums(batch, training=training))

    def _loss_and_stats(self, batch, training):
        """(this replica's loss share, global metrics) for one batch."""
        counts = self._global_counts(batch)
        loss, local = self.step_loss(batch, counts, training)
        return loss, self.step_logs(replica_sum(local), counts)

    # ------------------------------------------------------ the shared train step
    loss_log = "total_loss"

    def step_denominators(self, batch):
        return self.counts(batch)

    def step_loss(self, batch, denominators, training):
        local = self._local_sums(batch, training)
        return self._loss(local, denominators), local

    def step_logs(self, sums, denominators):
        return self.metrics_from_sums(sums)

    def after_update(self):
        self.seen_batches.assign_add(1)

    def test_step(self, data):
        _, stats = self._loss_and_stats(data, training=False)
        return stats

    def build_from_batch(self, batch) -> None:
        """Creates every variable by running one forward pass (call inside the strategy scope)."""
        self.compute_sums(keras.tree.map_structure(ops.convert_to_tensor, batch), training=False)
        # Tells Keras not to attempt its own symbolic build inside fit(), which
        # under a strategy would average the (integer) first batch
        # (keras_compat.PrebuiltModel).
        self.built = True

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name}

    @classmethod
    def from_config(cls, config):
        # The run's config picks the class, whichever pretrainer's name it was saved under.
        run = PretrainingConfig.from_dict(config["config"])
        return _class_for(run, cls)(run, name=config.get("name"))


def _class_for(config: PretrainingConfig, saved: type) -> type:
    """`saved` if it trains `config`'s objective, else the nearest subclass of Pretrainer that does.

    (`objectives.make_pretrainer` is the way to build one; this only lets a
    model saved under one class's name load as the class its config names.)
    """
    wanted = (config.objective, config.training)
    level = [saved] if (saved.OBJECTIVE, saved.TRAINING) == wanted else [Pretrainer]
    while level:
        for candidate in level:
            if (candidate.OBJECTIVE, candidate.TRAINING) == wanted:
                return candidate
        level = [sub for candidate in level for sub in candidate.__subclasses__()]
    raise ValueError(
        f"--objective={config.objective} --training={config.training}: no "
        "pretrainer trains it (import electra_tf.pretraining.objectives)."
    )
