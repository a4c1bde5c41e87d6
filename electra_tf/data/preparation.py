"""The data a pre-training run needs: its vocabulary and the shards of its training and held-out text.

`prepare_pretraining_data` learns a WordPiece vocabulary from the corpus (or
takes a given one), then builds the training shards and the held-out shards
(the corpus's last documents, or a separate corpus). Everything is cached
under one data directory, named by what changes its content, and reused on
the next call:

    vocab-<casing>-<size>-<options>.txt          a learned vocabulary
    shards-<build>[-holdout<f>]/                 the training shards
    eval-shards-<build>-holdout<f>/              the held-out last fraction f of the corpus
    eval-<corpus>-<build>/                       a separate held-out corpus

where <build> is `L<max_seq_length>-<casing>-<vocabulary hash>-s<seed>`
(plus `-n<num_shards>` when the count is given) and <corpus> is
`corpus_key` of the files, a hash of their content. Each shard directory is a
finished shard build (`electra_tf.data.shard_build`): a re-run reuses its
shards. The files' SHA-256 are cached in `corpus-digests.json`
(`electra_tf.data.corpus_digest`).
"""

from __future__ import annotations

import glob
import hashlib
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from electra_tf import fileio, tokenization, vocab_learning
from electra_tf.bounded_lines import MAX_LINE_CHARS
from electra_tf.config import DEFAULT_NORMALIZATION
from electra_tf.data.corpus_digest import DIGEST_CACHE_FILE, corpus_digests, source_identity
from electra_tf.data.shard_build import write_shards
from electra_tf.data.shard_layout import ShardError
from electra_tf.data.text_input import EmptyTextRange, last_document_fraction, resolve_sources


class PreparationError(ValueError):
    """A shard build failed.

    Attributes:
        part: "training" or "held-out": which build.
        cause: the build's `ShardError` (an `EmptyTextRange` when the text
            range selects no text).
    """

    def __init__(self, part: str, cause: ShardError):
        super().__init__(str(cause))
        self.part = part
        self.cause = cause


@dataclass
class PreparedData:
    """What `prepare_pretraining_data` built or found.

    Attributes:
        vocab_file: the vocabulary, given or learned.
        tokenizer: a `WordPieceTokenizer` of it with the config's casing.
        shard_dir: the training shard directory.
        shard_paths: its shard files, in shard order.
        num_examples: training examples (each `max_seq_length` tokens).
        eval_shard_dir: the held-out shard directory, or None.
        eval_shard_paths: its shard files, in shard order.
        num_eval_examples: held-out examples.
        nothing_held_out: a held-out fraction was asked for, but it falls
            inside the corpus's last document, so nothing is held out.
        eval_fraction_needed: then, the smallest held-out fraction (whole
            percent) that holds out that document; None: the corpus is one
            document.
    """

    vocab_file: str
    tokenizer: tokenization.WordPieceTokenizer
    shard_dir: str
    shard_paths: list[str]
    num_examples: int
    eval_shard_dir: Optional[str] = None
    eval_shard_paths: list[str] = field(default_factory=list)
    num_eval_examples: int = 0
    nothing_held_out: bool = False
    eval_fraction_needed: Optional[float] = None


@dataclass
class ShardBuilds:
    """How a run's shards are built: its tokenizer, length and seed, workers and messages.

    Attributes:
        tokenizer: the run's `WordPieceTokenizer`.
        config: the run's config; its `max_seq_length` and `seed` shape the examples.
        num_workers: processes building shards.
        invalid_utf8: "error" or "replace" (see `write_shards`).
        digest_cache: the cache of the text files' SHA-256.
        progress: called with each status line.
        max_line_chars: the longest text line read (see `write_shards`).
    """

    tokenizer: tokenization.WordPieceTokenizer
    config: Any
    num_workers: int = 1
    invalid_utf8: str = "error"
    digest_cache: Optional[str] = None
    progress: Callable[[str], None] = print
    max_line_chars: int = MAX_LINE_CHARS

    def build(self, files, directory, text_range, what: str, count: Optional[int]) -> dict:
        """Builds (or finds finished) the shards of a range of `files` in `directory`.

        Args:
            files: the text files.
            directory: the shard directory.
            text_range: (start, end), the fractions of the text to read.
            what: "training" or "held-out", in messages and errors.
            count: shards to write (None: one per 8 MiB of text).

        Returns:
            The build's metadata.json.

        Raises:
            PreparationError: the build failed (`what` names it).
        """
        config, say = self.config, self.progress
        say(f"Writing {what} TFRecord shards to {directory} ...")
        try:
            metadata = write_shards(
                files,
                directory,
                self.tokenizer.get_config(),
                max_seq_length=config.max_seq_length,
                num_shards=count,
                num_workers=self.num_workers,
                seed=config.seed,
                invalid_utf8=self.invalid_utf8,
                text_range=text_range,
                digest_cache=self.digest_cache,
                progress=say,
                max_line_chars=self.max_line_chars,
            )
        except ShardError as error:
            raise PreparationError(what, error) from error
        say(
            f"{what.capitalize()} shards: {metadata['num_examples']:,} examples of "
            f"{config.max_seq_length} tokens in {len(metadata['shards'])} file(s)."
        )
        return metadata


def corpus_key(
    files: Sequence[str],
    digest_cache: Optional[str] = None,
    progress: Optional[Callable[[str], None]] = None,
) -> str:
    """Names a corpus in cache and run folders: its first file's stem and a hash of its content.

    The hash covers each file's size and SHA-256 in order, so an edited
    corpus gets a new folder (a new vocabulary and shards) instead of
    silently reusing what was learned from the old text, while a copied or
    touched one keeps its folder.

    Args:
        files: the corpus files.
        digest_cache: the cache of the files' SHA-256 (`corpus_digests`).
        progress: status lines while a large corpus is read.
    """
    digests = corpus_digests(files, digest_cache, progress)
    listing = "\n".join(
        "\t".join(str(part) for part in source_identity(f, stat.size, stat.mtime_ns, digest))
        for f, digest, stat in zip(files, digests, map(fileio.stat, files))
    )
    return _named_key(files, listing)


def _path_key(files: Sequence[str]) -> str:
    """The key of releases before content hashes: paths, sizes and modification times."""
    listing = "\n".join(
        f"{os.path.abspath(f)}\t{os.path.getsize(f)}\t{os.path.getmtime(f)}" for f in files
    )
    return _named_key(files, listing)


def _named_key(files: Sequence[str], listing: str) -> str:
    digest = hashlib.sha256(listing.encode()).hexdigest()
    stem = os.path.splitext(os.path.basename(files[0]))[0] or "corpus"
    return f"{stem}-{digest[:8]}"


def corpus_path(
    parent: str,
    files: Sequence[str],
    name: str,
    digest_cache: Optional[str] = None,
    progress: Optional[Callable[[str], None]] = None,
) -> str:
    """`parent/name` with `{key}` in `name` replaced by the corpus's `corpus_key`.

    When that directory does not exist yet but one for the same text does,
    the runs and caches it holds are resumed and reused: the new name is made
    a symbolic link to it. That is a directory an earlier release named by
    the corpus's path key (paths, sizes and modification times), or one named
    after the same content under another file name (a renamed corpus).
    """
    key = corpus_key(files, digest_cache, progress)
    path = os.path.join(parent, name.format(key=key))
    if os.path.exists(path):
        return path
    if os.path.islink(path):  # a link to a folder since removed: the name is free again
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass  # another worker removed it
    earlier = os.path.join(parent, name.format(key=_path_key(files)))
    if not os.path.isdir(earlier):
        # The same content under another stem: `<other stem>-<hash>`.
        pattern = glob.escape(name).format(key="*-" + key.rsplit("-", 1)[1])
        renamed = sorted(
            p for p in glob.glob(os.path.join(glob.escape(parent), pattern)) if os.path.isdir(p)
        )
        if len({os.path.realpath(p) for p in renamed}) != 1:
            return path  # none, or several to choose from
        earlier = renamed[0]
    # The new name becomes a link to the folder found (to the folder itself,
    # not to another link, so that removing an old name breaks nothing), so
    # it is still found once the corpus is touched, copied or renamed.
    target = os.path.relpath(os.path.realpath(earlier), os.path.realpath(parent))
    try:
        os.symlink(target, path, target_is_directory=True)
    except OSError:
        return path if os.path.isdir(path) else earlier  # another worker linked it; or no links
    return path


def casing_name(config) -> str:
    """The casing part of cached vocabulary and shard names, e.g. `uncased` or `cased-strip`.

    `casefold` builds keep their earlier names.
    """
    return (
        f"{'uncased' if config.do_lower_case else 'cased'}"
        + (
            ""
            if config.resolved_strip_accents == config.do_lower_case
            else ("-strip" if config.resolved_strip_accents else "-accents")
        )
        + ("" if config.normalization == DEFAULT_NORMALIZATION else f"-{config.normalization}")
    )


def learned_vocab(
    corpus: Sequence[str],
    data_dir: str,
    config,
    options: vocab_learning.VocabOptions,
    progress: Callable[[str], None],
    max_line_chars: int = MAX_LINE_CHARS,
) -> str:
    """The vocabulary learned from the corpus with `options` (cached in `data_dir`, where
    its temporary words file is written while it is learned).

    Returns:
        The path of the vocabulary file.

    Raises:
        VocabLearningError: the options or the text do not allow a vocabulary.
    """
    settings = {
        "do_lower_case": config.do_lower_case,
        "strip_accents": config.resolved_strip_accents,
        "normalization": config.normalization,
    }
    size = options.vocab_size
    vocab_file = os.path.join(
        data_dir, f"vocab-{casing_name(config)}-{size}-{options.cache_key(settings)}.txt"
    )
    if os.path.exists(vocab_file):
        progress(f"Vocabulary: {vocab_file} (cached)")
        return vocab_file
    progress(f"Learning a {size}-token WordPiece vocabulary from the corpus...")
    tokens, stats = vocab_learning.learn_vocab(
        list(corpus),
        options,
        **settings,
        work_dir=data_dir,
        progress=progress,
        max_line_chars=max_line_chars,
    )
    vocab_learning.write_vocab(tokens, vocab_file)
    progress(
        f"Vocabulary: {vocab_file}, {len(tokenization.load_vocab(vocab_file)):,} tokens, "
        f"{stats['alphabet_size']:,} of {stats['distinct_characters']:,} characters, from "
        f"{stats['sample_bytes'] / 1e6:,.1f} MB of text ({stats['seconds']:.0f}s)"
    )
    return vocab_file


def prepare_pretraining_data(
    config,
    corpus: Sequence[str],
    data_dir: str,
    *,
    vocab_file: Optional[str] = None,
    vocab_options: Optional[vocab_learning.VocabOptions] = None,
    eval_corpus: Optional[Sequence[str]] = None,
    eval_fraction: float = 0.0,
    num_shards: Optional[int] = None,
    num_workers: int = 1,
    invalid_utf8: str = "error",
    check_config: Optional[Callable] = None,
    digest_cache: Optional[str] = None,
    progress: Optional[Callable[[str], None]] = None,
    max_line_chars: int = MAX_LINE_CHARS,
) -> PreparedData:
    """Finds or builds a run's vocabulary and its training and held-out shards.

    Sets `config.model.vocab_size` to the vocabulary's size and validates
    the config before any shard is built. The shards hold packed examples
    of `config.max_seq_length` tokens (int64 features `input_ids`,
    `input_mask`, `segment_ids`, each [max_seq_length]), drawn with
    `config.seed`.

    Args:
        config: a `PretrainingConfig`; its casing, normalization, length and
            seed decide the vocabulary and the shards.
        corpus: the text files (one sentence or paragraph per line, a blank
            line ends a document).
        data_dir: the cache directory (created if missing).
        vocab_file: the vocabulary to use; None: learn one from the corpus
            with `vocab_options` (default `VocabOptions()`), or reuse the one
            learned before.
        eval_corpus: held-out text files, built into the held-out shards.
        eval_fraction: leave this last fraction of the corpus out of the
            training shards, in [0, 1) (moved to a document boundary); it
            becomes the held-out shards unless `eval_corpus` is given. 0 and
            no `eval_corpus`: no held-out shards.
        num_shards: training shards; default one per 8 MiB of text.
        num_workers: processes building shards.
        invalid_utf8: "error" or "replace" (see `write_shards`).
        check_config: called with the config once its vocabulary size is
            set, before any shard is built; may raise to stop.
        digest_cache: the cache of the corpus files' SHA-256; default
            `corpus-digests.json` in `data_dir`.
        progress: called with each human-readable status line (also those
            of the shard builds, with their rate and ETA).
        max_line_chars: the longest corpus line read, in characters; a
            longer one stops the vocabulary or shard build naming its file
            and line.

    Returns:
        The vocabulary, tokenizer, shard directories, shard paths and counts.

    Raises:
        ValueError: `eval_fraction` outside [0, 1).
        VocabLearningError: the vocabulary cannot be learned.
        ConfigError: the config is invalid with the vocabulary's size.
        PreparationError: a shard build failed (bad input, invalid UTF-8,
            another build's shards in the directory, no training text).
    """
    say = progress or (lambda message: None)
    if not 0.0 <= eval_fraction < 1.0:
        raise ValueError(f"eval_fraction={eval_fraction}: must be in [0, 1)")
    os.makedirs(data_dir, exist_ok=True)
    digest_cache = digest_cache or os.path.join(data_dir, DIGEST_CACHE_FILE)
    if vocab_file is None:
        vocab_file = learned_vocab(
            corpus,
            data_dir,
            config,
            vocab_options or vocab_learning.VocabOptions(),
            say,
            max_line_chars,
        )
    tokenizer = tokenization.WordPieceTokenizer(
        vocab_file, config.do_lower_case, config.resolved_strip_accents, config.normalization
    )
    config.model.vocab_size = tokenizer.vocab_size
    config.validate()
    if check_config is not None:
        check_config(config)

    fingerprint = tokenization.vocab_fingerprint(vocab_file)[:8]
    # Seed, shard count and the held-out split change the examples, so they are part of the name.
    build_name = f"L{config.max_seq_length}-{casing_name(config)}-{fingerprint}-s{config.seed}" + (
        f"-n{num_shards}" if num_shards else ""
    )
    shard_dir = os.path.join(
        data_dir, f"shards-{build_name}" + (f"-holdout{eval_fraction:g}" if eval_fraction else "")
    )

    build = ShardBuilds(
        tokenizer, config, num_workers, invalid_utf8, digest_cache, say, max_line_chars
    ).build

    def paths(directory, metadata) -> list[str]:
        return [os.path.join(directory, shard["path"]) for shard in metadata["shards"]]

    metadata = build(corpus, shard_dir, (0.0, 1.0 - eval_fraction), "training", num_shards)
    data = PreparedData(
        vocab_file=vocab_file,
        tokenizer=tokenizer,
        shard_dir=shard_dir,
        shard_paths=paths(shard_dir, metadata),
        num_examples=metadata["num_examples"],
    )
    if eval_corpus:
        eval_dir = corpus_path(
            data_dir, eval_corpus, f"eval-{{key}}-{build_name}", digest_cache, say
        )
        eval_metadata = build(eval_corpus, eval_dir, (0.0, 1.0), "held-out", None)
    elif eval_fraction:
        eval_dir = os.path.join(data_dir, f"eval-shards-{build_name}-holdout{eval_fraction:g}")
        try:
            eval_metadata = build(corpus, eval_dir, (1.0 - eval_fraction, 1.0), "held-out", 1)
        except PreparationError as error:
            if not isinstance(error.cause, EmptyTextRange):
                raise
            data.nothing_held_out = True
            data.eval_fraction_needed = last_document_fraction(resolve_sources(corpus))
            return data
    else:
        return data
    data.eval_shard_dir = eval_dir
    data.eval_shard_paths = paths(eval_dir, eval_metadata)
    data.num_eval_examples = eval_metadata["num_examples"]
    return data
