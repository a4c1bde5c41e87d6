"""A tagging trial's predictions in the conlleval layout.

    dev_predictions.txt     one line per word: `word gold predicted`
    test_predictions.txt    one line per word: `word predicted`

Columns are separated by one space and sentences by a blank line, so that
conlleval (`conlleval < dev_predictions.txt`) and `seqeval` readers take
the dev file as it is. A word that is empty or holds whitespace (possible
in JSONL input) is written with each whitespace run replaced by `_` (and
`_` for the empty word), keeping one word per column.
"""

from __future__ import annotations

import re
from typing import Sequence

from electra_tf.artifacts.files import atomic_open

DEV_PREDICTIONS_FILE = "dev_predictions.txt"
TEST_PREDICTIONS_FILE = "test_predictions.txt"
_SPACES = re.compile(r"\s+")


def _column(word: str) -> str:
    return _SPACES.sub("_", word) or "_"


def write_tagged(
    path: str, sentences: Sequence[Sequence[str]], *tag_columns: Sequence[Sequence[str]]
) -> None:
    """Writes words and tag columns (gold, predicted; or predicted alone), atomically."""
    with atomic_open(path) as f:
        for i, words in enumerate(sentences):
            for j, word in enumerate(words):
                f.write(" ".join([_column(word)] + [column[i][j] for column in tag_columns]) + "\n")
            f.write("\n")


def read_tagged(path: str) -> list[list[list[str]]]:
    """The sentences of such a file: per sentence, per word, its columns."""
    sentences, current = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if fields:
                current.append(fields)
            elif current:
                sentences.append(current)
                current = []
    if current:
        sentences.append(current)
    return sentences
