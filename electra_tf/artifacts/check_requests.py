"""The export check's requests: tensors as the JSON that `standalone.py` reads and writes.

The fresh process of the check receives its requests and returns its outputs
in this form: `{"dtype": "string" | "int32" | ..., "values": nested lists}`
(base64 for strings), plus `"shape"` on outputs. A request is
`{"signature", "inputs", "expect_error"?}`; the check lists beside it the
outputs expected (None: it must fail) and a description.
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


def malformed_id_requests(inputs: dict, vocab_size: int, signature: str) -> list[tuple]:
    """(description, signature, inputs) of token-id requests every export must reject.

    Args:
        inputs: a valid request's `input_ids`, `input_mask`, `segment_ids` (int32 [B, L]).
        vocab_size: the model's vocabulary size (the first id out of range).
        signature: the token-id signature's name.
    """
    out_of_vocabulary = dict(inputs, input_ids=np.full_like(inputs["input_ids"], vocab_size))
    longer_mask = dict(inputs, input_mask=np.pad(inputs["input_mask"], ((0, 0), (0, 1))))
    return [
        (
            "ids out of the vocabulary",
            signature,
            {k: ids_spec(v) for k, v in out_of_vocabulary.items()},
        ),
        ("ids with a [B, L+1] mask", signature, {k: ids_spec(v) for k, v in longer_mask.items()}),
    ]


def add_rejections(requests: list, expected: list, names: list, bad: list) -> None:
    """Appends each (description, signature, inputs) of `bad` as a request that must fail."""
    for name, signature, inputs in bad:
        requests.append({"signature": signature, "inputs": inputs, "expect_error": True})
        expected.append(None)
        names.append(f"{signature}: {name} (must be rejected)")
