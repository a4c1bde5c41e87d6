"""The documentation pages (README.md, docs/*.md, data/README.md) against the repository.

What a page names must exist: every `electra_tf.*` / `tools.*` module (and the
function or class after it), every repository path, every `--flag` given to
one of the project's commands (checked against the flags that command itself
defines), every relative link and `#anchor`. No page names an absolute path
of a particular machine or a `../` path that leaves the repository.

The pages are read as text; the commands' flags are read once, in one fresh
process that imports each command in a forked child of its own (several
commands define flags of the same name on absl's global set).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from functools import lru_cache

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["README.md", "data/README.md"] + sorted(
    os.path.join("docs", name)
    for name in os.listdir(os.path.join(ROOT, "docs"))
    if name.endswith(".md")
)
PACKAGE = "electra_tf"
# Where a path written in a page may be relative to: the repository root, the package
# (pages say `finetuning/tagging/layouts.py` for electra_tf/finetuning/tagging/layouts.py)
# and the research tools.
PATH_BASES = ("", PACKAGE, "tools")
# A path that starts with one of these names a file of the repository, which must exist
# (other paths in the pages are the user's: runs/, glue_data/, <output_dir>/...).
SOURCE_DIRS = {"electra_tf", "tools", "tests", "docs"} | {
    name
    for name in os.listdir(os.path.join(ROOT, PACKAGE))
    if os.path.isdir(os.path.join(ROOT, PACKAGE, name))
    # data/ and serving/ also name the user's folders (data/builtin/, serving/sst2/1).
    and name not in ("data", "serving", "__pycache__")
}
FILE_EXTENSIONS = {
    "json", "jsonl", "txt", "tsv", "csv", "md", "keras", "h5", "pbtxt", "pb", "png", "html",
    "bin", "safetensors", "npz", "tfrecord", "toml", "ini", "index", "bzl", "lock", "cfg",
}  # fmt: skip
# Absolute paths a page may show: placeholders, the system's own files, and paths inside
# TF Serving's container or URL paths.
ABSOLUTE_ALLOWED = ("/path/to/", "/proc/", "/usr/bin/", "/models/", "/v1/")
# Flags every absl command accepts.
ABSL_FLAGS = {"help", "helpfull", "helpshort", "helpxml", "flagfile", "undefok"}
# `beam_shards` hands any flag it does not define to Apache Beam as a pipeline option.
BEAM_OPTIONS = {
    "runner", "project", "region", "temp_location", "setup_file", "max_num_workers",
    "direct_num_workers", "direct_running_mode",
}  # fmt: skip


def _read(page: str) -> str:
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        return f.read()


FENCE = re.compile(r"^[ \t]*```[^\n]*\n(.*?)^[ \t]*```", re.S | re.M)


def code_blocks(text: str) -> list[str]:
    return FENCE.findall(text)


def prose(text: str) -> str:
    """The page without its fenced blocks."""
    return FENCE.sub("", text)


def code_spans(text: str) -> list[str]:
    """Inline code (it may run over a line break), outside fenced blocks."""
    return [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose(text))]


def code(text: str) -> list[str]:
    return code_blocks(text) + code_spans(text)


# ---------------------------------------------------------------------------
# Commands and their flags.


def _module_file(module: str):
    """The source file of a dotted module name of the repository, or None (no import)."""
    base = os.path.join(ROOT, *module.split("."))
    for candidate in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(candidate):
            return candidate
    return None


COMMAND_PATTERNS = [
    # (regex at the start of a command, the command's module from the match)
    (re.compile(r"(?:python3?\s+)?(pretrain|finetune)\.py\b"), r"electra_tf.commands.\1"),
    (re.compile(r"electra-(pretrain|finetune)\b"), r"electra_tf.commands.\1"),
    (re.compile(r"python3?\s+-m\s+electra_tf\.commands\.(\w+)"), r"electra_tf.commands.\1"),
    (re.compile(r"(?:python3?\s+-m\s+electra_tf|electra-tf)\s+(\w+)"), r"electra_tf.commands.\1"),
    (re.compile(r"python3?\s+-m\s+(tools(?:\.\w+)+)"), r"\1"),
    (re.compile(r"python3?\s+((?:tools|tests)/[\w/]+)\.py\b"), r"\1"),
]


def commands_in(snippet: str) -> list[tuple[str, list[str]]]:
    """(command module, the flags given to it) for every project command in a snippet.

    A command's flags are the `--name`s after it up to the end of its shell
    command (a line, `|`, `;`, `&&` or a comment; `\\` continues a line).
    """
    found = []
    for line in snippet.replace("\\\n", " ").splitlines():
        command = re.split(r"(?:^|\s)#", line)[0]  # a shell comment is not a command
        for part in re.split(r"\s(?:\||;|&&)\s", command):
            matches = [
                (m.start(), m.end(), m.expand(template).replace("/", "."))
                for pattern, template in COMMAND_PATTERNS
                for m in pattern.finditer(part)
            ]
            matches.sort()
            for i, (_, end, module) in enumerate(matches):
                stop = matches[i + 1][0] if i + 1 < len(matches) else len(part)
                given = re.findall(r"(?<![\w-])--([A-Za-z][\w-]*)", part[end:stop])
                found.append((module, given))
    return found


COLLECT_FLAGS = textwrap.dedent(
    """
    import importlib, inspect, json, os, sys
    from absl import flags
    import electra_tf.cli  # noqa: F401  (TensorFlow and the package, loaded once)

    result = {}
    for name in sys.argv[1:]:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            try:
                before = set(flags.FLAGS)
                module = importlib.import_module(name)
                own = flags.FlagValues()
                define = getattr(module, "define_flags", None)
                if define is not None:
                    first = next(iter(inspect.signature(define).parameters), None)
                    define(name) if first == "module_name" else define(own)
                named = {n: flags.FLAGS[n].boolean for n in set(flags.FLAGS) - before}
                named.update({n: own[n].boolean for n in own})
                answer = {"flags": named}
            except BaseException as error:
                answer = {"error": f"{type(error).__name__}: {error}"}
            os.write(write, json.dumps(answer).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            result[name] = json.loads(pipe.read() or '{"error": "no answer"}')
        os.waitpid(pid, 0)
    print(json.dumps(result))
    """
)


def _argparse_flags(path: str) -> dict:
    """`--name`s a script defines with argparse or absl, read from its source."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    named = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        literal = [a.value for a in node.args if isinstance(a, ast.Constant)]
        if node.func.attr == "add_argument":
            for option in literal:
                if isinstance(option, str) and option.startswith("--"):
                    named[option[2:]] = False
        elif node.func.attr.startswith("DEFINE_") and literal and isinstance(literal[0], str):
            named[literal[0]] = node.func.attr == "DEFINE_boolean"
    return named


@pytest.fixture(scope="module")
def command_flags():
    """{command module: {flag: is boolean}} for every command the pages run."""
    modules = sorted({m for page in PAGES for s in code(_read(page)) for m, _ in commands_in(s)})
    missing = [m for m in modules if _module_file(m) is None]
    assert not missing, f"the pages run commands that do not exist: {missing}"
    importable = [m for m in modules if m.startswith(("electra_tf.", "tools."))]
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run(
        [sys.executable, "-c", COLLECT_FLAGS, *importable],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    answers = json.loads(out.stdout.strip().splitlines()[-1])
    errors = {m: a["error"] for m, a in answers.items() if "error" in a}
    assert not errors, errors
    table = {m: dict(a["flags"]) for m, a in answers.items()}
    for module in modules:  # scripts run by path, and argparse tools: their source
        table.setdefault(module, {}).update(_argparse_flags(_module_file(module)))
    table["electra_tf.commands.beam_shards"].update(dict.fromkeys(BEAM_OPTIONS, False))
    return table


def undefined_flags(text: str, table: dict) -> list[str]:
    wrong = []
    for snippet in code(text):
        for module, given in commands_in(snippet):
            defined = table[module]
            for flag in given:
                name = flag.replace("-", "_")
                plain = name[2:] if name.startswith("no") else None
                if name in defined or name in ABSL_FLAGS or defined.get(plain):
                    continue
                wrong.append(f"{module} --{flag}")
    return sorted(set(wrong))


@pytest.mark.parametrize("page", PAGES)
def test_every_flag_given_to_a_command_is_one_it_defines(page, command_flags):
    assert undefined_flags(_read(page), command_flags) == []


# ---------------------------------------------------------------------------
# Modules, names in them, and repository paths.


@lru_cache(maxsize=None)
def _top_level_names(path: str) -> frozenset:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    if path.endswith("__init__.py"):
        folder = os.path.dirname(path)
        names |= {n[:-3] if n.endswith(".py") else n for n in os.listdir(folder)}
    return frozenset(names)


def dotted_name_exists(name: str) -> bool:
    """`electra_tf.a.b` / `tools.x.f`: the longest module prefix exists and defines the
    next part (a function, class or constant; what follows that is not checked)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        path = _module_file(".".join(parts[:cut]))
        if path is not None:
            return cut == len(parts) or parts[cut] in _top_level_names(path)
    return False


def _repository_files() -> list:
    files = []
    for base in (PACKAGE, "tools", "tests"):
        for folder, _, names in os.walk(os.path.join(ROOT, base)):
            files += [os.path.relpath(os.path.join(folder, n), ROOT) for n in names]
    return files


REPOSITORY_FILES = _repository_files()


def _module_index() -> dict:
    """{every dotted tail of a module's name: the module files} (`tagging.data`, `data`, ...)."""
    index = {}
    for path in REPOSITORY_FILES:
        if not path.endswith(".py") or path.startswith("tests"):
            continue
        parts = path[:-3].split(os.sep)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        for cut in range(len(parts)):
            index.setdefault(".".join(parts[cut:]), set()).add(os.path.join(ROOT, path))
    return index


MODULE_INDEX = _module_index()


def resolve(path: str, page: str):
    """The file or folder a repository path names (relative to the page, the repository, the
    package or tools/; a module without `.py`; a `.py` file by its last folders), or None."""
    for base in [os.path.dirname(page), *PATH_BASES]:
        for candidate in (path, path.rstrip("/") + ".py"):
            full = os.path.join(ROOT, base, candidate)
            if os.path.exists(full):
                return full
    if path.endswith(".py"):
        for name in REPOSITORY_FILES:
            if name == path or name.endswith(os.sep + path):
                return os.path.join(ROOT, name)
    return None


PATH_TOKEN = re.compile(r"(?<![\w./<>*~-])((?:[\w-]+/)+[\w.-]*)")


def _split_attribute(token: str) -> tuple:
    """`modeling/train_step.TrainStep` -> (`modeling/train_step`, `TrainStep`); a file name
    (`a/b.py`, `a/config.json`) has none."""
    head, _, last = token.rpartition("/")
    if "." not in last or last.rsplit(".", 1)[1] in FILE_EXTENSIONS | {"py"}:
        return token, ""
    name, _, attribute = last.partition(".")
    return f"{head}/{name}", attribute


def missing_references(text: str, page: str) -> list[str]:
    """Modules, names and repository paths the page's code names that do not exist."""
    missing = []
    for snippet in code(text):
        for name in re.findall(
            r"(?<![\w./-])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?![\w./<-])", snippet
        ):
            if name.rsplit(".", 1)[-1] in FILE_EXTENSIONS | {"py"}:
                continue  # a file name: config.json, pretrain.py
            parts = name.split(".")
            if parts[0] in (PACKAGE, "tools"):
                if not dotted_name_exists(name):
                    missing.append(name)
                continue
            # `tagging.data.split_words`, `display.LEGEND`: the tail of a module's name.
            for cut in range(len(parts) - 1, 0, -1):
                modules = MODULE_INDEX.get(".".join(parts[:cut]))
                if cut == 1 and modules and len(modules) > 1:
                    break  # `task.qa_metric`: several modules are called `task`
                if modules:
                    if not any(parts[cut] in _top_level_names(m) for m in modules):
                        missing.append(name)
                    break
        for token in PATH_TOKEN.findall(snippet):
            path, attribute = _split_attribute(token)
            segments = [s for s in path.split("/") if s]
            if segments[0] not in SOURCE_DIRS and not path.endswith(".py"):
                continue  # the user's paths: runs/x, glue_data/SST-2/train.tsv
            if any("-" in s for s in segments if "." not in s):
                continue  # words, not a module path: "training/held-out shards"
            target = resolve(path, page)
            if target is None:
                missing.append(token)
            elif attribute and target.endswith(".py"):
                if attribute.split(".")[0] not in _top_level_names(target):
                    missing.append(token)
    return sorted(set(missing))


@pytest.mark.parametrize("page", PAGES)
def test_every_module_and_repository_path_named_exists(page):
    assert missing_references(_read(page), page) == []


def test_the_architecture_map_lists_every_tool_and_command():
    """docs/architecture.md's map names every module of tools/ and every command."""
    page = _read("docs/architecture.md")
    tools = [n for n in os.listdir(os.path.join(ROOT, "tools")) if n.endswith(".py")]
    commands = [
        n[:-3]
        for n in os.listdir(os.path.join(ROOT, PACKAGE, "commands"))
        if n.endswith(".py") and not n.startswith("_")
    ]
    assert [n for n in tools if n != "__init__.py" and n not in page] == []
    assert [n for n in commands if not re.search(rf"`{n}`|[ ,]{n}[,\n]", page)] == []


LAYOUT_MODULES = ("run_dir.py", "finetuning_dir.py", "export_dir.py", "serving_dir.py")


def _layout_names(module: str) -> list:
    """The file and folder names a layout module's docstring lists (`    name   what it is`,
    several names separated by commas)."""
    with open(os.path.join(ROOT, PACKAGE, "artifacts", module), encoding="utf-8") as f:
        docstring = ast.get_docstring(ast.parse(f.read())) or ""
    names = []
    for line in docstring.splitlines():
        if not line.startswith("    "):
            continue
        for token in line.split():
            name = token.rstrip(",")
            if re.fullmatch(r"[\w.<>-]+/?", name) and ("." in name[1:] or name.endswith("/")):
                names.append(name)
            if not token.endswith(","):
                break
    return names


@pytest.mark.parametrize("module", LAYOUT_MODULES)
def test_every_file_a_run_writes_is_documented(module):
    """Each name in the layouts of electra_tf/artifacts/ appears on some page."""
    pages = "\n".join(_read(page) for page in PAGES)
    names = [n for n in _layout_names(module) if n.strip(".")]
    assert names, module
    assert [n for n in names if n not in pages] == []


def _number(cell: str) -> float:
    """`10k` -> 10000, `1M` -> 1e6, `15%` -> 0.15, `5e-4` -> 5e-4."""
    cell = cell.strip().replace(",", "")
    scale = {"k": 1e3, "M": 1e6, "%": 0.01}.get(cell[-1:], 1)
    return float(cell[:-1] if scale != 1 else cell) * scale


def test_the_presets_table_is_the_presets():
    """docs/pretraining.md's table of `--model_size` presets: every value is the preset's."""
    from electra_tf.config import MODEL_SIZES, preset

    lines = [line for line in _read("docs/pretraining.md").splitlines() if line.startswith("| ")]
    header = next(line for line in lines if line.startswith("| preset |"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    rows = {}
    for line in lines:
        cells = [c.strip() for c in line.strip("|").split("|")]
        match = re.match(r"`(\w+)`", cells[0])
        if match and match.group(1) in MODEL_SIZES and len(cells) == len(columns):
            rows[match.group(1)] = dict(zip(columns, cells))
    assert sorted(rows) == sorted(MODEL_SIZES)
    for size, row in rows.items():
        config = preset(size)
        model = config.model
        heads = model.num_heads or model.hidden_size // 64
        expected = {
            "hidden": model.hidden_size,
            "layers": model.num_layers,
            "heads": heads,
            "FFN": model.intermediate_size or 4 * model.hidden_size,
            "embedding": model.embedding_size,
            "mask": config.mask_rate,
            "LR": config.learning_rate,
            "batch": config.train_batch_size,
            "steps": config.num_train_steps,
            "warmup": config.num_warmup_steps,
            "length": config.max_seq_length,
        }
        table = {name: _number(row[name]) for name in expected}
        assert table == pytest.approx(expected), size
        generator = int(model.hidden_size * model.generator_hidden_fraction)
        assert f"({generator})" in row["generator"], size


# ---------------------------------------------------------------------------
# Links and anchors.


def github_anchor(heading: str) -> str:
    """GitHub's anchor of a heading: markup dropped, lower case, punctuation removed,
    spaces as hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[*_]", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: str) -> set:
    found, seen = set(), {}
    for line in prose(_read(page)).splitlines():
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            anchor = github_anchor(match.group(1))
            count = seen.get(anchor, 0)
            seen[anchor] = count + 1
            found.add(anchor if count == 0 else f"{anchor}-{count}")
    return found


def broken_links(text: str, page: str) -> list[str]:
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", prose(text)):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto
        path, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        if resolved.startswith(".."):
            broken.append(f"{target} (outside the repository)")
        elif not os.path.exists(os.path.join(ROOT, resolved)):
            broken.append(target)
        elif anchor and (not resolved.endswith(".md") or anchor not in anchors(resolved)):
            broken.append(target)
    return broken


@pytest.mark.parametrize("page", PAGES)
def test_every_relative_link_and_anchor_resolves(page):
    assert broken_links(_read(page), page) == []


# ---------------------------------------------------------------------------
# Paths of a particular machine.


def machine_paths(text: str) -> list[str]:
    """Absolute paths and `../` paths (both leave the repository), anywhere on a page."""
    found = re.findall(r"(?:^|(?<=[\s=`'\"(]))(/[A-Za-z_][\w.-]*(?:/[\w.*<>-]*)*)", text, re.M)
    found = [p for p in found if not p.startswith(ABSOLUTE_ALLOWED) and "/" in p[1:]]
    found += re.findall(r"(?<![\w.])(\.\./[\w./-]*)", text)
    return sorted(set(found))


@pytest.mark.parametrize("page", PAGES)
def test_no_path_of_a_particular_machine(page):
    assert machine_paths(_read(page)) == []


# ---------------------------------------------------------------------------
# The checks themselves, on known defects.


def test_the_checks_catch_known_defects(command_flags):
    page = "docs/serving.md"
    assert undefined_flags(
        "```\npython finetune.py --task=sst2 --no_such_flag\n```", command_flags
    ) == ["electra_tf.commands.finetune --no_such_flag"]
    assert undefined_flags("`python finetune.py --nosave_models --task=x`", command_flags) == []
    assert missing_references("see `finetuning/squad_features.py`", page) == [
        "finetuning/squad_features.py"
    ]
    assert missing_references("`electra_tf.finetuning.saving.no_such_function`", page) == [
        "electra_tf.finetuning.saving.no_such_function"
    ]
    assert missing_references("`electra_tf.finetuning.saving.load_finetuned(dir)`", page) == []
    assert broken_links("[x](pretraining.md#no-such-heading)", page) == [
        "pretraining.md#no-such-heading"
    ]
    assert broken_links("[x](pretraining.md#a-runs-identity)", page) == []
    # Paths no reader has: above the repository, and absolute paths of someone's machine.
    assert machine_paths("`--corpus=../corpora/x.txt` and `/home/someone/runs/ko/`") == [
        "../corpora/x.txt",
        "/home/someone/runs/ko/",
    ]
    assert github_anchor("With its baselines: no pre-training, `x` runs") == (
        "with-its-baselines-no-pre-training-x-runs"
    )
