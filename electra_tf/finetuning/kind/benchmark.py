"""What a benchmark suite says about each of its tasks: files, reader, metric, recipe, scores.

A suite (`Suite`) is the table a community judges a pre-trained model by
(KoELECTRA's for Korean, Chinese-ELECTRA's for Chinese); each of its tasks
is one `BenchmarkTask`: the files inside the suite's data directory as the
project distributes them, how they are read, the metric and the unit of
the published table, the fine-tuning settings the project publishes per
model size (`Recipe`) and the published scores (`Published`), each with
the address of the page it was copied from. Nothing here reads a file;
the kind of a task (`kinds.kind_for_type(task.kind)`) reads its files
(`TaskKind.from_benchmark`).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

# The splits a task's files and scores are named by.
TRAIN, DEV, TEST = "train", "dev", "test"


@dataclasses.dataclass(frozen=True)
class Recipe:
    """The fine-tuning settings a project gives for one task and one model size.

    None: the project states no value (our default applies).

    Attributes:
        learning_rate: peak learning rate.
        train_batch_size: examples per step.
        num_train_epochs: passes over the training file.
        max_seq_length: tokens per example (QA: per window).
        warmup_proportion: fraction of steps of linear warmup.
        weight_decay_rate: decoupled weight decay.
        layerwise_lr_decay: learning-rate factor per layer from the top (1:
            none, as Hugging Face's AdamW trains).
        source: where each value was read (file and commit, or README section).
    """

    learning_rate: float
    train_batch_size: Optional[int]
    num_train_epochs: Optional[float]
    max_seq_length: Optional[int]
    warmup_proportion: Optional[float]
    weight_decay_rate: Optional[float]
    layerwise_lr_decay: Optional[float]
    source: str


@dataclasses.dataclass(frozen=True)
class Score:
    """One published number, in the table's unit.

    Attributes:
        metric: our name of the metric (the key in results.json).
        split: the split it was measured on (`dev`, `test`, ...).
        value: the number as printed (percent: accuracy x 100, Spearman x
            100, entity F1 x 100, EM and F1 as the official scripts print).
        mean: Chinese-ELECTRA prints the best of 10 runs and, in
            parentheses, their mean; None where no mean is printed.
    """

    metric: str
    split: str
    value: float
    mean: Optional[float] = None


@dataclasses.dataclass(frozen=True)
class Published:
    """A model's published scores on one task.

    Attributes:
        model: the model's name in the table (`KoELECTRA-Small-v3`).
        model_size: `small` or `base` (the recipe it was fine-tuned with).
        scores: its numbers.
    """

    model: str
    model_size: str
    scores: tuple[Score, ...]


@dataclasses.dataclass(frozen=True)
class BenchmarkTask:
    """One task of a suite.

    Attributes:
        name: the project's name of the task (its folder name, `naver-ner`).
        title: its name in the published table (`Naver NER`).
        kind: its task type (`electra_tf.finetuning.kinds.TASK_TYPES`).
        directory: its folder inside the suite's data directory.
        files: split -> file name inside `directory`, as the project
            distributes them (a split the project has no file for is absent).
        scored_split: the split the published numbers are on (the task's
            evaluation file when it is built); other labelled evaluation
            splits are scored too (classification), named by their split.
        metric: our name of the headline metric (`accuracy`, `spearman`,
            `macro_f1`, `f1`; QA: `exact_match` and `f1`, `f1` first).
        unit: the published table's unit, in words.
        labels: class names in id order (classification).
        label_scale: regression targets are divided by it for training.
        tables: split -> `classification.tables.TableLayout` or `JsonLayout`
            (classification and regression).
        tagging_layout: the tagging file layout (tagging).
        qa_metric: whose official QA scores (`korquad`, `cmrc2018`, `drcd`, `klue_mrc`).
        submission: the file a leaderboard takes the test split's predictions
            in (CLUE's `tnews11_predict.json`, ...): the test file is then
            read unlabelled and its predictions written there, in the
            leaderboard's format (None: a labelled test file is scored).
        recipes: model size -> the project's fine-tuning settings.
        published: the published scores, one entry per model.
        notes: what differs from the project's own reading, if anything.
        table_metrics: the metrics the published table prints for the task,
            headline first (empty: the kind's `TABLE_METRICS`, else the
            headline alone); every one is computed on the scored split.
    """

    name: str
    title: str
    kind: str
    directory: str
    files: dict[str, str]
    scored_split: str
    metric: str
    unit: str
    recipes: dict[str, Recipe]
    published: tuple[Published, ...]
    labels: Optional[tuple[str, ...]] = None
    label_scale: float = 1.0
    tables: Optional[dict] = None
    tagging_layout: Optional[str] = None
    qa_metric: Optional[str] = None
    submission: Optional[str] = None
    notes: str = ""
    table_metrics: tuple[str, ...] = ()

    def __post_init__(self):
        if self.scored_split not in self.files:
            raise ValueError(f"task {self.name}: no file for the scored split {self.scored_split}")
        if TRAIN not in self.files:
            raise ValueError(f"task {self.name}: no training file")
        if self.tables is not None:
            missing = set(self.files) - set(self.tables)
            if missing:
                raise ValueError(f"task {self.name}: no table layout for {sorted(missing)}")
        if self.submission is not None and (TEST not in self.files or self.scored_split == TEST):
            raise ValueError(f"task {self.name}: a submission file needs an unscored test file")

    def published_score(self, model: str, metric: str, split: Optional[str] = None) -> Score:
        """The published `metric` of `model` on `split` (default: the scored split).

        Raises:
            KeyError: the table has no such number.
        """
        split = split or self.scored_split
        for entry in self.published:
            if entry.model == model:
                for score in entry.scores:
                    if score.metric == metric and score.split == split:
                        return score
        raise KeyError(f"{self.name}: no published {metric} on {split} for {model}")


@dataclasses.dataclass(frozen=True)
class Suite:
    """A benchmark table and where its data and numbers come from.

    Attributes:
        name: `koelectra`, `chinese_electra`, `klue` or `clue`.
        title: the project.
        data_layout: what `--data_dir` must hold, in words.
        data_subdirectory: a folder of the distributed layout that holds the
            task folders (Chinese-ELECTRA's `finetuning_data`): a data
            directory holding it is read through it.
        tasks: the tasks, in the table's order.
        source: the page the scores and settings were copied from (with commit).
        models: the models whose scores are recorded, in the table's order.
        published_as: how the published numbers were obtained, in words
            (runs per task, which number of them is printed).
    """

    name: str
    title: str
    data_layout: str
    tasks: tuple[BenchmarkTask, ...]
    source: str
    models: tuple[str, ...]
    data_subdirectory: Optional[str] = None
    published_as: str = ""

    def task(self, name: str) -> BenchmarkTask:
        """The task called `name`.

        Raises:
            KeyError: no such task (the message lists them).
        """
        for task in self.tasks:
            if task.name == name:
                return task
        raise KeyError(
            f"suite {self.name} has no task {name!r}; its tasks are "
            + ", ".join(t.name for t in self.tasks)
        )
