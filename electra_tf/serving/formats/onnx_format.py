"""The ONNX format: `model.onnx`, the `token_ids` signature converted by tf2onnx.

Inputs and outputs are the `token_ids` signature's, by name (for most kinds
`input_ids`, `input_mask`, `segment_ids` int32 [B, L]); string outputs
(labels, tags) are ONNX string tensors. The graph does not validate its
inputs (TensorFlow's assertions have no ONNX counterpart): ids must lie in
the vocabulary and the three inputs share one shape.
"""

from __future__ import annotations

import os
from typing import Optional

import numpy as np
import tensorflow as tf

from electra_tf.finetuning.kind.file_scoring import EvalFile
from electra_tf.serving.formats.contract import ExportError, ExportFormat
from electra_tf.serving.formats.runtime_check import check_token_id_export
from electra_tf.serving.formats.token_ids import (
    copy_assets,
    first_line,
    token_ids_config,
    token_ids_function,
)

# ONNX Runtime 1.17 and later run opset 17, which has LayerNormalization.
OPSET = 17


def _erfc(ctx, node, name, args):
    """tf2onnx handler of TensorFlow's Erfc (`tf.nn.gelu`'s exact form): 1 - Erf(x).

    ONNX has Erf but no Erfc; for the arguments of GELU (erfc(-x / sqrt 2))
    the difference in float32 is below 1e-7 times the activation.
    """
    from tf2onnx import utils

    dtype = utils.map_onnx_to_numpy_type(ctx.get_dtype(node.input[0]))
    erf = ctx.make_node("Erf", [node.input[0]])
    one = ctx.make_const(utils.make_name(f"{name}_one"), np.array(1, dtype))
    node.type = "Sub"
    ctx.replace_inputs(node, [one.output[0], erf.output[0]])


class OnnxFormat(ExportFormat):
    """`model.onnx` for ONNX Runtime (float32; the kinds' `token_ids` outputs)."""

    NAME = "onnx"
    MODEL_FILE = "model.onnx"
    FORWARD = "portable"
    DEFAULT_TOLERANCE = 1e-4

    @classmethod
    def config(cls, quantize: str) -> dict:
        tf2onnx, _ = _converter()

        return {
            **token_ids_config(cls.NAME, cls.MODEL_FILE),
            "converter": f"tf2onnx {tf2onnx.__version__}, opset {OPSET}",
        }

    @classmethod
    def write(cls, module, staging: str, assets: dict, quantize: str) -> None:
        tf2onnx, onnx = _converter()

        function, specs = token_ids_function(module)
        try:
            proto, _ = tf2onnx.convert.from_function(
                tf.function(function),
                input_signature=specs,
                opset=OPSET,
                custom_op_handlers={"Erfc": (_erfc, [])},
            )
            # tf2onnx keeps ops it cannot convert; the checker refuses them here, not at load.
            onnx.checker.check_model(proto, full_check=True)
        except Exception as error:  # the converter's errors have no common type
            raise ExportError(
                f"--format=onnx: tf2onnx cannot convert the token_ids signature: "
                f"{first_line(error)}"
            ) from None
        with open(os.path.join(staging, cls.MODEL_FILE), "wb") as f:
            f.write(proto.SerializeToString())
        copy_assets(staging, assets)

    @classmethod
    def check(
        cls,
        version_dir: str,
        tolerance: float,
        benchmark: Optional[dict],
        eval_file: Optional[EvalFile] = None,
    ):
        return check_token_id_export(
            version_dir, "onnx", cls.MODEL_FILE, tolerance, False, benchmark, eval_file
        )


def _converter():
    """(tf2onnx, onnx), or ExportError saying how to install them (the `deploy` extra)."""
    try:
        import onnx
        import tf2onnx
    except ImportError as error:
        raise ExportError(
            f"--format=onnx needs tf2onnx and onnx ({error}): pip install 'electra-tf[deploy]' "
            "(or the versions requirements.txt pins)."
        ) from None
    return tf2onnx, onnx
