"""Multiple-choice reading comprehension data: C3's JSON files as they are distributed.

C3 (`c3-d-*.json`, `c3-m-*.json`) is a JSON array of documents, each

    [[context line, ...], [{"question": ..., "choice": [option, ...],
                            "answer": <the text of the right option>}, ...], "<document id>"]

A document's questions share its context: its lines joined by a line
feed, as the C3 baselines join them. A question has two options or more;
its answer is the text of exactly one of them (test files may leave the
answer out). An option may not be empty: a served request marks a missing
option with an empty string. Any other layout is refused with one line
naming the file, the document and question positions (0-based, as in the
JSON array) and the layout expected.

Questions are identified as `<document id>-<question position>` (e.g.
`25-35-0`), the index of the prediction files.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Optional

import numpy as np

from electra_tf.finetuning.kind.files import TaskDataError, draw_rows

MULTIPLE_CHOICE = "multiple_choice"
# How a document's context lines are joined into one text.
LINE_JOIN = "\n"
# A file larger than this is refused before it is parsed: Python's JSON
# parser holds about ten times the file's size while it reads it.
MAX_FILE_BYTES = 1 << 29
LAYOUT = (
    'C3\'s layout: a JSON array of documents [[context lines...], [{"question": text, '
    '"choice": [2 or more non-empty options], "answer": the text of one option}...], '
    '"<document id>"]'
)


class MultipleChoiceDataError(TaskDataError):
    """A multiple-choice file cannot be read; the message names the file, the position
    and the layout expected."""


@dataclasses.dataclass
class MultipleChoiceDefinition:
    """What a multiple-choice task learns and how it is scored.

    Attributes:
        name: the task's name (`c3`, or the user's).
        metrics: the dev metrics (accuracy: the right option picked).
        primary_metric: what trials are compared by.
        num_train_epochs: default training length.
    """

    name: str
    metrics: tuple[str, ...] = ("accuracy",)
    primary_metric: str = "accuracy"
    num_train_epochs: float = 3.0
    task_type: str = dataclasses.field(default=MULTIPLE_CHOICE, init=False)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "task_type": self.task_type,
            "metrics": list(self.metrics),
            "primary_metric": self.primary_metric,
            "num_train_epochs": self.num_train_epochs,
        }

    @classmethod
    def from_dict(cls, data: dict) -> "MultipleChoiceDefinition":
        data = {k: v for k, v in data.items() if k != "task_type"}
        data["metrics"] = tuple(data["metrics"])
        return cls(**data)


@dataclasses.dataclass
class ChoiceSplit:
    """The questions of one or more files.

    Attributes:
        source: the file(s), for messages.
        indices: N question ids, `<document id>-<question position>`.
        contexts: N contexts (the document's lines joined by `LINE_JOIN`).
        questions: N question texts.
        options: N lists of 2 or more option texts.
        answers: int64 [N] position of the right option; None when the
            split has no answers (a test file).
    """

    source: str
    indices: list[str]
    contexts: list[str]
    questions: list[str]
    options: list[list[str]]
    answers: Optional[np.ndarray]

    def __len__(self) -> int:
        return len(self.questions)

    @property
    def max_options(self) -> int:
        """The most options any question has."""
        return max(len(o) for o in self.options)

    def sample(self, count: int, seed: int = 0) -> "ChoiceSplit":
        """`count` questions drawn without replacement (the same draw for every run)."""
        return draw_rows(
            self, count, seed, ("indices", "contexts", "questions", "options", "answers")
        )

    @classmethod
    def concatenate(cls, splits: list["ChoiceSplit"]) -> "ChoiceSplit":
        """The questions of `splits`, one after another."""
        labelled = all(s.answers is not None for s in splits)
        return cls(
            ",".join(s.source for s in splits),
            [i for s in splits for i in s.indices],
            [c for s in splits for c in s.contexts],
            [q for s in splits for q in s.questions],
            [o for s in splits for o in s.options],
            np.concatenate([s.answers for s in splits]) if labelled else None,
        )


@dataclasses.dataclass
class ChoiceData:
    """Train, dev and test questions (dev and test may be None)."""

    train: ChoiceSplit
    dev: Optional[ChoiceSplit] = None
    test: Optional[ChoiceSplit] = None


def _refuse(path: str, where: str, problem: str) -> MultipleChoiceDataError:
    place = f"{path}, {where}" if where else path
    return MultipleChoiceDataError(f"{place}: {problem} (expected {LAYOUT}).")


def _load_json(path: str):
    if not os.path.isfile(path):
        raise MultipleChoiceDataError(f"{path}: no such file.")
    size = os.path.getsize(path)
    if size > MAX_FILE_BYTES:
        raise MultipleChoiceDataError(
            f"{path}: {size:,} bytes; a multiple-choice file is read whole, at most "
            f"{MAX_FILE_BYTES:,} bytes (split it and give the parts comma-separated)."
        )
    try:
        with open(path, encoding="utf-8-sig") as f:
            return json.load(f)
    except UnicodeDecodeError as error:
        raise MultipleChoiceDataError(
            f"{path}: not valid UTF-8 (byte offset {error.start}: {error.reason})."
        ) from None
    except json.JSONDecodeError as error:
        raise MultipleChoiceDataError(
            f"{path}, line {error.lineno}: not valid JSON ({error.msg} at column {error.colno})."
        ) from None


def _type_name(value) -> str:
    return {dict: "an object", list: "an array", str: "a string"}.get(
        type(value), type(value).__name__
    )


def read_c3(path: str, labelled: bool = True) -> ChoiceSplit:
    """The questions of one file in C3's layout (see the module docstring).

    Args:
        path: the JSON file.
        labelled: every question must have its answer (train and dev);
            otherwise answers may be absent (and are not read).

    Raises:
        MultipleChoiceDataError: the file is missing, not JSON or not in the
            layout, naming the document and question at fault.
    """
    documents = _load_json(path)
    if not isinstance(documents, list):
        raise _refuse(path, "", f"the top level is {_type_name(documents)}")
    if not documents:
        raise _refuse(path, "", "no documents")
    indices, contexts, questions, options, answers = [], [], [], [], []
    for d, document in enumerate(documents):
        where = f"document [{d}]"
        if not (isinstance(document, list) and len(document) == 3):
            raise _refuse(path, where, "not an array of 3 items")
        lines, items, doc_id = document
        if not isinstance(doc_id, str):
            raise _refuse(path, where, f"the document id is {_type_name(doc_id)}, not a string")
        where = f"document [{d}] ({doc_id!r})"
        if not (isinstance(lines, list) and all(isinstance(x, str) for x in lines)):
            raise _refuse(path, where, "the context is not an array of strings")
        if not (isinstance(items, list) and items):
            raise _refuse(path, where, "the questions are not a non-empty array")
        context = LINE_JOIN.join(lines)
        for q, item in enumerate(items):
            at = f"{where}, question [{q}]"
            if not isinstance(item, dict):
                raise _refuse(path, at, f"{_type_name(item)}, not an object")
            question, choices = item.get("question"), item.get("choice")
            if not isinstance(question, str):
                raise _refuse(path, at, "no string 'question'")
            if not (isinstance(choices, list) and all(isinstance(c, str) for c in choices)):
                raise _refuse(path, at, "no array of strings 'choice'")
            if len(choices) < 2:
                raise _refuse(path, at, f"{len(choices)} option(s); a question needs 2 or more")
            empty = [i for i, c in enumerate(choices) if not c]
            if empty:
                raise _refuse(path, at, f"option [{empty[0]}] is empty")
            answer = item.get("answer")
            # An unlabelled file may leave the answer out or empty (C3's test files).
            if labelled or answer not in (None, ""):
                if not isinstance(answer, str):
                    raise _refuse(path, at, "no string 'answer'")
                matches = [i for i, c in enumerate(choices) if c == answer]
                if len(matches) != 1:
                    found = "none" if not matches else f"options {matches}"
                    raise _refuse(
                        path,
                        at,
                        f"the answer {answer!r} must be the text of exactly one option; "
                        f"it is {found} of {choices}",
                    )
                answers.append(matches[0])
            indices.append(f"{doc_id}-{q}")
            contexts.append(context)
            questions.append(question)
            options.append(list(choices))
    return ChoiceSplit(
        path,
        indices,
        contexts,
        questions,
        options,
        np.asarray(answers, np.int64) if labelled else None,
    )


def read_files(paths: str, labelled: bool = True, unique_ids: bool = True) -> ChoiceSplit:
    """The questions of comma-separated files (e.g. `c3-d-train.json,c3-m-train.json`).

    Args:
        paths: one file, or several separated by commas.
        labelled: see `read_c3`.
        unique_ids: refuse two questions with the same id (the files whose
            predictions are written: dev and test).

    Raises:
        MultipleChoiceDataError: a file cannot be read, or (`unique_ids`)
            two questions have the same id.
    """
    names = [p.strip() for p in paths.split(",") if p.strip()]
    if not names:
        raise MultipleChoiceDataError(f"{paths!r}: no file named.")
    splits = [read_c3(name, labelled) for name in names]
    seen: dict[str, str] = {}
    for split in splits if unique_ids else ():
        for index in split.indices:
            if index in seen:
                raise MultipleChoiceDataError(
                    f"{split.source}: question {index!r} is also in {seen[index]}; "
                    "each question id (<document id>-<question position>) must be unique."
                )
            seen[index] = split.source
    return ChoiceSplit.concatenate(splits)
