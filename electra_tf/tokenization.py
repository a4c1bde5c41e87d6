"""WordPiece tokenization in TensorFlow graph ops, plus vocabulary learning.

The tokenizer reads a BERT-style `vocab.txt` (one token per line, line number
= id) and turns raw text into WordPiece ids with TensorFlow Text ops, so the
same object works eagerly, inside `tf.data` and inside a `tf.function` or
SavedModel. Only ops that TensorFlow Text 2.12 already ships are used
(`CaseFoldUTF8`, `NormalizeUTF8`, `RegexSplitWithOffsets`,
`WordpieceTokenizeWithOffsets`, core string ops and a lookup table), which
keeps exported models loadable by TF Serving builds of that era.

Normalization differs from TensorFlow Text's `BertTokenizer(lower_case=True)`
on purpose. That path case-folds, applies NFD and deletes combining marks,
but never recomposes: Hangul syllables stay decomposed into conjoining jamo,
which a syllable vocabulary does not contain, so Korean becomes `[UNK]`.
Here the text is

1. decoded leniently (invalid UTF-8 bytes are dropped, as the original BERT
   code does),
2. case-folded with NFKC_Casefold when `do_lower_case` (this also maps
   compatibility characters such as full-width letters and ligatures),
3. if `strip_accents`: NFD, then every `\\p{Mn}` (non-spacing mark) deleted,
4. recomposed to NFC, which restores Hangul syllables (conjoining jamo are
   letters, not marks, so step 3 keeps them),
5. Unicode space separators mapped to ASCII space.

`BertTokenizer(lower_case=False, normalization_form=None)` then only splits
on whitespace and punctuation, puts every CJK ideograph in a token of its
own, and applies greedy longest-match WordPiece.

`strip_accents=None` follows the original ELECTRA/BERT behaviour: accents are
stripped exactly when lower-casing.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import time
from typing import Iterable, Optional, Sequence, Union

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from electra_tf import fileio

logger = logging.getLogger(__name__)

PAD_TOKEN = "[PAD]"
UNK_TOKEN = "[UNK]"
CLS_TOKEN = "[CLS]"
SEP_TOKEN = "[SEP]"
MASK_TOKEN = "[MASK]"
SPECIAL_TOKENS = (PAD_TOKEN, UNK_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN)

# The original BERT WordPiece gives up on words longer than 200 characters;
# TensorFlow Text counts bytes.
MAX_BYTES_PER_WORD = 200

# Default text budget for `build_vocab`. The TensorFlow Text learner is pure
# Python; on a 2-core machine 4 MB of English text takes about a minute for
# an 8000-token vocabulary.
DEFAULT_VOCAB_MAX_BYTES = 4_000_000

_SENTENCEPIECE_HINT = (
    "SentencePiece vocabularies (tab-separated scores, '<unk>'/'<s>' tokens, "
    "'\u2581' word markers) must first be converted to WordPiece format: one "
    "token per line, continuation pieces prefixed with '##', and the tokens "
    + " ".join(SPECIAL_TOKENS) + " present")


class VocabError(ValueError):
    """A vocabulary file is missing or malformed; the message names the file."""


def load_vocab(path: str) -> list[str]:
    """Reads and validates a BERT-style WordPiece vocabulary.

    Args:
        path: `vocab.txt` (local path or URL such as `gs://...`) with one
            token per line; the (0-based) line number is the token id.
            Surrounding whitespace is stripped from each line, as the
            original BERT code does; a single final newline is allowed.

    Returns:
        The tokens, index = id.

    Raises:
        VocabError: the file does not exist, is not UTF-8, is empty, has an
            empty line, a duplicate token or a tab-separated (SentencePiece)
            line, or lacks one of [PAD] [UNK] [CLS] [SEP] [MASK].
    """
    if not fileio.isfile(path):
        raise VocabError(f"vocab file {path!r} does not exist")
    with fileio.open_file(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line_no = data[:err.start].count(b"\n") + 1
        raise VocabError(
            f"vocab file {path!r} is not UTF-8 text: invalid byte "
            f"0x{data[err.start]:02x} at line {line_no} (byte offset {err.start})"
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]  # Byte-order mark written by some editors.
    if text.endswith("\n"):
        text = text[:-1]
    if not text.strip():
        raise VocabError(f"vocab file {path!r} is empty")

    tokens: list[str] = []
    first_line: dict[str, int] = {}
    for line_no, line in enumerate(text.split("\n"), start=1):
        if "\t" in line.strip():
            raise VocabError(
                f"vocab file {path!r} line {line_no} contains a tab ({line!r}); "
                f"this looks like a SentencePiece vocabulary. {_SENTENCEPIECE_HINT}")
        token = line.strip()
        if not token:
            raise VocabError(
                f"vocab file {path!r} line {line_no} is empty; every line must "
                "hold one token (ids are line numbers)")
        if token in first_line:
            raise VocabError(
                f"vocab file {path!r} has duplicate token {token!r} on lines "
                f"{first_line[token]} and {line_no}")
        first_line[token] = line_no
        tokens.append(token)

    missing = [t for t in SPECIAL_TOKENS if t not in first_line]
    if missing:
        raise VocabError(
            f"vocab file {path!r} lacks the special token(s) {' '.join(missing)}. "
            + _SENTENCEPIECE_HINT)
    return tokens


def vocab_fingerprint(path: str) -> str:
    """SHA-256 hex digest of the vocab file's bytes."""
    digest = hashlib.sha256()
    with fileio.open_file(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _resolve_strip_accents(do_lower_case: bool, strip_accents: Optional[bool]) -> bool:
    return bool(do_lower_case) if strip_accents is None else bool(strip_accents)


def normalize_text(texts: tf.Tensor, do_lower_case: bool, strip_accents: bool) -> tf.Tensor:
    """Normalizes UTF-8 strings with graph ops (see the module docstring).

    Args:
        texts: string tensor of any shape.
        do_lower_case: apply Unicode case folding (NFKC_Casefold).
        strip_accents: remove non-spacing combining marks after NFD.

    Returns:
        String tensor of the same shape, in NFC.
    """
    texts = tf.strings.unicode_transcode(
        texts, input_encoding="UTF-8", output_encoding="UTF-8", errors="ignore")
    # BERT's text cleaning: tabs and line breaks are spaces; other control and
    # format characters (zero-width space, BOM, ...) and U+FFFD are dropped, so
    # they never glue words together or turn a word into [UNK].
    texts = tf.strings.regex_replace(texts, r"[\t\n\r]", " ")
    texts = tf.strings.regex_replace(texts, r"[\p{Cc}\p{Cf}\x{FFFD}]", "")
    if do_lower_case:
        texts = tf_text.case_fold_utf8(texts)
    if strip_accents:
        texts = tf_text.normalize_utf8(texts, "NFD")
        texts = tf.strings.regex_replace(texts, r"\p{Mn}", "")
    # NFC recomposes what NFD split (Hangul syllables above all) and gives
    # inputs in other normal forms one canonical spelling.
    texts = tf_text.normalize_utf8(texts, "NFC")
    # The word splitter's "\s" is ASCII-only; BERT also splits on Unicode
    # spaces (no-break space, ideographic space, line separators).
    return tf.strings.regex_replace(texts, r"\p{Z}", " ")


class WordPieceTokenizer(tf.Module):
    """Raw text -> WordPiece ids, built from graph ops.

    The vocabulary lookup table is created once here and tracked by this
    `tf.Module`, so assigning the tokenizer to an attribute of a module that
    is exported carries the table into the SavedModel.

    Attributes:
        vocab: tokens, index = id.
        vocab_size: `len(vocab)`.
        pad_id, unk_id, cls_id, sep_id, mask_id: ids of the special tokens.
        do_lower_case: whether text is case-folded.
        strip_accents: whether combining marks are removed (resolved bool).
        vocab_file: absolute path (or URL) of the vocab file.
        lookup_table: `tf.lookup.StaticHashTable` token -> int64 id (-1 if
            absent).
    """

    def __init__(self, vocab_file: str, do_lower_case: bool = True,
                 strip_accents: Optional[bool] = None):
        """Loads and validates `vocab_file` (see `load_vocab`).

        Args:
            vocab_file: BERT-style vocab.txt.
            do_lower_case: case-fold text first (uncased model).
            strip_accents: remove accents; None means "same as do_lower_case".

        Raises:
            VocabError: the vocab file is invalid.
        """
        super().__init__(name="wordpiece_tokenizer")
        vocab = load_vocab(vocab_file)
        self.vocab_file = fileio.abspath(vocab_file)
        # Plain Python data must not be wrapped for checkpoint tracking.
        self.vocab = self._no_dependency(vocab)
        self._token_to_id = self._no_dependency({t: i for i, t in enumerate(vocab)})
        self.vocab_size = len(vocab)
        self.do_lower_case = bool(do_lower_case)
        self.strip_accents = _resolve_strip_accents(do_lower_case, strip_accents)
        self.pad_id = self._token_to_id[PAD_TOKEN]
        self.unk_id = self._token_to_id[UNK_TOKEN]
        self.cls_id = self._token_to_id[CLS_TOKEN]
        self.sep_id = self._token_to_id[SEP_TOKEN]
        self.mask_id = self._token_to_id[MASK_TOKEN]

        # Ids come from the validated Python list rather than from re-reading
        # the file, so table and `vocab` can never disagree (e.g. on stripped
        # whitespace). The WordPiece kernel tests membership with its own -1
        # default, so the table's default only matters for direct lookups.
        self.lookup_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                keys=tf.constant(vocab, dtype=tf.string),
                values=tf.range(len(vocab), dtype=tf.int64)),
            default_value=-1)
        max_chars = max(len(t[2:] if t.startswith("##") else t) for t in vocab)
        self._bert_tokenizer = self._no_dependency(tf_text.BertTokenizer(
            self.lookup_table,
            suffix_indicator="##",
            max_bytes_per_word=MAX_BYTES_PER_WORD,
            max_chars_per_token=max_chars,
            token_out_type=tf.int32,
            unknown_token=UNK_TOKEN,
            split_unknown_characters=False,
            lower_case=False,
            keep_whitespace=False,
            normalization_form=None,
            preserve_unused_token=False))

    @property
    def special_ids(self) -> dict:
        """`{"pad_id", "unk_id", "cls_id", "sep_id", "mask_id"}` -> id."""
        return {"pad_id": self.pad_id, "unk_id": self.unk_id, "cls_id": self.cls_id,
                "sep_id": self.sep_id, "mask_id": self.mask_id}

    def normalize(self, texts: tf.Tensor) -> tf.Tensor:
        """Applies this tokenizer's normalization (graph ops only).

        Args:
            texts: string tensor of any shape (or something convertible).

        Returns:
            String tensor of the same shape.
        """
        texts = tf.convert_to_tensor(texts, dtype=tf.string)
        return normalize_text(texts, self.do_lower_case, self.strip_accents)

    def tokenize(self, texts: Union[tf.Tensor, Sequence[str], str]) -> Union[tf.RaggedTensor, tf.Tensor]:
        """Tokenizes raw text into WordPiece ids.

        Args:
            texts: string tensor of shape [batch] (or a list of str). A scalar
                string is accepted too (e.g. per-element in `tf.data`).

        Returns:
            int32 `RaggedTensor` of shape [batch, (num_wordpieces)], the word
            dimension merged away; an empty string gives an empty row. For a
            scalar input, a dense int32 tensor of shape [num_wordpieces].
        """
        texts = tf.convert_to_tensor(texts, dtype=tf.string)
        if texts.shape.rank == 0:
            return self.tokenize(tf.expand_dims(texts, 0))[0]
        if texts.shape.rank is None:
            raise ValueError("tokenize() needs a string tensor of known rank")
        pieces = self._bert_tokenizer.tokenize(self.normalize(texts))  # [..., (words), (pieces)]
        return pieces.merge_dims(-2, -1)

    def tokenize_normalized_with_offsets(self, texts: tf.Tensor
                                         ) -> tuple[tf.RaggedTensor, tf.RaggedTensor,
                                                    tf.RaggedTensor]:
        """WordPiece ids of already normalized text, with byte offsets into it.

        Args:
            texts: string [B], the output of `normalize` (or pieces of text
                normalized separately and joined).

        Returns:
            (ids int32, begin int64, end int64), each ragged [B, (pieces)]:
            piece i covers bytes [begin, end) of its text. An unknown word's
            [UNK] covers the whole word.
        """
        ids, begin, end = self._bert_tokenizer.tokenize_with_offsets(texts)
        return ids.merge_dims(-2, -1), begin.merge_dims(-2, -1), end.merge_dims(-2, -1)

    def tokenize_to_lists(self, texts: Iterable[str]) -> list[list[int]]:
        """Tokenizes Python strings eagerly; returns one list of ids per text."""
        texts = list(texts)
        if not texts:
            return []
        return self.tokenize(tf.constant(texts, dtype=tf.string)).to_list()

    def convert_ids_to_tokens(self, ids) -> list[str]:
        """Maps ids (int, sequence, NumPy array or tensor) to token strings.

        Raises:
            ValueError: an id is outside [0, vocab_size).
        """
        if isinstance(ids, (tf.Tensor, tf.RaggedTensor)):
            ids = ids.flat_values if isinstance(ids, tf.RaggedTensor) else ids
            ids = ids.numpy()
        flat = np.asarray(ids).reshape(-1)
        out = []
        for i in flat.tolist():
            if not 0 <= int(i) < self.vocab_size:
                raise ValueError(
                    f"token id {i} is outside the vocabulary [0, {self.vocab_size}) "
                    f"of {self.vocab_file!r}")
            out.append(self.vocab[int(i)])
        return out

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        """Maps token strings to ids; unknown tokens map to `unk_id`."""
        return [self._token_to_id.get(t, self.unk_id) for t in tokens]

    def get_config(self) -> dict:
        """Arguments that rebuild this tokenizer: `WordPieceTokenizer(**cfg)`."""
        return {"vocab_file": self.vocab_file, "do_lower_case": self.do_lower_case,
                "strip_accents": self.strip_accents}


# ---------------------------------------------------------------------------
# Vocabulary learning.

_SAMPLE_CHUNK_BYTES = 1 << 16


def _read_text_sample(text_files: Sequence[str], max_bytes: int) -> list[str]:
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
            data = data[data.index(b"\n") + 1:]  # Drop the partial first line.
        if offset + length < sizes[i] and b"\n" in data:
            data = data[:data.rindex(b"\n") + 1]  # And the partial last one.
        # Same leniency as the tokenizer: invalid bytes are dropped.
        text = data.decode("utf-8", errors="ignore")
        lines.extend(line for line in text.splitlines() if line.strip())
    return lines


def _cap_vocab(vocab: list[str], vocab_size: int, reserved: Sequence[str]) -> list[str]:
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
        raise ValueError(
            f"vocab_size={vocab_size} is too small for the {len(keep)} reserved "
            "and single-character tokens the text needs")
    for token in vocab:
        if room == 0:
            break
        if token not in keep:
            keep.add(token)
            room -= 1
    return [t for t in vocab if t in keep]


def build_vocab(text_files: Union[str, Sequence[str]], output_path: str, vocab_size: int,
                do_lower_case: bool, strip_accents: Optional[bool] = None,
                max_bytes: int = DEFAULT_VOCAB_MAX_BYTES) -> str:
    """Learns a WordPiece vocabulary from text files and writes `vocab.txt`.

    Uses TensorFlow Text's `bert_vocab_from_dataset` on text that has already
    been through this module's `normalize_text` with the same flags, and with
    the learner's own basic tokenizer set to `lower_case=False`, so that
    learning and `WordPieceTokenizer` split text identically.

    The learner is pure Python (about 1 minute for 4 MB of English on 2
    cores), so at most ~`max_bytes` of text is used: whole lines from evenly
    spaced 64 KiB chunks across all files (everything if the files are
    smaller). The output is deterministic for the same inputs.

    Args:
        text_files: UTF-8 text files (one or more).
        output_path: where to write the vocab; written to a temporary file
            and renamed, so readers never see a partial file.
        vocab_size: maximum number of tokens, including the special tokens.
            The learner may return fewer (logged).
        do_lower_case: case-fold text before learning.
        strip_accents: remove accents; None means "same as do_lower_case".
        max_bytes: text budget for learning.

    Returns:
        `output_path`.

    Raises:
        ValueError: a file is missing, the text is empty, or `vocab_size` /
            `max_bytes` is too small.
    """
    # Imported here: the learner pulls in extra modules that tokenizing
    # processes do not need.
    from tensorflow_text.python.ops.bert_tokenizer import BasicTokenizer
    from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset as bvfd

    if isinstance(text_files, (str, os.PathLike)):
        text_files = [text_files]
    text_files = [os.fspath(f) for f in text_files]
    if not text_files:
        raise ValueError("build_vocab needs at least one text file")
    for f in text_files:
        if not os.path.isfile(f):
            raise ValueError(f"text file {f!r} does not exist")
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(
            f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens, got {vocab_size}")
    if max_bytes <= 0:
        raise ValueError(f"max_bytes must be positive, got {max_bytes}")
    strip = _resolve_strip_accents(do_lower_case, strip_accents)

    start = time.monotonic()
    lines = _read_text_sample(text_files, max_bytes)
    if not lines:
        raise ValueError(f"no text to learn a vocabulary from in {text_files}")
    sample_bytes = sum(len(line.encode("utf-8")) + 1 for line in lines)

    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(lines, dtype=tf.string))
    dataset = dataset.batch(1024).map(
        lambda t: normalize_text(t, bool(do_lower_case), strip))
    bert_params = {"lower_case": False, "normalization_form": None}

    # The learner binary-searches a frequency threshold between its lower and
    # upper bound, running a full learning pass per probe. Its default upper
    # bound is the count of the most frequent word, although a vocabulary of
    # `vocab_size` tokens each used >= t times needs about t * vocab_size
    # token uses; 10 * words / vocab_size is a generous bound that halves the
    # number of probes (the result is identical on English text; an
    # overshoot would be trimmed by `_cap_vocab`).
    splitter = BasicTokenizer(**bert_params)
    num_words = sum(int(words.flat_values.shape[0]) for words in dataset.map(splitter.tokenize))
    if num_words == 0:
        raise ValueError(f"no words to learn a vocabulary from in {text_files}")
    lower_thresh = 3  # Small samples would otherwise stop far below vocab_size.
    upper_thresh = max(lower_thresh + 1, 10 * num_words // vocab_size)
    vocab = bvfd.bert_vocab_from_dataset(
        dataset,
        vocab_size=vocab_size,
        reserved_tokens=list(SPECIAL_TOKENS),
        bert_tokenizer_params=bert_params,
        learn_params={
            "lower_thresh": lower_thresh,
            "upper_thresh": upper_thresh,
            # Rare characters (each also needs "##char") should not crowd
            # out real subwords: at most a quarter of the vocab, but never
            # fewer than 100 characters, so small vocabs still spell words.
            "max_unique_chars": min(1000, max(100, (vocab_size - len(SPECIAL_TOKENS)) // 4)),
        })
    # A token must survive the one-token-per-line file format unchanged.
    vocab = [t for t in vocab if t == t.strip() and len(t.split()) == 1
             and len(t.splitlines()) == 1]
    vocab = _cap_vocab(vocab, vocab_size, SPECIAL_TOKENS)
    if vocab[:len(SPECIAL_TOKENS)] != list(SPECIAL_TOKENS) or len(set(vocab)) != len(vocab):
        raise AssertionError("learned vocabulary does not start with the special tokens")
    if len(vocab) < vocab_size:
        # The learner stops within 5% below the target, or earlier when too
        # few subwords occur often enough in a small sample.
        logger.info("Learned %d tokens of the requested %d.", len(vocab), vocab_size)

    output_path = os.fspath(output_path)
    parent = os.path.dirname(os.path.abspath(output_path))
    os.makedirs(parent, exist_ok=True)
    tmp_path = f"{output_path}.tmp-{os.getpid()}"
    try:
        with open(tmp_path, "w", encoding="utf-8", newline="\n") as f:
            f.write("\n".join(vocab) + "\n")
        os.replace(tmp_path, output_path)
    finally:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
    logger.info("Wrote %d-token vocabulary to %s from %d bytes of text in %.1f s.",
                len(vocab), output_path, sample_bytes, time.monotonic() - start)
    return output_path
