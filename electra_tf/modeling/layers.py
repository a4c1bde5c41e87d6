"""Building blocks of the ELECTRA encoder: embeddings, self-attention, transformer layer.

The dense layers, attention and dropout masks run the kernel set each layer
is built with (`kernels="reference"` or `"cpu_fast"`, see
`electra_tf.modeling.kernels`); the layers' weights and configs are the same
under every set.

Conventions: B = batch, L = sequence length, E = embedding size, H = hidden
size, V = vocabulary size. Masks are int32 (1 = real token, 0 = padding).
"""

from __future__ import annotations

import keras
from keras import ops

from electra_tf.modeling.kernels import KERNEL_SETS, resolve_kernels


def truncated_normal(stddev: float) -> keras.initializers.Initializer:
    """The original code's initializer: truncated normal, stddev 0.02."""
    return keras.initializers.TruncatedNormal(stddev=stddev)


def _fold_in_replica(seed):
    """A SeedGenerator's seed made different on every tf.distribute replica (int64 [2]).

    The replica id is tf.distribute's: there is no Keras equivalent, and the
    other backends take the seed as it is.
    """
    import tensorflow as tf

    seed = tf.cast(seed, tf.int64)
    context = tf.distribute.get_replica_context()
    if context is not None and context.num_replicas_in_sync > 1:
        replica = tf.cast(context.replica_id_in_sync_group, tf.int64)
        seed = seed + tf.stack([tf.constant(0, tf.int64), replica + 1]) * 1_000_003
    return seed


@keras.saving.register_keras_serializable(package="electra_tf")
class ReplicaDropout(keras.layers.Layer):
    """Inverted dropout whose noise differs on every tf.distribute replica.

    Keras' Dropout keeps its seed in a mirrored variable, so under
    MirroredStrategy all replicas draw the same mask (for different examples).
    On the TensorFlow backend, folding the replica id into the stateless seed
    gives each replica its own.
    The seed state is a Keras SeedGenerator, checkpointed with the run. The
    mask is drawn from that seed by the layer's kernel set.

    Args:
        rate: fraction of units dropped, in [0, 1).
        kernels: the kernel set that draws and applies the masks (see
            `electra_tf.modeling.kernels`; not part of the config).
    """

    def __init__(self, rate: float, kernels: str = "reference", **kwargs):
        super().__init__(**kwargs)
        self.rate = rate
        self.kernels = resolve_kernels(kernels)
        self.seed_generator = keras.random.SeedGenerator(name=f"{self.name}_seed")

    def keep_mask(self, shape, training=None):
        """The next (bool keep mask of `shape`, keep probability) of this layer.

        (None, 1.0) when the layer is inactive (not training, or rate 0).
        """
        if not training or self.rate == 0:
            return None, 1.0
        seed = self.seed_generator.next()
        if keras.backend.backend() == "tensorflow":
            seed = _fold_in_replica(seed)
        return KERNEL_SETS[self.kernels].dropout_keep_mask(shape, seed, self.rate)

    def call(self, inputs, training=None):
        keep, keep_probability = self.keep_mask(ops.shape(inputs), training)
        return KERNEL_SETS[self.kernels].apply_keep_mask(inputs, keep, keep_probability)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(rate=self.rate)
        return config


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
        kernels: the kernel set of the dropout (not part of the config).
    """

    def __init__(
        self,
        vocab_size: int,
        embedding_size: int,
        max_position_embeddings: int = 512,
        type_vocab_size: int = 2,
        dropout_rate: float = 0.1,
        initializer_range: float = 0.02,
        layer_norm_epsilon: float = 1e-12,
        kernels: str = "reference",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernels = resolve_kernels(kernels)
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm"
        )
        self.dropout = ReplicaDropout(
            dropout_rate, kernels=self.kernels, dtype=self.dtype_policy, name="dropout"
        )

    def build(self, input_shape=None):
        init = truncated_normal(self.initializer_range)
        self.word_embeddings = self.add_weight(
            shape=(self.vocab_size, self.embedding_size), initializer=init, name="word_embeddings"
        )
        self.position_embeddings = self.add_weight(
            shape=(self.max_position_embeddings, self.embedding_size),
            initializer=init,
            name="position_embeddings",
        )
        self.token_type_embeddings = self.add_weight(
            shape=(self.type_vocab_size, self.embedding_size),
            initializer=init,
            name="token_type_embeddings",
        )
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
        return self.embed(self.word_embeddings, input_ids, segment_ids, training)

    def embed(self, word_table, input_ids, segment_ids, training=None):
        """Embeds token ids with `word_table` [V, E] and this layer's other weights.

        `call` passes the layer's own table; `DisentangledEmbeddings` passes
        its own view of it.
        """
        length = ops.shape(input_ids)[1]
        x = ops.take(word_table, input_ids, axis=0)
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
        config.update(
            vocab_size=self.vocab_size,
            embedding_size=self.embedding_size,
            max_position_embeddings=self.max_position_embeddings,
            type_vocab_size=self.type_vocab_size,
            dropout_rate=self.dropout_rate,
            initializer_range=self.initializer_range,
            layer_norm_epsilon=self.layer_norm_epsilon,
        )
        return config


class DisentangledEmbeddings(keras.layers.Layer):
    """Gradient-disentangled embedding sharing (DeBERTaV3, He et al. 2021, Section 3).

    The discriminator's token table is the generator's table E, held without
    gradient, plus a residual ΔE of its own initialised to zero:

        E_D = stop_gradient(E) + ΔE

    so the discriminator's loss updates only ΔE and the generator's masked-LM
    loss alone updates E: the two no longer pull the shared table in opposite
    directions. Position and token-type embeddings and the LayerNorm are
    shared as in ELECTRA. Only pre-training uses this layer; an export holds
    the plain table E + ΔE (see `electra_tf.modeling.electra.plain_discriminator`).

    Args:
        shared: the generator's `ElectraEmbeddings`.
    """

    def __init__(self, shared: ElectraEmbeddings, **kwargs):
        super().__init__(**kwargs)
        self.shared = shared
        self.vocab_size = shared.vocab_size
        self.embedding_size = shared.embedding_size

    def build(self, input_shape=None):
        self.word_embeddings_delta = self.add_weight(
            shape=(self.vocab_size, self.embedding_size),
            initializer="zeros",
            name="word_embeddings_delta",
        )
        self.built = True

    def word_table(self):
        """E_D = stop_gradient(E) + ΔE, [V, E]."""
        return ops.stop_gradient(self.shared.word_embeddings) + self.word_embeddings_delta

    def call(self, input_ids, segment_ids, training=None):
        """Args: input_ids, segment_ids int32 [B, L]. Returns [B, L, E]."""
        return self.shared.embed(self.word_table(), input_ids, segment_ids, training)

    def compute_output_shape(self, input_ids_shape, segment_ids_shape=None):
        return tuple(input_ids_shape) + (self.embedding_size,)


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
        kernels: the kernel set of the projections, attention and dropout
            (see `electra_tf.modeling.kernels`; not part of the config).
    """

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        attention_dropout_rate: float = 0.1,
        initializer_range: float = 0.02,
        kernels: str = "reference",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size={hidden_size} is not divisible by num_heads={num_heads}")
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.head_size = hidden_size // num_heads
        self.attention_dropout_rate = attention_dropout_rate
        self.initializer_range = initializer_range
        self.kernels = resolve_kernels(kernels)
        init = truncated_normal(initializer_range)
        self.qkv = keras.layers.Dense(
            3 * hidden_size, kernel_initializer=init, dtype=self.dtype_policy, name="qkv"
        )
        self.output_dense = keras.layers.Dense(
            hidden_size, kernel_initializer=init, dtype=self.dtype_policy, name="output"
        )
        self.dropout = ReplicaDropout(
            attention_dropout_rate,
            kernels=self.kernels,
            dtype=self.dtype_policy,
            name="attention_dropout",
        )

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
            attention_bias: float [B, 1, 1, L] (or [B, 1, L, L] for a causal
                encoder), 0 for visible keys and -10000 for padding and, in
                a causal encoder, hidden positions (the original code's
                additive mask).

        Returns:
            [B, L, H].
        """
        kernels = KERNEL_SETS[self.kernels]
        batch, length = ops.shape(hidden)[0], ops.shape(hidden)[1]
        qkv = ops.reshape(
            kernels.dense(self.qkv, hidden), (batch, length, 3, self.num_heads, self.head_size)
        )
        keep, keep_probability = self.dropout.keep_mask(
            (batch, self.num_heads, length, length), training
        )
        # Keras casts float inputs to the compute dtype; the bias is cast back to float32.
        context = kernels.scaled_dot_product_attention(qkv, attention_bias, keep, keep_probability)
        return kernels.dense(
            self.output_dense, ops.reshape(context, (batch, length, self.hidden_size))
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            num_heads=self.num_heads,
            attention_dropout_rate=self.attention_dropout_rate,
            initializer_range=self.initializer_range,
        )
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
        kernels: the kernel set of the dense layers, attention and dropout
            (see `electra_tf.modeling.kernels`; not part of the config).
    """

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        intermediate_size: int,
        dropout_rate: float = 0.1,
        attention_dropout_rate: float = 0.1,
        initializer_range: float = 0.02,
        layer_norm_epsilon: float = 1e-12,
        kernels: str = "reference",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.dropout_rate = dropout_rate
        self.attention_dropout_rate = attention_dropout_rate
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernels = resolve_kernels(kernels)
        init = truncated_normal(initializer_range)
        policy = self.dtype_policy
        self.attention = SelfAttention(
            hidden_size,
            num_heads,
            attention_dropout_rate,
            initializer_range,
            kernels=self.kernels,
            dtype=policy,
            name="attention",
        )
        self.attention_dropout = ReplicaDropout(
            dropout_rate, kernels=self.kernels, dtype=policy, name="attention_output_dropout"
        )
        self.attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=policy, name="attention_layer_norm"
        )
        # Keras' GELU is the exact erf form, as the original code's.
        self.intermediate = keras.layers.Dense(
            intermediate_size,
            activation="gelu",
            kernel_initializer=init,
            dtype=policy,
            name="intermediate",
        )
        self.ffn_output = keras.layers.Dense(
            hidden_size, kernel_initializer=init, dtype=policy, name="ffn_output"
        )
        self.ffn_dropout = ReplicaDropout(
            dropout_rate, kernels=self.kernels, dtype=policy, name="ffn_dropout"
        )
        self.ffn_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=policy, name="ffn_layer_norm"
        )

    def build(self, input_shape):
        self.attention.build(input_shape)
        self.attention_layer_norm.build(input_shape)
        self.intermediate.build(input_shape)
        self.ffn_output.build(tuple(input_shape[:-1]) + (self.intermediate_size,))
        self.ffn_layer_norm.build(input_shape)
        self.built = True

    def call(self, hidden, attention_bias, training=None):
        """Args: hidden [B, L, H]; attention_bias [B, 1, 1 or L, L]. Returns [B, L, H]."""
        kernels = KERNEL_SETS[self.kernels]
        attended = self.attention(hidden, attention_bias, training=training)
        hidden = self.attention_layer_norm(
            hidden + self.attention_dropout(attended, training=training)
        )
        ffn = kernels.dense(self.ffn_output, kernels.dense(self.intermediate, hidden))
        return self.ffn_layer_norm(hidden + self.ffn_dropout(ffn, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            num_heads=self.num_heads,
            intermediate_size=self.intermediate_size,
            dropout_rate=self.dropout_rate,
            attention_dropout_rate=self.attention_dropout_rate,
            initializer_range=self.initializer_range,
            layer_norm_epsilon=self.layer_norm_epsilon,
        )
        return config


ATTENTION_DIRECTIONS = ("bidirectional", "left_to_right", "right_to_left")


def attention_bias_from_mask(input_mask, dtype="float32", direction: str = "bidirectional"):
    """Turns an int [B, L] padding mask into an additive attention bias (0 / -10000).

    Args:
        input_mask: int [B, L], 1 for real tokens.
        dtype: the bias dtype.
        direction: "bidirectional" (every position sees every real position),
            or "left_to_right" / "right_to_left" (a position sees itself and
            the positions before / after it: the towers of Electric's cloze
            generator).

    Returns:
        [B, 1, 1, L] for "bidirectional", else [B, 1, L, L] (query, key).
    """
    mask = ops.cast(input_mask, dtype)
    # Two expand_dims rather than [:, None, None, :]: LiteRT's converter has no kernel for a
    # strided slice that adds axes to a tensor of unknown shape.
    bias = ops.expand_dims(ops.expand_dims(1.0 - mask, 1), 1) * -10000.0
    if direction == "bidirectional":
        return bias
    length = ops.shape(input_mask)[1]
    positions = ops.arange(length)
    if direction == "left_to_right":
        visible = positions[None, :] <= positions[:, None]  # key <= query
    elif direction == "right_to_left":
        visible = positions[None, :] >= positions[:, None]
    else:
        raise ValueError(f"direction={direction!r}: choose one of {ATTENTION_DIRECTIONS}.")
    return bias + (1.0 - ops.cast(visible, dtype))[None, None] * -10000.0
