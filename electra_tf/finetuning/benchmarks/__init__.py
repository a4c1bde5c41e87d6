"""The benchmark tables Korean and Chinese users judge an ELECTRA by, as typed records.

* `records`: a suite, its tasks, their recipes and published scores.
* `koelectra`: KoELECTRA's eight Korean tasks (`KOELECTRA`).
* `chinese_electra`: Chinese-ELECTRA's six Chinese tasks (`CHINESE_ELECTRA`).
* `klue`: KLUE's Korean tasks as KLUE-baseline scores them (`KLUE`).
* `clue`: CLUE's seven Chinese tasks (`CLUE`), with its submission files.
* `building`: a suite task's files read into the trial loop's task object.
* `options`: a suite run's options, and a task's settings from its recipe.
* `table`: our scores in the tables' units; suite.md beside the published rows.

`electra_tf.training.suite_run` runs a whole suite (`commands/suite`).
"""

from electra_tf.finetuning.benchmarks.chinese_electra import CHINESE_ELECTRA
from electra_tf.finetuning.benchmarks.clue import CLUE
from electra_tf.finetuning.benchmarks.klue import KLUE
from electra_tf.finetuning.benchmarks.koelectra import KOELECTRA

SUITES = {suite.name: suite for suite in (KOELECTRA, CHINESE_ELECTRA, KLUE, CLUE)}
