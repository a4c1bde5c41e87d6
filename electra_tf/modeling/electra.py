"""Generator and discriminator models, and building the pair with shared embeddings."""

from __future__ import annotations

import keras

from electra_tf.config import ModelConfig
from electra_tf.modeling.encoder import INPUT_NAMES, BuiltOnEncoder, ElectraEncoder, token_inputs
from electra_tf.modeling.heads import MaskedLMHead, ReplacedTokenDetectionHead
from electra_tf.modeling.kernels import resolve_kernels
from electra_tf.modeling.layers import DisentangledEmbeddings, ElectraEmbeddings


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraGenerator(BuiltOnEncoder, keras.Model):
    """The small masked language model that proposes replacement tokens.

    Inputs: `input_ids`, `input_mask`, `segment_ids` (int32 [B, L]) and
    `masked_lm_positions` (int32 [B, N]). Output: logits [B, N, V].

    Args:
        encoder: an `ElectraEncoder`; its embeddings are tied to the output layer.
            The head runs the encoder's kernel set.
    """

    def __init__(self, encoder: ElectraEncoder, **kwargs):
        # === Layers ===
        self.encoder = encoder
        self.mlm_head = MaskedLMHead.tied_to(encoder, "generator_predictions")
        # === Functional graph ===
        inputs = token_inputs("masked_lm_positions")
        sequence = encoder({name: inputs[name] for name in INPUT_NAMES})
        logits = self.mlm_head(sequence, inputs["masked_lm_positions"])
        super().__init__(inputs=inputs, outputs=logits, **kwargs)


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraDiscriminator(BuiltOnEncoder, keras.Model):
    """The encoder that is kept: per-token "was this replaced?" logits.

    Inputs: `input_ids`, `input_mask`, `segment_ids` (int32 [B, L]).
    Outputs: `{"sequence_output": [B, L, H], "logits": [B, L]}`. Fine-tuning
    uses `.encoder`; the head is only for pre-training and inspection.

    Args:
        encoder: an `ElectraEncoder`; the head runs its kernel set.
    """

    def __init__(self, encoder: ElectraEncoder, **kwargs):
        # === Layers ===
        self.encoder = encoder
        self.rtd_head = ReplacedTokenDetectionHead.on(encoder, "discriminator_predictions")
        # === Functional graph ===
        inputs = token_inputs()
        sequence = encoder(inputs)
        logits = self.rtd_head(sequence)
        super().__init__(
            inputs=inputs, outputs={"sequence_output": sequence, "logits": logits}, **kwargs
        )


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraClozeGenerator(keras.Model):
    """Electric's noise distribution: a two-tower cloze model of every position.

    A left-to-right and a right-to-left encoder read the same (unmasked)
    sequence; position t is represented by the first tower's state at t - 1
    (it has seen tokens < t) and the second's at t + 1 (tokens > t), so the
    prediction of token t never sees token t. As in the original code the
    shift wraps around at the ends, which only touches [CLS] and the last
    position, neither a cloze target. The concatenated states go through a
    masked-LM style output tied to the shared word table.

    Inputs: `input_ids`, `input_mask`, `segment_ids` (int32 [B, L]). Output:
    logits [B, L, V] of q(x_t | the rest of the sequence).

    Args:
        left_to_right, right_to_left: `ElectraEncoder`s with those attention
            directions, sharing one embedding layer (tied to the output).
    """

    def __init__(self, left_to_right: ElectraEncoder, right_to_left: ElectraEncoder, **kwargs):
        # === Layers ===
        self.left_to_right = left_to_right
        self.right_to_left = right_to_left
        self.cloze_head = MaskedLMHead.tied_to(left_to_right, "cloze_predictions")
        # === Functional graph ===
        inputs = token_inputs()
        forward, backward = left_to_right(inputs), right_to_left(inputs)
        states = keras.layers.Lambda(_cloze_states, name="cloze_states")([forward, backward])
        every_position = keras.layers.Lambda(_every_position, name="every_position")(
            inputs["input_ids"]
        )
        logits = self.cloze_head(states, every_position)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "left_to_right": keras.saving.serialize_keras_object(self.left_to_right),
            "right_to_left": keras.saving.serialize_keras_object(self.right_to_left),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        left = keras.saving.deserialize_keras_object(config.pop("left_to_right"))
        # The second tower shares the first one's embeddings again, as when built.
        right = ElectraEncoder(**config.pop("right_to_left")["config"], embeddings=left.embeddings)
        return cls(left, right, **config)


def _cloze_states(pair):
    """[B, L, H] states of the two towers -> [B, L, 2H]: t - 1 of the first, t + 1 of the second."""
    forward, backward = pair
    return keras.ops.concatenate(
        [keras.ops.roll(forward, 1, axis=1), keras.ops.roll(backward, -1, axis=1)], axis=-1
    )


def _every_position(input_ids):
    """int32 [B, L] of 0..L-1: the cloze output scores every position."""
    shape = keras.ops.shape(input_ids)
    return keras.ops.broadcast_to(keras.ops.arange(shape[1], dtype="int32")[None], shape)


def plain_discriminator(discriminator: "ElectraDiscriminator") -> "ElectraDiscriminator":
    """A discriminator whose embeddings are a plain `ElectraEmbeddings`.

    With gradient-disentangled sharing, pre-training keeps the token table as
    stop_gradient(E) + ΔE; this folds it into one table E + ΔE (and copies
    every other weight), so fine-tuning, exports and conversions see an
    ordinary ELECTRA discriminator. Any other discriminator is returned as is.
    """
    embeddings = discriminator.encoder.embeddings
    if not isinstance(embeddings, DisentangledEmbeddings):
        return discriminator
    plain = ElectraDiscriminator(
        ElectraEncoder.from_config(
            {**discriminator.encoder.get_config(), "kernels": discriminator.encoder.kernels}
        ),
        name=discriminator.name,
    )
    target = plain.encoder.embeddings
    target.word_embeddings.assign(embeddings.word_table())
    for name in ("position_embeddings", "token_type_embeddings"):
        getattr(target, name).assign(getattr(embeddings.shared, name))
    for mine, theirs in zip(target.layer_norm.weights, embeddings.shared.layer_norm.weights):
        mine.assign(theirs)

    # Everything outside the embeddings has the same structure in both models.
    def outside(model, layer):
        inside = {id(w) for w in layer.weights}
        return [w for w in model.weights if id(w) not in inside]

    for mine, theirs in zip(
        outside(plain, target), outside(discriminator, embeddings), strict=True
    ):
        mine.assign(theirs)
    return plain


def build_generator_and_discriminator(
    config: ModelConfig,
    dtype=None,
    weight_sharing: str = "embeddings",
    with_generator: bool = True,
    generator_kind: str = "masked_lm",
    kernels: str = "reference",
):
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
            (equal sizes; only the two heads are separate). "gdes": as
            "embeddings", with the discriminator reading the token table
            through `DisentangledEmbeddings`.
        with_generator: False builds no generator (returned as None).
        generator_kind: "masked_lm" (ELECTRA's generator) or
            "two_tower_cloze" (Electric's, an `ElectraClozeGenerator`).
        kernels: the kernel set both models run: "reference" (Keras layers
            and plain ops), "cpu_fast" or "auto" (see
            `electra_tf.modeling.kernels`).

    Returns:
        (generator or None, discriminator): an `ElectraGenerator` (or
        `ElectraClozeGenerator`) and an `ElectraDiscriminator`.
    """
    kernels = resolve_kernels(kernels)

    def embeddings(name):
        return ElectraEmbeddings(
            config.vocab_size,
            config.embedding_size,
            config.max_position_embeddings,
            config.type_vocab_size,
            config.dropout_rate,
            config.initializer_range,
            config.layer_norm_epsilon,
            kernels=kernels,
            dtype=dtype,
            name=name,
        )

    if generator_kind not in ("masked_lm", "two_tower_cloze"):
        raise ValueError(f"generator_kind={generator_kind!r}: masked_lm or two_tower_cloze.")
    shared = embeddings("embeddings")
    generator = None
    gen_embeddings = (
        shared if weight_sharing in ("embeddings", "gdes") else embeddings("generator_embeddings")
    )
    # The generator is built before the discriminator, as always: the same seed
    # gives the same weights.
    if with_generator and generator_kind == "two_tower_cloze":
        towers = [
            ElectraEncoder.from_model_config(
                config.generator_config(),
                embeddings=gen_embeddings,
                kernels=kernels,
                dtype=dtype,
                attention_direction=direction,
                name=f"generator_{direction}_encoder",
            )
            for direction in ("left_to_right", "right_to_left")
        ]
        generator = ElectraClozeGenerator(*towers, name="generator")
    elif with_generator and weight_sharing != "all":
        generator = ElectraGenerator(
            ElectraEncoder.from_model_config(
                config.generator_config(),
                embeddings=gen_embeddings,
                kernels=kernels,
                dtype=dtype,
                name="generator_encoder",
            ),
            name="generator",
        )
    disc_embeddings = (
        DisentangledEmbeddings(shared, dtype=dtype, name="embeddings_gdes")
        if weight_sharing == "gdes"
        else shared
    )
    disc_encoder = ElectraEncoder.from_model_config(
        config,
        embeddings=disc_embeddings,
        kernels=kernels,
        dtype=dtype,
        name="discriminator_encoder",
    )
    if with_generator and weight_sharing == "all":
        generator = ElectraGenerator(disc_encoder, name="generator")
    return generator, ElectraDiscriminator(disc_encoder, name="discriminator")
