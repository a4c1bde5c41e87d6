"""The tagging model: ELECTRA encoder -> every position's final hidden state -> dense(tags).

As in the original code's tagging task, the head is one dense layer on the
final hidden states with no dropout before it, trained with softmax
cross-entropy at each word's first piece (a label mask), summed over the
words of a sentence. The original gathers the labelled positions before
the dense layer; applying it at every position and masking is the same
computation, and gives the per-token outputs that Hugging Face's
`ElectraForTokenClassification` and the serving `token_ids` signature
return.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from electra_tf.finetuning.kind.loss import FinetuningLoss
from electra_tf.modeling.encoder import ElectraEncoder, token_inputs
from electra_tf.modeling.layers import truncated_normal

HEAD_NAME = "task_head"  # places the head at the top of the layer-wise decay


def tagging_losses(logits, labels: dict) -> dict:
    """Per-sentence summed cross-entropy and word accuracy.

    Args:
        logits: [B, L, T] (any float dtype).
        labels: `tag_ids` int [B, L] and `tag_mask` float [B, L] (1 at
            labelled first pieces).

    Returns:
        {"loss": float32 [B] (summed over labelled words), "accuracy":
        float32 [B] (fraction of the sentence's labelled words predicted
        right; 0 for a sentence without any)}.
    """
    logits = tf.cast(logits, tf.float32)
    tag_ids = tf.cast(labels["tag_ids"], tf.int32)
    mask = tf.cast(labels["tag_mask"], tf.float32)
    cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tag_ids, logits=logits)
    right = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), tag_ids), tf.float32)
    words = tf.reduce_sum(mask, axis=-1)
    return {
        "loss": tf.reduce_sum(cross_entropy * mask, axis=-1),
        "accuracy": tf.math.divide_no_nan(tf.reduce_sum(right * mask, axis=-1), words),
    }


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraTagger(FinetuningLoss, keras.Model):
    """Token classification (NER, chunking, part of speech) on an `ElectraEncoder`.

    Inputs: a dict of int32 [B, L] `input_ids`, `input_mask`, `segment_ids`.
    Output: logits [B, L, num_tags] at every position. `train_step` (see
    `FinetuningLoss`) takes (inputs, {tag_ids [B, L], tag_mask [B, L]}).

    Args:
        encoder: a (pre-trained) `ElectraEncoder`.
        num_tags: number of tags.
        initializer_range: stddev of the head's truncated-normal init.
    """

    def __init__(
        self, encoder: ElectraEncoder, num_tags: int, initializer_range: float = 0.02, **kwargs
    ):
        # === Layers ===
        self.encoder = encoder
        self.task_head = keras.layers.Dense(
            num_tags, kernel_initializer=truncated_normal(initializer_range), name=HEAD_NAME
        )
        # === Functional graph ===
        inputs = token_inputs()
        outputs = self.task_head(encoder(inputs))
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        # === Config ===
        self.num_tags = num_tags
        self.initializer_range = initializer_range

    # The values a train step logs (see `example_losses`).
    log_names = ("loss", "accuracy")

    def example_losses(self, inputs, labels, training=False):
        """The summed loss and the word accuracy of every sentence (see `tagging_losses`)."""
        return tagging_losses(self(inputs, training=training), labels)

    def get_config(self):
        return self.config_with_encoder(
            num_tags=self.num_tags,
            initializer_range=self.initializer_range,
        )


def build_tagger(encoder: ElectraEncoder, num_tags: int, seed: int = 0) -> ElectraTagger:
    """Wraps `encoder` with a freshly initialised head (seeded for reproducible trials)."""
    keras.utils.set_random_seed(seed)
    return ElectraTagger(
        encoder, num_tags, initializer_range=encoder.initializer_range, name="tagger"
    )
