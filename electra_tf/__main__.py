"""`python -m electra_tf <command>` and `electra-tf <command>`: every command behind one name.

    electra-tf                                  # the commands, each with its description
    electra-tf pretrain --model_size=small      # as python -m electra_tf.commands.pretrain
    electra-tf convert import-hf electra-base/ runs/electra-base

A command is a module of `electra_tf.commands`; it runs exactly as
`python -m electra_tf.commands.<name>` runs it (its own flags, --help and
exit code), named `electra-tf <name>` in its messages.
"""

from __future__ import annotations

import ast
import importlib.util
import pkgutil
import sys
import types
from typing import Optional

PROGRAM = "electra-tf"
PACKAGE = "electra_tf.commands"


def commands() -> dict[str, str]:
    """{command: its one-line description}, read from the modules' docstrings.

    Read without importing them: importing a command may define its flags,
    and loads TensorFlow.
    """
    package = importlib.util.find_spec(PACKAGE)
    found = {}
    for module in pkgutil.iter_modules(package.submodule_search_locations):
        if module.ispkg or module.name.startswith("_"):
            continue
        origin = importlib.util.find_spec(f"{PACKAGE}.{module.name}").origin
        with open(origin, encoding="utf-8") as f:
            docstring = ast.get_docstring(ast.parse(f.read(), origin)) or ""
        found[module.name] = docstring.strip().splitlines()[0] if docstring.strip() else ""
    return dict(sorted(found.items()))


def usage(listed: dict[str, str]) -> str:
    """The listing `electra-tf` and `electra-tf --help` print."""
    width = max(map(len, listed))
    lines = [
        f"usage: {PROGRAM} <command> [flags]   ({PROGRAM} <command> --help: its flags)",
        "",
        "commands:",
        *(f"  {name:<{width}}  {description}" for name, description in listed.items()),
    ]
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    """Runs the command named first in `argv` (default: the process's arguments).

    Returns:
        The exit code of the listing (0), of an unknown command (2); a
        command that runs exits the process with its own.
    """
    argv = sys.argv[1:] if argv is None else argv
    listed = commands()
    if not argv or argv[0] in ("-h", "--help", "-?", "--helpshort", "--helpfull", "help"):
        sys.stdout.write(usage(listed))
        return 0
    name, arguments = argv[0], argv[1:]
    if name not in listed:
        sys.stderr.write(
            f"{PROGRAM}: error: unknown command {name!r}; the commands are "
            f"{', '.join(listed)} ({PROGRAM} --help describes them).\n"
        )
        return 2
    run_as_main(name, arguments)
    return 0


def run_as_main(name: str, arguments: list[str]) -> None:
    """Runs a command as `python -m electra_tf.commands.<name>` does, named `electra-tf <name>`.

    As `runpy.run_module(alter_sys=True)`, but the command's messages name
    it `electra-tf <name>` rather than its file (runpy sets sys.argv[0] to
    the file's path).
    """
    spec = importlib.util.find_spec(f"{PACKAGE}.{name}")
    module = types.ModuleType("__main__")
    module.__file__ = spec.origin
    module.__spec__ = spec  # spawned processes (shard builds) import the command by name
    module.__loader__ = spec.loader
    module.__package__ = spec.parent
    code = spec.loader.get_code(spec.name)
    saved = sys.modules["__main__"], sys.argv
    sys.modules["__main__"], sys.argv = module, [f"{PROGRAM} {name}", *arguments]
    try:
        exec(code, module.__dict__)
    finally:
        sys.modules["__main__"], sys.argv = saved


if __name__ == "__main__":
    sys.exit(main())
