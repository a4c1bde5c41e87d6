"""The question-answering model: ELECTRA encoder + the paper's span head (XLNet's QA module).

Head, as in the original ELECTRA code:

* start logits: dense(1) over the final hidden states, with -1000 added
  outside the answer mask (context tokens and position 0, [CLS]);
* end logits conditioned on the start: the start position's hidden state is
  concatenated to every position's, then dense(512, GELU) and dense(1)
  (no LayerNorm, unlike XLNet). Training conditions on the gold start;
  prediction on each of the `beam_size` most likely starts, keeping the
  `beam_size` most likely ends per start;
* answerability: [CLS] concatenated with the start-probability-weighted
  average of the hidden states, dense(512, GELU), dense(1): a logit for
  "unanswerable", trained with sigmoid cross-entropy at weight 0.5 (on for
  SQuAD 1.1 too, where every label is 0, as in the original).

Loss per window: (start CE + end CE) / 2 + 0.5 * answerability CE.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from electra_tf.finetuning.loss import FinetuningLoss
from electra_tf.modeling.encoder import INPUT_NAMES, ElectraEncoder
from electra_tf.modeling.layers import truncated_normal

HEAD_NAME = "task_head"  # places the head at the top of the layer-wise decay
ANSWERABLE_WEIGHT = 0.5
_MASK_PENALTY = 1000.0


def answer_mask(input_mask, segment_ids):
    """float32 [B, L]: 1 at context tokens (segment 1, not padding) and at position 0."""
    mask = tf.cast(input_mask, tf.float32) * tf.cast(segment_ids, tf.float32)
    return tf.maximum(mask, tf.one_hot(0, tf.shape(mask)[1], dtype=tf.float32)[tf.newaxis])


@keras.saving.register_keras_serializable(package="electra_tf")
class QAHead(keras.layers.Layer):
    """Start, conditioned end and answerability scores from final hidden states [B, L, H].

    Args:
        beam_size: starts (and ends per start) kept at prediction time.
        hidden_units: width of the two GELU layers (512 in the paper's code).
        initializer_range: stddev of the truncated-normal kernel init.
    """

    def __init__(
        self,
        beam_size: int = 20,
        hidden_units: int = 512,
        initializer_range: float = 0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.beam_size = beam_size
        self.hidden_units = hidden_units
        self.initializer_range = initializer_range

    def build(self, sequence_shape):
        hidden = int(sequence_shape[-1])
        init = truncated_normal(self.initializer_range)

        def weight(name, shape, kernel=True):
            return self.add_weight(name=name, shape=shape, initializer=init if kernel else "zeros")

        self.start_kernel = weight("start_kernel", (hidden, 1))
        self.start_bias = weight("start_bias", (1,), False)
        # One [2H, U] kernel applied to concat(start state, position state),
        # computed as the sum of its two halves so that the [B, K, L, 2H]
        # concatenation is never materialised.
        self.end_hidden_kernel = weight("end_hidden_kernel", (2 * hidden, self.hidden_units))
        self.end_hidden_bias = weight("end_hidden_bias", (self.hidden_units,), False)
        self.end_kernel = weight("end_kernel", (self.hidden_units, 1))
        self.end_bias = weight("end_bias", (1,), False)
        self.answerable_hidden_kernel = weight(
            "answerable_hidden_kernel", (2 * hidden, self.hidden_units)
        )
        self.answerable_hidden_bias = weight("answerable_hidden_bias", (self.hidden_units,), False)
        self.answerable_kernel = weight("answerable_kernel", (self.hidden_units, 1))
        self.answerable_bias = weight("answerable_bias", (1,), False)
        self.hidden_size = hidden
        self.built = True

    def start_logits(self, sequence, mask):
        """[B, L] masked start logits (float32)."""
        logits = tf.squeeze(tf.matmul(sequence, self.start_kernel), -1) + self.start_bias
        return tf.cast(logits, tf.float32) - _MASK_PENALTY * (1.0 - mask)

    def end_logits(self, sequence, start_states, mask):
        """Masked end logits given start states.

        Args:
            sequence: [B, L, H].
            start_states: [B, H] (one start per row) or [B, K, H] (a beam).
            mask: [B, L] answer mask.

        Returns:
            float32 [B, L] or [B, K, L].
        """
        h = self.hidden_size
        from_positions = tf.matmul(sequence, self.end_hidden_kernel[h:])  # [B, L, U]
        from_start = tf.matmul(start_states, self.end_hidden_kernel[:h])  # [B, (K,) U]
        if start_states.shape.rank == 3:
            from_positions = from_positions[:, tf.newaxis]  # [B, 1, L, U]
            mask = mask[:, tf.newaxis]
        hidden = keras.activations.gelu(
            from_positions + tf.expand_dims(from_start, -2) + self.end_hidden_bias,
            approximate=False,
        )
        logits = tf.squeeze(tf.matmul(hidden, self.end_kernel), -1) + self.end_bias
        return tf.cast(logits, tf.float32) - _MASK_PENALTY * (1.0 - mask)

    def answerable_logit(self, sequence, start_logits):
        """[B] logit that the question has no answer (float32)."""
        start_p = tf.cast(tf.nn.softmax(start_logits), sequence.dtype)
        pooled = tf.reduce_sum(start_p[..., tf.newaxis] * sequence, axis=1)  # [B, H]
        features = tf.concat([sequence[:, 0], pooled], -1)
        hidden = keras.activations.gelu(
            tf.matmul(features, self.answerable_hidden_kernel) + self.answerable_hidden_bias,
            approximate=False,
        )
        logit = tf.squeeze(tf.matmul(hidden, self.answerable_kernel), -1) + self.answerable_bias
        return tf.cast(logit, tf.float32)

    def call(self, sequence, mask, start_positions=None):
        """Training outputs (given gold starts) or the beam search outputs.

        Args:
            sequence: [B, L, H] final hidden states.
            mask: [B, L] answer mask.
            start_positions: int [B] gold starts, or None to predict.

        Returns:
            With starts: {start_logits [B, L], end_logits [B, L],
            answerable_logit [B]}. Without: {start_top_log_probs [B, K],
            start_top_index [B, K], end_top_log_probs [B, K, K],
            end_top_index [B, K, K], answerable_logit [B]} with
            K = min(beam_size, L).
        """
        # Keras casts floating inputs to the compute dtype (bfloat16 or
        # float16 in mixed precision); the masking is done in float32.
        mask = tf.cast(mask, tf.float32)
        start_logits = self.start_logits(sequence, mask)
        answerable = self.answerable_logit(sequence, start_logits)
        if start_positions is not None:
            states = tf.gather(sequence, tf.cast(start_positions, tf.int32), batch_dims=1)
            return {
                "start_logits": start_logits,
                "end_logits": self.end_logits(sequence, states, mask),
                "answerable_logit": answerable,
            }
        k = tf.minimum(self.beam_size, tf.shape(sequence)[1])
        start_top_log_probs, start_top_index = tf.math.top_k(tf.nn.log_softmax(start_logits), k)
        states = tf.gather(sequence, start_top_index, batch_dims=1)  # [B, K, H]
        end_log_probs = tf.nn.log_softmax(self.end_logits(sequence, states, mask))  # [B, K, L]
        end_top_log_probs, end_top_index = tf.math.top_k(end_log_probs, k)
        return {
            "start_top_log_probs": start_top_log_probs,
            "start_top_index": start_top_index,
            "end_top_log_probs": end_top_log_probs,
            "end_top_index": end_top_index,
            "answerable_logit": answerable,
        }

    def get_config(self):
        return {
            **super().get_config(),
            "beam_size": self.beam_size,
            "hidden_units": self.hidden_units,
            "initializer_range": self.initializer_range,
        }


def qa_losses(outputs: dict, labels: dict):
    """Per-window span and answerability losses.

    Args:
        outputs: training outputs of `QAHead` (masked logits).
        labels: int {start_positions [B], end_positions [B], is_impossible [B]}.

    Returns:
        (span_loss [B], answerable_loss [B]), float32.
    """

    def cross_entropy(logits, positions):
        log_probs = tf.nn.log_softmax(logits)
        return -tf.gather(log_probs, tf.cast(positions, tf.int32), batch_dims=1)

    span = 0.5 * (
        cross_entropy(outputs["start_logits"], labels["start_positions"])
        + cross_entropy(outputs["end_logits"], labels["end_positions"])
    )
    answerable = tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.cast(labels["is_impossible"], tf.float32), logits=outputs["answerable_logit"]
    )
    return span, answerable


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraQA(FinetuningLoss, keras.Model):
    """Extractive question answering on an `ElectraEncoder`.

    Inputs: dict of int32 [B, L] `input_ids`, `input_mask`, `segment_ids`
    (`[CLS] question [SEP] context [SEP]`, context in segment 1). `call`
    returns the beam search outputs of `QAHead`; `train_step` (see
    `FinetuningLoss`) takes (inputs, labels) with the gold start/end
    and `is_impossible`.

    Args:
        encoder: the (pre-trained) encoder.
        beam_size: see `QAHead`.
        hidden_units: see `QAHead`.
        answerable_weight: weight of the answerability loss.
    """

    def __init__(
        self,
        encoder: ElectraEncoder,
        beam_size: int = 20,
        hidden_units: int = 512,
        answerable_weight: float = ANSWERABLE_WEIGHT,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.encoder = encoder
        self.task_head = QAHead(beam_size, hidden_units, encoder.initializer_range, name=HEAD_NAME)
        # Built here, outside the model's name scope, so that its variable
        # paths start with `task_head/` (the layer-wise decay reads them).
        self.task_head.build((None, None, encoder.hidden_size))
        self.answerable_weight = answerable_weight

    def _run(self, inputs, training, start_positions=None):
        inputs = {name: inputs[name] for name in INPUT_NAMES}
        sequence = self.encoder(inputs, training=training)
        mask = answer_mask(inputs["input_mask"], inputs["segment_ids"])
        return self.task_head(sequence, mask, start_positions)

    def call(self, inputs, training=False):
        return self._run(inputs, training)

    def build_for(self, seq_length: int = 8):
        """Creates every variable by running a dummy batch through both head modes."""
        dummy = {name: tf.ones((1, seq_length), tf.int32) for name in INPUT_NAMES}
        self(dummy)
        self._run(dummy, False, tf.zeros((1,), tf.int32))

    # The values a train step logs (see `example_losses`).
    log_names = ("loss", "span_loss", "answerable_loss")

    def example_losses(self, inputs, labels, training=False):
        """The total, span and answerability losses of every window.

        Args:
            inputs: the model inputs of a batch.
            labels: int {start_positions [B], end_positions [B], is_impossible [B]}.
            training: run with dropout.

        Returns:
            {name: float32 [B]} for each of `log_names`.
        """
        outputs = self._run(inputs, training, labels["start_positions"])
        span, answerable = qa_losses(outputs, labels)
        return {
            "loss": span + self.answerable_weight * answerable,
            "span_loss": span,
            "answerable_loss": answerable,
        }

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "beam_size": self.task_head.beam_size,
            "hidden_units": self.task_head.hidden_units,
            "answerable_weight": self.answerable_weight,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        model = cls(**config)
        model.build_for()
        return model


def build_qa_model(
    encoder: ElectraEncoder, beam_size: int = 20, seed: int = 0, seq_length: int = 8
) -> ElectraQA:
    """Wraps `encoder` with a freshly initialised (seeded) head and builds it."""
    keras.utils.set_random_seed(seed)
    model = ElectraQA(encoder, beam_size=beam_size, name="qa")
    model.build_for(seq_length)
    return model
