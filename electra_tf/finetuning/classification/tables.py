"""Benchmark TSV files read the way the projects that publish their scores read them.

KoELECTRA (`finetune/processor/seq_cls.py`) and Chinese-ELECTRA
(`finetune/classification/classification_tasks.py`) read their
classification files by column position, skip the first row, and take
every character literally (no CSV quoting; Chinese-ELECTRA's `read_tsv`
passes `quotechar=None`). A `TableLayout` says the same for one file:
which columns hold the texts and the label, the header it must have (when
the project's files have a known one), the quoting, the rows the project
leaves out (KoELECTRA drops PAWS and Question Pair rows with an empty
sentence; XNLI's multilingual dev file holds every language, of which the
Chinese rows are kept) and label spellings that mean the same class
(XNLI's train file says `contradictory` where its dev file says
`contradiction`).

KLUE distributes its files as one JSON array of objects
(`klue-nli-v1.1_dev.json`); a `JsonLayout` names the keys of the texts, the
label (a path into nested objects: KLUE-STS's `labels` -> `real-label`)
and the id, and `read_table` reads such a file one object at a time
(`json_arrays`). KLUE-RE's text is its sentence with the subject and the
object marked where their character spans lie (`mark_entity_spans`), as
KLUE-baseline's reader marks them (`klue_baseline/data/klue_re.py`).

Every refusal is one line naming the file, the line and the layout
expected; rows with too few columns are skipped with a warning naming
their count and the first one, as the GLUE reader does (Chinese-ELECTRA
logs and skips them too).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from electra_tf.finetuning.classification.data import REGRESSION, Split, Task, read_delimited
from electra_tf.finetuning.classification.json_arrays import iter_array_objects
from electra_tf.finetuning.kind.files import TaskDataError


@dataclasses.dataclass(frozen=True)
class TableLayout:
    """Where one distributed TSV file keeps its texts and label.

    Attributes:
        description: the layout in words, for messages (`id<TAB>document<TAB>label`).
        text: column (0-based) of the first text.
        text_pair: column of the second text (None: single-text task).
        label: column of the label.
        header: the header row the file must have (stripped names), or None
            when the first row is skipped unread (the project skips it
            whatever it holds).
        has_header: whether the first row is a header at all.
        quoting: `none` (every character literal) or `csv` (fields in
            double quotes, doubled inside: NSMC).
        index: column of the example id written with predictions (None: the
            row number).
        skip_empty_texts: rows whose text (or second text) is empty are
            left out (counted in a warning).
        keep: (column, value): rows whose column holds another value are
            left out (counted in a warning).
        label_aliases: (spelling, class name) pairs read as that class.
        label_range: (low, high) a regression target must lie in.
    """

    description: str
    text: int
    text_pair: Optional[int]
    label: int
    header: Optional[tuple[str, ...]] = None
    has_header: bool = True
    quoting: str = "none"
    index: Optional[int] = None
    skip_empty_texts: bool = False
    keep: Optional[tuple[int, str]] = None
    label_aliases: tuple[tuple[str, str], ...] = ()
    label_range: Optional[tuple[float, float]] = None

    def columns_needed(self, labelled: bool) -> int:
        """How many columns a row must have."""
        used = [self.text, self.text_pair, self.label if labelled else None, self.index]
        if self.keep is not None:
            used.append(self.keep[0])
        return 1 + max(c for c in used if c is not None)


@dataclasses.dataclass(frozen=True)
class JsonLayout:
    """Where the objects of a distributed JSON-array file keep their texts and label.

    Attributes:
        description: the layout in words, for messages.
        text: key of the first text.
        text_pair: key of the second text (None: single-text task).
        label: keys leading to the label (`("labels", "real-label")`).
        index: key of the example id written with predictions (None: the
            object's number).
        label_range: (low, high) a regression target must lie in.
        marked_entities: keys of the subject and the object (objects with
            `start_idx` and `end_idx`, character offsets into `text`, the end
            included) whose spans are marked in the text (`mark_entity_spans`);
            None: the text is read as it is.
    """

    description: str
    text: str
    text_pair: Optional[str]
    label: tuple[str, ...]
    index: Optional[str] = None
    label_range: Optional[tuple[float, float]] = None
    marked_entities: Optional[tuple[str, str]] = None


# KLUE-baseline's markers around the subject and the object of a relation.
SUBJECT_MARKERS = ("<subj>", "</subj>")
OBJECT_MARKERS = ("<obj>", "</obj>")


def mark_entity_spans(text: str, subject: tuple[int, int], obj: tuple[int, int]) -> str:
    """The text with `<subj>...</subj>` and `<obj>...</obj>` around the two spans.

    Spans are (start, end) character offsets, the end included. The span
    that starts first (compared as pairs, as KLUE-baseline compares them) is
    marked first; the text between the two is kept as it is.

    Raises:
        ValueError: the two spans are the same.
    """
    if subject == obj:
        raise ValueError("the subject and the object are the same span")
    first, second = sorted(((subject, SUBJECT_MARKERS), (obj, OBJECT_MARKERS)))
    (start_1, end_1), (open_1, close_1) = first
    (start_2, end_2), (open_2, close_2) = second
    return "".join(
        (
            text[:start_1],
            open_1,
            text[start_1 : end_1 + 1],
            close_1,
            text[end_1 + 1 : start_2],
            open_2,
            text[start_2 : end_2 + 1],
            close_2,
            text[end_2 + 1 :],
        )
    )


def _label_value(task: Task, layout: JsonLayout, value, refuse, line: int):
    """A label's class id, or a regression target, checked against the task and the layout."""
    if task.task_type == REGRESSION:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise refuse(line, f"score {value!r} is not a number") from None
        if layout.label_range and not (layout.label_range[0] <= number <= layout.label_range[1]):
            low, high = layout.label_range
            raise refuse(line, f"score {number} is outside {low:g}-{high:g}")
        return number
    text = str(value).strip()
    if text not in task.label_names:
        raise refuse(line, f"label {value!r} is none of {', '.join(task.label_names)}")
    return task.label_names.index(text)


def read_json_table(
    path: str, layout: JsonLayout, task: Task, name: str, labelled: bool = True
) -> Split:
    """Reads one JSON-array benchmark file in `layout` into a split of `task`.

    Raises:
        TaskDataError: not a JSON array of objects, an object without a
            key of the layout or whose text is not a string, an unknown
            label, a regression target that is not a number or out of range.
    """

    def refuse(line: int, problem: str) -> TaskDataError:
        return TaskDataError(f"{path}, line {line}: {problem}; expected {layout.description}.")

    def field(record: dict, keys: tuple, line: int):
        value = record
        for key in keys:
            if not isinstance(value, dict) or key not in value:
                raise refuse(line, f"no {'.'.join(keys)!r}")
            value = value[key]
        return value

    def text(record: dict, key: str, line: int) -> str:
        value = field(record, (key,), line)
        if not isinstance(value, str):
            raise refuse(line, f"{key!r} is {type(value).__name__}, not a string")
        return value

    def span(record: dict, key: str, length: int, line: int) -> tuple[int, int]:
        bounds = tuple(field(record, (key, end), line) for end in ("start_idx", "end_idx"))
        if not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds):
            raise refuse(line, f"{key}.start_idx and end_idx must be integers, not {bounds}")
        if not 0 <= bounds[0] <= bounds[1] < length:
            raise refuse(
                line, f"{key} spans characters {bounds[0]}-{bounds[1]} of a {length}-character text"
            )
        return bounds

    def first_text(record: dict, line: int) -> str:
        value = text(record, layout.text, line)
        if layout.marked_entities is None:
            return value
        subject, obj = (span(record, key, len(value), line) for key in layout.marked_entities)
        if subject == obj:
            raise refuse(line, f"{' and '.join(layout.marked_entities)} are the same span")
        return mark_entity_spans(value, subject, obj)

    texts_a, texts_b, labels, indices = [], [], [], []
    for line, record in iter_array_objects(path):
        texts_a.append(first_text(record, line))
        if layout.text_pair is not None:
            texts_b.append(text(record, layout.text_pair, line))
        if labelled:
            labels.append(
                _label_value(task, layout, field(record, layout.label, line), refuse, line)
            )
        index = field(record, (layout.index,), line) if layout.index else len(indices)
        indices.append(str(index))
    if not texts_a:
        raise TaskDataError(f"{path}: the array has no objects; expected {layout.description}.")
    label_array = None
    if labelled:
        dtype = np.float64 if task.task_type == REGRESSION else np.int64
        label_array = np.asarray(labels, dtype=dtype)
    return Split(
        name,
        path,
        texts_a,
        texts_b if layout.text_pair is not None else None,
        label_array,
        indices,
    )


def read_table(
    path: str, layout, task: Task, name: str, labelled: bool = True, warn=print
) -> Split:
    """Reads one benchmark file in `layout` into a split of `task`.

    Args:
        path: the file.
        layout: where its texts and label are (a `TableLayout`, or a
            `JsonLayout` for a JSON-array file).
        task: the task (its label names, or regression).
        name: the split's name (`train`, `dev`, ...).
        labelled: read the label column (False: a test file without one).
        warn: prints a warning (rows left out, rows with too few columns).

    Raises:
        TaskDataError: a missing file, invalid UTF-8, a header other than
            the layout's, an unknown label, a regression target that is not
            a number or out of range, or no usable row.
    """
    if isinstance(layout, JsonLayout):
        return read_json_table(path, layout, task, name, labelled)
    header, rows = read_delimited(path, "\t", layout.quoting, has_header=layout.has_header)

    def refuse(line: int, problem: str) -> TaskDataError:
        return TaskDataError(f"{path}, line {line}: {problem}; expected {layout.description}.")

    if layout.header is not None and tuple(header or ()) != layout.header:
        shown = "<TAB>".join(header or ())
        raise refuse(1, f"the header is {shown!r}")
    aliases = dict(layout.label_aliases)
    needed = layout.columns_needed(labelled)
    texts_a, texts_b, labels, indices = [], [], [], []
    short, dropped, empty = [], 0, 0
    for line, fields in rows:
        if len(fields) < needed:
            short.append(line)
            continue
        if layout.keep is not None and fields[layout.keep[0]].strip() != layout.keep[1]:
            dropped += 1
            continue
        a = fields[layout.text]
        b = fields[layout.text_pair] if layout.text_pair is not None else None
        if layout.skip_empty_texts and (a == "" or b == ""):
            empty += 1
            continue
        if labelled:
            raw = fields[layout.label]
            text = raw.strip()
            if task.task_type == REGRESSION:
                try:
                    value = float(text)
                except ValueError:
                    raise refuse(line, f"score {text!r} is not a number") from None
                if layout.label_range and not (
                    layout.label_range[0] <= value <= layout.label_range[1]
                ):
                    low, high = layout.label_range
                    raise refuse(line, f"score {value} is outside {low:g}-{high:g}")
                labels.append(value)
            else:
                text = aliases.get(text, text)
                if text not in task.label_names:
                    raise refuse(
                        line,
                        f"label {raw!r} is none of {', '.join(task.label_names)}",
                    )
                labels.append(task.label_names.index(text))
        texts_a.append(a)
        if b is not None:
            texts_b.append(b)
        indices.append(fields[layout.index] if layout.index is not None else str(len(indices)))
    if short:
        warn(
            f"Warning: {path}: skipped {len(short)} row(s) with fewer than {needed} columns "
            f"(first: line {short[0]})."
        )
    if dropped:
        column, value = layout.keep
        warn(
            f"Warning: {path}: kept the rows whose column {column + 1} is {value!r}; "
            f"{dropped} other row(s) left out."
        )
    if empty:
        warn(f"Warning: {path}: left out {empty} row(s) with an empty sentence, as KoELECTRA does.")
    if not texts_a:
        raise TaskDataError(f"{path}: no usable rows; expected {layout.description}.")
    label_array = None
    if labelled:
        dtype = np.float64 if task.task_type == REGRESSION else np.int64
        label_array = np.asarray(labels, dtype=dtype)
    return Split(
        name,
        path,
        texts_a,
        texts_b if layout.text_pair is not None else None,
        label_array,
        indices,
    )
