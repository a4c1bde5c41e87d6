"""A suite's task as a task object of the trial loop, built from the files in a data directory.

`build_task` finds the task's files under the suite's data directory (as
the project distributes them, `records.BenchmarkTask.files`), reads them
with the task's reader and returns a `ClassificationTask`, `SquadTask` or
`TaggingTask`. A task whose training file or scored file is missing is
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

from electra_tf.finetuning.benchmarks.records import (
    CLASSIFICATION,
    QUESTION_ANSWERING,
    REGRESSION,
    TAGGING,
    TRAIN,
    BenchmarkTask,
    Recipe,
    Suite,
)
from electra_tf.finetuning.classification.data import Task, TaskData
from electra_tf.finetuning.classification.tables import read_table

# Lengths when the project states none (the trial loop's defaults).
_DEFAULT_LENGTH = {QUESTION_ANSWERING: 512}
_DEFAULT_LENGTH_OTHER = 128


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
        read = ", ".join(f"{split} {os.path.basename(path)}" for split, path in self.files.items())
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
    """(split -> path of the task's files present, paths missing)."""
    folder = os.path.join(suite_data_dir(suite, data_dir), benchmark.directory)
    present, missing = {}, []
    for split, name in benchmark.files.items():
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            present[split] = path
        else:
            missing.append(path)
    return present, missing


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
        TaskDataError / SquadDataError: a file that does not fit its layout.
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
    length = max_seq_length or recipe.max_seq_length
    length = length or _DEFAULT_LENGTH.get(benchmark.kind, _DEFAULT_LENGTH_OTHER)
    if benchmark.kind in (CLASSIFICATION, REGRESSION):
        task, files = _classification(benchmark, recipe, present, length, max_train_examples, warn)
    elif benchmark.kind == TAGGING:
        task, files = _tagging(benchmark, recipe, present, length, max_train_examples, warn)
    else:
        task, files = _question_answering(benchmark, present, length, warn)
    return BuiltTask(benchmark, recipe, task, files, missing)


def build_suite(suite: Suite, data_dir: str, model_size: str = "small", warn=print, **options):
    """Every task of the suite (`build_task`), in the table's order; missing ones skipped."""
    return [
        build_task(suite, task.name, data_dir, model_size, warn=warn, **options)
        for task in suite.tasks
    ]


def _metrics(benchmark: BenchmarkTask) -> tuple[str, ...]:
    """The headline metric first, then the task kind's usual companions."""
    if benchmark.kind == REGRESSION:
        extra = ("spearman", "pearson")
    elif len(benchmark.labels) == 2:
        extra = ("accuracy", "f1")
    else:
        extra = ("accuracy", "macro_f1")
    return (benchmark.metric,) + tuple(m for m in extra if m != benchmark.metric)


def _classification(benchmark, recipe, present, length, max_train_examples, warn):
    from electra_tf.finetuning.classification.task import ClassificationTask

    regression = benchmark.kind == REGRESSION
    definition = Task(
        name=benchmark.name,
        task_type=REGRESSION if regression else CLASSIFICATION,
        label_names=None if regression else list(benchmark.labels),
        metrics=_metrics(benchmark),
        glue_score_metric=benchmark.metric,
        is_pair=benchmark.tables[TRAIN].text_pair is not None,
        num_train_epochs=recipe.num_train_epochs or 3.0,
        label_scale=benchmark.label_scale,
    )

    def read(split, name):
        return read_table(present[split], benchmark.tables[split], definition, name, True, warn)

    scored = benchmark.scored_split
    dev = {"dev": read(scored, "dev")}
    files = {TRAIN: present[TRAIN], scored: present[scored]}
    for split in benchmark.files:
        if split not in (TRAIN, scored) and split in present:
            dev[f"dev_{split}"] = read(split, f"dev_{split}")
            files[split] = present[split]
    data = TaskData(read(TRAIN, "train"), dev, {})
    task = ClassificationTask(definition, data, length, False, max_train_examples)
    return task, files


def _tagging(benchmark, recipe, present, length, max_train_examples, warn):
    from electra_tf.finetuning.tagging.data import load_tagging_files
    from electra_tf.finetuning.tagging.task import TaggingTask

    scored = benchmark.scored_split
    definition, data = load_tagging_files(
        benchmark.name,
        present[TRAIN],
        present[scored],
        warn=warn,
        layout=benchmark.tagging_layout,
    )
    if recipe.num_train_epochs:
        definition.num_train_epochs = recipe.num_train_epochs
    task = TaggingTask(definition, data, length, max_train_examples)
    return task, {TRAIN: present[TRAIN], scored: present[scored]}


def _question_answering(benchmark, present, length, warn):
    from electra_tf.finetuning.question_answering.data import read_squad_json
    from electra_tf.finetuning.question_answering.task import SquadTask

    scored = benchmark.scored_split
    train = read_squad_json(present[TRAIN], "1.1", is_training=True, warn=warn)
    evaluation = read_squad_json(present[scored], "1.1", is_training=False, warn=warn)
    task = SquadTask(train, evaluation, "1.1", max_seq_length=length, qa_metric=benchmark.qa_metric)
    return task, {TRAIN: present[TRAIN], scored: present[scored]}
