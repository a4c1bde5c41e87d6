"""Checkpoint conversion: original TF1 and Hugging Face checkpoints in, Hugging Face out,
keras-hub presets both ways.

    python -m electra_tf.commands.convert import-tf1 electra_small/ runs/electra-small
    python -m electra_tf.commands.convert import-hf electra-base-discriminator/ runs/electra-base \\
        --generator_dir electra-base-generator/
    python -m electra_tf.commands.convert export-hf runs/small-wiki hf/small-wiki
    python -m electra_tf.commands.convert export-hf runs/finetune/ner-ko hf/ner-ko     # a tagger
    python -m electra_tf.commands.convert import-hf koelectra-ner/ models/koelectra-ner  # a tagger
    python -m electra_tf.commands.convert import-hf electra-nli/ models/nli --text_pair  # a classifier
    python -m electra_tf.commands.convert import-hf electra-squad2/ models/qa --squad_version=2.0
    python -m electra_tf.commands.convert export-keras-hub runs/small-wiki keras-hub/small-wiki
    python -m electra_tf.commands.convert import-keras-hub keras-hub/small-wiki runs/from-keras-hub

An imported run directory (config.json, vocab.txt, export/) is used like a
run of our own: `finetune.py --init_checkpoint=<run_dir>`,
`pretrain.py --init_checkpoint=<run_dir>` (continued pre-training needs the
generator). Both scripts also accept the original checkpoints directly.

Fine-tuned models of the task kinds that have a `transformers` class (a
fine-tuning output directory, its best trial, or a trial directory) are
exported as that class: taggers as `ElectraForTokenClassification`,
classifiers and regressors with transformers' head as
`ElectraForSequenceClassification`, QA models with transformers' head as
`ElectraForQuestionAnswering` (the paper's heads are refused, saying why).
Importing one of those writes a fine-tuned model directory that
`python -m electra_tf.commands.export` serves (see
`electra_tf.interop.hf_finetuned`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
from typing import Optional

from absl import app, flags

from electra_tf import cli
from electra_tf.config import NORMALIZATIONS, flag_field

# Each subcommand: its positional arguments and the flags it takes.
SUBCOMMANDS = {
    "import-tf1": (
        ("checkpoint", "run_dir"),
        ("vocab_file", "do_lower_case", "normalization", "num_heads"),
    ),
    "import-hf": (
        ("hf_dir", "run_dir"),
        (
            "generator_dir",
            "vocab_file",
            "do_lower_case",
            "normalization",
            "max_seq_length",
            "text_pair",
            "squad_version",
        ),
    ),
    "export-hf": (("run_dir", "hf_dir"), ()),
    # keras-hub presets (electra_tf.interop.keras_hub_preset; needs keras-hub installed).
    "export-keras-hub": (("run_dir", "preset_dir"), ("tokenizer",)),
    "import-keras-hub": (
        ("preset_dir", "run_dir"),
        ("vocab_file", "do_lower_case", "normalization"),
    ),
}
# import-hf flags that only a fine-tuned model's import reads (which depends on its class).
_FINETUNED_IMPORT_FLAGS = ("max_seq_length", "text_pair", "squad_version")
# Every subcommand's flags: each subcommand reads them all (unset ones as
# None) and rejects those given that are not its own.
_FLAG_NAMES = tuple(dict.fromkeys(name for _, allowed in SUBCOMMANDS.values() for name in allowed))


@dataclasses.dataclass
class ConvertOptions:
    """The flags of every subcommand but --do_lower_case (each rejects the others' flags)."""

    vocab_file: Optional[str] = flag_field(
        None,
        "import-tf1: default vocab.txt beside the checkpoint; import-hf: default "
        "<hf_dir>/vocab.txt; import-keras-hub: default the preset's "
        "assets/tokenizer/vocabulary.txt.",
    )
    normalization: Optional[str] = flag_field(
        None,
        "import-*: text normalization before WordPiece, casefold or bert (default: bert, the "
        "original code's and Hugging Face's BERT tokenizer, so that the model sees the ids it "
        "was trained with).",
        choices=NORMALIZATIONS,
    )
    num_heads: Optional[int] = flag_field(
        None,
        "import-tf1: attention heads (default hidden // 64, the original rule; shapes do not "
        "tell).",
    )
    generator_dir: Optional[str] = flag_field(
        None,
        "import-hf: the generator (ElectraForMaskedLM); default <hf_dir>/generator if present.",
    )
    max_seq_length: Optional[int] = flag_field(
        None,
        "import-hf of a fine-tuned model: the served model's raw-text length (default 128; "
        "384 for ElectraForQuestionAnswering; at most the model's positions).",
    )
    text_pair: Optional[bool] = flag_field(
        None,
        "import-hf of an ElectraForSequenceClassification: the served model takes text "
        "pairs (text, text_pair); --notext_pair: single texts (default: pairs when "
        "config.json's finetuning_task is a GLUE pair task).",
    )
    squad_version: Optional[str] = flag_field(
        None,
        "import-hf of an ElectraForQuestionAnswering: 2.0 serves no_answer_score and "
        "has_answer too (default: 2.0 when config.json's finetuning_task names SQuAD v2, "
        "else 1.1).",
        choices=("1.1", "2.0"),
    )
    tokenizer: Optional[bool] = flag_field(
        None,
        "export-keras-hub: write the ElectraTokenizer too (default true; "
        "--notokenizer writes the backbone alone).",
    )


def define_flags(flag_values: flags.FlagValues) -> None:
    """The flags of every subcommand (each rejects the others' flags)."""
    cli.define_option_flags(ConvertOptions, flag_values)
    # Not a boolean flag: `--do_lower_case false` (a separate value) keeps working.
    flags.DEFINE(
        flags.BooleanParser(),
        "do_lower_case",
        None,
        "import-*: lower-case text "
        "(true or false; default: what the checkpoint records; the original code's "
        "true for TF1 checkpoints).",
        flag_values=flag_values,
    )


class _Arguments:
    """The subcommand, its positional arguments and flags, as attributes."""

    def __init__(self, arguments: list[str], flag_values: flags.FlagValues):
        if not arguments or arguments[0] not in SUBCOMMANDS:
            raise app.UsageError(
                f"expected a subcommand: {', '.join(SUBCOMMANDS)}"
                + (f" (got {arguments[0]!r})" if arguments else "")
            )
        self.command = arguments[0]
        names, allowed = SUBCOMMANDS[self.command]
        if len(arguments) - 1 != len(names):
            raise app.UsageError(
                f"{self.command} takes {len(names)} arguments: {' '.join(n.upper() for n in names)}"
            )
        for name, value in zip(names, arguments[1:]):
            setattr(self, name, value)
        for name in _FLAG_NAMES:
            if flag_values[name].present and name not in allowed:
                raise app.UsageError(f"--{name} is not a flag of {self.command}.")
            setattr(self, name, flag_values[name].value)


def _print_summary(loaded) -> None:
    m = loaded.model
    gen = m.generator_config()
    print(
        f"  discriminator: hidden {m.hidden_size}, {m.num_layers} layers, "
        f"{m.resolved_num_heads} heads, FFN {m.resolved_intermediate_size}, embedding "
        f"{m.embedding_size}, vocabulary {m.vocab_size}"
    )
    if loaded.has_generator:
        print(
            f"  generator:     hidden {gen.hidden_size}, {gen.num_layers} layers "
            f"(--generator_hidden_fraction={m.generator_hidden_fraction:.6g}, "
            f"--generator_layers_fraction={m.generator_layers_fraction:.6g})"
        )
    else:
        print("  generator:     none")


def _finetuned_conversion(args) -> Optional[int]:
    """Converts a fine-tuned model (either direction); None when the source is not one."""
    from electra_tf.artifacts.finetuning_dir import (
        FinetuningDir,
        best_saved_trial,
        holds_saved_model,
    )
    from electra_tf.interop import hf_finetuned, huggingface

    if args.command == "import-hf":
        if not huggingface.is_hf_dir(args.hf_dir):
            return None
        with open(os.path.join(args.hf_dir, huggingface.CONFIG_FILE), encoding="utf-8") as f:
            kind = hf_finetuned.kind_of_hf_config(json.load(f))
        if kind is None:
            return None
        for name in _FINETUNED_IMPORT_FLAGS:
            if getattr(args, name) is not None and name not in kind.HF_IMPORT_OPTIONS:
                raise ValueError(f"--{name} does not apply to an {kind.HF_ARCHITECTURE}.")
        description = hf_finetuned.import_hf_finetuned(
            args.hf_dir,
            args.run_dir,
            args.max_seq_length,
            vocab_file=args.vocab_file,
            do_lower_case=args.do_lower_case,
            text_pair=args.text_pair,
            squad_version=args.squad_version,
        )
        print(
            f"Wrote {os.path.dirname(description)} (a fine-tuned {kind.KIND}). Serve it with "
            f"`python -m electra_tf.commands.export --checkpoint {args.run_dir} ...`."
        )
        return 0
    if args.command != "export-hf":
        return None
    source = args.run_dir
    if os.path.isfile(FinetuningDir(source).results_file):
        trial = best_saved_trial(source)
        if trial is None:
            raise ValueError(f"{source}: no finished trial with a saved model.")
        source = trial.path
    elif not holds_saved_model(source):
        return None
    if os.path.isdir(args.hf_dir) and os.listdir(args.hf_dir):
        raise ValueError(f"{args.hf_dir} is not empty; choose a new directory.")
    tmp = os.path.abspath(args.hf_dir).rstrip("/") + f".tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    kind = hf_finetuned.export_hf_finetuned(source, tmp)
    if os.path.isdir(args.hf_dir):
        os.rmdir(args.hf_dir)  # empty, checked above
    os.replace(tmp, args.hf_dir)
    print(
        f"Wrote {args.hf_dir} from {source}: {kind.HF_ARCHITECTURE}.from_pretrained({args.hf_dir!r})"
    )
    return 0


def _keras_hub_conversion(args) -> int:
    """export-keras-hub / import-keras-hub."""
    from electra_tf.interop import keras_hub_preset

    if args.command == "export-keras-hub":
        keras_hub_preset.export_run(args.run_dir, args.preset_dir, args.tokenizer is not False)
        return 0
    print(f"Reading {args.preset_dir} (keras-hub preset)...")
    loaded = keras_hub_preset.import_run(
        args.preset_dir,
        args.run_dir,
        vocab_file=args.vocab_file,
        do_lower_case=args.do_lower_case,
        normalization=args.normalization,
    )
    _print_summary(loaded)
    print(
        f"Wrote {args.run_dir} (config.json, vocab.txt, export/). Fine-tune with "
        f"`python finetune.py --init_checkpoint={args.run_dir} ...`."
    )
    return 0


def convert(arguments: list[str], flag_values: flags.FlagValues) -> int:
    """Runs the subcommand; returns the exit code."""
    args = _Arguments(arguments, flag_values)
    from electra_tf.interop import checkpoints, huggingface

    try:
        if args.command.endswith("-keras-hub"):
            return _keras_hub_conversion(args)
        finetuned = _finetuned_conversion(args)
        if finetuned is not None:
            return finetuned
        if args.command in ("import-tf1", "import-hf"):
            source = args.checkpoint if args.command == "import-tf1" else args.hf_dir
            expected = "tf1" if args.command == "import-tf1" else "huggingface"
            kind = checkpoints.detect_format(source)
            if kind != expected:
                raise checkpoints.CheckpointError(
                    f"{source} is a {kind} checkpoint, not {expected}; use "
                    + {
                        "tf1": "import-tf1",
                        "huggingface": "import-hf",
                        "electra-tf": "it directly (it is already a run of ours)",
                    }[kind]
                    + "."
                )
            for name in _FINETUNED_IMPORT_FLAGS if args.command == "import-hf" else ():
                if getattr(args, name) is not None:
                    raise ValueError(
                        f"--{name} applies to fine-tuned models; {source} is a pre-trained one."
                    )
            loaded = checkpoints.load_checkpoint(
                source, generator_dir=args.generator_dir, num_heads=args.num_heads
            )
            print(f"Read {source} ({kind}):")
            _print_summary(loaded)
            checkpoints.write_run_dir(
                loaded,
                args.run_dir,
                vocab_file=args.vocab_file,
                do_lower_case=args.do_lower_case,
                normalization=args.normalization,
            )
            print(
                f"Wrote {args.run_dir} (config.json, vocab.txt, export/). Fine-tune with "
                f"`python finetune.py --init_checkpoint={args.run_dir} ...`."
            )
            return 0
        loaded = checkpoints.load_checkpoint(args.run_dir)
        if loaded.format != "electra-tf":
            raise checkpoints.CheckpointError(
                f"{args.run_dir}: export-hf takes an electra-tf run "
                f"directory (this is a {loaded.format} checkpoint)."
            )
        if os.path.isdir(args.hf_dir) and os.listdir(args.hf_dir):
            raise checkpoints.CheckpointError(
                f"{args.hf_dir} is not empty; choose a new directory."
            )
        print(f"Read {args.run_dir} ({loaded.notes[0]}):")
        _print_summary(loaded)
        from electra_tf.tokenization import WordPieceTokenizer

        tokenizer = WordPieceTokenizer(
            loaded.vocab_file, loaded.do_lower_case, loaded.strip_accents, loaded.normalization
        )
        tmp = os.path.abspath(args.hf_dir).rstrip("/") + f".tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        huggingface.export_hf(
            loaded.weights,
            loaded.model,
            loaded.has_generator,
            tmp,
            loaded.vocab_file,
            loaded.do_lower_case,
            loaded.strip_accents,
            pad_id=tokenizer.pad_id,
        )
        if os.path.isdir(args.hf_dir):
            os.rmdir(args.hf_dir)  # empty, checked above
        os.replace(tmp, args.hf_dir)
        print(
            f"Wrote {args.hf_dir}: ElectraForPreTraining.from_pretrained({args.hf_dir!r})"
            + (
                f", ElectraForMaskedLM.from_pretrained("
                f"{os.path.join(args.hf_dir, huggingface.GENERATOR_SUBDIR)!r})"
                if loaded.has_generator
                else ""
            )
        )
        return 0
    except (checkpoints.CheckpointError, OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def run(argv: list[str]) -> int:
    """Runs the command in this process on `argv` (no program name); returns the exit code."""
    return cli.call(define_flags, convert, argv, "python -m electra_tf.commands.convert")


if __name__ == "__main__":
    cli.run_command(define_flags, convert, __name__)
