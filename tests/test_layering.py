"""Imports point one way: down the layers of `electra_tf.layering.LAYERS`, with no cycle."""

import ast
import os

from electra_tf.layering import FINETUNING_FLOOR, FINETUNING_TOP, LAYERS

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "electra_tf"
COMMANDS = ("pretrain.py", "finetune.py")


def _modules() -> dict:
    """{module name: source path} of the package and the top-level commands."""
    modules = {}
    for root, _, files in os.walk(os.path.join(PROJECT, PACKAGE)):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(root, name)
            parts = os.path.relpath(path, PROJECT)[:-3].split(os.sep)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    for name in COMMANDS:
        modules[name[:-3]] = os.path.join(PROJECT, name)
    return modules


def _imports(path: str, module: str, modules: dict) -> list:
    """(line, imported module) of every import of ours, at any depth of the file."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # `from package import module` imports the module; otherwise a name of `base`.
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        else:
            continue
        for name in names:
            # `import a.b.c` needs a.b.c itself; keep the longest name that is ours.
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.append((node.lineno, name))
    return found


def _layer(module: str):
    """Index in LAYERS of the prefix covering `module` (None: not placed)."""
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                return index
    return None


def _graph():
    modules = _modules()
    return modules, {m: _imports(path, m, modules) for m, path in modules.items()}


def test_every_module_has_a_layer():
    modules, graph = _graph()
    unplaced = [m for m in modules if m != PACKAGE and _layer(m) is None]
    assert not unplaced, f"modules in no layer of electra_tf/layering.py: {unplaced}"
    # The package's own __init__ only imports the modules that register Keras classes
    # (every task kind's model, through the list of kinds).
    assert {target for _, target in graph[PACKAGE]} == {
        "electra_tf.optimization",
        "electra_tf.finetuning.kinds",
        "electra_tf.modeling.electra",
    }


def test_a_package_sits_in_one_layer():
    """No module is listed apart from its package: what sits elsewhere moves to another package."""
    listed = [prefix for prefixes in LAYERS for prefix in prefixes]
    assert len(listed) == len(set(listed)), "a prefix listed twice in electra_tf/layering.py"
    nested = [
        f"{inner} (inside {outer})"
        for inner in listed
        for outer in listed
        if inner.startswith(outer + ".")
    ]
    assert not nested, "modules listed apart from their package: " + ", ".join(nested)


def test_no_import_points_up():
    modules, graph = _graph()
    upward = []
    for module, imports in graph.items():
        for line, target in imports:
            if module != PACKAGE and target != PACKAGE and _layer(target) > _layer(module):
                upward.append(
                    f"{os.path.relpath(modules[module], PROJECT)}:{line} imports "
                    f"{target} (layer {_layer(target)} > {_layer(module)})"
                )
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(upward)


def _finetuning_place(module: str):
    """(tier, kind package) of a module of electra_tf.finetuning: tier 0 floor, 1 a kind, 2 top."""

    def under(prefixes):
        return any(module == p or module.startswith(p + ".") for p in prefixes)

    if under(FINETUNING_FLOOR):
        return 0, None
    if module == "electra_tf.finetuning" or under(FINETUNING_TOP[1:]):
        return 2, None
    return 1, module.split(".")[2]


def _finetuning_violations(graph: dict, modules: dict) -> list:
    found = []
    for module, imports in graph.items():
        if not module.startswith("electra_tf.finetuning"):
            continue
        tier, kind = _finetuning_place(module)
        for line, target in imports:
            if not target.startswith("electra_tf.finetuning"):
                continue
            target_tier, target_kind = _finetuning_place(target)
            if target_tier > tier or (tier == target_tier == 1 and kind != target_kind):
                found.append(f"{os.path.relpath(modules[module], PROJECT)}:{line} imports {target}")
    return found


def test_no_import_points_up_inside_finetuning():
    """The floor imports no kind, no kind imports another kind or the registry above them."""
    modules, graph = _graph()
    kinds = {_finetuning_place(m)[1] for m in modules if m.startswith("electra_tf.finetuning.")}
    assert {"classification", "question_answering", "tagging"} <= kinds
    violations = _finetuning_violations(graph, modules)
    assert not violations, "upward or sideways imports in finetuning:\n" + "\n".join(violations)


def test_the_finetuning_check_sees_a_kind_importing_another(tmp_path):
    modules = _modules()
    source = tmp_path / "x.py"
    source.write_text(
        "from electra_tf.finetuning.classification.data import Task\n"
        "from electra_tf.finetuning.kind.files import TaskDataError\n"
        "from electra_tf.finetuning.kinds import TASK_KINDS\n",
        encoding="utf-8",
    )
    found = _imports(str(source), "electra_tf.finetuning.tagging.x", modules)
    graph = {"electra_tf.finetuning.tagging.x": found}
    paths = {"electra_tf.finetuning.tagging.x": str(source)}
    violations = _finetuning_violations(graph, paths)
    assert [v.rsplit(" imports ", 1)[1] for v in violations] == [
        "electra_tf.finetuning.classification.data",
        "electra_tf.finetuning.kinds",
    ]
    floor = {"electra_tf.finetuning.kind.x": [(1, "electra_tf.finetuning.tagging.data")]}
    paths = {"electra_tf.finetuning.kind.x": str(source)}
    assert len(_finetuning_violations(floor, paths)) == 1


def test_no_import_cycle():
    modules, graph = _graph()
    edges = {m: sorted({t for _, t in imports}) for m, imports in graph.items()}
    # Tarjan's strongly connected components; any component of two or more is a cycle.
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in edges:
        if node not in index:
            visit(node)
    described = []
    for component in components:
        inside = set(component)
        described.append(
            "; ".join(
                f"{os.path.relpath(modules[m], PROJECT)}:{line} imports {t}"
                for m in component
                for line, t in graph[m]
                if t in inside
            )
        )
    assert not components, "import cycles:\n" + "\n".join(described)


def _imported_names(path: str) -> list:
    """(line, module name) of every import statement in a file, absolute ones as written."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.append((node.lineno, node.module or ""))
    return found


def test_the_package_never_imports_the_tools():
    """`tools/` (benchmark, study, parity) sits outside the package: pip does not install it."""
    modules = _modules()
    assert any(m.startswith("electra_tf.") for m in modules)
    offending = [
        f"{os.path.relpath(path, PROJECT)}:{line} imports {name}"
        for path in modules.values()
        for line, name in _imported_names(path)
        if name == "tools" or name.startswith("tools.")
    ]
    assert not offending, "the package imports the research tools:\n" + "\n".join(offending)


def test_the_checker_sees_upward_and_function_level_imports(tmp_path):
    """The graph builder finds imports inside functions and resolves `from a import b`."""
    source = tmp_path / "probe.py"
    source.write_text(
        "from electra_tf.finetuning.classification import data\n\n"
        "def f():\n    import electra_tf.serving.exporter as e\n"
        "    from electra_tf.config import preset\n",
        encoding="utf-8",
    )
    modules = _modules()
    found = _imports(str(source), "electra_tf.modeling.probe", modules)
    assert found == [
        (1, "electra_tf.finetuning.classification.data"),
        (4, "electra_tf.serving.exporter"),
        (5, "electra_tf.config"),
    ]
    assert _layer("electra_tf.commands.check_export") > _layer("electra_tf.serving.exporter")
    assert _layer("electra_tf.modeling.probe") < _layer("electra_tf.finetuning.classification.data")
