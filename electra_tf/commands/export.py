"""Export a run: <export_base>/<model_name>/<version>/, for TF Serving or another runtime.

    python -m electra_tf.commands.export --checkpoint <run or trial dir> \\
        --export_base <dir> --model_name <name> [--format=onnx | --format=litert [--quantize=int8]]

`--format` picks the export format (`electra_tf.serving.formats`):
`saved_model` (TF Serving, raw text and token ids; the default), `onnx`
(model.onnx for ONNX Runtime, token ids) or `litert` (model.tflite for
LiteRT, token ids, float32 or with `--quantize=int8`).

The checkpoint may be a fine-tuning output directory (its best trial is
exported), one trial directory, or a pre-training run (its export/ or latest
checkpoint); see `electra_tf.serving.exporter`. Prints the version directory.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Optional

from absl import app, flags

from electra_tf import cli
from electra_tf.config import flag_field


@dataclasses.dataclass
class ExportOptions:
    """The command's flags."""

    checkpoint: Optional[str] = flag_field(
        None,
        "Fine-tuning output directory, trial_<k>/ directory, or pre-training run directory "
        "(its export/ or latest checkpoint).",
        required=True,
    )
    export_base: Optional[str] = flag_field(
        None, "TF Serving's --model_base_path is <export_base>/<model_name>.", required=True
    )
    model_name: Optional[str] = flag_field(None, "TF Serving's --model_name.", required=True)
    version: Optional[int] = flag_field(
        None,
        "Version number (default: one more than the highest present; an existing version is "
        "never overwritten).",
    )
    max_seq_length: Optional[int] = flag_field(
        None, "Pre-training runs: raw-text truncation (default: the run's length)."
    )
    format: str = flag_field(
        "saved_model",
        "Export format: saved_model (TF Serving), onnx (model.onnx for ONNX Runtime) or litert "
        "(model.tflite for LiteRT); onnx and litert take token ids.",
    )
    quantize: str = flag_field(
        "none", "Weights of a litert export: none (float32) or int8 (dynamic range)."
    )


def define_flags(flag_values: flags.FlagValues) -> None:
    """The command's flags."""
    cli.define_option_flags(ExportOptions, flag_values)


def export(arguments: list[str], flag_values: flags.FlagValues) -> int:
    """Exports, prints the version directory; returns the exit code."""
    from electra_tf.artifacts.serving_dir import ExportLayoutError
    from electra_tf.serving.exporter import ExportError, export_checkpoint

    if arguments:
        raise app.UsageError(f"unexpected arguments: {' '.join(arguments)}")
    name = flag_values.model_name
    if not name or "/" in name or name.startswith("."):
        raise app.UsageError(f"--model_name={name!r}: must be a plain directory name.")
    try:
        version_dir = export_checkpoint(
            flag_values.checkpoint,
            flag_values.export_base,
            name,
            flag_values.version,
            flag_values.max_seq_length,
            format_name=flag_values.format,
            quantize=flag_values.quantize,
        )
    except (ExportError, ExportLayoutError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(version_dir)
    return 0


def main(argv: list[str]) -> int:
    """Runs the command in this process on `argv` (no program name); returns the exit code."""
    return cli.call(define_flags, export, argv, "python -m electra_tf.commands.export")


if __name__ == "__main__":
    cli.run_command(define_flags, export, __name__)
