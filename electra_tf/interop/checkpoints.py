"""Any supported checkpoint -> (architecture, canonical weights) -> our models or a run directory.

Three formats are recognised by `detect_format`:

* `electra-tf`: a run directory of ours (or its `export/`): `config.json`
  plus `export/*.keras`, or the latest checkpoint in `checkpoints/`;
* `tf1`: a google-research/electra checkpoint (directory or prefix);
* `huggingface`: a `transformers` ELECTRA directory with safetensors, PyTorch
  `.bin` or TensorFlow `.h5` weights (discriminator; the generator from
  `<dir>/generator/` or `generator_dir`).

The architecture is inferred from the weights' shapes (head counts, which
shapes do not determine, come from the Hugging Face config or follow the
original rule hidden // 64).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from typing import Optional

import numpy as np

from electra_tf.artifacts.pretrained import locate_pretrained
from electra_tf.artifacts.run_dir import RunDir
from electra_tf.config import (
    IMPORTED_NORMALIZATION,
    MODEL_SIZES,
    ModelConfig,
    PretrainingConfig,
    preset,
)
from electra_tf.interop import huggingface, tf1
from electra_tf.interop.weight_names import (
    WeightMismatch,
    assign_weights,
    is_generator_weight,
    model_entries,
    read_weights,
)

FORMATS = ("electra-tf", "tf1", "huggingface")
# Weights that may be absent from a source and are then freshly initialised
# (a bare Hugging Face ElectraModel has no replaced-token-detection head).
_OPTIONAL_PREFIXES = ("discriminator_predictions/",)


class CheckpointError(ValueError):
    """A checkpoint cannot be used as asked; the message names the path and the fix."""


@dataclasses.dataclass
class LoadedCheckpoint:
    """A checkpoint read into the canonical form.

    Attributes:
        source: the path it was read from.
        format: one of FORMATS.
        model: the architecture (inferred from shapes, or recorded).
        weights: canonical name -> float32 array.
        has_generator: whether generator weights are included.
        vocab_file: the vocabulary found beside it, if any.
        do_lower_case, strip_accents: casing recorded with it (None: unknown).
        normalization: text normalization recorded with it (None: unknown;
            the original code's and Hugging Face's is `bert`).
        model_size: the size preset recorded or matched (None: none matched).
        notes: what the reader skipped or filled in, for the user to see.
    """

    source: str
    format: str
    model: ModelConfig
    weights: dict
    has_generator: bool
    vocab_file: Optional[str] = None
    do_lower_case: Optional[bool] = None
    strip_accents: Optional[bool] = None
    normalization: Optional[str] = None
    model_size: Optional[str] = None
    notes: list = dataclasses.field(default_factory=list)


def inferred_checkpoint(
    source: str, format: str, weights: dict, notes: list, shapes_as: dict, **recorded
) -> LoadedCheckpoint:
    """A `LoadedCheckpoint` whose architecture is read off its weights' shapes.

    Args:
        source: the path read (it prefixes an error about the shapes).
        format: one of FORMATS.
        weights: canonical name -> float32 array.
        notes: what the reader skipped or filled in.
        shapes_as: `infer_model_config`'s keyword arguments (heads, recorded rates).
        **recorded: the other fields of `LoadedCheckpoint` the reader found
            (vocab_file, casing, normalization).
    """
    try:
        model, has_generator = infer_model_config(weights, **shapes_as)
    except CheckpointError as error:
        raise CheckpointError(f"{source}: {error}")
    return LoadedCheckpoint(
        source=source,
        format=format,
        model=model,
        weights=weights,
        has_generator=has_generator,
        model_size=guess_model_size(model),
        notes=notes,
        **recorded,
    )


def _existing(path: str) -> Optional[str]:
    return path if os.path.isfile(path) else None


def detect_format(path: str) -> str:
    """The format of the checkpoint at `path` (see FORMATS).

    Raises:
        CheckpointError: nothing recognisable there.
    """
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.isdir(path):
        if huggingface.is_hf_dir(path):
            return "huggingface"
        if locate_pretrained(path).is_run:
            return "electra-tf"
    try:
        tf1.checkpoint_prefix(path)
        return "tf1"
    except tf1.CheckpointFormatError:
        pass
    if os.path.isdir(path):
        try:
            huggingface.check_config_json(path)
        except huggingface.HFFormatError as error:
            raise CheckpointError(str(error)) from None
    raise CheckpointError(
        f"{path}: not a checkpoint electra-tf can read. Expected one of: an electra-tf run "
        "directory (config.json + export/ or checkpoints/), a google-research/electra "
        "checkpoint directory, or a Hugging Face ELECTRA directory (config.json + "
        "model.safetensors, pytorch_model.bin or tf_model.h5)."
    )


def load_checkpoint(
    path: str, generator_dir: Optional[str] = None, num_heads: Optional[int] = None
) -> LoadedCheckpoint:
    """Reads any supported checkpoint (see the module docstring).

    Args:
        path: the checkpoint.
        generator_dir: Hugging Face only: the generator's directory when it is
            not `<path>/generator/`.
        num_heads: TF1 only: attention heads of the discriminator (shapes do
            not tell; default hidden // 64 as the original code).
    """
    path = os.path.abspath(os.path.expanduser(path))
    kind = detect_format(path)
    if kind == "electra-tf":
        return _load_run(path)
    if kind == "huggingface":
        return _load_hf(path, generator_dir)
    return _load_tf1(path, num_heads)


# ---------------------------------------------------------------------------
# Architecture from shapes.


def _layer_count(weights: dict, scope: str) -> int:
    pattern = re.compile(rf"^{scope}/encoder/layer_(\d+)/")
    indices = {int(m.group(1)) for name in weights if (m := pattern.match(name))}
    if indices and indices != set(range(len(indices))):
        raise CheckpointError(
            f"{scope}: transformer layers {sorted(indices)} are not numbered "
            "0..N-1; the checkpoint is incomplete."
        )
    return len(indices)


def infer_model_config(
    weights: dict,
    num_heads: Optional[int] = None,
    generator_num_heads: Optional[int] = None,
    **fields,
) -> tuple[ModelConfig, bool]:
    """The architecture that canonical `weights` describe.

    Args:
        weights: canonical name -> array.
        num_heads: attention heads (None: hidden // 64).
        generator_num_heads: the generator's, if recorded; checked against the
            rule our generator follows (max(1, hidden // 64)).
        **fields: other `ModelConfig` fields recorded with the checkpoint
            (dropout, epsilon, ...).

    Returns:
        (ModelConfig, has_generator).
    """

    def shape(name):
        if name not in weights:
            raise CheckpointError(
                f"the checkpoint has no `{name}`; it is incomplete or not an ELECTRA model."
            )
        return weights[name].shape

    vocab_size, embedding_size = shape("electra/embeddings/word_embeddings")
    layers = _layer_count(weights, "electra")
    if not layers:
        raise CheckpointError("the checkpoint has no discriminator layers (electra/encoder/...).")
    hidden = shape("electra/encoder/layer_0/attention/self/query/kernel")[1]
    intermediate = shape("electra/encoder/layer_0/intermediate/dense/kernel")[1]
    heads = num_heads or max(1, hidden // 64)
    values = dict(fields)
    values.update(
        vocab_size=int(vocab_size),
        embedding_size=int(embedding_size),
        hidden_size=int(hidden),
        num_layers=layers,
        num_heads=None if heads == max(1, hidden // 64) else int(heads),
        intermediate_size=None if intermediate == 4 * hidden else int(intermediate),
        max_position_embeddings=int(shape("electra/embeddings/position_embeddings")[0]),
        type_vocab_size=int(shape("electra/embeddings/token_type_embeddings")[0]),
    )
    gen_layers = _layer_count(weights, "generator")
    has_generator = gen_layers > 0
    if has_generator:
        gen_hidden = shape("generator/encoder/layer_0/attention/self/query/kernel")[1]
        gen_ffn = shape("generator/encoder/layer_0/intermediate/dense/kernel")[1]
        derived_heads = max(1, gen_hidden // 64)
        if gen_ffn != 4 * gen_hidden or generator_num_heads not in (None, derived_heads):
            raise CheckpointError(
                f"the generator (hidden {gen_hidden}, FFN {gen_ffn}, heads "
                f"{generator_num_heads or derived_heads}) does not follow the original code's "
                f"rule (FFN 4 x hidden = {4 * gen_hidden}, heads hidden // 64 = {derived_heads}), "
                "which electra-tf's generator follows."
            )
        values.update(
            generator_hidden_fraction=gen_hidden / hidden,
            generator_layers_fraction=gen_layers / layers,
        )
    config = ModelConfig(**values)
    if has_generator:  # the fractions must give back the exact sizes
        derived = config.generator_config()
        assert (derived.hidden_size, derived.num_layers) == (gen_hidden, gen_layers)
    return config, has_generator


def guess_model_size(model: ModelConfig) -> Optional[str]:
    """The preset whose discriminator has this width, depth and embedding size."""
    for size in MODEL_SIZES:
        p = preset(size).model
        if (p.hidden_size, p.num_layers, p.embedding_size) == (
            model.hidden_size,
            model.num_layers,
            model.embedding_size,
        ):
            return size
    return None


_FLAG_OF = {
    "hidden_size": "hidden_size",
    "num_layers": "num_layers",
    "resolved_num_heads": "num_heads",
    "resolved_intermediate_size": "intermediate_size",
    "embedding_size": "embedding_size",
    "vocab_size": "vocab_size",
    "max_position_embeddings": "max_position_embeddings",
    "type_vocab_size": "type_vocab_size",
}


def architecture_differences(wanted: ModelConfig, found: ModelConfig) -> list[str]:
    """What differs between the flags' architecture and a checkpoint's, flag by flag.

    Each line names the flag, both values and, for the generator, the
    fraction to pass (the classic "generator hidden 256 vs 64" mismatch).
    """
    lines = []
    for attribute, flag in _FLAG_OF.items():
        a, b = getattr(wanted, attribute), getattr(found, attribute)
        if a != b:
            lines.append(
                f"--{flag}: the flags give {a}, the checkpoint has {b} (pass --{flag}={b})"
            )
    gen_w, gen_f = wanted.generator_config(), found.generator_config()
    if gen_w.hidden_size != gen_f.hidden_size:
        lines.append(
            f"--generator_hidden_fraction: the flags give a generator of hidden size "
            f"{gen_w.hidden_size}, the checkpoint's generator has {gen_f.hidden_size} "
            f"(pass --generator_hidden_fraction={found.generator_hidden_fraction:.6g})"
        )
    if gen_w.num_layers != gen_f.num_layers:
        lines.append(
            f"--generator_layers_fraction: the flags give a generator of "
            f"{gen_w.num_layers} layers, the checkpoint's has {gen_f.num_layers} "
            f"(pass --generator_layers_fraction={found.generator_layers_fraction:.6g})"
        )
    return lines


# ---------------------------------------------------------------------------
# Readers.


def load_run_models(path: str):
    """An electra-tf run's config and models: the export if present, else the latest checkpoint.

    Args:
        path: a run directory, its export/ directory or the discriminator `.keras` file.

    Returns:
        (PretrainingConfig, generator or None, discriminator, where the weights came from).
    """
    import keras
    import tensorflow as tf

    from electra_tf.artifacts import checkpoint_dir
    from electra_tf.artifacts.export_dir import float32_copy
    from electra_tf.artifacts.mirrored_checkpoint import holds_mirrored_values, read_model_values
    from electra_tf.data.pipeline import dummy_batch
    from electra_tf.modeling.electra import plain_discriminator
    from electra_tf.pretraining.objectives import make_pretrainer

    files = locate_pretrained(path)
    if not files.is_run:
        raise CheckpointError(
            f"{path}: not an electra-tf run directory (config.json with export/ or checkpoints/)."
        )
    try:
        config = PretrainingConfig.load_json(files.config_file)
    except (ValueError, TypeError) as error:  # not JSON (a ValueError), or not a config
        raise CheckpointError(
            f"{files.config_file}: cannot read the pre-training config ({error})."
        ) from None
    if files.discriminator_file is not None:
        discriminator = keras.saving.load_model(files.discriminator_file)
        generator = files.generator_file and keras.saving.load_model(files.generator_file)
        return config, generator, discriminator, files.discriminator_file
    # The newest checkpoint that is complete, readable and finite (not merely the newest).
    usable = next(
        (
            c
            for c in checkpoint_dir.list_checkpoints(files.checkpoint_dir)
            if checkpoint_dir.checkpoint_problem(c) is None
        ),
        None,
    )
    if usable is None:
        raise CheckpointError(
            f"{os.path.dirname(files.config_file)}: neither "
            "export/discriminator.keras nor a whole, finite checkpoint in "
            "checkpoints/."
        )
    latest = usable.prefix
    pretrainer = make_pretrainer(config)
    pretrainer.build_from_batch(dummy_batch(config))
    if holds_mirrored_values(latest):  # a run on another backend than TensorFlow
        try:
            read_model_values(latest, pretrainer.variables)
        except ValueError as error:
            raise CheckpointError(f"{latest}: {error}") from None
    else:
        tf.train.Checkpoint(model=pretrainer).restore(latest).expect_partial()
    generator = pretrainer.generator  # None for the mlm objective or a uniform generator
    return (
        config,
        generator and float32_copy(generator),
        float32_copy(plain_discriminator(pretrainer.discriminator)),
        latest,
    )


def _load_run(path: str) -> LoadedCheckpoint:
    config, generator, discriminator, where = load_run_models(path)
    notes = [f"weights from {where}"]
    if generator is not None and config.weight_sharing != "embeddings":
        # The original code's layout holds a generator that reads the
        # discriminator's embeddings; another sharing has no place in it.
        generator = None
        notes.append(
            f"the generator (--weight_sharing={config.weight_sharing}) is not carried "
            "over; only the discriminator is"
        )
    return LoadedCheckpoint(
        source=path,
        format="electra-tf",
        model=config.model,
        weights=read_weights(model_entries(generator, discriminator)),
        has_generator=generator is not None,
        vocab_file=locate_pretrained(path).vocab_file,
        do_lower_case=config.do_lower_case,
        strip_accents=config.resolved_strip_accents,
        normalization=config.normalization,
        model_size=config.model_size,
        notes=notes,
    )


def _load_tf1(path: str, num_heads: Optional[int]) -> LoadedCheckpoint:
    try:
        weights, ignored = tf1.read_tf1_checkpoint(path)
    except tf1.CheckpointFormatError as error:
        raise CheckpointError(str(error))
    if any(name.startswith("generator/embeddings/") for name in weights):
        raise CheckpointError(
            f"{path}: the generator has embeddings of its own (trained with "
            "untied_generator_embeddings=True); electra-tf shares one embedding table, as the "
            "paper's default does."
        )
    notes = []
    if not any(n.startswith("generator/") for n in weights) and any(
        n.startswith("generator_predictions/") for n in weights
    ):
        notes.append(
            "the generator shares every weight with the discriminator "
            "(untied_generator=False): only the discriminator is imported"
        )
        weights = {n: v for n, v in weights.items() if not n.startswith("generator_predictions/")}
    skipped = [n for n in ignored if not n.endswith(("/adam_m", "/adam_v")) and n != "global_step"]
    notes.append(
        f"skipped {len(ignored)} non-model variables (step, optimizer slots"
        + (f", and {', '.join(skipped[:5])}" if skipped else "")
        + ")"
    )
    directory = path if os.path.isdir(path) else os.path.dirname(path)
    return inferred_checkpoint(
        path,
        "tf1",
        weights,
        notes,
        {"num_heads": num_heads},
        vocab_file=_existing(os.path.join(directory, tf1.VOCAB_FILE)),
    )


def _prefixed(path: str, error: Exception) -> str:
    """The error's message, starting with `path` unless it names it (or a file in it) already."""
    message = str(error)
    return message if message.startswith(path) else f"{path}: {message}"


def _load_hf(path: str, generator_dir: Optional[str]) -> LoadedCheckpoint:
    try:
        read = huggingface.read_hf_model(path)
        config, state = read.config, read.state
        fields = huggingface.model_config_from_hf(config)
    except (huggingface.HFFormatError, KeyError) as error:
        raise CheckpointError(_prefixed(path, error))
    if "generator_predictions.dense.weight" in state:
        raise CheckpointError(
            f"{path} is a generator (ElectraForMaskedLM). Pass the discriminator's directory "
            f"and this one with --generator_dir."
        )
    notes = [read.weights_note]
    num_heads = fields.pop("num_heads")
    names = _canonical_names(state, "electra")
    weights, unused = huggingface.canonical_from_hf(state, False, names)
    if unused:
        notes.append(
            f"not imported from {path}: {', '.join(unused[:5])}"
            + (" ..." if len(unused) > 5 else "")
        )
    gen_dir = generator_dir or os.path.join(path, huggingface.GENERATOR_SUBDIR)
    generator_heads = None
    if generator_dir is not None or huggingface.is_hf_dir(gen_dir):
        try:
            gen_read = huggingface.read_hf_model(gen_dir)
        except huggingface.HFFormatError as error:
            raise CheckpointError(f"--generator_dir: {error}")
        gen_config, gen_state = gen_read.config, gen_read.state
        notes.append(f"generator {gen_read.weights_note}")
        if "generator_predictions.dense.weight" not in gen_state:
            raise CheckpointError(
                f"{gen_dir}: not a generator (no generator_predictions "
                "weights; expected an ElectraForMaskedLM)."
            )
        generator_heads = gen_config["num_attention_heads"]
        gen_weights, unused = huggingface.canonical_from_hf(
            gen_state, True, _canonical_names(gen_state, "generator")
        )
        shared = gen_weights.pop("electra/embeddings/word_embeddings", None)
        disc_emb = weights.get("electra/embeddings/word_embeddings")
        if (
            shared is not None
            and disc_emb is not None
            and (shared.shape != disc_emb.shape or not np.allclose(shared, disc_emb, atol=1e-6))
        ):
            notes.append(
                f"{gen_dir}: its word embeddings differ from the discriminator's; "
                "ELECTRA shares them, the discriminator's are used"
            )
        weights.update(
            {n: v for n, v in gen_weights.items() if not n.startswith("electra/embeddings/")}
        )
    elif any(key.startswith("discriminator_predictions.") for key in state):
        notes.append(
            "no generator (give --generator_dir to import one): fine-tuning works, "
            "continued pre-training needs it"
        )
    if "discriminator_predictions/dense/kernel" not in weights:
        notes.append(
            "no replaced-token-detection head (a bare ElectraModel): it is initialised afresh"
        )
    recorded = ("dropout_rate", "attention_dropout_rate", "initializer_range", "layer_norm_epsilon")
    do_lower_case, strip_accents = huggingface.read_casing(path)
    loaded = inferred_checkpoint(
        path,
        "huggingface",
        weights,
        notes,
        {
            "num_heads": num_heads,
            "generator_num_heads": generator_heads,
            **{k: v for k, v in fields.items() if k in recorded},
        },
        vocab_file=_existing(os.path.join(path, huggingface.VOCAB_FILE)),
        do_lower_case=do_lower_case,
        strip_accents=strip_accents if strip_accents is not None else do_lower_case,
    )
    for key in ("hidden_size", "num_layers", "vocab_size", "embedding_size"):
        if getattr(loaded.model, key) != fields[key]:
            raise CheckpointError(
                f"{path}: config.json says {key}={fields[key]} but the weights "
                f"have {getattr(loaded.model, key)}."
            )
    return loaded


def _canonical_names(state: dict, scope: str) -> list[str]:
    """Every canonical name a Hugging Face state could hold, with `scope` for the encoder."""
    layers = {
        int(m.group(1)) for k in state if (m := re.match(r"electra\.encoder\.layer\.(\d+)\.", k))
    }
    names = [
        f"electra/embeddings/{t}"
        for t in ("word_embeddings", "position_embeddings", "token_type_embeddings")
    ]
    names += [
        "electra/embeddings/LayerNorm/gamma",
        "electra/embeddings/LayerNorm/beta",
        f"{scope}/embeddings_project/kernel",
        f"{scope}/embeddings_project/bias",
    ]
    for i in sorted(layers):
        prefix = f"{scope}/encoder/layer_{i}"
        for dense in (
            "attention/self/query",
            "attention/self/key",
            "attention/self/value",
            "attention/output/dense",
            "intermediate/dense",
            "output/dense",
        ):
            names += [f"{prefix}/{dense}/kernel", f"{prefix}/{dense}/bias"]
        for norm in ("attention/output/LayerNorm", "output/LayerNorm"):
            names += [f"{prefix}/{norm}/gamma", f"{prefix}/{norm}/beta"]
    if scope == "electra":
        names += [
            f"discriminator_predictions/{d}/{p}"
            for d in ("dense", "dense_1")
            for p in ("kernel", "bias")
        ]
    else:
        names += [
            "generator_predictions/dense/kernel",
            "generator_predictions/dense/bias",
            "generator_predictions/LayerNorm/gamma",
            "generator_predictions/LayerNorm/beta",
            "generator_predictions/output_bias",
        ]
    return names


# ---------------------------------------------------------------------------
# Writers.


def build_models(loaded: LoadedCheckpoint, model: Optional[ModelConfig] = None):
    """Builds float32 models of the checkpoint's architecture and sets their weights.

    Args:
        loaded: from `load_checkpoint`.
        model: the architecture to build (default: the checkpoint's).

    Returns:
        (generator or None, discriminator).

    Raises:
        CheckpointError: the weights do not fit (names and shapes listed).
    """
    from electra_tf.modeling.electra import build_generator_and_discriminator

    generator, discriminator = build_generator_and_discriminator(model or loaded.model)
    build_inputs(generator, discriminator)
    if not loaded.has_generator:
        generator = None
    assign_canonical(generator, discriminator, loaded)
    return generator, discriminator


def build_inputs(generator, discriminator) -> None:
    """Runs the models once on a dummy batch so that every weight exists."""
    ids = np.zeros((1, 4), np.int32)
    inputs = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": ids}
    discriminator(inputs)
    if generator is not None:
        generator({**inputs, "masked_lm_positions": np.zeros((1, 1), np.int32)})


def assign_canonical(generator, discriminator, loaded: LoadedCheckpoint) -> None:
    """Sets the models' weights from `loaded`.

    A missing RTD head keeps its fresh initialisation, and so does the
    generator's own part (all but the shared embeddings) when `loaded` holds
    only a discriminator, as most published checkpoints do.
    """
    entries = model_entries(generator, discriminator)
    arrays = dict(loaded.weights)
    wanted = {name for entry in entries for name in entry.names}
    unused = sorted(
        name
        for name in arrays
        if name not in wanted and (generator is not None or not is_generator_weight(name))
    )
    if unused:  # an extra weight means the architecture was read wrongly: never drop it silently
        raise CheckpointError(
            f"{loaded.source}: weights not used by the model: {', '.join(unused[:5])}"
            + (f" and {len(unused) - 5} more" if len(unused) > 5 else "")
            + ". The checkpoint's architecture differs from what was inferred."
        )
    fresh = read_weights(
        [
            e
            for e in entries
            if e.names[0].startswith(_OPTIONAL_PREFIXES)
            or (not loaded.has_generator and all(is_generator_weight(n) for n in e.names))
        ]
    )
    for name, value in fresh.items():
        arrays.setdefault(name, value)
    try:
        assign_weights(entries, arrays, source=loaded.source)
    except WeightMismatch as error:
        raise CheckpointError(str(error))


def write_run_dir(
    loaded: LoadedCheckpoint,
    run_dir: str,
    vocab_file: Optional[str] = None,
    do_lower_case: Optional[bool] = None,
    print_fn=print,
    normalization: Optional[str] = None,
) -> str:
    """Writes an electra-tf run directory holding the checkpoint's weights.

    `config.json`, `vocab.txt` and `export/` (discriminator.keras,
    discriminator_savedmodel/, generator.keras when there is a generator),
    which `pretrain.py`, `finetune.py` and the export tools accept like a run
    of their own.

    Args:
        loaded: from `load_checkpoint`.
        run_dir: the directory to write (must not hold another run).
        vocab_file: the vocabulary (default: the one found with the checkpoint).
        do_lower_case: casing (default: the recorded one; else True, as the
            original code).
        normalization: text normalization (default: the recorded one; else
            `bert`, the original code's and Hugging Face's tokenizer).
    """
    from electra_tf.artifacts.export_dir import export_pretrained
    from electra_tf.tokenization import load_vocab

    vocab = vocab_file or loaded.vocab_file
    if vocab is None:
        raise CheckpointError(
            f"{loaded.source}: no vocab.txt beside the checkpoint; pass --vocab_file."
        )
    tokens = load_vocab(vocab)
    if len(tokens) != loaded.model.vocab_size:
        raise CheckpointError(
            f"{vocab} has {len(tokens)} tokens but the checkpoint's embeddings "
            f"have {loaded.model.vocab_size} rows; pass the matching "
            "--vocab_file."
        )
    run = RunDir(run_dir)
    if os.path.exists(run.config_file):
        raise CheckpointError(
            f"{run_dir} already holds a run (config.json); choose an empty directory."
        )
    lower = (
        do_lower_case
        if do_lower_case is not None
        else (loaded.do_lower_case if loaded.do_lower_case is not None else True)
    )
    strip = (
        loaded.strip_accents
        if (do_lower_case is None and loaded.strip_accents is not None)
        else lower
    )
    size = loaded.model_size or _nearest_size(loaded.model)
    config = preset(
        size,
        do_lower_case=lower,
        strip_accents=strip,
        normalization=normalization or loaded.normalization or IMPORTED_NORMALIZATION,
    )
    config.model = loaded.model
    config.max_seq_length = min(config.max_seq_length, loaded.model.max_position_embeddings)
    config.max_predictions_per_seq = None
    config.validate()
    generator, discriminator = build_models(loaded)
    os.makedirs(run_dir, exist_ok=True)
    config_path = run.config_file + ".tmp"
    config.save_json(config_path)
    shutil.copyfile(vocab, run.vocab_file)
    export_pretrained(generator, discriminator, run.export, vocab, config_path)
    os.replace(config_path, run.config_file)  # last: marks it complete
    for note in loaded.notes:
        print_fn(f"  note: {note}")
    return run_dir


def _nearest_size(model: ModelConfig) -> str:
    """The preset closest in width (selects fine-tuning defaults such as the learning rate)."""
    return min(MODEL_SIZES, key=lambda s: abs(preset(s).model.hidden_size - model.hidden_size))
