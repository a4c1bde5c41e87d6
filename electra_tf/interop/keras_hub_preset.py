"""keras-hub presets: our discriminator as `keras_hub.models.ElectraBackbone`, and back.

A preset is written by keras-hub's own `save_to_preset` (backbone, then
tokenizer), so its layout is exactly keras-hub's:

    <preset>/config.json                       ElectraBackbone's serialized config
    <preset>/model.weights.h5                  its weights
    <preset>/metadata.json                     keras / keras-hub versions, parameter count
    <preset>/tokenizer.json                    ElectraTokenizer's config (lowercase, strip_accents)
    <preset>/assets/tokenizer/vocabulary.txt   the vocabulary, one token a line

and `keras_hub.models.ElectraBackbone.from_preset(<preset>)` /
`keras_hub.models.ElectraTokenizer.from_preset(<preset>)` load it.

What the two models share and where they differ (keras-hub 0.32, read in
`keras_hub/src/models/electra/electra_backbone.py`):

* the same embeddings (word + position + segment, LayerNorm, then the
  projection to the hidden size when the sizes differ) and the same
  post-LayerNorm transformer blocks, every LayerNorm with epsilon 1e-12;
* keras-hub's feed-forward GELU is the tanh approximation, ours (and the
  original code's) the exact erf form, and `ElectraBackbone` takes no
  argument to change it: `sequence_output` differs by what
  `keras_hub_fidelity.compare_sequence_outputs` measures, and not at all
  once the exact GELU is put in its place;
* padded keys get -1e9 there, -10000 here before the softmax: both give
  them probability 0 in float32;
* keras-hub has one dropout rate for everything, and a tanh pooler on
  [CLS] (`pooled_output`) that ELECTRA does not have: it is written as
  keras-hub initialises it (seeded, untrained) and not read back;
* the backbone holds the discriminator's encoder only: the replaced-token
  detection head and the generator have no place in it, and a run read
  back from a preset starts both afresh.

The tokenizer keeps our casing where keras-hub's tokenizer can reproduce it
(`keras_hub_fidelity.tokenizer_fidelity`). keras_hub is imported only here,
and only when a preset is read or written (`pip install keras-hub`, see
requirements.txt).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from typing import Optional

import numpy as np

from electra_tf.config import ModelConfig
from electra_tf.interop import keras_hub_fidelity as fidelity_of
from electra_tf.interop.checkpoints import (
    CheckpointError,
    LoadedCheckpoint,
    inferred_checkpoint,
)

BACKBONE_CLASS = "keras_hub>ElectraBackbone"
TOKENIZER_CLASS = "keras_hub>ElectraTokenizer"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
SHARDED_WEIGHTS_FILE = "model.weights.json"
METADATA_FILE = "metadata.json"
TOKENIZER_FILE = "tokenizer.json"
VOCAB_FILE = os.path.join("assets", "tokenizer", "vocabulary.txt")
KERAS_HUB_VERSION = "0.32.0"  # the release requirements.txt pins and the tests run with
# keras-hub fixes this epsilon for every LayerNorm of ElectraBackbone.
KERAS_HUB_EPSILON = 1e-12
# The normalization a preset's tokenizer is read as: keras-hub case-folds.
PRESET_NORMALIZATION = "casefold"
# The untrained pooler is initialised as keras-hub does, from a fixed seed.
POOLER_SEED = 0


class KerasHubMissing(CheckpointError):
    """keras-hub is not installed; the message says how to install it."""


def import_keras_hub():
    """keras_hub, or KerasHubMissing with one line saying how to install it."""
    try:
        import keras_hub
    except ImportError:
        raise KerasHubMissing(
            "keras-hub is not installed; it reads and writes keras-hub presets: "
            f"pip install keras-hub=={KERAS_HUB_VERSION} (or pip install 'electra-tf[keras-hub]')."
        )
    return keras_hub


# ---------------------------------------------------------------------------
# Architecture.


def backbone_config(model: ModelConfig) -> dict:
    """`ElectraBackbone(**config)` for our architecture."""
    return {
        "vocab_size": model.vocab_size,
        "num_layers": model.num_layers,
        "num_heads": model.resolved_num_heads,
        "hidden_dim": model.hidden_size,
        "embedding_dim": model.embedding_size,
        "intermediate_dim": model.resolved_intermediate_size,
        "dropout": model.dropout_rate,
        "max_sequence_length": model.max_position_embeddings,
        "num_segments": model.type_vocab_size,
    }


def architecture_notes(model: ModelConfig) -> list[str]:
    """What of `model` a keras-hub ElectraBackbone cannot hold (it is written all the same)."""
    notes = []
    if model.layer_norm_epsilon != KERAS_HUB_EPSILON:
        notes.append(
            f"layer_norm_epsilon is {model.layer_norm_epsilon:g} here; keras-hub's "
            f"ElectraBackbone always uses {KERAS_HUB_EPSILON:g}, so its outputs differ "
            "by more than the GELU approximation"
        )
    if model.attention_dropout_rate != model.dropout_rate:
        notes.append(
            f"keras-hub has one dropout rate: {model.dropout_rate:g} "
            f"(attention_dropout_rate {model.attention_dropout_rate:g} is not kept)"
        )
    return notes


def _parameter_count(config: dict) -> int:
    """ElectraBackbone's weights for `config` (the pooler included)."""
    v, e, h = config["vocab_size"], config["embedding_dim"], config["hidden_dim"]
    f, p, s = config["intermediate_dim"], config["max_sequence_length"], config["num_segments"]
    embeddings = (v + p + s) * e + 2 * e + ((e * h + h) if e != h else 0)
    layer = 4 * (h * h + h) + 4 * h + (h * f + f) + (f * h + h)
    return embeddings + config["num_layers"] * layer + h * h + h


# ---------------------------------------------------------------------------
# Weights: keras-hub variable path <-> canonical (TF1) names.


@dataclasses.dataclass(frozen=True)
class _Mapped:
    """One ElectraBackbone variable, by path, and the canonical weight it holds.

    keras-hub's attention kernels are `EinsumDense` weights: query, key and
    value kernels [H, heads, H / heads] and biases [heads, H / heads], the
    output kernel [heads, H / heads, H]; the canonical kernels are [H, H].
    Both are the same matrix in row-major order, so a reshape moves them.
    """

    path: str
    name: str


def _mapping(num_layers: int, projects: bool) -> list[_Mapped]:
    e = "electra/embeddings"
    out = [
        _Mapped("token_embedding/embeddings", f"{e}/word_embeddings"),
        _Mapped("position_embedding/embeddings", f"{e}/position_embeddings"),
        _Mapped("segment_embedding/embeddings", f"{e}/token_type_embeddings"),
        _Mapped("embeddings_layer_norm/gamma", f"{e}/LayerNorm/gamma"),
        _Mapped("embeddings_layer_norm/beta", f"{e}/LayerNorm/beta"),
    ]
    if projects:
        out += [
            _Mapped("embeddings_projection/kernel", "electra/embeddings_project/kernel"),
            _Mapped("embeddings_projection/bias", "electra/embeddings_project/bias"),
        ]
    for i in range(num_layers):
        hub, ours = f"transformer_layer_{i}", f"electra/encoder/layer_{i}"
        for part in ("query", "key", "value"):
            for p in ("kernel", "bias"):
                out.append(
                    _Mapped(
                        f"{hub}/self_attention_layer/{part}/{p}",
                        f"{ours}/attention/self/{part}/{p}",
                    )
                )
        pairs = (
            ("self_attention_layer/attention_output", "attention/output/dense"),
            ("feedforward_intermediate_dense", "intermediate/dense"),
            ("feedforward_output_dense", "output/dense"),
        )
        for hub_part, our_part in pairs:
            for p in ("kernel", "bias"):
                out.append(_Mapped(f"{hub}/{hub_part}/{p}", f"{ours}/{our_part}/{p}"))
        for hub_part, our_part in (
            ("self_attention_layer_norm", "attention/output/LayerNorm"),
            ("feedforward_layer_norm", "output/LayerNorm"),
        ):
            for p in ("gamma", "beta"):
                out.append(_Mapped(f"{hub}/{hub_part}/{p}", f"{ours}/{our_part}/{p}"))
    return out


def _variables(backbone) -> dict:
    """path -> variable of every ElectraBackbone weight."""
    return {v.path: v for v in backbone.weights}


def assign_backbone(backbone, weights: dict, model: ModelConfig) -> None:
    """Sets an ElectraBackbone's weights from canonical `weights` (all but the pooler)."""
    variables = _variables(backbone)
    for m in _mapping(model.num_layers, model.embedding_size != model.hidden_size):
        variable = variables[m.path]
        variable.assign(np.reshape(weights[m.name], variable.shape).astype(np.float32))


def read_backbone(backbone) -> tuple[dict, list[str]]:
    """An ElectraBackbone's weights as canonical arrays.

    Returns:
        (canonical name -> float32 array in TF1 layout, the paths not read:
        the pooler's).
    """
    config = backbone.get_config()
    variables = _variables(backbone)
    mapping = _mapping(config["num_layers"], config["embedding_dim"] != config["hidden_dim"])
    weights = {}
    for m in mapping:
        value = np.asarray(variables[m.path].numpy(), np.float32)
        if value.ndim == 3 and m.path.endswith("attention_output/kernel"):
            value = value.reshape(-1, value.shape[-1])  # [heads, d, H] -> [H, H]
        elif value.ndim == 3:
            value = value.reshape(value.shape[0], -1)  # [H, heads, d] -> [H, H]
        elif value.ndim == 2 and m.name.endswith("/bias"):
            value = value.reshape(-1)  # [heads, d] -> [H]
        weights[m.name] = value
    unread = sorted(set(variables) - {m.path for m in mapping})
    return weights, unread


# ---------------------------------------------------------------------------
# Writing.


def export_preset(
    loaded: LoadedCheckpoint,
    preset_dir: str,
    vocab_file: str,
    with_tokenizer: bool = True,
    print_fn=print,
) -> Optional[fidelity_of.TokenizerFidelity]:
    """Writes `loaded`'s discriminator as a keras-hub preset (see the module docstring).

    Args:
        loaded: from `checkpoints.load_checkpoint` of one of our runs.
        preset_dir: a new or empty directory.
        vocab_file: the run's vocabulary.
        with_tokenizer: write tokenizer.json and the vocabulary too.
        print_fn: where notes and warnings go.

    Returns:
        How the written tokenizer reproduces ours (None without a tokenizer).

    Raises:
        CheckpointError: keras-hub is missing, the directory is not empty,
            or the tokenizer cannot reproduce the run's casing at all.
    """
    from electra_tf.tokenization import load_vocab

    keras_hub = import_keras_hub()
    import keras

    if os.path.isdir(preset_dir) and os.listdir(preset_dir):
        raise CheckpointError(f"{preset_dir} is not empty; choose a new directory.")
    vocab = load_vocab(vocab_file)
    fidelity = None
    if with_tokenizer:
        fidelity = fidelity_of.tokenizer_fidelity(
            bool(loaded.do_lower_case),
            bool(loaded.strip_accents),
            loaded.normalization or PRESET_NORMALIZATION,
            vocab,
        )
        if fidelity.level == "broken":
            raise CheckpointError(
                f"{loaded.source}: {fidelity.note}; pass --notokenizer to write the "
                "backbone alone and tokenize with electra-tf."
            )
    model = loaded.model
    backbone = keras_hub.models.ElectraBackbone(**backbone_config(model), dtype="float32")
    pooler = backbone.get_layer("pooled_dense")
    pooler.kernel.assign(
        keras.initializers.TruncatedNormal(stddev=0.02, seed=POOLER_SEED)(pooler.kernel.shape)
    )
    assign_backbone(backbone, loaded.weights, model)
    tmp = os.path.abspath(preset_dir).rstrip("/") + f".tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    backbone.save_to_preset(tmp)
    if with_tokenizer:
        tokenizer = keras_hub.models.ElectraTokenizer(
            vocabulary=vocab,
            lowercase=fidelity.lowercase,
            strip_accents=fidelity.strip_accents,
        )
        tokenizer.save_to_preset(tmp)
    if os.path.isdir(preset_dir):
        os.rmdir(preset_dir)  # empty, checked above
    os.replace(tmp, preset_dir)
    for note in architecture_notes(model):
        print_fn(f"  note: {note}")
    return fidelity


# ---------------------------------------------------------------------------
# Reading.


def _read_json(path: str, what: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: missing; {what}")
    except (OSError, ValueError) as error:
        raise CheckpointError(f"{path}: not readable JSON ({error}).")
    if not isinstance(value, dict):
        raise CheckpointError(f"{path}: not a JSON object.")
    return value


_INT_FIELDS = (
    "vocab_size",
    "num_layers",
    "num_heads",
    "hidden_dim",
    "embedding_dim",
    "intermediate_dim",
    "max_sequence_length",
    "num_segments",
)


def check_preset(preset_dir: str) -> dict:
    """Checks, without keras-hub, that `preset_dir` holds an ElectraBackbone we can read.

    The files are untrusted: the class must be ElectraBackbone, every size a
    positive integer, and the weights file must hold as many values as the
    config describes (so a config cannot make us allocate more than the
    file's size).

    Returns:
        The backbone's config (`config.json`'s "config").

    Raises:
        CheckpointError: one line naming the file and what is wrong.
    """
    import h5py

    if not os.path.isdir(preset_dir):
        raise CheckpointError(f"{preset_dir}: no such directory.")
    config_path = os.path.join(preset_dir, CONFIG_FILE)
    saved = _read_json(config_path, "not a keras-hub preset (save_to_preset writes it).")
    name = saved.get("registered_name")
    if name != BACKBONE_CLASS:
        kind = name or saved.get("model_type") and f"Hugging Face {saved['model_type']}"
        raise CheckpointError(
            f"{config_path}: a preset of {kind or 'an unknown model'}, not {BACKBONE_CLASS}; "
            "only ELECTRA backbones are read."
        )
    config = saved.get("config")
    if not isinstance(config, dict):
        raise CheckpointError(f"{config_path}: no backbone config.")
    for field in _INT_FIELDS:
        value = config.get(field)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise CheckpointError(f"{config_path}: {field}={value!r}; expected a positive integer.")
    if config["hidden_dim"] % config["num_heads"]:
        raise CheckpointError(
            f"{config_path}: hidden_dim {config['hidden_dim']} is not a multiple of "
            f"num_heads {config['num_heads']}."
        )
    weights_path = os.path.join(preset_dir, WEIGHTS_FILE)
    if not os.path.isfile(weights_path):
        sharded = os.path.isfile(os.path.join(preset_dir, SHARDED_WEIGHTS_FILE))
        raise CheckpointError(
            f"{weights_path}: missing"
            + (
                " (sharded weights, model.weights.json, are not read)"
                if sharded
                else "; the preset is incomplete"
            )
            + "."
        )
    try:
        with h5py.File(weights_path, "r") as f:
            stored = []
            f.visititems(
                lambda _, item: stored.append(item.size) if isinstance(item, h5py.Dataset) else None
            )
    except OSError as error:
        raise CheckpointError(f"{weights_path}: not an HDF5 weights file ({error}).")
    expected = _parameter_count(config)
    if sum(stored) != expected:
        raise CheckpointError(
            f"{weights_path}: holds {sum(stored)} values but config.json describes an "
            f"ElectraBackbone of {expected}; the files do not belong together."
        )
    return config


def read_tokenizer(preset_dir: str) -> Optional[dict]:
    """The tokenizer's casing and vocabulary, or None when the preset has no tokenizer.

    Returns:
        {"lowercase", "strip_accents", "vocab_file"}.

    Raises:
        CheckpointError: a tokenizer that is not an ElectraTokenizer with
            WordPiece settings we reproduce, or a missing vocabulary.
    """
    path = os.path.join(preset_dir, TOKENIZER_FILE)
    if not os.path.exists(path):
        return None
    saved = _read_json(path, "")
    if saved.get("registered_name") != TOKENIZER_CLASS:
        raise CheckpointError(
            f"{path}: a {saved.get('registered_name') or 'tokenizer of unknown class'}, "
            f"not {TOKENIZER_CLASS}."
        )
    config = saved.get("config") or {}
    expected = {"split": True, "suffix_indicator": "##", "oov_token": "[UNK]"}
    for key, value in expected.items():
        if config.get(key, value) != value:
            raise CheckpointError(
                f"{path}: {key}={config.get(key)!r}; electra-tf's WordPiece needs {value!r}."
            )
    if config.get("special_tokens"):
        raise CheckpointError(
            f"{path}: special_tokens={config['special_tokens']!r}; extra special tokens "
            "are not read."
        )
    vocab = os.path.join(preset_dir, VOCAB_FILE)
    if not os.path.isfile(vocab):
        raise CheckpointError(f"{vocab}: missing; the preset's tokenizer is incomplete.")
    return {
        "lowercase": bool(config.get("lowercase", False)),
        "strip_accents": bool(config.get("strip_accents", False)),
        "vocab_file": vocab,
    }


def load_preset(preset_dir: str) -> LoadedCheckpoint:
    """Reads a keras-hub ElectraBackbone preset into the canonical form.

    The discriminator's encoder only (no replaced-token head, no
    generator); casing from tokenizer.json, read as our `casefold`
    normalization (see `tokenizer_fidelity`).

    Raises:
        CheckpointError: one line naming the file and what is wrong.
    """
    preset_dir = os.path.abspath(os.path.expanduser(preset_dir))
    config = check_preset(preset_dir)
    tokenizer = read_tokenizer(preset_dir)
    keras_hub = import_keras_hub()
    try:
        backbone = keras_hub.models.ElectraBackbone.from_preset(preset_dir, dtype="float32")
    except Exception as error:  # keras-hub and h5py raise many types; name the file once
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CheckpointError(f"{preset_dir}: keras-hub cannot load it ({first}).")
    weights, unread = read_backbone(backbone)
    notes = [
        f"not imported: {', '.join(unread)} (ELECTRA has no pooler)",
        "no replaced-token-detection head and no generator in a keras-hub backbone: the "
        "head is initialised afresh; continued pre-training starts a fresh generator",
    ]
    if tokenizer is None:
        notes.append("no tokenizer.json: pass --vocab_file and --do_lower_case")
    elif not tokenizer["lowercase"] and tokenizer["strip_accents"]:
        notes.append(
            "keras-hub's tokenizer (strip_accents=True, lowercase=False) leaves Hangul "
            "decomposed; electra-tf recomposes it"
        )
    dropout = float(config.get("dropout", 0.1))
    return inferred_checkpoint(
        preset_dir,
        "keras-hub",
        weights,
        notes,
        {
            "num_heads": config["num_heads"],
            "dropout_rate": dropout,
            "attention_dropout_rate": dropout,
            "layer_norm_epsilon": KERAS_HUB_EPSILON,
        },
        vocab_file=tokenizer and tokenizer["vocab_file"],
        do_lower_case=tokenizer and tokenizer["lowercase"],
        strip_accents=tokenizer and tokenizer["strip_accents"],
        normalization=PRESET_NORMALIZATION,
    )


def export_run(run_dir: str, preset_dir: str, with_tokenizer: bool = True, print_fn=print) -> None:
    """`convert export-keras-hub`: one of our runs -> a keras-hub preset, checked.

    Loads the written preset with keras-hub and prints the measured max
    |difference| of its `sequence_output` from ours, and whether its
    tokenizer gives our ids on `keras_hub_fidelity.MIXED_SAMPLE`.
    """
    from electra_tf.interop.checkpoints import build_models, load_checkpoint
    from electra_tf.tokenization import WordPieceTokenizer

    import_keras_hub()  # before any work: one line if it is missing
    loaded = load_checkpoint(run_dir)
    if loaded.format != "electra-tf":
        raise CheckpointError(
            f"{run_dir}: export-keras-hub takes an electra-tf run directory (this is a "
            f"{loaded.format} checkpoint; import it first)."
        )
    if loaded.vocab_file is None:
        raise CheckpointError(f"{run_dir}: no vocab.txt in the run directory.")
    fidelity = export_preset(loaded, preset_dir, loaded.vocab_file, with_tokenizer, print_fn)
    print_fn(
        f"Wrote {preset_dir}: keras_hub.models.ElectraBackbone.from_preset({preset_dir!r})"
        + (", keras_hub.models.ElectraTokenizer.from_preset(...)" if fidelity else "")
    )
    keras_hub = import_keras_hub()
    _, discriminator = build_models(loaded)
    ids, mask, segments = fidelity_of.sample_inputs(loaded.model)
    measured = fidelity_of.compare_sequence_outputs(
        keras_hub.models.ElectraBackbone.from_preset(preset_dir, dtype="float32"),
        discriminator,
        ids,
        mask,
        segments,
    )
    print_fn(
        f"  sequence_output vs electra-tf on {ids.shape[0]}x{ids.shape[1]} random ids: max "
        f"|difference| {measured['keras_hub']:.2e} (keras-hub's GELU is the tanh "
        f"approximation; {measured['exact_gelu']:.2e} with the exact GELU in its place)"
    )
    if fidelity is None:
        print_fn("  no tokenizer written (--notokenizer): tokenize with electra-tf")
        return
    ours = WordPieceTokenizer(
        loaded.vocab_file, loaded.do_lower_case, loaded.strip_accents, loaded.normalization
    )
    sample_texts = fidelity_of.MIXED_SAMPLE
    differing = fidelity_of.compare_tokenizers(
        keras_hub.models.ElectraTokenizer.from_preset(preset_dir), ours, sample_texts
    )
    pieces = [i for ids in ours.tokenize_to_lists(sample_texts) for i in ids]
    unknown = sum(i == ours.unk_id for i in pieces)
    coverage = f"; {unknown} of its {len(pieces)} pieces are [UNK] in this vocabulary"
    sample = f"a mixed sample (English with accents, Korean, Chinese{coverage if unknown else ''})"
    print_fn(
        f"  tokenizer: lowercase={fidelity.lowercase}, strip_accents={fidelity.strip_accents}; "
        + (
            f"the same ids as electra-tf on {sample}"
            if not differing
            else f"other ids than electra-tf on {len(differing)} of the "
            f"{len(sample_texts)} texts of {sample}"
        )
    )
    prefix = "  warning: " if fidelity.level == "differs" else "  note: "
    print_fn(prefix + fidelity.note + ".")


def import_run(
    preset_dir: str,
    run_dir: str,
    vocab_file: Optional[str] = None,
    do_lower_case: Optional[bool] = None,
    normalization: Optional[str] = None,
    print_fn=print,
) -> LoadedCheckpoint:
    """`convert import-keras-hub`: a keras-hub ElectraBackbone preset -> a run directory.

    The vocabulary and casing come from the preset's tokenizer unless given.
    """
    from electra_tf.interop.checkpoints import write_run_dir

    loaded = load_preset(preset_dir)
    if loaded.vocab_file is None and vocab_file is None:
        raise CheckpointError(
            f"{preset_dir}: no {TOKENIZER_FILE} (a backbone saved alone); pass --vocab_file "
            "and --do_lower_case."
        )
    write_run_dir(
        loaded,
        run_dir,
        vocab_file=vocab_file,
        do_lower_case=do_lower_case,
        normalization=normalization,
        print_fn=print_fn,
    )
    return loaded
