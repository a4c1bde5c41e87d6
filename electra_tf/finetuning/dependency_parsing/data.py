"""Dependency-parsing files as KLUE distributes them (KLUE-DP), read into words, heads and labels.

The layout (`klue-dp-v1.1_{train,dev}.tsv`):

* comment lines begin with `#` (KLUE writes `##`): the file starts with a
  few describing the columns, and each sentence starts with
  `## <guid><TAB><the sentence>`;
* then one word (eojeol) per line, six tab-separated columns
  `INDEX WORD_FORM LEMMA POS HEAD DEPREL`: INDEX counts the sentence's
  words from 1, HEAD is the INDEX of the word's head (0: the root) and
  DEPREL its relation, one of KLUE's 38 labels (`DEPREL_LABELS`);
* a blank line between sentences.

KLUE-baseline's reader (`klue_baseline/data/klue_dp.py`) reads the same
lines; this one also refuses what does not fit: a word line of another
column count, an INDEX out of sequence, a HEAD that is no word of the
sentence or the word itself, an unknown DEPREL, a comment line between the
words of a sentence, a "sentence" of more than `MAX_SENTENCE_WORDS` words
or a line of more than `MAX_LINE_BYTES` bytes — each with one line naming
the file, the line and the layout expected. LEMMA and POS are kept in the
file and not read (the parser does not use them; see `model`).

A file read unlabelled (a test file, or a predictions file read back) may
also leave HEAD and DEPREL out (four columns) or write both as `_`: such a
word has no head (-1) and no label (None). The predictions
(`write_predictions`) are the input file line for line, with the predicted
HEAD and DEPREL in columns 5 and 6, so this reader reads them back.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Iterator, Optional, Sequence

from electra_tf.artifacts.files import atomic_open
from electra_tf.finetuning.dependency_parsing.metrics import METRICS
from electra_tf.finetuning.kind.files import TaskDataError, draw_rows

DEPENDENCY_PARSING = "dependency_parsing"
# KLUE's dependency relations, in KLUE-baseline's order (`get_dep_labels`): the
# order matters, since KLUE's LAS counts the labels from index
# `metrics.KEPT_LABELS` on as one class.
DEPREL_LABELS = (
    "NP",
    "NP_AJT",
    "VP",
    "NP_SBJ",
    "VP_MOD",
    "NP_OBJ",
    "AP",
    "NP_CNJ",
    "NP_MOD",
    "VNP",
    "DP",
    "VP_AJT",
    "VNP_MOD",
    "NP_CMP",
    "VP_SBJ",
    "VP_CMP",
    "VP_OBJ",
    "VNP_CMP",
    "AP_MOD",
    "X_AJT",
    "VP_CNJ",
    "VNP_AJT",
    "IP",
    "X",
    "X_SBJ",
    "VNP_OBJ",
    "VNP_SBJ",
    "X_OBJ",
    "AP_AJT",
    "L",
    "X_MOD",
    "X_CNJ",
    "VNP_CNJ",
    "X_CMP",
    "AP_CMP",
    "AP_SBJ",
    "R",
    "NP_SVJ",
)
# HEAD and DEPREL of a word without them (unlabelled files, words the model did not see).
NO_VALUE = "_"
LAYOUT = (
    "KLUE-DP's layout: comment lines beginning with ##, then one word per line "
    "INDEX<TAB>WORD_FORM<TAB>LEMMA<TAB>POS<TAB>HEAD<TAB>DEPREL (INDEX counting from 1, "
    "HEAD 0 = root), a blank line between sentences"
)
# Longer "sentences" are a file in another layout (no ELECTRA input holds that many words).
MAX_SENTENCE_WORDS = 500
# Longer lines are refused before they take memory (a KLUE line is under 1 KB).
MAX_LINE_BYTES = 1 << 16
_INTEGER = re.compile(r"^[0-9]+$")
_LABEL_IDS = {label: i for i, label in enumerate(DEPREL_LABELS)}


class DependencyDataError(TaskDataError):
    """A dependency-parsing file does not fit KLUE-DP's layout; the message names file and line."""


def _error(path: str, line: int, problem: str) -> DependencyDataError:
    return DependencyDataError(f"{path}, line {line}: {problem}; expected {LAYOUT}.")


@dataclasses.dataclass
class ParsedSplit:
    """The sentences of one file.

    Attributes:
        name: `train`, `dev` or `test`.
        source: the file.
        words: N lists of words (WORD_FORM).
        heads: N lists: each word's HEAD (0: root; -1: none given).
        labels: N lists: each word's DEPREL (None: none given).
        lines: N line numbers: where each sentence's first word is.
    """

    name: str
    source: str
    words: list[list[str]]
    heads: list[list[int]]
    labels: list[list[Optional[str]]]
    lines: list[int]

    def __len__(self) -> int:
        return len(self.words)

    @property
    def num_words(self) -> int:
        return sum(len(w) for w in self.words)

    def label_ids(self) -> list[list[int]]:
        """Each word's DEPREL as an index of `DEPREL_LABELS` (-1: none given)."""
        return [[-1 if x is None else _LABEL_IDS[x] for x in row] for row in self.labels]

    def sample(self, count: int, seed: int = 0) -> "ParsedSplit":
        """`count` sentences drawn without replacement (in their original order)."""
        return draw_rows(self, count, seed, ("words", "heads", "labels", "lines"))


@dataclasses.dataclass
class ParsingData:
    """Train, dev (optional) and test (optional, may be unlabelled) sentences."""

    train: ParsedSplit
    dev: Optional[ParsedSplit]
    test: Optional[ParsedSplit]


@dataclasses.dataclass
class ParsingDefinition:
    """What a dependency-parsing task learns and how it is scored.

    Attributes:
        name: the task's name.
        label_names: the dependency relations in id order (`DEPREL_LABELS`).
        metrics: KLUE's four scores (see `metrics`).
        primary_metric: what trials are compared by.
        num_train_epochs: default training length (KLUE-baseline's 10).
    """

    name: str
    label_names: tuple[str, ...] = DEPREL_LABELS
    metrics: tuple[str, ...] = METRICS
    primary_metric: str = "las_macro_f1"
    num_train_epochs: float = 10.0
    task_type: str = dataclasses.field(default=DEPENDENCY_PARSING, init=False)

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "task_type": self.task_type,
            "label_names": list(self.label_names),
            "metrics": list(self.metrics),
            "primary_metric": self.primary_metric,
            "num_train_epochs": self.num_train_epochs,
        }

    @classmethod
    def from_dict(cls, data: dict) -> "ParsingDefinition":
        data = {k: v for k, v in data.items() if k != "task_type"}
        data["label_names"] = tuple(data["label_names"])
        data["metrics"] = tuple(data["metrics"])
        return cls(**data)


def _lines(path: str) -> Iterator[tuple[int, str]]:
    """(line number, text without its line end) of a UTF-8 file, one line in memory at a time.

    Raises:
        DependencyDataError: a missing file, invalid UTF-8 or a line over
            `MAX_LINE_BYTES` bytes (the line named).
    """
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise DependencyDataError(f"{path}: no such file.") from None
    except IsADirectoryError:
        raise DependencyDataError(f"{path}: a directory, not a file.") from None
    with f:
        number = 0
        while True:
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            number += 1
            if len(raw) > MAX_LINE_BYTES:
                raise _error(path, number, f"a line of more than {MAX_LINE_BYTES:,} bytes")
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise DependencyDataError(
                    f"{path}, line {number}: not valid UTF-8 ({error.reason} at byte "
                    f"{error.start} of the line)."
                ) from None
            yield number, text.rstrip("\r\n")


def _is_comment(text: str) -> bool:
    return text.startswith("#")


def _word(path: str, number: int, text: str, index: int, labelled: bool):
    """(word, head, label) of a word line: the `index`-th word of its sentence."""
    fields = text.split("\t")
    unlabelled = not labelled and (
        len(fields) == 4 or (len(fields) == 6 and fields[4] == fields[5] == NO_VALUE)
    )
    if len(fields) != 6 and not unlabelled:
        raise _error(path, number, f"a word line of {len(fields)} tab-separated columns, not 6")
    if fields[0] != str(index):
        raise _error(
            path, number, f"INDEX {fields[0][:20]!r} where {index} was expected (in sequence)"
        )
    if not fields[1].strip():
        raise _error(path, number, "an empty WORD_FORM")
    if unlabelled:
        return fields[1], -1, None
    head, label = fields[4], fields[5]
    if labelled and NO_VALUE in (head, label):
        raise _error(path, number, f"HEAD {head!r} and DEPREL {label!r} in a labelled file")
    if not _INTEGER.match(head):
        raise _error(path, number, f"HEAD {head[:20]!r} is not a word's INDEX or 0")
    if int(head) == index:
        raise _error(path, number, f"word {index} is its own HEAD")
    if label not in _LABEL_IDS:
        raise DependencyDataError(
            f"{path}, line {number}: DEPREL {label[:40]!r} is not one of KLUE's dependency "
            f"relations ({', '.join(DEPREL_LABELS)})."
        )
    return fields[1], int(head), label


def read_parsed_file(path: str, name: str, labelled: bool = True) -> ParsedSplit:
    """Reads a KLUE-DP file (see the module docstring).

    Args:
        path: the file.
        name: the split's name (`train`, `dev`, `test`).
        labelled: every word must have HEAD and DEPREL (training and dev
            files); else a word may have neither.

    Raises:
        DependencyDataError: the file does not fit the layout, or holds no sentence.
    """
    split = ParsedSplit(name, path, [], [], [], [])
    words, heads, labels, lines = [], [], [], []

    def close() -> None:
        for offset, head in enumerate(heads):
            if head > len(heads):
                raise _error(
                    path,
                    lines[offset],
                    f"HEAD {head} of a sentence of {len(heads)} words (lines "
                    f"{lines[0]}-{lines[-1]})",
                )
        split.words.append(list(words))
        split.heads.append(list(heads))
        split.labels.append(list(labels))
        split.lines.append(lines[0])

    for number, text in _lines(path):
        if not text.strip():
            if words:
                close()
                words, heads, labels, lines = [], [], [], []
            continue
        if _is_comment(text):
            if words:
                raise _error(
                    path, number, "a comment line inside a sentence (no blank line before)"
                )
            continue
        if len(words) == MAX_SENTENCE_WORDS:
            raise _error(path, number, f"a sentence of more than {MAX_SENTENCE_WORDS} words")
        word, head, label = _word(path, number, text, len(words) + 1, labelled)
        words.append(word)
        heads.append(head)
        labels.append(label)
        lines.append(number)
    if words:
        close()
    if not split.words:
        raise DependencyDataError(f"{path}: no sentence; expected {LAYOUT}.")
    return split


def load_parsing_files(
    name: str, train_file: str, dev_file: Optional[str], test_file: Optional[str]
) -> tuple[ParsingDefinition, ParsingData]:
    """The task's definition and its splits (train and dev labelled, test may not be)."""
    data = ParsingData(
        read_parsed_file(train_file, "train"),
        read_parsed_file(dev_file, "dev") if dev_file else None,
        read_parsed_file(test_file, "test", labelled=False) if test_file else None,
    )
    return ParsingDefinition(name), data


def write_predictions(
    path: str,
    source: str,
    heads: Sequence[Sequence[int]],
    labels: Sequence[Sequence[Optional[str]]],
) -> None:
    """Writes `source` again, line for line, with the predicted HEAD and DEPREL in columns 5-6.

    Comment and blank lines are kept as they are; a word line keeps its
    first four columns and gets the prediction (`_ _` for a word without
    one: the model did not see it). Lines end with `\\n`.

    Args:
        path: the file written (atomically).
        source: the file the sentences were read from (`read_parsed_file`).
        heads: per sentence, each word's predicted HEAD (-1: none).
        labels: per sentence, each word's predicted DEPREL (None: none).

    Raises:
        DependencyDataError: `source` no longer holds those sentences.
    """
    flat = [(h, x) for hs, xs in zip(heads, labels) for h, x in zip(hs, xs)]
    position = 0
    with atomic_open(path) as f:
        for number, text in _lines(source):
            if text.strip() and not _is_comment(text):
                if position == len(flat):
                    raise DependencyDataError(
                        f"{source}, line {number}: changed since it was read."
                    )
                head, label = flat[position]
                position += 1
                columns = text.split("\t")[:4]
                if head < 0 or label is None:
                    columns += [NO_VALUE, NO_VALUE]
                else:
                    columns += [str(head), label]
                text = "\t".join(columns)
            f.write(text + "\n")
    if position != len(flat):
        raise DependencyDataError(f"{source}: changed since it was read (fewer words).")
