"""The lines of a text file, each read only up to a bound, so that no line exhausts memory.

Every reader of line-based input (JSON lines, tagging layouts, the corpus
a vocabulary is learned from) takes its lines from `bounded_lines` or
`bounded_byte_lines`: a line is read at most `limit + 1` characters at a
time, so a line without an end (a file that is one 50 MB record) is refused
after `limit` characters with one message naming the file, the line and the
flag that sets the bound, instead of being held whole.
"""

from __future__ import annotations

import codecs
import dataclasses
from typing import IO, Iterator, Optional

# The default bound, in characters: a line of 1 Mi characters is far longer
# than any sentence or paragraph, yet takes only a few MB to read.
MAX_LINE_CHARS = 1 << 20


def line_too_long(where: str, limit: int, flag: str, what: str = "line") -> str:
    """The message for a `what` longer than `limit` characters (`where`: its file and line)."""
    return (
        f"{where}: the {what} is longer than {flag}={limit:,} characters; shorten that text "
        "or raise the limit."
    )


def bounded_lines(
    file: IO[str], path: str, limit: int, flag: str, error: type = ValueError
) -> Iterator[tuple[int, str]]:
    """Yields (1-based line number, line without its "\\n") of an open text file.

    Args:
        file: opened in text mode; open it with `newline="\\n"` to split at
            "\\n" only (a "\\r" before it stays in the line).
        path: the file's name, in the message.
        limit: the most characters a line may hold, its "\\n" not counted.
        flag: the command-line flag that sets `limit`, in the message.
        error: the exception class raised with the message.

    Raises:
        error: a line longer than `limit`, naming `path` and the line's number.
    """
    number = 0
    while True:
        line = file.readline(limit + 1)
        if not line:
            return
        number += 1
        if line.endswith("\n"):
            line = line[:-1]
        elif len(line) > limit:
            raise error(line_too_long(f"{path}, line {number}", limit, flag))
        yield number, line


# Bytes 0x80-0xBF continue a UTF-8 character; every other byte starts one.
_CONTINUATION_BYTES = bytes(range(0x80, 0xC0))


def utf8_chars(data: bytes) -> int:
    """The characters UTF-8 `data` holds (its bytes that do not continue a character)."""
    return len(data.translate(None, _CONTINUATION_BYTES))


def bounded_byte_lines(
    file: IO[bytes], path: str, limit: int, flag: str, error: type = ValueError
) -> Iterator[tuple[int, bytes]]:
    """Yields (1-based line number, line with its b"\\n") of a file opened in binary mode.

    As `bounded_lines`, `limit` counts a line's UTF-8 characters (its "\\n"
    not counted); a line is read `limit + 1` bytes at a time and at most
    `4 * limit + 1` bytes are held (the most `limit` characters take).

    Raises:
        error: a line longer than `limit` characters, naming `path` and its number.
    """
    number = 0
    while True:
        line = file.readline(limit + 1)
        if not line:
            return
        number += 1
        if len(line) > limit:  # More bytes than `limit`: count its characters.
            while not line.endswith(b"\n") and len(line) <= 4 * limit and utf8_chars(line) <= limit:
                more = file.readline(limit + 1)
                if not more:
                    break
                line += more
            if len(line) > 4 * limit + 1 or utf8_chars(line.removesuffix(b"\n")) > limit:
                raise error(line_too_long(f"{path}, line {number}", limit, flag))
        yield number, line


@dataclasses.dataclass(frozen=True)
class InvalidUtf8:
    """Where a file's first invalid UTF-8 byte is.

    Attributes:
        line: its 1-based line; column: its 1-based byte column in that line;
        offset: its byte offset in the file; byte: its value; reason: the decoder's.
    """

    line: int
    column: int
    offset: int
    byte: int
    reason: str


def first_invalid_utf8(path: str, block_bytes: int = 1 << 20) -> Optional[InvalidUtf8]:
    """The first invalid UTF-8 byte of `path` (None: the file is valid), read in blocks.

    A block at a time is held, never the whole file; a byte-order mark is valid.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset, newlines, last_newline = 0, 0, -1  # bytes before the block; "\n" among them
    with open(path, "rb") as f:
        while True:
            block = f.read(block_bytes)
            pending = decoder.getstate()[0]  # an unfinished character's bytes
            try:
                decoder.decode(block, final=not block)
            except UnicodeDecodeError as error:
                data = pending + block
                start = offset - len(pending) + error.start
                before = data[: error.start]
                lines = newlines + before.count(b"\n")
                line_start = (
                    offset - len(pending) + before.rfind(b"\n") if b"\n" in before else last_newline
                )
                return InvalidUtf8(
                    lines + 1, start - line_start, start, data[error.start], error.reason
                )
            if not block:
                return None
            newlines += block.count(b"\n")
            if b"\n" in block:
                last_newline = offset + block.rfind(b"\n")
            offset += len(block)
