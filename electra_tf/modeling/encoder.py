"""The ELECTRA encoder: embeddings (optionally shared), projection, transformer stack."""

from __future__ import annotations

from typing import Optional

import keras

from electra_tf.config import ModelConfig
from electra_tf.modeling.kernels import resolve_kernels
from electra_tf.modeling.layers import (
    ATTENTION_DIRECTIONS,
    ElectraEmbeddings,
    TransformerLayer,
    attention_bias_from_mask,
)

INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")


def token_inputs(*extra_names: str) -> dict:
    """Symbolic int32 [B, L] inputs named `INPUT_NAMES` and then `extra_names`."""
    return {
        name: keras.Input(shape=(None,), dtype="int32", name=name)
        for name in INPUT_NAMES + extra_names
    }


# What an encoder is, besides its weights: the `ModelConfig` fields it was built with.
ARCHITECTURE_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_layers",
    "num_heads",
    "intermediate_size",
    "embedding_size",
    "max_position_embeddings",
    "type_vocab_size",
    "dropout_rate",
    "attention_dropout_rate",
    "initializer_range",
    "layer_norm_epsilon",
)


def architecture(encoder) -> dict:
    """{field: value} of `ARCHITECTURE_FIELDS` for an `ElectraEncoder` (`ModelConfig(**...)`)."""
    return {name: getattr(encoder, name) for name in ARCHITECTURE_FIELDS}


class BuiltOnEncoder:
    """Serialises a Keras model built as `cls(encoder, **fields)`.

    Its config is its name, its encoder's config and `fields`
    (`config_with_encoder`); `from_config` builds the encoder again first.
    """

    def config_with_encoder(self, **fields) -> dict:
        """`get_config()` of the model: its name, its encoder's config and `fields`."""
        return {
            "name": self.name,
            "trainable": self.trainable,
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            **fields,
        }

    def get_config(self):
        return self.config_with_encoder()

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraEncoder(keras.Model):
    """A post-LN BERT encoder with ELECTRA's separate embedding size.

    When `embedding_size != hidden_size` a dense `embeddings_project` maps the
    embeddings to the hidden size inside this model (so a generator and a
    discriminator of different widths can share one embedding layer). There is
    no pooler: ELECTRA's "pooled output" is the final hidden state of [CLS].

    Inputs: a dict of int32 [B, L] tensors `input_ids`, `input_mask`,
    `segment_ids`. Output: the final hidden states, [B, L, H].

    Args:
        vocab_size, hidden_size, num_layers, num_heads, intermediate_size,
        embedding_size, max_position_embeddings, type_vocab_size, dropout_rate,
        attention_dropout_rate, initializer_range, layer_norm_epsilon: see
            `electra_tf.config.ModelConfig`.
        attention_direction: "bidirectional" (BERT), or "left_to_right" /
            "right_to_left": each position attends to itself and the
            positions before / after it (the towers of Electric's generator).
        embeddings: an existing `ElectraEmbeddings` (shared weights) or
            `DisentangledEmbeddings` to use. None creates a fresh one. Not
            part of the serialized config: a reloaded encoder owns its
            embeddings.
        kernels: the kernel set its layers run, "reference" (Keras layers and
            plain ops), "cpu_fast" or "auto" (see `electra_tf.modeling.kernels`).
            Not part of the serialized config: a reloaded encoder runs the
            reference kernels unless built again with others
            (`with_kernels`).
        dtype: the Keras dtype policy (default: the global one).
    """

    def __init__(
        self,
        vocab_size: int,
        hidden_size: int,
        num_layers: int,
        num_heads: int,
        intermediate_size: int,
        embedding_size: int,
        max_position_embeddings: int = 512,
        type_vocab_size: int = 2,
        dropout_rate: float = 0.1,
        attention_dropout_rate: float = 0.1,
        initializer_range: float = 0.02,
        layer_norm_epsilon: float = 1e-12,
        attention_direction: str = "bidirectional",
        embeddings: Optional[keras.layers.Layer] = None,
        kernels: str = "reference",
        dtype=None,
        **kwargs,
    ):
        kernels = resolve_kernels(kernels)
        # === Layers ===
        self.embeddings = embeddings or ElectraEmbeddings(
            vocab_size,
            embedding_size,
            max_position_embeddings,
            type_vocab_size,
            dropout_rate,
            initializer_range,
            layer_norm_epsilon,
            kernels=kernels,
            dtype=dtype,
            name="embeddings",
        )
        self.embeddings_project = None
        if embedding_size != hidden_size:
            # Glorot uniform, not the truncated normal: the original builds this
            # layer with tf.layers.dense's default initializer.
            self.embeddings_project = keras.layers.Dense(
                hidden_size,
                kernel_initializer="glorot_uniform",
                dtype=dtype,
                name="embeddings_project",
            )
        self.transformer_layers = [
            TransformerLayer(
                hidden_size,
                num_heads,
                intermediate_size,
                dropout_rate,
                attention_dropout_rate,
                initializer_range,
                layer_norm_epsilon,
                kernels=kernels,
                dtype=dtype,
                name=f"transformer_layer_{i}",
            )
            for i in range(num_layers)
        ]

        # === Functional graph ===
        inputs = token_inputs()
        x = self.embeddings(inputs["input_ids"], inputs["segment_ids"])
        if self.embeddings_project is not None:
            x = self.embeddings_project(x)
        if attention_direction not in ATTENTION_DIRECTIONS:
            raise ValueError(
                f"attention_direction={attention_direction!r}: choose one of "
                f"{ATTENTION_DIRECTIONS}."
            )
        bias = keras.layers.Lambda(
            lambda padding: attention_bias_from_mask(padding, direction=attention_direction),
            name="attention_bias",
        )(inputs["input_mask"])
        for layer in self.transformer_layers:
            x = layer(x, bias)
        super().__init__(inputs=inputs, outputs=x, dtype=dtype, **kwargs)

        # === Config ===
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.embedding_size = embedding_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.dropout_rate = dropout_rate
        self.attention_dropout_rate = attention_dropout_rate
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        self.attention_direction = attention_direction
        self.kernels = kernels

    @classmethod
    def from_model_config(
        cls, config: ModelConfig, embeddings: Optional[keras.layers.Layer] = None, **kwargs
    ) -> "ElectraEncoder":
        return cls(
            vocab_size=config.vocab_size,
            hidden_size=config.hidden_size,
            num_layers=config.num_layers,
            num_heads=config.resolved_num_heads,
            intermediate_size=config.resolved_intermediate_size,
            embedding_size=config.embedding_size,
            max_position_embeddings=config.max_position_embeddings,
            type_vocab_size=config.type_vocab_size,
            dropout_rate=config.dropout_rate,
            attention_dropout_rate=config.attention_dropout_rate,
            initializer_range=config.initializer_range,
            layer_norm_epsilon=config.layer_norm_epsilon,
            embeddings=embeddings,
            **kwargs,
        )

    def get_config(self):
        # The kernel set is left out: it is how this process runs the model,
        # not what the model is (a saved model loads with the reference set).
        return {
            "name": self.name,
            "trainable": self.trainable,
            **architecture(self),
            **(
                {"attention_direction": self.attention_direction}
                if self.attention_direction != "bidirectional"
                else {}
            ),
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def copy_encoder(
    encoder: ElectraEncoder, kernels: str = "reference", with_weights: bool = True
) -> ElectraEncoder:
    """`encoder`'s architecture built again with the kernel set `kernels`.

    A loaded encoder runs the reference kernels; fine-tuning builds it again
    with the run's. The copy owns its embeddings and takes the global dtype
    policy, as a loaded encoder does.

    Args:
        encoder: an `ElectraEncoder`.
        kernels: "reference", "cpu_fast" or "auto" (see `electra_tf.modeling.kernels`).
        with_weights: copy the weights (False: freshly drawn ones, the
            no-pre-training baseline).

    Returns:
        A new `ElectraEncoder`.
    """
    copy = ElectraEncoder.from_config({**encoder.get_config(), "kernels": kernels})
    if with_weights:
        copy.set_weights(encoder.get_weights())
    return copy


def with_kernels(encoder: ElectraEncoder, kernels: str) -> ElectraEncoder:
    """`encoder` if it runs the kernel set `kernels`, else a copy of it (weights too) that does.

    Args:
        encoder: an `ElectraEncoder`, e.g. a loaded one (reference kernels).
        kernels: "reference", "cpu_fast" or "auto" (see `electra_tf.modeling.kernels`).

    Returns:
        `encoder` itself, or a `copy_encoder` of it holding its weights.
    """
    if encoder.kernels == resolve_kernels(kernels):
        return encoder
    return copy_encoder(encoder, kernels)
