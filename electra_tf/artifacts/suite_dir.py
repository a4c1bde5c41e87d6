"""A benchmark suite's output directory: one fine-tuning run per task, and the suite's summary.

    suite.json              the suite's scores (below), rewritten after every task
    suite.md                our rows beside the published ones (Markdown)
    <task>/                 the task's fine-tuning output directory (see `finetuning_dir`:
                            results.json, trial_<k>/ with the predictions)
    random_init/<task>/     the same task fine-tuned from a randomly initialised encoder
                            (with --baseline=random_init)
    imported_checkpoint/    --init_checkpoint converted into a run directory, if foreign

suite.json:

    format_version   1
    suite, title     the suite's name and project
    source           the page its published scores were copied from
    init_checkpoint  the pre-trained discriminator file every task started from
    model_size       its size; recipe: the size whose published settings were used
    data_dir         the suite's data directory
    tasks            {task: entry} of the tasks run, in the table's order
    skipped          {task: {"missing": [paths looked for]}}: files absent
    not_selected     tasks left out by --tasks
    baseline         {"random_init": {"tasks": {task: entry}}} (with --baseline)

An entry:

    title, metric    the task's name in the table; the headline metric (results.json's name)
    unit, split      the table's unit in words; the split the score is on
    score            the median over the trials of the headline metric, in the table's unit
                     (accuracy, correlations and F1 x 100; EM and F1 of QA as the
                     official scripts print them)
    scores           every metric the table prints for the task, in its unit (QA: EM and F1)
    trials           the number of trials finished
    predictions      the best trial's predictions file of the scored split
    results          the run's results.json
    settings         learning_rate, train_batch_size, num_train_epochs, max_seq_length
                     the task was fine-tuned with, and the recipe's source
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

from electra_tf.artifacts.files import Within, atomic_open, write_json

SUITE_FORMAT = 1
SUITE_FILE = "suite.json"
TABLE_FILE = "suite.md"
RANDOM_INIT = "random_init"
BASELINES = (RANDOM_INIT,)


@dataclasses.dataclass(frozen=True)
class SuiteDir:
    """The paths of one suite output directory (nothing is created or checked)."""

    path: str

    suite_file = Within(SUITE_FILE)
    table_file = Within(TABLE_FILE)
    imported_checkpoint = Within("imported_checkpoint")

    def task_dir(self, task: str, baseline: Optional[str] = None) -> str:
        """The fine-tuning output directory of `task` (of a baseline's run, if given)."""
        if baseline is None:
            return os.path.join(self.path, task)
        if baseline not in BASELINES:
            raise ValueError(f"baseline {baseline!r} is none of {BASELINES}")
        return os.path.join(self.path, baseline, task)


def write_suite(suite_dir: SuiteDir, summary: dict, table: str) -> None:
    """Writes suite.json (atomically) and suite.md."""
    os.makedirs(suite_dir.path, exist_ok=True)
    write_json(suite_dir.suite_file, {"format_version": SUITE_FORMAT, **summary})
    with atomic_open(suite_dir.table_file) as f:
        f.write(table)
