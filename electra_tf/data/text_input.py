"""Raw text input of a shard build: the input files, their split into pieces, a piece's lines.

Input format (as in the original ELECTRA data builder): plain UTF-8 text, one
sentence or paragraph per line. A blank line ends a document, and so does the
end of every file. Lines are never split into sentences. Inputs may be local
paths or URLs such as `gs://bucket/dir` (see `electra_tf.fileio`).

Work split. All input files are treated as one byte stream that is cut into
`num_shards` nearly equal, line-aligned pieces; shard i is built from piece i
only. A cut is moved forward to just after the next blank line when one is
close (so documents are normally not split), otherwise to the next line
start. A document longer than the search window that straddles a cut is
split into two documents, one at the end of each piece; this only affects a
handful of examples per shard. The default shard count is one per 8 MiB of
text, at most 1000 (the original always writes 1000 files); it never depends
on the number of worker processes, so the output is the same for any
`num_workers`.

A piece is a list of `(path, start, end)` byte ranges; `iter_piece_lines`
yields its stripped lines, with "" for every document end.
"""

from __future__ import annotations

import glob
import math
import os
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence

import numpy as np

from electra_tf import fileio
from electra_tf.bounded_lines import MAX_LINE_CHARS, line_too_long, utf8_chars
from electra_tf.data.shard_layout import ShardError

# Default shard size in raw text bytes, and the cap on the default count.
DEFAULT_BYTES_PER_SHARD = 8 << 20
MAX_DEFAULT_SHARDS = 1000
# Raw bytes read per file access.
READ_BLOCK_BYTES = 4 << 20
# How far past a nominal cut to look for a blank line (document boundary).
CUT_SEARCH_BYTES = 1 << 20

_UTF8_BOM = b"\xef\xbb\xbf"
INVALID_UTF8_POLICIES = ("error", "replace")


class EmptyTextRange(ShardError):
    """`text_range` selects no text (it is shorter than the document or line it falls in)."""


# ---------------------------------------------------------------------------
# Input files and work split.


@dataclass(frozen=True)
class TextSource:
    """One input file as the build saw it: absolute path, size in bytes, modification time."""

    path: str
    size: int
    mtime_ns: int


def resolve_sources(input_patterns: Sequence[str]) -> list[TextSource]:
    """Expands files, directories and glob patterns into distinct files, in order."""
    if not input_patterns:
        raise ShardError("no input files given")
    seen: set[str] = set()
    sources: list[TextSource] = []
    for pattern in input_patterns:
        pattern = os.fspath(pattern)
        if fileio.isdir(pattern):
            matches = sorted(
                os.path.join(pattern, f) for f in fileio.listdir(pattern) if not f.startswith(".")
            )
            matches = [m for m in matches if fileio.isfile(m)]
            if not matches:
                raise ShardError(f"input directory {pattern!r} holds no files")
        elif glob.has_magic(pattern):
            matches = sorted(m for m in fileio.glob(pattern) if fileio.isfile(m))
            if not matches:
                raise ShardError(f"input pattern {pattern!r} matches no files")
        elif fileio.isfile(pattern):
            matches = [pattern]
        else:
            raise ShardError(f"input file {pattern!r} does not exist")
        for match in matches:
            path = fileio.abspath(match)
            if path in seen:
                continue  # A file named by two patterns is read once.
            seen.add(path)
            st = fileio.stat(path)
            sources.append(TextSource(path, st.size, st.mtime_ns))
    return sources


def default_num_shards(total_bytes: int) -> int:
    """One shard per 8 MiB of text, between 1 and 1000."""
    return max(1, min(MAX_DEFAULT_SHARDS, math.ceil(total_bytes / DEFAULT_BYTES_PER_SHARD)))


def _find_cut(path: str, size: int, offset: int, window: int) -> int:
    """Line-aligned cut at or after `offset` in one file, preferring a document end.

    Returns the position just after the first blank line that lies within
    `window` bytes, else the end of the file if it lies within the window,
    else the first line start at or after `offset`, else `size`.
    """
    if offset <= 0:
        return 0
    if offset >= size:
        return size
    with fileio.open_file(path, "rb") as f:
        f.seek(offset - 1)
        buf = f.read(window + 1)
        base = offset - 1  # File position of buf[0].
        first_line_start = None
        pos = buf.find(b"\n")
        while pos != -1:
            line_start = pos + 1
            if first_line_start is None:
                first_line_start = line_start
            line_end = buf.find(b"\n", line_start)
            if line_end == -1:
                break
            if not buf[line_start:line_end].strip():
                return base + line_end + 1
            pos = line_end
        if base + len(buf) >= size:
            return size  # The end of the file is a document end too.
        if first_line_start is not None:
            return base + first_line_start
        # A line longer than the window: cut at its end.
        position = base + len(buf)
        while True:
            block = f.read(READ_BLOCK_BYTES)
            if not block:
                return size
            nl = block.find(b"\n")
            if nl != -1:
                return position + nl + 1
            position += len(block)


def _stream_cut(
    sources: Sequence[TextSource], starts: np.ndarray, position: int, window: int
) -> int:
    """`_find_cut` at a position of the concatenated inputs (a position in the stream)."""
    k = min(int(np.searchsorted(starts, position, side="right") - 1), len(sources) - 1)
    return int(starts[k]) + _find_cut(
        sources[k].path, sources[k].size, position - int(starts[k]), window
    )


def text_span(sources: Sequence[TextSource], text_range: tuple[float, float]) -> tuple[int, int]:
    """The byte span `[lo, hi)` of the concatenated inputs that `text_range` selects.

    Both ends are moved to a document end when one is near (else a line
    start), exactly as shard cuts are, so the spans of (0, f) and (f, 1)
    meet at the same byte and share no line.
    """
    starts = np.concatenate([[0], np.cumsum([s.size for s in sources])]).astype(np.int64)
    total = int(starts[-1])
    ends = []
    for fraction in text_range:
        if fraction <= 0.0:
            ends.append(0)
        elif fraction >= 1.0:
            ends.append(total)
        else:
            ends.append(
                _stream_cut(sources, starts, int(round(fraction * total)), CUT_SEARCH_BYTES)
            )
    return ends[0], max(ends)


def _lines_backwards(path: str, size: int) -> Iterator[tuple[int, bytes]]:
    """(start, line without its newline) of a file's lines, the last first."""
    end, carry = size, b""
    with fileio.open_file(path, "rb") as f:
        while end > 0:
            begin = max(0, end - READ_BLOCK_BYTES)
            f.seek(begin)
            data = f.read(end - begin) + carry
            lines = data.split(b"\n")
            position = begin + len(data)
            # The first piece of a block may begin in the block before: read with it.
            for index in range(len(lines) - 1, -1 if begin == 0 else 0, -1):
                position -= len(lines[index])
                yield position, lines[index]
                position -= 1
            carry, end = (lines[0] if begin > 0 else b""), begin


def last_document_fraction(sources: Sequence[TextSource]) -> Optional[float]:
    """The smallest held-out fraction (in whole percent) whose cut holds out the corpus's last
    document, or None when the corpus is one document.

    The held-out part starts at the first document end after the cut (see
    `text_span`), so a fraction smaller than the last document's share of the
    corpus holds nothing out. Reads the last file backwards to its last blank
    line that has text before and after it; a file's end also ends a document.
    """
    last = sources[-1]
    file_start = sum(s.size for s in sources[:-1])
    total = file_start + last.size
    start, candidate, seen_text = None, None, False
    for position, line in _lines_backwards(last.path, last.size):
        if line.strip():
            if candidate is not None:
                start = file_start + candidate  # text before the blank line too
                break
            seen_text = True
        elif seen_text and candidate is None:
            candidate = position
    if start is None:
        start = file_start  # the last file is one document
    if start <= 0 or not total:
        return None
    fraction = math.ceil(100 * (total - start) / total) / 100
    return fraction if fraction < 1 else None


def plan_pieces(
    sources: Sequence[TextSource], num_shards: int, span: Optional[tuple[int, int]] = None
) -> list[list[tuple[str, int, int]]]:
    """Splits the concatenated inputs (within `span`, default all) into line-aligned pieces.

    Returns:
        One list per shard of `(path, start, end)` byte ranges (possibly empty).
    """
    starts = np.concatenate([[0], np.cumsum([s.size for s in sources])]).astype(np.int64)
    lo, hi = span if span is not None else (0, int(starts[-1]))
    nominal = (hi - lo) / num_shards
    window = int(min(CUT_SEARCH_BYTES, max(1, nominal // 2)))

    cuts = [lo]
    for i in range(1, num_shards):
        cut = _stream_cut(sources, starts, lo + int(round(i * nominal)), window)
        cuts.append(min(hi, max(cuts[-1], cut)))
    cuts.append(hi)

    pieces = []
    for i in range(num_shards):
        lo, hi = cuts[i], cuts[i + 1]
        segments = []
        for k, src in enumerate(sources):
            s, e = max(lo, int(starts[k])), min(hi, int(starts[k + 1]))
            if s < e:
                segments.append((src.path, s - int(starts[k]), e - int(starts[k])))
        pieces.append(segments)
    return pieces


# ---------------------------------------------------------------------------
# Reading text.


def _line_number(path: str, position: int) -> int:
    """The 1-based number of the line holding byte `position` of `path` (read in blocks)."""
    newlines = 0
    with fileio.open_file(path, "rb") as f:
        while position > 0:
            block = f.read(min(READ_BLOCK_BYTES, position))
            if not block:
                break
            newlines += block.count(b"\n")
            position -= len(block)
    return newlines + 1


def _line_too_long(path: str, position: int, limit: int) -> ShardError:
    where = f"input file {path!r}, line {_line_number(path, position)}"
    return ShardError(line_too_long(where, limit, "--max_row_chars"))


def _invalid_utf8_error(path: str, position: int, byte: int) -> ShardError:
    line_no = _line_number(path, position)
    return ShardError(
        f"input file {path!r} is not valid UTF-8: byte 0x{byte:02x} at line {line_no} "
        f"(byte offset {position}). Fix the file, or pass invalid_utf8='replace' "
        "(--invalid_utf8=replace) to substitute U+FFFD and count the affected lines"
    )


def _decode_block(data: bytes, path: str, data_offset: int, policy: str, stats: dict) -> list[str]:
    """Decodes whole lines of bytes; returns lines without their newline."""
    try:
        return data.decode("utf-8").split("\n")
    except UnicodeDecodeError as err:
        if policy == "error":
            raise _invalid_utf8_error(path, data_offset + err.start, data[err.start]) from None
    lines = []
    line_offset = data_offset
    for raw in data.split(b"\n"):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as err:
            lines.append(raw.decode("utf-8", errors="replace"))
            if stats["replaced_lines"] == 0:
                stats["first_replaced"] = f"{path} byte offset {line_offset + err.start}"
            stats["replaced_lines"] += 1
        line_offset += len(raw) + 1
    return lines


def _iter_lines(
    path: str, start: int, end: int, policy: str, stats: dict, limit: int
) -> Iterator[str]:
    """Yields the stripped lines of `path[start:end]` (`start` is a line start).

    A line longer than `limit` characters is refused as soon as that many
    are read: memory holds at most a block and `4 * limit` bytes of one line.
    """
    with fileio.open_file(path, "rb") as f:
        f.seek(start)
        position = start  # File offset of the next unread byte.
        carry = b""
        while position < end:
            block = f.read(min(READ_BLOCK_BYTES, end - position))
            if not block:
                break  # The file shrank since it was listed.
            data_offset = position - len(carry)
            data = carry + block
            position += len(block)
            if data_offset == 0 and data.startswith(_UTF8_BOM):
                data = data[len(_UTF8_BOM) :]
                data_offset = len(_UTF8_BOM)
            if position < end:
                nl = data.rfind(b"\n")
                if nl == -1:
                    carry = data
                    if len(carry) > limit and (len(carry) > 4 * limit or utf8_chars(carry) > limit):
                        raise _line_too_long(path, data_offset, limit)
                    continue
                data, carry = data[: nl + 1], data[nl + 1 :]
            else:
                carry = b""
            lines = _decode_block(data, path, data_offset, policy, stats)
            if data.endswith(b"\n"):
                lines.pop()  # The split leaves an empty string after the last newline.
            yield from _bounded(lines, path, data_offset, data, limit)
        if carry:
            carry_offset = position - len(carry)
            lines = _decode_block(carry, path, carry_offset, policy, stats)
            yield from _bounded(lines, path, carry_offset, carry, limit)


def _bounded(lines: list[str], path: str, data_offset: int, data: bytes, limit: int):
    """The stripped `lines` decoded from `data` (at `data_offset`), none longer than `limit`."""
    if lines and max(map(len, lines)) > limit:
        k = next(k for k, line in enumerate(lines) if len(line) > limit)
        start = data_offset + sum(len(raw) + 1 for raw in data.split(b"\n", k)[:k])
        raise _line_too_long(path, start, limit)
    for line in lines:
        yield line.strip()


def iter_piece_lines(
    segments, policy: str, stats: dict, max_line_chars: int = MAX_LINE_CHARS
) -> Iterator[str]:
    """Yields a piece's stripped lines; "" ends a document (also at every file end).

    Args:
        segments: the piece, `(path, start, end)` byte ranges (`plan_pieces`).
        policy: invalid UTF-8 is an error ("error") or U+FFFD ("replace").
        stats: `{"replaced_lines": int, "first_replaced": str or None}`,
            updated in place under "replace".
        max_line_chars: the longest line read, in characters (--max_row_chars).

    Raises:
        ShardError: invalid UTF-8 under "error", naming file, line and byte
            offset; a line longer than `max_line_chars`, naming file and line.
    """
    for path, start, end in segments:
        yield from _iter_lines(path, start, end, policy, stats, max_line_chars)
        yield ""
