"""SQuAD examples -> model windows `[CLS] question [SEP] context-window [SEP]`, with offsets.

Character-exact offsets. Every context token carries the span [start, end)
of original-context characters it came from, so a predicted token span maps
back to `context[start:end]` with no re-normalisation heuristics. The
tokenizer normalises text (case folding, accent stripping, NFC), which can
change lengths, so offsets are not read off the normalised string. Instead:

1. the context is cut into *units* where the tokenizer would cut anyway:
   at whitespace, and around every punctuation character and CJK ideograph;
2. each distinct unit is tokenized on its own, giving its word pieces;
3. the unit is also cut into *clusters* (a character plus the combining
   marks or Hangul conjoining jamo that follow it) and each cluster is
   normalised on its own. When the normalised clusters concatenate to the
   word pieces' text, every piece maps to the clusters its characters came
   from; otherwise (an [UNK] piece, a normalisation that does not
   decompose per cluster) every piece of the unit gets the whole unit.

Python strings index code points, as SQuAD's `answer_start` does, so
characters outside the Basic Multilingual Plane count as one.

Windows follow the original code: the question is cut to `max_query_length`
tokens, windows of at most `max_seq_length - len(question) - 3` context
tokens start every `doc_stride` tokens, and a token is scored in the window
where it has the most context on both sides. A training window that does not
contain the whole answer, and every window of an unanswerable question,
points start and end at position 0 ([CLS]).
"""

from __future__ import annotations

import dataclasses
import unicodedata
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

from electra_tf.finetuning.kind.text_features import tokenize_texts
from electra_tf.tokenization import is_cjk_ideograph

_CHUNK = 4096


def is_space(char: str) -> bool:
    """Characters the tokenizer treats as word separators."""
    return char.isspace() or unicodedata.category(char) in ("Zs", "Zl", "Zp")


def is_own_unit(char: str) -> bool:
    """Punctuation (ASCII symbols included, as BERT) and CJK ideographs stand alone."""
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    if unicodedata.category(char).startswith("P"):
        return True
    return is_cjk_ideograph(char)


def split_units(text: str) -> list[tuple[int, int]]:
    """Character spans [start, end) of the units of `text` (see the module docstring)."""
    spans, start = [], None
    for i, char in enumerate(text):
        if is_space(char) or is_own_unit(char):
            if start is not None:
                spans.append((start, i))
                start = None
            if not is_space(char):
                spans.append((i, i + 1))
        elif start is None:
            start = i
    if start is not None:
        spans.append((start, len(text)))
    return spans


def _attaches(char: str) -> bool:
    """Whether `char` belongs to the cluster of the character before it."""
    code = ord(char)
    return (
        unicodedata.category(char).startswith("M")
        or 0x1160 <= code <= 0x11FF
        or 0xD7B0 <= code <= 0xD7FF
    )  # Hangul vowels/finals


def split_clusters(unit: str) -> list[tuple[int, int]]:
    """Spans of a base character plus the combining characters that follow it."""
    spans = []
    for i, char in enumerate(unit):
        if spans and _attaches(char):
            spans[-1] = (spans[-1][0], i + 1)
        else:
            spans.append((i, i + 1))
    return spans


@dataclasses.dataclass
class DocTokens:
    """A tokenized context.

    Attributes:
        ids: word-piece ids, [T].
        spans: int32 [T, 2], character span [start, end) of each piece in the
            original context.
    """

    ids: list[int]
    spans: np.ndarray


class OffsetTokenizer:
    """Tokenizes contexts into word pieces with character spans (see the module docstring).

    Units and clusters are cached, so repeated words cost one dictionary look-up.

    Args:
        tokenizer: a `WordPieceTokenizer`.
    """

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self._units: dict[str, tuple[list[int], list[tuple[int, int]]]] = {}
        self._clusters: dict[str, str] = {}

    def _normalize(self, texts: list[str]) -> None:
        new = [t for t in dict.fromkeys(texts) if t not in self._clusters]
        for start in range(0, len(new), _CHUNK):
            chunk = new[start : start + _CHUNK]
            out = self.tokenizer.normalize(tf.constant(chunk, dtype=tf.string)).numpy()
            self._clusters.update(zip(chunk, (o.decode("utf-8") for o in out)))

    def _align(self, unit: str, ids: list[int]) -> list[tuple[int, int]]:
        """Span of each piece of `unit`, relative to the unit."""
        whole = [(0, len(unit))] * len(ids)
        if not ids or self.tokenizer.unk_id in ids:
            return whole
        clusters = split_clusters(unit)
        owner = []  # normalised character -> cluster index
        for c, (a, b) in enumerate(clusters):
            owner.extend([c] * len(self._clusters[unit[a:b]]))
        pieces = []
        for i in ids:
            token = self.tokenizer.vocab[i]
            pieces.append(token[2:] if token.startswith("##") else token)
        if sum(len(p) for p in pieces) != len(owner) or "".join(pieces) != "".join(
            self._clusters[unit[a:b]] for a, b in clusters
        ):
            return whole
        spans, position = [], 0
        for piece in pieces:
            first, last = owner[position], owner[position + len(piece) - 1]
            spans.append((clusters[first][0], clusters[last][1]))
            position += len(piece)
        return spans

    def tokenize(self, contexts: Sequence[str]) -> list[DocTokens]:
        """Word pieces and character spans of each context."""
        all_units = [split_units(text) for text in contexts]
        new = list(
            dict.fromkeys(
                text[a:b]
                for text, units in zip(contexts, all_units)
                for a, b in units
                if text[a:b] not in self._units
            )
        )
        if new:
            self._normalize([u[a:b] for u in new for a, b in split_clusters(u)])
            for unit, ids in zip(new, tokenize_texts(self.tokenizer, new)):
                self._units[unit] = (ids, self._align(unit, ids))
        out = []
        for text, units in zip(contexts, all_units):
            ids, spans = [], []
            for a, b in units:
                unit_ids, unit_spans = self._units[text[a:b]]
                ids.extend(unit_ids)
                spans.extend((a + s, a + e) for s, e in unit_spans)
            out.append(DocTokens(ids, np.asarray(spans, np.int32).reshape(-1, 2)))
        return out


def doc_windows(num_tokens: int, max_tokens: int, stride: int) -> list[tuple[int, int]]:
    """(start, length) of the sliding windows over `num_tokens` context tokens.

    Windows start every `stride` tokens (or every window length, if shorter)
    until one reaches the end; a context of 0 tokens still gets one window.
    """
    windows, start = [], 0
    while True:
        length = min(num_tokens - start, max_tokens)
        windows.append((start, length))
        if start + length >= num_tokens:
            return windows
        start += min(length, stride)


def max_context_windows(windows: list[tuple[int, int]], num_tokens: int) -> np.ndarray:
    """For each context token, the window in which it has the most context, [T] int.

    Score of a token in a window: min(tokens left of it, tokens right of it)
    + 0.01 * window length; the first window wins ties (as the original).
    """
    best = np.zeros(num_tokens, np.int64)
    best_score = np.full(num_tokens, -np.inf)
    for w, (start, length) in enumerate(windows):
        positions = np.arange(start, start + length)
        score = np.minimum(positions - start, start + length - 1 - positions) + 0.01 * length
        better = score > best_score[positions]
        best[positions[better]] = w
        best_score[positions[better]] = score[better]
    return best


def answer_token_span(
    spans: np.ndarray, char_start: int, char_end: int
) -> Optional[tuple[int, int]]:
    """First and last token (inclusive) overlapping characters [char_start, char_end)."""
    overlap = np.nonzero((spans[:, 1] > char_start) & (spans[:, 0] < char_end))[0]
    if overlap.size == 0:
        return None
    return int(overlap[0]), int(overlap[-1])


@dataclasses.dataclass
class QAFeatures:
    """Model windows of a list of examples, padded to `max_seq_length`.

    Attributes:
        input_ids, input_mask, segment_ids: int32 [N, L].
        start_positions, end_positions: int32 [N]; 0 ([CLS]) when the window
            holds no answer.
        is_impossible: int32 [N], the example's SQuAD 2.0 flag.
        example_index: int32 [N], which example each window belongs to.
        token_spans: int32 [N, L, 2], character span of each context token,
            -1 elsewhere ([CLS], question, [SEP], padding).
        max_context: bool [N, L], token scored in this window.
        skipped: training examples whose answer matches no token (dropped).
    """

    input_ids: np.ndarray
    input_mask: np.ndarray
    segment_ids: np.ndarray
    start_positions: np.ndarray
    end_positions: np.ndarray
    is_impossible: np.ndarray
    example_index: np.ndarray
    token_spans: np.ndarray
    max_context: np.ndarray
    skipped: int = 0

    def __len__(self):
        return len(self.input_ids)

    def inputs(self) -> dict:
        return {
            "input_ids": self.input_ids,
            "input_mask": self.input_mask,
            "segment_ids": self.segment_ids,
        }

    def labels(self) -> dict:
        return {
            "start_positions": self.start_positions,
            "end_positions": self.end_positions,
            "is_impossible": self.is_impossible,
        }


def convert_examples(
    examples,
    tokenizer,
    max_seq_length: int = 512,
    doc_stride: int = 128,
    max_query_length: int = 64,
    is_training: bool = False,
    offset_tokenizer: Optional[OffsetTokenizer] = None,
) -> QAFeatures:
    """Builds the windows of every example.

    Args:
        examples: `QAExample`s.
        tokenizer: the `WordPieceTokenizer`.
        max_seq_length: window length L including [CLS] and two [SEP].
        doc_stride: tokens between the starts of consecutive windows.
        max_query_length: question tokens kept.
        is_training: locate answers (otherwise positions are 0).
        offset_tokenizer: reuse a cache across calls.

    Raises:
        ValueError: the lengths leave no room for context tokens.
    """
    if max_query_length <= 0 or doc_stride <= 0:
        raise ValueError(
            f"--max_query_length={max_query_length} and --doc_stride={doc_stride} must be positive."
        )
    offsets = offset_tokenizer or OffsetTokenizer(tokenizer)
    contexts = list(dict.fromkeys(e.context for e in examples))
    docs = dict(zip(contexts, offsets.tokenize(contexts)))
    questions = tokenize_texts(tokenizer, [e.question for e in examples])
    rows = {
        k: []
        for k in (
            "ids",
            "segments",
            "start",
            "end",
            "impossible",
            "example",
            "spans",
            "max_context",
        )
    }
    skipped = 0
    for index, (example, question) in enumerate(zip(examples, questions)):
        question = question[:max_query_length]
        doc = docs[example.context]
        answer = None
        if is_training and not example.is_impossible:
            answer = answer_token_span(doc.spans, *example.answer_span)
            if answer is None:
                skipped += 1
                continue
        max_tokens = max_seq_length - len(question) - 3
        if max_tokens < 1:
            raise ValueError(
                f"--max_seq_length={max_seq_length} leaves no room for context "
                f"after the {len(question)} question tokens of {example.qas_id} "
                f"(--max_query_length={max_query_length})."
            )
        windows = doc_windows(len(doc.ids), max_tokens, doc_stride)
        owners = max_context_windows(windows, len(doc.ids))
        offset = len(question) + 2
        for w, (start, length) in enumerate(windows):
            ids = (
                [tokenizer.cls_id]
                + question
                + [tokenizer.sep_id]
                + doc.ids[start : start + length]
                + [tokenizer.sep_id]
            )
            spans = np.full((len(ids), 2), -1, np.int32)
            spans[offset : offset + length] = doc.spans[start : start + length]
            max_context = np.zeros(len(ids), bool)
            max_context[offset : offset + length] = owners[start : start + length] == w
            first = last = 0
            if answer is not None and start <= answer[0] and answer[1] < start + length:
                first, last = answer[0] - start + offset, answer[1] - start + offset
            rows["ids"].append(ids)
            rows["segments"].append([0] * offset + [1] * (length + 1))
            rows["start"].append(first)
            rows["end"].append(last)
            rows["impossible"].append(int(example.is_impossible))
            rows["example"].append(index)
            rows["spans"].append(spans)
            rows["max_context"].append(max_context)
    n = len(rows["ids"])
    input_ids = np.zeros((n, max_seq_length), np.int32) + tokenizer.pad_id
    input_mask = np.zeros((n, max_seq_length), np.int32)
    segment_ids = np.zeros((n, max_seq_length), np.int32)
    token_spans = np.full((n, max_seq_length, 2), -1, np.int32)
    max_context = np.zeros((n, max_seq_length), bool)
    for i in range(n):
        length = len(rows["ids"][i])
        input_ids[i, :length] = rows["ids"][i]
        input_mask[i, :length] = 1
        segment_ids[i, :length] = rows["segments"][i]
        token_spans[i, :length] = rows["spans"][i]
        max_context[i, :length] = rows["max_context"][i]
    as_int = lambda key: np.asarray(rows[key], np.int32).reshape(n)  # noqa: E731
    return QAFeatures(
        input_ids,
        input_mask,
        segment_ids,
        as_int("start"),
        as_int("end"),
        as_int("impossible"),
        as_int("example"),
        token_spans,
        max_context,
        skipped,
    )


def make_dataset(
    features: QAFeatures,
    batch_size: int,
    with_labels: bool = True,
    shuffle_seed: Optional[int] = None,
    repeat: bool = False,
) -> tf.data.Dataset:
    """(inputs, labels) batches for training, or inputs only for prediction."""
    data = (features.inputs(), features.labels()) if with_labels else features.inputs()
    dataset = tf.data.Dataset.from_tensor_slices(data)
    if shuffle_seed is not None:
        dataset = dataset.shuffle(len(features), seed=shuffle_seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)
