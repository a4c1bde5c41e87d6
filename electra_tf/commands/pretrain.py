"""Pre-train ELECTRA: text -> WordPiece vocab -> TFRecord shards -> generator + discriminator.

    python pretrain.py --model_size=small                      # built-in demo corpus, short run
    python pretrain.py --model_size=small --corpus='wiki/*.txt' # the paper's recipe on your text

Without --corpus the run uses the documentation text of the installed Python
packages (found offline on any machine with the requirements installed) and a
shortened schedule, announced at start. Vocabularies and shards are cached
under data/ and reused; runs go to runs/<name>/ (config, checkpoints,
TensorBoard logs, export). Re-running the same command resumes.
"""

from __future__ import annotations

import os

from absl import app, flags, logging

from electra_tf import cli
from electra_tf.config import MODEL_SIZES, PretrainingConfig
from electra_tf.data.text_input import INVALID_UTF8_POLICIES


def define_flags(flag_values: flags.FlagValues = flags.FLAGS, module_name: str = __name__) -> None:
    """Defines the command's flags on `flag_values`; importing the module defines none.

    Args:
        flag_values: where to define them (the study runner parses a cell's
            flags on a set of its own).
        module_name: the command's module; the flags count as its own (they
            are listed by its --helpshort).
    """
    where = dict(flag_values=flag_values, module_name=module_name)
    flags.DEFINE_enum(
        "model_size", "small", MODEL_SIZES, cli.field_help(PretrainingConfig, "model_size"), **where
    )
    flags.DEFINE_list(
        "corpus",
        None,
        "Text files or globs (comma-separated). A line is a sentence or "
        "paragraph; a blank line ends a document. Or a prepared TensorFlow Datasets "
        "corpus: tfds:NAME[/CONFIG][:SPLIT]. Default: the built-in demo corpus.",
        **where,
    )
    flags.DEFINE_string(
        "tfds_text_key",
        "text",
        "With --corpus=tfds:...: the feature holding each example's text (one example = one document).",
        **where,
    )
    flags.DEFINE_string(
        "tfds_data_dir",
        None,
        "With --corpus=tfds:...: where the dataset is prepared "
        "(default: TensorFlow Datasets' own default). Nothing is downloaded.",
        **where,
    )
    flags.DEFINE_string(
        "vocab_file",
        None,
        "BERT-style vocab.txt. Default: learn one from the corpus (cached under --data_dir).",
        **where,
    )
    flags.DEFINE_string(
        "shard_dir",
        None,
        "Train on these already built shards (a directory with "
        "metadata.json, local or gs://, e.g. written by python -m "
        "electra_tf.commands.beam_shards) instead of building them from --corpus. The "
        "vocabulary, casing and length recorded in metadata.json are used.",
        **where,
    )
    flags.DEFINE_string(
        "eval_shard_dir",
        None,
        "Already built shards of held-out text (with --shard_dir; or use --eval_corpus).",
        **where,
    )
    flags.DEFINE_string(
        "output_dir", None, "Run directory. Default: runs/<model_size>-<corpus>.", **where
    )
    flags.DEFINE_string(
        "data_dir",
        None,
        "Where the vocabulary and shards are built and cached. Default: data/<corpus>-<hash>.",
        **where,
    )
    flags.DEFINE_integer(
        "num_shards", None, "Number of TFRecord shards (default: by corpus size).", **where
    )
    flags.DEFINE_integer(
        "num_shard_workers", None, "Processes writing shards (default: CPU count).", **where
    )
    flags.DEFINE_enum(
        "invalid_utf8",
        "error",
        INVALID_UTF8_POLICIES,
        "What to do with invalid UTF-8 "
        "in the corpus: stop with the file and position, or replace and count.",
        **where,
    )
    flags.DEFINE_integer(
        "builtin_corpus_bytes", 4_000_000, "Size of the built-in demo corpus.", **where
    )
    flags.DEFINE_float(
        "eval_fraction",
        0.01,
        "Hold out this fraction of the corpus (its last "
        "documents) for evaluation; training never reads it. 0: no held-out text. "
        "The built-in demo holds out 0.05 unless this flag is given.",
        **where,
    )
    flags.DEFINE_list(
        "eval_corpus",
        None,
        "Held-out text files or globs to evaluate on instead of "
        "a fraction of --corpus (then training reads all of --corpus).",
        **where,
    )
    flags.DEFINE_boolean(
        "eval_only",
        False,
        "Evaluate the run's latest checkpoint on the held-out text and stop (no training).",
        **where,
    )
    flags.DEFINE_boolean(
        "restart",
        False,
        "Start again from step 0 although --output_dir holds "
        "checkpoints (they are moved aside to checkpoints.before-restart-<time>/, "
        "not deleted). Without it a run directory with checkpoints always resumes.",
        **where,
    )
    flags.DEFINE_boolean(
        "change_hyperparameters",
        False,
        "Resume although optimisation "
        "hyperparameters differ from the run's config.json (learning_rate, "
        "num_warmup_steps, lr_decay_power, weight_decay_rate, adam_beta_1, "
        "adam_beta_2, adam_epsilon, clip_norm, gen_weight, disc_weight, "
        "temperature), e.g. a lower --learning_rate after a NaN. The weights and "
        "optimizer state carry on; config.json records the new values.",
        **where,
    )
    cli.define_strategy_flags(module_name, flag_values)
    cli.define_vocab_flags(module_name, flag_values)
    cli.define_config_flags(flag_values, module_name)


def request_from_flags(flag_values: flags.FlagValues = flags.FLAGS):
    """The `PretrainingRequest` of the flags of `define_flags` (parsed)."""
    from electra_tf.training.pretraining_run import PretrainingRequest
    from electra_tf.vocab_learning import VocabOptions

    values = flag_values
    return PretrainingRequest(
        model_size=values.model_size,
        overrides=cli.overrides_from_flags(values),
        corpus=values.corpus or (),
        tfds_text_key=values.tfds_text_key,
        tfds_data_dir=values.tfds_data_dir,
        vocab_file=values.vocab_file,
        vocab_options=VocabOptions(**cli.field_values(VocabOptions, values)),
        shard_dir=values.shard_dir,
        eval_shard_dir=values.eval_shard_dir,
        output_dir=values.output_dir,
        data_dir=values.data_dir,
        num_shards=values.num_shards,
        num_shard_workers=values.num_shard_workers,
        invalid_utf8=values.invalid_utf8,
        builtin_corpus_bytes=values.builtin_corpus_bytes,
        # The demo holds out another fraction unless the flag is given.
        eval_fraction=values.eval_fraction if values["eval_fraction"].present else None,
        eval_corpus=values.eval_corpus or (),
        eval_only=values.eval_only,
        restart=values.restart,
        change_hyperparameters=values.change_hyperparameters,
        working_dir=os.getcwd(),
    )


def _say(message: str) -> None:
    print(message, flush=True)


def main(arguments: list[str], flag_values: flags.FlagValues) -> int:
    """Plans the run, runs it and prints where everything is. Returns the exit code."""
    del arguments
    from electra_tf.artifacts.export_dir import ExportDir
    from electra_tf.artifacts.run_dir import RunDir
    from electra_tf.distribute import is_chief
    from electra_tf.errors import RunError
    from electra_tf.training import pretraining_run

    # Progress is printed here; the library's INFO logs would repeat it.
    logging.set_verbosity(logging.WARNING)
    strategy = cli.strategy_from_flags(flag_values)  # before any other TensorFlow work
    try:
        planned = pretraining_run.plan(request_from_flags(flag_values), print_fn=_say)
        result = pretraining_run.run(planned, strategy, print_fn=_say)
    except RunError as error:
        raise app.UsageError(str(error))
    if is_chief(strategy):  # the other workers wrote nothing to the run directory
        run_dir = RunDir(result.run_dir)
        _say("")
        _say(f"TensorBoard:  tensorboard --logdir {run_dir.tensorboard}")
        _say(f"Checkpoints:  {run_dir.checkpoints}")
        if result.export_dir:
            _say(
                f"Export:       {result.export_dir} "
                f"({', '.join(ExportDir(result.export_dir).contents())})"
            )
    return 130 if result.interrupted else 0


def run() -> None:
    """The `pretrain.py` / `electra-pretrain` command."""
    cli.run_command(define_flags, main, __name__)


if __name__ == "__main__":
    run()
