"""Writing a TF Serving version directory from a fine-tuning or pre-training run.

The layout of a version directory is in `electra_tf.artifacts.serving_dir`.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from typing import Callable, Optional

import tensorflow as tf

from electra_tf.artifacts.export_dir import float32_copy
from electra_tf.artifacts.files import read_json, write_json
from electra_tf.artifacts.finetuning_dir import (FinetuningDir, TrialDir, best_saved_trial,
                                                 holds_saved_model)
from electra_tf.artifacts.pretrained import locate_pretrained
from electra_tf.artifacts.results import read_results
from electra_tf.artifacts.run_dir import VOCAB_FILE
from electra_tf.artifacts.serving_dir import (LABELS_FILE, SERVING_CONFIG, VersionDir,
                                              publish_version)

FORMAT_VERSION = 1
CLASSIFIER = "classifier"
DISCRIMINATOR = "discriminator"
QUESTION_ANSWERING = "question_answering"


class ExportError(ValueError):
    """A checkpoint cannot be exported; the message names the path or flag."""


def _encoder_config(encoder) -> dict:
    names = ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size",
             "embedding_size", "max_position_embeddings", "type_vocab_size")
    return {name: getattr(encoder, name) for name in names if hasattr(encoder, name)}


def _write(module, signatures: dict, keras_model, staging: str, vocab_file: str,
           serving_config: dict, label_names: Optional[list],
           save_extra: Optional[Callable[[str], None]] = None) -> None:
    """Saves `module` with its assets into the empty directory `staging`.

    `save_extra(directory)` writes the model into `assets.extra/` (default:
    `model.keras`).
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
        module.assets = {name.replace(".", "_"): tf.saved_model.Asset(os.path.join(sources, name))
                         for name in files}
        tf.saved_model.save(module, staging, signatures=signatures)
    finally:
        shutil.rmtree(sources, ignore_errors=True)
    version = VersionDir(staging)
    os.makedirs(version.extra, exist_ok=True)
    if save_extra is None:
        keras_model.save(version.keras_file)
    else:
        save_extra(version.extra)


def export_classifier(model, task_info: dict, vocab_file: str, export_base: str,
                      model_name: str, version: Optional[int] = None) -> str:
    """Exports a fine-tuned `ElectraClassifier` as a new version.

    Args:
        model: the classifier (any dtype policy; a float32 copy is exported).
        task_info: what `save_finetuned` writes to `task.json` (task, casing,
            max_seq_length, regression scale).
        vocab_file: the vocabulary it was fine-tuned with.
        export_base: the directory holding one sub-directory per model name.
        model_name: TF Serving's model name.
        version: explicit version number (None: the next one).

    Returns:
        The version directory.
    """
    from electra_tf.finetuning.tasks import REGRESSION, Task
    from electra_tf.serving.classifier import ClassifierServing
    from electra_tf.tokenization import WordPieceTokenizer

    task = Task.from_dict(task_info["task"])
    regression = task.task_type == REGRESSION
    label_names = None if regression else list(task.label_names)
    tokenizer = WordPieceTokenizer(vocab_file, task_info["do_lower_case"],
                                   task_info.get("strip_accents"))
    copy = float32_copy(model)
    module = ClassifierServing(copy, tokenizer, task_info["max_seq_length"], task.is_pair,
                               label_names, task_info.get("regression_output_scale", 1.0))
    config = {"format_version": FORMAT_VERSION, "kind": CLASSIFIER,
              "max_seq_length": task_info["max_seq_length"], "is_pair": task.is_pair,
              "do_lower_case": tokenizer.do_lower_case, "strip_accents": tokenizer.strip_accents,
              "label_names": label_names,
              "label_scale": task_info.get("regression_output_scale", 1.0),
              "task": task.to_dict(), "model": _encoder_config(copy.encoder)}
    return publish_version(
        os.path.join(export_base, model_name),
        lambda staging: _write(module, module.signatures(), copy, staging, vocab_file, config,
                               label_names), version)


def export_discriminator(discriminator, pretraining_config, vocab_file: str, export_base: str,
                         model_name: str, max_seq_length: Optional[int] = None,
                         version: Optional[int] = None) -> str:
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
    from electra_tf.serving.discriminator import DiscriminatorServing
    from electra_tf.tokenization import WordPieceTokenizer

    length = max_seq_length or pretraining_config.max_seq_length
    tokenizer = WordPieceTokenizer(vocab_file, pretraining_config.do_lower_case,
                                   pretraining_config.resolved_strip_accents)
    copy = float32_copy(discriminator)
    module = DiscriminatorServing(copy, tokenizer, length)
    config = {"format_version": FORMAT_VERSION, "kind": DISCRIMINATOR, "max_seq_length": length,
              "is_pair": False, "do_lower_case": tokenizer.do_lower_case,
              "strip_accents": tokenizer.strip_accents, "label_names": None,
              "model": dataclasses.asdict(pretraining_config.model)}
    return publish_version(
        os.path.join(export_base, model_name),
        lambda staging: _write(module, module.signatures(), copy, staging, vocab_file, config,
                               None), version)


def qa_float32_copy(model):
    """A float32 `ElectraQA` with the weights of `model` (which has no `get_config`)."""
    from electra_tf.finetuning.qa_model import ElectraQA

    encoder = float32_copy(model.encoder)
    head = model.task_head
    copy = ElectraQA(encoder, beam_size=head.beam_size, hidden_units=head.hidden_units, name="qa")
    copy.build_for()
    copy.task_head.set_weights(head.get_weights())
    return copy


def export_question_answering(model, qa_info: dict, vocab_file: str, export_base: str,
                              model_name: str, version: Optional[int] = None) -> str:
    """Exports a fine-tuned SQuAD `ElectraQA` as a new version.

    Args:
        model: the QA model (any dtype policy; a float32 copy is exported).
        qa_info: what `save_qa_model` writes to `qa_model.json` (squad_version,
            max_seq_length, max_query_length, casing; optionally
            max_answer_length and null_score_threshold, else the defaults).
        vocab_file: the vocabulary it was fine-tuned with.
        export_base, model_name, version: as in `export_classifier`.

    Returns:
        The version directory.
    """
    from electra_tf.finetuning.qa_model import save_qa_model
    from electra_tf.finetuning.squad_decoding import MAX_ANSWER_LENGTH
    from electra_tf.training.squad_run import DEFAULT_NULL_THRESHOLD
    from electra_tf.serving.question_answering import QuestionAnsweringServing
    from electra_tf.tokenization import WordPieceTokenizer

    tokenizer = WordPieceTokenizer(vocab_file, qa_info["do_lower_case"],
                                   qa_info.get("strip_accents"))
    copy = qa_float32_copy(model)
    squad_version = str(qa_info.get("squad_version", "1.1"))
    settings = {"max_seq_length": int(qa_info["max_seq_length"]),
                "max_query_length": int(qa_info.get("max_query_length", 64)),
                "max_answer_length": int(qa_info.get("max_answer_length", MAX_ANSWER_LENGTH)),
                "null_score_threshold": float(qa_info.get("null_score_threshold",
                                                          DEFAULT_NULL_THRESHOLD))}
    module = QuestionAnsweringServing(copy, tokenizer, version_2=squad_version == "2.0",
                                      **settings)
    config = {"format_version": FORMAT_VERSION, "kind": QUESTION_ANSWERING,
              "squad_version": squad_version, "version_2": squad_version == "2.0", **settings,
              "doc_stride": qa_info.get("doc_stride"), "is_pair": True,
              "do_lower_case": tokenizer.do_lower_case, "strip_accents": tokenizer.strip_accents,
              "label_names": None, "beam_size": copy.task_head.beam_size,
              "model": _encoder_config(copy.encoder)}
    info = {k: v for k, v in qa_info.items() if k not in ("encoder", "beam_size", "hidden_units")}

    def save_extra(extra):
        save_qa_model(copy, extra, {**info, **settings, "squad_version": squad_version})

    return publish_version(
        os.path.join(export_base, model_name),
        lambda staging: _write(module, module.signatures(), copy, staging, vocab_file, config,
                               None, save_extra), version)


def _qa_trial_info(trial: TrialDir) -> dict:
    """`qa_model.json` of a SQuAD trial, completed from its run's results.json settings."""
    info = read_json(trial.qa_description_file)
    results = read_results(FinetuningDir(os.path.dirname(os.path.abspath(trial.path))).results_file)
    settings = results["settings"] if results else {}
    for key in ("max_answer_length", "null_score_threshold"):
        if key in settings:
            info.setdefault(key, settings[key])
    return info


def export_finetuned_dir(trial_dir: str, export_base: str, model_name: str,
                         version: Optional[int] = None) -> str:
    """Exports what a fine-tuning trial saved: a classifier or regressor (model.keras,
    task.json), or a SQuAD model (qa_model.json, model.weights.h5); vocab.txt beside it."""
    from electra_tf.finetuning.model import load_finetuned
    from electra_tf.finetuning.qa_model import load_qa_model

    trial = TrialDir(trial_dir)
    if not os.path.isfile(trial.vocab_file):
        raise ExportError(f"{trial_dir}: no vocab.txt beside the saved model.")
    if trial.holds_qa_model:
        model, _ = load_qa_model(trial_dir)
        return export_question_answering(model, _qa_trial_info(trial), trial.vocab_file,
                                         export_base, model_name, version)
    model, task_info = load_finetuned(trial_dir)
    return export_classifier(model, task_info, trial.vocab_file, export_base, model_name,
                             version)


def export_checkpoint(path: str, export_base: str, model_name: str,
                      version: Optional[int] = None,
                      max_seq_length: Optional[int] = None) -> str:
    """Exports any run: a fine-tuning output directory (its best trial), one trial directory
    (classifier or SQuAD), or a pre-training run (its export/ or latest checkpoint).

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
    if os.path.isfile(FinetuningDir(path).results_file):
        trial = best_saved_trial(path)
        if trial is None:
            raise ExportError(f"{FinetuningDir(path).results_file}: no finished trial with a "
                              "saved model (was the run made with --nosave_models?).")
        return export_finetuned_dir(trial.path, export_base, model_name, version)
    from electra_tf.interop.checkpoints import CheckpointError, load_run_models

    files = locate_pretrained(path)
    if not files.is_run:
        raise ExportError(f"--checkpoint={path}: not a fine-tuning output directory "
                          "(results.json), a trial directory (model.keras + task.json, or "
                          "qa_model.json + model.weights.h5) or a "
                          "pre-training run (config.json with export/ or checkpoints/).")
    if files.vocab_file is None:
        raise ExportError(f"--checkpoint={path}: no vocab.txt in the run or its export/.")
    try:
        config, _, discriminator, _ = load_run_models(path)
    except CheckpointError as error:
        raise ExportError(f"--checkpoint: {error}")
    return export_discriminator(discriminator, config, files.vocab_file, export_base,
                                model_name, max_seq_length, version)
