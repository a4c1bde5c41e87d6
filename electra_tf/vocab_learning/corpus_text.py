"""The corpus text a vocabulary is learned from, read as a stream of line batches.

Without a byte budget every line of every file is read, in order, a batch at
a time, so a corpus of any size passes through in constant memory. With a
budget smaller than the corpus, the files are treated as one stream and read
in `ceil(max_bytes / 64 KiB)` chunks at evenly spaced offsets, each trimmed
to whole lines, so the sample covers the beginning, middle and end of every
large corpus instead of just its first megabytes.
"""

from __future__ import annotations

import bisect
import math
import os
from typing import Iterator, Optional, Sequence

from electra_tf.bounded_lines import MAX_LINE_CHARS, bounded_byte_lines
from electra_tf.vocab_learning.options import VocabLearningError

# Lines per batch are read up to this many bytes (whole lines, so a batch may hold a little more).
BATCH_BYTES = 1 << 20
_SAMPLE_CHUNK_BYTES = 1 << 16


def text_ranges(sizes: Sequence[int], max_bytes: Optional[int]) -> list[tuple[int, int, int]]:
    """(file index, offset, length) of the byte ranges to read.

    Args:
        sizes: the files' sizes in bytes.
        max_bytes: the budget; None (or at least the total): every byte.
    """
    total = sum(sizes)
    if max_bytes is None or total <= max_bytes:
        return [(i, 0, size) for i, size in enumerate(sizes) if size]
    n_chunks = max(1, math.ceil(max_bytes / _SAMPLE_CHUNK_BYTES))
    chunk = max_bytes // n_chunks
    stride = total / n_chunks
    starts = [0]
    for size in sizes:
        starts.append(starts[-1] + size)
    ranges = []
    for k in range(n_chunks):
        pos = int(k * stride)
        i = bisect.bisect_right(starts, pos) - 1
        offset = pos - starts[i]
        ranges.append((i, offset, min(chunk, sizes[i] - offset)))
    return ranges


def text_bytes(files: Sequence[str], max_bytes: Optional[int]) -> int:
    """How many bytes `line_batches` reads at most (for progress and its ETA)."""
    return sum(
        length for _, _, length in text_ranges([os.path.getsize(f) for f in files], max_bytes)
    )


def line_batches(
    files: Sequence[str], max_bytes: Optional[int], max_line_chars: int = MAX_LINE_CHARS
) -> Iterator[tuple[list, int]]:
    """Yields (lines, their bytes): batches of whole lines, as bytes.

    Lines end at b"\\n" (which a line may still hold at its end), as the
    shard builder reads them; blank lines are kept (they hold no words).
    Invalid UTF-8 is left as it is: normalization drops it, as the tokenizer
    does. A sample (`max_bytes`) is read in chunks of at most 64 KiB; a
    whole file a line at a time, each at most `max_line_chars` characters.

    Raises:
        VocabLearningError: a line longer than `max_line_chars` (--max_row_chars).
    """
    sizes = [os.path.getsize(f) for f in files]
    for i, offset, length in text_ranges(sizes, max_bytes):
        with open(files[i], "rb") as f:
            if offset == 0 and length == sizes[i]:
                batch, size = [], 0
                lines = bounded_byte_lines(
                    f, files[i], max_line_chars, "--max_row_chars", VocabLearningError
                )
                for _, line in lines:
                    batch.append(line)
                    size += len(line)
                    if size >= BATCH_BYTES:
                        yield batch, size
                        batch, size = [], 0
                if batch:
                    yield batch, size
                continue
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
        yield data.split(b"\n"), len(data)
