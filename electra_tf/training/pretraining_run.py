"""Pre-training from a corpus as a library call: `plan`, then `run`.

    request = PretrainingRequest(model_size="small", corpus=["wiki/*.txt"])
    planned = plan(request)                # names and checks: nothing is built or trained
    result = run(planned, strategy)        # vocabulary, shards, training, evaluation, export

`pretrain.py` (`electra_tf.commands.pretrain`) maps its flags to a
`PretrainingRequest` and reports the result; the study runner plans every
cell of a study before it trains any.

`plan` works out everything that needs neither training nor a shard build,
so that a bad flag stops a run before anything is built or written: the
configuration (the size preset, the values set, the demo's schedule,
--init_checkpoint's casing, --shard_dir's length and casing), the corpus
files (globs, directories, `tfds:` splits), the data and run directories
(named after the corpus's content), the vocabulary (given, the checkpoint's,
the resumed run's, or one to learn; a resumed run's by the hash its
identity.json records) and, once the vocabulary is known, the
architecture against --init_checkpoint's and the configuration against the
run the run directory holds. It reads --init_checkpoint, and writes only
caches: a `tfds:` split's text, the corpus files' digests and the links that
let a renamed corpus find its folders (`corpus_path`). Call it once the
strategy exists: reading a checkpoint or a `tfds:` split is TensorFlow work.

`run` takes the run directory's lock (a second process on it is refused
before it builds anything), builds (or finds cached) the vocabulary and
shards, then pre-trains, evaluates on the held-out text and exports
(`run_pretraining`). In a
multi-worker run every worker plans the same run; the chief builds the data
in `data_dir`, every other worker its own copy in `data_dir/.<task>`, so
that concurrent builds never share files (the run checks that every worker
ended up with the same vocabulary).

Both raise `RunError` in one line naming the flag, file or value at fault
(flags are named as `pretrain.py` spells them).
"""

from __future__ import annotations

import copy
import dataclasses
import glob
import os
import re
import time
from typing import Any, Callable, Optional, Sequence

import tensorflow as tf

from electra_tf import tokenization
from electra_tf.artifacts.run_dir import RunDir, RunIdentity, read_identity
from electra_tf.bounded_lines import MAX_LINE_CHARS
from electra_tf.config import (
    BERT_VOCAB_SIZE,
    DEFAULT_NORMALIZATION,
    IMPORTED_NORMALIZATION,
    MODEL_SIZES,
    ConfigError,
    PretrainingConfig,
    flag_field,
    preset,
)
from electra_tf.data.corpus_digest import DIGEST_CACHE_FILE
from electra_tf.data.preparation import (
    PreparationError,
    PreparedData,
    ShardBuilds,
    corpus_path,
    prepare_pretraining_data,
)
from electra_tf.data.shard_layout import ShardError, read_metadata
from electra_tf.data.text_input import INVALID_UTF8_POLICIES, EmptyTextRange
from electra_tf.distribute import is_chief, task_name
from electra_tf.errors import RunError
from electra_tf.training.pretraining_loop import (
    PretrainingResult,
    check_run_dir,
    lost_vocabulary,
    resolve_steps,
    run_pretraining,
)
from electra_tf.training.run_holding import hold_run_dir
from electra_tf.vocab_learning import VocabLearningError, VocabOptions

# The built-in run is a demonstration that finishes in about ten minutes on a
# 2-core CPU, not the paper's schedule. Values set explicitly still win. The
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
# The held-out fraction of a corpus unless the request gives one.
DEFAULT_EVAL_FRACTION = 0.01


@dataclasses.dataclass
class PretrainingRequest:
    """What to pre-train: the flags of `pretrain.py`, typed.

    A field's metadata holds its flag's help (`electra_tf.cli` defines the
    flags from them); the fields that are not flags:

    Attributes:
        overrides: configuration fields set explicitly, by name (fields of
            `ModelConfig` and `PretrainingConfig`, e.g. {"hidden_size": 32}).
        vocab_options: how a vocabulary is learned; its `vocab_size` is
            replaced by the run's (the `vocab_size` override, else 8,000 for
            the demo, else BERT's).
        working_dir: where runs/ and data/ go by default (None: the current directory).
    """

    model_size: str = flag_field(
        "small",
        "Size preset: tiny, small, base or large (paper Table 6; tiny is a CPU-sized model for "
        "tests and quick experiments).",
        choices=MODEL_SIZES,
    )
    overrides: dict[str, Any] = dataclasses.field(default_factory=dict, metadata={"flag": False})
    # Empty, without a shard_dir: the built-in demo.
    corpus: Sequence[str] = flag_field(
        (),
        "Text files or globs (comma-separated). A line is a sentence or paragraph; a blank line "
        "ends a document. Or a prepared TensorFlow Datasets corpus: tfds:NAME[/CONFIG][:SPLIT]. "
        "Default: the built-in demo corpus.",
        flag_default=None,
    )
    tfds_text_key: str = flag_field(
        "text",
        "With --corpus=tfds:...: the feature holding each example's text (one example = one "
        "document).",
    )
    tfds_data_dir: Optional[str] = flag_field(
        None,
        "With --corpus=tfds:...: where the dataset is prepared (default: TensorFlow Datasets' "
        "own default). Nothing is downloaded.",
    )
    vocab_file: Optional[str] = flag_field(
        None, "BERT-style vocab.txt. Default: learn one from the corpus (cached under --data_dir)."
    )
    vocab_options: VocabOptions = dataclasses.field(
        default_factory=VocabOptions, metadata={"flag": False}
    )
    shard_dir: Optional[str] = flag_field(
        None,
        "Train on these already built shards (a directory with metadata.json, local or gs://, "
        "e.g. written by python -m electra_tf.commands.beam_shards) instead of building them "
        "from --corpus. The vocabulary, casing and length recorded in metadata.json are used.",
    )
    eval_shard_dir: Optional[str] = flag_field(
        None, "Already built shards of held-out text (with --shard_dir; or use --eval_corpus)."
    )
    output_dir: Optional[str] = flag_field(
        None, "Run directory. Default: runs/<model_size>-<corpus>."
    )
    data_dir: Optional[str] = flag_field(
        None, "Where the vocabulary and shards are built and cached. Default: data/<corpus>-<hash>."
    )
    num_shards: Optional[int] = flag_field(
        None, "Number of TFRecord shards (default: by corpus size)."
    )
    num_shard_workers: Optional[int] = flag_field(
        None, "Processes writing shards (default: CPU count)."
    )
    invalid_utf8: str = flag_field(
        "error",
        "What to do with invalid UTF-8 in the corpus: stop with the file and position, or "
        "replace and count.",
        choices=INVALID_UTF8_POLICIES,
    )
    max_row_chars: int = flag_field(
        MAX_LINE_CHARS,
        "The longest corpus line read, in characters (the bound finetune.py's --max_row_chars "
        "sets on its rows and lines); a longer one stops the vocabulary or shard build with "
        "its file and line, before it takes memory.",
    )
    builtin_corpus_bytes: int = flag_field(4_000_000, "Size of the built-in demo corpus.")
    # None (the flag not given): 1% of a corpus, 5% of the demo's; ignored with eval_corpus.
    eval_fraction: Optional[float] = flag_field(
        None,
        "Hold out this fraction of the corpus (its last documents) for evaluation; training "
        "never reads it. 0: no held-out text. The built-in demo holds out 0.05 unless this flag "
        "is given.",
        flag_default=DEFAULT_EVAL_FRACTION,
    )
    eval_corpus: Sequence[str] = flag_field(
        (),
        "Held-out text files or globs to evaluate on instead of a fraction of --corpus (then "
        "training reads all of --corpus).",
        flag_default=None,
    )
    eval_only: bool = flag_field(
        False, "Evaluate the run's latest checkpoint on the held-out text and stop (no training)."
    )
    restart: bool = flag_field(
        False,
        "Start again from step 0 although --output_dir holds checkpoints (they are moved aside "
        "to checkpoints.before-restart-<time>/, not deleted). Without it a run directory with "
        "checkpoints always resumes.",
    )
    change_hyperparameters: bool = flag_field(
        False,
        "Resume although optimisation hyperparameters differ from the run's config.json "
        "(learning_rate, num_warmup_steps, lr_decay_power, weight_decay_rate, adam_beta_1, "
        "adam_beta_2, adam_epsilon, clip_norm, gen_weight, disc_weight, temperature), e.g. a "
        "lower --learning_rate after a NaN. The weights and optimizer state carry on; "
        "config.json records the new values.",
    )
    working_dir: Optional[str] = dataclasses.field(default=None, metadata={"flag": False})


@dataclasses.dataclass
class PretrainingPlan:
    """What `run` does, as `plan` worked it out.

    Attributes:
        request: what was asked.
        config: the validated configuration. Its vocabulary size is the
            vocabulary's when `vocab_file` is set; else `run` sets it to the
            size of the vocabulary it learns.
        builtin: the built-in demo (no corpus, no shard_dir).
        run_dir: the run directory.
        data_dir: where the vocabulary and shards are built and cached (the
            chief's; another worker builds its own copy in `.<task>` inside
            it). With `shard_dir`: where held-out shards of `eval_corpus` go.
        corpus: the corpus files; empty for the demo, whose text `run`
            writes to `data_dir`/corpus.txt, and with `shard_dir`.
        eval_corpus: the held-out text files; empty: none.
        eval_fraction: the last fraction of the corpus held out.
        vocab_file: the vocabulary; None: `run` learns one with `vocab_options`.
        vocab_options: how `run` learns it (None when `vocab_file` is set).
        init: the --init_checkpoint read (a `LoadedCheckpoint`), or None.
        shard_dir: finished training shards (--shard_dir); None: `run` builds them.
        shard_metadata: their metadata.json.
        eval_shard_dir: finished held-out shards (--eval_shard_dir); with
            `shard_dir` and `eval_corpus`, where `run` builds them (the chief's).
        resuming: the run directory holds a run of this configuration and
            vocabulary, which `run` continues (False: a new run, or a
            vocabulary still to learn).
    """

    request: PretrainingRequest
    config: PretrainingConfig
    builtin: bool
    run_dir: str
    data_dir: str
    corpus: list[str] = dataclasses.field(default_factory=list)
    eval_corpus: list[str] = dataclasses.field(default_factory=list)
    eval_fraction: float = 0.0
    vocab_file: Optional[str] = None
    vocab_options: Optional[VocabOptions] = None
    init: Any = None
    shard_dir: Optional[str] = None
    shard_metadata: Optional[dict] = None
    eval_shard_dir: Optional[str] = None
    resuming: bool = False


def _quiet(message: str) -> None:
    del message


def _checked(config: PretrainingConfig) -> None:
    """`config.validate()`, its error a `RunError`."""
    try:
        config.validate()
    except ConfigError as error:
        raise RunError(str(error)) from None


class _Places:
    """The default directories of a request: runs/ and data/ under the working directory."""

    def __init__(self, request: PretrainingRequest, print_fn: Callable[[str], None]):
        self.request = request
        self.print_fn = print_fn
        self.working_dir = request.working_dir or os.getcwd()
        self.data_root = request.data_dir or os.path.join(self.working_dir, "data")
        # The corpus files' SHA-256, which name the data and run folders.
        self.digest_cache = os.path.join(self.data_root, DIGEST_CACHE_FILE)

    def corpus_path(self, parent: str, corpus: list[str], name: str) -> str:
        """`parent/name`, `{key}` in `name` naming the corpus by content (`corpus_path`)."""
        return corpus_path(parent, corpus, name, self.digest_cache, self.print_fn)

    def run_dir(self, name: Callable[[], str]) -> str:
        """--output_dir, else runs/<name()> (named only when needed: it may hash the corpus)."""
        return self.request.output_dir or os.path.join(self.working_dir, "runs", name())

    def tfds_text(self, reference: str) -> str:
        """Writes (once) the text of a prepared TFDS split and returns the file's path."""
        from electra_tf.data import tfds_corpus

        try:
            corpus = tfds_corpus.parse(reference)
            name = re.sub(r"[^\w.-]+", "_", f"{corpus.builder_name}-{corpus.split}")
            path = os.path.join(self.data_root, "tfds", f"{name}.txt")
            tfds_corpus.export_text(
                corpus,
                path,
                self.request.tfds_text_key,
                self.request.tfds_data_dir,
                progress=self.print_fn,
            )
        except tfds_corpus.TfdsCorpusError as error:
            raise RunError(str(error)) from None
        return path

    def resolve_corpus(self, patterns: Sequence[str], flag: str) -> list[str]:
        """The text files of files, globs, directories and `tfds:` references."""
        files: list[str] = []
        for pattern in patterns:
            if pattern.startswith("tfds:"):
                files.append(self.tfds_text(pattern))
                continue
            matches = sorted(glob.glob(os.path.expanduser(pattern)))
            if not matches:
                raise RunError(f"{flag}: {pattern!r} matches no file.")
            for match in matches:
                if os.path.isdir(match):  # a directory stands for the files in it
                    files.extend(
                        sorted(
                            os.path.join(match, name)
                            for name in os.listdir(match)
                            if not name.startswith(".")
                            and os.path.isfile(os.path.join(match, name))
                        )
                    )
                elif os.path.isfile(match):
                    files.append(match)
        if not files:
            raise RunError(f"{flag}={','.join(patterns)}: no regular files found.")
        return files


def plan(request: PretrainingRequest, print_fn: Callable[[str], None] = print) -> PretrainingPlan:
    """Works out a pre-training run and refuses bad requests; builds and trains nothing.

    Args:
        request: what to pre-train.
        print_fn: where status lines go (the demo's announcement, what
            --init_checkpoint holds, the resumed run's vocabulary, progress
            while a large corpus is hashed or a `tfds:` split is written).

    Returns:
        The plan `run` carries out.

    Raises:
        RunError: a flag, file or value that cannot work, named.
    """
    builtin = not request.corpus and not request.shard_dir
    overrides = dict(request.overrides)
    if builtin:
        for name, value in BUILTIN_SCHEDULE.items():
            overrides.setdefault(name, value)
    try:
        config = preset(request.model_size, **overrides)
    except ConfigError as error:
        raise RunError(str(error)) from None
    _checked(config)
    places = _Places(request, print_fn)
    if request.shard_dir:
        return _plan_prebuilt(request, config, overrides, places)

    if builtin:
        data_dir = request.data_dir or os.path.join(places.working_dir, "data", "builtin")
        print_fn(
            "No --corpus given: running the built-in DEMO — the documentation text of the "
            f"installed Python packages, {config.num_train_steps} steps at batch "
            f"{config.train_batch_size} (the paper trains {request.model_size} for "
            f"{preset(request.model_size).num_train_steps:,} steps at batch "
            f"{preset(request.model_size).train_batch_size}), generator temperature "
            f"{config.temperature:g}. It checks the whole pipeline; pass --corpus for real "
            "pre-training."
        )
        corpus: list[str] = []
        run_dir = places.run_dir(lambda: f"{request.model_size}-builtin")
    else:
        corpus = places.resolve_corpus(request.corpus, "--corpus")
        data_dir = request.data_dir or places.corpus_path(
            os.path.join(places.working_dir, "data"), corpus, "{key}"
        )
        run_dir = places.run_dir(
            lambda: os.path.basename(
                places.corpus_path(
                    os.path.join(places.working_dir, "runs"),
                    corpus,
                    f"{request.model_size}-{{key}}",
                )
            )
        )

    init = _load_init_checkpoint(config, overrides, request, print_fn)
    vocab_file = _given_vocab(request, init, overrides, run_dir, data_dir, print_fn)
    if request.eval_corpus:
        held_out = 0.0
    elif request.eval_fraction is None:
        held_out = BUILTIN_EVAL_FRACTION if builtin else DEFAULT_EVAL_FRACTION
    else:
        held_out = request.eval_fraction
    if not 0.0 <= held_out < 1.0:
        raise RunError(f"--eval_fraction={held_out}: must be in [0, 1).")
    if request.max_row_chars <= 0:
        raise RunError(f"--max_row_chars={request.max_row_chars}: must be a positive integer.")
    eval_corpus = (
        places.resolve_corpus(request.eval_corpus, "--eval_corpus") if request.eval_corpus else []
    )
    if request.eval_only and not (eval_corpus or held_out):
        raise RunError("--eval_only needs held-out text (--eval_fraction > 0 or --eval_corpus).")
    vocab_options = None
    if vocab_file is None:
        size = overrides.get("vocab_size", BUILTIN_VOCAB_SIZE if builtin else BERT_VOCAB_SIZE)
        vocab_options = dataclasses.replace(request.vocab_options, vocab_size=size)
    else:
        _set_vocab_size(config, vocab_file)
        if init is not None:
            _check_init_architecture(config, init)
    return PretrainingPlan(
        request=request,
        config=config,
        builtin=builtin,
        run_dir=run_dir,
        data_dir=data_dir,
        corpus=corpus,
        eval_corpus=eval_corpus,
        eval_fraction=held_out,
        vocab_file=vocab_file,
        vocab_options=vocab_options,
        init=init,
        resuming=_resumes(config, run_dir, vocab_file, request),
    )


def _set_vocab_size(config: PretrainingConfig, vocab_file: str) -> None:
    """The model's vocabulary size from the file, then the config checked with it."""
    try:
        config.model.vocab_size = len(tokenization.load_vocab(vocab_file))
    except tokenization.VocabError as error:
        raise RunError(str(error)) from None
    _checked(config)


def _resumes(config: PretrainingConfig, run_dir: str, vocab_file: Optional[str], request) -> bool:
    """Whether `run_dir` holds this run; raises `RunConfigMismatch` if it holds another.

    `run_pretraining` checks the same again; checked here, a resumed run with
    other flags or another vocabulary stops before any shard is built.
    Without the vocabulary (one still to learn: the directory holds no run)
    the model is not known yet and the check waits.
    """
    if vocab_file is None:
        return False
    # The steps a --max_train_flops budget buys (and the two-stage boundary)
    # are part of the run's config.json; the loop announces them, not the plan.
    resolved = resolve_steps(config, run_dir, _quiet)
    holds_it, _ = check_run_dir(
        resolved,
        run_dir,
        vocab_file,
        request.change_hyperparameters,
        vocab_label=f"--vocab_file={vocab_file}" if vocab_file == request.vocab_file else None,
    )
    return holds_it


def _given_vocab(
    request: PretrainingRequest, init, overrides: dict, run_dir: str, data_dir: str, print_fn
) -> Optional[str]:
    """--vocab_file, the checkpoint's or the resumed run's vocabulary; None: learn one."""
    if request.vocab_file or init is not None:
        vocab_file = request.vocab_file or init.vocab_file
        try:
            vocab = tokenization.load_vocab(vocab_file)
        except tokenization.VocabError as error:
            raise RunError(f"--vocab_file: {error}") from None
        if "vocab_size" in overrides and overrides["vocab_size"] != len(vocab):
            raise RunError(
                f"--vocab_size={overrides['vocab_size']} but --vocab_file="
                f"{vocab_file} has {len(vocab)} tokens; drop one of the flags."
            )
        return vocab_file
    run = RunDir(run_dir)
    if not os.path.isfile(run.config_file):
        return None
    # Resuming: the run's vocabulary, whatever the vocabulary flags learn today.
    identity = read_identity(run)
    if os.path.isfile(run.vocab_file):
        own, size = run.vocab_file, len(tokenization.load_vocab(run.vocab_file))
    elif identity is not None:
        own, size = _recorded_vocab(identity, data_dir), identity.vocab_size
        if own is None:
            raise RunError(
                f"{run.vocab_file} is missing and no file of its hash (sha256 "
                f"{identity.vocab_sha256[:16]}, recorded in {run.identity_file}) is cached "
                f"in {data_dir}: pass the run's vocabulary as --vocab_file, or choose "
                "another --output_dir."
            )
    else:
        raise lost_vocabulary(run)
    _check_vocab_flags(request, overrides, run, identity, size)
    if own == run.vocab_file:
        print_fn(f"Vocabulary: {own} (the run's own)")
    else:
        print_fn(f"Vocabulary: {own} (the run's, by its hash; restored as {run.vocab_file})")
    return own


def _check_vocab_flags(
    request: PretrainingRequest,
    overrides: dict,
    run: RunDir,
    identity: Optional[RunIdentity],
    size: int,
) -> None:
    """Refuses vocabulary flags that a resumed run would ignore, naming both values.

    A resumed run keeps its vocabulary; a flag that asks for another one
    (at a value other than its default) and is not the value the run's
    vocabulary was learned with is refused rather than ignored.
    """
    learned_with = identity.learned_with if identity is not None else None
    if "vocab_size" in overrides:
        given = overrides["vocab_size"]
        if learned_with is not None and given != learned_with["vocab_size"]:
            raise RunError(
                f"--vocab_size={given} but {run.path} learned its vocabulary with "
                f"--vocab_size={learned_with['vocab_size']} ({size} tokens, "
                f"{run.identity_file}); drop the flag to resume, or choose another --output_dir."
            )
        if learned_with is None and given != size:
            raise RunError(
                f"--vocab_size={given} but {run.path} was trained with a "
                f"vocabulary of {size} tokens ({run.vocab_file}); drop the flag to resume, "
                "or choose another --output_dir."
            )
    if learned_with is None:
        return
    defaults = VocabOptions().flag_values()
    for name, given in request.vocab_options.flag_values().items():
        if name == "vocab_size" or given == defaults[name] or name not in learned_with:
            continue  # vocab_size: from the model's flags (above); a default: not asked for
        if given != learned_with[name]:
            raise RunError(
                f"--{name}={given} but {run.path} learned its vocabulary with "
                f"--{name}={learned_with[name]} ({run.identity_file}); drop the flag to "
                "resume, or choose another --output_dir."
            )


def _recorded_vocab(identity: RunIdentity, data_dir: str) -> Optional[str]:
    """A vocabulary learned into `data_dir` whose hash is the run's, or None."""
    for candidate in sorted(glob.glob(os.path.join(glob.escape(data_dir), "vocab-*.txt"))):
        if tokenization.vocab_fingerprint(candidate) == identity.vocab_sha256:
            return candidate
    return None


def _load_init_checkpoint(
    config: PretrainingConfig, overrides: dict, request: PretrainingRequest, print_fn
):
    """Reads --init_checkpoint (None without one); its vocabulary and casing become the defaults."""
    if not config.init_checkpoint:
        return None
    from electra_tf.interop import checkpoints

    try:
        init = checkpoints.load_checkpoint(config.init_checkpoint)
    except checkpoints.CheckpointError as error:
        raise RunError(f"--init_checkpoint: {error}") from None
    if not request.vocab_file and init.vocab_file is None:
        raise RunError(
            f"--init_checkpoint={config.init_checkpoint} has no vocab.txt beside "
            "it; pass the vocabulary it was trained with as --vocab_file."
        )
    if "do_lower_case" not in overrides and init.do_lower_case is not None:
        config.do_lower_case = init.do_lower_case
        if "strip_accents" not in overrides:
            config.strip_accents = init.strip_accents
    if "normalization" not in overrides:
        config.normalization = init.normalization or IMPORTED_NORMALIZATION
    print_fn(
        f"Starting from {init.source} ({init.format}"
        + (f", {init.model_size}-sized" if init.model_size else "")
        + ")."
    )
    if not init.has_generator and config.uses_generator:
        print_fn(
            "The checkpoint holds only a discriminator: starting a fresh generator (it "
            "shares the checkpoint's embeddings)."
        )
    for note in init.notes:
        print_fn(f"  note: {note}")
    return init


def _check_init_architecture(config: PretrainingConfig, init) -> None:
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
        raise RunError(
            f"--init_checkpoint={config.init_checkpoint} does not fit the model the flags "
            f"describe (--model_size={config.model_size} plus overrides):\n  "
            + "\n  ".join(differences)
            + "\n"
            + hint.strip()
        )


def _plan_prebuilt(
    request: PretrainingRequest, config: PretrainingConfig, overrides: dict, places: _Places
) -> PretrainingPlan:
    """--shard_dir: the build's vocabulary, casing and length, and the held-out shards."""
    try:
        meta = read_metadata(request.shard_dir)
    except ShardError as error:
        raise RunError(f"--shard_dir: {error}") from None
    meta = {"normalization": DEFAULT_NORMALIZATION, **meta}  # builds that record none
    for name in ("max_seq_length", "do_lower_case", "strip_accents", "normalization"):
        if name in overrides and overrides[name] != meta[name]:
            raise RunError(
                f"--{name}={overrides[name]} but --shard_dir={request.shard_dir} "
                f"was built with {name}={meta[name]}; drop the flag."
            )
        setattr(config, name, meta[name])
    vocab_file = request.vocab_file or meta["vocab_file"]
    try:
        tokenization.load_vocab(vocab_file)
    except (tokenization.VocabError, OSError) as error:
        raise RunError(f"--vocab_file={vocab_file}: {error}") from None
    if tokenization.vocab_fingerprint(vocab_file) != meta["vocab_fingerprint"]:
        raise RunError(
            f"--vocab_file={vocab_file} is not the vocabulary --shard_dir="
            f"{request.shard_dir} was built with ({meta['vocab_file']})."
        )
    if config.init_checkpoint:
        raise RunError(
            "--init_checkpoint with --shard_dir: pass the corpus (--corpus) so "
            "that it is tokenized with the checkpoint's vocabulary."
        )
    _set_vocab_size(config, vocab_file)
    eval_shard_dir = request.eval_shard_dir
    eval_corpus: list[str] = []
    if eval_shard_dir is None and request.eval_corpus:
        eval_corpus = places.resolve_corpus(request.eval_corpus, "--eval_corpus")
        eval_shard_dir = places.corpus_path(
            places.data_root,
            eval_corpus,
            f"eval-{{key}}-L{config.max_seq_length}-{meta['vocab_fingerprint'][:8]}-s{config.seed}",
        )
    if request.eval_only and eval_shard_dir is None:
        raise RunError("--eval_only needs held-out text (--eval_fraction > 0 or --eval_corpus).")
    run_dir = places.run_dir(
        lambda: f"{request.model_size}-{os.path.basename(request.shard_dir.rstrip('/'))}"
    )
    return PretrainingPlan(
        request=request,
        config=config,
        builtin=False,
        run_dir=run_dir,
        data_dir=places.data_root,
        eval_corpus=eval_corpus,
        vocab_file=vocab_file,
        shard_dir=request.shard_dir,
        shard_metadata=meta,
        eval_shard_dir=eval_shard_dir,
        resuming=_resumes(config, run_dir, vocab_file, request),
    )


# ---------------------------------------------------------------------------- run


def run(
    plan: PretrainingPlan,
    strategy: Optional[tf.distribute.Strategy] = None,
    print_fn: Callable[[str], None] = print,
) -> PretrainingResult:
    """Builds the plan's data, pre-trains, evaluates and exports (result.json written).

    Args:
        plan: what `plan` worked out (not modified).
        strategy: the tf.distribute strategy (default: the current one).
        print_fn: where progress lines go.

    Returns:
        The loop's result: steps done, whether finished or interrupted, the
        last metrics, the held-out evaluation and the export's directory.

    Raises:
        RunError: the data cannot be built (the flag or file named) or the
            run cannot start or go on (`run_pretraining`).
    """
    strategy = strategy or tf.distribute.get_strategy()
    own_copy = "" if is_chief(strategy) else f".{task_name(strategy)}"
    config = copy.deepcopy(plan.config)
    # The run directory is held before any data is built: a second process
    # on it is refused before it spends anything.
    lock = hold_run_dir(plan.run_dir, strategy, print_fn)
    try:
        if plan.shard_dir:
            data = _prebuilt_data(plan, config, own_copy, print_fn)
        else:
            data = _prepared_data(plan, config, own_copy, print_fn)
        request = plan.request
        return run_pretraining(
            config,
            plan.run_dir,
            data.shard_dir,
            data.vocab_file,
            data.tokenizer.special_ids,
            strategy=strategy,
            print_fn=print_fn,
            init_weights=plan.init,
            eval_shard_dir=data.eval_shard_dir,
            eval_only=request.eval_only,
            restart=request.restart,
            change_hyperparameters=request.change_hyperparameters,
            run_dir_held=True,
            # A vocabulary learned now: its flags go into the run's identity.json.
            vocab_learned_with=plan.vocab_options.flag_values() if plan.vocab_options else None,
        )
    finally:
        if lock is not None:
            lock.release()


def _shard_workers(request: PretrainingRequest) -> int:
    return request.num_shard_workers or os.cpu_count() or 1


def _builtin_corpus(data_dir: str, max_bytes: int, print_fn) -> list[str]:
    """The demo's text (the installed packages' documentation), written once into `data_dir`."""
    from electra_tf.data.default_corpus import build_default_corpus

    path = os.path.join(data_dir, "corpus.txt")
    if os.path.exists(path):
        print_fn(f"Built-in corpus: {path} (cached)")
        return [path]
    print_fn("Building the built-in corpus from the docstrings of the installed Python packages...")
    started = time.perf_counter()
    stats = build_default_corpus(path, max_bytes=max_bytes)
    print_fn(
        f"Built-in corpus: {stats['bytes'] / 1e6:.1f} MB, {stats['documents']:,} documents from "
        f"{stats['files_scanned']:,} files in {time.perf_counter() - started:.0f}s -> {path}"
    )
    return [path]


def _prepared_data(
    plan: PretrainingPlan, config: PretrainingConfig, own_copy: str, print_fn
) -> PreparedData:
    """The vocabulary and shards (`prepare_pretraining_data`), its errors named by flag."""
    request = plan.request
    data_dir = os.path.join(plan.data_dir, own_copy)
    os.makedirs(data_dir, exist_ok=True)
    corpus = plan.corpus or _builtin_corpus(data_dir, request.builtin_corpus_bytes, print_fn)
    try:
        data = prepare_pretraining_data(
            config,
            corpus,
            data_dir,
            vocab_file=plan.vocab_file,
            vocab_options=plan.vocab_options,
            eval_corpus=plan.eval_corpus or None,
            eval_fraction=plan.eval_fraction,
            num_shards=request.num_shards,
            num_workers=_shard_workers(request),
            invalid_utf8=request.invalid_utf8,
            digest_cache=_Places(request, print_fn).digest_cache,
            progress=print_fn,
            max_line_chars=request.max_row_chars,
        )
    except (VocabLearningError, ConfigError) as error:
        raise RunError(str(error)) from None
    except PreparationError as error:
        if error.part == "training" and isinstance(error.cause, EmptyTextRange):
            raise RunError(
                f"--eval_fraction={plan.eval_fraction:g} leaves no training text: the "
                "held-out part starts inside the corpus's first document."
            ) from None
        prefix = "--eval_corpus: " if plan.eval_corpus and error.part == "held-out" else ""
        raise RunError(f"{prefix}{error}") from None
    if data.nothing_held_out:
        needed = data.eval_fraction_needed
        remedy = (
            f"its last document is {100 * needed:g}% of it or less: pass "
            f"--eval_fraction={needed:g} (or more) to hold it out, or --eval_corpus=FILES"
            if needed is not None
            else "it is one document (no blank line between documents): separate its "
            "documents with blank lines, or pass --eval_corpus=FILES"
        )
        print_fn(
            f"note: the last {100 * plan.eval_fraction:g}% of the corpus falls inside its last "
            f"document, so nothing is held out and there is no held-out evaluation; {remedy} "
            "to evaluate on held-out text."
        )
    return data


def _prebuilt_data(
    plan: PretrainingPlan, config: PretrainingConfig, own_copy: str, print_fn
) -> PreparedData:
    """--shard_dir's shards and vocabulary, and held-out shards built from --eval_corpus."""
    request, meta = plan.request, plan.shard_metadata
    tokenizer = tokenization.WordPieceTokenizer(
        plan.vocab_file, config.do_lower_case, config.resolved_strip_accents, config.normalization
    )
    eval_shard_dir = plan.eval_shard_dir
    if plan.eval_corpus:
        eval_shard_dir = os.path.join(eval_shard_dir, own_copy)
        builds = ShardBuilds(
            tokenizer,
            config,
            _shard_workers(request),
            request.invalid_utf8,
            _Places(request, print_fn).digest_cache,
            print_fn,
            request.max_row_chars,
        )
        try:
            builds.build(plan.eval_corpus, eval_shard_dir, (0.0, 1.0), "held-out", None)
        except PreparationError as error:
            raise RunError(f"--eval_corpus: {error}") from None
    elif eval_shard_dir is None:
        print_fn(
            "note: --shard_dir without --eval_shard_dir or --eval_corpus: no held-out evaluation."
        )
    print_fn(
        f"Shards: {meta['num_examples']:,} examples of {config.max_seq_length} tokens in "
        f"{len(meta['shards'])} file(s) ({plan.shard_dir}); vocabulary {plan.vocab_file}."
    )
    return PreparedData(
        vocab_file=plan.vocab_file,
        tokenizer=tokenizer,
        shard_dir=plan.shard_dir,
        shard_paths=[os.path.join(plan.shard_dir, shard["path"]) for shard in meta["shards"]],
        num_examples=meta["num_examples"],
        eval_shard_dir=eval_shard_dir,
    )
