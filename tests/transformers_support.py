"""Runs tests/hf_reference.py: what Hugging Face transformers computes on a checkpoint directory.

In this interpreter when it has torch and transformers, else in the one
ELECTRA_TF_HF_PYTHON names; tests marked `needs_transformers` are skipped
without either.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_reference.py")


def transformers_python():
    """The interpreter that runs hf_reference.py, or None."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401

        return sys.executable
    except ImportError:
        return os.environ.get("ELECTRA_TF_HF_PYTHON")


needs_transformers = pytest.mark.skipif(
    transformers_python() is None,
    reason="needs torch + transformers (or "
    "ELECTRA_TF_HF_PYTHON pointing at an interpreter that has them)",
)


def transformers_outputs(hf_dir: str, inputs: dict, scratch) -> dict:
    """{name: array} hf_reference.py writes for `inputs` ({name: array}) on `hf_dir`."""
    np.savez(os.path.join(scratch, "in.npz"), **inputs)
    subprocess.run(
        [
            transformers_python(),
            REFERENCE,
            hf_dir,
            os.path.join(scratch, "in.npz"),
            os.path.join(scratch, "out.npz"),
        ],
        check=True,
        timeout=300,
    )
    return dict(np.load(os.path.join(scratch, "out.npz")))
