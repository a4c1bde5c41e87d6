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

import dataclasses
import glob
import os
import re
import sys
import time

from absl import app, flags, logging

from electra_tf import cli
from electra_tf.config import (
    BERT_VOCAB_SIZE,
    DEFAULT_NORMALIZATION,
    IMPORTED_NORMALIZATION,
    MODEL_SIZES,
    ConfigError,
    PretrainingConfig,
    preset,
)
from electra_tf.data.text_input import INVALID_UTF8_POLICIES

# Caches and runs go under the working directory unless flags say otherwise.
WORKING_DIR = os.getcwd()

flags.DEFINE_enum(
    "model_size", "small", MODEL_SIZES, cli.field_help(PretrainingConfig, "model_size")
)
flags.DEFINE_list(
    "corpus",
    None,
    "Text files or globs (comma-separated). A line is a sentence or "
    "paragraph; a blank line ends a document. Or a prepared TensorFlow Datasets "
    "corpus: tfds:NAME[/CONFIG][:SPLIT]. Default: the built-in demo corpus.",
)
flags.DEFINE_string(
    "tfds_text_key",
    "text",
    "With --corpus=tfds:...: the feature holding each example's text (one example = one document).",
)
flags.DEFINE_string(
    "tfds_data_dir",
    None,
    "With --corpus=tfds:...: where the dataset is prepared "
    "(default: TensorFlow Datasets' own default). Nothing is downloaded.",
)
flags.DEFINE_string(
    "vocab_file",
    None,
    "BERT-style vocab.txt. Default: learn one from the corpus (cached under --data_dir).",
)
flags.DEFINE_string(
    "shard_dir",
    None,
    "Train on these already built shards (a directory with "
    "metadata.json, local or gs://, e.g. written by python -m "
    "electra_tf.commands.beam_shards) instead of building them from --corpus. The "
    "vocabulary, casing and length recorded in metadata.json are used.",
)
flags.DEFINE_string(
    "eval_shard_dir",
    None,
    "Already built shards of held-out text (with --shard_dir; or use --eval_corpus).",
)
flags.DEFINE_string("output_dir", None, "Run directory. Default: runs/<model_size>-<corpus>.")
flags.DEFINE_string(
    "data_dir",
    None,
    "Where the vocabulary and shards are built and cached. Default: data/<corpus>-<hash>.",
)
flags.DEFINE_integer("num_shards", None, "Number of TFRecord shards (default: by corpus size).")
flags.DEFINE_integer("num_shard_workers", None, "Processes writing shards (default: CPU count).")
flags.DEFINE_enum(
    "invalid_utf8",
    "error",
    INVALID_UTF8_POLICIES,
    "What to do with invalid UTF-8 "
    "in the corpus: stop with the file and position, or replace and count.",
)
flags.DEFINE_integer("builtin_corpus_bytes", 4_000_000, "Size of the built-in demo corpus.")
flags.DEFINE_float(
    "eval_fraction",
    0.01,
    "Hold out this fraction of the corpus (its last "
    "documents) for evaluation; training never reads it. 0: no held-out text. "
    "The built-in demo holds out 0.05 unless this flag is given.",
)
flags.DEFINE_list(
    "eval_corpus",
    None,
    "Held-out text files or globs to evaluate on instead of "
    "a fraction of --corpus (then training reads all of --corpus).",
)
flags.DEFINE_boolean(
    "eval_only",
    False,
    "Evaluate the run's latest checkpoint on the held-out text and stop (no training).",
)
flags.DEFINE_boolean(
    "restart",
    False,
    "Start again from step 0 although --output_dir holds "
    "checkpoints (they are moved aside to checkpoints.before-restart-<time>/, "
    "not deleted). Without it a run directory with checkpoints always resumes.",
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
)
cli.define_strategy_flags(__name__)
cli.define_vocab_flags(__name__)
cli.define_config_flags(module_name=__name__)
FLAGS = flags.FLAGS

# The built-in run is a demonstration that finishes in about ten minutes on a
# 2-core CPU, not the paper's schedule. Flags given explicitly still win. The
# generator samples at temperature 2: at 1, on a few hundred steps of a few
# megabytes of text, the generator learns the unigram distribution before the
# discriminator learns enough context, and the discriminator settles at the
# label prior (held-out AUC near 0.5). Masking 30% of the tokens (not 15%)
# doubles the discriminator's positive examples per step: in a search of
# temperature, learning rate, generator width and mask rate within the budget
# (docs/pretraining.md, "The demo's schedule") it is the one setting whose
# discriminator ranked replacements above token rarity, also among tokens of
# similar frequency (0.55 against rarity's 0.52). 5% of the text is held out so
# that this verdict rests on a few hundred sequences rather than a few dozen.
BUILTIN_SCHEDULE = dict(
    num_train_steps=400,
    train_batch_size=16,
    num_warmup_steps=40,
    temperature=2.0,
    mask_rate=0.3,
    log_every_steps=20,
    save_checkpoints_steps=100,
    eval_every_steps=200,
    num_eval_examples=512,
)
BUILTIN_EVAL_FRACTION = 0.05
BUILTIN_VOCAB_SIZE = 8000


def _say(message: str) -> None:
    print(message, flush=True)


def _tfds_text(reference: str) -> str:
    """Writes (once) the text of a prepared TFDS split and returns the file's path."""
    from electra_tf.data import tfds_corpus

    try:
        corpus = tfds_corpus.parse(reference)
        name = re.sub(r"[^\w.-]+", "_", f"{corpus.builder_name}-{corpus.split}")
        path = os.path.join(
            FLAGS.data_dir or os.path.join(WORKING_DIR, "data"), "tfds", f"{name}.txt"
        )
        tfds_corpus.export_text(
            corpus, path, FLAGS.tfds_text_key, FLAGS.tfds_data_dir, progress=_say
        )
    except tfds_corpus.TfdsCorpusError as error:
        raise app.UsageError(str(error))
    return path


def _resolve_corpus(patterns: list[str], flag: str = "--corpus") -> list[str]:
    files: list[str] = []
    for pattern in patterns:
        if pattern.startswith("tfds:"):
            files.append(_tfds_text(pattern))
            continue
        matches = sorted(glob.glob(os.path.expanduser(pattern)))
        if not matches:
            raise app.UsageError(f"{flag}: {pattern!r} matches no file.")
        for match in matches:
            if os.path.isdir(match):  # a directory stands for the files in it
                files.extend(
                    sorted(
                        os.path.join(match, name)
                        for name in os.listdir(match)
                        if not name.startswith(".") and os.path.isfile(os.path.join(match, name))
                    )
                )
            elif os.path.isfile(match):
                files.append(match)
    if not files:
        raise app.UsageError(f"{flag}={','.join(patterns)}: no regular files found.")
    return files


def _builtin_corpus(data_dir: str) -> list[str]:
    from electra_tf.data.default_corpus import build_default_corpus

    path = os.path.join(data_dir, "corpus.txt")
    if os.path.exists(path):
        _say(f"Built-in corpus: {path} (cached)")
        return [path]
    _say("Building the built-in corpus from the docstrings of the installed Python packages...")
    started = time.perf_counter()
    stats = build_default_corpus(path, max_bytes=FLAGS.builtin_corpus_bytes)
    _say(
        f"Built-in corpus: {stats['bytes'] / 1e6:.1f} MB, {stats['documents']:,} documents from "
        f"{stats['files_scanned']:,} files in {time.perf_counter() - started:.0f}s -> {path}"
    )
    return [path]


def _digest_cache() -> str:
    """Where the corpus files' SHA-256 are cached (they name the data and run folders)."""
    from electra_tf.data.corpus_digest import DIGEST_CACHE_FILE

    return os.path.join(FLAGS.data_dir or os.path.join(WORKING_DIR, "data"), DIGEST_CACHE_FILE)


def _corpus_path(parent: str, corpus: list[str], name: str) -> str:
    """`parent/name`, `{key}` in `name` naming the corpus by content (`corpus_path`)."""
    from electra_tf.data.preparation import corpus_path

    return corpus_path(parent, corpus, name, _digest_cache(), _say)


def _run_name(builtin: bool, corpus: list[str]) -> str:
    """The run directory's default name under runs/."""
    if builtin:
        return f"{FLAGS.model_size}-builtin"
    runs = os.path.join(WORKING_DIR, "runs")
    return os.path.basename(_corpus_path(runs, corpus, f"{FLAGS.model_size}-{{key}}"))


def _given_vocab(init, overrides: dict, builtin: bool, corpus: list[str]):
    """--vocab_file, the checkpoint's or the resumed run's vocabulary; None: learn one."""
    from electra_tf import tokenization

    if FLAGS.vocab_file or init is not None:
        vocab_file = FLAGS.vocab_file or init.vocab_file
        try:
            vocab = tokenization.load_vocab(vocab_file)
        except tokenization.VocabError as error:
            raise app.UsageError(f"--vocab_file: {error}")
        if "vocab_size" in overrides and overrides["vocab_size"] != len(vocab):
            raise app.UsageError(
                f"--vocab_size={overrides['vocab_size']} but --vocab_file="
                f"{vocab_file} has {len(vocab)} tokens; drop one of the flags."
            )
        return vocab_file
    from electra_tf.artifacts.run_dir import RunDir

    run = RunDir(FLAGS.output_dir or os.path.join(WORKING_DIR, "runs", _run_name(builtin, corpus)))
    if os.path.isfile(run.config_file) and os.path.isfile(run.vocab_file):
        # Resuming: the run's vocabulary, whatever the vocabulary flags learn today.
        _say(f"Vocabulary: {run.vocab_file} (the run's own)")
        return run.vocab_file
    return None


def _prepare_data(
    config, corpus: list[str], data_dir: str, vocab_file, vocab_size: int, held_out: float, init
):
    """The vocabulary and shards (`prepare_pretraining_data`), its errors named by flag."""
    from electra_tf.data.preparation import PreparationError, prepare_pretraining_data
    from electra_tf.data.text_input import EmptyTextRange
    from electra_tf.vocab_learning import VocabLearningError

    eval_files = (
        _resolve_corpus(FLAGS.eval_corpus, flag="--eval_corpus") if FLAGS.eval_corpus else None
    )
    try:
        data = prepare_pretraining_data(
            config,
            corpus,
            data_dir,
            vocab_file=vocab_file,
            vocab_options=None if vocab_file else cli.vocab_options_from_flags(vocab_size),
            eval_corpus=eval_files,
            eval_fraction=held_out,
            num_shards=FLAGS.num_shards,
            num_workers=FLAGS.num_shard_workers or os.cpu_count() or 1,
            invalid_utf8=FLAGS.invalid_utf8,
            check_config=(lambda config: _check_init_architecture(config, init)) if init else None,
            digest_cache=_digest_cache(),
            progress=_say,
        )
    except (VocabLearningError, ConfigError) as error:
        raise app.UsageError(str(error))
    except PreparationError as error:
        if error.part == "training" and isinstance(error.cause, EmptyTextRange):
            raise app.UsageError(
                f"--eval_fraction={held_out:g} leaves no training text: the "
                "held-out part starts inside the corpus's first document."
            )
        prefix = "--eval_corpus: " if FLAGS.eval_corpus and error.part == "held-out" else ""
        raise app.UsageError(f"{prefix}{error}")
    if data.nothing_held_out:
        _say(
            f"note: the last {100 * held_out:g}% of the corpus falls inside its last "
            "document, so nothing is held out and there is no held-out evaluation (pass "
            "a larger --eval_fraction, or --eval_corpus)."
        )
    return data


def _load_init_checkpoint(config, overrides):
    """Reads --init_checkpoint; its vocabulary and casing become the defaults."""
    from electra_tf.interop import checkpoints

    try:
        init = checkpoints.load_checkpoint(config.init_checkpoint)
    except checkpoints.CheckpointError as error:
        raise app.UsageError(f"--init_checkpoint: {error}")
    if not FLAGS.vocab_file and init.vocab_file is None:
        raise app.UsageError(
            f"--init_checkpoint={config.init_checkpoint} has no vocab.txt beside "
            "it; pass the vocabulary it was trained with as --vocab_file."
        )
    if "do_lower_case" not in overrides and init.do_lower_case is not None:
        config.do_lower_case = init.do_lower_case
        if "strip_accents" not in overrides:
            config.strip_accents = init.strip_accents
    if "normalization" not in overrides:
        config.normalization = init.normalization or IMPORTED_NORMALIZATION
    _say(
        f"Starting from {init.source} ({init.format}"
        + (f", {init.model_size}-sized" if init.model_size else "")
        + ")."
    )
    if not init.has_generator and config.uses_generator:
        _say(
            "The checkpoint holds only a discriminator: starting a fresh generator (it "
            "shares the checkpoint's embeddings)."
        )
    for note in init.notes:
        _say(f"  note: {note}")
    return init


def _check_init_architecture(config, init) -> None:
    """Refuses flags whose architecture differs from --init_checkpoint's, naming each flag."""
    from electra_tf.interop.checkpoints import architecture_differences

    found = init.model
    if init.format == "tf1":  # shapes do not give the head count: the flags decide it
        found = dataclasses.replace(found, num_heads=config.model.num_heads)
    differences = architecture_differences(config.model, found)
    if differences:
        hint = (
            f" The checkpoint's discriminator matches --model_size={init.model_size}."
            if init.model_size and init.model_size != config.model_size
            else ""
        )
        raise app.UsageError(
            f"--init_checkpoint={config.init_checkpoint} does not fit the model the flags "
            f"describe (--model_size={config.model_size} plus overrides):\n  "
            + "\n  ".join(differences)
            + "\n"
            + hint.strip()
        )


def main(argv):
    del argv
    # Progress is printed here; the library's INFO logs would repeat it.
    logging.set_verbosity(logging.WARNING)
    builtin = not FLAGS.corpus and not FLAGS.shard_dir
    overrides = cli.overrides_from_flags()
    if builtin:
        for name, value in BUILTIN_SCHEDULE.items():
            overrides.setdefault(name, value)
    try:
        config = preset(FLAGS.model_size, **overrides)
        config.validate()
    except ConfigError as error:
        raise app.UsageError(str(error))

    from electra_tf.distribute import is_chief, task_name

    strategy = cli.strategy_from_flags()  # before any other TensorFlow work
    # Workers other than the chief build their own (identical) vocabulary and
    # shards, so that concurrent builds never share files; the run checks
    # that every worker ended up with the same vocabulary.
    own_copy = "" if is_chief(strategy) else f".{task_name(strategy)}"

    # ------------------------------------------------------------------ data
    if FLAGS.shard_dir:
        config, vocab_file, tokenizer, shard_dir, eval_shard_dir = _prebuilt_shards(
            config, overrides, own_copy
        )
        run_name = f"{FLAGS.model_size}-{os.path.basename(FLAGS.shard_dir.rstrip('/'))}"
        return _train(
            config, vocab_file, tokenizer, shard_dir, eval_shard_dir, run_name, strategy, None
        )
    if builtin:
        data_dir = os.path.join(
            FLAGS.data_dir or os.path.join(WORKING_DIR, "data", "builtin"), own_copy
        )
        _say(
            "No --corpus given: running the built-in DEMO — the documentation text of the "
            f"installed Python packages, {config.num_train_steps} steps at batch "
            f"{config.train_batch_size} (the paper trains {FLAGS.model_size} for "
            f"{preset(FLAGS.model_size).num_train_steps:,} steps at batch "
            f"{preset(FLAGS.model_size).train_batch_size}), generator temperature "
            f"{config.temperature:g}. It checks the whole pipeline; pass --corpus for real "
            "pre-training."
        )
        os.makedirs(data_dir, exist_ok=True)
        corpus = _builtin_corpus(data_dir)
    else:
        corpus = _resolve_corpus(FLAGS.corpus)
        data_dir = os.path.join(
            FLAGS.data_dir or _corpus_path(os.path.join(WORKING_DIR, "data"), corpus, "{key}"),
            own_copy,
        )
        os.makedirs(data_dir, exist_ok=True)

    init = _load_init_checkpoint(config, overrides) if config.init_checkpoint else None
    vocab_file = _given_vocab(init, overrides, builtin, corpus)
    held_out = 0.0 if FLAGS.eval_corpus else FLAGS.eval_fraction
    if builtin and not FLAGS["eval_fraction"].present:
        held_out = BUILTIN_EVAL_FRACTION
    if not 0.0 <= held_out < 1.0:
        raise app.UsageError(f"--eval_fraction={held_out}: must be in [0, 1).")
    data = _prepare_data(
        config,
        corpus,
        data_dir,
        vocab_file,
        overrides.get("vocab_size", BUILTIN_VOCAB_SIZE if builtin else BERT_VOCAB_SIZE),
        held_out,
        init,
    )
    return _train(
        config,
        data.vocab_file,
        data.tokenizer,
        data.shard_dir,
        data.eval_shard_dir,
        _run_name(builtin, corpus),
        strategy,
        init,
    )


def _prebuilt_shards(config, overrides, own_copy: str):
    """--shard_dir: the build's vocabulary, casing and length, and the held-out shards.

    Args:
        config: the run's configuration; the build's casing, length and
            vocabulary size are set on it.
        overrides: the configuration values given as flags.
        own_copy: "" on the chief, else the subfolder in which this worker
            builds its own copy of the --eval_corpus shards.

    Returns:
        (config, vocab_file, tokenizer, shard_dir, eval_shard_dir or None).
    """
    from electra_tf import tokenization
    from electra_tf.data.shard_layout import ShardError, read_metadata

    try:
        meta = read_metadata(FLAGS.shard_dir)
    except ShardError as error:
        raise app.UsageError(f"--shard_dir: {error}")
    meta = {"normalization": DEFAULT_NORMALIZATION, **meta}  # builds that record none
    for name in ("max_seq_length", "do_lower_case", "strip_accents", "normalization"):
        if name in overrides and overrides[name] != meta[name]:
            raise app.UsageError(
                f"--{name}={overrides[name]} but --shard_dir={FLAGS.shard_dir} "
                f"was built with {name}={meta[name]}; drop the flag."
            )
        setattr(config, name, meta[name])
    vocab_file = FLAGS.vocab_file or meta["vocab_file"]
    try:
        tokenizer = tokenization.WordPieceTokenizer(
            vocab_file, config.do_lower_case, config.resolved_strip_accents, config.normalization
        )
    except (tokenization.VocabError, OSError) as error:
        raise app.UsageError(f"--vocab_file={vocab_file}: {error}")
    if tokenization.vocab_fingerprint(vocab_file) != meta["vocab_fingerprint"]:
        raise app.UsageError(
            f"--vocab_file={vocab_file} is not the vocabulary --shard_dir="
            f"{FLAGS.shard_dir} was built with ({meta['vocab_file']})."
        )
    if config.init_checkpoint:
        raise app.UsageError(
            "--init_checkpoint with --shard_dir: pass the corpus (--corpus) so "
            "that it is tokenized with the checkpoint's vocabulary."
        )
    config.model.vocab_size = tokenizer.vocab_size
    try:
        config.validate()
    except ConfigError as error:
        raise app.UsageError(str(error))
    eval_shard_dir = FLAGS.eval_shard_dir
    if eval_shard_dir is None and FLAGS.eval_corpus:
        from electra_tf.data.shard_build import write_shards

        eval_files = _resolve_corpus(FLAGS.eval_corpus, flag="--eval_corpus")
        eval_shard_dir = os.path.join(
            _corpus_path(
                FLAGS.data_dir or os.path.join(WORKING_DIR, "data"),
                eval_files,
                f"eval-{{key}}-L{config.max_seq_length}-{meta['vocab_fingerprint'][:8]}"
                f"-s{config.seed}",
            ),
            own_copy,
        )
        try:
            write_shards(
                eval_files,
                eval_shard_dir,
                tokenizer.get_config(),
                max_seq_length=config.max_seq_length,
                num_shards=None,
                num_workers=FLAGS.num_shard_workers or os.cpu_count() or 1,
                seed=config.seed,
                invalid_utf8=FLAGS.invalid_utf8,
                digest_cache=_digest_cache(),
                progress=_say,
            )
        except ShardError as error:
            raise app.UsageError(f"--eval_corpus: {error}")
    elif eval_shard_dir is None:
        _say("note: --shard_dir without --eval_shard_dir or --eval_corpus: no held-out evaluation.")
    _say(
        f"Shards: {meta['num_examples']:,} examples of {config.max_seq_length} tokens in "
        f"{len(meta['shards'])} file(s) ({FLAGS.shard_dir}); vocabulary {vocab_file}."
    )
    return config, vocab_file, tokenizer, FLAGS.shard_dir, eval_shard_dir


def _train(config, vocab_file, tokenizer, shard_dir, eval_shard_dir, run_name, strategy, init):
    """Pre-trains, evaluates and exports (result.json written); prints where everything is."""
    from electra_tf.artifacts.export_dir import ExportDir
    from electra_tf.artifacts.run_dir import RunDir
    from electra_tf.distribute import is_chief
    from electra_tf.errors import RunError
    from electra_tf.training.pretraining_loop import run_pretraining

    run_dir = FLAGS.output_dir or os.path.join(WORKING_DIR, "runs", run_name)
    try:
        result = run_pretraining(
            config,
            run_dir,
            shard_dir,
            vocab_file,
            tokenizer.special_ids,
            strategy=strategy,
            print_fn=_say,
            init_weights=init,
            eval_shard_dir=eval_shard_dir,
            eval_only=FLAGS.eval_only,
            restart=FLAGS.restart,
            change_hyperparameters=FLAGS.change_hyperparameters,
        )
    except RunError as error:
        raise app.UsageError(str(error))
    if is_chief(strategy):  # the other workers wrote nothing to the run directory
        run = RunDir(run_dir)
        _say("")
        _say(f"TensorBoard:  tensorboard --logdir {run.tensorboard}")
        _say(f"Checkpoints:  {run.checkpoints}")
        if result.export_dir:
            _say(
                f"Export:       {result.export_dir} "
                f"({', '.join(ExportDir(result.export_dir).contents())})"
            )
    if result.interrupted:
        sys.exit(130)


def run() -> None:
    """The `pretrain.py` / `electra-pretrain` command."""
    cli.run(main, __name__)


if __name__ == "__main__":
    run()
