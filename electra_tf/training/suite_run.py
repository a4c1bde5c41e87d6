"""A benchmark suite as one library call: every task whose files are present, fine-tuned and tabulated.

`run_suite` runs KoELECTRA's or Chinese-ELECTRA's table
(`electra_tf.finetuning.benchmarks`) from one pre-trained checkpoint:

* it looks for each selected task's files in the data directory, as the
  project distributes them; a task without its training or scored file is
  skipped, with the paths looked for;
* each task present is read (`benchmarks.building.build_task`) and
  fine-tuned by the trial loop (`finetuning_loop.run_trials`) into
  `<output_dir>/<task>/`, with the settings the project publishes for the
  checkpoint's model size unless the options override them; with the
  random-init baseline, again from freshly drawn weights into
  `<output_dir>/random_init/<task>/`;
* after every task, suite.json and suite.md are rewritten
  (`artifacts.suite_dir`, `benchmarks.table`) with the tasks done so far.

Resuming comes from the trial loop: a task whose results.json lists every
trial is passed over without tokenizing its data, an unfinished one resumes
from its last checkpoint. Console lines of a task's run carry the task's
place in the suite (`[2/7 naver-ner] ...`), the trial loop's ETA among them.
"""

from __future__ import annotations

import os
import time
from typing import Optional

import tensorflow as tf

from electra_tf.artifacts.finetuning_dir import FinetuningDir
from electra_tf.artifacts.pretrained import Pretrained, run_name
from electra_tf.artifacts.results import read_results
from electra_tf.artifacts.suite_dir import RANDOM_INIT, SuiteDir, write_suite
from electra_tf.distribute import is_chief, worker_print
from electra_tf.finetuning.benchmarks.building import build_task, suite_data_dir, task_files
from electra_tf.finetuning.benchmarks.options import (
    SuiteOptions,
    recipe_size,
    select_tasks,
    suite_named,
    task_settings,
)
from electra_tf.finetuning.benchmarks.table import render_table, task_entry
from electra_tf.finetuning.kind.benchmark import TRAIN, BenchmarkTask, Suite
from electra_tf.finetuning.kind.settings import FinetuneSettings
from electra_tf.training.callbacks import format_duration
from electra_tf.training.finetuning_loop import pending_trials, run_trials


def plan_tasks(
    suite: Suite, tasks: list[BenchmarkTask], data_dir: str
) -> tuple[list[BenchmarkTask], dict]:
    """(the tasks whose training and scored files are present, {skipped task: missing paths})."""
    present, skipped = [], {}
    for benchmark in tasks:
        files, missing = task_files(suite, benchmark, data_dir)
        if TRAIN in files and benchmark.scored_split in files:
            present.append(benchmark)
        else:
            skipped[benchmark.name] = {"missing": missing}
    return present, skipped


def _prefixed(print_fn, prefix: str):
    return lambda message: print_fn(
        "\n".join(f"{prefix} {line}" if line else line for line in str(message).split("\n"))
    )


def _run_task(
    built,
    pretrained: Pretrained,
    settings: FinetuneSettings,
    print_fn,
    loop_print_fn,
    strategy,
    restart: bool,
) -> tuple[dict, dict]:
    """Runs (or passes over) one task's trials; returns (results.json, the settings applied).

    `print_fn` prints this process's lines as they are; `loop_print_fn` is
    given to the trial loop, which labels other workers' lines itself.
    """
    task = built.task
    results_file = FinetuningDir(settings.output_dir).results_file
    pending = pending_trials(task, pretrained, settings)
    if pending:
        results = run_trials(
            task, pretrained, settings, print_fn=loop_print_fn, strategy=strategy, restart=restart
        )
    else:
        results = read_results(results_file)
        print_fn(f"already finished: {len(results['trials'])} trial(s) in {results_file}; skipped.")
    resolved = settings.resolve(pretrained.config.model_size, task.default_epochs)
    applied = {
        "learning_rate": resolved.learning_rate,
        "train_batch_size": resolved.train_batch_size,
        "num_train_epochs": resolved.num_train_epochs,
        "max_seq_length": task.max_seq_length,
        "warmup_proportion": resolved.warmup_proportion,
        "weight_decay_rate": resolved.weight_decay_rate,
        "layerwise_lr_decay": resolved.layerwise_lr_decay,
        "recipe_source": built.recipe.source,
    }
    return results, applied


def run_suite(
    options: SuiteOptions,
    pretrained: Pretrained,
    base: FinetuneSettings,
    print_fn=print,
    strategy=None,
) -> dict:
    """Runs the suite's tasks present in `options.data_dir`; returns suite.json's content.

    Args:
        options: the suite, its data and output directories, the tasks, the
            baseline and the overrides of the published settings.
        pretrained: the checkpoint every task starts from.
        base: what every task's settings share (trials, seed, precision,
            saving, ...); its output directory is replaced per task.
        print_fn: console output.
        strategy: the tf.distribute strategy to train under (default: the
            current one). Every worker runs the tasks (other workers' lines
            labelled); only the chief writes suite.json and suite.md.

    Raises:
        RunError: an unknown suite or task, an impossible setting, or an
            output directory holding another run's results (nothing is
            deleted; tasks finished before are kept and skipped next time).
        TaskDataError: a file that does not fit its layout.
    """
    strategy = strategy or tf.distribute.get_strategy()
    chief = is_chief(strategy)
    say = worker_print(print_fn, strategy)  # the trial loop labels its own lines
    suite = suite_named(options.suite)
    selected = select_tasks(suite, options.tasks)
    model_size = pretrained.config.model_size
    recipe = recipe_size(model_size)
    # Paths on record (suite.json, results.json) hold wherever the suite is run from.
    output = SuiteDir(os.path.abspath(options.output_dir))
    data_dir = os.path.abspath(options.data_dir)
    present, skipped = plan_tasks(suite, selected, data_dir)
    chosen = {t.name for t in selected}
    summary = {
        "suite": suite.name,
        "title": suite.title,
        "source": suite.source,
        "init_checkpoint": pretrained.model_file,
        "model_name": run_name(pretrained.model_file),
        "model_size": model_size,
        "recipe": recipe,
        "data_dir": suite_data_dir(suite, data_dir),
        "num_trials": base.num_trials,
        "tasks": {},
        "skipped": skipped,
        "not_selected": [t.name for t in suite.tasks if t.name not in chosen],
    }
    runs = [None] + ([RANDOM_INIT] if options.baseline == RANDOM_INIT else [])
    if options.baseline == RANDOM_INIT:
        summary["baseline"] = {RANDOM_INIT: {"tasks": {}}}

    say(
        f"{suite.title}: {len(present)} of {len(selected)} task(s) to run from {summary['data_dir']}"
    )
    if recipe != model_size:
        say(
            f"The checkpoint is a {model_size} model; the project publishes settings for small "
            f"and base models: {recipe}'s apply."
        )
    for name, entry in skipped.items():
        say(f"  {name}: skipped (no {', '.join(entry['missing'])})")

    for number, benchmark in enumerate(present, 1):
        place = f"[{number}/{len(present)} {benchmark.name}]"
        built = build_task(
            suite,
            benchmark.name,
            data_dir,
            recipe,
            max_seq_length=options.max_seq_length,
            max_train_examples=options.max_train_examples,
            warn=_prefixed(say, place),
        )
        say(f"{place} {built.describe()}")
        for baseline in runs:
            label = (
                place
                if baseline is None
                else f"[{number}/{len(present)} {benchmark.name}, random init]"
            )
            started = time.perf_counter()
            settings = task_settings(
                base,
                built.recipe,
                options,
                output.task_dir(benchmark.name, baseline),
                random_init=baseline == RANDOM_INIT,
            )
            results, applied = _run_task(
                built,
                pretrained,
                settings,
                _prefixed(say, label),
                _prefixed(print_fn, label),
                strategy,
                options.restart,
            )
            entry = task_entry(
                benchmark,
                results,
                FinetuningDir(settings.output_dir).results_file,
                built.files[benchmark.scored_split],
                applied,
            )
            if baseline is None:
                summary["tasks"][benchmark.name] = entry
            else:
                summary["baseline"][baseline]["tasks"][benchmark.name] = entry
            if chief:
                write_suite(output, summary, render_table(suite, summary))
            published = _published_line(benchmark, suite)
            say(
                f"{label} {benchmark.metric} {entry['score']:.2f} ({benchmark.unit}; median of "
                f"{entry['trials']} trial(s)) in {format_duration(time.perf_counter() - started)}"
                + (f"; published: {published}" if published else "")
            )
    if chief:  # (a suite with nothing to run writes its skipped tasks)
        write_suite(output, summary, render_table(suite, summary))
    return summary


def _published_line(benchmark: BenchmarkTask, suite: Suite) -> Optional[str]:
    """`model value, ...` of the task's published headline numbers, for the console."""
    values = []
    for model in suite.models:
        try:
            values.append(f"{model} {benchmark.published_score(model, benchmark.metric).value:.2f}")
        except KeyError:
            continue
    return ", ".join(values) or None
