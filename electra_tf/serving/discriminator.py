"""Serving signatures of a pre-trained discriminator: per-token replaced-token probabilities.

Useful for checking a pre-training run (original text should score low
everywhere) and for spotting edited words in a text.

`serving_default` (raw text):
    inputs:  `text` string [B]
    outputs: `tokens` string [B, L] (word pieces, "" at padding),
             `input_ids` int32 [B, L], `input_mask` int32 [B, L],
             `replaced_probability` float32 [B, L] (0 at padding),
             `logits` float32 [B, L]

`token_ids`:
    inputs:  `input_ids`, `input_mask`, `segment_ids` int32 [B, L]
    outputs: `replaced_probability`, `logits` float32 [B, L].

A discriminator pre-trained with Electric (`--objective=electric`) gives
energies as `logits` and both signatures also return
`pseudo_log_likelihood` float32 [B], the re-ranking score -sum_t E(x_t) over
the tokens other than [CLS], [SEP] and padding (see
`electra_tf.pretraining.objective.electric_score`).
"""

from __future__ import annotations

import os
from typing import Optional

import keras
import numpy as np
import tensorflow as tf

from electra_tf import text_packing as text_ops
from electra_tf.artifacts.serving_dir import VersionDir
from electra_tf.errors import RunError
from electra_tf.finetuning.classification.check import sequence_requests
from electra_tf.finetuning.kind.signatures import IDS_SIGNATURE, TEXT_SIGNATURE, token_ids_function

# Registers the discriminator's classes, so that load_model finds them.
from electra_tf.modeling import electra as _electra  # noqa: F401
from electra_tf.pretraining.objective import electric_score


class DiscriminatorServing(tf.Module):
    """Wraps an `ElectraDiscriminator` and its tokenizer with serving functions.

    Args:
        model: an `ElectraDiscriminator` (float32).
        tokenizer: the pre-training `WordPieceTokenizer`.
        max_seq_length: truncation length of raw text.
        electric: the model was pre-trained with Electric: add the
            pseudo-log-likelihood output.
    """

    def __init__(self, model, tokenizer, max_seq_length: int, electric: bool = False):
        super().__init__(name="discriminator_serving")
        self.model = model
        self.tokenizer = tokenizer
        self._max_seq_length = int(max_seq_length)
        self._electric = bool(electric)

    def _scores(self, inputs: dict) -> dict:
        logits = tf.cast(self.model(inputs, training=False)["logits"], tf.float32)
        mask = tf.cast(inputs["input_mask"], tf.float32)
        scores = {"logits": logits, "replaced_probability": tf.sigmoid(logits) * mask}
        if self._electric:
            scores["pseudo_log_likelihood"] = electric_score(
                logits,
                inputs["input_ids"],
                inputs["input_mask"],
                self.tokenizer.cls_id,
                self.tokenizer.sep_id,
            )
        return scores

    def _from_ids(self, input_ids, input_mask, segment_ids) -> dict:
        inputs = text_ops.checked_token_ids(
            self.model.encoder, input_ids, input_mask, segment_ids, pad_empty=False
        )
        return self._scores(inputs)

    def signatures(self) -> dict:
        """`{signature name: concrete function}` for `tf.saved_model.save`."""
        vocab = tf.constant(self.tokenizer.vocab, tf.string)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve_text(text):
            text = text_ops.ensure_texts(text, "text")
            inputs = text_ops.pack(
                self.tokenizer.tokenize(text),
                None,
                self._max_seq_length,
                self.tokenizer.cls_id,
                self.tokenizer.sep_id,
                self.tokenizer.pad_id,
            )
            outputs = self._scores(inputs)
            tokens = tf.where(inputs["input_mask"] > 0, tf.gather(vocab, inputs["input_ids"]), "")
            return {
                **outputs,
                "tokens": tokens,
                "input_ids": inputs["input_ids"],
                "input_mask": inputs["input_mask"],
            }

        self.serve_text = serve_text
        self.serve_ids = token_ids_function(self._from_ids)
        return {
            TEXT_SIGNATURE: serve_text.get_concrete_function(),
            IDS_SIGNATURE: self.serve_ids.get_concrete_function(),
        }


class DiscriminatorExport:
    """What exports and checks a pre-trained discriminator: the served kind `discriminator`.

    The export check (`electra_tf.serving.check`) treats it as it treats a
    fine-tuning task kind (`electra_tf.finetuning.kind.contract.TaskKind`): the
    same class methods, `info` holding the text path and the objective.
    """

    KIND = "discriminator"

    @classmethod
    def serving_module(cls, model, tokenizer, info: dict, forward: Optional[str] = None):
        return DiscriminatorServing(
            model, tokenizer, info["max_seq_length"], electric=info.get("objective") == "electric"
        )

    @classmethod
    def serving_config(cls, module, info: dict) -> dict:
        return {"is_pair": False, "label_names": None, "objective": info.get("objective")}

    @classmethod
    def label_names(cls, info: dict) -> None:
        return None

    @classmethod
    def reference_model(cls, version: VersionDir):
        if not os.path.isfile(version.keras_file):
            raise RunError(f"{version.path}: no model.keras in assets.extra/ to compare with.")
        return keras.saving.load_model(version.keras_file)

    @classmethod
    def expected_outputs(cls, reference, inputs: dict, with_tokens: bool) -> dict:
        """What the signatures return for `inputs`: per-token logits and probabilities."""
        outputs = reference.model({k: np.asarray(v) for k, v in inputs.items()}, training=False)
        logits = np.asarray(outputs["logits"], np.float32)
        mask = inputs["input_mask"]
        tokenizer = reference.tokenizer
        result = {"logits": logits, "replaced_probability": (1 / (1 + np.exp(-logits))) * mask}
        if reference.config.get("objective") == "electric":
            ids = inputs["input_ids"]
            content = mask * (ids != tokenizer.cls_id) * (ids != tokenizer.sep_id)
            result["pseudo_log_likelihood"] = -(logits * content).sum(axis=-1)
        if with_tokens:
            vocab = np.array([t.encode() for t in tokenizer.vocab], dtype=object)
            result["tokens"] = np.where(mask > 0, vocab[inputs["input_ids"]], b"")
            result["input_ids"] = inputs["input_ids"]
            result["input_mask"] = mask
        return result

    @classmethod
    def check_requests(cls, reference) -> tuple[list[dict], list[Optional[dict]], list[str]]:
        # Its outputs have a length axis even for no text: no empty batch.
        return sequence_requests(reference, cls.expected_outputs, empty_batch=False)

    @classmethod
    def benchmark_inputs(cls, benchmark: dict) -> dict:
        return benchmark

    @classmethod
    def scored_file(cls, reference, eval_file):
        """A pre-trained discriminator has no labels to score a file by."""
        raise RunError(
            f"--eval_file: {cls.KIND} exports have no labels to score; it scores classifiers."
        )
