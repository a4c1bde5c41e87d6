"""A whole shard build: raw text -> packed pre-training examples in TFRecord shards.

A build runs in three steps: `plan_build` (arguments, output directory,
reusable shards, work split), `build_shard` for each shard still to build
(`electra_tf.data.shard_writer`), and `write_metadata`. `write_shards` runs
them with a local process pool; `electra_tf.data.beam_shards` runs the same
steps on Apache Beam, with byte-identical shards.

The text is split into one piece per shard (`electra_tf.data.text_input`);
shard i is built from piece i only, with its own random generators seeded
from (seed, i), so the output never depends on the number of workers. The
directory's files and their atomic writes are described in
`electra_tf.data.shard_layout`; how an earlier run's shards are reused or
rebuilt in `electra_tf.data.shard_verification`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import multiprocessing
import os
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence

import numpy as np

from electra_tf import fileio
from electra_tf.bounded_lines import MAX_LINE_CHARS
from electra_tf.config import DEFAULT_NORMALIZATION
from electra_tf.data.corpus_digest import DIGEST_CACHE_FILE, corpus_digests, source_identity
from electra_tf.data.shard_layout import (
    FORMAT_VERSION,
    METADATA_FILE,
    ShardError,
    remove_stale_tmp,
    shard_name,
    write_json_atomic,
)
from electra_tf.data.shard_verification import reusable_shards
from electra_tf.data.shard_writer import build_shard, graph_tokenize
from electra_tf.data.text_input import (
    INVALID_UTF8_POLICIES,
    EmptyTextRange,
    TextSource,
    default_num_shards,
    plan_pieces,
    resolve_sources,
    text_span,
)
from electra_tf.tokenization import WordPieceTokenizer, vocab_fingerprint

logger = logging.getLogger(__name__)


@dataclass
class ShardPlan:
    """A build's parameters, its work split and which shards are left to build.

    Plain data, so a distributed runner can send it to its workers.

    Attributes:
        input_patterns: the input files, directories or patterns as given.
        output_dir: absolute output directory (or URL).
        sources: the resolved input files, in stream order.
        total_bytes: bytes of text that `text_range` selects.
        num_shards: shards of the build.
        build: build parameters and their fingerprint, as recorded in
            `metadata.json`.
        vocab_size: tokens in the vocabulary.
        special_ids: ids of [PAD] [UNK] [CLS] [SEP] [MASK].
        reused: `{index: sidecar}` of finished shards kept from an earlier run.
        jobs: one `build_shard` job per shard still to build, in shard order.
        damaged: `{path: what is wrong}` of finished shards found damaged
            (they are among the jobs).
        source_digests: the SHA-256 of each local source file (None for a URL).
    """

    input_patterns: list[str]
    output_dir: str
    sources: list[TextSource]
    total_bytes: int
    num_shards: int
    build: dict
    vocab_size: int
    special_ids: dict
    reused: dict[int, dict]
    jobs: list[dict]
    damaged: dict[str, str] = dataclasses.field(default_factory=dict)
    source_digests: list[Optional[str]] = dataclasses.field(default_factory=list)

    @property
    def todo_bytes(self) -> int:
        """Bytes of text in the shards still to build."""
        return sum(e - s for job in self.jobs for _, s, e in job["segments"])

    def announce(self, say: Callable[[str], None], building: str) -> None:
        """Tells `say` of damaged shards and the work ahead; `building` says how it runs."""
        for path, problem in self.damaged.items():
            say(f"Shard {path} is damaged ({problem}): rebuilding it.")
        say(
            f"{len(self.sources)} input file(s), {self.total_bytes / 1e6:,.1f} MB -> "
            f"{self.num_shards} shard(s) in {self.output_dir}"
            + (f"; reusing {len(self.reused)} finished shard(s)" if self.reused else "")
            + (f"; building {len(self.jobs)} {building}" if self.jobs else "")
        )


def _as_int(flag: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ShardError(f"{flag} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _fingerprint(build: dict, sources: list) -> str:
    return hashlib.sha256(
        json.dumps(dict(build, sources=sources), sort_keys=True).encode()
    ).hexdigest()


def plan_build(
    input_patterns: Sequence[str],
    output_dir: str,
    tokenizer_config: dict,
    *,
    max_seq_length: int,
    num_shards: Optional[int] = None,
    seed: int = 12345,
    single_segment_prob: float = 0.1,
    short_seq_prob: float = 0.05,
    invalid_utf8: str = "error",
    text_range: tuple[float, float] = (0.0, 1.0),
    digest_cache: Optional[str] = None,
    progress: Optional[Callable[[str], None]] = None,
    max_line_chars: int = MAX_LINE_CHARS,
) -> tuple[ShardPlan, WordPieceTokenizer]:
    """Checks the arguments and the output directory, and splits the work into shards.

    Creates `output_dir`, removes temporary files of interrupted runs, and
    keeps the finished shards of an earlier run of the same build. The
    arguments are those of `write_shards`.

    Returns:
        The plan, and the tokenizer (loaded once, to build shards in this
        process).

    Raises:
        ShardError: as `write_shards`.
    """
    max_seq_length = _as_int("max_seq_length", max_seq_length, 5)
    if num_shards is not None:
        num_shards = _as_int("num_shards", num_shards, 1)
    seed = _as_int("seed", seed, 0)
    for flag, value in (
        ("single_segment_prob", single_segment_prob),
        ("short_seq_prob", short_seq_prob),
    ):
        if not 0.0 <= float(value) <= 1.0:
            raise ShardError(f"{flag} must be in [0, 1], got {value!r}")
    if invalid_utf8 not in INVALID_UTF8_POLICIES:
        raise ShardError(
            f"invalid_utf8 must be one of {INVALID_UTF8_POLICIES}, got {invalid_utf8!r}"
        )
    text_range = tuple(float(f) for f in text_range)
    if len(text_range) != 2 or not 0.0 <= text_range[0] < text_range[1] <= 1.0:
        raise ShardError(
            f"text_range must be two fractions 0 <= start < end <= 1, got {text_range!r}"
        )

    if isinstance(input_patterns, (str, os.PathLike)):
        input_patterns = [input_patterns]
    input_patterns = [os.fspath(p) for p in input_patterns]
    sources = resolve_sources(input_patterns)
    if sum(s.size for s in sources) == 0:
        raise ShardError(f"no text in the input {input_patterns!r}: all files are empty")
    span = text_span(sources, text_range)
    total_bytes = span[1] - span[0]
    if total_bytes == 0:
        raise EmptyTextRange(
            f"text_range={text_range!r} selects no text of {input_patterns!r} "
            "(the range is shorter than one document or line)"
        )

    tokenizer = WordPieceTokenizer(**tokenizer_config)
    tok_config = tokenizer.get_config()
    vocab_hash = vocab_fingerprint(tok_config["vocab_file"])
    if num_shards is None:
        num_shards = default_num_shards(total_bytes)

    build = {
        "format_version": FORMAT_VERSION,
        "max_seq_length": max_seq_length,
        "num_shards": num_shards,
        "seed": seed,
        "single_segment_prob": float(single_segment_prob),
        "short_seq_prob": float(short_seq_prob),
        "vocab_fingerprint": vocab_hash,
        "do_lower_case": tokenizer.do_lower_case,
        "strip_accents": tokenizer.strip_accents,
    }
    if tokenizer.normalization != DEFAULT_NORMALIZATION:  # earlier builds keep their fingerprint
        build["normalization"] = tokenizer.normalization
    if text_range != (0.0, 1.0):  # builds of a whole corpus keep their earlier fingerprint
        build["text_range"] = list(text_range)
    output_dir = fileio.abspath(os.fspath(output_dir))
    if fileio.exists(output_dir) and not fileio.isdir(output_dir):
        raise ShardError(f"output path {output_dir!r} exists and is not a directory")
    fileio.makedirs(output_dir)
    # The fingerprint names local text by content (size and SHA-256 of each
    # file), so a copied or touched corpus reuses its shards; files behind
    # URLs by path, size and mtime (see `corpus_digest`).
    digests = corpus_digests(
        [s.path for s in sources],
        digest_cache or os.path.join(output_dir, DIGEST_CACHE_FILE),
        progress,
    )
    content_fingerprint = _fingerprint(
        build,
        [source_identity(s.path, s.size, s.mtime_ns, d) for s, d in zip(sources, digests)],
    )
    # Builds before content fingerprints named the files by path, size and mtime.
    path_fingerprint = _fingerprint(build, [[s.path, s.size, s.mtime_ns] for s in sources])
    build["fingerprint"] = content_fingerprint
    # The invalid-UTF-8 policy is left out: it does not change any shard
    # built without replacements, so switching to "replace" after an error
    # keeps the finished shards.
    build["invalid_utf8"] = invalid_utf8
    build["tokenizer_config"] = tok_config

    remove_stale_tmp(output_dir)
    done, damaged = reusable_shards(
        output_dir, num_shards, build, invalid_utf8, earlier_fingerprints=(path_fingerprint,)
    )

    pieces = plan_pieces(sources, num_shards, span)
    jobs = []
    for index, segments in enumerate(pieces):
        if index in done:
            continue
        jobs.append(
            {
                "index": index,
                "name": shard_name(index, num_shards),
                "output_dir": output_dir,
                "segments": segments,
                "max_seq_length": max_seq_length,
                "seed": seed,
                "single_segment_prob": float(single_segment_prob),
                "short_seq_prob": float(short_seq_prob),
                "invalid_utf8": invalid_utf8,
                "max_line_chars": max_line_chars,
                "fingerprint": build["fingerprint"],
                "build": {k: v for k, v in build.items() if k != "tokenizer_config"},
            }
        )
    plan = ShardPlan(
        input_patterns=input_patterns,
        output_dir=output_dir,
        sources=sources,
        total_bytes=total_bytes,
        num_shards=num_shards,
        build=build,
        vocab_size=tokenizer.vocab_size,
        special_ids=tokenizer.special_ids,
        reused=done,
        jobs=jobs,
        damaged={
            os.path.join(output_dir, shard_name(i, num_shards)): problem
            for i, problem in sorted(damaged.items())
        },
        source_digests=digests,
    )
    return plan, tokenizer


def write_metadata(plan: ShardPlan, sidecars: Iterable[dict], seconds: float) -> dict:
    """Writes `metadata.json` once every shard of the plan is built.

    Args:
        plan: the build's plan.
        sidecars: what `build_shard` returned for each of `plan.jobs`.
        seconds: the build's duration, recorded in the metadata.

    Returns:
        The metadata dict.

    Raises:
        ShardError: the shards hold no example at all.
    """
    results = dict(plan.reused)
    results.update((sidecar["index"], sidecar) for sidecar in sidecars)
    num_shards = plan.num_shards
    shard_list = [
        {"path": shard_name(i, num_shards), "num_examples": results[i]["num_examples"]}
        for i in range(num_shards)
    ]
    num_examples = sum(s["num_examples"] for s in shard_list)
    replaced_lines = sum(results[i].get("replaced_lines", 0) for i in range(num_shards))
    if num_examples == 0:
        raise ShardError(
            f"no text in the input {plan.input_patterns!r}: the files hold only "
            "blank lines or whitespace"
        )
    build = plan.build
    metadata = {
        "format_version": FORMAT_VERSION,
        "max_seq_length": build["max_seq_length"],
        "vocab_fingerprint": build["vocab_fingerprint"],
        "vocab_size": plan.vocab_size,
        "vocab_file": build["tokenizer_config"]["vocab_file"],
        "do_lower_case": build["do_lower_case"],
        "strip_accents": build["strip_accents"],
        "normalization": build.get("normalization", DEFAULT_NORMALIZATION),
        "special_ids": plan.special_ids,
        "num_examples": num_examples,
        "num_shards": num_shards,
        "shards": shard_list,
        "sources": [
            {"path": s.path, "bytes": s.size, "mtime": s.mtime_ns / 1e9, "sha256": digest}
            for s, digest in zip(plan.sources, plan.source_digests)
        ],
        "text_bytes": plan.total_bytes,
        "build": build,
        "replaced_lines": replaced_lines,
        "reused_shards": len(plan.reused),
        "seconds": seconds,
    }
    write_json_atomic(os.path.join(plan.output_dir, METADATA_FILE), metadata)
    return metadata


def write_shards(
    input_patterns: Sequence[str],
    output_dir: str,
    tokenizer_config: dict,
    *,
    num_workers: int = 1,
    progress: Optional[Callable[[str], None]] = None,
    **build_args,
) -> dict:
    """Builds packed pre-training examples from raw text into TFRecord shards.

    Paths may be local or URLs that `tf.io.gfile` reads (`gs://...`). For
    corpora beyond one machine, `python -m electra_tf.commands.beam_shards`
    writes the same shards with Apache Beam.

    Args:
        input_patterns: text files, directories (all non-hidden files in
            them) or glob patterns. One sentence/paragraph per line; a blank
            line or the end of a file ends a document.
        output_dir: created if missing. Receives
            `pretrain_data.tfrecord-<i:05d>-of-<n:05d>` files, their
            `.json` sidecars and `metadata.json`.
        tokenizer_config: `WordPieceTokenizer(**tokenizer_config)` arguments
            (`vocab_file`, `do_lower_case`, `strip_accents`, `normalization`).
        num_workers: processes building shards in parallel ("spawn" context;
            each imports TensorFlow, about 3 s). The output does not depend
            on it. As always with "spawn", a calling script must guard its
            entry point with `if __name__ == "__main__":`.
        progress: called with short human-readable status lines.
        **build_args: what the shards hold (`plan_build`'s keyword arguments):
            max_seq_length: L, tokens per example (>= 5).
            num_shards: number of output shards; default one per 8 MiB of text,
                between 1 and 1000.
            seed: base seed; shard i uses a generator derived from (seed, i).
            single_segment_prob: probability of a single-segment example.
            short_seq_prob: probability of a random target length in [5, L].
            invalid_utf8: "error" (raise, naming file, line and byte offset) or
                "replace" (U+FFFD; the number of affected lines is reported).
            text_range: `(start, end)` fractions of the concatenated input bytes
                to build from, each end moved to a document boundary (see
                `text_span`); e.g. (0, 0.99) and (0.99, 1) split a corpus into
                training and held-out text that share no document.
            digest_cache: the JSON file caching the input files' SHA-256 (see
                `electra_tf.data.corpus_digest`); default `corpus-digests.json`
                in `output_dir`.
            max_line_chars: the longest input line, in characters; a longer
                one stops the build naming its file and line. Refusing, never
                cutting, it leaves every shard built the same, so it is not
                part of the build's fingerprint.

    Returns:
        The metadata dict also written to `output_dir/metadata.json`.

    Raises:
        ShardError: missing or empty inputs, invalid UTF-8 under "error", a
            line longer than `max_line_chars`,
            bad arguments, or `output_dir` holding another build's shards.
    """
    start_time = time.monotonic()
    report = progress or (lambda message: None)

    def say(message: str) -> None:
        logger.info(message)
        report(message)

    num_workers = _as_int("num_workers", num_workers, 1)
    plan, tokenizer = plan_build(
        input_patterns, output_dir, tokenizer_config, progress=say, **build_args
    )
    jobs, num_shards, todo_bytes = plan.jobs, plan.num_shards, plan.todo_bytes
    plan.announce(say, f"with {min(num_workers, len(jobs))} process(es)")

    sidecars = []
    build_start = time.monotonic()
    built_bytes = 0

    def record(sidecar: dict) -> None:
        nonlocal built_bytes
        sidecars.append(sidecar)
        built_bytes += sidecar["text_bytes"]
        elapsed = max(time.monotonic() - build_start, 1e-6)
        rate = built_bytes / elapsed
        eta = (todo_bytes - built_bytes) / rate if rate > 0 else 0.0
        message = (
            f"shard {len(plan.reused) + len(sidecars)}/{num_shards} done: "
            f"{sidecar['num_examples']:,} examples, {rate / 1e6:.1f} MB/s, ETA {eta:.0f}s"
        )
        if sidecar["replaced_lines"]:
            message += (
                f"; replaced invalid UTF-8 in {sidecar['replaced_lines']:,} line(s), "
                f"first at {sidecar['first_replaced']}"
            )
        say(message)

    if jobs:
        workers = min(num_workers, len(jobs))
        if workers == 1:
            tokenize = graph_tokenize(tokenizer)
            for job in jobs:
                record(build_shard(job, tokenizer, tokenize))
        else:
            # Never fork a process that has imported TensorFlow.
            context = multiprocessing.get_context("spawn")
            with context.Pool(
                workers, initializer=_init_worker, initargs=(plan.build["tokenizer_config"],)
            ) as pool:
                for sidecar in pool.imap_unordered(_worker_build_shard, jobs):
                    record(sidecar)

    metadata = write_metadata(plan, sidecars, seconds=round(time.monotonic() - start_time, 3))
    built = max(time.monotonic() - build_start, 1e-6)
    say(
        f"wrote {metadata['num_examples']:,} examples in {num_shards} shard(s) to "
        f"{plan.output_dir} in {metadata['seconds']:.1f}s"
        + (f" ({todo_bytes / 1e6 / built:.1f} MB/s)" if jobs else "")
        + (
            f"; replaced invalid UTF-8 in {metadata['replaced_lines']:,} line(s)"
            if metadata["replaced_lines"]
            else ""
        )
    )
    return metadata


# A pool worker's tokenizer and traced tokenize function, made once per process.
_WORKER_STATE: tuple = ()


def _init_worker(tokenizer_config: dict) -> None:
    global _WORKER_STATE
    tokenizer = WordPieceTokenizer(**tokenizer_config)
    _WORKER_STATE = (tokenizer, graph_tokenize(tokenizer))


def _worker_build_shard(job: dict) -> dict:
    return build_shard(job, *_WORKER_STATE)
