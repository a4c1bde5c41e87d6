"""The fine-tuning model: pre-trained encoder -> [CLS] hidden state -> dropout -> head.

Two heads, named in the model's config (`head`):

* `electra` (the default, and every model saved before the option): one
  dense layer, as in the paper and the original code;
* `transformers`: Hugging Face's `ElectraClassificationHead` after its first
  dropout: dense H -> H, exact GELU, dropout, dense H -> C (`out_proj`).
  Models imported from `ElectraForSequenceClassification` have it, so that
  they compute transformers' logits exactly, and only models with it are
  written back as that class.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from electra_tf.finetuning.kind.loss import FinetuningLoss
from electra_tf.modeling.encoder import ElectraEncoder, token_inputs
from electra_tf.modeling.layers import ReplicaDropout, truncated_normal

HEAD_NAME = "task_head"
ELECTRA_HEAD = "electra"
TRANSFORMERS_HEAD = "transformers"
HEADS = (ELECTRA_HEAD, TRANSFORMERS_HEAD)


def check_head(head: str) -> str:
    """`head`, if it names one of `HEADS`.

    Raises:
        ValueError: it does not.
    """
    if head not in HEADS:
        raise ValueError(f"head={head!r}: choose one of {', '.join(HEADS)}.")
    return head


@keras.saving.register_keras_serializable(package="electra_tf")
class FirstToken(keras.layers.Layer):
    """[B, L, H] -> [B, H]: the hidden state of the first ([CLS]) position.

    ELECTRA has no pooler; the classifier reads [CLS] directly.
    """

    def call(self, sequence):
        return sequence[:, 0]

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[2])


@keras.saving.register_keras_serializable(package="electra_tf")
class TransformersClassificationHead(keras.layers.Layer):
    """[B, H] -> [B, C]: dense H -> H, exact GELU, dropout, dense H -> C.

    transformers' `ElectraClassificationHead` after the dropout on [CLS]
    (the classifier's `head_dropout`): its `dense` and `out_proj`, kernels
    here [in, out] where PyTorch's are [out, in]. One layer, so that every
    weight of the head sits at the top of the layer-wise decay (its
    variables' paths start with `task_head/`).

    Args:
        hidden_size: H, the width of `dense`.
        num_outputs: C.
        dropout_rate: dropout after the GELU during training.
        initializer_range: stddev of the truncated-normal kernel init.
        kernels: the kernel set of the dropout (not part of the config).
    """

    def __init__(
        self,
        hidden_size: int,
        num_outputs: int,
        dropout_rate: float = 0.1,
        initializer_range: float = 0.02,
        kernels: str = "reference",
        **kwargs,
    ):
        super().__init__(**kwargs)
        init = truncated_normal(initializer_range)
        self.dense = keras.layers.Dense(
            hidden_size, activation="gelu", kernel_initializer=init, name="dense"
        )
        self.dropout = ReplicaDropout(dropout_rate, kernels=kernels, name="dropout")
        self.out_proj = keras.layers.Dense(num_outputs, kernel_initializer=init, name="out_proj")
        self.hidden_size = hidden_size
        self.num_outputs = num_outputs
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range

    @property
    def dense_layers(self) -> tuple:
        """The dense layers from [CLS] to the outputs, in order (for the lean forward pass)."""
        return (self.dense, self.out_proj)

    def build(self, input_shape):
        # Built here, inside this layer's name scope: `task_head/dense/kernel`, ...
        self.dense.build(input_shape)
        self.out_proj.build((None, self.hidden_size))
        self.built = True

    def call(self, cls_vector, training=None):
        hidden = self.dropout(self.dense(cls_vector), training=training)
        return self.out_proj(hidden)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.num_outputs)

    def get_config(self):
        return {
            **super().get_config(),
            "hidden_size": self.hidden_size,
            "num_outputs": self.num_outputs,
            "dropout_rate": self.dropout_rate,
            "initializer_range": self.initializer_range,
        }


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraClassifier(FinetuningLoss, keras.Model):
    """Sentence (pair) classification or regression on top of an `ElectraEncoder`.

    Inputs: a dict of int32 [B, L] tensors `input_ids`, `input_mask`,
    `segment_ids`. Output: logits [B, num_outputs] (classification) or
    predictions [B] (regression, `num_outputs=1`, in the training scale).
    `train_step` (see `FinetuningLoss`) takes (inputs, labels [B]).

    The head (`head="electra"`) is a single linear layer named `task_head`
    (as in the original code); `head="transformers"` is Hugging Face's
    two-layer head (`TransformersClassificationHead`). The name `task_head`
    places either at the top of the layer-wise learning-rate decay. The
    dropout before it draws a different mask on every replica, like the
    encoder's.

    Args:
        encoder: a (pre-trained) `ElectraEncoder`; the head's dropout runs its
            kernel set.
        num_outputs: number of classes, or 1 for regression.
        regression: squared-error objective and a [B] output.
        dropout_rate: dropout on the [CLS] vector during training.
        initializer_range: stddev of the head's truncated-normal init.
        head: `electra` or `transformers` (see the module docstring).
    """

    def __init__(
        self,
        encoder: ElectraEncoder,
        num_outputs: int,
        regression: bool = False,
        dropout_rate: float = 0.1,
        initializer_range: float = 0.02,
        head: str = ELECTRA_HEAD,
        **kwargs,
    ):
        # === Layers ===
        self.encoder = encoder
        self.first_token = FirstToken(name="first_token")
        self.head_dropout = ReplicaDropout(
            dropout_rate, kernels=encoder.kernels, name="head_dropout"
        )
        if check_head(head) == TRANSFORMERS_HEAD:
            self.task_head = TransformersClassificationHead(
                encoder.hidden_size,
                num_outputs,
                dropout_rate,
                initializer_range,
                kernels=encoder.kernels,
                name=HEAD_NAME,
            )
        else:
            self.task_head = keras.layers.Dense(
                num_outputs, kernel_initializer=truncated_normal(initializer_range), name=HEAD_NAME
            )
        # === Functional graph ===
        inputs = token_inputs()
        cls_vector = self.head_dropout(self.first_token(encoder(inputs)))
        outputs = self.task_head(cls_vector)
        if regression:
            outputs = keras.layers.Reshape((), name="squeeze")(outputs)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        # === Config ===
        self.num_outputs = num_outputs
        self.regression = regression
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self.head = head

    def per_example_loss(self, labels, outputs):
        """Softmax cross-entropy, or squared error for regression, of every example.

        Args:
            labels: [B] int class ids, or float targets (already scaled).
            outputs: the model output for the batch.

        Returns:
            float32 [B].
        """
        outputs = tf.cast(outputs, tf.float32)
        if self.regression:
            return tf.square(outputs - tf.cast(labels, tf.float32))
        return tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(labels, tf.int32), logits=outputs
        )

    @property
    def log_names(self) -> tuple[str, ...]:
        """The values a train step logs (see `example_losses`)."""
        return ("loss",) if self.regression else ("loss", "accuracy")

    def example_losses(self, inputs, labels, training=False):
        """The loss (and, classifying, whether the prediction is right) of every example.

        Args:
            inputs: the model inputs of a batch.
            labels: [B] int class ids, or float targets (already scaled).
            training: run with dropout.

        Returns:
            {name: float32 [B]} for each of `log_names`.
        """
        outputs = self(inputs, training=training)
        values = {"loss": self.per_example_loss(labels, outputs)}
        if not self.regression:
            predictions = tf.argmax(outputs, axis=-1, output_type=tf.int32)
            values["accuracy"] = tf.cast(
                tf.equal(predictions, tf.cast(labels, tf.int32)), tf.float32
            )
        return values

    def get_config(self):
        return self.config_with_encoder(
            num_outputs=self.num_outputs,
            regression=self.regression,
            dropout_rate=self.dropout_rate,
            initializer_range=self.initializer_range,
            head=self.head,
        )


def build_classifier(
    encoder: ElectraEncoder,
    num_outputs: int,
    regression: bool = False,
    seed: int = 0,
    head: str = ELECTRA_HEAD,
) -> ElectraClassifier:
    """Wraps `encoder` with a freshly initialised head (seeded for reproducible trials)."""
    keras.utils.set_random_seed(seed)
    model = ElectraClassifier(
        encoder,
        num_outputs,
        regression=regression,
        initializer_range=encoder.initializer_range,
        head=head,
        name="classifier",
    )
    return model
