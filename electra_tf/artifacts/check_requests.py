"""Tensors as the JSON that `standalone.py` reads and writes (base64 for strings).

The fresh process of the check receives its requests and returns its outputs
in this form: `{"dtype": "string" | "int32" | ..., "values": nested lists}`,
plus `"shape"` on outputs.
"""

from __future__ import annotations

import base64

import numpy as np


def bytes_spec(values) -> dict:
    """A string tensor (nested lists of str or bytes) with every element base64-encoded."""

    def walk(value):
        if isinstance(value, list):
            return [walk(v) for v in value]
        raw = value if isinstance(value, bytes) else value.encode("utf-8")
        return base64.b64encode(raw).decode("ascii")

    return {"dtype": "string", "values": walk(list(values))}


def ids_spec(array) -> dict:
    """An int32 tensor."""
    return {"dtype": "int32", "values": np.asarray(array, np.int32).tolist()}


def decode_output(entry: dict) -> np.ndarray:
    """An output of the fresh process as an array (strings as an object array of bytes)."""
    if entry["dtype"] == "string":
        values = [base64.b64decode(v) for v in entry["values"]]
        return np.array(values, dtype=object).reshape(entry["shape"])
    return np.array(entry["values"], dtype=entry["dtype"]).reshape(entry["shape"])
