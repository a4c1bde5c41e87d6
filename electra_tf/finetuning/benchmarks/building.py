"""A suite's task as a task object of the trial loop, built from the files in a data directory.

`build_task` finds the task's files under the suite's data directory (as
the project distributes them, `records.BenchmarkTask.files`), reads them
with its kind's reader (`TaskKind.from_benchmark`) and returns the task. A task whose training file or scored file is missing is
skipped, not an error: `BuiltTask.task` is None and `missing` lists the
paths looked for; a missing extra evaluation file (a classification dev
file beside the scored test file) is listed and left out.

Which split is which: the split the published numbers are on becomes the
task's `dev` split (scored every epoch, its metrics unsuffixed, its
headline metric the trials' primary metric); for classification the other
labelled evaluation files are scored too, their metrics suffixed by their
split (`accuracy_test` for Chinese-ELECTRA's test files, `accuracy_dev`
for a KoELECTRA dev file beside its scored test file).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

from electra_tf.finetuning.kind.benchmark import TRAIN, BenchmarkTask, Recipe, Suite
from electra_tf.finetuning.kinds import kind_for_type


@dataclasses.dataclass
class BuiltTask:
    """A suite task and what was found for it.

    Attributes:
        benchmark: the suite's record of the task.
        recipe: the project's settings for the model size asked for.
        task: the task object for the trial loop; None when skipped.
        files: split -> path of every file read.
        missing: paths looked for and not found (a required one makes the
            task skipped).
    """

    benchmark: BenchmarkTask
    recipe: Recipe
    task: Optional[object]
    files: dict[str, str]
    missing: list[str]

    @property
    def skipped(self) -> bool:
        return self.task is None

    def describe(self) -> str:
        """One line for the console: what was read, or why the task is skipped."""
        name = self.benchmark.name
        if self.skipped:
            return f"{name}: skipped (no {', '.join(self.missing)})"
        read = ", ".join(f"{split} {file_names(path)}" for split, path in self.files.items())
        extra = f"; not found: {', '.join(self.missing)}" if self.missing else ""
        return f"{name}: {read}{extra}"


def suite_data_dir(suite: Suite, data_dir: str) -> str:
    """The folder holding the suite's task folders: `data_dir`, or its `data_subdirectory`."""
    if suite.data_subdirectory:
        inner = os.path.join(data_dir, suite.data_subdirectory)
        if os.path.isdir(inner):
            return inner
    return data_dir


def task_files(
    suite: Suite, benchmark: BenchmarkTask, data_dir: str
) -> tuple[dict[str, str], list[str]]:
    """(split -> path of the task's files present, paths missing).

    A split whose file name lists several files separated by commas (C3's
    `d-train.json,m-train.json`) is present when all of them are; its path
    lists theirs the same way.
    """
    folder = os.path.join(suite_data_dir(suite, data_dir), benchmark.directory)
    present, missing = {}, []
    for split, names in benchmark.files.items():
        paths = [os.path.join(folder, name) for name in names.split(",")]
        absent = [path for path in paths if not os.path.isfile(path)]
        if absent:
            missing += absent
        else:
            present[split] = ",".join(paths)
    return present, missing


def file_names(paths: str) -> str:
    """The base names of a split's file(s) (comma-separated paths), comma-separated."""
    return ",".join(os.path.basename(path) for path in paths.split(","))


def build_task(
    suite: Suite,
    name: str,
    data_dir: str,
    model_size: str = "small",
    max_seq_length: Optional[int] = None,
    max_train_examples: Optional[int] = None,
    warn=print,
) -> BuiltTask:
    """Reads one suite task's files into its task object.

    Args:
        suite: the suite (`koelectra.KOELECTRA`, `chinese_electra.CHINESE_ELECTRA`).
        name: the task's name in the suite.
        data_dir: the suite's data directory (see `Suite.data_layout`).
        model_size: whose recipe applies (`small` or `base`).
        max_seq_length: overrides the recipe's length.
        max_train_examples: train on this many examples drawn from the
            training file (the same draw for every run).
        warn: prints a warning (rows left out by the readers).

    Returns:
        The built task, or a skipped one when its training or scored file
        is missing.

    Raises:
        KeyError: no such task, or no recipe for `model_size`.
        TaskDataError: a file that does not fit its layout.
    """
    benchmark = suite.task(name)
    if model_size not in benchmark.recipes:
        raise KeyError(
            f"{benchmark.name}: no recipe for model size {model_size!r} "
            f"(the project gives {', '.join(benchmark.recipes)})"
        )
    recipe = benchmark.recipes[model_size]
    present, missing = task_files(suite, benchmark, data_dir)
    if TRAIN not in present or benchmark.scored_split not in present:
        return BuiltTask(benchmark, recipe, None, {}, missing)
    kind = kind_for_type(benchmark.kind, f"suite {suite.name}, task {name}: kind")
    length = max_seq_length or recipe.max_seq_length or kind.DEFAULT_MAX_SEQ_LENGTH
    task, files = kind.from_benchmark(benchmark, recipe, present, length, max_train_examples, warn)
    return BuiltTask(benchmark, recipe, task, files, missing)


def build_suite(suite: Suite, data_dir: str, model_size: str = "small", warn=print, **options):
    """Every task of the suite (`build_task`), in the table's order; missing ones skipped."""
    return [
        build_task(suite, task.name, data_dir, model_size, warn=warn, **options)
        for task in suite.tasks
    ]
