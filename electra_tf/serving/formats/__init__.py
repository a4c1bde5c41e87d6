"""Export formats, chosen by name (`--format`): one contract (`contract.ExportFormat`),
implemented once per format.

    saved_model   TF Serving's SavedModel: raw text and token ids (the default)
    onnx          model.onnx for ONNX Runtime: token ids (tf2onnx)
    litert        model.tflite for LiteRT: token ids, float32 or int8 dynamic range
"""

from __future__ import annotations

from typing import Optional

from electra_tf.artifacts.serving_dir import read_serving_config
from electra_tf.serving.formats.contract import ExportError, ExportFormat
from electra_tf.serving.formats.litert_format import LiteRtFormat
from electra_tf.serving.formats.onnx_format import OnnxFormat
from electra_tf.serving.formats.saved_model import SavedModelFormat

EXPORT_FORMATS = {f.NAME: f for f in (SavedModelFormat, OnnxFormat, LiteRtFormat)}
DEFAULT_FORMAT = SavedModelFormat.NAME


def export_format(name: str, quantize: Optional[str] = None) -> type[ExportFormat]:
    """The format called `name`, checked to take `quantize` (None: its default).

    Raises:
        ExportError: no such format, or it does not take `quantize`.
    """
    chosen = EXPORT_FORMATS.get(name)
    if chosen is None:
        raise ExportError(f"--format={name}: choose one of {', '.join(EXPORT_FORMATS)}.")
    if quantize is not None and quantize not in chosen.QUANTIZATIONS:
        raise ExportError(
            f"--quantize={quantize}: --format={name} takes {', '.join(chosen.QUANTIZATIONS)}."
        )
    return chosen


def format_of_version(version_dir: str) -> type[ExportFormat]:
    """The format of a version directory (serving_config.json's `format`; none: a SavedModel).

    A directory without serving_config.json is taken for a SavedModel, whose
    check then names what the directory lacks.

    Raises:
        ExportError: it names a format this version does not know.
    """
    try:
        config = read_serving_config(version_dir)
    except FileNotFoundError:
        return export_format(DEFAULT_FORMAT)
    return export_format(config.get("format", DEFAULT_FORMAT))


def check_version(
    version_dir: str, tolerance: Optional[float] = None, benchmark=None, eval_file=None
):
    """Checks a version directory of any format (`tolerance` None: the format's default;
    `eval_file`: an `EvalFile` to score it on as well)."""
    chosen = format_of_version(version_dir)
    if tolerance is None:
        tolerance = chosen.DEFAULT_TOLERANCE
    return chosen.check(version_dir, tolerance, benchmark, eval_file)


__all__ = [
    "DEFAULT_FORMAT",
    "EXPORT_FORMATS",
    "ExportError",
    "ExportFormat",
    "check_version",
    "export_format",
    "format_of_version",
]
