"""Tagging files in the layouts they are distributed in, read into words and tags.

* `conll`: one word per line, the word in the first column and its tag in
  the last, columns separated by tabs (when the line has one) or else by
  spaces; a blank line ends a sentence; `-DOCSTART-` lines (CoNLL-2003)
  are skipped. CoNLL-2000/2003. An unlabelled (test) file may hold the
  word alone.
* `jsonl`: one object per line, `{"tokens": [...], "tags": [...]}` (the
  keys can be renamed).
* `sentence_per_line`: one sentence per line, `words<TAB>tags`, the words
  and the tags each separated by spaces, as many tags as words: Naver NER
  as KoELECTRA distributes it (`finetune/data/naver-ner/*.tsv`, tags such
  as `PER-B`, `PER-I`, `O`). Words and tags are split at any whitespace
  (Python's `str.split()`, as KoELECTRA's reader splits them). An
  unlabelled file holds the words alone.
* `naver_original`: the Naver NLP Challenge 2018 files (`train_data`): one
  word per line, `index<TAB>word<TAB>tag`, the index counting the
  sentence's words from 1, a blank line between sentences; tags `PER_B`,
  `PER_I`, ..., and `-` for none. Tags are read as KoELECTRA's: `PER_B`
  becomes `PER-B` and `-` becomes `O` (suffix tags, scored by entities).
  An unlabelled file may hold `index<TAB>word` alone.
* `cluener`: CLUENER 2020 (`train.json`, `dev.json`): one object per line,
  `{"text": ..., "label": {type: {entity: [[start, end], ...]}}}` with
  inclusive character spans; every character is a word and entities
  become BIOS tags as CLUE's baseline builds them (`S-name` for one
  character, else `B-name`, `I-name`, ...). A line without `label` has no
  entity; the test file's `{"id", "text"}` lines are unlabelled.
* `klue_ner`: KLUE-NER (`klue-ner-v1.1_{train,dev}.tsv`): one character per
  line, `char<TAB>tag` (IOB2 tags: `B-PS`, `I-OG`, ..., `O`), a blank line
  between sentences, lines starting `##` comments (the file's header, each
  sentence's id and marked text). A space is a character line of its own
  (` <TAB>O`, or `I-<type>` inside an entity). The words read are the
  sentence's characters other than spaces, each a word of its own: KLUE
  scores the characters without the spaces
  (`klue_metrics`), and the model reads them as CLUENER's characters are
  read. An unlabelled file may hold the character alone.

`auto` (the default) reads a `.json` / `.jsonl` / `.ndjson` file as
`cluener` when its first object has a string `text` and no `tokens`, else
as `jsonl`; any other file as `klue_ner` when its first line starts with
`##`, as `naver_original` when every line of its
first sentences is `integer<TAB>word<TAB>tag` counting from 1, as
`sentence_per_line` when most of its first lines are `words<TAB>tags`
with as many tags as words and at least one of them holds two words or more
(a line among them that is not is then named by that layout's reader),
else as `conll`. Dev and test files are read in the training file's
layout. A file that does not fit the layout it is read in stops with one
line naming the file, the line and the layout expected; so does a
"sentence" of more than 500 words (`sentences.MAX_SENTENCE_WORDS`).
"""

from __future__ import annotations

import json
import re
from typing import Optional

from electra_tf.finetuning.kind.files import MAX_ROW_CHARS, TaskDataError
from electra_tf.finetuning.tagging.sentences import (
    TaggedSplit,
    check_sentence_length,
    read_text_lines,
)

AUTO = "auto"
CONLL = "conll"
JSONL = "jsonl"
SENTENCE_PER_LINE = "sentence_per_line"
NAVER_ORIGINAL = "naver_original"
CLUENER = "cluener"
KLUE_NER = "klue_ner"
LAYOUTS = (CONLL, JSONL, SENTENCE_PER_LINE, NAVER_ORIGINAL, CLUENER, KLUE_NER)
# --tagging_layout: one of LAYOUTS, or auto (detected from the training file).
LAYOUT_CHOICES = (AUTO, *LAYOUTS)
# What each layout looks like, for messages.
LAYOUT_DESCRIPTIONS = {
    CONLL: "conll: one word per line, word first and tag last, a blank line between sentences",
    JSONL: 'jsonl: one JSON object per line, {"tokens": [...], "tags": [...]}',
    SENTENCE_PER_LINE: (
        "sentence_per_line: one sentence per line, words<TAB>tags, as many "
        "space-separated tags as words"
    ),
    NAVER_ORIGINAL: (
        "naver_original: index<TAB>word<TAB>tag per line, the index counting from 1, "
        "tags like PER_B or - for none, a blank line between sentences"
    ),
    CLUENER: (
        'cluener: one JSON object per line, {"text": ..., "label": {type: {entity: '
        "[[start, end]]}}} with inclusive character spans"
    ),
    KLUE_NER: (
        "klue_ner: one character per line, char<TAB>tag (a space a line of its own), ## "
        "comment lines, a blank line between sentences"
    ),
}
JSON_EXTENSIONS = (".jsonl", ".json", ".ndjson")
# Lines looked at to detect a layout.
_DETECTION_LINES = 50
# The Naver challenge's tags: TYPE_B / TYPE_I (the position last, after "_"), or "-".
_NAVER_TAG = re.compile(r"^(\S+)_([BIES])$")
_NAVER_OUTSIDE = "-"
_INTEGER = re.compile(r"^[0-9]+$")


def _layout_error(path: str, line: int, problem: str, layout: str) -> TaskDataError:
    return TaskDataError(
        f"{path}, line {line}: {problem}; expected {LAYOUT_DESCRIPTIONS[layout]} "
        "(--tagging_layout picks another)."
    )


# ---------------------------------------------------------------------------
# CoNLL columns.


def read_conll(
    path: str, name: str, labelled: bool, max_line_chars: int = MAX_ROW_CHARS
) -> TaggedSplit:
    """Reads a CoNLL column file (see the module docstring).

    Raises:
        TaskDataError: a missing or empty file; (labelled) a line with a word
            but no tag column, or a tag holding spaces (a sentence-per-line
            line); a sentence of more than 500 words.
    """
    sentences, tags, lines = [], [], []
    words, sentence_tags, start = [], [], 0

    def close():
        if words:
            check_sentence_length(path, start, len(words), LAYOUT_DESCRIPTIONS[CONLL])
            sentences.append(words)
            tags.append(sentence_tags)
            lines.append(start)

    for number, line in read_text_lines(path, max_line_chars):
        line = line.rstrip("\r")
        fields = line.split("\t") if "\t" in line else line.split()
        fields = [f.strip() for f in fields]
        if not any(fields):
            close()
            words, sentence_tags = [], []
            continue
        if fields[0] == "-DOCSTART-":
            continue
        if labelled and len(fields) < 2:
            raise TaskDataError(
                f"{path}, line {number}: {line!r} has no tag column (word first, "
                "tag last, separated by a tab or spaces)."
            )
        if labelled and len(fields[-1].split()) > 1:
            hint = (
                " (this line looks like the sentence-per-line layout)"
                if len(fields) == 2 and len(fields[0].split()) == len(fields[-1].split())
                else ""
            )
            raise _layout_error(
                path, number, f"the tag {_clip(fields[-1])!r} holds spaces{hint}", CONLL
            )
        if not words:
            start = number
        words.append(fields[0])
        sentence_tags.append(fields[-1])
    close()
    if not sentences:
        raise TaskDataError(
            f"{path}: no sentences (word first, tag last, a blank line between sentences)."
        )
    return TaggedSplit(name, path, sentences, tags if labelled else None, lines, CONLL)


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------
# Sentence per line (Naver NER as KoELECTRA distributes it).


def read_sentence_per_line(
    path: str, name: str, labelled: bool, max_line_chars: int = MAX_ROW_CHARS
) -> TaggedSplit:
    """Reads `words<TAB>tags` lines, one sentence each (see the module docstring).

    Blank lines are skipped.

    Raises:
        TaskDataError: a missing or empty file; a line that is not two
            tab-separated fields (labelled) or whose tag count differs from
            its word count; a sentence of more than 500 words.
    """
    sentences, tags, lines = [], [], []
    for number, line in read_text_lines(path, max_line_chars):
        if not line.strip():
            continue
        fields = line.strip().split("\t")
        if labelled and len(fields) != 2:
            raise _layout_error(
                path, number, f"{len(fields)} tab-separated field(s)", SENTENCE_PER_LINE
            )
        words = fields[0].split()
        check_sentence_length(path, number, len(words), LAYOUT_DESCRIPTIONS[SENTENCE_PER_LINE])
        if labelled:
            sentence_tags = fields[1].split()
            if len(sentence_tags) != len(words):
                raise _layout_error(
                    path,
                    number,
                    f"{len(words)} words but {len(sentence_tags)} tags",
                    SENTENCE_PER_LINE,
                )
            tags.append(sentence_tags)
        sentences.append(words)
        lines.append(number)
    if not sentences:
        raise TaskDataError(f"{path}: no sentences ({LAYOUT_DESCRIPTIONS[SENTENCE_PER_LINE]}).")
    return TaggedSplit(name, path, sentences, tags if labelled else None, lines, SENTENCE_PER_LINE)


# ---------------------------------------------------------------------------
# The Naver NLP Challenge's own files.


def naver_tag(tag: str) -> Optional[str]:
    """A Naver challenge tag as KoELECTRA's suffix tag (`PER_B` -> `PER-B`, `-` -> `O`); None: not one."""
    if tag == _NAVER_OUTSIDE:
        return "O"
    match = _NAVER_TAG.match(tag)
    return f"{match.group(1)}-{match.group(2)}" if match else None


def read_naver_original(
    path: str, name: str, labelled: bool, max_line_chars: int = MAX_ROW_CHARS
) -> TaggedSplit:
    """Reads the Naver NLP Challenge's `index<TAB>word<TAB>tag` lines (see the module docstring).

    Raises:
        TaskDataError: a missing or empty file; a line without three
            tab-separated fields (labelled; two or three unlabelled), an
            index that does not count the sentence's words from 1 (two
            sentences without a blank line between them), a tag that is
            not the challenge's; a sentence of more than 500 words.
    """
    sentences, tags, lines = [], [], []
    words, sentence_tags, start = [], [], 0
    description = LAYOUT_DESCRIPTIONS[NAVER_ORIGINAL]

    def close():
        if words:
            check_sentence_length(path, start, len(words), description)
            sentences.append(words)
            tags.append(sentence_tags)
            lines.append(start)

    for number, line in read_text_lines(path, max_line_chars):
        line = line.strip()
        if not line:
            close()
            words, sentence_tags = [], []
            continue
        fields = line.split("\t")
        if len(fields) != 3 and (labelled or len(fields) != 2):
            raise _layout_error(
                path, number, f"{len(fields)} tab-separated field(s)", NAVER_ORIGINAL
            )
        index = fields[0].strip()
        if not _INTEGER.match(index) or int(index) != len(words) + 1:
            raise _layout_error(
                path,
                number,
                f"index {index!r} where {len(words) + 1} was expected",
                NAVER_ORIGINAL,
            )
        if labelled:
            tag = naver_tag(fields[2].strip())
            if tag is None:
                raise _layout_error(
                    path, number, f"tag {fields[2]!r} is not the challenge's", NAVER_ORIGINAL
                )
            sentence_tags.append(tag)
        if not words:
            start = number
        words.append(fields[1].strip())
    close()
    if not sentences:
        raise TaskDataError(f"{path}: no sentences ({description}).")
    return TaggedSplit(name, path, sentences, tags if labelled else None, lines, NAVER_ORIGINAL)


# ---------------------------------------------------------------------------
# JSON lines: words and tags, or CLUENER's text and spans.


def _json_records(path: str, max_line_chars: int):
    """(line number, object) of every non-blank line; invalid JSON or non-objects refused."""
    for number, line in read_text_lines(path, max_line_chars):
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
        yield number, record


def read_jsonl(
    path: str,
    name: str,
    labelled: bool,
    words_key: str = "tokens",
    tags_key: str = "tags",
    max_line_chars: int = MAX_ROW_CHARS,
) -> TaggedSplit:
    """Reads JSONL sentences `{words_key: [...], tags_key: [...]}`.

    Raises:
        TaskDataError: invalid JSON, a missing key, lists that are not of
            strings or differ in length; a sentence of more than 500 words.
    """
    sentences, tags, lines = [], [], []
    for number, record in _json_records(path, max_line_chars):
        where = f"{path}, line {number}"
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
        check_sentence_length(path, number, len(values[0]), LAYOUT_DESCRIPTIONS[JSONL])
        sentences.append(values[0])
        tags.append([t.strip() for t in values[1]] if labelled else None)
        lines.append(number)
    if not sentences:
        raise TaskDataError(f"{path}: the file has no rows.")
    return TaggedSplit(name, path, sentences, tags if labelled else None, lines, JSONL)


def cluener_tags(text: str, label, where: str) -> list[str]:
    """BIOS tags of every character of `text` from CLUENER's `label` object.

    Args:
        text: the sentence.
        label: {type: {entity text: [[start, end], ...]}}, inclusive
            character spans (None: no entity).
        where: "<file>, line <n>" for messages.

    Raises:
        TaskDataError: a span that is not two integers inside the text, whose
            characters are not the entity's text, or that overlaps another.
    """
    tags = ["O"] * len(text)
    owner: list[Optional[str]] = [None] * len(text)
    if label is None:
        return tags
    if not isinstance(label, dict):
        raise TaskDataError(f"{where}: 'label' must be an object {{type: {{entity: spans}}}}.")
    for type_, entities in label.items():
        if not isinstance(entities, dict):
            raise TaskDataError(f"{where}: label {type_!r} must map entity texts to spans.")
        for entity, spans in entities.items():
            if not isinstance(spans, list):
                raise TaskDataError(f"{where}: the spans of {entity!r} must be a list.")
            for span in spans:
                ok = (
                    isinstance(span, list)
                    and len(span) == 2
                    and all(isinstance(i, int) and not isinstance(i, bool) for i in span)
                    and 0 <= span[0] <= span[1] < len(text)
                )
                if not ok:
                    raise TaskDataError(
                        f"{where}: span {span!r} of {entity!r} is not [start, end] inside "
                        f"the text's {len(text)} characters (inclusive ends)."
                    )
                start, end = span
                if text[start : end + 1] != entity:
                    raise TaskDataError(
                        f"{where}: span {span} is {text[start : end + 1]!r}, not {entity!r} "
                        "(CLUENER spans are inclusive character offsets)."
                    )
                taken = next((owner[i] for i in range(start, end + 1) if owner[i]), None)
                if taken:
                    raise TaskDataError(
                        f"{where}: {type_} {entity!r} at {span} overlaps {taken}; one tag per "
                        "character cannot hold both."
                    )
                for i in range(start, end + 1):
                    owner[i] = f"{type_} {entity!r} at {span}"
                if start == end:
                    tags[start] = f"S-{type_}"
                else:
                    tags[start] = f"B-{type_}"
                    tags[start + 1 : end + 1] = [f"I-{type_}"] * (end - start)
    return tags


def read_cluener(
    path: str, name: str, labelled: bool, max_line_chars: int = MAX_ROW_CHARS
) -> TaggedSplit:
    """Reads CLUENER 2020 lines: every character a word, the spans as BIOS tags.

    Raises:
        TaskDataError: invalid JSON, no string `text`, a bad span (see
            `cluener_tags`); a sentence of more than 500 characters.
    """
    sentences, tags, lines, ids = [], [], [], []
    for number, record in _json_records(path, max_line_chars):
        where = f"{path}, line {number}"
        ids.append(record.get("id", len(ids)))
        text = record.get("text")
        if not isinstance(text, str):
            raise _layout_error(path, number, "no string 'text'", CLUENER)
        check_sentence_length(path, number, len(text), LAYOUT_DESCRIPTIONS[CLUENER])
        sentences.append(list(text))
        if labelled:
            tags.append(cluener_tags(text, record.get("label"), where))
        lines.append(number)
    if not sentences:
        raise TaskDataError(f"{path}: the file has no rows.")
    return TaggedSplit(name, path, sentences, tags if labelled else None, lines, CLUENER, ids)


# ---------------------------------------------------------------------------
# KLUE-NER: one character per line.

_KLUE_COMMENT = "##"
_SPACE = " "


def _klue_ner_lines(path: str, max_line_chars: int = MAX_ROW_CHARS):
    """(line number, character, tag or None) of every character line; (number, None, None) at
    a sentence's end (a blank line, and the end of the file). Comment lines are skipped."""
    for number, line in read_text_lines(path, max_line_chars):
        line = line.rstrip("\r")
        if line.startswith(_KLUE_COMMENT):
            continue
        if not line.strip("\t"):  # KLUE-baseline also reads a lone tab as a blank line
            yield number, None, None
            continue
        fields = line.split("\t")
        if len(fields) > 2 or len(fields[0]) != 1:
            yield number, fields[0], "\t".join(fields[1:]) or None
            continue
        yield number, fields[0], fields[1].strip() if len(fields) == 2 else None
    yield 0, None, None


def read_klue_ner(
    path: str, name: str, labelled: bool, max_line_chars: int = MAX_ROW_CHARS
) -> TaggedSplit:
    """Reads KLUE-NER's character lines (see the module docstring); spaces are not words.

    Raises:
        TaskDataError: a missing or empty file; a line that is not one
            character (and, labelled, a tag after one tab); a sentence of
            more than 500 characters.
    """
    sentences, tags, lines = [], [], []
    words, sentence_tags, start = [], [], 0
    description = LAYOUT_DESCRIPTIONS[KLUE_NER]
    seen_characters = 0
    for number, char, tag in _klue_ner_lines(path, max_line_chars):
        if char is None:
            if seen_characters:
                check_sentence_length(path, start, len(words), description)
                sentences.append(words)
                tags.append(sentence_tags)
                lines.append(start)
            words, sentence_tags, seen_characters = [], [], 0
            continue
        if len(char) != 1:
            raise _layout_error(path, number, f"{_clip(char)!r} is not one character", KLUE_NER)
        if labelled and (tag is None or not tag or "\t" in tag or " " in tag):
            problem = "no tag after the character" if not tag else f"tag {_clip(tag)!r}"
            raise _layout_error(path, number, problem, KLUE_NER)
        if not seen_characters:
            start = number
        seen_characters += 1
        if char == _SPACE:
            continue
        words.append(char)
        sentence_tags.append(tag)
    if not sentences:
        raise TaskDataError(f"{path}: no sentences ({description}).")
    return TaggedSplit(name, path, sentences, tags if labelled else None, lines, KLUE_NER)


def klue_ner_characters(path: str) -> list[list[str]]:
    """Every sentence's characters, spaces included, as `read_klue_ner` reads the file."""
    sentences, current = [], []
    for _, char, _ in _klue_ner_lines(path):
        if char is None:
            if current:
                sentences.append(current)
            current = []
        else:
            current.append(char)
    return sentences


# ---------------------------------------------------------------------------
# Which layout.


def detect_layout(path: str, max_line_chars: int = MAX_ROW_CHARS) -> str:
    """The layout of a labelled tagging file (see the module docstring for the rules).

    Raises:
        TaskDataError: a missing file or invalid UTF-8.
    """
    lines = [line.strip() for _, line in read_text_lines(path, max_line_chars)]
    if path.lower().endswith(JSON_EXTENSIONS):
        for line in lines:
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                return JSONL  # its reader names the line
            is_text = isinstance(record, dict) and isinstance(record.get("text"), str)
            return CLUENER if is_text and "tokens" not in record else JSONL
        return JSONL
    sample = [line for line in lines if line][:_DETECTION_LINES]
    if not sample:
        return CONLL
    if sample[0].startswith(_KLUE_COMMENT):
        return KLUE_NER
    # The challenge's files: integer, word, tag, the integers counting from 1.
    expected, seen, naver = 1, 0, True
    for line in lines:
        if seen == _DETECTION_LINES:
            break
        if not line:
            expected = 1
            continue
        seen += 1
        fields = line.split("\t")
        if len(fields) != 3 or not _INTEGER.match(fields[0]) or int(fields[0]) != expected:
            naver = False
            break
        expected += 1
    if naver:
        return NAVER_ORIGINAL
    # Most lines `words<TAB>tags`: the few that are not are faults its reader names by line.
    pairs = [
        f
        for f in (line.split("\t") for line in sample)
        if len(f) == 2 and len(f[0].split()) == len(f[1].split())
    ]
    if 2 * len(pairs) > len(sample) and any(len(f[0].split()) > 1 for f in pairs):
        return SENTENCE_PER_LINE
    return CONLL


def read_tagged_file(
    path: str,
    name: str,
    labelled: bool,
    layout: str = AUTO,
    words_key: str = "tokens",
    tags_key: str = "tags",
    max_line_chars: int = MAX_ROW_CHARS,
) -> TaggedSplit:
    """A tagging file in `layout` (`auto`: detected, see the module docstring).

    An unlabelled file in `auto` is read as `jsonl` or `conll` by its
    extension: give it the training file's layout instead.

    Raises:
        TaskDataError: an unknown layout, or content that does not fit it.
    """
    if layout == AUTO:
        if labelled:
            layout = detect_layout(path, max_line_chars)
        else:
            layout = JSONL if path.lower().endswith(JSON_EXTENSIONS) else CONLL
    if layout == CONLL:
        return read_conll(path, name, labelled, max_line_chars)
    if layout == JSONL:
        return read_jsonl(path, name, labelled, words_key, tags_key, max_line_chars)
    if layout == SENTENCE_PER_LINE:
        return read_sentence_per_line(path, name, labelled, max_line_chars)
    if layout == NAVER_ORIGINAL:
        return read_naver_original(path, name, labelled, max_line_chars)
    if layout == CLUENER:
        return read_cluener(path, name, labelled, max_line_chars)
    if layout == KLUE_NER:
        return read_klue_ner(path, name, labelled, max_line_chars)
    raise TaskDataError(f"--tagging_layout={layout!r}: choose {', '.join(LAYOUT_CHOICES)}.")
