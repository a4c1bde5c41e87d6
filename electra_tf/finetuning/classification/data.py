"""Fine-tuning tasks: the GLUE tasks of the paper and the user's own files.

Three sources of examples:

* a local directory in the GLUE layout (`<data_dir>/SST-2/train.tsv`, ...),
  read as tab-separated text with no quote character, like the original
  readers (GLUE sentences contain unbalanced quotes);
* TensorFlow Datasets (`glue/sst2`, ...), already prepared on disk
  (`tfds.load(..., download=False)`);
* the user's CSV / TSV / JSONL files with named columns. These are read with
  standard CSV quoting by default, so a field wrapped in double quotes may
  contain tabs, newlines and doubled quotes (the NSMC corpus is written that
  way); `quoting="none"` reads them like GLUE. A `.json` / `.jsonl` file
  whose first character is `[` holds one JSON array of objects (KLUE's
  files) and is read like JSON lines, one object at a time
  (`json_arrays`).

Every reading error names the file, the line and, where it applies, the
column or label at fault.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import sys
from typing import Optional, Sequence

import numpy as np

from electra_tf.bounded_lines import bounded_lines, first_invalid_utf8
from electra_tf.finetuning.classification.json_arrays import (
    iter_array_objects,
    starts_with_array,
)
from electra_tf.finetuning.kind.files import (
    MAX_ROW_CHARS,
    QUOTINGS,
    FileTaskOptions,
    TaskDataError,
    draw_rows,
)

CLASSIFICATION = "classification"
REGRESSION = "regression"


@dataclasses.dataclass
class Task:
    """What is learned and how it is scored.

    Attributes:
        name: task name (`sst2`, ... or the user's).
        task_type: `classification` or `regression`.
        label_names: class names, index = class id (None for regression).
        metrics: metric names computed on every dev split (see `metrics.py`).
        glue_score_metric: the metric the paper reports for this task.
        is_pair: whether examples have a second text.
        num_train_epochs: default training length.
        label_scale: regression targets are divided by it for training and
            predictions multiplied by it (5 for STS-B, as in the original).
    """

    name: str
    task_type: str
    label_names: Optional[list[str]]
    metrics: tuple[str, ...]
    glue_score_metric: str
    is_pair: bool
    num_train_epochs: float = 3.0
    label_scale: float = 1.0

    @property
    def primary_metric(self) -> str:
        """The metric trials are compared by: the one the paper reports."""
        return self.glue_score_metric

    @property
    def num_outputs(self) -> int:
        return 1 if self.task_type == REGRESSION else len(self.label_names)

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["metrics"] = list(self.metrics)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "Task":
        data = dict(data)
        data["metrics"] = tuple(data["metrics"])
        return cls(**data)


@dataclasses.dataclass
class Split:
    """The examples of one file or TFDS split.

    Attributes:
        name: `train`, `dev`, `dev_mismatched`, `test`, ...
        source: file path or TFDS name, for messages.
        texts_a: N first texts.
        texts_b: N second texts, or None.
        labels: [N] int64 class ids or float64 targets (unscaled); None when
            the split is unlabelled (test).
        indices: N example ids written into prediction files.
    """

    name: str
    source: str
    texts_a: list[str]
    texts_b: Optional[list[str]]
    labels: Optional[np.ndarray]
    indices: list[str]

    def __len__(self) -> int:
        return len(self.texts_a)

    def sample(self, count: int, seed: int = 0) -> "Split":
        """`count` examples drawn without replacement (in their original order).

        The draw depends only on `seed` and the split's size, so runs that
        compare pre-trained models fine-tune on the same examples.
        """
        return draw_rows(self, count, seed, ("texts_a", "texts_b", "labels", "indices"))


@dataclasses.dataclass
class TaskData:
    """Train, dev and test splits of a task.

    Attributes:
        train: the training split.
        dev: evaluation splits by name (MNLI has `dev` = matched and
            `dev_mismatched`); metrics of a split other than `dev` get its
            suffix (`accuracy_mismatched`).
        test: unlabelled splits by the name of their GLUE submission file
            (`SST-2`, `MNLI-m`, ...).
    """

    train: Split
    dev: dict[str, Split]
    test: dict[str, Split]


@dataclasses.dataclass(frozen=True)
class _GlueSpec:
    directory: str
    submission: str
    label_names: Optional[tuple[str, ...]]
    metrics: tuple[str, ...]
    score: str
    # Column names in the header (CoLA's train/dev have no header: positions).
    text_a: str
    text_b: Optional[str]
    label: str
    tfds_name: str
    tfds_text: tuple[str, Optional[str]]
    epochs: float = 3.0
    label_scale: float = 1.0


_BINARY = ("0", "1")
_NLI2 = ("entailment", "not_entailment")
GLUE_SPECS: dict[str, _GlueSpec] = {
    "cola": _GlueSpec(
        "CoLA",
        "CoLA",
        _BINARY,
        ("mcc", "accuracy"),
        "mcc",
        "sentence",
        None,
        "label",
        "glue/cola",
        ("sentence", None),
    ),
    "sst2": _GlueSpec(
        "SST-2",
        "SST-2",
        _BINARY,
        ("accuracy",),
        "accuracy",
        "sentence",
        None,
        "label",
        "glue/sst2",
        ("sentence", None),
    ),
    "mrpc": _GlueSpec(
        "MRPC",
        "MRPC",
        _BINARY,
        ("accuracy", "f1"),
        "accuracy",
        "#1 String",
        "#2 String",
        "Quality",
        "glue/mrpc",
        ("sentence1", "sentence2"),
    ),
    "stsb": _GlueSpec(
        "STS-B",
        "STS-B",
        None,
        ("pearson", "spearman"),
        "spearman",
        "sentence1",
        "sentence2",
        "score",
        "glue/stsb",
        ("sentence1", "sentence2"),
        epochs=10.0,
        label_scale=5.0,
    ),
    "qqp": _GlueSpec(
        "QQP",
        "QQP",
        _BINARY,
        ("accuracy", "f1"),
        "accuracy",
        "question1",
        "question2",
        "is_duplicate",
        "glue/qqp",
        ("question1", "question2"),
    ),
    "mnli": _GlueSpec(
        "MNLI",
        "MNLI-m",
        ("contradiction", "entailment", "neutral"),
        ("accuracy",),
        "accuracy",
        "sentence1",
        "sentence2",
        "gold_label",
        "glue/mnli",
        ("premise", "hypothesis"),
    ),
    "qnli": _GlueSpec(
        "QNLI",
        "QNLI",
        _NLI2,
        ("accuracy",),
        "accuracy",
        "question",
        "sentence",
        "label",
        "glue/qnli",
        ("question", "sentence"),
    ),
    "rte": _GlueSpec(
        "RTE",
        "RTE",
        _NLI2,
        ("accuracy",),
        "accuracy",
        "sentence1",
        "sentence2",
        "label",
        "glue/rte",
        ("sentence1", "sentence2"),
        epochs=10.0,
    ),
}
GLUE_TASKS = tuple(GLUE_SPECS)
# CoLA train/dev columns: source, label, original mark, sentence.
_COLA_POSITIONS = {"label": 1, "sentence": 3}


def glue_task(name: str) -> Task:
    """The `Task` of a GLUE task name (`cola`, `sst2`, `mrpc`, `stsb`, `qqp`, `mnli`, `qnli`, `rte`)."""
    if name not in GLUE_SPECS:
        raise TaskDataError(
            f"--task={name!r}: choose one of {', '.join(GLUE_TASKS)}, or give "
            "--train_file for your own data."
        )
    spec = GLUE_SPECS[name]
    return Task(
        name=name,
        task_type=REGRESSION if spec.label_names is None else CLASSIFICATION,
        label_names=list(spec.label_names) if spec.label_names else None,
        metrics=spec.metrics,
        glue_score_metric=spec.score,
        is_pair=spec.text_b is not None,
        num_train_epochs=spec.epochs,
        label_scale=spec.label_scale,
    )


# ---------------------------------------------------------------------------
# Label handling shared by every reader.


def _parse_label(task: Task, value, where: str):
    if task.task_type == REGRESSION:
        try:
            return float(value)
        except (TypeError, ValueError):
            raise TaskDataError(f"{where}: label {value!r} is not a number (regression task).")
    text = _label_text(value)
    if text not in task.label_names:
        raise TaskDataError(
            f"{where}: unknown label {text!r}; the labels are "
            f"{', '.join(task.label_names)} (from the training data or --labels)."
        )
    return task.label_names.index(text)


def _label_text(value) -> str:
    # JSON may hold labels as numbers or booleans; compare them as text.
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _labels_array(task: Task, labels: list) -> np.ndarray:
    return np.asarray(labels, dtype=np.float64 if task.task_type == REGRESSION else np.int64)


# ---------------------------------------------------------------------------
# Delimited text files.


def _open_text(path: str):
    # utf-8-sig drops the byte-order mark GLUE's MRPC files start with.
    return open(path, encoding="utf-8-sig", newline="")


def _utf8_error(path: str) -> "TaskDataError":
    """The error naming the line and byte of the first invalid UTF-8 in `path`.

    Python decodes a text file block by block and reports positions within
    the block, so the file is scanned again, a block at a time, to find the line.
    """
    found = first_invalid_utf8(path)
    if found is None:
        return TaskDataError(f"{path}: not valid UTF-8.")
    return TaskDataError(
        f"{path}, line {found.line}: not valid UTF-8 (byte 0x{found.byte:02x} "
        f"at column {found.column}, byte offset {found.offset}: {found.reason})."
    )


class _RowTooLong(Exception):
    pass


class _BoundedLines:
    """The lines of a text file for `csv.reader`, at most `limit` characters per row.

    A line is read only up to the row's remaining budget, so an over-long
    line never reaches memory whole. `new_row` starts the next row's budget.
    """

    def __init__(self, file, limit: int):
        self.file = file
        self.limit = limit
        self.used = 0

    def new_row(self) -> None:
        self.used = 0

    def __iter__(self):
        return self

    def __next__(self) -> str:
        line = self.file.readline(self.limit - self.used + 1)
        if not line:
            raise StopIteration
        self.used += len(line)
        if self.used > self.limit:
            raise _RowTooLong
        return line


def read_delimited(
    path: str,
    delimiter: str = "\t",
    quoting: str = "none",
    has_header: bool = True,
    max_row_chars: int = MAX_ROW_CHARS,
) -> tuple[Optional[list[str]], list[tuple[int, list[str]]]]:
    """Reads a delimited text file.

    Args:
        path: the file.
        delimiter: field separator.
        quoting: `none` (every character is literal, the GLUE convention) or
            `csv` (standard CSV quoting with doubled quotes).
        has_header: whether the first non-blank row names the columns.
        max_row_chars: the longest row accepted, in characters (its fields,
            delimiters and line ends; `MAX_ROW_CHARS`): memory stays within
            the rows kept plus about 12 bytes per character of one row.

    Returns:
        (header or None, rows), each row as (1-based line number where it
        starts, fields). Blank lines are skipped.

    Raises:
        TaskDataError: missing file, invalid UTF-8, an unterminated quoted
            field, a row longer than `max_row_chars`, or no rows at all.
    """
    if not os.path.isfile(path):
        raise TaskDataError(f"{path}: no such file.")
    options = dict(delimiter=delimiter)
    if quoting == "none":
        options["quoting"] = csv.QUOTE_NONE
    elif quoting not in QUOTINGS:
        raise TaskDataError(f"--quoting={quoting!r}: choose {' or '.join(QUOTINGS)}.")
    rows: list[tuple[int, list[str]]] = []
    header = None
    line = 1
    # The csv module's own limit (128 KB by default) would refuse rows that
    # `max_row_chars` accepts; the lines it is given are bounded instead.
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    try:
        with _open_text(path) as f:
            lines = _BoundedLines(f, max_row_chars)
            reader = csv.reader(lines, strict=quoting == "csv", **options)
            for fields in reader:
                lines.new_row()
                start, line = line, reader.line_num + 1
                if not fields or (len(fields) == 1 and not fields[0].strip()):
                    continue
                if has_header and header is None:
                    header = [name.strip() for name in fields]
                    continue
                rows.append((start, fields))
    except UnicodeDecodeError:
        raise _utf8_error(path) from None
    except _RowTooLong:
        hint = (
            " (if a quote character opens a field that never closes, and quotes are plain "
            "text in this file, pass --quoting=none)"
            if quoting == "csv"
            else ""
        )
        raise TaskDataError(
            f"{path}, line {line}: the row is longer than --max_row_chars={max_row_chars:,} "
            f"characters{hint}; shorten that text or raise the limit."
        ) from None
    except csv.Error as error:
        raise TaskDataError(
            f"{path}, line {line}: {error}. A quote character opens a field "
            "that never closes; if quotes are plain text in this file, pass "
            "--quoting=none."
        )
    if not rows:
        raise TaskDataError(f"{path}: the file has no {'data rows' if has_header else 'rows'}.")
    return header, rows


def _column_index(header: list[str], name: str, path: str, flag: Optional[str] = None) -> int:
    if name not in header:
        origin = f" (--{flag})" if flag else ""
        raise TaskDataError(
            f"{path}: no column {name!r}{origin}; the columns are "
            f"{', '.join(repr(h) for h in header)}."
        )
    return header.index(name)


def _glue_tsv(
    task: Task, spec: _GlueSpec, path: str, split: str, labelled: bool, warn=print
) -> Split:
    cola_no_header = spec.directory == "CoLA" and labelled
    header, rows = read_delimited(path, "\t", "none", has_header=not cola_no_header)
    if cola_no_header:
        a_col, b_col, label_col, index_col = (
            _COLA_POSITIONS["sentence"],
            None,
            _COLA_POSITIONS["label"],
            None,
        )
    else:
        a_col = _column_index(header, spec.text_a, path)
        b_col = _column_index(header, spec.text_b, path) if spec.text_b else None
        label_col = _column_index(header, spec.label, path) if labelled else None
        index_col = None
        for name in ("index", "id"):
            if name in header:
                index_col = header.index(name)
                break
    needed = max(c for c in (a_col, b_col, label_col, index_col) if c is not None)
    texts_a, texts_b, labels, indices = [], [], [], []
    skipped = []
    for line, fields in rows:
        if len(fields) <= needed:
            skipped.append(line)  # the official QQP / MNLI files hold a few broken lines
            continue
        texts_a.append(fields[a_col])
        if b_col is not None:
            texts_b.append(fields[b_col])
        if labelled:
            labels.append(_parse_label(task, fields[label_col], f"{path}, line {line}"))
        indices.append(fields[index_col] if index_col is not None else str(len(indices)))
    if skipped:
        warn(
            f"Warning: {path}: skipped {len(skipped)} line(s) with too few columns "
            f"(first: line {skipped[0]})."
        )
    if not texts_a:
        raise TaskDataError(f"{path}: no usable rows.")
    return Split(
        split,
        path,
        texts_a,
        texts_b if b_col is not None else None,
        _labels_array(task, labels) if labelled else None,
        indices,
    )


def _evaluation_splits(task: Task, spec: _GlueSpec) -> tuple[dict, dict]:
    """Our names of a GLUE task's dev and test splits -> (GLUE file, TFDS split).

    MNLI has matched and mismatched halves of each; the test names are the
    submission files' (`MNLI-m`, `SST-2`, ...).
    """
    if task.name == "mnli":
        return (
            {
                "dev": ("dev_matched.tsv", "validation_matched"),
                "dev_mismatched": ("dev_mismatched.tsv", "validation_mismatched"),
            },
            {
                "MNLI-m": ("test_matched.tsv", "test_matched"),
                "MNLI-mm": ("test_mismatched.tsv", "test_mismatched"),
            },
        )
    return {"dev": ("dev.tsv", "validation")}, {spec.submission: ("test.tsv", "test")}


def load_glue_dir(task: Task, data_dir: str, warn=print) -> TaskData:
    """Reads a task from a directory in the GLUE layout.

    `data_dir` may be the GLUE root (holding `SST-2/`, ...) or the task's own
    folder. Missing test files are allowed (no predictions are written).

    Raises:
        TaskDataError: missing train/dev files or malformed content.
    """
    spec = GLUE_SPECS[task.name]
    folder = _glue_folder(spec, data_dir, "train.tsv")
    train = _glue_tsv(task, spec, os.path.join(folder, "train.tsv"), "train", True, warn)
    dev_splits, test_splits = _evaluation_splits(task, spec)
    dev = {
        name: _glue_tsv(task, spec, os.path.join(folder, file), name, True, warn)
        for name, (file, _) in dev_splits.items()
    }
    test = {
        name: _glue_tsv(task, spec, os.path.join(folder, file), "test", False, warn)
        for name, (file, _) in test_splits.items()
        if os.path.isfile(os.path.join(folder, file))
    }
    return TaskData(train, dev, test)


def read_glue_dev(task: Task, data_dir: str, warn=print) -> Split:
    """The (matched) dev split of a GLUE task alone, for a task whose train.tsv is absent.

    Raises:
        TaskDataError: a missing dev file or malformed content.
    """
    spec = GLUE_SPECS[task.name]
    name = "dev_matched.tsv" if task.name == "mnli" else "dev.tsv"
    return _glue_tsv(
        task, spec, os.path.join(_glue_folder(spec, data_dir, name), name), "dev", True, warn
    )


def _glue_folder(spec: _GlueSpec, data_dir: str, expected: str) -> str:
    """The task's folder: `data_dir`/<task>/, or `data_dir` itself when it holds `expected`."""
    folder = os.path.join(data_dir, spec.directory)
    if os.path.isdir(folder):
        return folder
    if os.path.isfile(os.path.join(data_dir, expected)):
        return data_dir
    raise TaskDataError(
        f"--data_dir={data_dir}: no {spec.directory}/ folder (expected "
        f"{os.path.join(data_dir, spec.directory, expected)})."
    )


# ---------------------------------------------------------------------------
# TensorFlow Datasets.


def load_tfds(task: Task, tfds_data_dir: Optional[str] = None) -> TaskData:
    """Reads a GLUE task prepared by TensorFlow Datasets (no download is attempted).

    Raises:
        TaskDataError: the dataset is not prepared under `tfds_data_dir`.
    """
    import tensorflow_datasets as tfds

    spec = GLUE_SPECS[task.name]
    dev_splits, test_splits = _evaluation_splits(task, spec)
    wanted = {
        "train": "train",
        **{name: tfds_split for name, (_, tfds_split) in {**dev_splits, **test_splits}.items()},
    }
    try:
        loaded, info = tfds.load(
            spec.tfds_name,
            split=list(wanted.values()),
            download=False,
            data_dir=tfds_data_dir,
            with_info=True,
        )
    except (AssertionError, FileNotFoundError, tfds.core.registered.DatasetNotFoundError) as error:
        where = tfds_data_dir or "the default TFDS directory"
        raise TaskDataError(
            f"TFDS dataset {spec.tfds_name} is not prepared in {where} ({error.__class__.__name__})."
            f" Pass --data_dir=<GLUE folder> to read the GLUE TSV files instead, or prepare it "
            f"once with tfds.builder('{spec.tfds_name}').download_and_prepare() "
            "(and --tfds_data_dir if it is not in the default place)."
        ) from None
    label_map = None
    if task.task_type == CLASSIFICATION:
        tfds_names = list(info.features["label"].names)
        # Same names (NLI tasks, in a different order): map by name; otherwise
        # (0/1 tasks named e.g. negative/positive) the ids already agree.
        if set(tfds_names) <= set(task.label_names):
            label_map = np.array([task.label_names.index(n) for n in tfds_names], np.int64)
    splits = {}
    for (name, tfds_split), dataset in zip(wanted.items(), loaded):
        source = f"tfds:{spec.tfds_name}/{tfds_split}"
        a_key, b_key = spec.tfds_text
        texts_a, texts_b, labels, indices = [], [], [], []
        for row in tfds.as_numpy(dataset):
            texts_a.append(row[a_key].decode("utf-8"))
            if b_key:
                texts_b.append(row[b_key].decode("utf-8"))
            labels.append(row["label"])
            indices.append(str(int(row["idx"])))
        labelled = name in ("train",) or name in dev_splits
        label_array = None
        if labelled:
            label_array = _labels_array(task, labels)
            if task.task_type == CLASSIFICATION:
                if label_array.size and (
                    label_array.min() < 0 or label_array.max() >= task.num_outputs
                ):
                    raise TaskDataError(f"{source}: label ids outside 0..{task.num_outputs - 1}.")
                if label_map is not None:
                    label_array = label_map[label_array]
        splits[name] = Split(
            "test" if name in test_splits else name,
            source,
            texts_a,
            texts_b if b_key else None,
            label_array,
            indices,
        )
    return TaskData(
        splits["train"],
        {n: splits[n] for n in dev_splits},
        {n: splits[n] for n in test_splits if len(splits[n])},
    )


# ---------------------------------------------------------------------------
# The user's own files.


def _is_jsonl(path: str) -> bool:
    return path.lower().endswith((".jsonl", ".json", ".ndjson"))


def _read_records(path: str, options: FileTaskOptions) -> tuple[list[str], list[tuple[int, dict]]]:
    """(column names, [(line, {column: value})]) of a CSV / TSV / JSONL file."""
    if _is_jsonl(path) and starts_with_array(path):
        records, columns = [], []
        for line_number, record in iter_array_objects(path, options.max_row_chars):
            if not isinstance(record, dict):  # (the reader yields objects only)
                raise TaskDataError(f"{path}, line {line_number}: expected a JSON object.")
            for key in record:
                if key not in columns:
                    columns.append(key)
            records.append((line_number, record))
        if not records:
            raise TaskDataError(f"{path}: the array has no objects.")
        return columns, records
    if _is_jsonl(path):
        if not os.path.isfile(path):
            raise TaskDataError(f"{path}: no such file.")
        records, columns = [], []
        try:
            with open(path, encoding="utf-8-sig", newline="\n") as f:
                lines = bounded_lines(
                    f, path, options.max_row_chars, "--max_row_chars", TaskDataError
                )
                for line_number, line in lines:
                    if not line.strip():
                        continue
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError as error:
                        raise TaskDataError(
                            f"{path}, line {line_number}: not valid JSON "
                            f"({error.msg} at column {error.colno})."
                        ) from None
                    if not isinstance(record, dict):
                        raise TaskDataError(
                            f"{path}, line {line_number}: expected a JSON object "
                            f"per line, found {type(record).__name__}."
                        )
                    for key in record:
                        if key not in columns:
                            columns.append(key)
                    records.append((line_number, record))
        except UnicodeDecodeError:
            raise _utf8_error(path) from None
        if not records:
            raise TaskDataError(f"{path}: the file has no rows.")
        return columns, records
    delimiter = options.delimiter or ("," if path.lower().endswith(".csv") else "\t")
    header, rows = read_delimited(
        path, delimiter, options.quoting, has_header=True, max_row_chars=options.max_row_chars
    )
    records = []
    for line, fields in rows:
        if len(fields) != len(header):
            hint = (
                " (a quote character may have joined or split fields; try --quoting=none)"
                if options.quoting == "csv"
                else " (a field may contain the delimiter; try --quoting=csv)"
            )
            raise TaskDataError(
                f"{path}, line {line}: {len(fields)} fields but the header has {len(header)}{hint}."
            )
        records.append((line, dict(zip(header, fields))))
    return header, records


def _file_split(
    path: str, name: str, task: Task, options: FileTaskOptions, labelled: bool
) -> tuple[Split, list]:
    columns, records = _read_records(path, options)
    flags = [("text_column", options.text_column)]
    if options.text_pair_column:
        flags.append(("text_pair_column", options.text_pair_column))
    if labelled:
        flags.append(("label_column", options.label_column))
    if options.index_column and not labelled:
        flags.append(("index_column", options.index_column))
    for flag, column in flags:
        _column_index(columns, column, path, flag)
    texts_a, texts_b, raw_labels, indices = [], [], [], []
    for number, (line, record) in enumerate(records):
        where = f"{path}, line {line}"
        for flag, column in flags:
            if column not in record:  # JSONL records may differ in keys
                raise TaskDataError(
                    f"{where}: no {column!r} field (--{flag}); this line has "
                    f"{', '.join(repr(k) for k in record)}."
                )
        a = record[options.text_column]
        texts_a.append("" if a is None else str(a))
        if options.text_pair_column:
            b = record[options.text_pair_column]
            texts_b.append("" if b is None else str(b))
        if labelled:
            raw_labels.append((where, record[options.label_column]))
        index = record.get(options.index_column) if options.index_column else None
        indices.append(str(number) if index is None else str(index))
    split = Split(name, path, texts_a, texts_b if options.text_pair_column else None, None, indices)
    return split, raw_labels


def read_labelled_file(path: str, name: str, task: Task, options: FileTaskOptions) -> Split:
    """The labelled split `name` of the user's file `path`, as `--dev_file` is read.

    Raises:
        TaskDataError: a missing column or file, an unreadable line, or a
            label that `task` does not have.
    """
    split, raw = _file_split(path, name, task, options, labelled=True)
    split.labels = _labels_array(task, [_parse_label(task, v, w) for w, v in raw])
    return split


def _sorted_labels(values: Sequence[str]) -> list[str]:
    unique = set(values)
    try:
        return sorted(unique, key=int)
    except ValueError:
        return sorted(unique)


def load_user_files(
    name: str,
    options: FileTaskOptions,
    train_file: str,
    dev_file: Optional[str] = None,
    test_file: Optional[str] = None,
) -> tuple[Task, TaskData]:
    """Reads the user's task from CSV / TSV / JSONL files.

    `.csv` files are comma-separated, `.jsonl` / `.json` hold one JSON object
    per line (or one JSON array of objects), anything else (`.tsv`, `.txt`)
    is tab-separated; CSV and TSV files need a header row.

    Returns:
        (task, data). Without a dev file, `data.dev` is empty.

    Raises:
        TaskDataError: a missing column or file, an empty file, an unreadable
            line, or a dev label that the training data does not have.
    """
    if options.task_type not in (CLASSIFICATION, REGRESSION):
        raise TaskDataError(
            f"--task_type={options.task_type!r}: choose classification or regression."
        )
    pair = bool(options.text_pair_column)
    if not options.label_scale > 0:
        raise TaskDataError(f"--label_scale={options.label_scale}: must be > 0.")
    if options.label_scale != 1.0 and options.task_type != REGRESSION:
        raise TaskDataError(
            f"--label_scale={options.label_scale} scales regression targets; "
            "add --task_type=regression (or drop it)."
        )
    if options.task_type == REGRESSION:
        task = Task(
            name,
            REGRESSION,
            None,
            ("pearson", "spearman"),
            "spearman",
            pair,
            label_scale=float(options.label_scale),
        )
    else:
        task = Task(name, CLASSIFICATION, None, ("accuracy",), "accuracy", pair)
    train, raw = _file_split(train_file, "train", task, options, labelled=True)
    if task.task_type == CLASSIFICATION:
        if options.labels:
            task.label_names = [str(label).strip() for label in options.labels]
            if len(set(task.label_names)) != len(task.label_names):
                raise TaskDataError(f"--labels={','.join(options.labels)}: names repeat.")
        else:
            task.label_names = _sorted_labels([_label_text(v) for _, v in raw])
        if len(task.label_names) < 2:
            raise TaskDataError(
                f"{train_file}: only one label ({task.label_names[0]!r}) in "
                f"column {options.label_column!r}; a classifier needs two or "
                "more (or use --task_type=regression)."
            )
        if len(task.label_names) == 2:
            task.metrics = ("accuracy", "f1", "mcc")
        else:  # hate-speech and other multi-class benchmarks report macro-F1
            task.metrics = ("accuracy", "macro_f1")
    train.labels = _labels_array(task, [_parse_label(task, v, w) for w, v in raw])
    dev = {"dev": read_labelled_file(dev_file, "dev", task, options)} if dev_file else {}
    test = {}
    if test_file:
        test[name], _ = _file_split(test_file, "test", task, options, labelled=False)
    return task, TaskData(train, dev, test)
