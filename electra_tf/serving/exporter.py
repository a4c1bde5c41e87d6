"""Writing a version directory from a fine-tuning or pre-training run, in any export format.

The layout of a version directory is in `electra_tf.artifacts.serving_dir`:
the format's model (a SavedModel for TF Serving by default, or `model.onnx`,
`model.tflite`; `electra_tf.serving.formats`), `assets/` and `assets.extra/`,
which holds the Keras model, so that the check can compare the export with it.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from typing import Callable, Optional

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
from electra_tf.errors import RunError
from electra_tf.finetuning.kinds import kind_of
from electra_tf.finetuning.saving import load_finetuned, save_finetuned
from electra_tf.finiteness import NonFiniteError, check_finite_weights
from electra_tf.interop.checkpoints import CheckpointError, load_run_models
from electra_tf.modeling.encoder import architecture
from electra_tf.serving.discriminator import DiscriminatorExport
from electra_tf.serving.formats import DEFAULT_FORMAT, ExportError, ExportFormat, export_format
from electra_tf.serving.formats.contract import NO_QUANTIZATION
from electra_tf.tokenization import TextPath

FORMAT_VERSION = 1


def _finite_copy(model, what: str):
    """A float32 copy of `model`, refused (ExportError) if its weights are not all finite."""
    copy = float32_copy(model)
    try:
        check_finite_weights(copy.weights, what)
    except NonFiniteError as error:
        raise ExportError(f"{error} Nothing was exported.") from None
    return copy


def _write(
    chosen: type[ExportFormat],
    quantize: str,
    module,
    staging: str,
    vocab_file: str,
    serving_config: dict,
    label_names: Optional[list],
    save_extra: Callable[[VersionDir], None],
) -> None:
    """Writes `module` in the format `chosen`, its assets and the Keras model into `staging`.

    `save_extra(version)` writes the Keras model into `version.extra`.
    """
    sources = tempfile.mkdtemp(prefix=".assets-", dir=os.path.dirname(staging))
    try:
        shutil.copyfile(vocab_file, os.path.join(sources, VOCAB_FILE))
        write_json(os.path.join(sources, SERVING_CONFIG), serving_config)
        files = [VOCAB_FILE, SERVING_CONFIG]
        if label_names is not None:
            with open(os.path.join(sources, LABELS_FILE), "w", encoding="utf-8") as f:
                f.write("".join(f"{name}\n" for name in label_names))
            files.append(LABELS_FILE)
        chosen.write(
            module, staging, {name: os.path.join(sources, name) for name in files}, quantize
        )
    finally:
        shutil.rmtree(sources, ignore_errors=True)
    version = VersionDir(staging)
    os.makedirs(version.extra, exist_ok=True)
    save_extra(version)


def _publish(kind: str, model_base: str, write: Callable[[str], None], version) -> str:
    """`publish_version`, with the kind named in a format's refusal."""
    try:
        return publish_version(model_base, write, version)
    except ExportError as error:
        raise ExportError(f"the {kind} model: {error}") from None


def export_finetuned(
    model,
    info: dict,
    vocab_file: str,
    export_base: str,
    model_name: str,
    version: Optional[int] = None,
    forward: Optional[str] = None,
    *,
    format_name: str = DEFAULT_FORMAT,
    quantize: Optional[str] = None,
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
            None: the format's, else the kind's default). Recorded in
            serving_config.json.
        format_name: the export format (`electra_tf.serving.formats.EXPORT_FORMATS`).
        quantize: the format's quantization (None: float32).

    Returns:
        The version directory.

    Raises:
        ExportError: the model is of no task kind, its weights are not all
            finite, or the format cannot hold it (nothing is written).
        ValueError: `forward` is unknown or does not cover the model.
    """
    chosen = export_format(format_name, quantize)
    quantize = quantize or NO_QUANTIZATION
    try:
        kind = kind_of(model)
    except RunError as error:
        raise ExportError(str(error)) from None
    info = kind.resolve_info({**info, "kind": kind.KIND})
    text = TextPath.from_dict(info)
    copy = _finite_copy(model, f"the {kind.KIND} model to export as {model_name}")
    if forward is not None and forward not in kind.FORWARDS:
        raise ValueError(
            f"forward={forward!r}: {kind.KIND} exports compute {', '.join(kind.FORWARDS)}."
        )
    # The format's pass where the kind has it, else the kind's default.
    preferred = chosen.FORWARD if chosen.FORWARD in kind.FORWARDS else None
    module = kind.serving_module(copy, text.tokenizer(vocab_file), info, forward or preferred)
    config = {
        "format_version": FORMAT_VERSION,
        "kind": kind.KIND,
        **text.to_dict(),
        **kind.serving_config(module, info),
        # After the kind's entries: a token-id format lists its own signatures.
        **chosen.config(quantize),
        "model": architecture(copy.encoder),
    }
    return _publish(
        kind.KIND,
        os.path.join(export_base, model_name),
        lambda staging: _write(
            chosen,
            quantize,
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
    *,
    format_name: str = DEFAULT_FORMAT,
    quantize: Optional[str] = None,
) -> str:
    """Exports a pre-trained discriminator (replaced-token probabilities) as a new version.

    Args:
        discriminator: an `ElectraDiscriminator`.
        pretraining_config: its `PretrainingConfig` (casing, sequence length).
        vocab_file: the pre-training vocabulary.
        export_base, model_name, version, format_name, quantize: as in `export_finetuned`.
        max_seq_length: raw-text truncation (default: the pre-training length).

    Returns:
        The version directory.
    """
    chosen = export_format(format_name, quantize)
    quantize = quantize or NO_QUANTIZATION
    text = TextPath(
        pretraining_config.do_lower_case,
        pretraining_config.resolved_strip_accents,
        pretraining_config.normalization,
        max_seq_length or pretraining_config.max_seq_length,
    )
    copy = _finite_copy(discriminator, f"the discriminator to export as {model_name}")
    info = {**text.to_dict(), "objective": pretraining_config.objective}
    module = DiscriminatorExport.serving_module(
        copy, text.tokenizer(vocab_file), info, chosen.FORWARD
    )
    config = {
        "format_version": FORMAT_VERSION,
        "kind": DiscriminatorExport.KIND,
        **text.to_dict(),
        **DiscriminatorExport.serving_config(module, info),
        **chosen.config(quantize),
        "model": dataclasses.asdict(pretraining_config.model),
    }
    return _publish(
        DiscriminatorExport.KIND,
        os.path.join(export_base, model_name),
        lambda staging: _write(
            chosen,
            quantize,
            module,
            staging,
            vocab_file,
            config,
            None,
            lambda saved: copy.save(saved.keras_file),
        ),
        version,
    )


def export_finetuned_dir(
    trial_dir: str,
    export_base: str,
    model_name: str,
    version: Optional[int] = None,
    **formats,
) -> str:
    """Exports the model a fine-tuning trial saved (with vocab.txt beside it).

    `formats`: `format_name` and `quantize`, as in `export_finetuned`.
    """
    vocab_file = SavedModelDir(trial_dir).vocab_file
    if not os.path.isfile(vocab_file):
        raise ExportError(f"{trial_dir}: no vocab.txt beside the saved model.")
    model, info = load_finetuned(trial_dir)
    return export_finetuned(model, info, vocab_file, export_base, model_name, version, **formats)


def export_checkpoint(
    path: str,
    export_base: str,
    model_name: str,
    version: Optional[int] = None,
    max_seq_length: Optional[int] = None,
    **formats,
) -> str:
    """Exports any run: a fine-tuning output directory (its best trial), one trial directory,
    or a pre-training run (its export/ or latest checkpoint).

    `formats`: `format_name` and `quantize`, as in `export_finetuned`.

    Raises:
        ExportError: `path` is none of these.
    """
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.isfile(path) and path.endswith(".keras"):
        path = os.path.dirname(path)
    if not os.path.isdir(path):
        raise ExportError(f"--checkpoint={path}: no such directory.")
    if holds_saved_model(path):
        return export_finetuned_dir(path, export_base, model_name, version, **formats)
    run = FinetuningDir(path)
    if os.path.isfile(run.results_file):
        trial = best_saved_trial(path)
        if trial is None:
            raise ExportError(
                f"{run.results_file}: no finished trial with a saved model (was "
                "the run made with --nosave_models?)."
            )
        return export_finetuned_dir(trial.path, export_base, model_name, version, **formats)
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
        discriminator,
        config,
        files.vocab_file,
        export_base,
        model_name,
        max_seq_length,
        version,
        **formats,
    )
