"""SQuAD-format question answering data: local JSON files or TensorFlow Datasets.

The JSON schema is SQuAD's (KorQuAD 1.0, DRCD and CMRC 2018's SQuAD-style
files use it too, read as they are distributed, traditional and simplified
characters alike):

    {"data": [{"title": ..., "paragraphs": [{"context": ...,
               "qas": [{"id": ..., "question": ..., "answers": [{"text", "answer_start"}],
                        "is_impossible": false}]}]}]}

KLUE-MRC names a question's id `guid` (beside `question_type` and
`is_impossible`), which is read as its `id`. `answer_start` counts Python
characters (Unicode code points) into the context. A training answer whose text is not found at its `answer_start` is
skipped with a count, as the original code does; evaluation examples keep all
their gold answers since they are only compared as text.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Optional

from electra_tf.bounded_lines import line_too_long
from electra_tf.finetuning.kind.files import MAX_ROW_CHARS, TaskDataError

VERSIONS = ("1.1", "2.0")
# The largest SQuAD-format file read: `json.load` holds the file's text and
# every object parsed from it at once (SQuAD 2.0's training file is 40 MB).
MAX_FILE_BYTES = 1 << 30


class SquadDataError(TaskDataError):
    """SQuAD data cannot be read; the message names the file and the entry at fault."""


@dataclasses.dataclass
class QAExample:
    """One question about one context.

    Attributes:
        qas_id: the question id (the key of predictions.json).
        question: question text.
        context: the paragraph, exactly as in the data.
        answers: gold answers as (text, character start) pairs; empty when
            the question is unanswerable.
        is_impossible: SQuAD 2.0's "no answer in this context".
        title: the article title.
    """

    qas_id: str
    question: str
    context: str
    answers: list[tuple[str, int]]
    is_impossible: bool = False
    title: str = ""

    @property
    def answer_span(self) -> Optional[tuple[int, int]]:
        """Character span [start, end) of the first answer (the one trained on)."""
        if self.is_impossible or not self.answers:
            return None
        text, start = self.answers[0]
        return start, start + len(text)


@dataclasses.dataclass
class SquadSplit:
    """Examples of one split plus what was skipped while reading it.

    `dataset_version` is the file's `version` field (KorQuAD's files say
    `KorQuAD_v1.0_dev`; "" when absent), which names the dataset's metric.
    """

    examples: list[QAExample]
    source: str
    skipped: int = 0
    dataset_version: str = ""

    def __len__(self):
        return len(self.examples)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _clean(text: str) -> str:
    """Replaces lone UTF-16 surrogates (JSON "\\ud83d" escapes without a pair) by U+FFFD.

    They cannot be encoded as UTF-8 for the tokenizer; replacing one
    character by one keeps every `answer_start` valid.
    """
    return _LONE_SURROGATE.sub("\ufffd", text)


def _squash(text: str) -> str:
    return " ".join(text.split())


def answer_matches(context: str, text: str, start: int) -> bool:
    """Whether `text` is at character `start` of `context` (whitespace runs may differ)."""
    if start < 0 or start > len(context) or not text.strip():
        return False
    if context[start : start + len(text)] == text:
        return True
    return _squash(context[start : start + len(text) + 10]).startswith(_squash(text))


def _require(condition: bool, source: str, where: str, message: str) -> None:
    if not condition:
        raise SquadDataError(
            f"{source}: {where}: {message} (expected SQuAD JSON: "
            '{"data": [{"paragraphs": [{"context", "qas": [{"id", '
            '"question", "answers": [{"text", "answer_start"}]}]}]}]})'
        )


def _require_length(text: str, limit: int, source: str, where: str, what: str) -> None:
    if len(text) > limit:
        where = f"{source}: {where} ({len(text):,} characters)"
        raise SquadDataError(line_too_long(where, limit, "--max_row_chars", what))


def examples_from_articles(
    articles,
    source: str,
    version: str,
    is_training: bool,
    warn=None,
    max_text_chars: int = MAX_ROW_CHARS,
) -> SquadSplit:
    """Turns the `data` list of a SQuAD JSON document into examples.

    Args:
        articles: the parsed `data` list.
        source: file name used in messages.
        version: "1.1" or "2.0"; with 1.1 `is_impossible` is ignored.
        is_training: check the first answer of every answerable question
            against its context and skip mismatches (counted).
        warn: called with a message for each skipped question (first few).
        max_text_chars: the longest context or question accepted
            (--max_row_chars): features hold a few copies of each.

    Raises:
        SquadDataError: the structure is not SQuAD's, or a context or
            question is longer than `max_text_chars`.
    """
    _require(isinstance(articles, list), source, "data", "is not a list")
    examples, skipped = [], 0
    for a, article in enumerate(articles):
        _require(
            isinstance(article, dict) and isinstance(article.get("paragraphs"), list),
            source,
            f"data[{a}]",
            "has no list 'paragraphs'",
        )
        title = str(article.get("title", ""))
        for p, paragraph in enumerate(article["paragraphs"]):
            where = f"data[{a}].paragraphs[{p}]"
            _require(
                isinstance(paragraph, dict)
                and isinstance(paragraph.get("context"), str)
                and isinstance(paragraph.get("qas"), list),
                source,
                where,
                "needs a string 'context' and a list 'qas'",
            )
            _require_length(paragraph["context"], max_text_chars, source, where, "context")
            context = _clean(paragraph["context"])
            for q, qa in enumerate(paragraph["qas"]):
                here = f"{where}.qas[{q}]"
                _require(
                    isinstance(qa, dict)
                    and ("id" in qa or "guid" in qa)
                    and isinstance(qa.get("question"), str),
                    source,
                    here,
                    "needs 'id' (KLUE-MRC: 'guid') and a string 'question'",
                )
                _require_length(qa["question"], max_text_chars, source, here, "question")
                qas_id = str(qa["id"] if "id" in qa else qa["guid"])
                raw_answers = qa.get("answers", [])
                _require(isinstance(raw_answers, list), source, here, "'answers' is not a list")
                answers = []
                for n, answer in enumerate(raw_answers):
                    _require(
                        isinstance(answer, dict)
                        and isinstance(answer.get("text"), str)
                        and isinstance(answer.get("answer_start"), int),
                        source,
                        f"{here}.answers[{n}]",
                        "needs a string 'text' and an integer 'answer_start'",
                    )
                    start = answer["answer_start"]
                    # Training skips such an answer (below); evaluation has nothing to skip to.
                    if not is_training and not 0 <= start <= len(context):
                        raise SquadDataError(
                            f"{source}: {here}.answers[{n}] (id {qas_id}): answer_start="
                            f"{start} lies outside its context of {len(context)} characters; "
                            "answer_start counts characters into the context: fix that offset."
                        )
                    answers.append((_clean(answer["text"]), start))
                impossible = version == "2.0" and bool(qa.get("is_impossible", False))
                if impossible:
                    answers = []  # SQuAD 2.0 gold for "no answer" is the empty string
                elif not answers or (is_training and not answer_matches(context, *answers[0])):
                    skipped += 1
                    if warn and skipped <= 5:
                        reason = (
                            "has no answer"
                            if not answers
                            else f"answer {answers[0][0]!r} is not at character "
                            f"{answers[0][1]} of the context"
                        )
                        warn(f"{source}: {here} (id {qas_id}) {reason}; skipped.")
                    continue
                examples.append(
                    QAExample(qas_id, _clean(qa["question"]), context, answers, impossible, title)
                )
    return SquadSplit(examples, source, skipped)


def _check_top_level(document, path: str) -> None:
    """The document is SQuAD's `{"data": [...]}`; CMRC 2018's original layout is named."""
    if (
        isinstance(document, list)
        and document
        and isinstance(document[0], dict)
        and "context_text" in document[0]
    ):
        raise SquadDataError(
            f"{path}: CMRC 2018's original layout (a list of context_text / qas with "
            "query_text); read the SQuAD-style files of ymcui/cmrc2018 (squad-style-data/), "
            "as Chinese-ELECTRA does."
        )
    _require(
        isinstance(document, dict) and "data" in document, path, "top level", "has no 'data' key"
    )


def _read_document(path: str) -> dict:
    """A SQuAD-format file's JSON document, its top level checked.

    Raises:
        SquadDataError: missing file, a file larger than `MAX_FILE_BYTES`,
            invalid JSON, or a top level that is not SQuAD's.
    """
    if not os.path.isfile(path):
        raise SquadDataError(f"{path}: no such file.")
    size = os.path.getsize(path)
    if size > MAX_FILE_BYTES:
        raise SquadDataError(
            f"{path}: {size:,} bytes, more than the {MAX_FILE_BYTES:,} a SQuAD-format file may "
            "hold (it is parsed whole, taking a few times its size in memory); is it the right "
            "file? Split its articles into smaller files."
        )
    try:
        with open(path, encoding="utf-8-sig") as f:
            document = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise SquadDataError(f"{path}: not a UTF-8 JSON file ({error}).") from None
    _check_top_level(document, path)
    return document


def read_squad_json(
    path: str, version: str, is_training: bool, warn=None, max_text_chars: int = MAX_ROW_CHARS
) -> SquadSplit:
    """Reads a SQuAD-format JSON file (SQuAD 1.1/2.0, KorQuAD, ...).

    Raises:
        SquadDataError: missing file, invalid JSON, not SQuAD's schema, or a
            context or question longer than `max_text_chars` (--max_row_chars).
    """
    if version not in VERSIONS:
        raise SquadDataError(f"--squad_version={version}: must be one of {', '.join(VERSIONS)}.")
    document = _read_document(path)
    split = examples_from_articles(
        document["data"], path, version, is_training, warn, max_text_chars
    )
    if not split.examples:
        raise SquadDataError(f"{path}: no usable questions ({split.skipped} skipped).")
    split.dataset_version = str(document.get("version") or "")
    return split


@dataclasses.dataclass
class GoldAnswers:
    """What an official evaluation script reads from a data file.

    Attributes:
        answers: question id -> gold answer texts, for every question (an
            unanswerable SQuAD 2.0 question has none).
        version: the file's `version` field ("" when absent).
        has_unanswerable: some question is marked `is_impossible`.
    """

    answers: dict
    version: str
    has_unanswerable: bool


def read_gold_answers(path: str) -> GoldAnswers:
    """Every question's gold answers in a SQuAD-format file (as the official scripts read them).

    Raises:
        SquadDataError: missing file, invalid JSON or not SQuAD's schema.
    """
    document = _read_document(path)
    impossible = False
    for article in document["data"] if isinstance(document["data"], list) else []:
        for paragraph in article.get("paragraphs", []) if isinstance(article, dict) else []:
            for qa in paragraph.get("qas", []) if isinstance(paragraph, dict) else []:
                impossible |= isinstance(qa, dict) and bool(qa.get("is_impossible", False))
    split = examples_from_articles(
        document["data"], path, "2.0" if impossible else "1.1", is_training=False
    )
    if split.skipped:
        raise SquadDataError(
            f"{path}: {split.skipped} question(s) have no answer and are not "
            "marked is_impossible; the official scripts cannot score them."
        )
    return GoldAnswers(
        {e.qas_id: [text for text, _ in e.answers] for e in split.examples},
        str(document.get("version") or ""),
        impossible,
    )


def load_tfds_squad(
    version: str, split: str, tfds_data_dir: Optional[str], is_training: bool, warn=None
) -> SquadSplit:
    """Reads `squad/v1.1` or `squad/v2.0` prepared by TensorFlow Datasets (no download).

    Args:
        version: "1.1" or "2.0".
        split: "train" or "validation".
        tfds_data_dir: where the dataset is prepared (None: TFDS's default).
        is_training: check and skip mismatched answers (see the module docstring).

    Raises:
        SquadDataError: the dataset is not prepared there.
    """
    import tensorflow_datasets as tfds

    name = f"squad/v{version}"
    try:
        dataset = tfds.load(name, split=split, download=False, data_dir=tfds_data_dir)
    except (AssertionError, FileNotFoundError, tfds.core.registered.DatasetNotFoundError) as error:
        where = tfds_data_dir or "the default TFDS directory"
        raise SquadDataError(
            f"TFDS dataset {name} is not prepared in {where} ({error.__class__.__name__}). Pass "
            "--train_file/--predict_file (SQuAD JSON) instead, or prepare it once with "
            f"tfds.builder('{name}').download_and_prepare()."
        ) from None
    source = f"tfds:{name}/{split}"
    examples, skipped = [], 0
    for row in tfds.as_numpy(dataset):
        context = row["context"].decode("utf-8")
        texts = [t.decode("utf-8") for t in row["answers"]["text"]]
        starts = [int(s) for s in row["answers"]["answer_start"]]
        impossible = version == "2.0" and bool(row.get("is_impossible", False))
        answers = [] if impossible else list(zip(texts, starts))
        qas_id = row["id"].decode("utf-8")
        if not impossible and (
            not answers or (is_training and not answer_matches(context, *answers[0]))
        ):
            skipped += 1
            if warn and skipped <= 5:
                warn(f"{source}: question {qas_id} has no answer matching its context; skipped.")
            continue
        examples.append(
            QAExample(
                qas_id,
                row["question"].decode("utf-8"),
                context,
                answers,
                impossible,
                row["title"].decode("utf-8"),
            )
        )
    return SquadSplit(examples, source, skipped)
