"""What the token-id formats (ONNX, LiteRT) share: the signature they convert and their assets."""

from __future__ import annotations

import os
import shutil

import tensorflow as tf

from electra_tf.finetuning.kind.signatures import IDS_SIGNATURE

# serving_config.json's word on raw text, for formats whose graph takes token ids only.
CLIENT_TOKENIZES = (
    "not in the graph: tokenize with vocab.txt and this file's text path "
    "(do_lower_case, strip_accents, normalization, max_seq_length) and send token ids"
)


def token_ids_config(name: str, model_file: str, signature: str = IDS_SIGNATURE) -> dict:
    """The serving_config.json entries every token-id format writes (`signature`: its name
    in the model, with the `token_ids` signature's inputs and outputs)."""
    return {
        "format": name,
        "model_file": model_file,
        "signatures": [signature],
        "inputs": "token_ids",
        "raw_text": CLIENT_TOKENIZES,
    }


def token_ids_function(module):
    """(the concrete `token_ids` function of `module`, its input specs in order).

    The inputs are the kind's token-id inputs (`input_ids`, `input_mask`,
    `segment_ids` int32 [B, L], or [B, O, L] for multiple choice, plus any the
    kind adds); the outputs are the signature's, by name.
    """
    function = module.signatures()[IDS_SIGNATURE]
    return function, tf.nest.flatten(function.structured_input_signature)


def copy_assets(staging: str, assets: dict) -> None:
    """Copies `assets` ({name: path}) into `staging/assets/`, as a SavedModel keeps them."""
    target = os.path.join(staging, "assets")
    os.makedirs(target, exist_ok=True)
    for name, path in assets.items():
        shutil.copyfile(path, os.path.join(target, name))


def first_line(error: Exception, limit: int = 300) -> str:
    """The first non-empty line of a converter's error message."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return (lines[0] if lines else type(error).__name__)[:limit]
