"""Reading checkpoints of the original TF1 code (google-research/electra).

A pre-training checkpoint holds the discriminator under `electra/`, the
generator under `generator/` (its embeddings shared under `electra/embeddings`),
the heads under `discriminator_predictions/` and `generator_predictions/`,
plus `global_step` and the optimizer's `adam_m` / `adam_v` slots (skipped).
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

# Released checkpoints ship their vocabulary beside the checkpoint files.
VOCAB_FILE = "vocab.txt"
MODEL_PREFIXES = ("electra/", "generator/", "discriminator_predictions/", "generator_predictions/")
_OPTIMIZER_SUFFIXES = ("/adam_m", "/adam_v", "/Adam", "/Adam_1")


class CheckpointFormatError(ValueError):
    """The path is not a checkpoint of the expected kind; the message says why."""


def checkpoint_prefix(path: str) -> str:
    """A checkpoint directory (or `model.ckpt-N` prefix) -> the prefix to read."""
    if os.path.isdir(path):
        prefix = tf.train.latest_checkpoint(path)
        if prefix is None:  # released archives may lack the `checkpoint` index file
            indexes = sorted(f for f in os.listdir(path) if f.endswith(".index"))
            if len(indexes) == 1:
                prefix = os.path.join(path, indexes[0][: -len(".index")])
        if prefix is None:
            raise CheckpointFormatError(
                f"{path}: no TensorFlow checkpoint found (expected a `checkpoint` file or one "
                "`<name>.index` with its `.data-*` files)."
            )
        return prefix
    if os.path.exists(path + ".index"):
        return path
    raise CheckpointFormatError(
        f"{path}: neither a checkpoint directory nor a checkpoint prefix "
        f"({path}.index does not exist)."
    )


def read_tf1_checkpoint(path: str) -> tuple[dict[str, np.ndarray], list[str]]:
    """Reads the model weights of an original-code checkpoint.

    Args:
        path: the checkpoint directory or prefix.

    Returns:
        (weights, ignored): canonical name -> float32 array for every model
        variable, and the names of other variables that were not read (the
        step, optimizer slots, heads of fine-tuning tasks).

    Raises:
        CheckpointFormatError: unreadable, or no ELECTRA variables in it.
    """
    prefix = checkpoint_prefix(path)
    try:
        reader = tf.train.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError) as error:
        raise CheckpointFormatError(f"{prefix}: cannot read the checkpoint ({error}).")
    weights, ignored = {}, []
    for name in sorted(reader.get_variable_to_shape_map()):
        if name.startswith(MODEL_PREFIXES) and not name.endswith(_OPTIMIZER_SUFFIXES):
            weights[name] = np.asarray(reader.get_tensor(name), np.float32)
        else:
            ignored.append(name)
    if "electra/embeddings/word_embeddings" not in weights:
        raise CheckpointFormatError(
            f"{prefix}: no `electra/embeddings/word_embeddings` variable, so this is not a "
            "google-research/electra checkpoint (variables found: "
            f"{', '.join(sorted(reader.get_variable_to_shape_map())[:5])}, ...)."
        )
    return weights, ignored


def write_tf1_checkpoint(weights: dict[str, np.ndarray], prefix: str) -> str:
    """Writes name-based TF1-style checkpoint files (`<prefix>.index`, `.data-*`).

    What `tf.compat.v1.train.Saver` writes for these variables; readable by
    the original code and by `read_tf1_checkpoint`.
    """
    names = sorted(weights)
    tf.raw_ops.SaveV2(
        prefix=prefix,
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(weights[n]) for n in names],
    )
    return prefix
