"""Writing a TF Serving version directory from a fine-tuning or pre-training run.

The layout of a version directory is in `electra_tf.artifacts.serving_dir`;
`assets.extra/` holds the Keras model, so that `electra_tf.serving.check` can
compare the SavedModel with it.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from typing import Callable, Optional

import tensorflow as tf

from electra_tf.artifacts.export_dir import float32_copy
from electra_tf.artifacts.files import write_json
from electra_tf.artifacts.finetuning_dir import (
    FinetuningDir,
    SavedModelDir,
    best_saved_trial,
    holds_saved_model,
)
from electra_tf.artifacts.pretrained import locate_pretrained
from electra_tf.artifacts.run_dir import VOCAB_FILE
from electra_tf.artifacts.serving_dir import (
    LABELS_FILE,
    SERVING_CONFIG,
    VersionDir,
    publish_version,
)
from electra_tf.finetuning.classification.data import REGRESSION, Task
from electra_tf.finetuning.classification.serving import ClassifierServing
from electra_tf.finetuning.question_answering.decoding import (
    DEFAULT_NULL_THRESHOLD,
    MAX_ANSWER_LENGTH,
)
from electra_tf.finetuning.question_answering.serving import QuestionAnsweringServing
from electra_tf.finetuning.saving import load_finetuned, save_finetuned
from electra_tf.finetuning.tagging.data import TaggingDefinition
from electra_tf.finetuning.tagging.serving import TaggerServing
from electra_tf.finetuning.tagging.task import TAGGER
from electra_tf.finiteness import NonFiniteError, check_finite_weights
from electra_tf.interop.checkpoints import CheckpointError, load_run_models
from electra_tf.modeling import lean_forward as forwards
from electra_tf.serving.discriminator import DiscriminatorServing
from electra_tf.tokenization import WordPieceTokenizer

FORMAT_VERSION = 1
CLASSIFIER = "classifier"
DISCRIMINATOR = "discriminator"
QUESTION_ANSWERING = "question_answering"
# How raw text is cut into words (recorded in a tagger's serving_config.json).
WORD_SPLITTING = "whitespace; each CJK ideograph a word of its own"


class ExportError(ValueError):
    """A checkpoint cannot be exported; the message names the path or flag."""


def _finite_copy(model, what: str):
    """A float32 copy of `model`, refused (ExportError) if its weights are not all finite."""
    copy = float32_copy(model)
    try:
        check_finite_weights(copy.weights, what)
    except NonFiniteError as error:
        raise ExportError(f"{error} Nothing was exported.") from None
    return copy


def _encoder_config(encoder) -> dict:
    names = (
        "vocab_size",
        "hidden_size",
        "num_layers",
        "num_heads",
        "intermediate_size",
        "embedding_size",
        "max_position_embeddings",
        "type_vocab_size",
    )
    return {name: getattr(encoder, name) for name in names if hasattr(encoder, name)}


def _write(
    module,
    staging: str,
    vocab_file: str,
    serving_config: dict,
    label_names: Optional[list],
    save_extra: Callable[[VersionDir], None],
) -> None:
    """Saves `module`, its `signatures()` and assets into the empty directory `staging`.

    `module` holds a `float32_copy` of the model, which runs the reference
    kernels (`electra_tf.modeling.kernels`) whichever set the model was
    trained with, so the SavedModel is plain TensorFlow on any hardware.
    `save_extra(version)` writes the Keras model into `version.extra`.
    """
    # The saver copies tracked Asset files into assets/ under their own names.
    sources = tempfile.mkdtemp(prefix=".assets-", dir=os.path.dirname(staging))
    try:
        shutil.copyfile(vocab_file, os.path.join(sources, VOCAB_FILE))
        write_json(os.path.join(sources, SERVING_CONFIG), serving_config)
        files = [VOCAB_FILE, SERVING_CONFIG]
        if label_names is not None:
            with open(os.path.join(sources, LABELS_FILE), "w", encoding="utf-8") as f:
                f.write("".join(f"{name}\n" for name in label_names))
            files.append(LABELS_FILE)
        module.assets = {
            name.replace(".", "_"): tf.saved_model.Asset(os.path.join(sources, name))
            for name in files
        }
        tf.saved_model.save(module, staging, signatures=module.signatures())
    finally:
        shutil.rmtree(sources, ignore_errors=True)
    version = VersionDir(staging)
    os.makedirs(version.extra, exist_ok=True)
    save_extra(version)


def export_classifier(
    model,
    info: dict,
    vocab_file: str,
    export_base: str,
    model_name: str,
    version: Optional[int] = None,
    forward: Optional[str] = None,
) -> str:
    """Exports a fine-tuned `ElectraClassifier` as a new version.

    Args:
        model: the classifier (any dtype policy; a float32 copy is exported).
        info: what fine-tuning saves with it (task, casing, max_seq_length,
            regression scale).
        vocab_file: the vocabulary it was fine-tuned with.
        export_base: the directory holding one sub-directory per model name.
        model_name: TF Serving's model name.
        version: explicit version number (None: the next one).
        forward: how the signatures compute the model: "lean"
            (`electra_tf.modeling.lean_forward`, same outputs in fewer ops) or
            "keras" (the model's own call); None: lean where it covers the
            model, else keras. Recorded in serving_config.json.

    Returns:
        The version directory.

    Raises:
        ExportError: the model's weights are not all finite (nothing is written).
        ValueError: `forward` is unknown or does not cover the model.
    """
    task = Task.from_dict(info["task"])
    regression = task.task_type == REGRESSION
    label_names = None if regression else list(task.label_names)
    scale = info.get("regression_output_scale", 1.0)
    tokenizer = WordPieceTokenizer.from_settings(vocab_file, info)
    copy = _finite_copy(model, f"the classifier to export as {model_name}")
    if forward is None:
        forward = forwards.DEFAULT_FORWARD if forwards.supports(copy) else "keras"
    module = ClassifierServing(
        copy, tokenizer, info["max_seq_length"], task.is_pair, label_names, scale, forward
    )
    config = {
        "format_version": FORMAT_VERSION,
        "kind": CLASSIFIER,
        "forward": forward,
        "max_seq_length": info["max_seq_length"],
        "is_pair": task.is_pair,
        **tokenizer.text_settings(),
        "label_names": label_names,
        "label_scale": scale,
        "task": task.to_dict(),
        "model": _encoder_config(copy.encoder),
    }
    return publish_version(
        os.path.join(export_base, model_name),
        lambda staging: _write(
            module,
            staging,
            vocab_file,
            config,
            label_names,
            lambda saved: save_finetuned(copy, saved.extra, info),
        ),
        version,
    )


def export_discriminator(
    discriminator,
    pretraining_config,
    vocab_file: str,
    export_base: str,
    model_name: str,
    max_seq_length: Optional[int] = None,
    version: Optional[int] = None,
) -> str:
    """Exports a pre-trained discriminator (replaced-token probabilities) as a new version.

    Args:
        discriminator: an `ElectraDiscriminator`.
        pretraining_config: its `PretrainingConfig` (casing, sequence length).
        vocab_file: the pre-training vocabulary.
        export_base, model_name, version: as in `export_classifier`.
        max_seq_length: raw-text truncation (default: the pre-training length).

    Returns:
        The version directory.
    """
    length = max_seq_length or pretraining_config.max_seq_length
    tokenizer = WordPieceTokenizer(
        vocab_file,
        pretraining_config.do_lower_case,
        pretraining_config.resolved_strip_accents,
        pretraining_config.normalization,
    )
    copy = _finite_copy(discriminator, f"the discriminator to export as {model_name}")
    electric = pretraining_config.objective == "electric"
    module = DiscriminatorServing(copy, tokenizer, length, electric=electric)
    config = {
        "format_version": FORMAT_VERSION,
        "kind": DISCRIMINATOR,
        "max_seq_length": length,
        "is_pair": False,
        **tokenizer.text_settings(),
        "label_names": None,
        "objective": pretraining_config.objective,
        "model": dataclasses.asdict(pretraining_config.model),
    }
    return publish_version(
        os.path.join(export_base, model_name),
        lambda staging: _write(
            module, staging, vocab_file, config, None, lambda saved: copy.save(saved.keras_file)
        ),
        version,
    )


def export_question_answering(
    model,
    info: dict,
    vocab_file: str,
    export_base: str,
    model_name: str,
    version: Optional[int] = None,
) -> str:
    """Exports a fine-tuned SQuAD `ElectraQA` as a new version.

    Args:
        model: the QA model (any dtype policy; a float32 copy is exported).
        info: what fine-tuning saves with it (squad_version, max_seq_length,
            max_query_length, casing; max_answer_length and
            null_score_threshold, else the defaults).
        vocab_file: the vocabulary it was fine-tuned with.
        export_base, model_name, version: as in `export_classifier`.

    Returns:
        The version directory.
    """
    tokenizer = WordPieceTokenizer.from_settings(vocab_file, info)
    copy = _finite_copy(model, f"the question-answering model to export as {model_name}")
    squad_version = str(info.get("squad_version", "1.1"))
    settings = {
        "max_seq_length": int(info["max_seq_length"]),
        "max_query_length": int(info.get("max_query_length", 64)),
        "max_answer_length": int(info.get("max_answer_length", MAX_ANSWER_LENGTH)),
        "null_score_threshold": float(info.get("null_score_threshold", DEFAULT_NULL_THRESHOLD)),
    }
    module = QuestionAnsweringServing(copy, tokenizer, version_2=squad_version == "2.0", **settings)
    config = {
        "format_version": FORMAT_VERSION,
        "kind": QUESTION_ANSWERING,
        "squad_version": squad_version,
        "version_2": squad_version == "2.0",
        **settings,
        "doc_stride": info.get("doc_stride"),
        "is_pair": True,
        **tokenizer.text_settings(),
        "label_names": None,
        "beam_size": copy.task_head.beam_size,
        "model": _encoder_config(copy.encoder),
    }
    extra_info = {**info, **settings, "squad_version": squad_version}
    return publish_version(
        os.path.join(export_base, model_name),
        lambda staging: _write(
            module,
            staging,
            vocab_file,
            config,
            None,
            lambda saved: save_finetuned(copy, saved.extra, extra_info),
        ),
        version,
    )


def export_tagger(
    model,
    info: dict,
    vocab_file: str,
    export_base: str,
    model_name: str,
    version: Optional[int] = None,
) -> str:
    """Exports a fine-tuned `ElectraTagger` as a new version.

    Args:
        model: the tagger (any dtype policy; a float32 copy is exported).
        info: what fine-tuning saves with it (task, casing, max_seq_length).
        vocab_file: the vocabulary it was fine-tuned with.
        export_base, model_name, version: as in `export_classifier`.

    Returns:
        The version directory.
    """
    definition = TaggingDefinition.from_dict(info["task"])
    tokenizer = WordPieceTokenizer(vocab_file, info["do_lower_case"], info.get("strip_accents"))
    copy = float32_copy(model)
    module = TaggerServing(copy, tokenizer, info["max_seq_length"], definition.tag_names)
    config = {
        "format_version": FORMAT_VERSION,
        "kind": TAGGER,
        "max_seq_length": info["max_seq_length"],
        "is_pair": False,
        "do_lower_case": tokenizer.do_lower_case,
        "strip_accents": tokenizer.strip_accents,
        "label_names": list(definition.tag_names),
        "tag_format": definition.tag_format,
        "word_splitting": WORD_SPLITTING,
        "task": definition.to_dict(),
        "model": _encoder_config(copy.encoder),
    }
    return publish_version(
        os.path.join(export_base, model_name),
        lambda staging: _write(
            module,
            staging,
            vocab_file,
            config,
            definition.tag_names,
            lambda saved: save_finetuned(copy, saved.extra, info),
        ),
        version,
    )


def export_finetuned_dir(
    trial_dir: str, export_base: str, model_name: str, version: Optional[int] = None
) -> str:
    """Exports the model a fine-tuning trial saved (with vocab.txt beside it)."""
    vocab_file = SavedModelDir(trial_dir).vocab_file
    if not os.path.isfile(vocab_file):
        raise ExportError(f"{trial_dir}: no vocab.txt beside the saved model.")
    model, info = load_finetuned(trial_dir)
    export = {QUESTION_ANSWERING: export_question_answering, TAGGER: export_tagger}.get(
        info["kind"], export_classifier
    )
    return export(model, info, vocab_file, export_base, model_name, version)


def export_checkpoint(
    path: str,
    export_base: str,
    model_name: str,
    version: Optional[int] = None,
    max_seq_length: Optional[int] = None,
) -> str:
    """Exports any run: a fine-tuning output directory (its best trial), one trial directory,
    or a pre-training run (its export/ or latest checkpoint).

    Raises:
        ExportError: `path` is none of these.
    """
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.isfile(path) and path.endswith(".keras"):
        path = os.path.dirname(path)
    if not os.path.isdir(path):
        raise ExportError(f"--checkpoint={path}: no such directory.")
    if holds_saved_model(path):
        return export_finetuned_dir(path, export_base, model_name, version)
    run = FinetuningDir(path)
    if os.path.isfile(run.results_file):
        trial = best_saved_trial(path)
        if trial is None:
            raise ExportError(
                f"{run.results_file}: no finished trial with a saved model (was "
                "the run made with --nosave_models?)."
            )
        return export_finetuned_dir(trial.path, export_base, model_name, version)
    files = locate_pretrained(path)
    if not files.is_run:
        raise ExportError(
            f"--checkpoint={path}: not a fine-tuning output directory "
            "(results.json), a trial directory (model.json + model.weights.h5) "
            "or a pre-training run (config.json with export/ or checkpoints/)."
        )
    if files.vocab_file is None:
        raise ExportError(f"--checkpoint={path}: no vocab.txt in the run or its export/.")
    try:
        config, _, discriminator, _ = load_run_models(path)
    except CheckpointError as error:
        raise ExportError(f"--checkpoint: {error}")
    return export_discriminator(
        discriminator, config, files.vocab_file, export_base, model_name, max_seq_length, version
    )
