"""A fine-tuned tagger as Hugging Face's `ElectraForTokenClassification`, and back.

`ElectraForTokenClassification` is `electra.*` (the discriminator's
embeddings and encoder, the same keys as `ElectraForPreTraining`'s) plus
`classifier.weight` [T, H] and `classifier.bias` [T]: one linear layer on
every position's final hidden state, our tagger's `task_head` (its kernel
transposed). `config.json` carries the tags as `id2label` / `label2id`.
Its dropout before the classifier is inactive at inference, so both give
the same logits.

    export_hf_tagger(trial_dir, hf_dir)   -> ElectraForTokenClassification.from_pretrained(hf_dir)
    import_hf_tagger(hf_dir, model_dir)   -> a fine-tuned model directory (model.json,
                                             model.weights.h5, vocab.txt), which
                                             `python -m electra_tf.commands.export` serves
"""

from __future__ import annotations

import os
from typing import Optional

import numpy as np

from electra_tf.config import ModelConfig
from electra_tf.finetuning.saving import load_finetuned, save_finetuned
from electra_tf.finetuning.tagging.data import TAG_FORMATS, TaggingDefinition, detect_tag_format
from electra_tf.finetuning.tagging.task import TAGGER
from electra_tf.interop import huggingface
from electra_tf.interop.weight_names import (
    WeightMismatch,
    assign_weights,
    embedding_entries,
    encoder_entries,
    hf_key,
    read_weights,
)

ARCHITECTURE = "ElectraForTokenClassification"
HEAD_WEIGHT, HEAD_BIAS = "classifier.weight", "classifier.bias"
DEFAULT_MAX_SEQ_LENGTH = 128


class HFTaggerError(ValueError):
    """A tagger cannot be converted; the message names the path and the reason."""


def is_token_classifier(config: dict) -> bool:
    """Whether a Hugging Face `config.json` describes an `ElectraForTokenClassification`."""
    return ARCHITECTURE in (config.get("architectures") or [])


def _encoder_entries(encoder) -> list:
    return embedding_entries(encoder.embeddings) + encoder_entries(encoder, "electra")


def model_config_of(encoder) -> ModelConfig:
    """The `ModelConfig` of an `ElectraEncoder` (what Hugging Face's config.json records)."""
    config = encoder.get_config()
    if config.get("attention_direction", "bidirectional") != "bidirectional":
        raise HFTaggerError(
            "the encoder attends in one direction (Electric); Hugging Face's "
            "ELECTRA is bidirectional."
        )
    return ModelConfig(
        **{
            k: config[k]
            for k in (
                "vocab_size",
                "hidden_size",
                "num_layers",
                "num_heads",
                "intermediate_size",
                "embedding_size",
                "max_position_embeddings",
                "type_vocab_size",
                "dropout_rate",
                "attention_dropout_rate",
                "initializer_range",
                "layer_norm_epsilon",
            )
        }
    )


def tagger_state(model) -> dict[str, np.ndarray]:
    """The Hugging Face state dict of an `ElectraTagger` (float32 NumPy)."""
    state = {}
    for name, value in read_weights(_encoder_entries(model.encoder)).items():
        key, transpose = hf_key(name)
        state[key] = value.T if transpose else value
    state[HEAD_WEIGHT] = np.asarray(model.task_head.kernel.numpy(), np.float32).T
    state[HEAD_BIAS] = np.asarray(model.task_head.bias.numpy(), np.float32)
    return state


def export_hf_tagger(model_dir: str, hf_dir: str) -> str:
    """Writes a saved tagger as a Hugging Face `ElectraForTokenClassification` directory.

    Args:
        model_dir: a directory holding a fine-tuned tagger (a trial
            directory, or an export's assets.extra/) with its vocab.txt.
        hf_dir: the directory to write (config.json, model.safetensors,
            vocab.txt, tokenizer files).

    Returns:
        `hf_dir`.

    Raises:
        HFTaggerError: `model_dir` holds no tagger or no vocabulary.
    """
    from electra_tf.artifacts.finetuning_dir import SavedModelDir

    model, info = load_finetuned(model_dir)
    if info.get("kind") != TAGGER:
        raise HFTaggerError(
            f"{model_dir} holds a {info.get('kind')} model; only taggers "
            f"(--task_type=tagging) are written as {ARCHITECTURE}."
        )
    vocab_file = SavedModelDir(model_dir).vocab_file
    if not os.path.isfile(vocab_file):
        raise HFTaggerError(f"{model_dir}: no vocab.txt beside the model.")
    from electra_tf.tokenization import WordPieceTokenizer

    definition = TaggingDefinition.from_dict(info["task"])
    tokenizer = WordPieceTokenizer(vocab_file, info["do_lower_case"], info.get("strip_accents"))
    config = huggingface.hf_config(model_config_of(model.encoder), False, tokenizer.pad_id)
    config.update(
        architectures=[ARCHITECTURE],
        finetuning_task=definition.name,
        id2label={str(i): tag for i, tag in enumerate(definition.tag_names)},
        label2id={tag: i for i, tag in enumerate(definition.tag_names)},
    )
    huggingface.write_model_dir(
        hf_dir,
        config,
        tagger_state(model),
        vocab_file,
        tokenizer.do_lower_case,
        tokenizer.strip_accents,
    )
    return hf_dir


def import_hf_tagger(
    hf_dir: str,
    model_dir: str,
    max_seq_length: Optional[int] = None,
    tag_format: str = "auto",
    vocab_file: Optional[str] = None,
    do_lower_case: Optional[bool] = None,
) -> str:
    """Reads an `ElectraForTokenClassification` directory into a fine-tuned tagger directory.

    Args:
        hf_dir: the Hugging Face directory (config.json with id2label,
            model.safetensors).
        model_dir: where to write model.json, model.weights.h5, vocab.txt.
        max_seq_length: raw-text truncation of the served model (default
            128, at most the position embeddings).
        tag_format: how the tags are scored (`auto`: from their names).
        vocab_file: default `<hf_dir>/vocab.txt`.
        do_lower_case: default what tokenizer_config.json records, else True.

    Returns:
        The path of the written description file (model.json).

    Raises:
        HFTaggerError: not a token classifier, or weights that do not fit.
    """
    from electra_tf.finetuning.tagging.model import ElectraTagger
    from electra_tf.modeling.electra import build_generator_and_discriminator

    try:
        config, state = huggingface.read_hf_dir(hf_dir)
        fields = huggingface.model_config_from_hf(config)
    except (huggingface.HFFormatError, KeyError) as error:
        message = str(error)  # a weight file's error names the file already
        raise HFTaggerError(
            message if message.startswith(hf_dir) else f"{hf_dir}: {message}"
        ) from None
    if HEAD_WEIGHT not in state:
        raise HFTaggerError(f"{hf_dir}: no {HEAD_WEIGHT}; not an {ARCHITECTURE}.")
    labels = config.get("id2label") or {}
    num_tags = int(state[HEAD_WEIGHT].shape[0])
    tags = [labels.get(str(i), f"LABEL_{i}") for i in range(num_tags)]
    if tag_format == "auto":
        try:
            tag_format = detect_tag_format(tags)
        except ValueError as error:
            raise HFTaggerError(f"{hf_dir}: id2label: {error}.") from None
    elif tag_format not in TAG_FORMATS:
        raise HFTaggerError(f"tag_format={tag_format!r}: choose auto, {', '.join(TAG_FORMATS)}.")
    vocab = vocab_file or os.path.join(hf_dir, huggingface.VOCAB_FILE)
    if not os.path.isfile(vocab):
        raise HFTaggerError(f"{hf_dir}: no vocab.txt; pass the vocabulary.")
    lower, strip = huggingface.read_casing(hf_dir)
    lower = do_lower_case if do_lower_case is not None else (True if lower is None else lower)
    strip = lower if strip is None or do_lower_case is not None else strip
    model_config = ModelConfig(**fields)
    length = min(max_seq_length or DEFAULT_MAX_SEQ_LENGTH, model_config.max_position_embeddings)

    _, discriminator = build_generator_and_discriminator(model_config, with_generator=False)
    tagger = ElectraTagger(
        discriminator.encoder,
        num_tags,
        initializer_range=model_config.initializer_range,
        name="tagger",
    )
    entries = _encoder_entries(tagger.encoder)
    names = [name for entry in entries for name in entry.names]
    arrays, unused = huggingface.canonical_from_hf(state, False, names)
    unused = [k for k in unused if k not in (HEAD_WEIGHT, HEAD_BIAS)]
    if unused:
        raise HFTaggerError(
            f"{hf_dir}: weights the tagger has no place for: {', '.join(unused[:5])}."
        )
    try:
        assign_weights(entries, arrays, source=hf_dir)
    except WeightMismatch as error:
        raise HFTaggerError(str(error)) from None
    kernel, bias = state[HEAD_WEIGHT].T, state.get(HEAD_BIAS, np.zeros(num_tags, np.float32))
    if kernel.shape != tuple(tagger.task_head.kernel.shape):
        raise HFTaggerError(
            f"{hf_dir}: {HEAD_WEIGHT} has shape {state[HEAD_WEIGHT].shape}, "
            f"expected ({num_tags}, {model_config.hidden_size})."
        )
    tagger.task_head.kernel.assign(kernel)
    tagger.task_head.bias.assign(bias)
    entity = tag_format != "plain"
    definition = TaggingDefinition(
        name=config.get("finetuning_task") or os.path.basename(os.path.normpath(hf_dir)),
        tag_names=tags,
        tag_format=tag_format,
        metrics=("precision", "recall", "f1", "accuracy") if entity else ("accuracy",),
        primary_metric="f1" if entity else "accuracy",
    )
    info = {
        "kind": TAGGER,
        "task": definition.to_dict(),
        "max_seq_length": length,
        "do_lower_case": lower,
        "strip_accents": strip,
        "imported_from": os.path.abspath(hf_dir),
    }
    return save_finetuned(tagger, model_dir, info, vocab)
