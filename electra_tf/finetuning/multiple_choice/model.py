"""The multiple-choice model: a score per option from its [CLS], softmax over the options.

Every option's sequence (`[CLS] context [SEP] question option [SEP]`) runs
through the encoder on its own; the final hidden state of its [CLS] goes
through dense H -> H, exact GELU, dropout and dense H -> 1, giving the
option's score. This is transformers' `ElectraForMultipleChoice` head
layer for layer: its `sequence_summary` (summary type `first`, a projection
to H, GELU, the last dropout) is our `summary`, its `classifier` ours.
Options that are padding (their `input_mask` is 0 at [CLS]) score
`MASKED_LOGIT`, so that the softmax gives them no probability.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from electra_tf.finetuning.kind.loss import FinetuningLoss
from electra_tf.modeling.encoder import INPUT_NAMES, ElectraEncoder
from electra_tf.modeling.layers import ReplicaDropout, truncated_normal

HEAD_NAME = "task_head"  # places the head at the top of the layer-wise decay
# The score of an absent option: exp(MASKED_LOGIT - any real score) is 0 in float32.
MASKED_LOGIT = -10000.0


@keras.saving.register_keras_serializable(package="electra_tf")
class ChoiceHead(keras.layers.Layer):
    """[N, H] [CLS] vectors -> [N] scores: dense H -> H, exact GELU, dropout, dense H -> 1.

    Kernels are [in, out] (PyTorch's are [out, in]). One layer, so that its
    variables' paths start with `task_head/`.

    Args:
        hidden_size: H.
        dropout_rate: dropout after the GELU during training.
        initializer_range: stddev of the truncated-normal kernel init.
        kernels: the kernel set of the dropout (not part of the config).
    """

    def __init__(
        self,
        hidden_size: int,
        dropout_rate: float = 0.1,
        initializer_range: float = 0.02,
        kernels: str = "reference",
        **kwargs,
    ):
        super().__init__(**kwargs)
        init = truncated_normal(initializer_range)
        self.summary = keras.layers.Dense(
            hidden_size, activation="gelu", kernel_initializer=init, name="summary"
        )
        self.dropout = ReplicaDropout(dropout_rate, kernels=kernels, name="dropout")
        self.classifier = keras.layers.Dense(1, kernel_initializer=init, name="classifier")
        self.hidden_size = hidden_size
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range

    def build(self, input_shape):
        self.summary.build(input_shape)
        self.classifier.build((None, self.hidden_size))
        self.built = True

    def call(self, cls_vectors, training=None):
        hidden = self.dropout(self.summary(cls_vectors), training=training)
        return tf.squeeze(self.classifier(hidden), axis=-1)

    def get_config(self):
        return {
            **super().get_config(),
            "hidden_size": self.hidden_size,
            "dropout_rate": self.dropout_rate,
            "initializer_range": self.initializer_range,
        }


def choice_losses(logits, labels) -> dict:
    """Cross-entropy over the options and whether the right one scores highest.

    Args:
        logits: float [B, O] (absent options at `MASKED_LOGIT`).
        labels: int [B] positions of the right options.

    Returns:
        {"loss": float32 [B], "accuracy": float32 [B] (1.0 or 0.0)}.
    """
    logits = tf.cast(logits, tf.float32)
    labels = tf.cast(labels, tf.int32)
    right = tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), labels)
    return {
        "loss": tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits),
        "accuracy": tf.cast(right, tf.float32),
    }


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraMultipleChoice(FinetuningLoss, keras.Model):
    """Multiple choice on an `ElectraEncoder`.

    Inputs: a dict of int32 [B, O, L] `input_ids`, `input_mask`,
    `segment_ids` (O options per question). Output: float32 logits [B, O],
    `MASKED_LOGIT` for options whose `input_mask` is 0 at [CLS].
    `train_step` (see `FinetuningLoss`) takes (inputs, labels [B]).

    Args:
        encoder: a (pre-trained) `ElectraEncoder`; the head's dropout runs its
            kernel set.
        dropout_rate: dropout in the head (transformers' `summary_last_dropout`).
        initializer_range: stddev of the head's truncated-normal init.
    """

    def __init__(
        self,
        encoder: ElectraEncoder,
        dropout_rate: float = 0.1,
        initializer_range: float = 0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.encoder = encoder
        self.task_head = ChoiceHead(
            encoder.hidden_size,
            dropout_rate,
            initializer_range,
            kernels=encoder.kernels,
            name=HEAD_NAME,
        )
        # Built here, outside the model's name scope, so that its variable
        # paths start with `task_head/` (the layer-wise decay reads them).
        self.task_head.build((None, encoder.hidden_size))
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range

    def call(self, inputs, training=False):
        shape = tf.shape(inputs["input_ids"])  # [B, O, L]
        flat = {name: tf.reshape(inputs[name], [-1, shape[2]]) for name in INPUT_NAMES}
        sequence = self.encoder(flat, training=training)  # [B * O, L, H]
        scores = self.task_head(sequence[:, 0], training=training)  # [B * O]
        logits = tf.reshape(tf.cast(scores, tf.float32), shape[:2])
        present = tf.reshape(flat["input_mask"][:, 0] > 0, shape[:2])
        return tf.where(present, logits, MASKED_LOGIT)

    def build_for(self, num_options: int = 2, seq_length: int = 4):
        """Creates every variable by running a dummy batch."""
        self({name: tf.ones((1, num_options, seq_length), tf.int32) for name in INPUT_NAMES})

    # The values a train step logs (see `example_losses`).
    log_names = ("loss", "accuracy")

    def example_losses(self, inputs, labels, training=False):
        """The loss and whether the prediction is right, of every question."""
        return choice_losses(self(inputs, training=training), labels)

    def get_config(self):
        return self.config_with_encoder(
            dropout_rate=self.dropout_rate, initializer_range=self.initializer_range
        )

    @classmethod
    def from_config(cls, config):
        model = super().from_config(config)
        model.build_for()  # a subclassed model: built here, so that its weights load
        return model


def build_multiple_choice(
    encoder: ElectraEncoder, seed: int = 0, dropout_rate: float = 0.1
) -> ElectraMultipleChoice:
    """Wraps `encoder` with a freshly initialised (seeded) head and builds it."""
    keras.utils.set_random_seed(seed)
    model = ElectraMultipleChoice(
        encoder,
        dropout_rate=dropout_rate,
        initializer_range=encoder.initializer_range,
        name="multiple_choice",
    )
    model.build_for()
    return model
