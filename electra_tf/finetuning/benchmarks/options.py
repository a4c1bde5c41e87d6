"""What a benchmark suite run is given, and how the suite's published settings apply to a task.

`SuiteOptions` holds the suite command's own flags (each field's metadata
holds its help, from which `electra_tf.cli` defines the flag); the
hyper-parameters that every fine-tuning run shares (trials, seed, precision,
...) stay in `FinetuneSettings`. `task_settings` gives one task's
`FinetuneSettings`: the project's published recipe for the model size,
unless a flag overrides a value. The module imports no TensorFlow.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from electra_tf.artifacts.suite_dir import RANDOM_INIT
from electra_tf.config import flag_field
from electra_tf.errors import RunError
from electra_tf.finetuning.benchmarks import SUITES
from electra_tf.finetuning.kind.benchmark import BenchmarkTask, Recipe, Suite
from electra_tf.finetuning.kind.settings import (
    FinetuneSettings,
    init_checkpoint_field,
    vocab_file_field,
)

# The suites by their command-line names (the project's name, hyphenated).
SUITE_NAMES = {name.replace("_", "-"): name for name in SUITES}
# The recipe sizes the projects publish; other sizes take the nearest.
_RECIPE_SIZES = {"tiny": "small", "small": "small", "base": "base", "large": "base"}


@dataclasses.dataclass
class SuiteOptions:
    """The suite command's flags: which suite, where its files are, what overrides its recipes.

    None for the four hyper-parameters means: the recipe's value for the
    task and the checkpoint's model size (or, where the project states none,
    the fine-tuning default).
    """

    suite: Optional[str] = flag_field(
        None,
        "The benchmark table: koelectra (KoELECTRA's eight Korean tasks), chinese-electra "
        "(Chinese-ELECTRA's six Chinese tasks), klue (KLUE's Korean tasks, scored as "
        "KLUE-baseline scores them) or clue (CLUE's seven Chinese tasks, with its submission "
        "files).",
        choices=tuple(SUITE_NAMES),
    )
    data_dir: Optional[str] = flag_field(
        None,
        "The suite's data as its project distributes it: KoELECTRA's finetune/data/ "
        "(nsmc/ratings_train.txt, naver-ner/train.tsv, ...), Chinese-ELECTRA's "
        "finetuning_data/, KLUE's klue_benchmark/ (or the folder holding either), or a folder "
        "of CLUE's unzipped <task>_public.zip files (tnews/train.json, c3/d-train.json, ...). "
        "Tasks whose files are absent are skipped.",
    )
    init_checkpoint: Optional[str] = init_checkpoint_field("<output_dir>/imported_checkpoint")
    vocab_file: Optional[str] = vocab_file_field()
    output_dir: Optional[str] = flag_field(
        None,
        "Where every task's run goes (<output_dir>/<task>/), with suite.json and suite.md. "
        "Re-running the same command resumes: finished tasks and trials are skipped.",
    )
    tasks: Optional[list] = flag_field(
        None, "Comma-separated tasks to run (default: every task of the suite)."
    )
    baseline: Optional[str] = flag_field(
        None,
        "random_init: also fine-tune every task from a randomly initialised encoder of the "
        "same size (into <output_dir>/random_init/<task>/), a row that shows what "
        "pre-training adds.",
        choices=(RANDOM_INIT,),
    )
    num_train_epochs: Optional[float] = flag_field(
        None, "Epochs for every task (default: the project's, per task and model size)."
    )
    max_seq_length: Optional[int] = flag_field(
        None, "Tokens per example for every task (default: the project's)."
    )
    train_batch_size: Optional[int] = flag_field(
        None, "Examples per step for every task (default: the project's)."
    )
    learning_rate: Optional[float] = flag_field(
        None, "Peak learning rate for every task (default: the project's)."
    )
    max_train_examples: Optional[int] = flag_field(
        None,
        "Train each task on this many examples drawn from its training file (the same draw "
        "for every run; for quick checks).",
    )
    restart: bool = flag_field(
        False,
        "Start unfinished trials again from step 0 although they have checkpoints (moved "
        "aside, not deleted). Without it an unfinished trial resumes.",
    )


def suite_named(name: str) -> Suite:
    """The suite called `name` (`koelectra`, `chinese-electra` or `chinese_electra`).

    Raises:
        RunError: no such suite (the message lists them).
    """
    suite = SUITES.get(SUITE_NAMES.get(name, name))
    if suite is None:
        raise RunError(f"--suite={name}: choose one of {', '.join(SUITE_NAMES)}.")
    return suite


def select_tasks(suite: Suite, names: Optional[list]) -> list[BenchmarkTask]:
    """The suite's tasks named (all when `names` is empty), in the table's order.

    Raises:
        RunError: a name the suite does not have, in one line naming its tasks.
    """
    if not names:
        return list(suite.tasks)
    known = [t.name for t in suite.tasks]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise RunError(
            f"--tasks: {', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not a task "
            f"of {suite.name.replace('_', '-')}; its tasks are {', '.join(known)}."
        )
    return [t for t in suite.tasks if t.name in names]


def recipe_size(model_size: str) -> str:
    """The size whose published recipes apply: small for tiny, base for large."""
    return _RECIPE_SIZES[model_size]


def task_settings(
    base: FinetuneSettings,
    recipe: Recipe,
    options: SuiteOptions,
    output_dir: str,
    random_init: bool = False,
) -> FinetuneSettings:
    """One task's settings: the recipe's values unless the options override them.

    A value the recipe leaves open (None) keeps `base`'s; the epochs then
    default to the task's (`FinetuneSettings.resolve`).

    Args:
        base: the settings every task shares (trials, seed, precision, ...).
        recipe: the project's settings for the task and model size.
        options: the suite's flags.
        output_dir: the task's fine-tuning output directory.
        random_init: fine-tune from a randomly initialised encoder.
    """

    def first(*values):
        return next((v for v in values if v is not None), None)

    return dataclasses.replace(
        base,
        output_dir=output_dir,
        random_init=random_init,
        learning_rate=first(options.learning_rate, recipe.learning_rate),
        train_batch_size=first(
            options.train_batch_size, recipe.train_batch_size, base.train_batch_size
        ),
        num_train_epochs=first(options.num_train_epochs, recipe.num_train_epochs),
        warmup_proportion=first(recipe.warmup_proportion, base.warmup_proportion),
        weight_decay_rate=first(recipe.weight_decay_rate, base.weight_decay_rate),
        layerwise_lr_decay=first(recipe.layerwise_lr_decay, base.layerwise_lr_decay),
    )
