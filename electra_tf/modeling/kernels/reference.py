"""The model's kernels as the paper writes them: Keras layers, `keras.ops`, automatic gradients.

They run on every Keras backend. Every function here has a twin of the same
name and signature in `cpu_fast` (TensorFlow only); see
`electra_tf.modeling.kernels` for how a model picks one of the two sets.

Conventions: B = batch, L = sequence length, M = rows (masked slots of the
whole batch), V = vocabulary size.
"""

from __future__ import annotations

import math

import keras
from keras import ops


def dense(layer, inputs):
    """`layer(inputs)`: Keras' own `Dense` call (matmul, bias, activation; LoRA and quantization).

    Args:
        layer: a built `keras.layers.Dense`.
        inputs: [..., C_in].

    Returns:
        [..., C_out].
    """
    return layer(inputs)


def add_bias(x, bias):
    """`x + bias` over the last axis.

    Args:
        x: [..., C].
        bias: [C], already in x's dtype.

    Returns:
        [..., C].
    """
    return x + bias


def apply_keep_mask(x, keep, keep_probability: float):
    """Inverted dropout of x with a given bool keep mask (None: no dropout)."""
    if keep is None:
        return x
    return ops.where(keep, x * ops.cast(1.0 / keep_probability, x.dtype), ops.zeros_like(x))


def stateless_uniform(shape, seed):
    """float32 uniforms in [0, 1) of `shape`, a pure function of `seed`.

    `keras.random` takes a seed tensor on JAX; on TensorFlow it takes only a
    `SeedGenerator` or an int, so TensorFlow's own stateless op draws there
    (the same draw as TensorFlow runs have always made from a seed).

    Args:
        shape: static or dynamic shape.
        seed: int [2] stateless seed (a `SeedGenerator` state, possibly folded).
    """
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.random.stateless_uniform(shape, seed=seed)
    return keras.random.uniform(shape, seed=seed)


def dropout_keep_mask(shape, seed, rate: float):
    """Bernoulli(1 - rate) keep mask of `shape`, and its keep probability.

    Args:
        shape: static or dynamic shape of the mask.
        seed: int [2] stateless seed (`stateless_uniform`).
        rate: drop probability in [0, 1).

    Returns:
        (bool mask of `shape`, the keep probability as a Python float).
    """
    if not 0 <= rate < 1:
        raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
    return stateless_uniform(shape, seed) >= rate, 1.0 - rate


def scaled_dot_product_attention(qkv, attention_bias, keep=None, keep_probability=1.0):
    """Softmax attention of every query over the keys, with dropout on the probabilities.

    Args:
        qkv: [B, L, 3, heads, d], the query, key and value projections.
        attention_bias: float [B, 1, 1, L] (or [B, 1, L, L]), added to the float32 scores.
        keep: bool [B, heads, L, L] dropout keep mask, or None for no dropout.
        keep_probability: the mask's keep probability.

    Returns:
        Context vectors [B, L, heads, d] in qkv's dtype.
    """
    query, key, value = ops.unstack(qkv, axis=2)  # each [B, L, heads, d]
    scores = ops.einsum("bqhd,bkhd->bhqk", query, key)  # [B, heads, L, L]
    # Softmax in float32 even under mixed precision: -10000 overflows fp16 sums.
    scores = ops.cast(scores, "float32") / math.sqrt(qkv.shape[-1]) + ops.cast(
        attention_bias, "float32"
    )
    probs = ops.cast(ops.softmax(scores, axis=-1), qkv.dtype)
    probs = apply_keep_mask(probs, keep, keep_probability)
    return ops.einsum("bhqk,bkhd->bqhd", probs, value)


def cross_entropy_and_argmax(scores, labels):
    """-log softmax(scores)[label] and the predicted id of every row.

    Args:
        scores: float32 [M, V].
        labels: int32 [M].

    Returns:
        (float32 [M] negative log-likelihoods, int32 [M] argmax ids).
    """
    nll = ops.sparse_categorical_crossentropy(labels, scores, from_logits=True)
    return nll, ops.cast(ops.argmax(scores, axis=-1), "int32")


def inverse_cdf_sample(scores, uniforms):
    """Draws one id per row of softmax(scores): the first id whose CDF exceeds the uniform.

    Args:
        scores: float32 [M, V], without gradient.
        uniforms: float32 [M] in [0, 1).

    Returns:
        int32 [M].
    """
    vocab_size = scores.shape[-1] or ops.shape(scores)[-1]
    cdf = ops.cumsum(ops.softmax(scores, axis=-1), axis=-1)  # [M, V]
    # The target is scaled by the CDF's last entry (1 up to rounding), so a
    # uniform near 1 still lands inside the vocabulary.
    targets = uniforms[:, None] * cdf[:, -1:]
    # The first id whose CDF exceeds the target is the number of entries at or
    # below it (the CDF does not decrease): a right-sided search of each row.
    ids = ops.sum(ops.cast(cdf <= targets, "int32"), axis=-1)
    # u * total can round up to the total itself.
    return ops.minimum(ids, vocab_size - 1)
