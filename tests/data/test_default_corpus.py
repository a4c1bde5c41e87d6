"""Tests for electra_tf.data.default_corpus on a fake package tree."""

import os
import textwrap

import pytest

from electra_tf.data import default_corpus
from electra_tf.data.default_corpus import build_default_corpus, docstring_paragraphs

ALPHA_INIT = '''\
"""Tools for measuring the growth of plants in a small garden.

This package explains how the measurements are taken and stored, and
why the gardener repeats every reading twice before writing it down.

>>> measure("rose")
12.5
This line belongs to the doctest output and must disappear.

A paragraph that introduces a literal block keeps its words::

    x = measure("tulip")
    print(x)

The readings below were copied from the notebook of the gardener. ::

    raw readings that are indented and therefore not prose at all

```python
def hidden():
    return "fenced code never reaches the corpus at any time"
```

Args:
    plant: The name of the plant that will be measured today.

Too short to keep.

- The first list item talks about watering the plants every morning
  and continues on an indented line.
- x = y + 1

Returns:
    A measurement in centimetres, as a floating point number.

See the :func:`measure` function and ``the_garden`` variable for more details.
"""


def measure(plant):
    """Measure one plant and return its height in centimetres.

    The measurement uses a wooden ruler that is older than the gardener.
    """
    return 1.0


class Garden:
    """A garden holds many plants that grow at different speeds.

    Attributes:
        plants: Every plant in the garden, in the order they were planted.
    """
'''

BETA = '''\
"""Functions that describe the weather for the garden in plain words.

Parameters
----------
day : str
    The day of the week for which the weather is described here.
season : str
    The season, which decides whether snow is possible at all.

+--------+--------+
| sun    | rain   |
+--------+--------+

Notes
-----
Rain in the morning usually means that the afternoon will be sunny and warm.

Tools for measuring the growth of plants in a small garden.
"""
'''

SIDE_EFFECTS = '''\
"""Importing this module would fail, but its documentation is still read."""
raise RuntimeError("this module must never be imported")
'''

BROKEN = '''\
"""This docstring sits in a file that does not parse, so it is never read."""
def oops(:
'''

SKIPPED_TEST = '''\
"""This docstring lives in a tests directory and must never appear here."""
'''

EXPECTED = [
    # alpha/__init__.py: one document, docstrings in source order.
    "Tools for measuring the growth of plants in a small garden.",
    "This package explains how the measurements are taken and stored, and why the "
    "gardener repeats every reading twice before writing it down.",
    "A paragraph that introduces a literal block keeps its words:",
    "The readings below were copied from the notebook of the gardener.",
    "The first list item talks about watering the plants every morning and continues "
    "on an indented line.",
    "See the measure function and the_garden variable for more details.",
    "Measure one plant and return its height in centimetres.",
    "The measurement uses a wooden ruler that is older than the gardener.",
    "A garden holds many plants that grow at different speeds.",
    "",
    # beta.py (round-robin: the next top-level unit); its last paragraph is a
    # duplicate of alpha's first and is dropped.
    "Functions that describe the weather for the garden in plain words.",
    "Rain in the morning usually means that the afternoon will be sunny and warm.",
    "",
    # alpha/sidefx.py (alpha/broken.py does not parse).
    "Importing this module would fail, but its documentation is still read.",
]


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture()
def site_dir(tmp_path):
    site = tmp_path / "site-packages"
    write(site / "alpha" / "__init__.py", ALPHA_INIT)
    write(site / "alpha" / "broken.py", BROKEN)
    write(site / "alpha" / "sidefx.py", SIDE_EFFECTS)
    write(site / "alpha" / "tests" / "test_alpha.py", SKIPPED_TEST)
    write(site / "alpha" / "alpha_test.py", SKIPPED_TEST)
    write(site / "alpha-1.0.dist-info" / "notes.py", SKIPPED_TEST)
    write(site / "beta.py", BETA)
    write(site / "README.txt", SKIPPED_TEST)
    return str(site)


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert text.endswith("\n") and not text.endswith("\n\n")
    return text[:-1].split("\n")


def test_exact_output_and_stats(site_dir, tmp_path):
    out = str(tmp_path / "out" / "corpus.txt")
    stats = build_default_corpus(out, search_paths=[site_dir])
    assert read_lines(out) == EXPECTED
    size = os.path.getsize(out)
    assert stats == {
        "files_scanned": 4,  # alpha/__init__, beta, alpha/broken, alpha/sidefx
        "docstrings": 5,  # 3 in alpha/__init__, 1 in beta, 1 in sidefx
        "paragraphs": 12,
        "bytes": size,
        "documents": 3,
        "path": os.path.abspath(out),
    }
    assert size == sum(len(line.encode("utf-8")) + 1 for line in EXPECTED)
    assert os.listdir(tmp_path / "out") == ["corpus.txt"]  # No temporary file left.


def test_deterministic(site_dir, tmp_path):
    a = tmp_path / "a.txt"
    b = tmp_path / "b.txt"
    build_default_corpus(str(a), search_paths=[site_dir])
    build_default_corpus(str(b), search_paths=[site_dir, site_dir + "/"])  # Same root twice.
    assert a.read_bytes() == b.read_bytes()


def test_max_bytes_cap(site_dir, tmp_path):
    # Room for the first document, the separator and one line of the second.
    first_doc = EXPECTED[: EXPECTED.index("")]
    budget = sum(len(s.encode()) + 1 for s in first_doc) + 1 + len(EXPECTED[10]) + 1
    out = tmp_path / "capped.txt"
    for max_bytes in (budget, budget + 10):
        stats = build_default_corpus(str(out), search_paths=[site_dir], max_bytes=max_bytes)
        assert read_lines(out) == first_doc + ["", EXPECTED[10]]
        assert stats["bytes"] == budget == os.path.getsize(out)
        assert stats["documents"] == 2 and stats["paragraphs"] == len(first_doc) + 1

    with pytest.raises(ValueError, match="max_bytes"):
        build_default_corpus(str(tmp_path / "tiny.txt"), search_paths=[site_dir], max_bytes=10)
    assert not os.path.exists(tmp_path / "tiny.txt")


def test_min_chars_and_errors(site_dir, tmp_path):
    out = tmp_path / "long.txt"
    build_default_corpus(str(out), search_paths=[site_dir], min_chars=70)
    docs, doc = [], []
    for line in EXPECTED + [""]:
        if line:
            doc.append(line)
        else:
            docs.append([x for x in doc if len(x) >= 70])
            doc = []
    expected = []
    for doc in filter(None, docs):
        expected += ([""] if expected else []) + doc
    assert len(expected) < len(EXPECTED)
    assert read_lines(out) == expected

    with pytest.raises(ValueError, match="not directories"):
        build_default_corpus(str(out), search_paths=[str(tmp_path / "nope")])
    empty = tmp_path / "empty_site"
    write(empty / "gamma.py", "x = 1\n")
    with pytest.raises(ValueError, match="no documentation prose"):
        build_default_corpus(str(tmp_path / "e.txt"), search_paths=[str(empty)])


def test_round_robin_across_packages(tmp_path):
    site = tmp_path / "site"
    for pkg in ("aaa", "bbb"):
        for mod in ("one", "two"):
            write(
                site / pkg / f"{mod}.py",
                f'"""The module {mod} of package {pkg} explains one small idea in words."""\n',
            )
    out = tmp_path / "rr.txt"
    build_default_corpus(str(out), search_paths=[str(site)])
    assert [line.split()[2] + "/" + line.split()[5] for line in read_lines(out) if line] == [
        "one/aaa",
        "one/bbb",
        "two/aaa",
        "two/bbb",
    ]


def test_paragraph_rules():
    doc = textwrap.dedent("""\
        Summary line that is long enough to be kept as a paragraph.
        Args:
            x: indented description.

        # Examples
        Plain text under a Markdown examples header is skipped entirely.

        ## Details
        Text under a *Details* header is kept again, as it is prose.

        .. note::
            Directive bodies are indented and dropped.

        :param x: a field list entry is dropped.
        @compatibility(TF2)
        Marker lines such as the one above are dropped.
        ~~~
        fenced with tildes
        ~~~
        The `interpreted` text and a [link](https://example.org) are unwrapped.
        """)
    assert docstring_paragraphs(doc) == [
        "Summary line that is long enough to be kept as a paragraph.",
        "Text under a *Details* header is kept again, as it is prose.",
        "Marker lines such as the one above are dropped.",
        "The interpreted text and a link are unwrapped.",
    ]
    assert not default_corpus.is_prose("x = np.array([1, 2, 3]) + y[0] * z.", 10)
    assert not default_corpus.is_prose("A sentence without final punctuation here", 10)
    assert default_corpus.is_prose("A short but real sentence is kept.", 10)


def test_default_search_paths_exist():
    paths = default_corpus.default_search_paths()
    assert paths == sorted(set(paths)) and paths
    assert all(os.path.isdir(p) for p in paths)
