"""Learning a WordPiece vocabulary from raw text, Korean and Chinese included.

Text is read within a byte budget (`VocabOptions.max_bytes`, whole lines
from evenly spaced chunks of all files), normalized exactly as
`WordPieceTokenizer` will normalize it, and split into words the way its
splitter does (whitespace, punctuation, every CJK ideograph on its own).
TensorFlow Text's WordPiece learner then picks the pieces.

Three choices matter for Korean and Chinese:

* **The alphabet.** The learner drops every word holding a character outside
  its alphabet, and WordPiece later turns such a word wholly into `[UNK]`.
  Korean and Chinese text uses thousands of distinct characters (7,719 in the
  Korean Wikipedia sample), so by default the alphabet holds the most frequent
  characters that fit in half of the vocabulary; `alphabet_size` sets a
  number of characters instead (KoELECTRA used 6,000).
* **What a character costs.** A character normally needs two tokens, `c`
  (word start) and `##c` (inside a word). Characters the splitter always
  cuts off as words of their own (CJK ideographs, punctuation) never occur
  inside a word, so their `##c` is left out: a Chinese alphabet costs half.
* **Pre-segmentation** (optional, Korean): with `presegment="kiwi"` each word
  is cut at its morpheme boundaries (Kiwi, `pip install kiwipiepy`) while
  learning, so pieces follow morphemes (`학교` + `##에서` rather than
  `학교에` + `##서`). Word-initial and inner morphemes are learned
  separately, each with its share of the budget, and inner ones become
  `##` pieces. Tokenization needs no analyser: WordPiece finds the pieces.

`[unused0]`, `[unused1]`, ... slots (`num_unused`) follow the special tokens,
for tokens a user adds later without changing the other ids.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import logging
import math
import os
import time
import unicodedata
from typing import Optional, Sequence, Union

import numpy as np

from electra_tf.config import BERT_VOCAB_SIZE, DEFAULT_NORMALIZATION, flag_field
from electra_tf.tokenization import SPECIAL_TOKENS

logger = logging.getLogger(__name__)

# Default text budget. The TensorFlow Text learner is pure Python; its time
# grows with the number of distinct words: on a 2-core machine 4 MB of English
# takes about a minute for an 8,000-token vocabulary; 4 MB of Korean (470,000
# words) three to eight minutes for 16,000 tokens, depending on the load.
DEFAULT_MAX_BYTES = 10_000_000
PRESEGMENTERS = ("none", "kiwi")
# The automatic alphabet never has fewer characters (small vocabularies still
# spell every word of an alphabetic script).
_MIN_AUTO_ALPHABET = 100
# Longest word the learner considers (its default): longer ones are skipped.
_MAX_TOKEN_LENGTH = 50
_SAMPLE_CHUNK_BYTES = 1 << 16
# The CJK blocks the splitter cuts into one-character words (as BERT).
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


class VocabLearningError(ValueError):
    """The vocabulary cannot be learned as asked; the message names the flag or file."""


@dataclasses.dataclass
class VocabOptions:
    """How a vocabulary is learned (flags of the `vocab` command and of `pretrain.py`).

    Each field's metadata holds its flag's help (and `flag`, the flag's name
    when it is not the field's, or False for `vocab_size`, which is not one
    of the shared --vocab_* flags).

    Attributes:
        vocab_size: tokens in the vocabulary, special and unused ones included.
        alphabet_size: characters kept (each a token, most also as `##c`);
            None: the most frequent characters that fit in half of the
            vocabulary (at least 100). Words with another character become
            `[UNK]`.
        max_bytes: text read for learning (spread over the files).
        num_unused: `[unused<i>]` slots after the special tokens.
        presegment: `none`, or `kiwi` (Korean morphemes while learning).
    """

    vocab_size: int = flag_field(
        BERT_VOCAB_SIZE,
        "Tokens in the vocabulary, special and unused ones included (the learner may stop up "
        "to 5% short).",
        flag=False,  # the vocab command defines --vocab_size; pretrain.py has the model's
    )
    alphabet_size: Optional[int] = flag_field(
        None,
        "Characters the vocabulary spells words with (each a token, and most also as ##c); "
        "words with any other character become [UNK]. Default: the most frequent characters "
        "that fit in half of the vocabulary.",
        flag="vocab_alphabet_size",
    )
    max_bytes: int = flag_field(
        DEFAULT_MAX_BYTES,
        "Text read to learn the vocabulary (whole lines spread over the corpus).",
        flag="vocab_max_bytes",
    )
    num_unused: int = flag_field(
        0,
        "[unused0], [unused1], ... slots after the special tokens, for tokens added later.",
        flag="vocab_unused",
    )
    presegment: str = flag_field(
        "none",
        "none, or kiwi: learn pieces along Korean morpheme boundaries (pip install kiwipiepy); "
        "tokenization itself needs no analyser.",
        flag="vocab_presegment",
        choices=PRESEGMENTERS,
    )

    def validate(self) -> None:
        """Raises VocabLearningError naming the flag of an impossible value."""
        reserved = len(SPECIAL_TOKENS) + self.num_unused
        if self.num_unused < 0:
            raise VocabLearningError(f"--vocab_unused={self.num_unused}: must be >= 0.")
        if self.vocab_size <= reserved:
            raise VocabLearningError(
                f"--vocab_size={self.vocab_size}: must exceed the {len(SPECIAL_TOKENS)} special "
                f"tokens and {self.num_unused} unused slots."
            )
        if self.alphabet_size is not None and self.alphabet_size < 1:
            raise VocabLearningError(
                f"--vocab_alphabet_size={self.alphabet_size}: must be "
                ">= 1 (or unset for the automatic size)."
            )
        if self.max_bytes <= 0:
            raise VocabLearningError(f"--vocab_max_bytes={self.max_bytes}: must be positive.")
        if self.presegment not in PRESEGMENTERS:
            raise VocabLearningError(
                f"--vocab_presegment={self.presegment!r}: choose one of {', '.join(PRESEGMENTERS)}."
            )

    def cache_key(self, text_settings: dict) -> str:
        """A short name for these options and text settings (cached vocabulary files)."""
        data = json.dumps({**dataclasses.asdict(self), **text_settings}, sort_keys=True)
        return hashlib.sha256(data.encode()).hexdigest()[:8]


def unused_tokens(count: int) -> list[str]:
    """`[unused0]` ... `[unused<count-1>]`, as in BERT's vocabularies."""
    return [f"[unused{i}]" for i in range(count)]


def is_standalone_character(char: str) -> bool:
    """Whether the word splitter always makes `char` a word of its own.

    True for CJK ideographs and punctuation (Unicode P* and ASCII symbols):
    they never occur inside a word, so `##char` is never looked up.
    """
    code = ord(char)
    if any(low <= code <= high for low, high in _CJK_RANGES):
        return True
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def choose_alphabet(
    word_counts: dict,
    vocab_size: int,
    reserved: int,
    alphabet_size: Optional[int],
    min_size: int = _MIN_AUTO_ALPHABET,
) -> list[str]:
    """The characters the vocabulary spells words with, most frequent first.

    Args:
        word_counts: word -> occurrences in the sample.
        vocab_size: the vocabulary's size.
        reserved: special and unused tokens.
        alphabet_size: a number of characters, or None: the most frequent
            characters whose tokens (one for a standalone character, two
            otherwise) fit in half of the `vocab_size - reserved` slots, and
            at least the `min_size` most frequent.
    """
    counts = collections.Counter()
    for word, count in word_counts.items():
        if len(word) <= _MAX_TOKEN_LENGTH:
            for char in word:
                counts[char] += count
    # By count, then by character: the learner's own order.
    ranked = sorted(sorted(counts), key=lambda c: counts[c], reverse=True)
    if alphabet_size is not None:
        return ranked[:alphabet_size]
    budget, used, alphabet = (vocab_size - reserved) // 2, 0, []
    for char in ranked:
        used += 1 if is_standalone_character(char) else 2
        if used > budget and len(alphabet) >= min_size:
            break
        alphabet.append(char)
    return alphabet


def read_text_sample(text_files: Sequence[str], max_bytes: int) -> list[str]:
    """Reads at most ~`max_bytes` of whole lines spread evenly over the files.

    If the files are larger than the budget, they are treated as one stream
    and read in `ceil(max_bytes / 64 KiB)` chunks at evenly spaced offsets,
    each trimmed to whole lines, so the sample covers the beginning, middle
    and end of every large corpus instead of just its first megabytes.
    """
    sizes = [os.path.getsize(f) for f in text_files]
    total = sum(sizes)
    pieces: list[tuple[int, int, int]] = []  # (file index, offset, length)
    if total <= max_bytes:
        pieces = [(i, 0, size) for i, size in enumerate(sizes) if size]
    else:
        n_chunks = max(1, math.ceil(max_bytes / _SAMPLE_CHUNK_BYTES))
        chunk = max_bytes // n_chunks
        stride = total / n_chunks
        starts = np.cumsum([0] + sizes)
        for k in range(n_chunks):
            pos = int(k * stride)
            i = int(np.searchsorted(starts, pos, side="right") - 1)
            offset = pos - int(starts[i])
            pieces.append((i, offset, min(chunk, sizes[i] - offset)))

    lines: list[str] = []
    for i, offset, length in pieces:
        with open(text_files[i], "rb") as f:
            if offset > 0:
                f.seek(offset - 1)
                at_line_start = f.read(1) == b"\n"
            else:
                at_line_start = True
            data = f.read(length)
        if not at_line_start and b"\n" in data:
            data = data[data.index(b"\n") + 1 :]  # Drop the partial first line.
        if offset + length < sizes[i] and b"\n" in data:
            data = data[: data.rindex(b"\n") + 1]  # And the partial last one.
        # Same leniency as the tokenizer: invalid bytes are dropped.
        text = data.decode("utf-8", errors="ignore")
        lines.extend(line for line in text.splitlines() if line.strip())
    return lines


def cap_vocab(vocab: list[str], vocab_size: int, reserved: Sequence[str]) -> list[str]:
    """Trims a learned vocab to `vocab_size`, keeping the alphabet complete.

    The learner can overshoot when its frequency search runs out of room.
    Reserved tokens and every single character (plain and `##`) are kept so
    that any word of the sample can still be spelled; the remaining slots go
    to the learner's most frequent tokens, in its order.
    """
    if len(vocab) <= vocab_size:
        return vocab
    reserved_set = set(reserved)

    def is_char(token: str) -> bool:
        return len(token) == 1 or (token.startswith("##") and len(token) == 3)

    keep = set(t for t in vocab if t in reserved_set or is_char(t))
    room = vocab_size - len(keep)
    if room < 0:
        raise VocabLearningError(
            f"--vocab_size={vocab_size} is too small for the {len(keep)} reserved "
            "and single-character tokens the text needs (lower --vocab_alphabet_size)"
        )
    for token in vocab:
        if room == 0:
            break
        if token not in keep:
            keep.add(token)
            room -= 1
    return [t for t in vocab if t in keep]


def _split_words(lines: list[str], text_settings: dict) -> collections.Counter:
    """Word counts of the lines, normalized and split as `WordPieceTokenizer` does."""
    import tensorflow as tf

    # The learner's splitter: whitespace, punctuation, CJK ideographs, no
    # normalization of its own (ours runs first, as in tokenization).
    from tensorflow_text.python.ops.bert_tokenizer import BasicTokenizer

    from electra_tf.tokenization import normalize_text

    splitter = BasicTokenizer(lower_case=False, normalization_form=None)
    counts = collections.Counter()
    for start in range(0, len(lines), 1024):
        batch = tf.constant(lines[start : start + 1024], dtype=tf.string)
        words = splitter.tokenize(normalize_text(batch, **text_settings)).flat_values
        counts.update(words.numpy().tolist())
    return collections.Counter({w.decode("utf-8"): c for w, c in counts.items()})


def _kiwi_pieces(
    word_counts: collections.Counter,
) -> tuple[collections.Counter, collections.Counter]:
    """(word-initial, inner) morpheme counts: every word cut at Kiwi's morpheme starts."""
    try:
        from kiwipiepy import Kiwi
    except ImportError:
        raise VocabLearningError(
            "--vocab_presegment=kiwi needs the Kiwi analyser: pip install "
            "kiwipiepy (or drop the flag)."
        ) from None
    kiwi = Kiwi()
    initial, inner = collections.Counter(), collections.Counter()
    words = list(word_counts)
    for word, tokens in zip(words, kiwi.tokenize(words)):
        # Surface offsets, not forms: contractions (했 = 하 + 었) keep their text.
        cuts = sorted({t.start for t in tokens if 0 < t.start < len(word)})
        pieces = [word[a:b] for a, b in zip([0] + cuts, cuts + [len(word)])]
        initial[pieces[0]] += word_counts[word]
        for piece in pieces[1:]:
            inner[piece] += word_counts[word]
    return initial, inner


def _learn(word_counts: dict, size: int, alphabet_size: int) -> list[str]:
    """The TF Text learner on word counts: reserved tokens first, then characters and pieces."""
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    if not word_counts or size <= 0:
        return list(SPECIAL_TOKENS)
    num_words = sum(word_counts.values())
    lower_thresh = 3  # Small samples would otherwise stop far below the size.
    # The learner binary-searches a frequency threshold, a learning pass per
    # probe. Its default upper bound is the most frequent word's count, but a
    # vocabulary of `size` tokens used >= t times each needs about t * size
    # uses: 10 * words / size halves the probes (an overshoot is trimmed).
    upper_thresh = max(lower_thresh + 1, 10 * num_words // size)
    return learner.learn(
        word_counts,
        size,
        list(SPECIAL_TOKENS),
        upper_thresh=upper_thresh,
        lower_thresh=lower_thresh,
        max_unique_chars=alphabet_size,
        max_token_length=_MAX_TOKEN_LENGTH,
    )


def _learn_presegmented(initial: dict, inner: dict, size: int, alphabet_size: int) -> list[str]:
    """Word-initial and inner morphemes learned apart; inner pieces become `##` pieces."""
    share = sum(initial.values()) / max(1, sum(initial.values()) + sum(inner.values()))
    first = _learn(initial, round(size * share), alphabet_size)
    second = _learn(inner, size - round(size * share), alphabet_size)
    first = [t for t in first if t not in SPECIAL_TOKENS]
    joined = [t if t.startswith("##") else "##" + t for t in second if t not in SPECIAL_TOKENS]
    # Alternate the two lists so that a cap keeps the most frequent of both.
    merged, seen = list(SPECIAL_TOKENS), set(SPECIAL_TOKENS)
    for k in range(max(len(first), len(joined))):
        for tokens in (first, joined):
            if k < len(tokens) and tokens[k] not in seen:
                seen.add(tokens[k])
                merged.append(tokens[k])
    return merged


def learn_vocab(
    text_files: Union[str, Sequence[str]],
    options: VocabOptions,
    do_lower_case: bool,
    strip_accents: Optional[bool] = None,
    normalization: str = DEFAULT_NORMALIZATION,
) -> tuple[list[str], dict]:
    """Learns a WordPiece vocabulary from text files (see the module docstring).

    Args:
        text_files: UTF-8 text files (one or more).
        options: size, alphabet, text budget, unused slots, pre-segmentation.
        do_lower_case, strip_accents, normalization: how the tokenizer will
            normalize text (`WordPieceTokenizer`'s arguments).

    Returns:
        (tokens, stats): the vocabulary (specials first, then unused slots)
        and {"sample_bytes", "words", "distinct_characters", "alphabet_size",
        "seconds"}.

    Raises:
        VocabLearningError: a file is missing, there is no text, or an option
            is impossible.
    """
    options.validate()
    if isinstance(text_files, (str, os.PathLike)):
        text_files = [text_files]
    text_files = [os.fspath(f) for f in text_files]
    if not text_files:
        raise VocabLearningError("learning a vocabulary needs at least one text file")
    for f in text_files:
        if not os.path.isfile(f):
            raise VocabLearningError(f"text file {f!r} does not exist")
    strip = bool(do_lower_case) if strip_accents is None else bool(strip_accents)
    settings = {
        "do_lower_case": bool(do_lower_case),
        "strip_accents": strip,
        "normalization": normalization,
    }

    start = time.monotonic()
    lines = read_text_sample(text_files, options.max_bytes)
    if not lines:
        raise VocabLearningError(f"no text to learn a vocabulary from in {text_files}")
    word_counts = _split_words(lines, settings)
    if not word_counts:
        raise VocabLearningError(f"no words to learn a vocabulary from in {text_files}")
    unused = unused_tokens(options.num_unused)
    reserved = len(SPECIAL_TOKENS) + len(unused)
    alphabet = choose_alphabet(word_counts, options.vocab_size, reserved, options.alphabet_size)
    # `##c` of a standalone character is never used: the learner adds it, we
    # drop it, so the learner may fill those slots with pieces.
    useless = {"##" + c for c in alphabet if is_standalone_character(c)}
    size = options.vocab_size - len(unused) + len(useless)
    if options.presegment == "kiwi":
        initial, inner = _kiwi_pieces(word_counts)
        vocab = _learn_presegmented(initial, inner, size, len(alphabet))
    else:
        vocab = _learn(word_counts, size, len(alphabet))
    # A token must survive the one-token-per-line file format unchanged.
    vocab = [
        t
        for t in vocab
        if t not in useless and t == t.strip() and len(t.split()) == 1 and len(t.splitlines()) == 1
    ]
    specials = len(SPECIAL_TOKENS)
    vocab = vocab[:specials] + unused + vocab[specials:]
    vocab = cap_vocab(vocab, options.vocab_size, list(SPECIAL_TOKENS) + unused)
    if vocab[:specials] != list(SPECIAL_TOKENS) or len(set(vocab)) != len(vocab):
        raise AssertionError("learned vocabulary does not start with the special tokens")
    if len(vocab) < options.vocab_size:
        # The learner stops within 5% below the target, or earlier when too
        # few subwords occur often enough in a small sample.
        logger.info("Learned %d tokens of the requested %d.", len(vocab), options.vocab_size)
    distinct = len({c for w in word_counts for c in w})
    stats = {
        "sample_bytes": sum(len(line.encode("utf-8")) + 1 for line in lines),
        "words": sum(word_counts.values()),
        "distinct_characters": distinct,
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
) -> str:
    """`learn_vocab`, then writes the tokens to `output_path`; returns it.

    `options` may be a bare vocabulary size (every other option default).
    """
    if isinstance(options, int):
        options = VocabOptions(vocab_size=options)
    tokens, stats = learn_vocab(text_files, options, do_lower_case, strip_accents, normalization)
    write_vocab(tokens, output_path)
    logger.info(
        "Wrote %d-token vocabulary to %s from %d bytes of text in %.1f s.",
        len(tokens),
        output_path,
        stats["sample_bytes"],
        stats["seconds"],
    )
    return output_path
