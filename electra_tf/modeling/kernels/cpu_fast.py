"""The model's kernels written for XLA on a CPU: hand-written gradients, fused layouts.

Each function `reference` also defines computes what its twin there computes
(same name, signature and maths, up to float rounding; `gelu` computes
`keras.activations.gelu`), in a form that was measured faster under XLA on a
2-core CPU; the comments say what each one avoids and what it measured. On
GPUs and TPUs the plain versions are likely faster.

Conventions: B = batch, L = sequence length, M = rows (masked slots of the
whole batch), V = vocabulary size.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from electra_tf.modeling.kernels.reference import apply_keep_mask

# Dropout masks come from a keyed integer hash of each unit's index instead of
# a Philox stream. XLA:CPU lowers Philox through 64-bit arithmetic into a call
# that fuses with nothing: the masks took about a sixth of the pre-training
# step. The hash is a few 32-bit multiplies and shifts that fuse into the
# dropout multiply itself (about 150x faster on a [32, 4, 128, 128] mask).
# Its two keys are drawn with Philox from the stateless seed, so masks stay
# deterministic per seed and independent across layers, steps and replicas.
# Each unit gets 32 bits; it is dropped when they are below round(rate * 2**32).
_MIX_1 = 0x85EBCA6B
_MIX_2 = 0xC2B2AE35


def _mix32(h):
    """MurmurHash3's 32-bit finaliser: a bijection on uint32 with full avalanche."""
    h = tf.bitwise.bitwise_xor(h, tf.bitwise.right_shift(h, 16)) * tf.constant(_MIX_1, tf.uint32)
    h = tf.bitwise.bitwise_xor(h, tf.bitwise.right_shift(h, 13)) * tf.constant(_MIX_2, tf.uint32)
    return tf.bitwise.bitwise_xor(h, tf.bitwise.right_shift(h, 16))


def unit_bits(index, key):
    """32 pseudo-random bits per unit: mix(mix(low ^ key[0]) + high + key[1]).

    Args:
        index: int64 tensor of unit indices (any shape); low and high are its
            two 32-bit halves.
        key: uint32 [2].

    Returns:
        uint32 tensor shaped like `index`.
    """
    low = tf.cast(tf.bitwise.bitwise_and(index, 0xFFFFFFFF), tf.uint32)
    high = tf.cast(tf.bitwise.right_shift(index, 32), tf.uint32)
    return _mix32(_mix32(tf.bitwise.bitwise_xor(low, key[0])) + high + key[1])


def dropout_keep_mask(shape, seed, rate: float):
    """Bernoulli(1 - rate) keep mask of `shape`, and its exact keep probability.

    Args:
        shape: static or dynamic shape of the mask.
        seed: int64 [2] stateless seed; two uint32 keys are drawn from it.
        rate: drop probability in [0, 1).

    Returns:
        (bool mask of `shape`, the keep probability as a Python float).
    """
    if not 0 <= rate < 1:
        raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
    threshold = min(round(rate * 2**32), 2**32 - 1)
    key = tf.random.stateless_uniform([2], seed=seed, minval=None, maxval=None, dtype=tf.uint32)
    shape = tf.convert_to_tensor(shape)
    index = tf.range(tf.reduce_prod(tf.cast(shape, tf.int64)), dtype=tf.int64)
    keep = unit_bits(index, key) >= tf.constant(threshold, tf.uint32)
    return tf.reshape(keep, shape), 1.0 - threshold / 2**32


@tf.custom_gradient
def add_bias(x, bias):
    """`x + bias` over the last axis, whose bias gradient is a matrix-vector product.

    Autodiff would sum the incoming gradient over all B * L rows with a
    reduction that XLA:CPU splits into an unfused tree of reduce-windows;
    `ones[1, B*L] @ dy` is the same sum as one GEMV, and made the
    discriminator's transformer layer about 7% faster (forward + backward).

    Args:
        x: [..., C].
        bias: [C], already in x's dtype.

    Returns:
        [..., C].
    """

    def grad(dy):
        # Sum half-precision gradients in float32, as the reduction would.
        rows = tf.reshape(tf.cast(dy, tf.float32), [-1, tf.shape(dy)[-1]])
        ones = tf.ones([1, tf.shape(rows)[0]], tf.float32)
        return dy, tf.cast(tf.reshape(tf.matmul(ones, rows), tf.shape(bias)), bias.dtype)

    return x + bias, grad


@tf.custom_gradient
def gelu(x):
    """GELU with the exact erf form, as `keras.activations.gelu` and the original code.

    gelu(x) = x * Phi(x), with Phi the standard normal CDF. The gradient,
    Phi(x) + x * phi(x), is written as one expression of x: autodiff of the
    erf splits it into several passes over the [B, L, 4H] activations under
    XLA:CPU, and this made a transformer layer's forward + backward about 2%
    faster.

    Args:
        x: any shape, float.

    Returns:
        Same shape and dtype.
    """

    def cdf(t):
        return 0.5 * (1.0 + tf.math.erf(t * tf.constant(math.sqrt(0.5), t.dtype)))

    def grad(dy):
        pdf = tf.exp(-0.5 * x * x) * tf.constant(1.0 / math.sqrt(2.0 * math.pi), x.dtype)
        return dy * (cdf(x) + x * pdf)

    return x * cdf(x), grad


def dense(layer, inputs):
    """What `layer(inputs)` computes, with the bias added by `add_bias` and GELU by `gelu`.

    For a `keras.layers.Dense` whose activation is linear or Keras' (exact)
    GELU; any other activation is applied as it is. A layer with LoRA or
    quantization enabled runs Keras' own call.

    Args:
        layer: a built `keras.layers.Dense`.
        inputs: [..., C_in], in the layer's compute dtype.

    Returns:
        [..., C_out].
    """
    if layer.lora_enabled or layer.quantization_mode is not None:
        return layer(inputs)
    x = keras.ops.matmul(inputs, keras.ops.cast(layer.kernel, inputs.dtype))
    if layer.bias is not None:
        x = add_bias(x, keras.ops.cast(layer.bias, x.dtype))
    if layer.activation is keras.activations.gelu:
        return gelu(x)
    return layer.activation(x)


def _heads_first(x):
    """[B, L, heads, d] -> [B, heads, L, d]."""
    return tf.transpose(x, (0, 2, 1, 3))


def _heads_first_transposed(x):
    """[B, L, heads, d] -> [B, heads, d, L]."""
    return tf.transpose(x, (0, 2, 3, 1))


def scaled_dot_product_attention(qkv, attention_bias, keep=None, keep_probability=1.0):
    """Softmax attention of every query over the keys, with dropout on the probabilities.

    The gradient is written out so that every product is a plain or
    right-transposed batched matmul. Autodiff takes dV = P^T dC and
    dK = dS^T Q, which contract the [L, L] operand over its leading axis;
    XLA:CPU runs that form about 2.5x slower than the others. Here they are
    computed transposed, dV^T = dC^T P and dK^T = Q^T dS, from transposed
    copies of the small [L, d] operands; the transposes back fold into the
    copy that assembles the QKV gradient. The maths is autodiff's. Arguments
    and result: `reference.scaled_dot_product_attention`'s.
    """
    dtype = qkv.dtype
    scale = 1.0 / float(qkv.shape[-1]) ** 0.5
    bias = tf.cast(attention_bias, tf.float32)

    @tf.custom_gradient
    def attend(qkv):
        query, key, value = (_heads_first(qkv[:, :, i]) for i in range(3))
        # Softmax in float32 even under mixed precision: -10000 overflows fp16 sums.
        scores = tf.cast(tf.matmul(query, key, transpose_b=True), tf.float32) * scale + bias
        probs = tf.nn.softmax(scores, axis=-1)
        dropped = apply_keep_mask(tf.cast(probs, dtype), keep, keep_probability)
        context = tf.matmul(dropped, value)  # [B, heads, L, d]

        def grad(d_context):
            d_context_t = _heads_first_transposed(d_context)  # [B, heads, d, L]
            d_value_t = tf.matmul(d_context_t, dropped)
            d_dropped = tf.matmul(_heads_first(d_context), value, transpose_b=True)
            d_probs = tf.cast(apply_keep_mask(d_dropped, keep, keep_probability), tf.float32)
            d_scores = probs * (d_probs - tf.reduce_sum(probs * d_probs, axis=-1, keepdims=True))
            d_scores = tf.cast(d_scores * scale, dtype)
            d_query = tf.matmul(d_scores, key)
            d_key_t = tf.matmul(_heads_first_transposed(qkv[:, :, 0]), d_scores)
            return tf.stack(
                [
                    tf.transpose(d_query, (0, 2, 1, 3)),
                    tf.transpose(d_key_t, (0, 3, 1, 2)),
                    tf.transpose(d_value_t, (0, 3, 1, 2)),
                ],
                axis=2,
            )

        return tf.transpose(context, (0, 2, 1, 3)), grad

    return attend(qkv)


# Vocabulary entries per block of the two-level searches over the vocabulary
# (the sampler's inverse CDF, the accuracy's argmax).
SAMPLING_BLOCK = 128
# XLA:CPU rewrites a reduction along an axis longer than 32 into a tree
# (reduce-window, then reduce) that is not fused with what it reduces, so the
# [M, V] scores it reads get written out once more first. Each block is
# therefore reduced as [4, 32]: under XLA this made the generator's output
# (loss, accuracy, sampling, gradients) about 1.5x faster.
_REDUCE_SPLIT = (SAMPLING_BLOCK // 32, 32)


def _vocab_blocks(scores):
    """[M, V] float32 -> [M, blocks, 4, 32], padded with float32's lowest value.

    The padding has probability 0 under any softmax and never wins a max.
    """
    vocab_size = scores.shape[-1] or tf.shape(scores)[-1]
    num_blocks = (vocab_size + SAMPLING_BLOCK - 1) // SAMPLING_BLOCK
    padded = tf.pad(
        scores,
        [[0, 0], [0, num_blocks * SAMPLING_BLOCK - vocab_size]],
        constant_values=tf.float32.min,
    )
    return tf.reshape(padded, [tf.shape(scores)[0], num_blocks, *_REDUCE_SPLIT])


def _softmax_blocks(scores):
    """Per-block softmax statistics of [M, V] float32 scores, without gradient.

    Returns:
        (blocks [M, K, 4, 32] from `_vocab_blocks`, block maxima [M, K], row
        maxima [M], block sums of exp(scores - row max) [M, K]). The loss and
        the sampler compute these the same way, so with temperature 1 XLA
        computes them once for both.
    """
    blocks = _vocab_blocks(tf.stop_gradient(scores))
    block_max = tf.reduce_max(blocks, axis=[2, 3])
    row_max = tf.reduce_max(block_max, axis=1)
    block_sums = tf.reduce_sum(tf.exp(blocks - row_max[:, None, None, None]), axis=[2, 3])
    return blocks, block_max, row_max, block_sums


def _block_rows(blocks, index):
    """blocks [M, K, 4, 32], index int32 [M] -> the chosen block of each row, [M, 128]."""
    flat = tf.reshape(blocks, [tf.shape(blocks)[0], -1, SAMPLING_BLOCK])
    return tf.gather(flat, index, batch_dims=1)


def inverse_cdf_sample(scores, uniforms):
    """Draws one id per row of softmax(scores): the first id whose CDF exceeds the uniform.

    The CDF is searched in two levels: the cumulative sums of blocks of
    `SAMPLING_BLOCK` probabilities locate the block, then the cumulative sum
    within that one block locates the token. Same result as one cumulative
    sum over the vocabulary, without its cost (a scan over V per row is slow
    under XLA on CPU). Arguments and result: `reference.inverse_cdf_sample`'s.
    """
    vocab_size = scores.shape[-1] or tf.shape(scores)[-1]
    blocks, _, row_max, block_sums = _softmax_blocks(scores)
    num_blocks = tf.shape(block_sums)[1]
    # Unnormalised CDF; the target is scaled by the total instead, so rounding
    # in the sums can never push u past the end.
    block_cdf = tf.cumsum(block_sums, axis=-1)  # [M, blocks]
    targets = tf.reshape(uniforms, [-1, 1]) * block_cdf[:, -1:]
    block = tf.minimum(
        tf.searchsorted(block_cdf, targets, side="right", out_type=tf.int32), num_blocks - 1
    )  # [M, 1]
    before = tf.where(block > 0, tf.gather(block_cdf, tf.maximum(block - 1, 0), batch_dims=1), 0.0)
    chosen = _block_rows(blocks, block[:, 0])
    within_cdf = before + tf.cumsum(tf.exp(chosen - row_max[:, None]), axis=-1)
    offset = tf.minimum(
        tf.searchsorted(within_cdf, targets, side="right", out_type=tf.int32), SAMPLING_BLOCK - 1
    )
    ids = tf.minimum(block * SAMPLING_BLOCK + offset, vocab_size - 1)
    return ids[:, 0]


@tf.custom_gradient
def _softmax_cross_entropy(scores, labels, row_max, total):
    """-log softmax(scores)[label] per row.

    Args:
        scores: float32 [M, V].
        labels: int32 [M].
        row_max: [M], the row maxima of `scores` (from `_softmax_blocks`).
        total: [M], the row sums of exp(scores - row_max).

    Returns:
        float32 [M]. The gradient, softmax - one_hot(label), flows to `scores`
        only and is written as one expression, so XLA computes it in a single
        pass over [M, V].
    """
    nll = row_max + tf.math.log(total) - tf.gather(scores, labels, batch_dims=1)

    def grad(upstream):
        dscores = (
            tf.exp(scores - row_max[:, None]) * (upstream / total)[:, None]
            - tf.one_hot(labels, tf.shape(scores)[1], dtype=scores.dtype) * upstream[:, None]
        )
        return dscores, None, None, None

    return nll, grad


def _first_argmax(blocks, block_max, row_max):
    """tf.argmax over the vocabulary (first index of the maximum) from the block maxima.

    Args: as returned by `_softmax_blocks`. Returns: int32 [M].
    """
    # The first block holding the row's maximum, then the first index within it.
    top_block = tf.argmax(
        tf.cast(tf.equal(block_max, row_max[:, None]), tf.int32), axis=1, output_type=tf.int32
    )
    chosen = _block_rows(blocks, top_block)
    offset = tf.argmax(
        tf.cast(tf.equal(chosen, row_max[:, None]), tf.int32), axis=1, output_type=tf.int32
    )
    return top_block * SAMPLING_BLOCK + offset


def cross_entropy_and_argmax(scores, labels):
    """-log softmax(scores)[label] and the predicted id of every row.

    Both come from one pass of per-block statistics (`_softmax_blocks`).

    Args:
        scores: float32 [M, V].
        labels: int32 [M].

    Returns:
        (float32 [M] negative log-likelihoods, int32 [M] argmax ids).
    """
    blocks, block_max, row_max, block_sums = _softmax_blocks(scores)
    nll = _softmax_cross_entropy(scores, labels, row_max, tf.reduce_sum(block_sums, axis=1))
    return nll, _first_argmax(blocks, block_max, row_max)
