"""The sentences of a tagging file, whatever its layout, and the rules every layout shares.

A file's sentences are a `TaggedSplit`: words, tags (one per word) and the
line where each sentence starts. Every layout reader (`tagging.layouts`)
reads its text with `read_text_lines` and refuses a sentence of more than
`MAX_SENTENCE_WORDS` words: no ELECTRA input holds that many (512 pieces
at most), so such a sentence is a file read in the wrong layout (a whole
sentence-per-line file taken as one CoNLL sentence, say), never data.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator, Optional

from electra_tf.bounded_lines import bounded_lines, first_invalid_utf8
from electra_tf.finetuning.kind.files import MAX_ROW_CHARS, TaskDataError, draw_rows

# Longer "sentences" are refused: the file is not in the layout it was read as.
MAX_SENTENCE_WORDS = 500


@dataclasses.dataclass
class TaggedSplit:
    """The sentences of one file.

    Attributes:
        name: `train`, `dev` or `test`.
        source: the file, for messages.
        sentences: N lists of words.
        tags: N lists of tags, one per word (None for an unlabelled file).
        lines: N line numbers where the sentences start (for messages).
        layout: the layout the file was read in (`tagging.layouts`); in the
            one-word-per-line layouts (`conll`, `naver_original`) word i of
            a sentence is on line `lines[n] + i`, in the others the whole
            sentence is on line `lines[n]`.
        ids: N example ids the file gives (CLUENER's `id`); None when it gives none.
    """

    name: str
    source: str
    sentences: list[list[str]]
    tags: Optional[list[list[str]]]
    lines: list[int]
    layout: str = "conll"
    ids: Optional[list] = None

    def __len__(self) -> int:
        return len(self.sentences)

    @property
    def num_words(self) -> int:
        return sum(len(words) for words in self.sentences)

    def sample(self, count: int, seed: int = 0) -> "TaggedSplit":
        """`count` sentences drawn without replacement (in their original order)."""
        return draw_rows(self, count, seed, ("sentences", "tags", "lines", "ids"))


def read_text_lines(path: str, max_line_chars: int = MAX_ROW_CHARS) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its newline) of a UTF-8 file (a byte-order mark dropped).

    A line is read at most `max_line_chars` characters at a time
    (`bounded_lines`), so memory holds one bounded line, never a whole
    overlong one.

    Raises:
        TaskDataError: a missing file, invalid UTF-8 (the line and byte
            named), or a line longer than `max_line_chars` (--max_row_chars).
    """
    try:
        file = open(path, encoding="utf-8-sig", newline="\n")
    except FileNotFoundError:
        raise TaskDataError(f"{path}: no such file.") from None
    except IsADirectoryError:
        raise TaskDataError(f"{path}: a directory, not a file.") from None
    with file:
        try:
            yield from bounded_lines(file, path, max_line_chars, "--max_row_chars", TaskDataError)
        except UnicodeDecodeError:
            raise _utf8_error(path) from None


def _utf8_error(path: str) -> TaskDataError:
    """The error naming the line and byte of the first invalid UTF-8 in `path` (read in blocks)."""
    found = first_invalid_utf8(path)
    if found is None:
        return TaskDataError(f"{path}: not valid UTF-8.")
    return TaskDataError(
        f"{path}, line {found.line}: not valid UTF-8 ({found.reason} at byte {found.offset})."
    )


def check_sentence_length(path: str, line: int, words: int, layout: str) -> None:
    """Refuses a sentence of more than `MAX_SENTENCE_WORDS` words, naming the layout expected.

    Args:
        path: the file.
        line: where the sentence starts.
        words: its word count.
        layout: the layout's description (what the file should look like).

    Raises:
        TaskDataError: the sentence is longer.
    """
    if words > MAX_SENTENCE_WORDS:
        raise TaskDataError(
            f"{path}, line {line}: a sentence of {words:,} words (more than "
            f"{MAX_SENTENCE_WORDS}); the file is not in the layout it was read as ({layout}). "
            "Pass --tagging_layout=conll|jsonl|sentence_per_line|naver_original|cluener."
        )
