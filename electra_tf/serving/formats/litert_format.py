"""The LiteRT format: `model.tflite`, the `token_ids` signature converted by TensorFlow's
LiteRT (TFLite) converter, in float32 or with its int8 dynamic-range quantization.

The model has one signature, `serving_default` (the converter's name for a
model's one signature), with the `token_ids` signature's inputs and outputs
by name. Raw text is tokenized by the client: the export's text
path (case folding and NFD normalization, regex splitting, WordPiece) uses
TF Text ops (`NormalizeUTF8`, `RegexSplitWithOffsets`) that have no LiteRT
kernels, so the graph cannot take text (serving_config.json says so).
"""

from __future__ import annotations

import os
import re
from typing import Optional

import tensorflow as tf
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

from electra_tf.finetuning.kind.file_scoring import EvalFile
from electra_tf.serving.formats.contract import INT8, NO_QUANTIZATION, ExportError, ExportFormat
from electra_tf.serving.formats.runtime_check import check_token_id_export
from electra_tf.serving.formats.token_ids import (
    CLIENT_TOKENIZES,
    copy_assets,
    first_line,
    token_ids_config,
    token_ids_function,
)

RAW_TEXT = (
    f"{CLIENT_TOKENIZES} (the text path's NormalizeUTF8 and RegexSplitWithOffsets have no "
    "LiteRT kernels)"
)


def frozen_function(module):
    """The `token_ids` function with its variables as constants, outputs by name.

    Converting the module's own function leaves the Keras variables as
    LiteRT resource variables that nothing initializes (the model answers
    NaN); a frozen graph carries the weights as constants.
    """
    function, specs = token_ids_function(module)
    frozen = convert_variables_to_constants_v2(function)
    # The frozen function returns the outputs flattened, in sorted-name order.
    names = sorted(function.structured_outputs)

    @tf.function(input_signature=specs)
    def token_ids(*inputs):
        return dict(zip(names, frozen(*inputs)))

    return token_ids.get_concrete_function()


class LiteRtFormat(ExportFormat):
    """`model.tflite` for the LiteRT interpreter (`ai-edge-litert`)."""

    NAME = "litert"
    MODEL_FILE = "model.tflite"
    QUANTIZATIONS = (NO_QUANTIZATION, INT8)
    FORWARD = "keras"
    DEFAULT_TOLERANCE = 1e-4

    @classmethod
    def config(cls, quantize: str) -> dict:
        return {
            # The converter names a model's one signature serving_default.
            **token_ids_config(cls.NAME, cls.MODEL_FILE, "serving_default"),
            "raw_text": RAW_TEXT,
            "quantization": "int8 dynamic range (weights)" if quantize == INT8 else "float32",
            "converter": f"tf.lite.TFLiteConverter (TensorFlow {tf.__version__})",
        }

    @classmethod
    def write(cls, module, staging: str, assets: dict, quantize: str) -> None:
        function = frozen_function(module)
        # The trackable object gives the model a named signature (none without it).
        converter = tf.lite.TFLiteConverter.from_concrete_functions([function], tf.Module())
        if quantize == INT8:
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        try:
            flatbuffer = converter.convert()
        except Exception as error:  # ConverterError, or MLIR errors of other types
            ops = sorted(set(re.findall(r"'tf\.(\w+)' op is neither", str(error))))
            reason = (
                f"it uses TensorFlow ops without LiteRT kernels ({', '.join(ops)})"
                if ops
                else first_line(error)
            )
            raise ExportError(
                f"--format=litert: the token_ids signature cannot be converted: {reason}; "
                "export it with --format=onnx or --format=saved_model."
            ) from None
        with open(os.path.join(staging, cls.MODEL_FILE), "wb") as f:
            f.write(flatbuffer)
        copy_assets(staging, assets)

    @classmethod
    def check(
        cls,
        version_dir: str,
        tolerance: float,
        benchmark: Optional[dict],
        eval_file: Optional[EvalFile] = None,
    ):
        from electra_tf.artifacts.serving_dir import read_serving_config

        quantized = read_serving_config(version_dir).get("quantization", "float32") != "float32"
        return check_token_id_export(
            version_dir, "litert", cls.MODEL_FILE, tolerance, quantized, benchmark, eval_file
        )
