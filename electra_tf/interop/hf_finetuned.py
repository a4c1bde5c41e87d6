"""A fine-tuned model as Hugging Face's `ElectraFor<Task>`, and back, for each kind that has one.

A task kind that names a `transformers` class (`TaskKind.HF_ARCHITECTURE`,
e.g. the tagger's `ElectraForTokenClassification`) gives its head's weights
under `transformers`' names (`hf_head_state`), its entries of config.json
(`hf_config`: labels, task name) and builds a model from them (`from_hf`).
This module does the rest for every such kind: `electra.*` (the
discriminator's embeddings and encoder, the keys of `ElectraForPreTraining`),
the architecture in config.json, the vocabulary and the tokenizer files.
Dropout before a head is inactive at inference, so both give the same logits.

    export_hf_finetuned(model_dir, hf_dir)  -> ElectraFor<Task>.from_pretrained(hf_dir)
    import_hf_finetuned(hf_dir, model_dir)  -> a fine-tuned model directory (model.json,
                                               model.weights.h5, vocab.txt), which
                                               `python -m electra_tf.commands.export` serves
"""

from __future__ import annotations

import os
from typing import Optional

import numpy as np

from electra_tf.artifacts.finetuning_dir import SavedModelDir
from electra_tf.config import IMPORTED_NORMALIZATION, ModelConfig
from electra_tf.errors import RunError
from electra_tf.finetuning.kind.contract import TaskKind
from electra_tf.finetuning.kinds import TASK_KINDS, kind_of
from electra_tf.finetuning.saving import load_finetuned, save_finetuned
from electra_tf.interop import huggingface
from electra_tf.interop.weight_names import (
    WeightMismatch,
    assign_weights,
    embedding_entries,
    encoder_entries,
    hf_key,
    read_weights,
)
from electra_tf.modeling.encoder import architecture
from electra_tf.tokenization import TextPath


class HFConversionError(ValueError):
    """A fine-tuned model cannot be converted; the message names the path and the reason."""


def kind_of_hf_config(config: dict) -> Optional[type[TaskKind]]:
    """The task kind whose `transformers` class a `config.json` names (None: none of ours)."""
    architectures = config.get("architectures") or []
    for kind in TASK_KINDS:
        if kind.HF_ARCHITECTURE is not None and kind.HF_ARCHITECTURE in architectures:
            return kind
    return None


def _encoder_entries(encoder) -> list:
    return embedding_entries(encoder.embeddings) + encoder_entries(encoder, "electra")


def model_config_of(encoder) -> ModelConfig:
    """The `ModelConfig` of an `ElectraEncoder` (what Hugging Face's config.json records)."""
    if encoder.attention_direction != "bidirectional":
        raise HFConversionError(
            "the encoder attends in one direction (Electric); Hugging Face's "
            "ELECTRA is bidirectional."
        )
    return ModelConfig(**architecture(encoder))


def finetuned_state(model, info: dict) -> dict[str, np.ndarray]:
    """The Hugging Face state dict of a fine-tuned model (float32 NumPy).

    Raises:
        RunError: the model's head has no `transformers` equivalent.
    """
    state = {}
    for name, value in read_weights(_encoder_entries(model.encoder)).items():
        key, transpose = hf_key(name)
        state[key] = value.T if transpose else value
    state.update(kind_of(model).hf_head_state(model, info))
    return state


def export_hf_finetuned(model_dir: str, hf_dir: str) -> type[TaskKind]:
    """Writes a saved fine-tuned model as a Hugging Face `ElectraFor<Task>` directory.

    Args:
        model_dir: a directory holding a fine-tuned model (a trial
            directory, or an export's assets.extra/) with its vocab.txt.
        hf_dir: the directory to write (config.json, model.safetensors,
            vocab.txt, tokenizer files).

    Returns:
        The model's task kind (its `HF_ARCHITECTURE` is the class written).

    Raises:
        HFConversionError: the model's kind has no `transformers` class, its
            head is not that class's (e.g. the paper's classifier head), or
            `model_dir` has no vocabulary.
    """
    model, info = load_finetuned(model_dir)
    kind = kind_of(model)
    if kind.HF_ARCHITECTURE is None:
        convertible = [k for k in TASK_KINDS if k.HF_ARCHITECTURE]
        raise HFConversionError(
            f"{model_dir} holds a {kind.KIND} model; only "
            + ", ".join(f"{k.KIND} models (as {k.HF_ARCHITECTURE})" for k in convertible)
            + " are written for transformers."
        )
    try:
        state = finetuned_state(model, info)
    except RunError as error:
        raise HFConversionError(f"{model_dir}: {error}") from None
    vocab_file = SavedModelDir(model_dir).vocab_file
    if not os.path.isfile(vocab_file):
        raise HFConversionError(f"{model_dir}: no vocab.txt beside the model.")
    tokenizer = TextPath.from_dict(info).tokenizer(vocab_file)
    config = huggingface.hf_config(model_config_of(model.encoder), False, tokenizer.pad_id)
    config.update(architectures=[kind.HF_ARCHITECTURE], **kind.hf_config(model, info))
    huggingface.write_model_dir(
        hf_dir,
        config,
        state,
        vocab_file,
        tokenizer.do_lower_case,
        tokenizer.strip_accents,
    )
    return kind


def import_hf_finetuned(
    hf_dir: str,
    model_dir: str,
    max_seq_length: Optional[int] = None,
    vocab_file: Optional[str] = None,
    do_lower_case: Optional[bool] = None,
    **options,
) -> str:
    """Reads an `ElectraFor<Task>` directory into a fine-tuned model directory.

    Args:
        hf_dir: the Hugging Face directory (config.json naming the class,
            the weights).
        model_dir: where to write model.json, model.weights.h5, vocab.txt.
        max_seq_length: raw-text truncation of the served model (default:
            the kind's, at most the position embeddings).
        vocab_file: default `<hf_dir>/vocab.txt`.
        do_lower_case: default what tokenizer_config.json records, else True.
        **options: the kind's own import settings (a tagger's `tag_format`, a
            classifier's `text_pair`, a QA model's `squad_version`).

    Returns:
        The path of the written description file (model.json).

    Raises:
        HFConversionError: not a class of ours, or weights that do not fit.
    """
    from electra_tf.modeling.electra import build_generator_and_discriminator

    try:
        config, state = huggingface.read_hf_dir(hf_dir)
        fields = huggingface.model_config_from_hf(config)
    except (huggingface.HFFormatError, KeyError) as error:
        message = str(error)  # a weight file's error names the file already
        raise HFConversionError(
            message if message.startswith(hf_dir) else f"{hf_dir}: {message}"
        ) from None
    kind = kind_of_hf_config(config)
    if kind is None:
        raise HFConversionError(
            f"{hf_dir}: config.json names {config.get('architectures')}; a fine-tuned model "
            f"is one of {', '.join(k.HF_ARCHITECTURE for k in TASK_KINDS if k.HF_ARCHITECTURE)}."
        )
    vocab = vocab_file or os.path.join(hf_dir, huggingface.VOCAB_FILE)
    if not os.path.isfile(vocab):
        raise HFConversionError(f"{hf_dir}: no vocab.txt; pass the vocabulary.")
    lower, strip = huggingface.read_casing(hf_dir)
    lower = do_lower_case if do_lower_case is not None else (True if lower is None else lower)
    strip = lower if strip is None or do_lower_case is not None else strip

    model_config = ModelConfig(**fields)
    _, discriminator = build_generator_and_discriminator(model_config, with_generator=False)
    encoder = discriminator.encoder
    try:
        model, info = kind.from_hf(
            encoder, config, state, hf_dir, {"max_seq_length": max_seq_length, **options}
        )
    except RunError as error:
        raise HFConversionError(str(error)) from None
    entries = _encoder_entries(model.encoder)
    names = [name for entry in entries for name in entry.names]
    arrays, unused = huggingface.canonical_from_hf(state, False, names)
    head = kind.hf_head_state(model, info)
    unused = [k for k in unused if k not in head]
    if unused:
        raise HFConversionError(
            f"{hf_dir}: weights the {kind.KIND} has no place for: {', '.join(unused[:5])}."
        )
    try:
        assign_weights(entries, arrays, source=hf_dir)
    except WeightMismatch as error:
        raise HFConversionError(str(error)) from None
    text = TextPath(lower, strip, IMPORTED_NORMALIZATION, info.pop("max_seq_length"))
    info = {"kind": kind.KIND, **info, **text.to_dict(), "imported_from": os.path.abspath(hf_dir)}
    return save_finetuned(model, model_dir, info, vocab)
