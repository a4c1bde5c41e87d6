"""Generator and discriminator models, and building the pair with shared embeddings."""

from __future__ import annotations

import keras

from electra_tf.config import ModelConfig
from electra_tf.modeling.encoder import INPUT_NAMES, ElectraEncoder
from electra_tf.modeling.heads import MaskedLMHead, ReplacedTokenDetectionHead
from electra_tf.modeling.layers import ElectraEmbeddings


class _EncoderWithHead(keras.Model):
    """Serialises a model built as `cls(encoder)`: the config is the encoder's."""

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable,
                "encoder": keras.saving.serialize_keras_object(self.encoder)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraGenerator(_EncoderWithHead):
    """The small masked language model that proposes replacement tokens.

    Inputs: `input_ids`, `input_mask`, `segment_ids` (int32 [B, L]) and
    `masked_lm_positions` (int32 [B, N]). Output: logits [B, N, V].

    Args:
        encoder: an `ElectraEncoder`; its embeddings are tied to the output layer.
    """

    def __init__(self, encoder: ElectraEncoder, **kwargs):
        # === Layers ===
        self.encoder = encoder
        self.mlm_head = MaskedLMHead(encoder.embeddings, encoder.initializer_range,
                                     encoder.layer_norm_epsilon, dtype=encoder.dtype_policy,
                                     name="generator_predictions")
        # === Functional graph ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in INPUT_NAMES}
        inputs["masked_lm_positions"] = keras.Input(shape=(None,), dtype="int32",
                                                    name="masked_lm_positions")
        sequence = encoder({name: inputs[name] for name in INPUT_NAMES})
        logits = self.mlm_head(sequence, inputs["masked_lm_positions"])
        super().__init__(inputs=inputs, outputs=logits, **kwargs)


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraDiscriminator(_EncoderWithHead):
    """The encoder that is kept: per-token "was this replaced?" logits.

    Inputs: `input_ids`, `input_mask`, `segment_ids` (int32 [B, L]).
    Outputs: `{"sequence_output": [B, L, H], "logits": [B, L]}`. Fine-tuning
    uses `.encoder`; the head is only for pre-training and inspection.

    Args:
        encoder: an `ElectraEncoder`.
    """

    def __init__(self, encoder: ElectraEncoder, **kwargs):
        # === Layers ===
        self.encoder = encoder
        self.rtd_head = ReplacedTokenDetectionHead(encoder.hidden_size, encoder.initializer_range,
                                                   dtype=encoder.dtype_policy,
                                                   name="discriminator_predictions")
        # === Functional graph ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in INPUT_NAMES}
        sequence = encoder(inputs)
        logits = self.rtd_head(sequence)
        super().__init__(inputs=inputs, outputs={"sequence_output": sequence, "logits": logits},
                         **kwargs)


def build_generator_and_discriminator(config: ModelConfig, dtype=None,
                                      weight_sharing: str = "embeddings",
                                      with_generator: bool = True):
    """Builds the discriminator and a generator that shares `weight_sharing` with it.

    Args:
        config: the discriminator's architecture; the generator's is
            `config.generator_config()`.
        dtype: a Keras dtype policy (default: the global one).
        weight_sharing: "embeddings" (the paper's default): one
            `ElectraEmbeddings` of width `embedding_size` read by both
            models, each projecting it to its own hidden size. "none": the
            generator has its own embeddings of the same width. "all": the
            generator is the discriminator's encoder with a masked-LM head
            (equal sizes; only the two heads are separate).
        with_generator: False builds no generator (returned as None).

    Returns:
        (generator or None, discriminator): an `ElectraGenerator` and an
        `ElectraDiscriminator`.
    """
    def embeddings(name):
        return ElectraEmbeddings(
            config.vocab_size, config.embedding_size, config.max_position_embeddings,
            config.type_vocab_size, config.dropout_rate, config.initializer_range,
            config.layer_norm_epsilon, dtype=dtype, name=name)

    shared = embeddings("embeddings")
    gen_encoder = None
    if with_generator and weight_sharing != "all":
        # Built before the discriminator, as always: the same seed gives the same weights.
        gen_embeddings = shared if weight_sharing == "embeddings" else embeddings(
            "generator_embeddings")
        gen_encoder = ElectraEncoder.from_model_config(
            config.generator_config(), embeddings=gen_embeddings, dtype=dtype,
            name="generator_encoder")
    disc_encoder = ElectraEncoder.from_model_config(config, embeddings=shared, dtype=dtype,
                                                    name="discriminator_encoder")
    if not with_generator:
        return None, ElectraDiscriminator(disc_encoder, name="discriminator")
    generator = ElectraGenerator(gen_encoder or disc_encoder, name="generator")
    return generator, ElectraDiscriminator(disc_encoder, name="discriminator")
