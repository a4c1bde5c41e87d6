"""Serving signatures of a fine-tuned multiple-choice model (`model.ElectraMultipleChoice`).

`serving_default` (raw text; B may be 0, answered with empty outputs):
    inputs:  `question` string [B], `context` string [B] (a document's lines
             joined by line feeds, as fine-tuning joins them), `options`
             string [B, O]: a row's options, "" where it has fewer than O
    outputs: `logits` float32 [B, O] (`MASKED_LOGIT` for "" options),
             `probabilities` float32 [B, O] (softmax over the row's options;
                 0 for "" options),
             `choice_id` int32 [B]: the position of the best option (-1 for
                 a row without options),
             `choice` string [B]: its text ("" for a row without options)

`token_ids` (for clients that tokenize themselves, `[CLS] context [SEP]
question option [SEP]` per option, the second part in segment 1):
    inputs:  `input_ids`, `input_mask`, `segment_ids` int32 [B, O, L]; an
             option whose `input_mask` is 0 at [CLS] is absent
    outputs: `logits`, `probabilities` float32 [B, O], `choice_id` int32 [B]

Sequences are cut as `features.encode` cuts them (the context first, from
its end; then the question's start), so raw text gets the answers of
fine-tuning's evaluation.
"""

from __future__ import annotations

import tensorflow as tf

from electra_tf import text_packing as text_ops
from electra_tf.finetuning.kind.signatures import IDS_SIGNATURE, TEXT_SIGNATURE
from electra_tf.finetuning.multiple_choice.features import NUM_SPECIAL
from electra_tf.modeling.encoder import INPUT_NAMES

# Inputs of the token-id signature: int32 [B, O, L] each.
CHOICE_ID_SPECS = [tf.TensorSpec([None, None, None], tf.int32, name=name) for name in INPUT_NAMES]


def _first(pieces: tf.RaggedTensor, counts: tf.Tensor) -> tf.RaggedTensor:
    """The first `counts[i]` pieces of each row."""
    positions = tf.ragged.range(pieces.row_lengths())
    return tf.ragged.boolean_mask(pieces, positions < tf.expand_dims(counts, 1))


def _last(pieces: tf.RaggedTensor, counts: tf.Tensor) -> tf.RaggedTensor:
    """The last `counts[i]` pieces of each row."""
    positions = tf.ragged.range(pieces.row_lengths())
    start = pieces.row_lengths() - counts
    return tf.ragged.boolean_mask(pieces, positions >= tf.expand_dims(start, 1))


def pack_choices(tokenizer, question, context, options, max_seq_length: int) -> dict:
    """`[CLS] context [SEP] question option [SEP]` of every option, cut as fine-tuning cuts it.

    Args:
        tokenizer: the `WordPieceTokenizer`.
        question, context: string [B].
        options: string [B, O] ("" = no option).
        max_seq_length: the fine-tuning length.

    Returns:
        `input_ids`, `input_mask`, `segment_ids` int32 [B, O, L] (all 0 and
        padding for "" options) and `present` bool [B, O].
    """
    shape = tf.shape(options)
    flat_options = tf.reshape(options, [-1])
    rows = tf.repeat(tf.range(shape[0]), shape[1])  # the question of each option
    contexts = tf.gather(tokenizer.tokenize(context), rows)
    second = tf.concat(
        [tf.gather(tokenizer.tokenize(question), rows), tokenizer.tokenize(flat_options)], axis=1
    )
    budget = tf.constant(max_seq_length - NUM_SPECIAL, tf.int64)
    keep_second = tf.minimum(second.row_lengths(), budget)
    keep_context = tf.minimum(contexts.row_lengths(), budget - keep_second)
    # Cut to fit already: `pack` adds the special tokens and cuts nothing more.
    packed = text_ops.pack(
        _first(contexts, keep_context),
        _last(second, keep_second),
        max_seq_length,
        tokenizer.cls_id,
        tokenizer.sep_id,
        tokenizer.pad_id,
    )
    present = tf.not_equal(flat_options, "")
    keep = tf.cast(present, tf.int32)[:, tf.newaxis]
    packed = {
        "input_ids": tf.where(present[:, tf.newaxis], packed["input_ids"], tokenizer.pad_id),
        "input_mask": packed["input_mask"] * keep,
        "segment_ids": packed["segment_ids"] * keep,
    }
    length = tf.shape(packed["input_ids"])[1]
    inputs = {k: tf.reshape(v, [shape[0], shape[1], length]) for k, v in packed.items()}
    return {**inputs, "present": tf.reshape(present, shape)}


def choice_outputs(logits: tf.Tensor, present: tf.Tensor) -> dict:
    """`logits`, `probabilities` (0 for absent options) and `choice_id` (-1: no option)."""
    probabilities = tf.nn.softmax(logits, axis=-1) * tf.cast(present, tf.float32)
    best = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {
        "logits": logits,
        "probabilities": probabilities,
        "choice_id": tf.where(tf.reduce_any(present, axis=-1), best, -1),
    }


class MultipleChoiceServing(tf.Module):
    """Wraps a fine-tuned multiple-choice model and its tokenizer with serving functions.

    Args:
        model: an `ElectraMultipleChoice` (float32).
        tokenizer: the `WordPieceTokenizer` it was fine-tuned with.
        max_seq_length: the fine-tuning length of an option's sequence.
    """

    def __init__(self, model, tokenizer, max_seq_length: int):
        super().__init__(name="multiple_choice_serving")
        self.model = model
        self.tokenizer = tokenizer
        self._max_seq_length = int(max_seq_length)

    def _logits(self, inputs: dict) -> tf.Tensor:
        model_inputs = {name: inputs[name] for name in INPUT_NAMES}
        return tf.cast(self.model(model_inputs, training=False), tf.float32)

    def _from_text(self, question, context, options) -> dict:
        question, context = text_ops.ensure_text_pairs(question, context, ("question", "context"))
        options = tf.ensure_shape(options, [None, None], name="check_options_shape")
        same = tf.debugging.assert_equal(
            tf.shape(options)[0],
            tf.size(question),
            message="options must have a row per question [B, O]",
        )
        with tf.control_dependencies([same]):
            shape = tf.shape(options)
        # An empty request (B = 0 or O = 0) runs one empty option and answers no cell.
        grown = tf.pad(
            options,
            [[0, tf.maximum(1 - shape[0], 0)], [0, tf.maximum(1 - shape[1], 0)]],
            constant_values="",
        )
        inputs = pack_choices(
            self.tokenizer,
            text_ops.at_least_one_row(question),
            text_ops.at_least_one_row(context),
            grown,
            self._max_seq_length,
        )
        outputs = choice_outputs(self._logits(inputs), inputs["present"])
        chosen = tf.gather(grown, tf.maximum(outputs["choice_id"], 0), batch_dims=1)
        outputs["choice"] = tf.where(outputs["choice_id"] >= 0, chosen, "")
        outputs = text_ops.first_rows(outputs, shape[0])
        for name in ("logits", "probabilities"):
            outputs[name] = outputs[name][:, : shape[1]]
        return outputs

    def _from_ids(self, input_ids, input_mask, segment_ids) -> dict:
        input_ids = tf.ensure_shape(input_ids, [None, None, None], name="check_input_ids_rank")
        shape = tf.shape(input_ids)
        checks = [
            tf.debugging.assert_equal(
                tf.shape(tensor), shape, message=f"{name} must have the shape of input_ids"
            )
            for name, tensor in (("input_mask", input_mask), ("segment_ids", segment_ids))
        ]
        with tf.control_dependencies(checks):
            flat = [
                tf.reshape(tensor, [-1, shape[2]])
                for tensor in (input_ids, input_mask, segment_ids)
            ]
        inputs = text_ops.checked_token_ids(self.model.encoder, *flat, pad_empty=True)
        length = tf.shape(inputs["input_ids"])[1]
        inputs = {k: tf.reshape(v, [shape[0], shape[1], length]) for k, v in inputs.items()}
        return choice_outputs(self._logits(inputs), inputs["input_mask"][:, :, 0] > 0)

    def signatures(self) -> dict:
        """`{signature name: concrete function}` for `tf.saved_model.save`."""

        @tf.function(
            input_signature=[
                tf.TensorSpec([None], tf.string, name="question"),
                tf.TensorSpec([None], tf.string, name="context"),
                tf.TensorSpec([None, None], tf.string, name="options"),
            ]
        )
        def serve_text(question, context, options):
            return self._from_text(question, context, options)

        @tf.function(input_signature=CHOICE_ID_SPECS)
        def serve_ids(input_ids, input_mask, segment_ids):
            return self._from_ids(input_ids, input_mask, segment_ids)

        self.serve_text, self.serve_ids = serve_text, serve_ids
        return {
            TEXT_SIGNATURE: serve_text.get_concrete_function(),
            IDS_SIGNATURE: serve_ids.get_concrete_function(),
        }
