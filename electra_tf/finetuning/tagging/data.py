"""Token classification data: CoNLL column files and JSONL, tag formats, and what a word is.

Two file layouts are read:

* CoNLL columns (any extension but `.jsonl` / `.json` / `.ndjson`): one word
  per line, the word in the first column and its tag in the last, columns
  separated by tabs (when the line has one) or else by spaces; a blank line
  ends a sentence; `-DOCSTART-` lines (CoNLL-2003) are skipped. This is the
  layout of CoNLL-2000/2003 and of the Naver NER files as KoELECTRA
  distributes them. An unlabelled (test) file may hold the word alone.
* JSONL: one object per line, `{"tokens": [...], "tags": [...]}` (the keys
  can be renamed).

Tags come in one of three formats, detected from the training file:

* `prefix`: `B-PER`, `I-PER`, `E-PER`, `S-PER` and `O` (BIO or IOBES; a bare
  `B` / `I` without a type is allowed);
* `suffix`: the same with the position letter last: `PER-B`, `PER-I`, `O`;
* `plain`: tags without entity structure (part-of-speech tags): every tag
  is a class of its own, scored by accuracy only.

Entities are scored as `seqeval` scores them (see `tagging_metrics`).

Raw text (the serving signature, `split_words`) is cut into words at
whitespace — ASCII tab, line feed, vertical tab, form feed, carriage return
and every Unicode space separator (categories Zs, Zl, Zp) — and every CJK
ideograph is a word of its own, as BERT's tokenizer isolates them: Korean
eojeol stay whole (`지미 카터는` is two words), Chinese text gets one word per
character as in the character-per-line Chinese NER corpora (MSRA, People's
Daily). Training files give their own words, which are never split again.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import unicodedata
from collections import Counter
from typing import Optional, Sequence

from electra_tf.finetuning.classification.data import TAGGING, TaskDataError

PREFIX = "prefix"
SUFFIX = "suffix"
PLAIN = "plain"
TAG_FORMATS = (PREFIX, SUFFIX, PLAIN)
# --tag_format: one of TAG_FORMATS, or auto (detected from the training tags).
AUTO = "auto"
TAG_FORMAT_CHOICES = (AUTO, *TAG_FORMATS)
OUTSIDE = "O"
# The letters of BIO and IOBES: Begin, Inside, End, Single (O has no type).
_POSITIONS = "BIES"
_PREFIX_TAG = re.compile(rf"^[{_POSITIONS}](-.+)?$", re.DOTALL)
_SUFFIX_TAG = re.compile(rf"^(.+-)?[{_POSITIONS}]$", re.DOTALL)
# The type seqeval gives `O` and a tag without one.
NO_TYPE = "_"

# Whitespace between words of raw text (see the module docstring); the
# serving graph uses the same set as a RE2 class.
_ASCII_SPACES = "\t\n\v\f\r"
_SPACE_CATEGORIES = ("Zs", "Zl", "Zp")
# The code points BERT's tokenizer treats as CJK ideographs (`_is_chinese_char`).
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
_JSONL_EXTENSIONS = (".jsonl", ".json", ".ndjson")


def is_cjk_ideograph(char: str) -> bool:
    """Whether a character is one of BERT's CJK ideographs (a word of its own in raw text)."""
    code = ord(char)
    return any(low <= code <= high for low, high in CJK_RANGES)


def is_word_space(char: str) -> bool:
    """Whether a character separates the words of raw text."""
    return char in _ASCII_SPACES or unicodedata.category(char) in _SPACE_CATEGORIES


def split_words(text: str) -> list[str]:
    """The words of raw text: whitespace-separated, each CJK ideograph a word of its own."""
    words, current = [], []
    for char in text:
        if is_word_space(char) or is_cjk_ideograph(char):
            if current:
                words.append("".join(current))
                current = []
            if not is_word_space(char):
                words.append(char)
        else:
            current.append(char)
    if current:
        words.append("".join(current))
    return words


# ---------------------------------------------------------------------------
# Tags.


def parse_tag(tag: str, tag_format: str) -> tuple[str, str]:
    """(position letter, entity type) of a tag, as seqeval reads it.

    `O` is ("O", "_"); a position letter without a type has type "_".

    Raises:
        ValueError: the tag is not of the format (never for `plain`, whose
            tags are returned as ("O", "_"): they carry no entities).
    """
    if tag_format == PLAIN or tag == OUTSIDE:
        return OUTSIDE, NO_TYPE
    if tag_format == PREFIX and _PREFIX_TAG.match(tag):
        return tag[0], tag[2:] or NO_TYPE
    if tag_format == SUFFIX and _SUFFIX_TAG.match(tag):
        return tag[-1], tag[:-2] or NO_TYPE
    example = {PREFIX: "B-PER", SUFFIX: "PER-B"}.get(tag_format, "B-PER")
    raise ValueError(
        f"tag {tag!r} is not of the {tag_format} format (like {example!r} or {OUTSIDE!r})"
    )


def _fits(tag: str, tag_format: str) -> bool:
    try:
        parse_tag(tag, tag_format)
        return True
    except ValueError:
        return False


def detect_tag_format(tags: Sequence[str]) -> str:
    """The format every tag fits: `prefix` before `suffix`; `plain` when no tag has entity form.

    Raises:
        ValueError: some tags have entity form and others do not (the
            message lists a few of each).
    """
    tags = sorted(set(tags) - {OUTSIDE})
    for tag_format in (PREFIX, SUFFIX):
        if all(_fits(t, tag_format) for t in tags):
            return tag_format
    entity_like = [t for t in tags if _fits(t, PREFIX) or _fits(t, SUFFIX)]
    if not entity_like:
        return PLAIN
    others = [t for t in tags if t not in entity_like]
    raise ValueError(
        f"some tags look like entity tags ({', '.join(entity_like[:3])}) and others "
        f"do not ({', '.join(others[:3])}); fix them, or pass --tag_format=plain "
        "to score every tag as a class of its own (accuracy only)"
    )


def order_tags(tags: Sequence[str]) -> list[str]:
    """Tag names in id order: `O` first when present, then sorted."""
    unique = set(tags)
    return ([OUTSIDE] if OUTSIDE in unique else []) + sorted(unique - {OUTSIDE})


# ---------------------------------------------------------------------------
# Files.


@dataclasses.dataclass
class TaggedSplit:
    """The sentences of one file.

    Attributes:
        name: `train`, `dev` or `test`.
        source: the file, for messages.
        sentences: N lists of words.
        tags: N lists of tags, one per word (None for an unlabelled file).
        lines: N line numbers where the sentences start (for messages).
    """

    name: str
    source: str
    sentences: list[list[str]]
    tags: Optional[list[list[str]]]
    lines: list[int]

    def __len__(self) -> int:
        return len(self.sentences)

    @property
    def num_words(self) -> int:
        return sum(len(words) for words in self.sentences)

    def sample(self, count: int, seed: int = 0) -> "TaggedSplit":
        """`count` sentences drawn without replacement (in their original order)."""
        import numpy as np

        if count >= len(self):
            return self
        keep = np.sort(np.random.default_rng(seed).choice(len(self), size=count, replace=False))
        pick = lambda values: [values[i] for i in keep]  # noqa: E731
        return dataclasses.replace(
            self,
            sentences=pick(self.sentences),
            tags=None if self.tags is None else pick(self.tags),
            lines=pick(self.lines),
        )


def _read_lines(path: str):
    if not os.path.isfile(path):
        raise TaskDataError(f"{path}: no such file.")
    try:
        with open(path, encoding="utf-8-sig") as f:
            return f.read().split("\n")
    except UnicodeDecodeError as error:
        raise TaskDataError(
            f"{path}: not valid UTF-8 ({error.reason} at byte {error.start})."
        ) from None


def read_conll(path: str, name: str, labelled: bool) -> TaggedSplit:
    """Reads a CoNLL column file (see the module docstring).

    Raises:
        TaskDataError: a missing or empty file, or (labelled) a line with a
            word but no tag column.
    """
    sentences, tags, lines = [], [], []
    words, sentence_tags, start = [], [], 0
    for number, line in enumerate(_read_lines(path), start=1):
        line = line.rstrip("\r")
        fields = line.split("\t") if "\t" in line else line.split()
        fields = [f.strip() for f in fields]
        if not any(fields):
            if words:
                sentences.append(words)
                tags.append(sentence_tags)
                lines.append(start)
            words, sentence_tags = [], []
            continue
        if fields[0] == "-DOCSTART-":
            continue
        if labelled and len(fields) < 2:
            raise TaskDataError(
                f"{path}, line {number}: {line!r} has no tag column (word first, "
                "tag last, separated by a tab or spaces)."
            )
        if not words:
            start = number
        words.append(fields[0])
        sentence_tags.append(fields[-1])
    if words:
        sentences.append(words)
        tags.append(sentence_tags)
        lines.append(start)
    if not sentences:
        raise TaskDataError(
            f"{path}: no sentences (word first, tag last, a blank line between sentences)."
        )
    return TaggedSplit(name, path, sentences, tags if labelled else None, lines)


def read_jsonl(
    path: str, name: str, labelled: bool, words_key: str = "tokens", tags_key: str = "tags"
) -> TaggedSplit:
    """Reads JSONL sentences `{words_key: [...], tags_key: [...]}`.

    Raises:
        TaskDataError: invalid JSON, a missing key, lists that are not of
            strings or differ in length.
    """
    sentences, tags, lines = [], [], []
    for number, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            continue
        where = f"{path}, line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise TaskDataError(
                f"{where}: not valid JSON ({error.msg} at column {error.colno})."
            ) from None
        if not isinstance(record, dict):
            raise TaskDataError(
                f"{where}: expected a JSON object per line, found {type(record).__name__}."
            )
        keys = [words_key] + ([tags_key] if labelled else [])
        values = []
        for key in keys:
            if key not in record:
                raise TaskDataError(
                    f"{where}: no {key!r} field; this line has "
                    f"{', '.join(repr(k) for k in record) or 'no fields'}."
                )
            value = record[key]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise TaskDataError(f"{where}: {key!r} must be a list of strings.")
            values.append(value)
        if labelled and len(values[0]) != len(values[1]):
            raise TaskDataError(
                f"{where}: {len(values[0])} {words_key} but {len(values[1])} {tags_key}."
            )
        sentences.append(values[0])
        tags.append([t.strip() for t in values[1]] if labelled else None)
        lines.append(number)
    if not sentences:
        raise TaskDataError(f"{path}: the file has no rows.")
    return TaggedSplit(name, path, sentences, tags if labelled else None, lines)


def read_tagged_file(
    path: str, name: str, labelled: bool, words_key: str = "tokens", tags_key: str = "tags"
) -> TaggedSplit:
    """A CoNLL or JSONL file, by extension (see the module docstring)."""
    if path.lower().endswith(_JSONL_EXTENSIONS):
        return read_jsonl(path, name, labelled, words_key, tags_key)
    return read_conll(path, name, labelled)


# ---------------------------------------------------------------------------
# The task.


@dataclasses.dataclass
class TaggingDefinition:
    """What a tagging task learns and how it is scored.

    Attributes:
        name: the task's name.
        tag_names: tags in id order (`O` first when present).
        tag_format: `prefix`, `suffix` or `plain` (see the module docstring).
        metrics: the micro-averaged metrics reported (per-type ones follow
            them in the results as `<metric>/<type>`).
        primary_metric: what trials are compared by: `f1` (entity level),
            or `accuracy` for plain tags.
        num_train_epochs: default training length.
    """

    name: str
    tag_names: list[str]
    tag_format: str
    metrics: tuple[str, ...]
    primary_metric: str
    num_train_epochs: float = 3.0
    task_type: str = dataclasses.field(default=TAGGING, init=False)

    @property
    def num_tags(self) -> int:
        return len(self.tag_names)

    @property
    def outside_id(self) -> Optional[int]:
        """Id of `O`, the prediction of words the model does not see (None: no `O` tag)."""
        return self.tag_names.index(OUTSIDE) if OUTSIDE in self.tag_names else None

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "task_type": self.task_type,
            "tag_names": list(self.tag_names),
            "tag_format": self.tag_format,
            "metrics": list(self.metrics),
            "primary_metric": self.primary_metric,
            "num_train_epochs": self.num_train_epochs,
        }

    @classmethod
    def from_dict(cls, data: dict) -> "TaggingDefinition":
        data = {k: v for k, v in data.items() if k != "task_type"}
        data["metrics"] = tuple(data["metrics"])
        return cls(**data)


@dataclasses.dataclass
class TaggingData:
    """Train, dev (optional) and test (optional, unlabelled) sentences."""

    train: TaggedSplit
    dev: Optional[TaggedSplit]
    test: Optional[TaggedSplit]


def _check_tags(split: TaggedSplit, tag_format: str) -> None:
    """Every tag of the split fits the format; else one line naming the file and line."""
    for tags, line in zip(split.tags, split.lines):
        for offset, tag in enumerate(tags):
            try:
                parse_tag(tag, tag_format)
            except ValueError as error:
                # CoNLL: one word per line; JSONL: the sentence's line.
                at = line + offset if not split.source.lower().endswith(_JSONL_EXTENSIONS) else line
                raise TaskDataError(f"{split.source}, line {at}: {error}.") from None


def load_tagging_files(
    name: str,
    train_file: str,
    dev_file: Optional[str] = None,
    test_file: Optional[str] = None,
    tag_format: str = AUTO,
    tag_names: Optional[Sequence[str]] = None,
    words_key: str = "tokens",
    tags_key: str = "tags",
    warn=print,
) -> tuple[TaggingDefinition, TaggingData]:
    """Reads a tagging task from CoNLL or JSONL files.

    Args:
        name: the task's name.
        train_file, dev_file, test_file: the files (the test file unlabelled).
        tag_format: `auto` (detected from the training tags), `prefix`,
            `suffix` or `plain`.
        tag_names: the tags in id order (default: those of the training
            file, `O` first); must include every training tag.
        words_key, tags_key: the JSONL keys.
        warn: prints a warning (dev tags the training file lacks).

    Raises:
        TaskDataError: unreadable files, tags that do not fit the format, or
            `tag_names` missing a training tag.
    """
    train = read_tagged_file(train_file, "train", True, words_key, tags_key)
    train_tags = [t for tags in train.tags for t in tags]
    if tag_format == AUTO:
        try:
            tag_format = detect_tag_format(train_tags)
        except ValueError as error:
            raise TaskDataError(f"{train_file}: {error}.") from None
    elif tag_format not in TAG_FORMATS:
        raise TaskDataError(f"--tag_format={tag_format!r}: choose {', '.join(TAG_FORMAT_CHOICES)}.")
    _check_tags(train, tag_format)
    if tag_names:
        names = [str(t).strip() for t in tag_names]
        if len(set(names)) != len(names):
            raise TaskDataError(f"--labels={','.join(names)}: names repeat.")
        missing = sorted(set(train_tags) - set(names))
        if missing:
            raise TaskDataError(
                f"--labels lacks the tag(s) {', '.join(missing[:5])} of {train_file}."
            )
    else:
        names = order_tags(train_tags)
    if len(names) < 2:
        raise TaskDataError(
            f"{train_file}: only one tag ({names[0]!r}); a tagger needs two or more."
        )
    dev = read_tagged_file(dev_file, "dev", True, words_key, tags_key) if dev_file else None
    if dev is not None:
        _check_tags(dev, tag_format)
        unseen = Counter(t for tags in dev.tags for t in tags if t not in names)
        if unseen:
            warn(
                f"Warning: {dev_file}: {sum(unseen.values())} tag(s) the training data lacks "
                f"({', '.join(sorted(unseen)[:5])}); they are scored but never predicted."
            )
    test = read_tagged_file(test_file, "test", False, words_key, tags_key) if test_file else None
    entity = tag_format != PLAIN
    definition = TaggingDefinition(
        name=name,
        tag_names=names,
        tag_format=tag_format,
        metrics=("precision", "recall", "f1", "accuracy") if entity else ("accuracy",),
        primary_metric="f1" if entity else "accuracy",
    )
    return definition, TaggingData(train, dev, test)
