"""Learning a WordPiece vocabulary from raw text, Korean and Chinese included.

The whole corpus is read by default (`VocabOptions.max_bytes` sets a budget
of whole lines spread over the files), a batch of lines at a time, normalized
exactly as `WordPieceTokenizer` will normalize it and split into the words its
splitter makes (whitespace, punctuation, every CJK ideograph on its own):
`word_split`. The words go to a temporary file (about the size of the text
read, in `work_dir`) and the `tokenizers` library's WordPiece trainer picks
the pieces from it in Rust: `trainer` (timings beside the trainer's own on
raw text: docs/performance.md).

Three choices matter for Korean and Chinese:

* **The alphabet** (`alphabet`): WordPiece turns a word with a character
  outside it wholly into `[UNK]`, and the learner leaves such words out. By
  default it holds the most frequent characters that fit in half of the
  vocabulary; `alphabet_size` sets a number of characters instead (KoELECTRA
  used 6,000).
* **What a character costs**: `c` (word start), and `##c` only for the
  characters that occur inside a word. CJK ideographs and punctuation never
  do (the splitter cuts them off as words of their own), so a Chinese
  alphabet costs half.
* **Pre-segmentation** (optional, Korean, `presegment`): with
  `presegment="kiwi"` pieces follow Kiwi's morpheme boundaries.

The vocabulary file lists the special tokens, then `[unused0]`,
`[unused1]`, ... slots (`num_unused`, for tokens a user adds later without
changing the other ids), then the alphabet's characters (most frequent
first), their `##c` tokens, and the learned pieces (most frequent merge
first).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from typing import Callable, Optional, Sequence, Union

from electra_tf.bounded_lines import MAX_LINE_CHARS
from electra_tf.config import DEFAULT_NORMALIZATION
from electra_tf.tokenization import SPECIAL_TOKENS
from electra_tf.vocab_learning.alphabet import choose_alphabet
from electra_tf.vocab_learning.options import (
    PRESEGMENTERS,
    VocabLearningError,
    VocabOptions,
    unused_tokens,
)
from electra_tf.vocab_learning.trainer import CONTINUATION, learn_pieces

__all__ = [
    "PRESEGMENTERS",
    "VocabLearningError",
    "VocabOptions",
    "build_vocab",
    "learn_vocab",
    "unused_tokens",
    "write_vocab",
]

logger = logging.getLogger(__name__)


def _storable(token: str) -> bool:
    """Whether a token survives the one-token-per-line file format unchanged."""
    return token == token.strip() and len(token.split()) == 1 and len(token.splitlines()) == 1


def learn_vocab(
    text_files: Union[str, Sequence[str]],
    options: VocabOptions,
    do_lower_case: bool,
    strip_accents: Optional[bool] = None,
    normalization: str = DEFAULT_NORMALIZATION,
    *,
    work_dir: Optional[str] = None,
    progress: Optional[Callable[[str], None]] = None,
    max_line_chars: int = MAX_LINE_CHARS,
) -> tuple[list[str], dict]:
    """Learns a WordPiece vocabulary from text files (see the module docstring).

    Args:
        text_files: UTF-8 text files (one or more).
        options: size, alphabet, text budget, unused slots, pre-segmentation.
        do_lower_case, strip_accents, normalization: how the tokenizer will
            normalize text (`WordPieceTokenizer`'s arguments).
        work_dir: where the temporary words file goes (about the size of
            the text read); None: the system's temporary directory.
        progress: called with status lines (MB read, rate and ETA while the
            text is read).
        max_line_chars: the longest line read, in characters (--max_row_chars).

    Returns:
        (tokens, stats): the vocabulary (specials first, then unused slots)
        and {"sample_bytes", "words", "distinct_characters", "alphabet_size",
        "seconds"}.

    Raises:
        VocabLearningError: a file is missing, a line is longer than
            `max_line_chars`, there is no text, or an option is impossible.
    """
    from electra_tf.vocab_learning.word_split import split_corpus

    say = progress or (lambda message: None)
    options.validate()
    if isinstance(text_files, (str, os.PathLike)):
        text_files = [text_files]
    text_files = [os.fspath(f) for f in text_files]
    if not text_files:
        raise VocabLearningError("learning a vocabulary needs at least one text file")
    for f in text_files:
        if not os.path.isfile(f):
            raise VocabLearningError(f"text file {f!r} does not exist")
    settings = {
        "do_lower_case": bool(do_lower_case),
        "strip_accents": bool(do_lower_case) if strip_accents is None else bool(strip_accents),
        "normalization": normalization,
    }
    unused = unused_tokens(options.num_unused)
    reserved = len(SPECIAL_TOKENS) + len(unused)

    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="vocab-", dir=work_dir) as tmp:
        text = split_corpus(
            text_files,
            options.max_bytes,
            settings,
            os.path.join(tmp, "words.txt"),
            say,
            max_line_chars,
        )
        if not text.words:
            raise VocabLearningError(f"no text to learn a vocabulary from in {text_files}")
        alphabet = choose_alphabet(
            text.char_counts, text.inner_chars, options.vocab_size, reserved, options.alphabet_size
        )
        continuations = [CONTINUATION + c for c in alphabet if c in text.inner_chars]
        room = options.vocab_size - reserved - len(alphabet) - len(continuations)
        if room < 0:
            raise VocabLearningError(
                f"--vocab_size={options.vocab_size} is too small for the {reserved} special and "
                f"unused tokens and the {len(alphabet) + len(continuations)} character tokens of "
                f"a {len(alphabet)}-character alphabet (lower --vocab_alphabet_size)."
            )
        excluded = set(text.char_counts) - set(alphabet)
        say(
            f"  {text.text_bytes / 1e6:,.1f} MB of text: {text.words:,} words, "
            f"{len(text.char_counts):,} characters, alphabet of {len(alphabet):,}; "
            f"learning {room:,} pieces..."
        )
        base = list(SPECIAL_TOKENS) + unused + alphabet + continuations
        if options.presegment == "kiwi":
            from electra_tf.vocab_learning.presegment import presegmented_pieces

            pieces = presegmented_pieces(text.path, tmp, alphabet, excluded, room, set(base), say)
        else:
            pieces = learn_pieces([text.path], room, alphabet, text.inner_chars, excluded).pieces
    vocab = base + [t for t in pieces if _storable(t)][:room]
    if len(set(vocab)) != len(vocab):
        raise AssertionError("the learned vocabulary repeats a token")
    if len(vocab) < options.vocab_size:
        logger.info("Learned %d tokens of the requested %d.", len(vocab), options.vocab_size)
    stats = {
        "sample_bytes": text.text_bytes,
        "words": text.words,
        "distinct_characters": len(text.char_counts),
        "alphabet_size": len(alphabet),
        "seconds": time.monotonic() - start,
    }
    return vocab, stats


def write_vocab(tokens: Sequence[str], output_path: str) -> str:
    """Writes one token per line via a temporary file, so readers never see a partial file."""
    output_path = os.fspath(output_path)
    os.makedirs(os.path.dirname(os.path.abspath(output_path)), exist_ok=True)
    tmp_path = f"{output_path}.tmp-{os.getpid()}"
    try:
        with open(tmp_path, "w", encoding="utf-8", newline="\n") as f:
            f.write("\n".join(tokens) + "\n")
        os.replace(tmp_path, output_path)
    finally:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
    return output_path


def build_vocab(
    text_files: Union[str, Sequence[str]],
    output_path: str,
    options: Union[VocabOptions, int],
    do_lower_case: bool,
    strip_accents: Optional[bool] = None,
    normalization: str = DEFAULT_NORMALIZATION,
    progress: Optional[Callable[[str], None]] = None,
) -> str:
    """`learn_vocab` (its temporary file beside `output_path`), then writes the tokens; returns
    `output_path`.

    `options` may be a bare vocabulary size (every other option default).
    """
    if isinstance(options, int):
        options = VocabOptions(vocab_size=options)
    work_dir = os.path.dirname(os.path.abspath(os.fspath(output_path)))
    os.makedirs(work_dir, exist_ok=True)
    tokens, stats = learn_vocab(
        text_files,
        options,
        do_lower_case,
        strip_accents,
        normalization,
        work_dir=work_dir,
        progress=progress,
    )
    write_vocab(tokens, output_path)
    logger.info(
        "Wrote %d-token vocabulary to %s from %d bytes of text in %.1f s.",
        len(tokens),
        output_path,
        stats["sample_bytes"],
        stats["seconds"],
    )
    return output_path
