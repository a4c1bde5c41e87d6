"""Building blocks of the ELECTRA encoder: embeddings, self-attention, transformer layer.

Conventions: B = batch, L = sequence length, E = embedding size, H = hidden
size, V = vocabulary size. Masks are int32 (1 = real token, 0 = padding).
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf
from keras import ops


def truncated_normal(stddev: float) -> keras.initializers.Initializer:
    """The original code's initializer: truncated normal, stddev 0.02."""
    return keras.initializers.TruncatedNormal(stddev=stddev)


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
    threshold = min(round(rate * 2 ** 32), 2 ** 32 - 1)
    key = tf.random.stateless_uniform([2], seed=seed, minval=None, maxval=None,
                                      dtype=tf.uint32)
    shape = tf.convert_to_tensor(shape)
    index = tf.range(tf.reduce_prod(tf.cast(shape, tf.int64)), dtype=tf.int64)
    keep = unit_bits(index, key) >= tf.constant(threshold, tf.uint32)
    return tf.reshape(keep, shape), 1.0 - threshold / 2 ** 32


def apply_keep_mask(x, keep, keep_probability: float):
    """Inverted dropout of x with a given bool keep mask (None: no dropout)."""
    if keep is None:
        return x
    return tf.where(keep, x * ops.cast(1.0 / keep_probability, x.dtype), tf.zeros_like(x))


@keras.saving.register_keras_serializable(package="electra_tf")
class ReplicaDropout(keras.layers.Layer):
    """Inverted dropout whose noise differs on every tf.distribute replica.

    Keras' Dropout keeps its seed in a mirrored variable, so under
    MirroredStrategy all replicas draw the same mask (for different examples).
    Folding the replica id into the stateless seed gives each replica its own.
    The seed state is a Keras SeedGenerator, checkpointed with the run. The
    mask comes from `dropout_keep_mask` (a keyed hash of each unit's index).

    Args:
        rate: fraction of units dropped, in [0, 1).
    """

    def __init__(self, rate: float, **kwargs):
        super().__init__(**kwargs)
        self.rate = rate
        self.seed_generator = keras.random.SeedGenerator(name=f"{self.name}_seed")

    def keep_mask(self, shape, training=None):
        """The next (bool keep mask of `shape`, keep probability) of this layer.

        (None, 1.0) when the layer is inactive (not training, or rate 0).
        """
        if not training or self.rate == 0:
            return None, 1.0
        seed = tf.cast(self.seed_generator.next(), tf.int64)
        context = tf.distribute.get_replica_context()
        if context is not None and context.num_replicas_in_sync > 1:
            replica = tf.cast(context.replica_id_in_sync_group, tf.int64)
            seed = seed + tf.stack([tf.constant(0, tf.int64), replica + 1]) * 1_000_003
        return dropout_keep_mask(shape, seed, self.rate)

    def call(self, inputs, training=None):
        keep, keep_probability = self.keep_mask(tf.shape(inputs), training)
        return apply_keep_mask(inputs, keep, keep_probability)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(rate=self.rate)
        return config


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


@keras.saving.register_keras_serializable(package="electra_tf")
class Dense(keras.layers.Dense):
    """keras.layers.Dense whose bias is added by `add_bias` (same weights, same maths)."""

    def call(self, inputs, training=None):
        x = ops.matmul(inputs, self.kernel)
        if self.bias is not None:
            x = add_bias(x, ops.cast(self.bias, x.dtype))
        if self.activation is not None:
            x = self.activation(x)
        return x


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraEmbeddings(keras.layers.Layer):
    """Word + position + token-type embeddings, then LayerNorm and dropout.

    One instance is shared by the generator and the discriminator, as in the
    original code (which shares all four under `electra/embeddings`). It also
    provides the tied output projection of the generator's MLM head through
    `attend()`.

    Args:
        vocab_size: V.
        embedding_size: E.
        max_position_embeddings: longest sequence supported.
        type_vocab_size: number of segment ids.
        dropout_rate: dropout after the LayerNorm.
        initializer_range: stddev of the truncated-normal initializer.
        layer_norm_epsilon: LayerNorm epsilon.
    """

    def __init__(self, vocab_size: int, embedding_size: int, max_position_embeddings: int = 512,
                 type_vocab_size: int = 2, dropout_rate: float = 0.1,
                 initializer_range: float = 0.02, layer_norm_epsilon: float = 1e-12, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm")
        self.dropout = ReplicaDropout(dropout_rate, dtype=self.dtype_policy, name="dropout")

    def build(self, input_shape=None):
        init = truncated_normal(self.initializer_range)
        self.word_embeddings = self.add_weight(
            shape=(self.vocab_size, self.embedding_size), initializer=init, name="word_embeddings")
        self.position_embeddings = self.add_weight(
            shape=(self.max_position_embeddings, self.embedding_size), initializer=init,
            name="position_embeddings")
        self.token_type_embeddings = self.add_weight(
            shape=(self.type_vocab_size, self.embedding_size), initializer=init,
            name="token_type_embeddings")
        self.layer_norm.build((None, None, self.embedding_size))
        self.built = True

    def call(self, input_ids, segment_ids, training=None):
        """Embeds token ids.

        Args:
            input_ids: int32 [B, L].
            segment_ids: int32 [B, L].

        Returns:
            [B, L, E] in the layer's compute dtype.
        """
        length = ops.shape(input_ids)[1]
        x = ops.take(self.word_embeddings, input_ids, axis=0)
        x = x + ops.expand_dims(self.position_embeddings[:length], 0)
        x = x + ops.take(self.token_type_embeddings, segment_ids, axis=0)
        x = self.layer_norm(x)
        return self.dropout(x, training=training)

    def attend(self, hidden):
        """Scores hidden states against every word embedding (tied output layer).

        Args:
            hidden: [..., E].

        Returns:
            [..., V] = hidden @ word_embeddings^T.
        """
        table = ops.cast(self.word_embeddings, hidden.dtype)
        return ops.matmul(hidden, ops.transpose(table))

    def compute_output_shape(self, input_ids_shape, segment_ids_shape=None):  # noqa: D401
        return tuple(input_ids_shape) + (self.embedding_size,)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, embedding_size=self.embedding_size,
                      max_position_embeddings=self.max_position_embeddings,
                      type_vocab_size=self.type_vocab_size, dropout_rate=self.dropout_rate,
                      initializer_range=self.initializer_range,
                      layer_norm_epsilon=self.layer_norm_epsilon)
        return config


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
    copy that assembles the QKV gradient. The maths is autodiff's.

    Args:
        qkv: [B, L, 3, heads, d], the query, key and value projections.
        attention_bias: float [B, 1, 1, L], added to the float32 scores.
        keep: bool [B, heads, L, L] dropout keep mask, or None for no dropout.
        keep_probability: the mask's keep probability.

    Returns:
        Context vectors [B, L, heads, d] in qkv's dtype.
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
            return tf.stack([tf.transpose(d_query, (0, 2, 1, 3)),
                             tf.transpose(d_key_t, (0, 3, 1, 2)),
                             tf.transpose(d_value_t, (0, 3, 1, 2))], axis=2)

        return tf.transpose(context, (0, 2, 1, 3)), grad

    return attend(qkv)


@keras.saving.register_keras_serializable(package="electra_tf")
class SelfAttention(keras.layers.Layer):
    """Multi-head self-attention with one fused QKV projection.

    A single [H, 3H] matmul instead of three [H, H] ones: the same maths as
    BERT's separate query/key/value layers, fewer kernel launches.

    Args:
        hidden_size: H.
        num_heads: number of heads; H must be divisible by it.
        attention_dropout_rate: dropout on the attention probabilities.
        initializer_range: stddev of the truncated-normal initializer.
    """

    def __init__(self, hidden_size: int, num_heads: int, attention_dropout_rate: float = 0.1,
                 initializer_range: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size={hidden_size} is not divisible by num_heads={num_heads}")
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.head_size = hidden_size // num_heads
        self.attention_dropout_rate = attention_dropout_rate
        self.initializer_range = initializer_range
        init = truncated_normal(initializer_range)
        self.qkv = Dense(3 * hidden_size, kernel_initializer=init, dtype=self.dtype_policy,
                         name="qkv")
        self.output_dense = Dense(hidden_size, kernel_initializer=init, dtype=self.dtype_policy,
                                  name="output")
        self.dropout = ReplicaDropout(attention_dropout_rate, dtype=self.dtype_policy,
                                            name="attention_dropout")

    def build(self, input_shape):
        self.qkv.build(input_shape)
        self.output_dense.build(tuple(input_shape[:-1]) + (self.hidden_size,))
        # Only its keep_mask() is used (inside the attention), so it is never called.
        self.dropout.build(None)
        self.built = True

    def call(self, hidden, attention_bias, training=None):
        """Attends every position to every unmasked position.

        Args:
            hidden: [B, L, H].
            attention_bias: float [B, 1, 1, L], 0 for real keys and -10000 for
                padding (the original code's additive mask).

        Returns:
            [B, L, H].
        """
        batch, length = ops.shape(hidden)[0], ops.shape(hidden)[1]
        qkv = ops.reshape(self.qkv(hidden), (batch, length, 3, self.num_heads, self.head_size))
        keep, keep_probability = self.dropout.keep_mask(
            tf.stack([batch, self.num_heads, length, length]), training)
        # Keras casts float inputs to the compute dtype; the bias is cast back to float32.
        context = scaled_dot_product_attention(qkv, attention_bias, keep, keep_probability)
        return self.output_dense(ops.reshape(context, (batch, length, self.hidden_size)))

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, num_heads=self.num_heads,
                      attention_dropout_rate=self.attention_dropout_rate,
                      initializer_range=self.initializer_range)
        return config


@keras.saving.register_keras_serializable(package="electra_tf")
class TransformerLayer(keras.layers.Layer):
    """One post-LayerNorm BERT block: attention, add & norm, GELU FFN, add & norm.

    Args:
        hidden_size: H.
        num_heads: attention heads.
        intermediate_size: FFN inner width (4H in every preset).
        dropout_rate: dropout on the attention output and the FFN output.
        attention_dropout_rate: dropout on attention probabilities.
        initializer_range: stddev of the truncated-normal initializer.
        layer_norm_epsilon: LayerNorm epsilon.
    """

    def __init__(self, hidden_size: int, num_heads: int, intermediate_size: int,
                 dropout_rate: float = 0.1, attention_dropout_rate: float = 0.1,
                 initializer_range: float = 0.02, layer_norm_epsilon: float = 1e-12, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.dropout_rate = dropout_rate
        self.attention_dropout_rate = attention_dropout_rate
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        init = truncated_normal(initializer_range)
        policy = self.dtype_policy
        self.attention = SelfAttention(hidden_size, num_heads, attention_dropout_rate,
                                       initializer_range, dtype=policy, name="attention")
        self.attention_dropout = ReplicaDropout(dropout_rate, dtype=policy,
                                                      name="attention_output_dropout")
        self.attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=policy, name="attention_layer_norm")
        self.intermediate = Dense(
            intermediate_size, activation=exact_gelu, kernel_initializer=init, dtype=policy,
            name="intermediate")
        self.ffn_output = Dense(hidden_size, kernel_initializer=init, dtype=policy,
                                name="ffn_output")
        self.ffn_dropout = ReplicaDropout(dropout_rate, dtype=policy, name="ffn_dropout")
        self.ffn_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=policy, name="ffn_layer_norm")

    def build(self, input_shape):
        self.attention.build(input_shape)
        self.attention_layer_norm.build(input_shape)
        self.intermediate.build(input_shape)
        self.ffn_output.build(tuple(input_shape[:-1]) + (self.intermediate_size,))
        self.ffn_layer_norm.build(input_shape)
        self.built = True

    def call(self, hidden, attention_bias, training=None):
        """Args: hidden [B, L, H]; attention_bias [B, 1, 1, L]. Returns [B, L, H]."""
        attended = self.attention(hidden, attention_bias, training=training)
        hidden = self.attention_layer_norm(
            hidden + self.attention_dropout(attended, training=training))
        ffn = self.ffn_output(self.intermediate(hidden))
        return self.ffn_layer_norm(hidden + self.ffn_dropout(ffn, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, num_heads=self.num_heads,
                      intermediate_size=self.intermediate_size, dropout_rate=self.dropout_rate,
                      attention_dropout_rate=self.attention_dropout_rate,
                      initializer_range=self.initializer_range,
                      layer_norm_epsilon=self.layer_norm_epsilon)
        return config


@keras.saving.register_keras_serializable(package="electra_tf")
@tf.custom_gradient
def exact_gelu(x):
    """GELU with the exact erf form, as the original code (not the tanh approximation).

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


def attention_bias_from_mask(input_mask, dtype="float32"):
    """Turns an int [B, L] padding mask into an additive [B, 1, 1, L] bias (0 / -10000)."""
    mask = ops.cast(input_mask, dtype)
    return (1.0 - mask)[:, None, None, :] * -10000.0
