"""The signature names and token-id inputs every task kind's export shares.

`serving_default` takes raw text (each kind its own fields), `token_ids`
the packed ids of clients that tokenize themselves (`TOKEN_ID_SPECS`:
`input_ids`, `input_mask`, `segment_ids` int32 [B, L]).
"""

from __future__ import annotations

import tensorflow as tf

TEXT_SIGNATURE = "serving_default"
IDS_SIGNATURE = "token_ids"
# Raw text with bfloat16 products (lean exports only).
BFLOAT16_SIGNATURE = "serving_bfloat16"
# Inputs of every token-id signature: int32 [B, L] each.
TOKEN_ID_SPECS = [
    tf.TensorSpec([None, None], tf.int32, name=name)
    for name in ("input_ids", "input_mask", "segment_ids")
]


def token_ids_function(from_ids):
    """The token-id signature's function: `from_ids(input_ids, input_mask, segment_ids)`."""

    @tf.function(input_signature=TOKEN_ID_SPECS)
    def serve_ids(input_ids, input_mask, segment_ids):
        return from_ids(input_ids, input_mask, segment_ids)

    return serve_ids
