"""The SavedModel format: the version directory TF Serving loads (raw text and token ids)."""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

from electra_tf.artifacts.serving_dir import BatchingParams, VersionDir
from electra_tf.finetuning.kind.file_scoring import EvalFile
from electra_tf.serving import check
from electra_tf.serving.formats.contract import ExportFormat


class SavedModelFormat(ExportFormat):
    """`saved_model.pb` + `variables/` with every signature of the kind's serving module.

    The module holds a `float32_copy` of the model, which runs the reference
    kernels (`electra_tf.modeling.kernels`) whichever set the model was
    trained with, so the SavedModel is plain TensorFlow on any hardware. The
    version also gets TF Serving's per-model batching parameters.
    """

    NAME = "saved_model"
    MODEL_FILE = "saved_model.pb"
    DEFAULT_TOLERANCE = check.DEFAULT_TOLERANCE

    @classmethod
    def write(cls, module, staging: str, assets: dict, quantize: str) -> None:
        # The saver copies tracked Asset files into assets/ under their own names.
        module.assets = {
            name.replace(".", "_"): tf.saved_model.Asset(path) for name, path in assets.items()
        }
        tf.saved_model.save(module, staging, signatures=module.signatures())
        with open(VersionDir(staging).batching_params_file, "w", encoding="utf-8") as f:
            f.write(BatchingParams().text())

    @classmethod
    def check(
        cls,
        version_dir: str,
        tolerance: float,
        benchmark: Optional[dict],
        eval_file: Optional[EvalFile] = None,
    ):
        return check.check_export(version_dir, tolerance, benchmark, eval_file)


__all__ = ["SavedModelFormat"]
