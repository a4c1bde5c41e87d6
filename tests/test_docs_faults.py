"""docs/faults.md stays true: every fault it lists names a test that exists."""

import ast
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _rows():
    with open(os.path.join(ROOT, "docs", "faults.md"), encoding="utf-8") as f:
        lines = [line for line in f if line.startswith("| ") and not line.startswith("| fault")]
    return [[cell.strip() for cell in line.strip().strip("|").split(" | ")] for line in lines]


def _test_names(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def test_every_fault_in_the_table_names_an_existing_test():
    rows = _rows()
    assert len(rows) >= 8
    for fault, seen, test in rows:
        match = re.fullmatch(r"`(tests/[\w/]+\.py)::(test_\w+)`", test)
        assert match, f"{fault}: the last column must name one test, not {test!r}"
        path, name = match.groups()
        assert os.path.isfile(os.path.join(ROOT, path)), f"{fault}: no {path}"
        assert name in _test_names(path), f"{fault}: no {name} in {path}"
        assert seen, fault
