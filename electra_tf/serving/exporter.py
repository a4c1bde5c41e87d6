"""Writing a TF Serving version directory from a fine-tuning or pre-training run.

A version directory is a SavedModel:

    saved_model.pb, variables/          graph, signatures and weights
    assets/vocab.txt                    the WordPiece vocabulary
    assets/labels.txt                   class names, one per line (classifiers)
    assets/serving_config.json          model kind, tokenizer flags, task, model config
    assets.extra/model.keras            the Keras model, for `electra_tf.serving.check`

TF Serving loads only the first three; `assets.extra/` is the conventional
place for files beside a SavedModel that the graph does not read.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from typing import Optional

import tensorflow as tf

from electra_tf.serving.layout import publish_version

SERVING_CONFIG = "serving_config.json"
KERAS_FILE = "model.keras"
FORMAT_VERSION = 1
CLASSIFIER = "classifier"
DISCRIMINATOR = "discriminator"


class ExportError(ValueError):
    """A checkpoint cannot be exported; the message names the path or flag."""


def _encoder_config(encoder) -> dict:
    names = ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size",
             "embedding_size", "max_position_embeddings", "type_vocab_size")
    return {name: getattr(encoder, name) for name in names if hasattr(encoder, name)}


def _write(module, signatures: dict, keras_model, staging: str, vocab_file: str,
           serving_config: dict, label_names: Optional[list]) -> None:
    """Saves `module` with its assets into the empty directory `staging`."""
    sources = tempfile.mkdtemp(prefix=".assets-", dir=os.path.dirname(staging))
    try:
        shutil.copyfile(vocab_file, os.path.join(sources, "vocab.txt"))
        with open(os.path.join(sources, SERVING_CONFIG), "w", encoding="utf-8") as f:
            json.dump(serving_config, f, indent=2, ensure_ascii=False)
            f.write("\n")
        files = ["vocab.txt", SERVING_CONFIG]
        if label_names is not None:
            with open(os.path.join(sources, "labels.txt"), "w", encoding="utf-8") as f:
                f.write("".join(f"{name}\n" for name in label_names))
            files.append("labels.txt")
        # Tracked Asset objects are copied into assets/ by the saver.
        module.assets = {name.replace(".", "_"): tf.saved_model.Asset(os.path.join(sources, name))
                         for name in files}
        tf.saved_model.save(module, staging, signatures=signatures)
    finally:
        shutil.rmtree(sources, ignore_errors=True)
    extra = os.path.join(staging, "assets.extra")
    os.makedirs(extra, exist_ok=True)
    keras_model.save(os.path.join(extra, KERAS_FILE))


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
    from electra_tf.export import float32_copy
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
    from electra_tf.export import float32_copy
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


def best_trial_dir(output_dir: str) -> str:
    """The saved trial of a fine-tuning run with the best dev score (trial 0 without dev data).

    The score is the task's GLUE metric from `results.json`; ties go to the
    lower trial number.

    Raises:
        ExportError: no trial with a saved model.
    """
    results_path = os.path.join(output_dir, "results.json")
    with open(results_path, encoding="utf-8") as f:
        results = json.load(f)
    metric = results.get("glue_score_metric")
    trials = [t for t in results.get("trials", [])
              if os.path.isfile(os.path.join(output_dir, f"trial_{t['trial']}", KERAS_FILE))]
    if not trials:
        raise ExportError(f"{results_path}: no finished trial with a saved model.keras "
                          "(was the run made with --nosave_models?).")
    best = max(trials, key=lambda t: (t.get("dev", {}).get(metric, float("-inf")), -t["trial"]))
    return os.path.join(output_dir, f"trial_{best['trial']}")


def export_finetuned_dir(trial_dir: str, export_base: str, model_name: str,
                         version: Optional[int] = None) -> str:
    """Exports what `save_finetuned` wrote to `trial_dir` (model.keras, task.json, vocab.txt)."""
    from electra_tf.finetuning.model import load_finetuned

    vocab_file = os.path.join(trial_dir, "vocab.txt")
    if not os.path.isfile(vocab_file):
        raise ExportError(f"{trial_dir}: no vocab.txt beside model.keras.")
    model, task_info = load_finetuned(trial_dir)
    return export_classifier(model, task_info, vocab_file, export_base, model_name, version)


def export_checkpoint(path: str, export_base: str, model_name: str,
                      version: Optional[int] = None,
                      max_seq_length: Optional[int] = None) -> str:
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
    if os.path.isfile(os.path.join(path, "task.json")) and \
            os.path.isfile(os.path.join(path, KERAS_FILE)):
        return export_finetuned_dir(path, export_base, model_name, version)
    if os.path.isfile(os.path.join(path, "results.json")):
        return export_finetuned_dir(best_trial_dir(path), export_base, model_name, version)
    from electra_tf.interop.checkpoints import CheckpointError, _run_config_path, load_run_models

    if _run_config_path(path) is None:
        raise ExportError(f"--checkpoint={path}: not a fine-tuning output directory "
                          "(results.json), a trial directory (model.keras + task.json) or a "
                          "pre-training run (config.json with export/ or checkpoints/).")
    try:
        config, _, discriminator, _ = load_run_models(path)
    except CheckpointError as error:
        raise ExportError(f"--checkpoint: {error}")
    run_dir = os.path.dirname(_run_config_path(path))
    vocab_file = next((v for v in (os.path.join(run_dir, "vocab.txt"),
                                   os.path.join(run_dir, "export", "vocab.txt"))
                       if os.path.isfile(v)), None)
    if vocab_file is None:
        raise ExportError(f"--checkpoint={path}: no vocab.txt in {run_dir} or its export/.")
    return export_discriminator(discriminator, config, vocab_file, export_base, model_name,
                                max_seq_length, version)


def read_serving_config(version_dir: str) -> dict:
    """The `assets/serving_config.json` of an export."""
    with open(os.path.join(version_dir, "assets", SERVING_CONFIG), encoding="utf-8") as f:
        return json.load(f)
