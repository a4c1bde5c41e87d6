"""absl flags generated from the config dataclasses, so every field is a flag.

A flag left unset keeps the preset's value; a flag set on the command line
overrides it. `overrides_from_flags` returns only what the user set.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import typing
from typing import Any, Callable

from absl import app, flags

from electra_tf.config import (DEFAULT_NORMALIZATION, KERNELS_HELP, NORMALIZATIONS, ModelConfig,
                               PretrainingConfig)
from electra_tf.distribute import STRATEGIES, create_strategy, split_cpu
from electra_tf.vocab_learning import DEFAULT_MAX_BYTES, PRESEGMENTERS, VocabOptions

_HELP = {
    "vocab_size": "Vocabulary size. With --vocab_file it must match the file; without, the size "
                  "of the vocabulary built from the corpus.",
    "hidden_size": "Discriminator hidden size.",
    "num_layers": "Discriminator transformer layers.",
    "num_heads": "Attention heads (default hidden_size // 64).",
    "intermediate_size": "FFN inner size (default 4 * hidden_size).",
    "embedding_size": "Shared embedding width; projected to each model's hidden size.",
    "generator_hidden_fraction": "Generator width as a fraction of the discriminator's.",
    "generator_layers_fraction": "Generator depth as a fraction of the discriminator's.",
    "max_seq_length": "Tokens per example.",
    "mask_rate": "Fraction of tokens masked (and replaced by the generator).",
    "max_predictions_per_seq": "Masked slots per sequence (default int((mask_rate+0.005)*L)).",
    "do_lower_case": "Lower-case text before WordPiece (Hangul is kept whole either way).",
    "strip_accents": "Strip accents (default: same as --do_lower_case).",
    "normalization": "Text normalization before WordPiece: bert (the original BERT/ELECTRA "
                     "tokenizer: lower-case, accents stripped, nothing folded; Hangul kept "
                     "whole) or casefold (NFKC case folding, NFC). Default: casefold, or the "
                     "--init_checkpoint's (bert for imported checkpoints).",
    "objective": "electra (replaced token detection), electra_15 (only masked positions), mlm "
                 "(BERT), replace_mlm (MLM on generator samples), all_tokens_mlm (every token, "
                 "with the copy mechanism).",
    "training": "joint, two_stage (generator first, then the discriminator from its weights, "
                "generator frozen) or adversarial (REINFORCE generator).",
    "weight_sharing": "What the generator shares with the discriminator: embeddings, none or "
                      "all (equal sizes).",
    "two_stage_generator_steps": "Generator-only steps of --training=two_stage (default: half "
                                 "of --num_train_steps).",
    "uniform_generator": "Draw replacements uniformly from the vocabulary (no generator).",
    "disallow_correct": "The generator may not sample the original token.",
    "max_train_flops": "Training FLOPs budget (paper accounting); sets --num_train_steps to the "
                       "steps that fit.",
    "gen_weight": "Weight of the generator's MLM loss.",
    "disc_weight": "lambda, the weight of the discriminator loss.",
    "temperature": "Sampling temperature of the generator.",
    "learning_rate": "Peak learning rate.",
    "num_warmup_steps": "Linear warmup steps.",
    "train_batch_size": "Global batch size (all replicas).",
    "num_train_steps": "Total optimizer steps (0: export the randomly initialised model, the "
                       "no-pre-training baseline).",
    "gradient_accumulation_steps": "Split each batch into this many micro-batches whose "
                                   "gradients are summed before one update (same update, less "
                                   "memory).",
    "mixed_precision": "none, float16 (with dynamic loss scaling) or bfloat16.",
    "jit_compile": "Compile the training step with XLA (see the README's performance notes).",
    "kernels": KERNELS_HELP,
    "seed": "Seed for data order, masking and sampling.",
    "save_checkpoints_steps": "Checkpoint interval in steps.",
    "keep_checkpoint_max": "How many checkpoints to keep.",
    "log_every_steps": "Console and TensorBoard interval in steps.",
    "eval_every_steps": "Held-out evaluation interval in steps (default: every checkpoint; 0: "
                        "only when training ends).",
    "num_eval_examples": "Held-out sequences per evaluation.",
    "steps_per_execution": "Steps run per tf.function call (fewer host round trips).",
    "init_checkpoint": "Start from these weights: an electra-tf run directory, a "
                       "google-research/electra checkpoint or a Hugging Face ELECTRA directory "
                       "(discriminator, with the generator in <dir>/generator). The model flags "
                       "must match it; its vocab.txt and casing are used by default.",
}


def _flag_type(annotation) -> type:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return args[0] if args else annotation


def _fields():
    for cls in (ModelConfig, PretrainingConfig):
        hints = typing.get_type_hints(cls)
        for field in dataclasses.fields(cls):
            if field.name in ("model", "model_size"):
                continue
            yield field.name, _flag_type(hints[field.name])


def define_config_flags() -> None:
    """Defines one flag per config field (default None = keep the preset's value)."""
    definers = {int: flags.DEFINE_integer, float: flags.DEFINE_float, bool: flags.DEFINE_boolean,
                str: flags.DEFINE_string}
    for name, kind in _fields():
        help_text = _HELP.get(name, f"Override the preset's {name}.")
        definers[kind](name, None, help_text)


def overrides_from_flags(flag_values=flags.FLAGS) -> dict[str, Any]:
    """The config fields the user set on the command line."""
    return {name: flag_values[name].value for name, _ in _fields()
            if flag_values[name].value is not None}


def define_text_flags(module_name: str) -> None:
    """--do_lower_case, --strip_accents and --normalization, as `pretrain.py` has them."""
    flags.DEFINE_boolean("do_lower_case", True, _HELP["do_lower_case"], module_name=module_name)
    flags.DEFINE_boolean("strip_accents", None, _HELP["strip_accents"], module_name=module_name)
    flags.DEFINE_enum("normalization", DEFAULT_NORMALIZATION, list(NORMALIZATIONS),
                      _HELP["normalization"], module_name=module_name)


def text_settings_from_flags(flag_values=flags.FLAGS) -> dict:
    """`WordPieceTokenizer`'s text arguments from the flags of `define_text_flags`."""
    return {"do_lower_case": flag_values.do_lower_case,
            "strip_accents": flag_values.strip_accents,
            "normalization": flag_values.normalization}


def define_vocab_flags(module_name: str) -> None:
    """How a vocabulary is learned: `python -m electra_tf.vocab` and `pretrain.py` share these."""
    flags.DEFINE_integer("vocab_alphabet_size", None, "Characters the vocabulary spells words "
                         "with (each a token, and most also as ##c); words with any other "
                         "character become [UNK]. Default: the most frequent characters that "
                         "fit in half of the vocabulary.", module_name=module_name)
    flags.DEFINE_integer("vocab_max_bytes", DEFAULT_MAX_BYTES, "Text read to learn the "
                         "vocabulary (whole lines spread over the corpus).",
                         module_name=module_name)
    flags.DEFINE_integer("vocab_unused", 0, "[unused0], [unused1], ... slots after the special "
                         "tokens, for tokens added later.", module_name=module_name)
    flags.DEFINE_enum("vocab_presegment", "none", list(PRESEGMENTERS), "kiwi: learn pieces "
                      "along Korean morpheme boundaries (pip install kiwipiepy); tokenization "
                      "itself needs no analyser.", module_name=module_name)


def vocab_options_from_flags(vocab_size: int, flag_values=flags.FLAGS) -> VocabOptions:
    """The `VocabOptions` of the flags of `define_vocab_flags` and a vocabulary size."""
    return VocabOptions(vocab_size=vocab_size, alphabet_size=flag_values.vocab_alphabet_size,
                        max_bytes=flag_values.vocab_max_bytes,
                        num_unused=flag_values.vocab_unused,
                        presegment=flag_values.vocab_presegment)


def define_strategy_flags(module_name: str) -> None:
    """--strategy and --num_cpu_devices, the devices a command trains on.

    Args:
        module_name: the command's module; the flags count as its own (they
            are listed by its --helpshort).
    """
    flags.DEFINE_enum("strategy", "auto", list(STRATEGIES),
                      "auto: MultiWorkerMirroredStrategy if TF_CONFIG lists several workers, "
                      "else MirroredStrategy over all GPUs if any, else one device.",
                      module_name=module_name)
    flags.DEFINE_integer("num_cpu_devices", 1, "Split the CPU into this many logical devices "
                         "(with --strategy=mirrored: exercise multi-replica training on a CPU).",
                         module_name=module_name)


def strategy_from_flags(flag_values=flags.FLAGS):
    """The tf.distribute strategy of --strategy / --num_cpu_devices.

    Call it before any other TensorFlow work: the CPU split must precede
    device initialisation, and a multi-worker strategy sets up the runtime.

    Raises:
        app.UsageError: the strategy cannot be created here.
    """
    split_cpu(flag_values.num_cpu_devices)
    try:
        return create_strategy(flag_values.strategy)
    except ValueError as error:
        raise app.UsageError(str(error))


def run(main: Callable, flags_module: str) -> None:
    """`absl.app.run(main)`, with a usage error printed as one line plus a pointer to the help.

    absl prints the whole flag listing before the message; a user looking for
    what went wrong should see the message.

    Args:
        main: the command's main(argv).
        flags_module: the module that defines the command's flags; they and
            its docstring are what `--helpshort` shows, whichever script
            started the process.
    """
    for flag in flags.FLAGS.get_key_flags_for_module(flags_module):
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
    # absl's help starts with the __main__ module's docstring: show the command's.
    sys.modules["__main__"].__doc__ = sys.modules[flags_module].__doc__

    def checked(argv):
        try:
            return main(argv)
        except app.UsageError as error:
            program = os.path.basename(sys.argv[0])
            sys.stderr.write(f"{program}: error: {error}\n"
                             f"(run '{program} --helpshort' for the flags)\n")
            sys.exit(2)

    app.run(checked)
