"""Output heads: the generator's masked-LM head and the discriminator's per-token head."""

from __future__ import annotations

from typing import Optional

import keras
from keras import ops

from electra_tf.modeling.kernels import KERNEL_SETS, resolve_kernels
from electra_tf.modeling.layers import ElectraEmbeddings, truncated_normal


@keras.saving.register_keras_serializable(package="electra_tf")
class MaskedLMHead(keras.layers.Layer):
    """Generator head: gather masked positions, dense+GELU, LayerNorm, tied output.

    Only the N masked positions are scored, so no [B, L, V] tensor is ever
    built. The output matrix is the shared input word-embedding table
    (transposed) plus a per-token bias, as in the original code.

    Args:
        embeddings: the `ElectraEmbeddings` whose word table is tied to the output.
        initializer_range: stddev of the truncated-normal initializer.
        layer_norm_epsilon: LayerNorm epsilon.
        kernels: the kernel set of the dense layer and the output bias (see
            `electra_tf.modeling.kernels`; not part of the config).
    """

    def __init__(
        self,
        embeddings: ElectraEmbeddings,
        initializer_range: float = 0.02,
        layer_norm_epsilon: float = 1e-12,
        kernels: str = "reference",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.embeddings = embeddings
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernels = resolve_kernels(kernels)
        # Keras' GELU is the exact erf form, as the original code's.
        self.dense = keras.layers.Dense(
            embeddings.embedding_size,
            activation="gelu",
            kernel_initializer=truncated_normal(initializer_range),
            dtype=self.dtype_policy,
            name="dense",
        )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm"
        )

    @classmethod
    def tied_to(cls, encoder, name: str, kernels: Optional[str] = None) -> "MaskedLMHead":
        """A head tied to `encoder`'s word table, with its initializer, epsilon, dtype
        policy and (unless `kernels` is given) kernel set."""
        return cls(
            encoder.embeddings,
            encoder.initializer_range,
            encoder.layer_norm_epsilon,
            kernels=kernels or encoder.kernels,
            dtype=encoder.dtype_policy,
            name=name,
        )

    def build(self, sequence_output_shape, masked_lm_positions_shape=None):
        self.dense.build(sequence_output_shape)
        self.layer_norm.build(tuple(sequence_output_shape[:-1]) + (self.embeddings.embedding_size,))
        self.output_bias = self.add_weight(
            shape=(self.embeddings.vocab_size,), initializer="zeros", name="output_bias"
        )
        self.built = True

    def call(self, sequence_output, masked_lm_positions):
        """Scores the vocabulary at the masked positions.

        Args:
            sequence_output: generator hidden states, [B, L, Hg].
            masked_lm_positions: int32 [B, N].

        Returns:
            Logits [B, N, V] in the compute dtype.
        """
        kernels = KERNEL_SETS[self.kernels]
        gathered = ops.take_along_axis(sequence_output, masked_lm_positions[:, :, None], axis=1)
        hidden = self.layer_norm(kernels.dense(self.dense, gathered))
        return kernels.add_bias(
            self.embeddings.attend(hidden), ops.cast(self.output_bias, hidden.dtype)
        )

    def compute_output_shape(self, sequence_output_shape, masked_lm_positions_shape):
        return tuple(masked_lm_positions_shape) + (self.embeddings.vocab_size,)


@keras.saving.register_keras_serializable(package="electra_tf")
class ReplacedTokenDetectionHead(keras.layers.Layer):
    """Discriminator head: dense(H) + GELU, then one logit per token.

    Args:
        hidden_size: H of the discriminator.
        initializer_range: stddev of the truncated-normal initializer.
        kernels: the kernel set of the dense layers (see
            `electra_tf.modeling.kernels`; not part of the config).
    """

    def __init__(
        self,
        hidden_size: int,
        initializer_range: float = 0.02,
        kernels: str = "reference",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.kernels = resolve_kernels(kernels)
        init = truncated_normal(initializer_range)
        self.dense = keras.layers.Dense(
            hidden_size,
            activation="gelu",
            kernel_initializer=init,
            dtype=self.dtype_policy,
            name="dense",
        )
        # The original's final logit layer uses tf.layers.dense's default (Glorot uniform).
        self.logit = keras.layers.Dense(
            1, kernel_initializer="glorot_uniform", dtype=self.dtype_policy, name="logit"
        )

    @classmethod
    def on(cls, encoder, name: str) -> "ReplacedTokenDetectionHead":
        """A head for `encoder`'s states, with its width, initializer, dtype policy and kernels."""
        return cls(
            encoder.hidden_size,
            encoder.initializer_range,
            kernels=encoder.kernels,
            dtype=encoder.dtype_policy,
            name=name,
        )

    def build(self, sequence_shape):
        self.dense.build(sequence_shape)
        self.logit.build(tuple(sequence_shape[:-1]) + (self.hidden_size,))
        self.built = True

    def call(self, sequence_output):
        """Args: sequence_output [B, L, H]. Returns logits [B, L] (> 0: replaced)."""
        kernels = KERNEL_SETS[self.kernels]
        hidden = kernels.dense(self.dense, sequence_output)
        return ops.squeeze(kernels.dense(self.logit, hidden), axis=-1)

    def compute_output_shape(self, sequence_shape):
        return tuple(sequence_shape[:-1])

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, initializer_range=self.initializer_range)
        return config
