"""The one contract every kind of fine-tuning task implements.

A task kind — classification and regression, question answering, token
classification, multiple choice, dependency parsing — is one class. An instance is a task with its data, as the
trial loop (`electra_tf.training.finetuning_loop`) runs it: it reads the
files, turns them into features, puts a head on the encoder (whose train
step computes the loss), scores the dev split and writes its predictions.
The class itself answers for every model of its kind once it is saved:
its TF Serving signatures and the entries of `serving_config.json`
(`electra_tf.serving.exporter`), the requests that check an export
(`electra_tf.serving.check`) and the names of its head in Hugging Face's
`transformers` (`electra_tf.interop.hf_finetuned`).

`electra_tf.finetuning.kinds` lists the kinds. A model's `info` (saved in
`model.json` beside it, and read back by every export and check) holds its
kind's `KIND`, what `model_info` returns and its `TextPath`; nothing
outside a kind's own package tests which kind a model is.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Callable, ClassVar, Optional

import numpy as np
import tensorflow as tf

from electra_tf.artifacts.finetuning_dir import TrialDir, holds_saved_model, load_saved_model
from electra_tf.artifacts.serving_dir import VersionDir
from electra_tf.errors import RunError
from electra_tf.finetuning.kind.benchmark import BenchmarkTask, Recipe
from electra_tf.finetuning.kind.file_scoring import EvalFile, ScoredFile
from electra_tf.finetuning.kind.files import FileTaskOptions
from electra_tf.finetuning.kind.settings import FinetuneOptions, require_positive
from electra_tf.tokenization import WordPieceTokenizer


@dataclasses.dataclass
class TaskOptions:
    """What the fine-tuning command line says about the task.

    Attributes:
        run: what is fine-tuned, on which data (`FinetuneOptions`).
        files: how the user's files are read (`FileTaskOptions`).
        given: the names of the flags given on the command line (a kind may
            default a flag differently when it is absent).
        print_fn: console output (warnings while reading).
        kind_options: {options class: its values} of the kinds' own flags
            (`TaskKind.OPTIONS`).
    """

    run: FinetuneOptions
    files: FileTaskOptions
    given: frozenset = frozenset()
    print_fn: Callable[[str], None] = print
    kind_options: dict = dataclasses.field(default_factory=dict)

    def own(self, options_class: type):
        """A kind's own options (`TaskKind.OPTIONS`): as given, or at their defaults."""
        return self.kind_options.get(options_class) or options_class()

    def refuse(self, *names: str, reason: str) -> None:
        """Raises RunError for the first of the flags `names` that is set: `--name <reason>`."""
        for name in names:
            for options in (self.run, self.files, *self.kind_options.values()):
                if getattr(options, name, None):
                    raise RunError(f"--{name} {reason}")


def format_scores(scores: dict) -> str:
    """`name value, ...` of the scores without a `/` (per-type scores), in percent."""
    return ", ".join(f"{k} {100 * v:.2f}" for k, v in scores.items() if "/" not in k)


def format_table(header: list[str], rows: list[list[str]]) -> str:
    """Right-aligned columns, a rule under the header."""
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in [header] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def percent(value) -> str:
    """A fraction in percent with two decimals ("" for none)."""
    return "" if value is None else f"{100 * value:.2f}"


def trials_table(results: dict, names: list[str]) -> str:
    """A run's trials and their median (results.json) as a text table of `names`, in percent."""

    rows = [
        [str(t["trial"]), str(t["seed"])] + [percent(t["dev"].get(n)) for n in names]
        for t in results["trials"]
    ]
    rows.append(["median", ""] + [percent(results["median"].get(n)) for n in names])
    return format_table(["trial", "seed"] + names, rows)


class TaskKind(abc.ABC):
    """A kind of fine-tuning task: the data, model, scores and export of its tasks.

    Subclasses are dataclasses holding a task's data and settings. They
    define the class attributes below and the abstract methods; the trial
    loop reads the instance attributes `name`, `primary_metric`,
    `default_epochs`, `max_seq_length` and `max_train_examples`.

    Class attributes:
        KIND: the kind's name in `model.json` and `serving_config.json`: its
            first task type.
        TASK_TYPES: the `--task_type` values (and suite task kinds) it claims.
        FORMER_KINDS: names earlier versions wrote for `KIND` in saved models.
        REQUEST_FIELDS: the inputs of its raw-text signature, which a JSON
            line sent to `predict` holds.
        MODEL_CLASS: the Keras class of its models (a model's kind is the
            kind of its class).
        OPTIONS: a dataclass of the kind's own command-line flags (fields
            made with `config.flag_field`), or None.
        HF_ARCHITECTURE: the `transformers` class of a model of this kind
            (None: not converted).
        HF_IMPORT_OPTIONS: the `options` its `from_hf` reads.
        DEFAULT_MAX_SEQ_LENGTH: tokens per example when neither a flag nor a
            suite's recipe says.
        SCORES_IN_PERCENT: results.json holds its scores as percentages (as
            official scripts print them), not fractions.
        TABLE_METRICS: the metrics a suite's table prints for a task of this
            kind (empty: the task's headline metric).
        SCORED_PREDICTIONS: the key of results.json's trial `predictions` that
            names the predictions of the scored split.
        FORWARDS: the ways its serving module can compute the model (the
            `forward` of `serving_module`); the exporter refuses any other.
        console_keys: values of the train step shown on progress lines.
        evaluate_every_epoch: score the dev split at every epoch's end, not
            only after the last.
    """

    KIND: ClassVar[str]
    TASK_TYPES: ClassVar[tuple[str, ...]]
    FORMER_KINDS: ClassVar[tuple[str, ...]] = ()
    REQUEST_FIELDS: ClassVar[tuple[str, ...]] = ("text",)
    MODEL_CLASS: ClassVar[type]
    OPTIONS: ClassVar[Optional[type]] = None
    FORWARDS: ClassVar[tuple[str, ...]] = ("keras",)
    DEFAULT_MAX_SEQ_LENGTH: ClassVar[int] = 128
    SCORES_IN_PERCENT: ClassVar[bool] = False
    TABLE_METRICS: ClassVar[tuple[str, ...]] = ()
    SCORED_PREDICTIONS: ClassVar[str] = "dev"
    HF_ARCHITECTURE: ClassVar[Optional[str]] = None
    HF_IMPORT_OPTIONS: ClassVar[tuple[str, ...]] = ("max_seq_length",)
    console_keys: ClassVar[tuple[str, ...]] = ("loss", "accuracy")
    evaluate_every_epoch: ClassVar[bool] = True

    # ------------------------------------------------------------------
    # Reading: which kind the command line asks for, and its task.

    @classmethod
    def selected_by(cls, options: TaskOptions) -> bool:
        """Whether the command line asks for this kind other than by `--task_type`."""
        return False

    @classmethod
    @abc.abstractmethod
    def from_options(cls, options: TaskOptions) -> "TaskKind":
        """Reads the task's files (or TFDS splits) as the command line says.

        Raises:
            RunError (or the kind's data error): a flag that does not apply,
                or data that cannot be read, naming the flag or file.
        """

    @classmethod
    def from_benchmark(
        cls,
        benchmark: BenchmarkTask,
        recipe: Recipe,
        present: dict[str, str],
        max_seq_length: int,
        max_train_examples: Optional[int],
        warn=print,
    ) -> tuple["TaskKind", dict[str, str]]:
        """(the task, split -> path of each file read) of a suite's task.

        Args:
            benchmark: the suite's record of the task (its `kind` one of
                this kind's `TASK_TYPES`).
            recipe: the suite's settings for the model size.
            present: split -> path of the task's files found (the training
                file and the scored split's are among them).

        Raises:
            RunError: this kind has no suite tasks; TaskDataError: a file
                that does not fit its layout.
        """
        raise RunError(f"{benchmark.name}: {cls.KIND} tasks are not read from a suite's files.")

    # ------------------------------------------------------------------
    # The trial loop.

    @property
    def run_files(self) -> tuple[str, ...]:
        """Prediction files of trial 0 also copied into the output directory."""
        return ()

    @property
    @abc.abstractmethod
    def num_train_examples(self) -> int:
        """Examples per epoch (after `prepare`)."""

    @abc.abstractmethod
    def describe(self) -> dict:
        """results.json's `task`: part of the run's identity."""

    @abc.abstractmethod
    def settings(self) -> dict:
        """The task's own settings in results.json: part of the run's identity."""

    @abc.abstractmethod
    def model_info(self) -> dict:
        """What a saved model of this task needs besides its text path (without `kind`)."""

    @abc.abstractmethod
    def prepare(self, tokenizer: WordPieceTokenizer, print_fn=print) -> dict:
        """Tokenizes the data; returns the training data counts for results.json."""

    @abc.abstractmethod
    def train_dataset(self, batch_size: int, seed: int, by_length: bool) -> tf.data.Dataset:
        """(inputs, labels) batches, reshuffled every epoch with `seed`, repeated forever.

        `by_length`: batches of rows of similar length, padded to a few fixed
        lengths (`text_features.length_grouped_batches`), where rows differ
        in length; otherwise each batch is padded to its longest row.
        """

    @abc.abstractmethod
    def build_model(self, encoder, seed: int):
        """The encoder with a fresh head seeded by `seed`; a `FinetuningLoss` model."""

    @abc.abstractmethod
    def evaluate(
        self, model, batch_size: int, trial: Optional[TrialDir] = None
    ) -> tuple[dict, dict]:
        """(dev metrics, {name: prediction file written into `trial`, when given})."""

    def format_metrics(self, scores: dict) -> str:
        """Dev metrics for the console (fractions shown in percent)."""
        return format_scores(scores)

    def format_results(self, results: dict) -> str:
        """The run's trials and their median for the console (results.json)."""
        names = [k for k in results["median"] if "/" not in k]
        return (
            f"Dev results ({self.name}, percent; primary metric: {self.primary_metric}):\n"
            + trials_table(results, names)
        )

    @classmethod
    def upgrade_description(cls, description: dict) -> dict:
        """results.json's `task` as written by an earlier version, in the current form."""
        return description

    # ------------------------------------------------------------------
    # A saved model of the kind. `info` is what `model.json` holds: `kind`,
    # `model_info()` and the `TextPath`.

    @classmethod
    def resolve_info(cls, info: dict) -> dict:
        """`info` with what models saved by earlier versions lack filled in."""
        return info

    @classmethod
    @abc.abstractmethod
    def serving_module(cls, model, tokenizer, info: dict, forward: Optional[str] = None):
        """A `tf.Module` whose `signatures()` serve `model` (float32) on raw text and ids.

        Args:
            forward: one of `FORWARDS`, how the signatures compute the model
                (None: the kind's default).
        """

    @classmethod
    def serving_config(cls, module, info: dict) -> dict:
        """The kind's entries of `serving_config.json` (beside kind, text path and model)."""
        return {}

    @classmethod
    def label_names(cls, info: dict) -> Optional[list[str]]:
        """The names written to `labels.txt` (None: no such file)."""
        return None

    @classmethod
    def reference_model(cls, version: VersionDir):
        """The Keras model an export of this kind keeps in `assets.extra/` (for the check).

        Raises:
            RunError: there is none.
        """
        if not holds_saved_model(version.extra):
            raise RunError(f"{version.path}: no fine-tuned model in assets.extra/ to compare with.")
        return load_saved_model(version.extra)[0]

    @classmethod
    @abc.abstractmethod
    def check_requests(cls, reference) -> tuple[list[dict], list[Optional[dict]], list[str]]:
        """(requests, expected outputs or None for "must fail", a description of each).

        `reference` has the export's `config` (serving_config.json), the
        Keras `model` and the `tokenizer`; the expected outputs come from the
        fine-tuning path in Python, independent of the signatures' graph.
        """

    @classmethod
    def benchmark_inputs(cls, benchmark: dict) -> dict:
        """The check's latency benchmark with the inputs this kind's signature takes."""
        return benchmark

    @classmethod
    def scored_file(cls, reference, eval_file: EvalFile) -> ScoredFile:
        """The labelled `eval_file` as requests for the export's check, and their scoring.

        Raises:
            RunError: this kind is not scored on a file, or the file's flags
                do not fit the export; TaskDataError: the file does not fit
                its layout.
        """
        raise RunError(
            f"--eval_file: {cls.KIND} exports are not scored on a file; it scores classifiers."
        )

    # ------------------------------------------------------------------
    # Hugging Face `transformers` (kinds with an `HF_ARCHITECTURE`).

    @classmethod
    def hf_head_state(cls, model, info: dict) -> dict[str, np.ndarray]:
        """The head's weights under `transformers`' names (PyTorch layout).

        Raises:
            RunError: this model's head is not the `transformers` class's (the
                message says why and what to do instead).
        """
        raise NotImplementedError(f"{cls.KIND} models are not converted to transformers.")

    @classmethod
    def hf_config(cls, model, info: dict) -> dict:
        """The head's entries of a `transformers` config.json (labels, task name)."""
        return {}

    @classmethod
    def from_hf(cls, encoder, hf_config: dict, state: dict, source: str, options: dict):
        """(model with `encoder` and the head of `state`, its info without the text path).

        Args:
            hf_config: the directory's config.json.
            state: its weights ({name: array}, PyTorch layout).
            source: the directory, for messages.
            options: the import's settings (e.g. `max_seq_length`, `tag_format`).
        """
        raise NotImplementedError(f"{cls.KIND} models are not converted from transformers.")


class DefinedTask:
    """Mix in before `TaskKind`: a task described by a `definition` dataclass.

    The definition has a `name`, a `primary_metric`, `num_train_epochs` and
    `to_dict()` (results.json's `task`); the task has `max_seq_length` and
    `max_train_examples`.
    """

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def primary_metric(self) -> str:
        return self.definition.primary_metric

    @property
    def default_epochs(self) -> float:
        return self.definition.num_train_epochs

    def describe(self) -> dict:
        """The task's entry in results.json: its definition."""
        return self.definition.to_dict()

    def check_sizes(self) -> None:
        """Refuses a length or a draw that is not positive (RunError naming the flag)."""
        require_positive(max_seq_length=self.max_seq_length)
        if self.max_train_examples is not None:
            require_positive(max_train_examples=self.max_train_examples)

    def settings(self) -> dict:
        """The task's own settings in results.json: its length, and the draw if any.

        Options added after results.json existed are recorded only when set,
        so that the results of earlier runs still match.
        """
        values = {"max_seq_length": self.max_seq_length}
        if self.max_train_examples is not None:
            values["max_train_examples"] = self.max_train_examples
        return values
