"""Corpus text -> the words `WordPieceTokenizer` will look up, written to a file.

Each line is normalized by `tokenization.normalize_text` with the
tokenizer's settings and split the way its `BertTokenizer` splits words
(control and format characters to spaces, then whitespace and punctuation,
every CJK ideograph a word of its own): the same graph ops, so the learner
sees exactly the words WordPiece later cuts into pieces. Words over
`MAX_BYTES_PER_WORD` bytes are left out: WordPiece turns them into `[UNK]`
whatever the vocabulary holds.

The words go to a file, a line per input line that has any, separated by
spaces, for the trainer to read; the character counts the alphabet is chosen from
are gathered on the way. Batches are split on all cores by `tf.data`.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from electra_tf import text_compat
from electra_tf.bounded_lines import MAX_LINE_CHARS
from electra_tf.tokenization import MAX_BYTES_PER_WORD, UNK_TOKEN, normalize_text
from electra_tf.vocab_learning import corpus_text
from electra_tf.vocab_learning.options import VocabLearningError

# Seconds between progress lines.
REPORT_SECONDS = 10.0


@dataclasses.dataclass
class SplitText:
    """What `split_corpus` wrote and counted.

    Attributes:
        path: the words file (a line per input line with words, separated
            by spaces).
        text_bytes: bytes of corpus text read.
        words: words written.
        char_counts: character -> occurrences in the words written.
        inner_chars: the characters that occur inside a word (not first).
    """

    path: str
    text_bytes: int
    words: int
    char_counts: dict
    inner_chars: set


def word_splitter(settings: dict) -> Callable[[tf.Tensor], tuple]:
    """A graph function: lines string [B] -> (their words joined by spaces [B], the words'
    characters as code points int32 [C], those inside a word (not first) [I], words int32 []).

    Args:
        settings: `do_lower_case`, `strip_accents`, `normalization`, as
            `WordPieceTokenizer` is given them.
    """
    # The split patterns of a BertTokenizer built as WordPieceTokenizer builds
    # its own (the one-token table only satisfies the constructor).
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer([UNK_TOKEN], tf.constant([0], tf.int64)), -1
    )
    delimiters, kept_delimiters = text_compat.bert_split_patterns(
        tf_text.BertTokenizer(
            table,
            lower_case=False,
            keep_whitespace=False,
            normalization_form=None,
            preserve_unused_token=False,
        )
    )

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def split(lines):
        texts = normalize_text(lines, **settings)
        # BertTokenizer's own first step: control and format characters are spaces.
        texts = tf.strings.regex_replace(texts, r"\p{Cc}|\p{Cf}", " ")
        flat, splits = text_compat.regex_split_flat(texts, delimiters, kept_delimiters)
        # A word too long becomes an empty one (two spaces in a row: no word).
        short = tf.strings.length(flat) <= MAX_BYTES_PER_WORD
        joined = tf.strings.reduce_join(
            tf.RaggedTensor.from_row_splits(tf.where(short, flat, ""), splits),
            axis=-1,
            separator=" ",
        )
        codes = tf.strings.unicode_decode(tf.strings.reduce_join(joined, separator="\n"), "UTF-8")
        gap = (codes == ord(" ")) | (codes == ord("\n"))
        inner = tf.boolean_mask(codes[1:], ~gap[1:] & ~gap[:-1])
        return joined, tf.boolean_mask(codes, ~gap), inner, tf.reduce_sum(tf.cast(short, tf.int32))

    return split


def _add_counts(total: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """`total` (indexed by code point) plus the occurrences of `codes`, grown as needed."""
    if codes.size == 0:
        return total
    counts = np.bincount(codes)
    if counts.size > total.size:
        total = np.pad(total, (0, counts.size - total.size))
    total[: counts.size] += counts
    return total


def split_corpus(
    files: Sequence[str],
    max_bytes: Optional[int],
    settings: dict,
    output_path: str,
    progress: Optional[Callable[[str], None]] = None,
    max_line_chars: int = MAX_LINE_CHARS,
) -> SplitText:
    """Writes the words of the corpus (or of its `max_bytes` sample) to `output_path`.

    Args:
        files: UTF-8 text files.
        max_bytes: the text budget (see `corpus_text`); None: all of it.
        settings: the tokenizer's normalization settings.
        output_path: the words file to write.
        progress: called every `REPORT_SECONDS` with a line of MB read, rate and ETA.
        max_line_chars: the longest line read (see `corpus_text.line_batches`).

    Raises:
        VocabLearningError: a line longer than `max_line_chars`.
    """
    split = word_splitter(settings)
    todo = corpus_text.text_bytes(files, max_bytes)
    refused = []

    def batches():
        # tf.data would turn the error into a traceback of its own: keep it to raise below.
        try:
            yield from corpus_text.line_batches(files, max_bytes, max_line_chars)
        except VocabLearningError as error:
            refused.append(error)

    dataset = (
        tf.data.Dataset.from_generator(
            batches,
            output_signature=(
                tf.TensorSpec([None], tf.string),
                tf.TensorSpec([], tf.int64),
            ),
        )
        .map(lambda lines, read: (split(lines), read), num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(2)
    )
    chars = np.zeros(0, np.int64)
    inner = np.zeros(0, np.int64)
    done = words = 0
    started = last_report = time.monotonic()
    with open(output_path, "wb") as out:
        for (joined, codes, inner_codes, count), read in dataset:
            lines = [line for line in joined.numpy().tolist() if line.strip()]
            if lines:
                out.write(b"\n".join(lines) + b"\n")
            chars = _add_counts(chars, codes.numpy())
            inner = _add_counts(inner, inner_codes.numpy())
            words += int(count)
            done += int(read)
            now = time.monotonic()
            if progress is not None and now - last_report >= REPORT_SECONDS:
                rate = done / max(now - started, 1e-6)
                progress(
                    f"  vocabulary text: {done / 1e6:,.0f}/{todo / 1e6:,.0f} MB, "
                    f"{rate / 1e6:.1f} MB/s, ETA {max(todo - done, 0) / rate:.0f}s"
                )
                last_report = now
    if refused:
        raise refused[0]
    return SplitText(
        path=output_path,
        text_bytes=done,
        words=words,
        char_counts={chr(c): int(chars[c]) for c in np.flatnonzero(chars)},
        inner_chars={chr(c) for c in np.flatnonzero(inner)},
    )
