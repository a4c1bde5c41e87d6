"""Serving signatures of a fine-tuned `ElectraClassifier`.

`serving_default` (raw text; B may be 0, answered with empty outputs):
    inputs:  `text` string [B] (and `text_pair` string [B] for pair tasks)
    outputs (classification):
             `probabilities` float32 [B, C], `logits` float32 [B, C],
             `label_id` int32 [B], `label` string [B]
    outputs (regression):
             `score` float32 [B], in the scale of the training labels

`token_ids` (for clients that tokenize themselves):
    inputs:  `input_ids`, `input_mask`, `segment_ids` int32 [B, L]
    outputs: the same as `serving_default`.

`serving_bfloat16` (exports with the lean forward pass): `serving_default`
with the encoder's dense layers multiplied in bfloat16
(`lean_forward.BfloatWeights`), for CPUs with AVX512-BF16 or AMX.
"""

from __future__ import annotations

from typing import Optional, Sequence

import tensorflow as tf

from electra_tf import text_packing as text_ops
from electra_tf.finetuning.kind.signatures import (
    BFLOAT16_SIGNATURE,
    IDS_SIGNATURE,
    TEXT_SIGNATURE,
    token_ids_function,
)
from electra_tf.modeling import lean_forward as forwards


class ClassifierServing(tf.Module):
    """Wraps a fine-tuned classifier and its tokenizer with serving functions.

    Args:
        model: an `ElectraClassifier` (float32).
        tokenizer: the `WordPieceTokenizer` it was fine-tuned with.
        max_seq_length: truncation length of raw text (the fine-tuning one).
        is_pair: whether examples are text pairs.
        label_names: class names, index = class id; None for regression.
        label_scale: regression outputs are multiplied by it.
        forward: "lean" (`electra_tf.modeling.lean_forward`: the same maths in fewer
            ops, faster at small batches), "portable" (its variant for other
            runtimes, the ONNX and LiteRT exports') or "keras" (the model's own call).

    Raises:
        ValueError: `forward` is unknown, or "lean" or "portable" for a model they
            do not cover.
    """

    def __init__(
        self,
        model,
        tokenizer,
        max_seq_length: int,
        is_pair: bool,
        label_names: Optional[Sequence[str]],
        label_scale: float = 1.0,
        forward: str = forwards.DEFAULT_FORWARD,
    ):
        super().__init__(name="classifier_serving")
        if forward not in forwards.FORWARDS:
            raise ValueError(f"forward={forward!r}: choose one of {', '.join(forwards.FORWARDS)}.")
        if forward != "keras" and not forwards.supports(model):
            raise ValueError(
                f"forward={forward!r} covers a float32 ElectraClassifier on a plain "
                "bidirectional encoder; export this model with forward='keras'."
            )
        self._forward = forward
        self.model = model
        # bfloat16 copies of the encoder's dense weights, saved with the export.
        self.bfloat16_weights = forwards.BfloatWeights(model.encoder) if forward == "lean" else None
        self.tokenizer = tokenizer
        self._max_seq_length = int(max_seq_length)
        self._is_pair = bool(is_pair)
        self._regression = label_names is None
        self._label_names = self._no_dependency(list(label_names or []))
        self._label_scale = float(label_scale)

    @property
    def forward(self) -> str:
        """How the signatures compute the model: "lean", "portable" or "keras"."""
        return self._forward

    @property
    def signature_names(self) -> list:
        """The names of the signatures `signatures()` returns."""
        names = [TEXT_SIGNATURE, IDS_SIGNATURE]
        return names + ([BFLOAT16_SIGNATURE] if self.bfloat16_weights is not None else [])

    def _outputs(self, inputs: dict, bfloat=None) -> dict:
        if self._forward != "keras":
            portable = self._forward == "portable"
            raw = forwards.classifier_outputs(self.model, inputs, bfloat, portable)
        else:
            raw = tf.cast(self.model(inputs, training=False), tf.float32)
        if self._regression:
            return {"score": tf.reshape(raw, [-1]) * self._label_scale}
        label_id = tf.argmax(raw, axis=-1, output_type=tf.int32)
        return {
            "logits": raw,
            "probabilities": tf.nn.softmax(raw, axis=-1),
            "label_id": label_id,
            "label": tf.gather(tf.constant(self._label_names, tf.string), label_id),
        }

    def _from_text(self, text, text_pair=None, bfloat=None) -> dict:
        pieces_b = None
        if text_pair is None:
            text = text_ops.ensure_texts(text, "text")
        else:
            text, text_pair = text_ops.ensure_text_pairs(text, text_pair, ("text", "text_pair"))
            pieces_b = self.tokenizer.tokenize_flat(text_ops.at_least_one_row(text_pair))
        count = tf.size(text)
        pieces_a = self.tokenizer.tokenize_flat(text_ops.at_least_one_row(text))
        inputs = text_ops.pack_flat(
            pieces_a,
            pieces_b,
            self._max_seq_length,
            self.tokenizer.cls_id,
            self.tokenizer.sep_id,
            self.tokenizer.pad_id,
        )
        return text_ops.first_rows(self._outputs(inputs, bfloat), count)

    def _from_ids(self, input_ids, input_mask, segment_ids) -> dict:
        inputs = text_ops.checked_token_ids(
            self.model.encoder, input_ids, input_mask, segment_ids, pad_empty=True
        )
        return self._outputs(inputs)

    def _text_function(self, bfloat=None):
        """The raw-text signature's function (`bfloat`: see `lean_forward.classifier_outputs`)."""
        if self._is_pair:

            @tf.function(
                input_signature=[
                    tf.TensorSpec([None], tf.string, name="text"),
                    tf.TensorSpec([None], tf.string, name="text_pair"),
                ]
            )
            def serve_text(text, text_pair):
                return self._from_text(text, text_pair, bfloat)
        else:

            @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
            def serve_text(text):
                return self._from_text(text, bfloat=bfloat)

        return serve_text

    def signatures(self) -> dict:
        """`{signature name: concrete function}` for `tf.saved_model.save`."""
        self.serve_text = self._text_function()
        self.serve_ids = token_ids_function(self._from_ids)
        signatures = {
            TEXT_SIGNATURE: self.serve_text.get_concrete_function(),
            IDS_SIGNATURE: self.serve_ids.get_concrete_function(),
        }
        if self.bfloat16_weights is not None:
            self.serve_text_bfloat16 = self._text_function(self.bfloat16_weights)
            signatures[BFLOAT16_SIGNATURE] = self.serve_text_bfloat16.get_concrete_function()
        return signatures
