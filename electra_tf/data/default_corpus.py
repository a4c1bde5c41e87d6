"""A built-in pre-training corpus: the documentation of installed Python packages.

Every machine that can run this project has TensorFlow, Keras, NumPy and their
dependencies installed, and those packages carry megabytes of English prose in
their docstrings. Extracting it gives a default corpus that exists offline,
needs no download and ships nothing third-party in this repository.

Source files are only *parsed* with `ast`; no module is ever imported, so
extraction has no side effects and works for packages whose imports would
fail.

Cleaning keeps natural-language sentences and drops everything else:

* doctest examples (a `>>>` line up to the next blank line), fenced code
  (```` ``` ```` / `~~~`), reST directives (`.. note::`) and field lists
  (`:param x:`);
* every indented block (reST literal blocks, Google-style `Args:` entries,
  NumPy-style parameter descriptions); a paragraph that introduces a literal
  block keeps its text, with `text::` written as `text:` (reST's own rule);
* section headers (`Args:`, `Returns`/`-------`, `# Usage`) and the whole body
  of reference-like sections (parameters, returns, raises, examples, see
  also, references, ...);
* inline markup is unwrapped (``:class:`~a.B` `` -> `a.B`, ``` ``x`` ``` -> `x`).

Each remaining paragraph (lines between blank lines; list items count as
paragraphs of their own) is collapsed to a single line and kept only if it
looks like prose: at least `min_chars` characters and five words, mostly
letters, ending with sentence punctuation, no control characters.

Output format (the usual ELECTRA/BERT input): one paragraph per line and a
blank line between documents. A document is one module: its module, class and
function docstrings in source order, so consecutive lines of a document are
related text that the pre-training example builder can pair up. Identical
paragraphs are written once (many packages repeat or vendor docstrings).

Files are visited deterministically: top-level packages of every search path
in sorted order, taken round-robin one module at a time (files inside a
package in sorted walk order). The round-robin makes a byte-capped corpus a
mix of many packages instead of the alphabetically first few.
"""

from __future__ import annotations

import ast
import collections
import logging
import os
import re
import site
import sysconfig
import time
import unicodedata
import warnings
from typing import Iterable, Iterator, Optional

logger = logging.getLogger(__name__)

# Larger sources are generated tables or bundled data, not documentation, and
# parsing them costs more than they are worth.
MAX_SOURCE_BYTES = 2_000_000

_SKIP_DIRS = frozenset({"tests", "test", "testing", "__pycache__", "node_modules"})

# Sections whose bodies are reference material rather than prose.
_SKIP_SECTIONS = frozenset(
    {
        "args",
        "arguments",
        "attributes",
        "call arguments",
        "examples",
        "example",
        "input shape",
        "keyword args",
        "keyword arguments",
        "kwargs",
        "methods",
        "other parameters",
        "output shape",
        "parameters",
        "params",
        "raises",
        "receives",
        "reference",
        "references",
        "return",
        "returns",
        "see also",
        "usage",
        "example usage",
        "standalone usage",
        "warns",
        "yield",
        "yields",
    }
)

_UNDERLINE_RE = re.compile(r"^([=\-~^\"'`#*+_.:])\1{2,}\s*$")
_COLON_HEADER_RE = re.compile(r"^[A-Za-z][\w-]*(?: [\w-]+){0,3}:$")
_MD_HEADER_RE = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET_RE = re.compile(r"^(?:[-*+\u2022]|\d{1,3}[.)]|\(\d{1,3}\)|[a-z][.)])\s+")
_FIELD_RE = re.compile(r"^:[^:\s][^:]*:(\s|$)")
_FENCE_RE = re.compile(r"^(```|~~~)")
_ROLE_RE = re.compile(r":[\w.+-]+(?::[\w.+-]+)?:`~?([^`]*)`")
_INLINE_LITERAL_RE = re.compile(r"``([^`]+)``")
_INTERPRETED_RE = re.compile(r"`~?([^`]+)`_{0,2}")
_LINK_RE = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_SPACE_RE = re.compile(r"\s+")
_END_PUNCT_RE = re.compile(r"[.!?:][\"')\]]*$")


def default_search_paths() -> list[str]:
    """Site-packages directories of the running interpreter.

    Returns:
        Sorted, de-duplicated, existing directories: `site.getsitepackages()`
        plus the user site directory when present, falling back to the
        `sysconfig` purelib/platlib paths.
    """
    candidates: list[str] = []
    try:
        candidates.extend(site.getsitepackages())
    except AttributeError:  # Some embedded/virtualenv builds lack it.
        pass
    try:
        candidates.append(site.getusersitepackages())
    except AttributeError:
        pass
    paths = sysconfig.get_paths()
    candidates.extend(p for p in (paths.get("purelib"), paths.get("platlib")) if p)
    return sorted({os.path.realpath(p) for p in candidates if p and os.path.isdir(p)})


# ---------------------------------------------------------------------------
# File discovery.


def _is_skipped_dir(name: str) -> bool:
    return name.startswith(".") or name in _SKIP_DIRS or name.endswith((".dist-info", ".egg-info"))


def _is_source_file(name: str) -> bool:
    # Test modules living beside the code (TensorFlow's `*_test.py`) are not
    # documentation either.
    return (
        name.endswith(".py")
        and not name.startswith(("test_", "."))
        and not name.endswith("_test.py")
        and name != "conftest.py"
    )


def _walk_package(top: str) -> Iterator[str]:
    """Yields the source files under `top` in sorted walk order."""
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if not _is_skipped_dir(d))
        for name in sorted(filenames):
            if _is_source_file(name):
                yield os.path.join(dirpath, name)


def _iter_files_round_robin(roots: Iterable[str]) -> Iterator[str]:
    """Yields source files, alternating between top-level packages."""
    units: collections.deque[Iterator[str]] = collections.deque()
    for root in roots:
        try:
            entries = sorted(os.listdir(root))
        except OSError as err:
            logger.warning("Cannot list %s: %s", root, err)
            continue
        for name in entries:
            full = os.path.join(root, name)
            if os.path.isdir(full):
                if not _is_skipped_dir(name):
                    units.append(_walk_package(full))
            elif _is_source_file(name):
                units.append(iter([full]))
    while units:
        unit = units.popleft()
        path = next(unit, None)
        if path is not None:
            yield path
            units.append(unit)


# ---------------------------------------------------------------------------
# Docstring extraction.

_DOC_NODES = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def extract_docstrings(source: bytes) -> list[str]:
    """Docstrings of a module, its classes and functions, in source order.

    Args:
        source: raw bytes of a Python file (its encoding cookie is honoured).

    Returns:
        The cleaned (`inspect.cleandoc`-style) docstrings.

    Raises:
        SyntaxError, ValueError, RecursionError: the source does not parse.
    """
    with warnings.catch_warnings():
        # Invalid escape sequences in old code only warn; silence them.
        warnings.simplefilter("ignore")
        tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, _DOC_NODES):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                found.append((getattr(node, "lineno", 0), getattr(node, "col_offset", 0), doc))
    found.sort(key=lambda item: (item[0], item[1]))
    return [doc for _, _, doc in found]


# ---------------------------------------------------------------------------
# Docstring cleaning.


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _unwrap_markup(text: str) -> str:
    text = _ROLE_RE.sub(r"\1", text)
    text = _INLINE_LITERAL_RE.sub(r"\1", text)
    text = _INTERPRETED_RE.sub(r"\1", text)
    text = _LINK_RE.sub(r"\1", text)
    return text


def _is_symbol_line(stripped: str) -> bool:
    """True for table borders, ASCII art and other mostly non-letter lines."""
    chars = [c for c in stripped if not c.isspace()]
    if not chars:
        return False
    letters = sum(c.isalpha() for c in chars)
    return letters < 0.5 * len(chars)


def docstring_paragraphs(doc: str) -> list[str]:
    """Splits a cleaned docstring into single-line paragraphs of text.

    Code, indented blocks, headers and reference sections are removed (see
    the module docstring); no prose filter is applied yet.

    Args:
        doc: a docstring as returned by `ast.get_docstring(clean=True)`.

    Returns:
        Paragraphs with whitespace collapsed and inline markup unwrapped.
    """
    lines = doc.expandtabs(8).splitlines()
    paragraphs: list[str] = []
    current: list[str] = []
    item_indent: Optional[int] = None  # Text column of the open list item.
    # Reference sections are skipped: Google-style ones ("Args:") while
    # their body stays indented, NumPy/Markdown ones up to the next header.
    skipping: Optional[str] = None  # None, "indented" or "section".

    def flush() -> None:
        nonlocal item_indent
        if current and skipping is None:
            text = " ".join(current)
            # reST: "text::" introduces a literal block and reads as "text:";
            # a bare " ::" disappears.
            if text.endswith("::"):
                text = text[:-2].rstrip() if text[:-2].endswith((" ", "\t")) else text[:-1]
            paragraphs.append(_SPACE_RE.sub(" ", _unwrap_markup(text)).strip())
        current.clear()
        item_indent = None

    def start_section(title: str, mode: str) -> None:
        nonlocal skipping
        flush()
        skipping = mode if title.strip().rstrip(":").strip().lower() in _SKIP_SECTIONS else None

    i = 0
    n = len(lines)
    while i < n:
        line = lines[i].rstrip()
        stripped = line.strip()
        indent = _indent(line)

        if not stripped:
            flush()
            i += 1
            continue

        if _FENCE_RE.match(stripped):
            # Fenced code: drop through the closing fence (or the end).
            flush()
            fence = stripped[:3]
            i += 1
            while i < n and not lines[i].strip().startswith(fence):
                i += 1
            i += 1
            continue

        if stripped.startswith(">>>"):
            # Doctest: the example and its expected output run to a blank line.
            flush()
            while i < n and lines[i].strip():
                i += 1
            continue

        if indent > 0:
            if item_indent is not None and indent <= item_indent and not _BULLET_RE.match(stripped):
                current.append(stripped)  # Continuation of a list item.
            else:
                # Literal blocks, parameter descriptions, directive bodies.
                flush()
            i += 1
            continue

        # Unindented line from here on: an indented section body has ended.
        if skipping == "indented":
            skipping = None
        next_line = lines[i + 1].strip() if i + 1 < n else ""
        # reST wants the underline at least as long as the title; allow some
        # sloppiness, but a short "~~~" fence under a sentence is no underline.
        if (
            _UNDERLINE_RE.match(next_line)
            and not _UNDERLINE_RE.match(stripped)
            and len(next_line) >= 0.75 * len(stripped)
        ):
            start_section(stripped, "section")  # reST / NumPy "Title\n-----".
            i += 2
            continue
        md = _MD_HEADER_RE.match(stripped)
        if md:
            start_section(md.group(1), "section")
            i += 1
            continue
        if _COLON_HEADER_RE.match(stripped) and (
            not current or stripped[:-1].lower() in _SKIP_SECTIONS
        ):
            # Google-style "Args:"; a short line ending a sentence ("the
            # following way:") inside a paragraph is not a header.
            start_section(stripped, "indented")
            i += 1
            continue
        if stripped.startswith((".. ", "@")) or _FIELD_RE.match(stripped):
            # reST directive, field list or TensorFlow's "@compatibility(...)"
            # marker; bodies are indented and dropped separately.
            flush()
            i += 1
            continue
        if _UNDERLINE_RE.match(stripped) or _is_symbol_line(stripped):
            flush()
            i += 1
            continue
        bullet = _BULLET_RE.match(stripped)
        if bullet:
            flush()
            item_indent = bullet.end()
            current.append(stripped[bullet.end() :])
            i += 1
            continue
        current.append(stripped)
        i += 1
    flush()
    return [p for p in paragraphs if p]


def is_prose(paragraph: str, min_chars: int) -> bool:
    """Heuristic: does a collapsed paragraph read as natural-language text?"""
    if len(paragraph) < min_chars or not _END_PUNCT_RE.search(paragraph):
        return False
    if any(unicodedata.category(c) in ("Cc", "Cs", "Co") for c in paragraph):
        return False
    words = paragraph.split()
    if len(words) < 5:
        return False
    chars = [c for c in paragraph if not c.isspace()]
    letters = sum(c.isalpha() for c in chars)
    return letters >= 0.75 * len(chars)


# ---------------------------------------------------------------------------
# Corpus building.


def build_default_corpus(
    output_path: str,
    *,
    max_bytes: int = 8_000_000,
    search_paths: Optional[list[str]] = None,
    min_chars: int = 40,
) -> dict:
    """Writes the documentation of installed packages as a pre-training corpus.

    Args:
        output_path: text file to write (parent directories are created). It
            is written to a temporary file first and renamed, so a reader never
            sees a partial corpus.
        max_bytes: upper bound on the size of the output in bytes; extraction
            stops at the first paragraph that would exceed it.
        search_paths: directories to scan; each entry inside them is a
            top-level package (a directory) or module (a `.py` file). Defaults
            to the interpreter's site-packages (`default_search_paths()`).
        min_chars: paragraphs shorter than this many characters are dropped.

    Returns:
        Statistics: `files_scanned` (source files read), `docstrings` (found
        in those files), `paragraphs` and `documents` (written), `bytes` (size
        of the output) and `path` (absolute output path).

    Raises:
        ValueError: `max_bytes`/`min_chars` are not positive, a search path
            does not exist, or no prose was found.
    """
    if max_bytes <= 0:
        raise ValueError(f"max_bytes must be positive, got {max_bytes}")
    if min_chars <= 0:
        raise ValueError(f"min_chars must be positive, got {min_chars}")
    if search_paths is None:
        roots = default_search_paths()
    else:
        missing = [p for p in search_paths if not os.path.isdir(p)]
        if missing:
            raise ValueError(f"search path(s) are not directories: {missing}")
        roots = sorted({os.path.realpath(p) for p in search_paths})
    if not roots:
        raise ValueError("no site-packages directory found; pass search_paths")

    output_path = os.path.abspath(output_path)
    os.makedirs(os.path.dirname(output_path), exist_ok=True)
    tmp_path = f"{output_path}.tmp-{os.getpid()}"

    start = time.monotonic()
    stats = {
        "files_scanned": 0,
        "docstrings": 0,
        "paragraphs": 0,
        "bytes": 0,
        "documents": 0,
        "path": output_path,
    }
    seen: set[str] = set()
    skipped = 0
    full = False
    try:
        with open(tmp_path, "w", encoding="utf-8", newline="\n") as out:
            for path in _iter_files_round_robin(roots):
                try:
                    if os.path.getsize(path) > MAX_SOURCE_BYTES:
                        skipped += 1
                        continue
                    with open(path, "rb") as f:
                        source = f.read()
                    stats["files_scanned"] += 1
                    docs = extract_docstrings(source)
                except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
                    skipped += 1
                    continue
                stats["docstrings"] += len(docs)

                lines: list[str] = []
                for doc in docs:
                    for paragraph in docstring_paragraphs(doc):
                        if paragraph in seen or not is_prose(paragraph, min_chars):
                            continue
                        seen.add(paragraph)
                        lines.append(paragraph)
                if not lines:
                    continue

                # A blank line separates this document from the previous one.
                chunk: list[str] = ["\n"] if stats["documents"] else []
                size = len(chunk)
                written = 0
                for paragraph in lines:
                    line_bytes = len(paragraph.encode("utf-8")) + 1
                    if stats["bytes"] + size + line_bytes > max_bytes:
                        full = True
                        break
                    chunk.append(paragraph + "\n")
                    size += line_bytes
                    written += 1
                if written:
                    out.write("".join(chunk))
                    stats["bytes"] += size
                    stats["paragraphs"] += written
                    stats["documents"] += 1
                if full:
                    break
        if stats["paragraphs"] == 0 and full:
            raise ValueError(f"max_bytes={max_bytes} is smaller than the first paragraph")
        if stats["paragraphs"] == 0:
            raise ValueError(
                f"no documentation prose found under {roots}; pass search_paths "
                "pointing at installed Python packages or provide a corpus"
            )
        os.replace(tmp_path, output_path)
    finally:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)

    logger.info(
        "Default corpus: %d bytes, %d paragraphs in %d documents from %d files "
        "(%d skipped) in %.1f s -> %s",
        stats["bytes"],
        stats["paragraphs"],
        stats["documents"],
        stats["files_scanned"],
        skipped,
        time.monotonic() - start,
        output_path,
    )
    return stats
