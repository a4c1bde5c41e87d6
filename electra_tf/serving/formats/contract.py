"""What an export format implements: writing a version directory's model and checking it.

An export is a version directory (`electra_tf.artifacts.serving_dir`) of any
format: the format's model file (a SavedModel, `model.onnx`, `model.tflite`),
`assets/` (vocab.txt, serving_config.json, labels.txt) and `assets.extra/`
(the Keras model the check compares with). The exporter builds the kind's
serving module once and hands it to the format chosen by name in
`electra_tf.serving.formats.EXPORT_FORMATS`.
"""

from __future__ import annotations

import abc
from typing import Optional

from electra_tf.finetuning.kind.file_scoring import EvalFile

# `--quantize` values: float32 weights, or the converter's int8 dynamic-range quantization.
NO_QUANTIZATION = "none"
INT8 = "int8"


class ExportError(ValueError):
    """A checkpoint cannot be exported; the message names the path or flag."""


class ExportFormat(abc.ABC):
    """One export format; the class itself is used (no instances).

    Attributes:
        NAME: the `--format` value, recorded as serving_config.json's `format`.
        MODEL_FILE: the file (or directory marker) the format writes into the version.
        QUANTIZATIONS: the `--quantize` values it takes (the first is the default).
        FORWARD: the forward pass the kind's serving module should use (None:
            the kind's default; "portable": a classifier's pass in the plain
            ops other runtimes fuse, `electra_tf.modeling.lean_forward`; the
            other kinds then use their own default).
        DEFAULT_TOLERANCE: the check's largest absolute difference in float outputs.
    """

    NAME: str
    MODEL_FILE: str
    QUANTIZATIONS: tuple = (NO_QUANTIZATION,)
    FORWARD: Optional[str] = None
    DEFAULT_TOLERANCE: float = 1e-5

    @classmethod
    def config(cls, quantize: str) -> dict:
        """The format's entries of serving_config.json (none: a SavedModel, as before formats)."""
        return {}

    @classmethod
    @abc.abstractmethod
    def write(cls, module, staging: str, assets: dict, quantize: str) -> None:
        """Writes the model of `module` and `assets` into the empty directory `staging`.

        Args:
            module: the kind's serving module (`TaskKind.serving_module`) over a
                float32 copy of the model.
            assets: {file name in assets/: path of its content}.
            quantize: one of `QUANTIZATIONS`.

        Raises:
            ExportError: the model cannot be written in this format (one line: why).
        """

    @classmethod
    @abc.abstractmethod
    def check(
        cls,
        version_dir: str,
        tolerance: float,
        benchmark: Optional[dict],
        eval_file: Optional[EvalFile] = None,
    ):
        """Loads the version in a fresh process and compares it with the Keras model.

        Args:
            eval_file: a labelled file to score the version and the Keras
                model on (`result["evaluation"]` of the report), or None.

        Returns:
            An `electra_tf.serving.check.CheckReport`.
        """
