"""Our scores in a suite's published units, and the Markdown table that sets them beside its rows.

results.json keeps classification, regression and tagging metrics as
fractions (accuracy 0.8936) and question answering's as the official
scripts print them (EM 82.11); the published tables print percentages
throughout. `task_entry` turns a task's results.json into its entry of
suite.json (see `electra_tf.artifacts.suite_dir`), `render_table` the whole
suite.json into suite.md. Nothing here reads or writes a file.
"""

from __future__ import annotations

from typing import Optional

from electra_tf.finetuning.benchmarks.building import file_names
from electra_tf.finetuning.kind.benchmark import BenchmarkTask, Suite
from electra_tf.finetuning.kinds import kind_for_type


def in_table_unit(benchmark: BenchmarkTask, value: float) -> float:
    """A results.json value of one of the task's metrics, in the published table's unit."""
    percent = kind_for_type(benchmark.kind).SCORES_IN_PERCENT
    return float(value) if percent else 100.0 * float(value)


def table_metrics(benchmark: BenchmarkTask) -> tuple[str, ...]:
    """The metrics the table prints for the task: its own, its kind's (EM and F1 for QA), else the
    headline."""
    return (
        benchmark.table_metrics
        or kind_for_type(benchmark.kind).TABLE_METRICS
        or (benchmark.metric,)
    )


# How the tables' column headers name a metric (others by their results.json name).
METRIC_TITLES = {
    "exact_match": "EM",
    "f1": "F1",
    "pearson": "Pearson r",
    "f1_at_3": "F1",
    "entity_macro_f1": "entity F1",
    "char_macro_f1": "char F1",
    "relation_micro_f1": "F1",
    "auprc": "AUPRC",
    "rouge_w": "ROUGE-W",
    "uas_macro_f1": "UAS",
    "las_macro_f1": "LAS",
}


def scored_predictions(benchmark: BenchmarkTask, trial: dict) -> Optional[str]:
    """The trial's predictions file of the scored split (results.json's `predictions`)."""
    key = kind_for_type(benchmark.kind).SCORED_PREDICTIONS
    return trial.get("predictions", {}).get(key)


def task_entry(
    benchmark: BenchmarkTask,
    results: dict,
    results_file: str,
    scored_file: str,
    settings: dict,
) -> dict:
    """A task's entry of suite.json from its run's results.json.

    Args:
        benchmark: the suite's record of the task.
        results: the run's results.json (at least one trial).
        results_file: its path.
        scored_file: the file the score is on.
        settings: what the task was fine-tuned with (learning rate, batch,
            epochs, length, the recipe's source).
    """
    best = next(t for t in results["trials"] if t["trial"] == results["best_trial"])
    return {
        "title": benchmark.title,
        "metric": benchmark.metric,
        "unit": benchmark.unit,
        "split": benchmark.scored_split,
        "file": scored_file,
        "score": in_table_unit(benchmark, results["median"][benchmark.metric]),
        "scores": {
            name: in_table_unit(benchmark, results["median"][name])
            for name in table_metrics(benchmark)
            if name in results["median"]
        },
        "trials": len(results["trials"]),
        "best_trial": best["trial"],
        "predictions": scored_predictions(benchmark, best),
        "results": results_file,
        "settings": settings,
    }


# ---------------------------------------------------------------------------
# suite.md


def _cell(benchmark: BenchmarkTask, scores: dict) -> str:
    values = [scores.get(name) for name in table_metrics(benchmark)]
    if any(v is None for v in values):
        return "–"
    return " / ".join(f"{v:.2f}" for v in values)


def _published_split(benchmark: BenchmarkTask, model: str) -> Optional[str]:
    """The split the model's published numbers are on: the scored one when the table has it,
    else the one split of the model's scores (KLUE publishes its hidden test set's), else None."""
    splits = {s.split for e in benchmark.published if e.model == model for s in e.scores}
    if benchmark.scored_split in splits or len(splits) != 1:
        return benchmark.scored_split
    return splits.pop()


def _published_cell(benchmark: BenchmarkTask, model: str) -> str:
    split = _published_split(benchmark, model)
    cells = []
    for name in table_metrics(benchmark):
        try:
            score = benchmark.published_score(model, name, split)
        except KeyError:
            return "–"
        cells.append(f"{score.value:.2f}" + (f" ({score.mean:.2f})" if score.mean else ""))
    return " / ".join(cells) + ("" if split == benchmark.scored_split else f" ({split})")


def _header(benchmark: BenchmarkTask) -> str:
    metrics = table_metrics(benchmark)
    if len(metrics) == 1:
        return benchmark.title
    return f"{benchmark.title} ({' / '.join(METRIC_TITLES.get(m, m) for m in metrics)})"


def render_table(suite: Suite, summary: dict) -> str:
    """suite.md: our row (and the baseline's) beside the published rows, then what each means.

    Args:
        suite: the suite.
        summary: suite.json's content.
    """
    names = [t.name for t in suite.tasks if t.name in summary["tasks"]]
    benchmarks = [suite.task(n) for n in names]
    baseline = summary.get("baseline", {}).get("random_init", {}).get("tasks")
    lines = [
        f"# {suite.title}",
        "",
        f"Fine-tuned from `{summary['init_checkpoint']}` ({summary['model_size']} model; "
        f"the published settings for {summary['recipe']} models), on the files in "
        f"`{summary['data_dir']}`. Ours: the median over each task's trials.",
        "",
    ]
    if not names:
        lines.append("No task was run.")
    else:
        lines += [
            "| model | " + " | ".join(_header(b) for b in benchmarks) + " |",
            "|---|" + "---|" * len(benchmarks),
            f"| ours: {summary['model_name']} | "
            + " | ".join(_cell(b, summary["tasks"][b.name]["scores"]) for b in benchmarks)
            + " |",
        ]
        if baseline is not None:
            lines.append(
                f"| random init, {summary['model_size']} (no pre-training) | "
                + " | ".join(
                    _cell(b, baseline[b.name]["scores"]) if b.name in baseline else "–"
                    for b in benchmarks
                )
                + " |"
            )
        for model in suite.models:
            lines.append(
                f"| published: {model} | "
                + " | ".join(_published_cell(b, model) for b in benchmarks)
                + " |"
            )
        lines += ["", "Each column:", ""]
        for benchmark in benchmarks:
            entry = summary["tasks"][benchmark.name]
            settings = entry["settings"]
            trials = entry["trials"]
            base = baseline.get(benchmark.name) if baseline is not None else None
            lines.append(
                f"- {benchmark.title}: {benchmark.unit}, on {entry['split']} "
                f"(`{file_names(entry['file'])}`); ours: median of {trials} trial(s)"
                + (f", random init: of {base['trials']}" if base else "")
                + f"; learning rate {settings['learning_rate']:g}, batch "
                f"{settings['train_batch_size']}, {settings['num_train_epochs']:g} epochs, "
                f"length {settings['max_seq_length']}."
            )
        lines += [
            "",
            f"Published rows: {suite.source}; {suite.published_as}. They are not comparable "
            "with ours unless the files, the model and its pre-training are.",
        ]
    skipped = summary.get("skipped", {})
    if skipped:
        lines += ["", "Skipped (files not found):", ""]
        lines += [f"- {name}: {', '.join(s['missing'])}" for name, s in skipped.items()]
    not_selected = summary.get("not_selected", [])
    if not_selected:
        lines += ["", f"Not selected (--tasks): {', '.join(not_selected)}."]
    return "\n".join(lines) + "\n"
