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
    BatchingParams,
    VersionDir,
    publish_version,
)
from electra_tf.errors import RunError
from electra_tf.finetuning.kinds import kind_of
from electra_tf.finetuning.saving import load_finetuned, save_finetuned
from electra_tf.finiteness import NonFiniteError, check_finite_weights
from electra_tf.interop.checkpoints import CheckpointError, load_run_models
from electra_tf.modeling.encoder import architecture
from electra_tf.serving.discriminator import DiscriminatorExport
from electra_tf.tokenization import TextPath

FORMAT_VERSION = 1


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
    `save_extra(version)` writes the Keras model into `version.extra`. The
    version also gets TF Serving's per-model batching parameters.
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
    with open(version.batching_params_file, "w", encoding="utf-8") as f:
        f.write(BatchingParams().text())
    os.makedirs(version.extra, exist_ok=True)
    save_extra(version)


def export_finetuned(
    model,
    info: dict,
    vocab_file: str,
    export_base: str,
    model_name: str,
    version: Optional[int] = None,
    forward: Optional[str] = None,
) -> str:
    """Exports a fine-tuned model of any task kind as a new version.

    Its kind (`electra_tf.finetuning.kinds.kind_of`) gives the signatures,
    the entries of serving_config.json beside the kind, the text path and
    the encoder's configuration, and labels.txt.

    Args:
        model: the fine-tuned model (any dtype policy; a float32 copy is exported).
        info: what fine-tuning saves with it (its task's `model_info()` and
            `TextPath`).
        vocab_file: the vocabulary it was fine-tuned with.
        export_base: the directory holding one sub-directory per model name.
        model_name: TF Serving's model name.
        version: explicit version number (None: the next one).
        forward: how the signatures compute the model, for kinds that have
            more than one way (classifiers: "lean", `electra_tf.modeling.lean_forward`,
            the same outputs in fewer ops, or "keras", the model's own call;
            None: the kind's default). Recorded in serving_config.json.

    Returns:
        The version directory.

    Raises:
        ExportError: the model is of no task kind, or its weights are not all
            finite (nothing is written).
        ValueError: `forward` is unknown or does not cover the model.
    """
    try:
        kind = kind_of(model)
    except RunError as error:
        raise ExportError(str(error)) from None
    info = kind.resolve_info({**info, "kind": kind.KIND})
    text = TextPath.from_dict(info)
    copy = _finite_copy(model, f"the {kind.KIND} model to export as {model_name}")
    module = kind.serving_module(copy, text.tokenizer(vocab_file), info, forward)
    config = {
        "format_version": FORMAT_VERSION,
        "kind": kind.KIND,
        **text.to_dict(),
        **kind.serving_config(module, info),
        "model": architecture(copy.encoder),
    }
    return publish_version(
        os.path.join(export_base, model_name),
        lambda staging: _write(
            module,
            staging,
            vocab_file,
            config,
            kind.label_names(info),
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
        export_base, model_name, version: as in `export_finetuned`.
        max_seq_length: raw-text truncation (default: the pre-training length).

    Returns:
        The version directory.
    """
    text = TextPath(
        pretraining_config.do_lower_case,
        pretraining_config.resolved_strip_accents,
        pretraining_config.normalization,
        max_seq_length or pretraining_config.max_seq_length,
    )
    copy = _finite_copy(discriminator, f"the discriminator to export as {model_name}")
    info = {**text.to_dict(), "objective": pretraining_config.objective}
    module = DiscriminatorExport.serving_module(copy, text.tokenizer(vocab_file), info)
    config = {
        "format_version": FORMAT_VERSION,
        "kind": DiscriminatorExport.KIND,
        **text.to_dict(),
        **DiscriminatorExport.serving_config(module, info),
        "model": dataclasses.asdict(pretraining_config.model),
    }
    return publish_version(
        os.path.join(export_base, model_name),
        lambda staging: _write(
            module, staging, vocab_file, config, None, lambda saved: copy.save(saved.keras_file)
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
    return export_finetuned(model, info, vocab_file, export_base, model_name, version)


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
