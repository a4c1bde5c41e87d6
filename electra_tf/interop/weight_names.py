"""Our variables under the original code's names, and those names in Hugging Face form.

The canonical form of a checkpoint here is a dict from the TF1 variable name
of google-research/electra (e.g. `electra/encoder/layer_3/attention/self/query/kernel`)
to a NumPy array in TF1 layout (dense kernels [in, out]). Three details of our
models differ from that layout and are handled by the mapping:

* our attention uses one fused [H, 3H] QKV projection; the original has
  separate query, key and value layers (concatenated in that order here);
* the generator and discriminator share one `ElectraEmbeddings`, stored once
  under `electra/embeddings/...`, as the original does;
* Hugging Face (PyTorch) stores dense kernels as [out, in] and renames scopes.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

DISCRIMINATOR_SCOPE = "electra"
GENERATOR_SCOPE = "generator"


@dataclasses.dataclass(frozen=True)
class WeightEntry:
    """One of our variables and the canonical name(s) it holds.

    Attributes:
        names: one canonical name, or three (query, key, value) for a fused
            QKV kernel or bias, concatenated along the last axis.
        variable: the Keras variable.
    """

    names: tuple[str, ...]
    variable: object

    def split(self, value: np.ndarray) -> dict[str, np.ndarray]:
        """Our variable's value -> {canonical name: array}."""
        if len(self.names) == 1:
            return {self.names[0]: value}
        return dict(zip(self.names, np.split(value, len(self.names), axis=-1)))

    def join(self, arrays: dict[str, np.ndarray]) -> np.ndarray:
        """{canonical name: array} -> the value for our variable."""
        parts = [arrays[name] for name in self.names]
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-1)


def _dense(prefix: str, layer) -> list[WeightEntry]:
    return [
        WeightEntry((f"{prefix}/kernel",), layer.kernel),
        WeightEntry((f"{prefix}/bias",), layer.bias),
    ]


def _layer_norm(prefix: str, layer) -> list[WeightEntry]:
    return [
        WeightEntry((f"{prefix}/gamma",), layer.gamma),
        WeightEntry((f"{prefix}/beta",), layer.beta),
    ]


def embedding_entries(embeddings) -> list[WeightEntry]:
    """The shared word/position/type embeddings and their LayerNorm."""
    prefix = f"{DISCRIMINATOR_SCOPE}/embeddings"
    return [
        WeightEntry((f"{prefix}/word_embeddings",), embeddings.word_embeddings),
        WeightEntry((f"{prefix}/position_embeddings",), embeddings.position_embeddings),
        WeightEntry((f"{prefix}/token_type_embeddings",), embeddings.token_type_embeddings),
        *_layer_norm(f"{prefix}/LayerNorm", embeddings.layer_norm),
    ]


def encoder_entries(encoder, scope: str) -> list[WeightEntry]:
    """An encoder's own weights (not the shared embeddings) under `scope`."""
    entries = []
    if encoder.embeddings_project is not None:
        entries += _dense(f"{scope}/embeddings_project", encoder.embeddings_project)
    for i, layer in enumerate(encoder.transformer_layers):
        prefix = f"{scope}/encoder/layer_{i}"
        attention = layer.attention
        qkv = [f"{prefix}/attention/self/{part}" for part in ("query", "key", "value")]
        entries += [
            WeightEntry(tuple(f"{p}/kernel" for p in qkv), attention.qkv.kernel),
            WeightEntry(tuple(f"{p}/bias" for p in qkv), attention.qkv.bias),
            *_dense(f"{prefix}/attention/output/dense", attention.output_dense),
            *_layer_norm(f"{prefix}/attention/output/LayerNorm", layer.attention_layer_norm),
            *_dense(f"{prefix}/intermediate/dense", layer.intermediate),
            *_dense(f"{prefix}/output/dense", layer.ffn_output),
            *_layer_norm(f"{prefix}/output/LayerNorm", layer.ffn_layer_norm),
        ]
    return entries


def discriminator_entries(discriminator) -> list[WeightEntry]:
    """Every weight of an `ElectraDiscriminator`, embeddings included."""
    head = discriminator.rtd_head
    return (
        embedding_entries(discriminator.encoder.embeddings)
        + encoder_entries(discriminator.encoder, DISCRIMINATOR_SCOPE)
        + _dense("discriminator_predictions/dense", head.dense)
        + _dense("discriminator_predictions/dense_1", head.logit)
    )


def generator_entries(generator) -> list[WeightEntry]:
    """The generator's own weights (its embeddings are the discriminator's)."""
    head = generator.mlm_head
    return (
        encoder_entries(generator.encoder, GENERATOR_SCOPE)
        + _dense("generator_predictions/dense", head.dense)
        + _layer_norm("generator_predictions/LayerNorm", head.layer_norm)
        + [WeightEntry(("generator_predictions/output_bias",), head.output_bias)]
    )


def model_entries(generator, discriminator) -> list[WeightEntry]:
    """All weights of the pair; `generator` may be None (discriminator only)."""
    entries = discriminator_entries(discriminator)
    if generator is not None:
        entries += generator_entries(generator)
    return entries


def read_weights(entries: list[WeightEntry]) -> dict[str, np.ndarray]:
    """Our variables' values as a canonical dict (float32 NumPy)."""
    out: dict[str, np.ndarray] = {}
    for entry in entries:
        out.update(entry.split(np.asarray(entry.variable.numpy(), np.float32)))
    return out


class WeightMismatch(ValueError):
    """A checkpoint's weights do not fit the model; the message lists what differs."""


def assign_weights(
    entries: list[WeightEntry], arrays: dict[str, np.ndarray], source: str = "the checkpoint"
) -> None:
    """Sets every variable from a canonical dict, after checking names and shapes.

    Raises:
        WeightMismatch: a weight is missing or has the wrong shape (nothing is
            assigned in that case).
    """
    problems, values = [], []
    for entry in entries:
        missing = [name for name in entry.names if name not in arrays]
        if missing:
            problems.append(
                f"missing {missing[0]}"
                + (f" (and {len(missing) - 1} more of this weight)" if len(missing) > 1 else "")
            )
            continue
        value = entry.join(arrays)
        expected = tuple(entry.variable.shape)
        if value.shape != expected:
            problems.append(
                f"{' + '.join(entry.names)}: shape {value.shape} in {source}, "
                f"{expected} in the model"
            )
            continue
        values.append((entry.variable, value))
    if problems:
        shown = problems[:10] + (
            [f"... and {len(problems) - 10} more"] if len(problems) > 10 else []
        )
        raise WeightMismatch(f"{source} does not fit the model:\n  " + "\n  ".join(shown))
    for variable, value in values:
        variable.assign(value.astype(variable.dtype))


# ---------------------------------------------------------------------------
# Hugging Face names.

_HF_RULES = [
    (r"^discriminator_predictions/dense_1/", "discriminator_predictions/dense_prediction/"),
    (r"^generator_predictions/output_bias$", "generator_lm_head/bias"),
    (rf"^({DISCRIMINATOR_SCOPE}|{GENERATOR_SCOPE})/", "electra/"),
    (r"/layer_(\d+)/", r"/layer/\1/"),
    (r"/LayerNorm/gamma$", "/LayerNorm/weight"),
    (r"/LayerNorm/beta$", "/LayerNorm/bias"),
    (r"_embeddings$", "_embeddings/weight"),
    (r"/kernel$", "/weight"),
]


def hf_key(name: str) -> tuple[str, bool]:
    """A canonical name -> (Hugging Face state-dict key, whether to transpose).

    Generator and discriminator are separate Hugging Face models, each with
    its own `electra.` base model, so both scopes map to `electra.`.
    """
    key = name
    for pattern, replacement in _HF_RULES:
        key = re.sub(pattern, replacement, key)
    return key.replace("/", "."), name.endswith("/kernel")


def is_generator_weight(name: str) -> bool:
    """True for canonical names that belong to the generator's own weights."""
    return name.startswith((f"{GENERATOR_SCOPE}/", "generator_predictions/"))
