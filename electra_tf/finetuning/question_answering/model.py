"""The question-answering model: ELECTRA encoder + a span head.

Two heads, named in the model's config (`head`). `electra` (the default, and
every model saved before the option), as in the original ELECTRA code
(XLNet's QA module):

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

`transformers` (`TransformersSpanHead`), Hugging Face's
`ElectraForQuestionAnswering` head: one linear layer H -> 2 on every
position giving independent start and end logits (-1000 added outside [CLS]
and the context pieces, where transformers' pipelines mask them), loss
(start CE + end CE) / 2. Models imported from that class have it, so that
they compute transformers' logits exactly, and only models with it are
written back as that class. Its prediction mode gives the same beam outputs
as the `electra` head, so decoding and serving read both alike (see
`TransformersSpanHead.call`).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from electra_tf.finetuning.kind.loss import FinetuningLoss
from electra_tf.modeling.encoder import INPUT_NAMES, ElectraEncoder
from electra_tf.modeling.layers import truncated_normal

HEAD_NAME = "task_head"  # places the head at the top of the layer-wise decay
ELECTRA_HEAD = "electra"
TRANSFORMERS_HEAD = "transformers"
HEADS = (ELECTRA_HEAD, TRANSFORMERS_HEAD)
ANSWERABLE_WEIGHT = 0.5
# The longest answer (in pieces) the transformers head's beam searches by default.
MAX_ANSWER_LENGTH = 30
_MASK_PENALTY = 1000.0
# A score below every real one (finite, so that outputs stay valid JSON).
_NO_SCORE = -1e9


def answer_mask(input_mask, segment_ids):
    """float32 [B, L]: 1 at context tokens (segment 1, not padding) and at position 0."""
    mask = tf.cast(input_mask, tf.float32) * tf.cast(segment_ids, tf.float32)
    return tf.maximum(mask, tf.one_hot(0, tf.shape(mask)[1], dtype=tf.float32)[tf.newaxis])


def span_mask(mask):
    """float32 [B, L]: the answer mask [B, L] without each row's last piece after [CLS].

    In `[CLS] question [SEP] context [SEP]` that piece is the [SEP] closing
    the context (the only one left when the context is empty): what remains
    is [CLS] and the context pieces.
    """
    mask = tf.cast(mask, tf.float32)
    positions = tf.range(tf.shape(mask)[1])[tf.newaxis]  # [1, L]
    last = tf.reduce_max(tf.where((mask > 0) & (positions > 0), positions, -1), axis=1)
    return mask * tf.cast(tf.not_equal(positions, last[:, tf.newaxis]), tf.float32)


def _beam_only(scores: dict) -> dict:
    """A head's `scores` without the logits: what its prediction mode returns."""
    return {k: v for k, v in scores.items() if k not in ("start_logits", "end_logits")}


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

    def logits(self, sequence, mask, start_index) -> dict:
        """`start_logits` [B, L] and `end_logits` [B, K, L] given the starts `start_index` [B, K]."""
        mask = tf.cast(mask, tf.float32)
        states = tf.gather(sequence, start_index, batch_dims=1)  # [B, K, H]
        return {
            "start_logits": self.start_logits(sequence, mask),
            "end_logits": self.end_logits(sequence, states, mask),
        }

    def scores(self, sequence, mask) -> dict:
        """The prediction mode's outputs (see `call`) with the logits it ranks.

        Returns:
            The beam outputs of `call`, `start_logits` [B, L] and
            `end_logits` [B, K, L] (given each of the top starts).
        """
        mask = tf.cast(mask, tf.float32)
        start_logits = self.start_logits(sequence, mask)
        k = tf.minimum(self.beam_size, tf.shape(sequence)[1])
        start_top_log_probs, start_top_index = tf.math.top_k(tf.nn.log_softmax(start_logits), k)
        states = tf.gather(sequence, start_top_index, batch_dims=1)  # [B, K, H]
        end_logits = self.end_logits(sequence, states, mask)  # [B, K, L]
        end_top_log_probs, end_top_index = tf.math.top_k(tf.nn.log_softmax(end_logits), k)
        return {
            "start_logits": start_logits,
            "start_top_log_probs": start_top_log_probs,
            "start_top_index": start_top_index,
            "end_logits": end_logits,
            "end_top_log_probs": end_top_log_probs,
            "end_top_index": end_top_index,
            "answerable_logit": self.answerable_logit(sequence, start_logits),
        }

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
        if start_positions is not None:
            start_logits = self.start_logits(sequence, mask)
            states = tf.gather(sequence, tf.cast(start_positions, tf.int32), batch_dims=1)
            return {
                "start_logits": start_logits,
                "end_logits": self.end_logits(sequence, states, mask),
                "answerable_logit": self.answerable_logit(sequence, start_logits),
            }
        return _beam_only(self.scores(sequence, mask))

    def get_config(self):
        return {
            **super().get_config(),
            "beam_size": self.beam_size,
            "hidden_units": self.hidden_units,
            "initializer_range": self.initializer_range,
        }


@keras.saving.register_keras_serializable(package="electra_tf")
class TransformersSpanHead(keras.layers.Layer):
    """Independent start and end scores from final hidden states [B, L, H]: transformers' head.

    `ElectraForQuestionAnswering.qa_outputs`: one dense layer H -> 2 on every
    position, column 0 the start logit and column 1 the end logit (its
    kernel here is [H, 2], PyTorch's weight [2, H]). Both get -1000 added
    outside the context pieces and [CLS]: where transformers' question
    answering pipelines mask them (the answer mask without the [SEP] that
    closes the context, `span_mask`).

    The prediction mode gives the `electra` head's beam outputs, so that
    `decoding.decode` and the serving signature read both alike. A span's
    score is start log-prob + end log-prob (softmax over each window's
    masked logits): the log of the score the pipelines' span search
    (`select_starts_ends`) gives it. A start's candidates are the ends at or
    after it within `max_answer_length` pieces, and the `beam_size` starts
    kept are those whose best such span scores highest, so the n best valid
    spans of a window (n <= beam_size) are exactly that exhaustive search's.

    Args:
        beam_size: starts (and ends per start) kept at prediction time.
        max_answer_length: longest span searched, in pieces.
        initializer_range: stddev of the truncated-normal kernel init.
    """

    def __init__(
        self,
        beam_size: int = 20,
        max_answer_length: int = MAX_ANSWER_LENGTH,
        initializer_range: float = 0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.beam_size = beam_size
        self.max_answer_length = max_answer_length
        self.initializer_range = initializer_range

    def build(self, sequence_shape):
        hidden = int(sequence_shape[-1])
        self.kernel = self.add_weight(
            name="kernel", shape=(hidden, 2), initializer=truncated_normal(self.initializer_range)
        )
        self.bias = self.add_weight(name="bias", shape=(2,), initializer="zeros")
        self.built = True

    def unmasked_logits(self, sequence):
        """float32 [B, L, 2]: start and end logits as transformers computes them."""
        return tf.cast(tf.matmul(sequence, self.kernel) + self.bias, tf.float32)

    def logits(self, sequence, mask, start_index=None) -> dict:
        """`start_logits` and `end_logits` float32 [B, L], -1000 added outside `span_mask(mask)`.

        `start_index` is ignored: the end does not depend on the start.
        """
        del start_index
        penalty = _MASK_PENALTY * (1.0 - span_mask(mask))
        logits = self.unmasked_logits(sequence)
        return {"start_logits": logits[..., 0] - penalty, "end_logits": logits[..., 1] - penalty}

    def _beam(self, start_logits, end_logits, mask) -> dict:
        """The beam outputs and the no-answer score from masked logits [B, L]."""
        length = tf.shape(start_logits)[1]
        k = tf.minimum(self.beam_size, length)
        start_lp = tf.nn.log_softmax(start_logits)
        end_lp = tf.nn.log_softmax(end_logits)
        # Context pieces: the span mask without [CLS].
        context = (span_mask(mask) * (1.0 - tf.one_hot(0, length)[tf.newaxis])) > 0  # [B, L]
        end_in_context = tf.where(context, end_lp, _NO_SCORE)
        # best_end[b, s]: the best end in [s, s + max_answer_length).
        padded = tf.pad(
            end_in_context,
            [[0, 0], [0, self.max_answer_length - 1]],
            constant_values=_NO_SCORE,
        )
        windows = tf.signal.frame(padded, self.max_answer_length, 1, axis=-1)  # [B, L, M]
        best_end = tf.reduce_max(windows, axis=-1)
        valid_start = context & (best_end > _NO_SCORE / 2)
        best_span = tf.where(valid_start, start_lp + best_end, _NO_SCORE)  # [B, L]
        _, start_top_index = tf.math.top_k(best_span, k)  # [B, K]
        start_top_log_probs = tf.gather(start_lp, start_top_index, batch_dims=1)
        positions = tf.range(length)
        offset = positions[tf.newaxis, tf.newaxis] - start_top_index[..., tf.newaxis]  # [B, K, L]
        in_band = (offset >= 0) & (offset < self.max_answer_length)
        end_rank = tf.where(in_band, end_in_context[:, tf.newaxis], 2 * _NO_SCORE)
        _, end_top_index = tf.math.top_k(end_rank, k)  # [B, K, K]
        end_top_log_probs = tf.gather(
            tf.broadcast_to(end_lp[:, tf.newaxis], tf.shape(end_rank)), end_top_index, batch_dims=2
        )
        # The null span ([CLS], [CLS]) against the window's best span: transformers'
        # `null_score_diff` (and the pipeline's rule: no answer above 0).
        found = tf.reduce_any(valid_start, axis=1)
        null = start_lp[:, 0] + end_lp[:, 0]
        no_answer = tf.where(found, null - tf.reduce_max(best_span, axis=1), -_NO_SCORE)
        return {
            "start_top_log_probs": start_top_log_probs,
            "start_top_index": start_top_index,
            "end_top_log_probs": end_top_log_probs,
            "end_top_index": end_top_index,
            "answerable_logit": no_answer,
        }

    def scores(self, sequence, mask) -> dict:
        """The prediction mode's outputs with the masked `start_logits` and `end_logits` [B, L]."""
        mask = tf.cast(mask, tf.float32)
        logits = self.logits(sequence, mask)
        return {**logits, **self._beam(logits["start_logits"], logits["end_logits"], mask)}

    def call(self, sequence, mask, start_positions=None):
        """Training outputs (`start_positions` given) or the beam search outputs.

        Args:
            sequence: [B, L, H] final hidden states.
            mask: [B, L] answer mask.
            start_positions: int [B] gold starts (not read: the end does not
                depend on the start), or None to predict.

        Returns:
            With starts: {start_logits [B, L], end_logits [B, L]}. Without:
            {start_top_log_probs [B, K], start_top_index [B, K],
            end_top_log_probs [B, K, K], end_top_index [B, K, K],
            answerable_logit [B]} with K = min(beam_size, L), as `QAHead`;
            `answerable_logit` is the null span's score minus the best span's
            (log-probs; higher = more likely unanswerable).
        """
        if start_positions is not None:
            return self.logits(sequence, mask)
        return _beam_only(self.scores(sequence, mask))

    def get_config(self):
        return {
            **super().get_config(),
            "beam_size": self.beam_size,
            "max_answer_length": self.max_answer_length,
            "initializer_range": self.initializer_range,
        }


def qa_losses(outputs: dict, labels: dict):
    """Per-window span and answerability losses.

    Args:
        outputs: training outputs of `QAHead` (masked logits).
        labels: int {start_positions [B], end_positions [B], is_impossible [B]}.

    Returns:
        (span_loss [B], answerable_loss [B]), float32; the answerability loss
        is 0 for a head without an answerability classifier (no
        `answerable_logit` in `outputs`).
    """

    def cross_entropy(logits, positions):
        log_probs = tf.nn.log_softmax(logits)
        return -tf.gather(log_probs, tf.cast(positions, tf.int32), batch_dims=1)

    span = 0.5 * (
        cross_entropy(outputs["start_logits"], labels["start_positions"])
        + cross_entropy(outputs["end_logits"], labels["end_positions"])
    )
    if "answerable_logit" not in outputs:
        return span, tf.zeros_like(span)
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
        hidden_units: see `QAHead` (the `electra` head).
        answerable_weight: weight of the answerability loss (the `electra` head).
        head: `electra` (`QAHead`) or `transformers` (`TransformersSpanHead`).
        max_answer_length: see `TransformersSpanHead` (the `transformers` head).
    """

    def __init__(
        self,
        encoder: ElectraEncoder,
        beam_size: int = 20,
        hidden_units: int = 512,
        answerable_weight: float = ANSWERABLE_WEIGHT,
        head: str = ELECTRA_HEAD,
        max_answer_length: int = MAX_ANSWER_LENGTH,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if head not in HEADS:
            raise ValueError(f"head={head!r}: choose one of {', '.join(HEADS)}.")
        self.encoder = encoder
        self.head = head
        self.hidden_units = hidden_units
        self.max_answer_length = max_answer_length
        if head == TRANSFORMERS_HEAD:
            self.task_head = TransformersSpanHead(
                beam_size, max_answer_length, encoder.initializer_range, name=HEAD_NAME
            )
        else:
            self.task_head = QAHead(
                beam_size, hidden_units, encoder.initializer_range, name=HEAD_NAME
            )
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
        return self.config_with_encoder(
            beam_size=self.task_head.beam_size,
            hidden_units=self.hidden_units,
            answerable_weight=self.answerable_weight,
            head=self.head,
            max_answer_length=self.max_answer_length,
        )

    @classmethod
    def from_config(cls, config):
        model = super().from_config(config)
        model.build_for()  # a subclassed model: built here, so that its weights load
        return model


def build_qa_model(
    encoder: ElectraEncoder,
    beam_size: int = 20,
    seed: int = 0,
    seq_length: int = 8,
    head: str = ELECTRA_HEAD,
    max_answer_length: int = MAX_ANSWER_LENGTH,
) -> ElectraQA:
    """Wraps `encoder` with a freshly initialised (seeded) head and builds it."""
    keras.utils.set_random_seed(seed)
    model = ElectraQA(
        encoder,
        beam_size=beam_size,
        head=head,
        max_answer_length=max_answer_length,
        name="qa",
    )
    model.build_for(seq_length)
    return model
