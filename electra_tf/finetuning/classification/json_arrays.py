"""A file holding one JSON array of objects, read one object at a time.

KLUE distributes its classification and regression files as a single
JSON array (`[{"guid": ..., "premise": ...}, ...]`) where JSON-lines files
hold one object per line. `iter_array_objects` reads such a file in chunks
and decodes one object at a time (`json.JSONDecoder.raw_decode`), so a
file of any size is streamed: memory stays within one object of at most
`max_row_chars` characters plus one chunk, beyond the objects the caller
keeps. `starts_with_array` tells the two layouts apart by the first
character that is not whitespace.

Every refusal is one line naming the file, the line and what was expected.
"""

from __future__ import annotations

import json
from typing import Iterator

from electra_tf.finetuning.kind.files import MAX_ROW_CHARS, TaskDataError

# Characters read at a time.
CHUNK_CHARS = 1 << 16
_WHITESPACE = " \t\n\r"
_EXPECTED = "a JSON array of objects ([{...}, {...}])"


def starts_with_array(path: str) -> bool:
    """Whether the file's first character other than whitespace (or a byte-order mark) is `[`."""
    try:
        with open(path, encoding="utf-8-sig") as f:
            while True:
                chunk = f.read(CHUNK_CHARS)
                if not chunk:
                    return False
                text = chunk.lstrip(_WHITESPACE)
                if text:
                    return text[0] == "["
    except (FileNotFoundError, IsADirectoryError, UnicodeDecodeError):
        return False  # the reader that follows names the problem


# The most characters before the end of the text read at which a cut value (a `\\uXXXX`
# escape, `false`, a number's exponent) can make the decoder fail.
_LONGEST_TOKEN_CUT = 12


class _Stream:
    """The file's text in a buffer that is refilled at its end and trimmed at its start."""

    def __init__(self, file, path: str):
        self.file = file
        self.path = path
        self.buffer = ""
        self.position = 0  # in `buffer`
        self.line = 1  # of buffer[0]
        self.done = False

    def more(self) -> bool:
        """Appends a chunk; False at the end of the file."""
        if self.done:
            return False
        try:
            chunk = self.file.read(CHUNK_CHARS)
        except UnicodeDecodeError as error:
            raise TaskDataError(
                f"{self.path}, line {self.line_at(len(self.buffer))} or after: not valid UTF-8 "
                f"({error.reason})."
            ) from None
        if not chunk:
            self.done = True
            return False
        self.buffer += chunk
        return True

    def line_at(self, position: int) -> int:
        return self.line + self.buffer.count("\n", 0, position)

    def trim(self) -> None:
        """Drops what has been read (before `position`)."""
        self.line = self.line_at(self.position)
        self.buffer = self.buffer[self.position :]
        self.position = 0

    def next_char(self) -> str:
        """The next character other than whitespace, not consumed ("" at the end of the file)."""
        while True:
            while self.position < len(self.buffer) and self.buffer[self.position] in _WHITESPACE:
                self.position += 1
            if self.position < len(self.buffer):
                return self.buffer[self.position]
            self.trim()
            if not self.more():
                return ""

    def refuse(self, problem: str, position: int = None) -> TaskDataError:
        line = self.line_at(self.position if position is None else position)
        return TaskDataError(f"{self.path}, line {line}: {problem}; expected {_EXPECTED}.")


def iter_array_objects(path: str, max_row_chars: int = MAX_ROW_CHARS) -> Iterator[tuple[int, dict]]:
    """(line where it starts, object) of every element of the file's JSON array, in order.

    Args:
        path: a UTF-8 file (a byte-order mark is dropped) holding one array.
        max_row_chars: the longest object accepted, in characters.

    Raises:
        TaskDataError: a missing file, no array, an element that is not an
            object, invalid JSON, an object longer than `max_row_chars`,
            anything after the array, invalid UTF-8.
    """
    try:
        file = open(path, encoding="utf-8-sig")
    except (FileNotFoundError, IsADirectoryError):
        raise TaskDataError(f"{path}: no such file.") from None
    decoder = json.JSONDecoder()
    with file:
        stream = _Stream(file, path)
        if stream.next_char() != "[":
            raise stream.refuse("the file does not start with '['")
        stream.position += 1
        first = True
        while True:
            char = stream.next_char()
            if char == "]" and first:
                stream.position += 1
                break
            if not first:
                if char == "]":
                    stream.position += 1
                    break
                if char != ",":
                    found = repr(char) if char else "the end of the file"
                    raise stream.refuse(f"{found} after an object, where ',' or ']' belongs")
                stream.position += 1
                char = stream.next_char()
            if char != "{":
                found = repr(char) if char else "the end of the file"
                raise stream.refuse(f"{found} where an object belongs")
            stream.trim()
            start_line = stream.line
            while True:
                try:
                    record, end = decoder.raw_decode(stream.buffer, 0)
                    break
                except json.JSONDecodeError as error:
                    # Only an object cut off by the end of what was read is worth reading
                    # more for: an error well before that end is the file's own mistake.
                    cut_off = error.msg.startswith("Unterminated string") or (
                        error.pos >= len(stream.buffer) - _LONGEST_TOKEN_CUT
                    )
                    if not cut_off:
                        raise TaskDataError(
                            f"{path}, line {stream.line_at(error.pos)}: not valid JSON "
                            f"({error.msg}); expected {_EXPECTED}."
                        ) from None
                    if len(stream.buffer) > max_row_chars:
                        raise stream.refuse(
                            f"an object longer than --max_row_chars={max_row_chars:,} characters "
                            "(or one that never closes)",
                            0,
                        ) from None
                    if not stream.more():
                        raise TaskDataError(
                            f"{path}, line {stream.line_at(error.pos)}: not valid JSON "
                            f"({error.msg}); expected {_EXPECTED}."
                        ) from None
            if end > max_row_chars:
                raise stream.refuse(
                    f"an object longer than --max_row_chars={max_row_chars:,} characters", 0
                )
            stream.position = end
            first = False
            yield start_line, record
        if stream.next_char():
            raise stream.refuse("text after the array's closing ']'")
