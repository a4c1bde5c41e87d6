"""Hugging Face `transformers` ELECTRA directories: `config.json` + `model.safetensors`.

Reading and writing go through the `safetensors` package's NumPy API, so
neither PyTorch nor `transformers` is needed. Layout written by `export_hf`:

    <hf_dir>/                config.json, model.safetensors, vocab.txt,
                             tokenizer_config.json, special_tokens_map.json
                             -> ElectraForPreTraining.from_pretrained(hf_dir)
    <hf_dir>/generator/      the same files for the generator
                             -> ElectraForMaskedLM.from_pretrained(hf_dir + "/generator")

The discriminator and generator are separate models there, each with its own
copy of the (in ELECTRA shared) embeddings.
"""

from __future__ import annotations

import json
import os
from typing import Optional

import numpy as np

from electra_tf.config import ModelConfig
from electra_tf.interop.weight_names import hf_key, is_generator_weight

GENERATOR_SUBDIR = "generator"
CONFIG_FILE = "config.json"
VOCAB_FILE = "vocab.txt"
WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
_SPECIAL_TOKENS = {
    "unk_token": "[UNK]",
    "sep_token": "[SEP]",
    "pad_token": "[PAD]",
    "cls_token": "[CLS]",
    "mask_token": "[MASK]",
}


class HFFormatError(ValueError):
    """The directory is not a usable Hugging Face ELECTRA model; the message says why."""


def is_hf_dir(path: str) -> bool:
    """True for a directory with an ELECTRA `config.json` in Hugging Face's format."""
    config_path = os.path.join(path, CONFIG_FILE)
    if not os.path.isfile(config_path):
        return False
    try:
        with open(config_path, encoding="utf-8") as f:
            return json.load(f).get("model_type") == "electra"
    except (OSError, ValueError):
        return False


def read_hf_dir(path: str) -> tuple[dict, dict[str, np.ndarray]]:
    """Reads `config.json` and the weights (single or sharded safetensors) of one model.

    Returns:
        (config dict, state dict of float32 NumPy arrays with the `electra.`
        prefix on base-model keys, as in the task models).
    """
    from safetensors.numpy import load_file

    if not is_hf_dir(path):
        raise HFFormatError(f'{path}: no config.json with "model_type": "electra".')
    with open(os.path.join(path, CONFIG_FILE), encoding="utf-8") as f:
        config = json.load(f)
    single, index = os.path.join(path, WEIGHTS_FILE), os.path.join(path, INDEX_FILE)
    if os.path.isfile(single):
        files = [single]
    elif os.path.isfile(index):
        with open(index, encoding="utf-8") as f:
            files = [
                os.path.join(path, name)
                for name in sorted(set(json.load(f)["weight_map"].values()))
            ]
    else:
        others = [n for n in os.listdir(path) if n.endswith((".bin", ".h5", ".msgpack"))]
        raise HFFormatError(
            f"{path}: no {WEIGHTS_FILE}"
            + (f" (found {', '.join(others)})" if others else "")
            + ". Only safetensors weights are read (no PyTorch needed); convert with "
            "transformers: `AutoModel.from_pretrained(dir).save_pretrained(dir, "
            "safe_serialization=True)`."
        )
    state: dict[str, np.ndarray] = {}
    for file in files:
        try:
            tensors = load_file(file)
        except Exception as error:  # safetensors raises its own error types
            raise HFFormatError(
                f"{file}: cannot read ({error}). Weights must be float16/32/64 "
                "(bfloat16 files: convert to float32 first)."
            )
        state.update({k: np.asarray(v, np.float32) for k, v in tensors.items()})
    # ElectraModel (the bare encoder) saves its keys without the `electra.` prefix.
    if not any(key.startswith("electra.") for key in state):
        state = {f"electra.{key}": value for key, value in state.items()}
    return config, state


def _in_model(name: str, generator: bool) -> bool:
    """Whether a canonical weight is stored in the generator's (or the discriminator's) model.

    The shared embeddings are in both: each Hugging Face model has its own copy.
    """
    if name.startswith("electra/embeddings/"):
        return True
    return is_generator_weight(name) == generator


def canonical_from_hf(
    state: dict[str, np.ndarray], generator: bool, names: list[str]
) -> tuple[dict[str, np.ndarray], list[str]]:
    """Picks the canonical weights `names` out of one Hugging Face state dict.

    Args:
        state: from `read_hf_dir`.
        generator: True for an ElectraForMaskedLM state (generator weights and
            its embeddings), False for the discriminator.
        names: the canonical names the model needs.

    Returns:
        (weights found, state keys left unused).
    """
    out, used = {}, set()
    for name in names:
        if not _in_model(name, generator):
            continue
        key, transpose = hf_key(name)
        if key in state:
            out[name] = state[key].T if transpose else state[key]
            used.add(key)
    # The tied output matrix and buffers carry nothing of their own.
    skip = ("generator_lm_head.weight", "electra.embeddings.position_ids")
    unused = sorted(k for k in state if k not in used and k not in skip)
    return out, unused


def model_config_from_hf(config: dict) -> dict:
    """The `ModelConfig` fields a Hugging Face `config.json` gives (checked for support)."""
    source = CONFIG_FILE
    activation = config.get("hidden_act", "gelu")
    if activation != "gelu":
        raise HFFormatError(
            f"{source}: hidden_act={activation!r}; ELECTRA and electra-tf use the "
            "exact (erf) GELU, `gelu`."
        )
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise HFFormatError(
            f"{source}: position_embedding_type="
            f"{config['position_embedding_type']!r} is not supported (absolute "
            "position embeddings only)."
        )
    fields = dict(
        vocab_size=config["vocab_size"],
        hidden_size=config["hidden_size"],
        num_layers=config["num_hidden_layers"],
        num_heads=config["num_attention_heads"],
        intermediate_size=config["intermediate_size"],
        embedding_size=config.get("embedding_size", config["hidden_size"]),
        max_position_embeddings=config.get("max_position_embeddings", 512),
        type_vocab_size=config.get("type_vocab_size", 2),
        dropout_rate=config.get("hidden_dropout_prob", 0.1),
        attention_dropout_rate=config.get("attention_probs_dropout_prob", 0.1),
        initializer_range=config.get("initializer_range", 0.02),
        layer_norm_epsilon=config.get("layer_norm_eps", 1e-12),
    )
    return fields


def read_casing(path: str) -> tuple[Optional[bool], Optional[bool]]:
    """(do_lower_case, strip_accents) from `tokenizer_config.json`, None where unstated."""
    file = os.path.join(path, "tokenizer_config.json")
    if not os.path.isfile(file):
        return None, None
    with open(file, encoding="utf-8") as f:
        data = json.load(f)
    return data.get("do_lower_case"), data.get("strip_accents")


def hf_config(model: ModelConfig, generator: bool, pad_id: int) -> dict:
    """`config.json` for the discriminator (ElectraForPreTraining) or the generator."""
    arch = model.generator_config() if generator else model
    return {
        "architectures": ["ElectraForMaskedLM" if generator else "ElectraForPreTraining"],
        "model_type": "electra",
        "vocab_size": model.vocab_size,
        "embedding_size": model.embedding_size,
        "hidden_size": arch.hidden_size,
        "num_hidden_layers": arch.num_layers,
        "num_attention_heads": arch.resolved_num_heads,
        "intermediate_size": arch.resolved_intermediate_size,
        "hidden_act": "gelu",
        "hidden_dropout_prob": model.dropout_rate,
        "attention_probs_dropout_prob": model.attention_dropout_rate,
        "max_position_embeddings": model.max_position_embeddings,
        "type_vocab_size": model.type_vocab_size,
        "initializer_range": model.initializer_range,
        "layer_norm_eps": model.layer_norm_epsilon,
        "pad_token_id": pad_id,
        "position_embedding_type": "absolute",
        "summary_type": "first",
        "summary_use_proj": True,
        "summary_activation": "gelu",
        "summary_last_dropout": 0.1,
        "torch_dtype": "float32",
    }


def write_model_dir(
    directory: str,
    config: dict,
    state: dict[str, np.ndarray],
    vocab_file: str,
    do_lower_case: bool,
    strip_accents: bool,
) -> None:
    """Writes one Hugging Face model directory: config, safetensors weights, tokenizer files."""
    import shutil

    from safetensors.numpy import save_file

    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, CONFIG_FILE), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    weights_path = os.path.join(directory, WEIGHTS_FILE)
    save_file(
        {k: np.ascontiguousarray(v, np.float32) for k, v in state.items()},
        weights_path,
        metadata={"format": "pt"},
    )
    os.chmod(weights_path, 0o644)  # safetensors creates it owner-only
    shutil.copyfile(vocab_file, os.path.join(directory, VOCAB_FILE))
    tokenizer = {
        "tokenizer_class": "ElectraTokenizer",
        "do_lower_case": do_lower_case,
        # HF's None means "follow do_lower_case", as here.
        "strip_accents": None if strip_accents == do_lower_case else strip_accents,
        "tokenize_chinese_chars": True,
        "do_basic_tokenize": True,
        "model_max_length": config["max_position_embeddings"],
        **_SPECIAL_TOKENS,
    }
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, indent=2, sort_keys=True)
        f.write("\n")
    with open(os.path.join(directory, "special_tokens_map.json"), "w", encoding="utf-8") as f:
        json.dump(_SPECIAL_TOKENS, f, indent=2, sort_keys=True)
        f.write("\n")


def export_hf(
    weights: dict[str, np.ndarray],
    model: ModelConfig,
    has_generator: bool,
    hf_dir: str,
    vocab_file: str,
    do_lower_case: bool,
    strip_accents: bool,
    pad_id: int = 0,
) -> list[str]:
    """Writes the discriminator (and generator) as Hugging Face model directories.

    Args:
        weights: canonical weights (see `weight_names`).
        model: their architecture.
        has_generator: also write `<hf_dir>/generator/`.
        hf_dir: output directory.
        vocab_file, do_lower_case, strip_accents: the tokenizer.
        pad_id: id of [PAD].

    Returns:
        The model directories written.
    """
    written = []
    for generator in [False, True] if has_generator else [False]:
        state = {}
        for name, value in weights.items():
            if not _in_model(name, generator):
                continue
            key, transpose = hf_key(name)
            state[key] = value.T if transpose else value
        if generator:  # the tied output matrix, stored as transformers does
            state["generator_lm_head.weight"] = weights["electra/embeddings/word_embeddings"]
        directory = os.path.join(hf_dir, GENERATOR_SUBDIR) if generator else hf_dir
        write_model_dir(
            directory,
            hf_config(model, generator, pad_id),
            state,
            vocab_file,
            do_lower_case,
            strip_accents,
        )
        written.append(directory)
    return written
