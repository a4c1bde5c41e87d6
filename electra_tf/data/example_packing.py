"""Packing tokenized lines into pre-training examples, as ELECTRA's `ExampleBuilder` does.

WordPiece lines are accumulated until their total length reaches a target
length, then split into segments A and B at line boundaries (see
`ExampleBuilder`), and laid out (`example_arrays`) as

    input_ids    [L]  [CLS] A [SEP] B [SEP] 0 0 ...   (B [SEP] only if B is non-empty)
    input_mask   [L]  1 for real tokens, 0 for padding
    segment_ids  [L]  0 for [CLS] A [SEP], 1 for B [SEP], 0 for padding

with L = `max_seq_length`, all three int64, the features of one
`tf.train.Example` record (`electra_tf.data.example_encoding`). Padding uses
id 0 regardless of the vocabulary's [PAD] id, as the original does; readers
must use `input_mask` to find padding.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

# The original's "unlimited" first-segment target for single-segment examples.
_UNLIMITED = 100_000


class ExampleBuilder:
    """Packs a stream of tokenized lines into examples, as ELECTRA's builder does.

    Sentences (tokenized lines) are accumulated until their total length
    reaches the current target length (or the document ends), then split:

    * with probability `single_segment_prob` there is one segment (the first
      segment's target is effectively unlimited), otherwise the first
      segment's target is `(target_length - 3) // 2`;
    * in order, a sentence goes to A if A is empty, or if A plus the sentence
      stays below the first-segment target, or - while B is still empty and A
      is below the target - on a fair coin; otherwise it goes to B. (As in the
      original, a later short sentence can still join A after one went to B.)
    * A is truncated to `max_seq_length - 2` tokens and B to
      `max(0, max_seq_length - len(A) - 3)`; the excess is dropped.

    After each example the next target length is `rng.randint(5,
    max_seq_length)` with probability `short_seq_prob`, else
    `max_seq_length`. The random draws happen in the original's order:
    single-segment draw, coin flips, short-length draw.

    Args:
        max_seq_length: L, tokens per example including [CLS] and [SEP]s.
        rng: a `random.Random` (anything with `random()` and `randint(a, b)`).
        single_segment_prob: probability of a single-segment example.
        short_seq_prob: probability that the next target length is random.
    """

    def __init__(
        self,
        max_seq_length: int,
        rng,
        single_segment_prob: float = 0.1,
        short_seq_prob: float = 0.05,
    ):
        self.max_length = int(max_seq_length)
        self._rng = rng
        self._single_segment_prob = single_segment_prob
        self._short_seq_prob = short_seq_prob
        self._sentences: list = []
        self._length = 0
        self.target_length = self.max_length

    def add_sentence(self, ids) -> Optional[tuple[np.ndarray, np.ndarray]]:
        """Adds one tokenized line.

        Args:
            ids: int sequence of shape [n] (list or NumPy array).

        Returns:
            `(A, B)` int64 arrays (without special tokens) if an example is
            complete, else None. Empty lines are ignored: they never change
            the outcome of the original algorithm.
        """
        if len(ids) == 0:
            return None
        self._sentences.append(ids)
        self._length += len(ids)
        if self._length >= self.target_length:
            return self._create_example()
        return None

    def end_document(self) -> Optional[tuple[np.ndarray, np.ndarray]]:
        """Ends the current document; returns its pending example, if any."""
        if self._length == 0:
            return None
        return self._create_example()

    def _create_example(self) -> tuple[np.ndarray, np.ndarray]:
        rng = self._rng
        if rng.random() < self._single_segment_prob:
            first_target = _UNLIMITED
        else:
            # Room for [CLS] and two [SEP]s, split evenly.
            first_target = (self.target_length - 3) // 2

        first: list = []
        second: list = []
        len_first = len_second = 0
        for sentence in self._sentences:
            n = len(sentence)
            if (
                len_first == 0
                or len_first + n < first_target
                or (len_second == 0 and len_first < first_target and rng.random() < 0.5)
            ):
                first.append(sentence)
                len_first += n
            else:
                second.append(sentence)
                len_second += n

        a = _concat(first)[: self.max_length - 2]
        b = _concat(second)[: max(0, self.max_length - len(a) - 3)]

        self._sentences = []
        self._length = 0
        if rng.random() < self._short_seq_prob:
            self.target_length = rng.randint(5, self.max_length)
        else:
            self.target_length = self.max_length
        return a, b


def _concat(parts: list) -> np.ndarray:
    if not parts:
        return np.zeros([0], np.int64)
    return np.concatenate([np.asarray(p, dtype=np.int64) for p in parts])


def example_arrays(
    examples: Sequence[tuple], max_seq_length: int, cls_id: int, sep_id: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lays out `(A, B)` pairs as padded feature rows.

    Args:
        examples: n pairs of int sequences; `len(A) + len(B) + 3 <= L` (or
            `len(A) + 2 <= L` when B is empty).
        max_seq_length: L.
        cls_id, sep_id: special token ids.

    Returns:
        `(input_ids, input_mask, segment_ids)`, int64 arrays of shape [n, L].
    """
    n, length = len(examples), max_seq_length
    ids = np.zeros([n, length], np.int64)
    ends = np.empty([n], np.int64)
    a_ends = np.empty([n], np.int64)
    for r, (a, b) in enumerate(examples):
        la, lb = len(a), len(b)
        ids[r, 0] = cls_id
        ids[r, 1 : 1 + la] = a
        ids[r, 1 + la] = sep_id
        end = la + 2
        a_ends[r] = end
        if lb:
            ids[r, end : end + lb] = b
            ids[r, end + lb] = sep_id
            end += lb + 1
        ends[r] = end
    pos = np.arange(length)[None, :]
    mask = (pos < ends[:, None]).astype(np.int64)
    segments = ((pos >= a_ends[:, None]) & (pos < ends[:, None])).astype(np.int64)
    return ids, mask, segments
