"""Benchmark files of one JSON object per line, read by their field names; leaderboard submissions.

CLUE distributes its classification tasks as JSON lines whose fields each
task names its own way (`{"sentence": ..., "label": "102", "label_desc":
...}` for TNEWS, `{"sentence1", "sentence2", "label"}` for AFQMC and the
NLI tasks); its baselines read one object per line and take the named
fields (`baselines/models/classifier_utils.py`). A `JsonLinesLayout` says
the same for one file: which fields hold the texts and the label, and the
labels whose rows are left out (`-`: the NLI pairs whose annotators did
not agree, which CLUE's CMNLI and OCNLI readers drop).

Every refusal is one line naming the file, the line and the layout
expected; a line longer than `MAX_ROW_CHARS` is refused before it is
parsed, so an untrusted file cannot exhaust memory. Example ids are the
objects' positions in the file, counting from 0 (rows left out keep their
number), as CLUE's baselines number the examples of a submission.

`write_submission` writes test predictions as CLUE's leaderboard takes
them: one `{"id": <position>, "label": "<class name>"}` object per line
(`baselines/models/bert/run_classifier.py`, `do_predict`).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Optional

import numpy as np

from electra_tf.artifacts.files import atomic_open
from electra_tf.finetuning.classification.data import REGRESSION, Split, Task
from electra_tf.finetuning.kind.files import MAX_ROW_CHARS, TaskDataError


@dataclasses.dataclass(frozen=True)
class JsonLinesLayout:
    """Where the objects of a distributed JSON-lines file keep their texts and label.

    Attributes:
        description: the layout in words, for messages.
        text: the field of the first text.
        text_pair: the field of the second text (None: single-text task).
        label: the field of the label (a string or a number).
        skip_labels: labels whose rows are left out (counted in a warning).
    """

    description: str
    text: str
    text_pair: Optional[str]
    label: str
    skip_labels: tuple[str, ...] = ()


def _label_text(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _lines(path: str, refuse):
    """(line number, object) of every non-blank line, each at most `MAX_ROW_CHARS` long."""
    try:
        f = open(path, encoding="utf-8-sig")
    except FileNotFoundError:
        raise TaskDataError(f"{path}: no such file.") from None
    with f:
        number = 0
        while True:
            try:
                line = f.readline(MAX_ROW_CHARS + 1)
            except UnicodeDecodeError as error:
                raise TaskDataError(
                    f"{path}, line {number + 1}: not valid UTF-8 ({error.reason})."
                ) from None
            if not line:
                return
            number += 1
            if len(line) > MAX_ROW_CHARS and not line.endswith("\n"):
                raise refuse(number, f"the line is longer than {MAX_ROW_CHARS:,} characters")
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise refuse(number, f"not valid JSON ({error.msg} at column {error.colno})")
            if not isinstance(record, dict):
                raise refuse(number, f"a JSON {type(record).__name__}, not an object")
            yield number, record


def read_json_lines(
    path: str,
    layout: JsonLinesLayout,
    task: Task,
    name: str,
    labelled: bool = True,
    warn=print,
) -> Split:
    """Reads one benchmark file of JSON lines in `layout` into a split of `task`.

    Args:
        path: the file.
        layout: which fields hold the texts and the label.
        task: the task (its label names).
        name: the split's name (`train`, `dev`, `test`).
        labelled: read the label field (False: a test file without one).
        warn: prints a warning (rows left out for their label).

    Raises:
        TaskDataError: a missing file, invalid UTF-8 or JSON, a line that is
            not an object or lacks a field, a text that is not a string, an
            unknown label, or no usable row.
    """

    def refuse(line: int, problem: str) -> TaskDataError:
        return TaskDataError(f"{path}, line {line}: {problem}; expected {layout.description}.")

    fields = [layout.text] + ([layout.text_pair] if layout.text_pair else [])
    texts_a, texts_b, labels, indices = [], [], [], []
    skipped, position = 0, -1
    for line, record in _lines(path, refuse):
        position += 1
        for field in fields + ([layout.label] if labelled else []):
            if field not in record:
                raise refuse(line, f"no {field!r} field")
        texts = [record[field] for field in fields]
        if not all(isinstance(text, str) for text in texts):
            raise refuse(line, f"{' and '.join(repr(f) for f in fields)} must be strings")
        if labelled:
            label = _label_text(record[layout.label])
            if label in layout.skip_labels:
                skipped += 1
                continue
            if task.task_type == REGRESSION:
                raise refuse(line, "regression targets are not read from JSON lines")
            if label not in task.label_names:
                raise refuse(line, f"label {label!r} is none of {', '.join(task.label_names)}")
            labels.append(task.label_names.index(label))
        texts_a.append(texts[0])
        if layout.text_pair:
            texts_b.append(texts[1])
        indices.append(str(position))
    if skipped:
        warn(
            f"Warning: {path}: left out {skipped} row(s) labelled "
            f"{' or '.join(repr(s) for s in layout.skip_labels)}, as CLUE's readers do."
        )
    if not texts_a:
        raise TaskDataError(f"{path}: no usable rows; expected {layout.description}.")
    return Split(
        name,
        path,
        texts_a,
        texts_b if layout.text_pair else None,
        np.asarray(labels, np.int64) if labelled else None,
        indices,
    )


def write_submission(path: str, split: Split, predictions: np.ndarray, task: Task) -> None:
    """CLUE's submission lines: `{"id": <position in the test file>, "label": "<name>"}`."""
    with atomic_open(path) as f:
        for index, value in zip(split.indices, predictions):
            record = {"id": int(index), "label": task.label_names[int(value)]}
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
