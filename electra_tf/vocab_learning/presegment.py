"""Korean morpheme pre-segmentation while learning (`--vocab_presegment=kiwi`).

Each distinct word is cut at the starts of the morphemes Kiwi finds in it
(`pip install kiwipiepy`), so that pieces follow morphemes (`학교` + `##에서`
rather than `학교에` + `##서`). Word-initial and inner morphemes are learned
apart, each with its share of the vocabulary, and inner ones become `##`
pieces. Tokenization needs no analyser: WordPiece finds the pieces.
`presegmented_pieces` runs the two trainings and merges their pieces.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import time
from typing import Callable, Collection, Optional

from electra_tf.vocab_learning.options import VocabLearningError
from electra_tf.vocab_learning.trainer import CONTINUATION, learn_pieces

# Repetitions of one morpheme per line of the files the trainer reads.
_REPEATS_PER_LINE = 4096
_REPORT_SECONDS = 10.0
_KIWI_BATCH = 10_000


@dataclasses.dataclass
class Morphemes:
    """Word-initial and inner morphemes, written for the trainer.

    Attributes:
        initial_path, inner_path: words files of the morphemes (each
            repeated as often as it occurs).
        initial_count, inner_count: their occurrences.
        initial_inner_chars, inner_inner_chars: the characters that occur
            inside a morpheme (not first) of each kind.
        distinct_words: the distinct words cut.
    """

    initial_path: str
    inner_path: str
    initial_count: int
    inner_count: int
    initial_inner_chars: set
    inner_inner_chars: set
    distinct_words: int


def _kiwi():
    try:
        from kiwipiepy import Kiwi
    except ImportError:
        raise VocabLearningError(
            "--vocab_presegment=kiwi needs the Kiwi analyser: pip install "
            "kiwipiepy (or drop the flag)."
        ) from None
    return Kiwi()


def _write_counts(path: str, counts: collections.Counter) -> set:
    """Writes each morpheme as often as it occurs; returns the characters found inside one."""
    inner = set()
    with open(path, "w", encoding="utf-8") as f:
        for piece, count in sorted(counts.items()):
            inner.update(piece[1:])
            for start in range(0, count, _REPEATS_PER_LINE):
                f.write(" ".join([piece] * min(_REPEATS_PER_LINE, count - start)) + "\n")
    return inner


def presegment(
    words_path: str,
    excluded: Collection[str],
    initial_path: str,
    inner_path: str,
    progress: Optional[Callable[[str], None]] = None,
) -> Morphemes:
    """Cuts the words of `words_path` into morphemes and writes the two morpheme files.

    Args:
        words_path: a words file of `word_split`.
        excluded: characters outside the alphabet: words holding one are
            left out (WordPiece makes them `[UNK]`).
        initial_path, inner_path: where to write the morphemes.
        progress: called with a line of words cut, rate and ETA every 10 s.
    """
    kiwi = _kiwi()
    excluded = set(excluded)
    word_counts = collections.Counter()
    with open(words_path, encoding="utf-8") as f:
        for line in f:
            word_counts.update(line.split())
    words = [w for w in word_counts if not excluded.intersection(w)]
    initial, inner = collections.Counter(), collections.Counter()
    started = last_report = time.monotonic()
    for start in range(0, len(words), _KIWI_BATCH):
        batch = words[start : start + _KIWI_BATCH]
        for word, tokens in zip(batch, kiwi.tokenize(batch)):
            # Surface offsets, not forms: contractions (했 = 하 + 었) keep their text.
            cuts = sorted({t.start for t in tokens if 0 < t.start < len(word)})
            pieces = [word[a:b] for a, b in zip([0] + cuts, cuts + [len(word)])]
            initial[pieces[0]] += word_counts[word]
            for piece in pieces[1:]:
                inner[piece] += word_counts[word]
        now = time.monotonic()
        if progress is not None and now - last_report >= _REPORT_SECONDS:
            done = start + len(batch)
            rate = done / (now - started)
            progress(
                f"  Kiwi morphemes: {done:,}/{len(words):,} distinct words, {rate:,.0f}/s, "
                f"ETA {(len(words) - done) / rate:.0f}s"
            )
            last_report = now
    return Morphemes(
        initial_path=initial_path,
        inner_path=inner_path,
        initial_count=sum(initial.values()),
        inner_count=sum(inner.values()),
        initial_inner_chars=_write_counts(initial_path, initial),
        inner_inner_chars=_write_counts(inner_path, inner),
        distinct_words=len(words),
    )


def _interleave(first: list, second: list, quota_first: int, room: int, taken: set) -> list:
    """Up to `room` new tokens: `quota_first` from `first`, the rest from `second`, each
    topped up from the other when it runs short; alternated, so each list's most
    frequent tokens come early."""
    picks = ([], [])
    for index, (tokens, quota) in enumerate(((first, quota_first), (second, room - quota_first))):
        for token in tokens:
            if len(picks[index]) == quota:
                break
            if token not in taken:
                taken.add(token)
                picks[index].append(token)
    for index, tokens in enumerate((first, second)):
        for token in tokens:
            if len(picks[0]) + len(picks[1]) >= room:
                break
            if token not in taken:
                taken.add(token)
                picks[index].append(token)
    merged = []
    for k in range(max(map(len, picks))):
        merged.extend(p[k] for p in picks if k < len(p))
    return merged


def presegmented_pieces(
    words_path: str,
    work_dir: str,
    alphabet: list,
    excluded: set,
    room: int,
    taken: set,
    progress: Callable[[str], None],
) -> list:
    """`room` pieces: word-initial and inner morphemes learned apart, each with its share
    (of their occurrences); inner pieces become `##` pieces.

    Args:
        words_path: a words file of `word_split`.
        work_dir: where the morpheme files are written.
        alphabet: the characters, most frequent first.
        excluded: the text's other characters (their words are left out).
        room: pieces to learn.
        taken: tokens already in the vocabulary (updated with the pieces).
        progress: called with status lines.
    """
    morphemes = presegment(
        words_path,
        excluded,
        os.path.join(work_dir, "initial.txt"),
        os.path.join(work_dir, "inner.txt"),
        progress,
    )
    progress(
        f"  {morphemes.distinct_words:,} distinct words cut into morphemes; learning the pieces..."
    )
    total = max(1, morphemes.initial_count + morphemes.inner_count)
    quota = round(room * morphemes.initial_count / total)
    # Both lists may repeat tokens the other has (`##` pieces): a quarter more of each.
    first = learn_pieces(
        [morphemes.initial_path],
        quota + quota // 4 + 10,
        alphabet,
        morphemes.initial_inner_chars,
    ).pieces
    second = learn_pieces(
        [morphemes.inner_path],
        room - quota + (room - quota) // 4 + 10,
        alphabet,
        morphemes.inner_inner_chars,
    ).pieces
    second = [t if t.startswith(CONTINUATION) else CONTINUATION + t for t in second]
    return _interleave(first, second, quota, room, taken)
