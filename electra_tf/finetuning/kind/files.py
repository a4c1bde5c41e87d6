"""The user's files as every task kind reads them: the options, the error, the draw.

`FileTaskOptions` are the `finetune.py` flags that say how the user's files
are read (each field's metadata holds its help); `TaskDataError` is the one
error every kind's readers raise for data that cannot be read (a kind's own
error subclasses it); `draw_rows` is the reproducible draw of
`--max_train_examples`. The module imports no TensorFlow.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import numpy as np

from electra_tf.config import flag_field
from electra_tf.errors import RunError

# How CSV / TSV fields are read: csv (standard quoting, quotes doubled inside)
# or none (every character is literal, the GLUE convention).
QUOTINGS = ("csv", "none")

# The longest row `read_delimited` accepts, in characters (all its fields and
# line ends). Reading holds one row at a time beyond the rows kept, so a
# longer one (a quote that never closes, a document pasted into a cell) is
# refused before it takes memory: about 12 bytes per character at most
# (the line's text, the csv module's 4-byte field buffer, the fields).
MAX_ROW_CHARS = 1 << 20


class TaskDataError(ValueError):
    """Task data cannot be read; the message names the file, line and column."""


def draw_rows(split, count: int, seed: int, fields: Sequence[str]):
    """`split` (a dataclass with `len`) with `count` of its rows drawn without replacement.

    The rows keep their order, and the draw depends only on `seed` and the
    split's size. Each of `fields` (a list, a NumPy array or None) keeps
    the drawn rows; a split of at most `count` rows is returned as it is.
    """
    if count >= len(split):
        return split
    keep = np.sort(np.random.default_rng(seed).choice(len(split), size=count, replace=False))

    def pick(values):
        if values is None:
            return None
        if isinstance(values, np.ndarray):
            return values[keep]
        return [values[i] for i in keep]

    return dataclasses.replace(split, **{name: pick(getattr(split, name)) for name in fields})


@dataclasses.dataclass
class FileTaskOptions:
    """How to read the user's files (`finetune.py` flags: each field's metadata holds its help).

    Attributes:
        text_column: first text.
        text_pair_column: second text, or None for single-text tasks.
        label_column: label (may be absent from the test file).
        index_column: id written into prediction files (default: row number).
        task_type: the type of task, which picks its kind (`kinds.TASK_TYPES`).
        labels: class names in id order; None infers them from the training
            file (sorted: numerically when every label is an integer).
        label_scale: regression targets are divided by it for training and
            predictions multiplied by it (5 for KorSTS's 0-5 scores, as the
            original code does for STS-B).
        quoting: `csv` or `none` for CSV / TSV files.
        delimiter: None picks by extension (`.csv` comma, else tab).
        max_row_chars: the longest record any reader accepts, in characters.
    """

    text_column: str = flag_field(
        "text", "Column of the (first) text (tagging JSONL: the list of words, default tokens)."
    )
    text_pair_column: Optional[str] = flag_field(None, "Column of the second text of a pair task.")
    label_column: str = flag_field(
        "label", "Column of the label (tagging JSONL: the list of tags, default tags)."
    )
    index_column: Optional[str] = flag_field(
        None, "Column of the example id written with test predictions (default: the row number)."
    )
    # Its choices are the kinds' task types (`electra_tf.finetuning.kinds.TASK_TYPES`).
    task_type: str = flag_field(
        "classification",
        "Your task's type, which picks its kind: classification, regression, tagging (a label "
        "for every word: NER, chunking, part of speech), question_answering, ... (all choices "
        "below).",
    )
    labels: Optional[list[str]] = flag_field(
        None,
        "Class names in id order (default: the sorted labels of the training file; "
        "tagging: its tags, O first).",
    )
    label_scale: float = flag_field(
        1.0,
        "Regression: targets are divided by it for training and predictions multiplied by "
        "it (5 for KorSTS's 0-5 scores, as the original code does for STS-B).",
    )
    quoting: str = flag_field(
        "csv",
        "CSV/TSV files: csv = fields may be wrapped in double "
        "quotes (doubled inside); none = quotes are plain text.",
        choices=QUOTINGS,
    )
    delimiter: Optional[str] = flag_field(
        None, "None: by extension (.csv comma, else tab).", flag=False
    )
    max_row_chars: int = flag_field(
        MAX_ROW_CHARS,
        "The longest record read, in characters: a CSV/TSV row, a JSON line or JSON array "
        "object, a SQuAD context or question, a tagging file's line. A longer one is refused "
        "with its file and line, before it is held whole.",
    )

    def __post_init__(self):
        if self.max_row_chars <= 0:
            raise RunError(f"--max_row_chars={self.max_row_chars}: must be a positive integer.")
