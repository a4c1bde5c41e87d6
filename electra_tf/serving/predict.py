"""Texts from a file -> one JSON line of outputs per text, from a server or an export.

The command is `python -m electra_tf.commands.predict`. Input formats (by
extension): `.txt` one text per line; `.tsv` a text, or a text and its pair,
per line (tab-separated, no header); `.jsonl` objects with `text` (and
`text_pair`), or with the inputs another kind's raw-text signature takes
(`TaskKind.REQUEST_FIELDS`: `question` and `context` for question answering;
a tagger takes `text` and returns one tag per word, cut to the example's
words). A batch the server rejects is retried one example at a
time, so only the examples at fault get an `"error"` field in their output
line and all others are still predicted.
"""

from __future__ import annotations

import json
import os
from typing import Iterator

import numpy as np

from electra_tf.bounded_lines import bounded_byte_lines
from electra_tf.finetuning.kind.files import MAX_ROW_CHARS
from electra_tf.finetuning.kinds import TASK_KINDS
from electra_tf.serving.client import DEFAULT_SIGNATURE, ServingError


class InputError(ValueError):
    """The input file cannot be read; the message names the file and line."""


# Request fields a line may leave out (a single text has no pair).
OPTIONAL_REQUEST_FIELDS = frozenset({"text_pair"})


def _request(row, path: str, number: int) -> dict:
    """The request of one JSON line: the inputs of the kind whose `REQUEST_FIELDS` it fits.

    A row fits a kind when it has the kind's first field; of those, the kind
    with the most of its fields in the row is taken (the fewest fields on a
    tie: a question and a context are a question-answering request, with
    `options` too a multiple-choice one). Values are strings or lists of strings.
    """
    field_sets = list(dict.fromkeys(kind.REQUEST_FIELDS for kind in TASK_KINDS))
    fitting = [f for f in field_sets if isinstance(row, dict) and f[0] in row]
    if not fitting:
        expected = " or ".join("{" + ", ".join(f'"{n}"' for n in f) + "}" for f in field_sets)
        raise InputError(f"{path} line {number}: needs the fields of a request: {expected}.")
    fields = max(fitting, key=lambda f: (sum(n in row for n in f), -len(f)))
    missing = [n for n in fields if n not in row and n not in OPTIONAL_REQUEST_FIELDS]
    if missing:
        raise InputError(
            f"{path} line {number}: a request with "
            + ", ".join(f'"{n}"' for n in fields if n in row)
            + " also needs "
            + ", ".join(f'"{n}"' for n in missing)
            + "."
        )
    example = {}
    for name in fields:
        if name not in row:
            continue
        value = row[name]
        if not isinstance(value, str) and not (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
        ):
            raise InputError(
                f'{path} line {number}: field "{name}" must be a string or a list of strings.'
            )
        example[name] = value
    return example


def read_examples(path: str) -> Iterator[dict]:
    """Yields `{"text": ..., ["text_pair": ...]}` per line (strings; bytes if not UTF-8),
    or, for JSON lines, the fields of a task kind's request (`_request`)."""
    extension = os.path.splitext(path)[1].lower()
    if not os.path.isfile(path):
        raise InputError(f"--input={path}: no such file.")
    with open(path, "rb") as f:
        # A line is read at most MAX_ROW_CHARS characters at a time: a file of one
        # huge line is refused, not held in memory.
        lines = bounded_byte_lines(f, path, MAX_ROW_CHARS, "--max_row_chars", InputError)
        for number, raw in lines:
            raw = raw.rstrip(b"\r\n")
            if extension == ".jsonl":
                if not raw.strip():
                    continue
                try:
                    row = json.loads(raw)
                except ValueError as error:
                    raise InputError(f"{path} line {number}: not JSON ({error}).") from None
                yield _request(row, path, number)
                continue
            # Invalid UTF-8 is passed on as bytes: the model drops such bytes itself.
            fields = raw.split(b"\t") if extension == ".tsv" else [raw]
            if len(fields) > 2:
                raise InputError(
                    f"{path} line {number}: {len(fields)} tab-separated fields; "
                    "expected a text or a text and its pair."
                )

            def text(value):
                try:
                    return value.decode("utf-8")
                except UnicodeDecodeError:
                    return value

            example = {"text": text(fields[0])}
            if len(fields) == 2:
                example["text_pair"] = text(fields[1])
            yield example


def _jsonable(value):
    if isinstance(value, np.ndarray):
        return [_jsonable(v) for v in value] if value.ndim else _jsonable(value.item())
    if isinstance(value, (bytes, np.bytes_)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, np.generic):
        return value.item()
    return value


def _display(example: dict) -> dict:
    return {
        k: v.decode("utf-8", "replace") if isinstance(v, bytes) else v for k, v in example.items()
    }


def predict_batch(client, batch: list[dict], signature_name: str) -> list[dict]:
    """Outputs per example; a rejected batch is retried example by example."""
    names = list(batch[0])
    if any(list(example) != names for example in batch):
        raise InputError(f"every example of a file must have the same fields ({', '.join(names)}).")
    try:
        outputs = client.predict(
            {n: _column([e[n] for e in batch], n) for n in names}, signature_name
        )
    except ServingError as error:
        if len(batch) == 1:
            return [{**_display(batch[0]), "error": str(error)}]
        return [
            row for example in batch for row in predict_batch(client, [example], signature_name)
        ]
    return [
        {**_display(example), **{k: _jsonable(v) for k, v in _example_outputs(outputs, i).items()}}
        for i, example in enumerate(batch)
    ]


def _column(values: list, name: str) -> list:
    """One input of a batch: lists (a question's options, a sentence's words) padded with ""."""
    lists = sum(isinstance(v, list) for v in values)
    if not lists:
        return values
    if lists != len(values):
        raise InputError(
            f'field "{name}" is a list in some lines and a string in others: every line of a '
            "file must give it the same way."
        )
    width = max(len(v) for v in values)
    return [list(v) + [""] * (width - len(v)) for v in values]


def _example_outputs(outputs: dict, i: int) -> dict:
    """Example i's outputs; a tagger's per-word outputs cut to its own words (`num_words`)."""
    row = {k: v[i] for k, v in outputs.items()}
    if "num_words" not in outputs:
        return row
    count, width = int(outputs["num_words"][i]), outputs["num_words"].max(initial=0)
    return {
        k: v[:count] if outputs[k].ndim >= 2 and outputs[k].shape[1] == width else v
        for k, v in row.items()
    }


def predict_file(
    client,
    input_path: str,
    output_path: str,
    batch_size: int = 32,
    signature_name: str = DEFAULT_SIGNATURE,
) -> tuple[int, int]:
    """Writes one JSON line per input line; returns (examples, errors).

    The output is written to a temporary file and renamed when complete.
    """
    if batch_size <= 0:
        raise InputError(f"--batch_size={batch_size}: must be positive.")
    tmp = f"{output_path}.tmp-{os.getpid()}"
    count = errors = 0
    try:
        with open(tmp, "w", encoding="utf-8") as out:
            batch: list[dict] = []

            def flush():
                nonlocal count, errors
                for row in predict_batch(client, batch, signature_name):
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
                    count += 1
                    errors += "error" in row
                batch.clear()

            for example in read_examples(input_path):
                batch.append(example)
                if len(batch) == batch_size:
                    flush()
            if batch:
                flush()
        os.replace(tmp, output_path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return count, errors
