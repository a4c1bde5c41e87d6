"""WordPiece tokenization in TensorFlow graph ops (learning a vocabulary: `vocab_learning`).

The tokenizer reads a BERT-style `vocab.txt` (one token per line, line number
= id) and turns raw text into WordPiece ids with TensorFlow Text ops, so the
same object works eagerly, inside `tf.data` and inside a `tf.function` or
SavedModel. Only ops that TensorFlow Text 2.12 already ships are used
(`CaseFoldUTF8`, `NormalizeUTF8`, `RegexSplitWithOffsets`,
`WordpieceTokenizeWithOffsets`, `FastWordpieceTokenizeWithOffsets` in
`tokenize_flat`, core string ops and a lookup table), which keeps exported
models loadable by TF Serving builds of that era.

Two normalizations (`NORMALIZATIONS`) turn raw text into what WordPiece sees.
Both decode leniently (invalid UTF-8 bytes are dropped, as the original BERT
code does), turn tabs and line breaks into spaces, drop control and format
characters, and map Unicode space separators to ASCII space.

* `bert`: the original BERT/ELECTRA `BasicTokenizer` (and the `tokenizers`
  library's `BertWordPieceTokenizer`), so that imported checkpoints see the
  ids they were trained with. Every `\\p{C}` character (control, format,
  private use) is dropped; `do_lower_case` applies Unicode lower-casing
  (`str.lower`, no compatibility folding: full-width letters and
  punctuation, ligatures such as `ﬁ` and `…` stay as they are);
  `strip_accents` applies NFD and deletes every `\\p{Mn}` mark. One
  deliberate difference: after NFD, Hangul conjoining jamo are recomposed
  into syllables, because the original leaves them decomposed and a
  syllable vocabulary then maps every uncased Korean word to `[UNK]`.
  Nothing else is recomposed, and cased text is not normalized at all.
  Where the original and `tokenizers` disagree this follows the original:
  a word-final capital sigma lower-cases to `ς` (Python's `str.lower`).
  Left as they are: unassigned code points (RE2 has no `\\p{Cn}`), which
  the original drops, and the word-length limit, counted in UTF-8 bytes
  (200) where the original counts characters. Graph ops: core `StringLower`,
  `UnicodeDecode` and `UnicodeEncode`, and TF Text's `NormalizeUTF8`.
* `casefold` (the behaviour of runs, shards and exports that record no
  normalization): `do_lower_case` case-folds with NFKC_Casefold (which also
  maps compatibility characters: `，` to `,`, `ﬁ` to `fi`, full-width
  letters to ASCII); `strip_accents` applies NFD and deletes `\\p{Mn}`
  marks; the text is then recomposed to NFC, which restores Hangul.

TensorFlow Text's `BertTokenizer(lower_case=True)` would case-fold, apply NFD
and delete combining marks without recomposing: Hangul syllables stay
decomposed into jamo and Korean becomes `[UNK]`. So normalization happens
here, and `BertTokenizer(lower_case=False, normalization_form=None)` then
only splits on whitespace and punctuation, puts every CJK ideograph in a
token of its own, and applies greedy longest-match WordPiece.

`strip_accents=None` follows the original ELECTRA/BERT behaviour: accents are
stripped exactly when lower-casing.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Iterable, Optional, Sequence, Union

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from electra_tf import fileio, text_compat
from electra_tf.config import DEFAULT_NORMALIZATION, NORMALIZATIONS

PAD_TOKEN = "[PAD]"
UNK_TOKEN = "[UNK]"
CLS_TOKEN = "[CLS]"
SEP_TOKEN = "[SEP]"
MASK_TOKEN = "[MASK]"
SPECIAL_TOKENS = (PAD_TOKEN, UNK_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN)

# The code points BERT's tokenizer treats as CJK ideographs (`_is_chinese_char`):
# each is a word of its own, whatever surrounds it.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def is_cjk_ideograph(char: str) -> bool:
    """Whether a character is one of BERT's CJK ideographs (a word of its own)."""
    code = ord(char)
    return any(low <= code <= high for low, high in CJK_RANGES)


# The original BERT WordPiece gives up on words longer than 200 characters;
# TensorFlow Text counts bytes.
MAX_BYTES_PER_WORD = 200

_SENTENCEPIECE_HINT = (
    "SentencePiece vocabularies (tab-separated scores, '<unk>'/'<s>' tokens, "
    "'\u2581' word markers) must first be converted to WordPiece format: one "
    "token per line, continuation pieces prefixed with '##', and the tokens "
    + " ".join(SPECIAL_TOKENS)
    + " present"
)


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
        line_no = data[: err.start].count(b"\n") + 1
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
                f"this looks like a SentencePiece vocabulary. {_SENTENCEPIECE_HINT}"
            )
        token = line.strip()
        if not token:
            raise VocabError(
                f"vocab file {path!r} line {line_no} is empty; every line must "
                "hold one token (ids are line numbers)"
            )
        if token in first_line:
            raise VocabError(
                f"vocab file {path!r} has duplicate token {token!r} on lines "
                f"{first_line[token]} and {line_no}"
            )
        first_line[token] = line_no
        tokens.append(token)

    missing = [t for t in SPECIAL_TOKENS if t not in first_line]
    if missing:
        raise VocabError(
            f"vocab file {path!r} lacks the special token(s) {' '.join(missing)}. "
            + _SENTENCEPIECE_HINT
        )
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


def check_normalization(normalization: str) -> str:
    """Returns `normalization` if it is one of `NORMALIZATIONS`.

    Raises:
        ValueError: it is not, naming the choices.
    """
    if normalization not in NORMALIZATIONS:
        raise ValueError(
            f"--normalization={normalization!r}: choose one of {', '.join(NORMALIZATIONS)}."
        )
    return normalization


# Hangul conjoining jamo (Unicode section 3.12): 19 leading consonants, 21
# vowels, 27 trailing consonants; syllable = S_BASE + (L * 21 + V) * 28 + T.
_L_BASE, _V_BASE, _T_BASE, _S_BASE = 0x1100, 0x1161, 0x11A7, 0xAC00
_L_COUNT, _V_COUNT, _T_COUNT = 19, 21, 28


def compose_hangul(texts: tf.Tensor) -> tf.Tensor:
    """Recomposes Hangul conjoining jamo into syllables, and nothing else.

    This is the Hangul part of Unicode canonical composition: a leading
    consonant followed by a vowel (and optionally a trailing consonant)
    becomes one precomposed syllable. Unlike NFC it leaves every other
    decomposed character (accents, Indic vowel signs) as it is.

    Args:
        texts: valid UTF-8 string tensor of any shape.

    Returns:
        String tensor of the same shape.
    """
    shape = tf.shape(texts)
    flat = tf.reshape(texts, [-1])
    chars = tf.strings.unicode_decode(flat, "UTF-8")  # [N, (characters)]
    codes = chars.flat_values
    rows = chars.value_rowids()
    count = tf.size(codes)
    # The next and next-but-one character of the same text (-1 past its end).
    padded_codes = tf.concat([codes, [-1, -1]], 0)
    padded_rows = tf.concat([rows, tf.constant([-1, -2], rows.dtype)], 0)
    following = [
        tf.where(padded_rows[k : count + k] == rows, padded_codes[k : count + k], -1)
        for k in (1, 2)
    ]
    lead = codes - _L_BASE
    vowel = following[0] - _V_BASE
    trail = following[1] - _T_BASE
    lv = (lead >= 0) & (lead < _L_COUNT) & (vowel >= 0) & (vowel < _V_COUNT)
    lvt = lv & (trail > 0) & (trail < _T_COUNT)
    syllables = _S_BASE + (lead * _V_COUNT + vowel) * _T_COUNT + tf.where(lvt, trail, 0)
    merged = tf.where(lv, syllables, codes)
    # The vowel (and trailing consonant) now inside a syllable are dropped.
    padded_lv = tf.concat([[False], lv], 0)[:count]
    padded_lvt = tf.concat([[False, False], lvt], 0)[:count]
    keep = ~(padded_lv | padded_lvt)
    composed = tf.RaggedTensor.from_value_rowids(
        tf.boolean_mask(merged, keep),
        tf.boolean_mask(rows, keep),
        nrows=tf.shape(flat, out_type=rows.dtype)[0],
    )
    return tf.reshape(tf.strings.unicode_encode(composed, "UTF-8"), shape)


def normalize_text(
    texts: tf.Tensor,
    do_lower_case: bool,
    strip_accents: bool,
    normalization: str = DEFAULT_NORMALIZATION,
) -> tf.Tensor:
    """Normalizes UTF-8 strings with graph ops (see the module docstring).

    Args:
        texts: string tensor of any shape.
        do_lower_case: lower-case (`bert`) or case-fold (`casefold`) the text.
        strip_accents: remove non-spacing combining marks after NFD.
        normalization: one of `NORMALIZATIONS`.

    Returns:
        String tensor of the same shape.
    """
    check_normalization(normalization)
    texts = tf.strings.unicode_transcode(
        texts, input_encoding="UTF-8", output_encoding="UTF-8", errors="ignore"
    )
    # BERT's text cleaning: tabs and line breaks are spaces; other control and
    # format characters (zero-width space, BOM, ...) and U+FFFD are dropped, so
    # they never glue words together or turn a word into [UNK].
    texts = tf.strings.regex_replace(texts, r"[\t\n\r]", " ")
    if normalization == "bert":
        # The original drops every character of a category C* (private use too).
        texts = tf.strings.regex_replace(texts, r"[\p{C}\x{FFFD}]", "")
        # The word splitter's "\s" is ASCII-only; BERT also splits on Unicode spaces.
        texts = tf.strings.regex_replace(texts, r"\p{Z}", " ")
        if do_lower_case:
            texts = tf.strings.lower(texts, encoding="utf-8")
        if strip_accents:
            texts = tf_text.normalize_utf8(texts, "NFD")
            texts = compose_hangul(tf.strings.regex_replace(texts, r"\p{Mn}", ""))
        return texts
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
        do_lower_case: whether text is lower-cased (case-folded).
        strip_accents: whether combining marks are removed (resolved bool).
        normalization: one of `NORMALIZATIONS` (see the module docstring).
        vocab_file: absolute path (or URL) of the vocab file.
        lookup_table: `tf.lookup.StaticHashTable` token -> int64 id (-1 if
            absent).
    """

    def __init__(
        self,
        vocab_file: str,
        do_lower_case: bool = True,
        strip_accents: Optional[bool] = None,
        normalization: str = DEFAULT_NORMALIZATION,
    ):
        """Loads and validates `vocab_file` (see `load_vocab`).

        Args:
            vocab_file: BERT-style vocab.txt.
            do_lower_case: lower-case text first (uncased model).
            strip_accents: remove accents; None means "same as do_lower_case".
            normalization: `bert` (the original BasicTokenizer's) or
                `casefold` (see the module docstring).

        Raises:
            VocabError: the vocab file is invalid.
            ValueError: an unknown normalization.
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
        self.normalization = check_normalization(normalization)
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
                values=tf.range(len(vocab), dtype=tf.int64),
            ),
            default_value=-1,
        )
        max_chars = max(len(t[2:] if t.startswith("##") else t) for t in vocab)
        self._bert_tokenizer = self._no_dependency(
            tf_text.BertTokenizer(
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
                preserve_unused_token=False,
            )
        )
        # The same WordPiece as a trie (`tokenize_flat`), built on first use.
        self._fast_model = None

    @property
    def special_ids(self) -> dict:
        """`{"pad_id", "unk_id", "cls_id", "sep_id", "mask_id"}` -> id."""
        return {
            "pad_id": self.pad_id,
            "unk_id": self.unk_id,
            "cls_id": self.cls_id,
            "sep_id": self.sep_id,
            "mask_id": self.mask_id,
        }

    def normalize(self, texts: tf.Tensor) -> tf.Tensor:
        """Applies this tokenizer's normalization (graph ops only).

        Args:
            texts: string tensor of any shape (or something convertible).

        Returns:
            String tensor of the same shape.
        """
        texts = tf.convert_to_tensor(texts, dtype=tf.string)
        return normalize_text(texts, self.do_lower_case, self.strip_accents, self.normalization)

    def tokenize(
        self, texts: Union[tf.Tensor, Sequence[str], str]
    ) -> Union[tf.RaggedTensor, tf.Tensor]:
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

    def tokenize_flat(self, texts: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """The ids of `tokenize` as flat values and row splits, in fewer graph ops.

        Meant for latency-bound graphs (a serving signature at batch 1), where
        every op costs dispatch time whatever the size of its tensors. The
        words are split as `tokenize` splits them (same patterns, same kernel,
        no ragged wrappers) and cut into pieces by TF Text's
        `FastWordpieceTokenizer` on pre-split words: the same greedy
        longest-match-first WordPiece, with a word over `MAX_BYTES_PER_WORD`
        bytes or with an unknown part giving one [UNK], but read from a trie
        held in the graph, so no lookup-table op and no cast follow.

        Args:
            texts: string tensor of shape [B].

        Returns:
            (ids int32 [N], row_splits int64 [B + 1]): the pieces of text i
            are `ids[row_splits[i]:row_splits[i + 1]]`.
        """
        texts = tf.convert_to_tensor(texts, dtype=tf.string)
        if texts.shape.rank != 1:
            raise ValueError("tokenize_flat() needs a string tensor of shape [B]")
        # BertTokenizer's own steps: control characters to spaces, then the split.
        normalized = tf.strings.regex_replace(self.normalize(texts), r"\p{Cc}|\p{Cf}", " ")
        words, word_splits = text_compat.regex_split_flat(
            normalized, *text_compat.bert_split_patterns(self._bert_tokenizer)
        )
        if self._fast_model is None:
            self._fast_model = self._no_dependency(
                np.frombuffer(
                    text_compat.fast_wordpiece_model(
                        self.vocab, MAX_BYTES_PER_WORD, "##", UNK_TOKEN
                    ),
                    np.uint8,
                )
            )
        pieces = tf_text.FastWordpieceTokenizer(
            model_buffer=tf.constant(self._fast_model), token_out_type=tf.int32
        ).tokenize(words)
        return pieces.values, tf.gather(pieces.row_splits, word_splits)

    def tokenize_normalized_with_offsets(
        self, texts: tf.Tensor
    ) -> tuple[tf.RaggedTensor, tf.RaggedTensor, tf.RaggedTensor]:
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
                    f"of {self.vocab_file!r}"
                )
            out.append(self.vocab[int(i)])
        return out

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        """Maps token strings to ids; unknown tokens map to `unk_id`."""
        return [self._token_to_id.get(t, self.unk_id) for t in tokens]

    def text_settings(self) -> dict:
        """How text is normalized: `do_lower_case`, `strip_accents`, `normalization`.

        Recorded beside every model, with its length, as a `TextPath`.
        """
        return {
            "do_lower_case": self.do_lower_case,
            "strip_accents": self.strip_accents,
            "normalization": self.normalization,
        }

    def get_config(self) -> dict:
        """Arguments that rebuild this tokenizer: `WordPieceTokenizer(**cfg)`."""
        return {"vocab_file": self.vocab_file, **self.text_settings()}


@dataclasses.dataclass(frozen=True)
class TextPath:
    """Everything a model's text path needs besides its vocabulary.

    Fine-tuning saves it in every model's `model.json`, every export writes
    it into `serving_config.json` and every check reads it back from there,
    so a model is served with the tokenization it was fine-tuned with.

    Attributes:
        do_lower_case: whether text is lower-cased (case-folded).
        strip_accents: whether combining marks are removed.
        normalization: one of `NORMALIZATIONS`.
        max_seq_length: pieces per example, special tokens included.
    """

    do_lower_case: bool
    strip_accents: bool
    normalization: str
    max_seq_length: int

    @classmethod
    def of(cls, tokenizer: WordPieceTokenizer, max_seq_length: int) -> "TextPath":
        """The text path of `tokenizer` at `max_seq_length`."""
        return cls(**tokenizer.text_settings(), max_seq_length=int(max_seq_length))

    @classmethod
    def from_dict(cls, record: dict) -> "TextPath":
        """The text path a `model.json` or `serving_config.json` records.

        Records written before `strip_accents` or `normalization` existed
        meant: accents stripped exactly when lower-casing; `casefold`.
        """
        return cls(
            bool(record["do_lower_case"]),
            _resolve_strip_accents(record["do_lower_case"], record.get("strip_accents")),
            check_normalization(record.get("normalization") or DEFAULT_NORMALIZATION),
            int(record["max_seq_length"]),
        )

    def to_dict(self) -> dict:
        """The entries written into `model.json` and `serving_config.json`."""
        return dataclasses.asdict(self)

    def tokenizer(self, vocab_file: str) -> WordPieceTokenizer:
        """The tokenizer of this text path over `vocab_file`."""
        return WordPieceTokenizer(
            vocab_file, self.do_lower_case, self.strip_accents, self.normalization
        )
