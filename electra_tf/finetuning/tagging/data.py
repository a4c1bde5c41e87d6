"""Token classification data: tag formats, the task's tags, and what a word is.

Files are read in the layouts they are distributed in (`tagging.layouts`:
CoNLL columns, JSONL, Naver NER's sentence-per-line files as KoELECTRA
distributes them, the Naver NLP Challenge's own files, CLUENER 2020), each
into words and one tag per word (`tagging.sentences.TaggedSplit`).

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
import re
import unicodedata
from collections import Counter
from typing import Optional, Sequence

from electra_tf.config import flag_field
from electra_tf.finetuning.kind.files import MAX_ROW_CHARS, TaskDataError
from electra_tf.finetuning.tagging.layouts import (  # noqa: F401 (re-exported)
    AUTO as AUTO_LAYOUT,
)
from electra_tf.finetuning.tagging.layouts import (  # noqa: F401 (re-exported)
    KLUE_NER,
    LAYOUT_CHOICES,
    NAVER_ORIGINAL,
    read_conll,
    read_jsonl,
    read_tagged_file,
)
from electra_tf.finetuning.tagging.sentences import TaggedSplit  # noqa: F401 (re-exported)
from electra_tf.tokenization import is_cjk_ideograph

# KLUE-NER's scores (`tagging.klue_ner.METRICS`), the first its primary metric.
KLUE_NER_METRICS = ("entity_macro_f1", "char_macro_f1")
# The --task_type of token classification.
TAGGING = "tagging"
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
# Layouts with one word per line (the others keep a sentence on one line).
_WORD_PER_LINE = ("conll", NAVER_ORIGINAL)
# Tags with the position after "_" (the Naver NLP Challenge's PER_B) fit no
# format: read as plain classes they would be scored by accuracy, silently.
_UNDERSCORE_POSITION = re.compile(rf"^(.+_[{_POSITIONS}]|[{_POSITIONS}]_.+)$", re.DOTALL)


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


class TagFormatError(ValueError):
    """The tags fit no format; `tags` are the ones at fault (the message names a few)."""

    def __init__(self, message: str, tags: Sequence[str]):
        super().__init__(message)
        self.tags = list(tags)


def detect_tag_format(tags: Sequence[str]) -> str:
    """The format every tag fits: `prefix` before `suffix`; `plain` when no tag has entity form.

    Raises:
        TagFormatError: some tags have entity form and others do not (the
            message lists a few of each), or no tag has entity form and some
            mark a position after "_" (`PER_B`): tags of no format.
    """
    tags = sorted(set(tags) - {OUTSIDE})
    for tag_format in (PREFIX, SUFFIX):
        if all(_fits(t, tag_format) for t in tags):
            return tag_format
    entity_like = [t for t in tags if _fits(t, PREFIX) or _fits(t, SUFFIX)]
    if not entity_like:
        underscored = [t for t in tags if _UNDERSCORE_POSITION.match(t)]
        if underscored:
            raise TagFormatError(
                f"tags such as {', '.join(underscored[:3])} mark the position after '_', "
                "which no tag format reads (B-PER, PER-B); the Naver NLP Challenge's files "
                "(index<TAB>word<TAB>tag, - for none) are read with "
                "--tagging_layout=naver_original, or pass --tag_format=plain to score every "
                "tag as a class of its own (accuracy only)",
                underscored,
            )
        return PLAIN
    others = [t for t in tags if t not in entity_like]
    raise TagFormatError(
        f"some tags look like entity tags ({', '.join(entity_like[:3])}) and others "
        f"do not ({', '.join(others[:3])}); fix them, or pass --tag_format=plain "
        "to score every tag as a class of its own (accuracy only)",
        others,
    )


def order_tags(tags: Sequence[str]) -> list[str]:
    """Tag names in id order: `O` first when present, then sorted."""
    unique = set(tags)
    return ([OUTSIDE] if OUTSIDE in unique else []) + sorted(unique - {OUTSIDE})


# ---------------------------------------------------------------------------
# Files.


# TaggedSplit, read_conll, read_jsonl and read_tagged_file live in
# tagging.sentences and tagging.layouts; they are imported above.


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


def _tag_line(split: TaggedSplit, sentence: int, word: int) -> int:
    """The line of a word's tag: its own in the word-per-line layouts, else its sentence's."""
    start = split.lines[sentence]
    return start + word if split.layout in _WORD_PER_LINE else start


def _check_tags(split: TaggedSplit, tag_format: str) -> None:
    """Every tag of the split fits the format; else one line naming the file and line."""
    for n, tags in enumerate(split.tags):
        for offset, tag in enumerate(tags):
            try:
                parse_tag(tag, tag_format)
            except ValueError as error:
                at = _tag_line(split, n, offset)
                raise TaskDataError(f"{split.source}, line {at}: {error}.") from None


def _first_line_of(split: TaggedSplit, wanted: set) -> int:
    """The line of the first tag in `wanted` (1 when none is)."""
    for n, tags in enumerate(split.tags):
        for offset, tag in enumerate(tags):
            if tag in wanted:
                return _tag_line(split, n, offset)
    return 1


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
    layout: str = AUTO_LAYOUT,
    max_line_chars: int = MAX_ROW_CHARS,
) -> tuple[TaggingDefinition, TaggingData]:
    """Reads a tagging task from files in one of the layouts of `tagging.layouts`.

    Args:
        name: the task's name.
        train_file, dev_file, test_file: the files (the test file unlabelled).
        tag_format: `auto` (detected from the training tags), `prefix`,
            `suffix` or `plain`.
        tag_names: the tags in id order (default: those of the training
            file, `O` first); must include every training tag.
        words_key, tags_key: the JSONL keys.
        warn: prints a warning (dev tags the training file lacks).
        layout: `auto` (detected from the training file) or one of
            `tagging.layouts.LAYOUTS`; the dev and test files are read in
            the training file's.
        max_line_chars: the longest line read (--max_row_chars); a longer
            one is refused with its file and line.

    Raises:
        TaskDataError: unreadable files, content that does not fit the
            layout, tags that fit no format or not the one given, or
            `tag_names` missing a training tag.
    """
    if layout not in LAYOUT_CHOICES:
        raise TaskDataError(f"--tagging_layout={layout!r}: choose {', '.join(LAYOUT_CHOICES)}.")
    train = read_tagged_file(train_file, "train", True, layout, words_key, tags_key, max_line_chars)
    layout = train.layout
    train_tags = [t for tags in train.tags for t in tags]
    if tag_format == AUTO:
        try:
            tag_format = detect_tag_format(train_tags)
        except TagFormatError as error:
            line = _first_line_of(train, set(error.tags))
            raise TaskDataError(f"{train_file}, line {line}: {error}.") from None
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
    dev = None
    if dev_file:
        dev = read_tagged_file(dev_file, "dev", True, layout, words_key, tags_key, max_line_chars)
        _check_tags(dev, tag_format)
        unseen = Counter(t for tags in dev.tags for t in tags if t not in names)
        if unseen:
            warn(
                f"Warning: {dev_file}: {sum(unseen.values())} tag(s) the training data lacks "
                f"({', '.join(sorted(unseen)[:5])}); they are scored but never predicted."
            )
    test = None
    if test_file:
        test = read_tagged_file(
            test_file, "test", False, layout, words_key, tags_key, max_line_chars
        )
    entity = tag_format != PLAIN
    metrics = ("precision", "recall", "f1", "accuracy") if entity else ("accuracy",)
    primary = "f1" if entity else "accuracy"
    if layout == KLUE_NER:  # scored as KLUE scores it (`klue_ner`), seqeval's micro F1 beside
        metrics, primary = (*KLUE_NER_METRICS, *metrics), KLUE_NER_METRICS[0]
    definition = TaggingDefinition(
        name=name,
        tag_names=names,
        tag_format=tag_format,
        metrics=metrics,
        primary_metric=primary,
    )
    return definition, TaggingData(train, dev, test)


@dataclasses.dataclass
class TaggingFileOptions:
    """How tagging files are read (`finetune.py` flags: each field's metadata holds its help).

    Attributes:
        tagging_layout: `auto` or one of `tagging.layouts.LAYOUTS`.
        tag_format: how tags are scored (`TAG_FORMAT_CHOICES`).
    """

    tag_format: str = flag_field(
        "auto",
        "Tagging: prefix (B-PER, I-PER, E-PER, S-PER, O) or suffix (PER-B, ...) tags "
        "are scored as entities; plain tags (part of speech) by accuracy. auto: from the "
        "training tags.",
        choices=TAG_FORMAT_CHOICES,
    )

    tagging_layout: str = flag_field(
        AUTO_LAYOUT,
        "Tagging files' layout: conll (word first, tag last, a blank line between "
        "sentences), jsonl ({tokens, tags}), sentence_per_line (words<TAB>tags: Naver NER "
        "as KoELECTRA distributes it), naver_original (index<TAB>word<TAB>tag, PER_B and - "
        "tags: the Naver NLP Challenge's files), cluener (CLUENER 2020 JSON lines), klue_ner "
        "(KLUE-NER: char<TAB>tag per line, ## comments). auto: from the training file.",
        choices=LAYOUT_CHOICES,
    )
