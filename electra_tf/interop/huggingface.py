"""Hugging Face `transformers` ELECTRA directories: `config.json` + weights.

Weights are read, without PyTorch, TensorFlow or `transformers`, from the first
of these a directory holds (the file read is named in `HFModel.weights_note`):

    model.safetensors  (or sharded: model.safetensors.index.json)   safetensors' NumPy API
    pytorch_model.bin  (or sharded: pytorch_model.bin.index.json)   `torch_pickle`: both of
                       torch.save's layouts; the pickle is interpreted, never run
    tf_model.h5                                                     `tf_h5`: transformers'
                       TensorFlow weights (sharded TF weights are refused)

and written as safetensors. Layout written by `export_hf`:

    <hf_dir>/                config.json, model.safetensors, vocab.txt,
                             tokenizer_config.json, special_tokens_map.json
                             -> ElectraForPreTraining.from_pretrained(hf_dir)
    <hf_dir>/generator/      the same files for the generator
                             -> ElectraForMaskedLM.from_pretrained(hf_dir + "/generator")

The discriminator and generator are separate models there, each with its own
copy of the (in ELECTRA shared) embeddings.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Optional

import numpy as np

from electra_tf.config import ModelConfig
from electra_tf.interop import tf_h5, torch_pickle
from electra_tf.interop.weight_names import hf_key, is_generator_weight

GENERATOR_SUBDIR = "generator"
CONFIG_FILE = "config.json"
VOCAB_FILE = "vocab.txt"
WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
TORCH_FILE = "pytorch_model.bin"
TORCH_INDEX_FILE = "pytorch_model.bin.index.json"
TF_FILE = "tf_model.h5"
TF_INDEX_FILE = "tf_model.h5.index.json"
# The weight files read_hf_model looks for, in order of preference: the first one present is read.
WEIGHT_FILES = (WEIGHTS_FILE, INDEX_FILE, TORCH_FILE, TORCH_INDEX_FILE, TF_FILE, TF_INDEX_FILE)
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


def check_config_json(path: str) -> None:
    """Refuses a directory whose `config.json` is there but not JSON (a damaged download).

    Raises:
        HFFormatError: naming the file, the line and column of the fault.
    """
    config_path = os.path.join(path, CONFIG_FILE)
    if not os.path.isfile(config_path):
        return
    try:
        with open(config_path, encoding="utf-8") as f:
            json.load(f)
    except ValueError as error:  # json.JSONDecodeError and UnicodeDecodeError
        raise HFFormatError(
            f"{config_path} is not valid JSON ({error}); download the model's config.json again."
        ) from None


@dataclasses.dataclass
class HFModel:
    """One Hugging Face model directory, read.

    Attributes:
        config: its config.json.
        state: key -> float32 array, PyTorch layout (dense weights [out, in]),
            with the `electra.` prefix on base-model keys, as in the task models.
        weights_file: the weight file read (or the index of the shards read).
        weights_note: which file was read, in which format, and what else was
            there and left unread, for the user to see.
    """

    config: dict
    state: dict
    weights_file: str
    weights_note: str


def _shard_files(index: str) -> tuple[list[str], list[str]]:
    """(shard files, keys the index lists) of a sharded checkpoint's `*.index.json`."""
    try:
        with open(index, encoding="utf-8") as f:
            weight_map = json.load(f).get("weight_map")
    except (OSError, ValueError, AttributeError) as error:
        raise HFFormatError(f"{index}: not a readable index ({error}).")
    if not isinstance(weight_map, dict) or not weight_map:
        raise HFFormatError(f"{index}: no weight_map naming the shards.")
    names = sorted({str(name) for name in weight_map.values()})
    directory = os.path.dirname(index)
    for name in names:
        if os.path.basename(name) != name or name in (".", ".."):
            raise HFFormatError(f"{index}: shard {name!r} is not a file name in {directory}.")
        if not os.path.isfile(os.path.join(directory, name)):
            raise HFFormatError(f"{index}: shard {name} is missing from {directory}.")
    return [os.path.join(directory, name) for name in names], list(weight_map)


def _read_weight_file(file: str) -> tuple[dict, str]:
    """(state of one weight file, its format in words)."""
    try:
        if file.endswith(".safetensors"):
            from safetensors.numpy import load_file

            try:
                return load_file(file), "safetensors"
            except Exception as error:  # safetensors raises its own error types
                raise HFFormatError(
                    f"{file}: cannot read ({error}). Weights must be float16/32/64 "
                    "(bfloat16 files: convert to float32 first)."
                )
        if file.endswith(".h5"):
            return tf_h5.read_tf_weights(file), "transformers' TensorFlow weights"
        layout = torch_pickle.file_layout(file)
        return torch_pickle.read_state_dict(file), f"PyTorch, {layout} layout"
    except (torch_pickle.TorchPickleError, tf_h5.TFWeightsError) as error:
        raise HFFormatError(str(error))


def _read_weights(path: str) -> tuple[dict, str, str]:
    """(state, the file read, a note saying which) of the preferred weights in `path`."""
    present = [name for name in WEIGHT_FILES if os.path.isfile(os.path.join(path, name))]
    if not present:
        others = sorted(
            n for n in os.listdir(path) if n.endswith((".bin", ".h5", ".msgpack", ".safetensors"))
        )
        raise HFFormatError(
            f"{path}: no {WEIGHTS_FILE}, {TORCH_FILE} or {TF_FILE} (nor a sharded "
            "*.index.json of the first two)"
            + (f"; {', '.join(others)} is not read" if others else "")
            + "."
        )
    chosen = os.path.join(path, present[0])
    if present[0] == TF_INDEX_FILE:
        raise HFFormatError(
            f"{chosen}: sharded TensorFlow weights are not read; a single {TF_FILE}, "
            f"{TORCH_FILE} or {WEIGHTS_FILE} is."
        )
    if chosen.endswith(".index.json"):
        files, listed = _shard_files(chosen)
    else:
        files, listed = [chosen], []
    state: dict[str, np.ndarray] = {}
    for file in files:
        tensors, kind = _read_weight_file(file)
        state.update({k: np.asarray(v, np.float32) for k, v in tensors.items()})
    missing = [key for key in listed if key not in state]
    if missing:
        raise HFFormatError(
            f"{chosen}: lists {', '.join(missing[:3])}"
            + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
            + ", which its shards do not hold."
        )
    note = f"weights from {chosen} ({kind}" + (f", {len(files)} shards)" if listed else ")")
    unread = [name for name in present[1:] if not name.endswith(".index.json")]
    if unread:
        note += f"; {', '.join(unread)} there too, not read"
    return state, chosen, note


def read_hf_model(path: str) -> HFModel:
    """Reads `config.json` and the weights of one model (see the module docstring)."""
    if not is_hf_dir(path):
        raise HFFormatError(f'{path}: no config.json with "model_type": "electra".')
    with open(os.path.join(path, CONFIG_FILE), encoding="utf-8") as f:
        config = json.load(f)
    state, file, note = _read_weights(path)
    # ElectraModel (the bare encoder) saves its keys without the `electra.` prefix.
    if not any(key.startswith("electra.") for key in state):
        state = {f"electra.{key}": value for key, value in state.items()}
    return HFModel(config, state, file, note)


def read_hf_dir(path: str) -> tuple[dict, dict[str, np.ndarray]]:
    """Reads `config.json` and the weights of one model.

    Returns:
        (config dict, state dict of float32 NumPy arrays with the `electra.`
        prefix on base-model keys, as in the task models).
    """
    model = read_hf_model(path)
    return model.config, model.state


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


# The sizes of a Hugging Face `config.json`: each a positive integer when present.
_INTEGER_KEYS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "embedding_size",
    "max_position_embeddings",
    "type_vocab_size",
)


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
    for key in _INTEGER_KEYS:
        value = config.get(key, 1)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise HFFormatError(
                f"{source}: {key}={value!r} must be a positive integer; put back the "
                "model's own config.json."
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
