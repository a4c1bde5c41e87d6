"""Sentence (pair) classification and regression: the task kind.

`ClassificationTask` is a GLUE task or the user's own files as the trial
loop runs it (the tokenized splits, the classifier on the encoder, whose
train step computes the loss, dev metrics and GLUE-format test
predictions), and, as a class, what serves and checks a saved classifier
or regressor (`serving`, `check`) and converts one with transformers' head
from and to `ElectraForSequenceClassification`.
"""

from __future__ import annotations

import dataclasses
import os
from typing import ClassVar, Optional

import numpy as np
import tensorflow as tf

from electra_tf.artifacts.files import atomic_open
from electra_tf.artifacts.finetuning_dir import TrialDir
from electra_tf.errors import RunError
from electra_tf.finetuning.classification import check, data, features
from electra_tf.finetuning.classification.data import (
    CLASSIFICATION,
    GLUE_SPECS,
    REGRESSION,
    Split,
    Task,
    TaskData,
)
from electra_tf.finetuning.classification.json_tables import (
    JsonLinesLayout,
    read_json_lines,
    write_submission,
)
from electra_tf.finetuning.classification.model import (
    ELECTRA_HEAD,
    HEADS,
    TRANSFORMERS_HEAD,
    ElectraClassifier,
    build_classifier,
)
from electra_tf.finetuning.classification.serving import ClassifierServing
from electra_tf.finetuning.classification.tables import read_table
from electra_tf.finetuning.kind import metrics
from electra_tf.finetuning.kind.benchmark import TEST, TRAIN
from electra_tf.finetuning.kind.contract import DefinedTask, TaskKind, TaskOptions
from electra_tf.modeling import lean_forward

# transformers' names of ElectraClassificationHead's weights.
HF_DENSE = "classifier.dense"
HF_OUT_PROJ = "classifier.out_proj"
HF_HEAD_KEYS = tuple(
    f"{layer}.{w}" for layer in (HF_DENSE, HF_OUT_PROJ) for w in ("weight", "bias")
)
# transformers' problem types a single-label classifier or a regressor computes.
HF_PROBLEM_TYPES = ("single_label_classification", "regression")
# The served length of an imported classifier when the import names none.
DEFAULT_MAX_SEQ_LENGTH = 128
# How test predictions are written (`ClassificationTask.submission`).
GLUE_SUBMISSION, CLUE_SUBMISSION = "glue", "clue"


@dataclasses.dataclass
class EncodedSplit:
    """A split tokenized for the model."""

    split: Split
    encoded: list

    def dataset(
        self,
        batch_size: int,
        task: Task,
        shuffle_seed=None,
        repeat=False,
        pad_id: int = 0,
        with_labels: bool = True,
        by_length: bool = False,
    ) -> tf.data.Dataset:
        """Padded batches (see `features.make_dataset`); regression targets divided by the scale."""
        labels = None
        if with_labels and self.split.labels is not None:
            labels = self.split.labels
            if task.task_type == REGRESSION:
                labels = (labels / task.label_scale).astype(np.float32)
            else:
                labels = labels.astype(np.int32)
        return features.make_dataset(
            self.encoded, labels, batch_size, pad_id, shuffle_seed, repeat, by_length
        )


def encode_split(
    split: Split, tokenizer, max_seq_length: int, double_unordered: bool = False
) -> EncodedSplit:
    """Tokenizes a split; `double_unordered` appends every pair in the B, A order too."""
    encoded = features.encode(tokenizer, split.texts_a, split.texts_b, max_seq_length)
    if double_unordered and split.texts_b is not None:
        swapped = features.encode(tokenizer, split.texts_b, split.texts_a, max_seq_length)
        split = dataclasses.replace(
            split,
            texts_a=split.texts_a + split.texts_b,
            texts_b=split.texts_b + split.texts_a,
            labels=None if split.labels is None else np.concatenate([split.labels, split.labels]),
            indices=split.indices + split.indices,
        )
        encoded = encoded + swapped
    return EncodedSplit(split, encoded)


def predict(
    model, encoded: EncodedSplit, task: Task, batch_size: int, pad_id: int = 0
) -> np.ndarray:
    """Predicted class ids [N] (int), or regression values [N] in the label scale."""
    outputs = model.predict(
        encoded.dataset(batch_size, task, pad_id=pad_id, with_labels=False), verbose=0
    )
    if task.task_type == REGRESSION:
        return np.asarray(outputs, np.float64).reshape(-1) * task.label_scale
    return np.argmax(outputs, axis=-1)


def predict_probabilities(
    model, encoded: EncodedSplit, task: Task, batch_size: int, pad_id: int = 0
) -> np.ndarray:
    """Every class's probability [N, C] (float64): the softmax of the classifier's logits."""
    logits = np.asarray(
        model.predict(
            encoded.dataset(batch_size, task, pad_id=pad_id, with_labels=False), verbose=0
        ),
        np.float64,
    )
    exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True)


def split_suffix(name: str) -> str:
    """The suffix of a dev split's metrics: "" for `dev`, `_mismatched` for `dev_mismatched`."""
    return "" if name == "dev" else "_" + name.replace("dev_", "")


def _prediction_text(value, task: Task, digits: str = ".3f") -> str:
    """A prediction as written: the label name, or the score in `digits` (regression)."""
    if task.task_type == REGRESSION:
        return format(float(value), digits)
    return task.label_names[int(value)]


def write_predictions(path: str, split: Split, predictions: np.ndarray, task: Task) -> None:
    """GLUE submission format: a header `index<TAB>prediction`, then one line per example."""
    with atomic_open(path) as f:
        f.write("index\tprediction\n")
        for index, value in zip(split.indices, predictions):
            f.write(f"{index}\t{_prediction_text(value, task)}\n")


def write_scored_predictions(
    path: str,
    split: Split,
    predictions: np.ndarray,
    task: Task,
    probabilities: Optional[np.ndarray] = None,
) -> None:
    """A scored split's predictions beside their gold labels: `index<TAB>gold<TAB>prediction`.

    Labels are written as names, regression targets and predictions as
    numbers to 8 significant digits, so a dataset's own scorer recomputes the
    score. With `probabilities` [N, C] (a task scored by them, KLUE-RE's
    AUPRC), every class's probability follows in a column named by the class.
    """
    with atomic_open(path) as f:
        columns = ["index", "gold", "prediction"]
        if probabilities is not None:
            columns += task.label_names
        f.write("\t".join(columns) + "\n")
        for i, (index, gold, value) in enumerate(zip(split.indices, split.labels, predictions)):
            row = [index, _prediction_text(gold, task, ".8g"), _prediction_text(value, task, ".8g")]
            if probabilities is not None:
                row += [format(float(p), ".8g") for p in probabilities[i]]
            f.write("\t".join(row) + "\n")


@dataclasses.dataclass
class _Encoded:
    train: EncodedSplit
    dev: dict[str, EncodedSplit]
    test: dict[str, EncodedSplit]
    pad_id: int


@dataclasses.dataclass
class ClassificationTask(DefinedTask, TaskKind):
    """A classification or regression task (GLUE or the user's files), and the classifier kind.

    Attributes:
        definition: what is learned and how it is scored.
        data: its train, dev and test splits.
        max_seq_length: tokens per example, special tokens included.
        double_unordered: pair tasks: also train on every pair in the B, A order.
        max_train_examples: train on this many examples drawn from the training
            set, the same draw for every run (None: all of them).
        head: the classifier's head, `electra` (the paper's) or
            `transformers` (see `ElectraClassifier`).
        submission: the format of the test predictions: `glue` (`<name>.tsv`,
            `index<TAB>prediction`) or `clue` (the split's name is the file,
            `{"id", "label"}` per line; see `json_tables.write_submission`).
    """

    definition: Task
    data: TaskData
    max_seq_length: int = 128
    double_unordered: bool = False
    max_train_examples: Optional[int] = None
    head: str = ELECTRA_HEAD
    submission: str = GLUE_SUBMISSION
    KIND: ClassVar[str] = CLASSIFICATION
    TASK_TYPES: ClassVar[tuple[str, ...]] = (CLASSIFICATION, REGRESSION)
    FORMER_KINDS: ClassVar[tuple[str, ...]] = ("classifier",)
    REQUEST_FIELDS: ClassVar[tuple[str, ...]] = ("text", "text_pair")
    MODEL_CLASS: ClassVar[type] = ElectraClassifier
    FORWARDS: ClassVar[tuple[str, ...]] = lean_forward.FORWARDS
    HF_ARCHITECTURE: ClassVar[Optional[str]] = "ElectraForSequenceClassification"
    HF_IMPORT_OPTIONS: ClassVar[tuple[str, ...]] = ("max_seq_length", "text_pair")
    _encoded: Optional[_Encoded] = dataclasses.field(default=None, init=False, repr=False)

    def __post_init__(self):
        self.check_sizes()
        if self.double_unordered and not self.definition.is_pair:
            raise RunError(f"--double_unordered: task {self.name} has single texts.")
        if self.head not in HEADS:
            raise RunError(f"--task_head={self.head}: choose one of {', '.join(HEADS)}.")
        if self.submission not in (GLUE_SUBMISSION, CLUE_SUBMISSION):
            raise RunError(f"submission={self.submission!r}: choose glue or clue.")

    @property
    def run_files(self) -> tuple[str, ...]:
        """CLUE submissions of trial 0, copied into the output directory to be zipped."""
        return tuple(self.data.test) if self.submission == CLUE_SUBMISSION else ()

    @classmethod
    def from_benchmark(
        cls, benchmark, recipe, present, max_seq_length, max_train_examples, warn=print
    ):
        """A suite's classification or regression task from its tables (`benchmark.tables`).

        The scored split is the task's `dev` split; the suite's other labelled
        evaluation files are scored too, their metrics suffixed by their split.
        The metrics: the headline, the table's others, then the kind's usual
        companions (accuracy and F1, Spearman and Pearson). With
        `benchmark.submission`, the test file is read unlabelled and its
        predictions are written in CLUE's format under that name. Each table is
        a `tables.TableLayout` (TSV, JSON arrays) or a `json_tables.JsonLinesLayout`
        (JSON lines).
        """
        regression = benchmark.kind == REGRESSION
        if regression:
            companions = ("spearman", "pearson")
        elif len(benchmark.labels) == 2:
            companions = ("accuracy", "f1")
        else:
            companions = ("accuracy", "macro_f1")
        definition = Task(
            name=benchmark.name,
            task_type=benchmark.kind,
            label_names=None if regression else list(benchmark.labels),
            metrics=tuple(dict.fromkeys((benchmark.metric, *benchmark.table_metrics, *companions))),
            glue_score_metric=benchmark.metric,
            is_pair=benchmark.tables[TRAIN].text_pair is not None,
            num_train_epochs=recipe.num_train_epochs or 3.0,
            label_scale=benchmark.label_scale,
        )

        def read(split, name, labelled=True):
            layout = benchmark.tables[split]
            reader = read_json_lines if isinstance(layout, JsonLinesLayout) else read_table
            return reader(present[split], layout, definition, name, labelled, warn)

        scored = benchmark.scored_split
        dev, test = {"dev": read(scored, "dev")}, {}
        files = {TRAIN: present[TRAIN], scored: present[scored]}
        for split in benchmark.files:
            if split in (TRAIN, scored) or split not in present:
                continue
            if split == TEST and benchmark.submission:
                test[benchmark.submission] = read(split, "test", labelled=False)
            else:
                dev[f"dev_{split}"] = read(split, f"dev_{split}")
            files[split] = present[split]
        data = TaskData(read(TRAIN, "train"), dev, test)
        submission = CLUE_SUBMISSION if benchmark.submission else GLUE_SUBMISSION
        task = cls(
            definition, data, max_seq_length, False, max_train_examples, submission=submission
        )
        return task, files

    @classmethod
    def from_options(cls, options: TaskOptions) -> "ClassificationTask":
        """A GLUE task (`--data_dir`, else TFDS) or the user's files (`--train_file`)."""
        run = options.run
        if run.train_file:
            if run.task in data.GLUE_TASKS:
                raise RunError(
                    f"--task={run.task} is a GLUE task but --train_file is set; "
                    "give your task another name (or drop --train_file)."
                )
            definition, splits = data.load_user_files(
                run.task or "custom", options.files, run.train_file, run.dev_file, run.test_file
            )
        else:
            if run.task is None:
                raise RunError(f"Give --task ({', '.join(data.GLUE_TASKS)}) or --train_file.")
            if run.dev_file or run.test_file:
                raise RunError("--dev_file / --test_file need --train_file.")
            definition = data.glue_task(run.task)
            if run.data_dir:
                splits = data.load_glue_dir(definition, run.data_dir, warn=options.print_fn)
            else:
                splits = data.load_tfds(definition, run.tfds_data_dir)
        if not splits.dev:
            options.print_fn("No dev set: training only (give --dev_file to score every epoch).")
        return cls(
            definition,
            splits,
            run.max_seq_length or 128,
            run.double_unordered,
            run.max_train_examples,
            head=run.task_head,
        )

    def settings(self) -> dict:
        """The task's own settings in results.json (the head only when not the paper's)."""
        values = {**super().settings(), "double_unordered": self.double_unordered}
        if self.head != ELECTRA_HEAD:
            values["task_head"] = self.head
        return values

    def model_info(self) -> dict:
        """What serving needs beside the model and its text path: the task, its regression scale."""
        return {
            "task": self.definition.to_dict(),
            "regression_output_scale": self.definition.label_scale,
        }

    def prepare(self, tokenizer, print_fn=print) -> dict:
        """Draws the training examples and tokenizes every split.

        Returns:
            The training data counts for results.json.
        """
        splits = self.data
        if self.max_train_examples is not None and self.max_train_examples < len(splits.train):
            print_fn(
                f"Training on {self.max_train_examples:,} of the {len(splits.train):,} "
                "training examples (--max_train_examples; the same draw for every run)."
            )
            splits = dataclasses.replace(splits, train=splits.train.sample(self.max_train_examples))
        definition = self.definition
        print_fn(
            f"Task {definition.name} ({definition.task_type}"
            + (f", labels {', '.join(definition.label_names)}" if definition.label_names else "")
            + "): "
            f"{len(splits.train):,} train, "
            + ", ".join(f"{len(s):,} {n}" for n, s in splits.dev.items())
            + "".join(f", {len(s):,} test ({n})" for n, s in splits.test.items())
        )
        print_fn("Tokenizing...")
        train = encode_split(splits.train, tokenizer, self.max_seq_length, self.double_unordered)
        length = self.max_seq_length
        self._encoded = _Encoded(
            train,
            {n: encode_split(s, tokenizer, length) for n, s in splits.dev.items()},
            {n: encode_split(s, tokenizer, length) for n, s in splits.test.items()},
            tokenizer.pad_id,
        )
        truncated = sum(len(ids) == self.max_seq_length for ids, _ in train.encoded)
        print_fn(
            f"Training examples: {len(train.encoded):,}"
            + (" (both orders of every pair)" if self.double_unordered else "")
            + f"; {truncated:,} reach --max_seq_length={self.max_seq_length}."
        )
        return {"num_train_examples": len(splits.train)}

    @property
    def num_train_examples(self) -> int:
        """Examples per epoch (after `prepare`; pairs in both orders count twice)."""
        return len(self._encoded.train.encoded)

    def train_dataset(self, batch_size: int, seed: int, by_length: bool) -> tf.data.Dataset:
        """(inputs, labels) batches, reshuffled every epoch with `seed`, repeated forever."""
        return self._encoded.train.dataset(
            batch_size,
            self.definition,
            shuffle_seed=seed,
            repeat=True,
            pad_id=self._encoded.pad_id,
            by_length=by_length,
        )

    def build_model(self, encoder, seed: int):
        """The classifier (or regressor) with a fresh head seeded by `seed`."""
        return build_classifier(
            encoder,
            self.definition.num_outputs,
            self.definition.task_type == REGRESSION,
            seed,
            head=self.head,
        )

    def evaluate(
        self, model, batch_size: int, trial: Optional[TrialDir] = None
    ) -> tuple[dict, dict]:
        """Dev metrics; with `trial`, also every split's predictions, written into it.

        Splits other than `dev` get their name's suffix (`accuracy_mismatched`).

        Returns:
            (metrics, {name: prediction file}): each dev split's
            `<split>_predictions.tsv` (`index gold prediction`, then every
            class's probability when a metric needs them) and each test
            split's `<name>.tsv` in the GLUE submission format (`clue`
            submissions: the file `<name>`, CLUE's JSON lines).
        """
        scores, files = {}, {}
        pad_id = self._encoded.pad_id
        scored_by_probabilities = any(
            name in metrics.PROBABILITY_METRICS for name in self.definition.metrics
        )
        for name, encoded in self._encoded.dev.items():
            probabilities = None
            if scored_by_probabilities:
                probabilities = predict_probabilities(
                    model, encoded, self.definition, batch_size, pad_id
                )
                predicted = np.argmax(probabilities, axis=-1)
            else:
                predicted = predict(model, encoded, self.definition, batch_size, pad_id)
            split_scores = metrics.compute(
                self.definition.metrics, encoded.split.labels, predicted, probabilities
            )
            scores.update({f"{k}{split_suffix(name)}": v for k, v in split_scores.items()})
            if trial is not None:
                files[name] = trial.file(f"{name}_predictions.tsv")
                write_scored_predictions(
                    files[name], encoded.split, predicted, self.definition, probabilities
                )
        if trial is not None:
            clue = self.submission == CLUE_SUBMISSION
            writer = write_submission if clue else write_predictions
            for name, encoded in self._encoded.test.items():
                files[name] = trial.file(name if clue else f"{name}.tsv")
                writer(
                    files[name],
                    encoded.split,
                    predict(model, encoded, self.definition, batch_size, pad_id),
                    self.definition,
                )
        return scores, files

    # ------------------------------------------------------------------
    # A saved classifier.

    @classmethod
    def serving_module(cls, model, tokenizer, info: dict, forward: Optional[str] = None):
        """`ClassifierServing`; `forward` None: lean where it covers the model, else keras
        (and "portable", the token-id formats' choice, is keras where it does not cover it)."""
        task = Task.from_dict(info["task"])
        if forward in (None, "portable") and not lean_forward.supports(model):
            forward = "keras"
        forward = forward or lean_forward.DEFAULT_FORWARD
        return ClassifierServing(
            model,
            tokenizer,
            info["max_seq_length"],
            task.is_pair,
            cls.label_names(info),
            info.get("regression_output_scale", 1.0),
            forward,
        )

    @classmethod
    def serving_config(cls, module, info: dict) -> dict:
        """How the signatures compute (`forward`, `head`), their names, the pairing, the labels or
        scale, the task."""
        task = Task.from_dict(info["task"])
        return {
            "forward": module.forward,
            "signatures": module.signature_names,
            "head": module.model.head,
            "is_pair": task.is_pair,
            "label_names": cls.label_names(info),
            "label_scale": info.get("regression_output_scale", 1.0),
            "task": task.to_dict(),
        }

    @classmethod
    def label_names(cls, info: dict) -> Optional[list[str]]:
        task = Task.from_dict(info["task"])
        return None if task.task_type == REGRESSION else list(task.label_names)

    @classmethod
    def check_requests(cls, reference) -> tuple[list[dict], list[Optional[dict]], list[str]]:
        return check.build_requests(reference)

    @classmethod
    def scored_file(cls, reference, eval_file):
        return check.scored_file(reference, eval_file)

    # ------------------------------------------------------------------
    # transformers' ElectraForSequenceClassification: `electra.*` plus
    # ElectraClassificationHead on [CLS] (dropout, dense H -> H, GELU, dropout,
    # out_proj H -> C), which is our `transformers` head; num_labels == 1 is
    # regression. The paper's one-layer head has no place in that class.

    @classmethod
    def hf_head_state(cls, model, info: dict) -> dict[str, np.ndarray]:
        """`classifier.dense.*` and `classifier.out_proj.*` (kernels transposed).

        A regressor's label scale (5 for STS-B) is folded into `out_proj`, so
        that transformers' logits are the served `score`.

        Raises:
            RunError: the model has the paper's head.
        """
        if model.head != TRANSFORMERS_HEAD:
            raise RunError(
                "the classifier has the paper's head (one dense layer on [CLS]); "
                "ElectraForSequenceClassification has transformers' two-layer head "
                "(dense + GELU, then out_proj), which cannot compute it. Fine-tune with "
                "--task_head=transformers to write a classifier for transformers."
            )
        head = model.task_head
        scale = float(info.get("regression_output_scale", 1.0)) if model.regression else 1.0

        def weights(layer, factor=1.0):
            kernel = np.asarray(layer.kernel.numpy(), np.float32).T * np.float32(factor)
            return kernel, np.asarray(layer.bias.numpy(), np.float32) * np.float32(factor)

        dense_w, dense_b = weights(head.dense)
        out_w, out_b = weights(head.out_proj, scale)
        return {
            f"{HF_DENSE}.weight": dense_w,
            f"{HF_DENSE}.bias": dense_b,
            f"{HF_OUT_PROJ}.weight": out_w,
            f"{HF_OUT_PROJ}.bias": out_b,
        }

    @classmethod
    def hf_config(cls, model, info: dict) -> dict:
        """The labels (or regression), the task's name and the head's dropout."""
        task = Task.from_dict(info["task"])
        names = ["LABEL_0"] if task.task_type == REGRESSION else list(task.label_names)
        return {
            "finetuning_task": task.name,
            "num_labels": len(names),
            "problem_type": "regression"
            if task.task_type == REGRESSION
            else "single_label_classification",
            "id2label": {str(i): name for i, name in enumerate(names)},
            "label2id": {name: i for i, name in enumerate(names)},
            "classifier_dropout": model.dropout_rate,
        }

    @classmethod
    def from_hf(cls, encoder, hf_config: dict, state: dict, source: str, options: dict):
        """The classifier (or regressor) of `state`'s `classifier.*` on `encoder`, and its info.

        Args:
            options: `max_seq_length` (default 128, at most the position
                embeddings) and `text_pair` (whether the served model takes
                text pairs; None: when `finetuning_task` names a GLUE pair task).

        Raises:
            RunError: no head, a head that does not fit the encoder, or a
                problem type electra-tf's classifiers do not compute.
        """
        missing = [key for key in HF_HEAD_KEYS if key not in state]
        if missing:
            raise RunError(f"{source}: no {missing[0]}; not an {cls.HF_ARCHITECTURE}.")
        hidden = encoder.hidden_size
        num_labels = int(state[f"{HF_OUT_PROJ}.weight"].shape[0])
        expected = {
            f"{HF_DENSE}.weight": (hidden, hidden),
            f"{HF_DENSE}.bias": (hidden,),
            f"{HF_OUT_PROJ}.weight": (num_labels, hidden),
            f"{HF_OUT_PROJ}.bias": (num_labels,),
        }
        for key, shape in expected.items():
            if tuple(state[key].shape) != shape:
                raise RunError(
                    f"{source}: {key} has shape {tuple(state[key].shape)}, expected {shape}."
                )
        regression = _hf_regression(hf_config, num_labels, source)
        name = hf_config.get("finetuning_task") or os.path.basename(os.path.normpath(source))
        pair = options.get("text_pair")
        if pair is None:
            spec = GLUE_SPECS.get(str(name).lower().replace("-", ""))
            pair = spec is not None and spec.text_b is not None
        if regression:
            task = Task(name, REGRESSION, None, ("pearson", "spearman"), "spearman", pair)
        else:
            labels = hf_config.get("id2label") or {}
            names = [str(labels.get(str(i), f"LABEL_{i}")) for i in range(num_labels)]
            if len(set(names)) != len(names):
                raise RunError(f"{source}: id2label names a label twice: {names}.")
            metrics = ("accuracy", "f1", "mcc") if num_labels == 2 else ("accuracy", "macro_f1")
            task = Task(name, CLASSIFICATION, names, metrics, "accuracy", pair)
        dropout = hf_config.get("classifier_dropout")
        if dropout is None:
            dropout = hf_config.get("hidden_dropout_prob", 0.1)
        model = ElectraClassifier(
            encoder,
            num_labels,
            regression=regression,
            dropout_rate=float(dropout),
            initializer_range=encoder.initializer_range,
            head=TRANSFORMERS_HEAD,
            name="classifier",
        )
        head = model.task_head
        for layer, key in ((head.dense, HF_DENSE), (head.out_proj, HF_OUT_PROJ)):
            layer.kernel.assign(state[f"{key}.weight"].T)
            layer.bias.assign(state[f"{key}.bias"])
        length = options.get("max_seq_length") or DEFAULT_MAX_SEQ_LENGTH
        info = {
            "task": task.to_dict(),
            "regression_output_scale": 1.0,
            "max_seq_length": min(length, encoder.max_position_embeddings),
        }
        return model, info


def _hf_regression(hf_config: dict, num_labels: int, source: str) -> bool:
    """Whether an ElectraForSequenceClassification regresses, as transformers decides it.

    transformers regresses when `problem_type` is `regression`, or when it is
    unset and there is one label.

    Raises:
        RunError: a problem type electra-tf's models do not compute (several
            independent labels, several regression outputs, one class).
    """
    problem = hf_config.get("problem_type")
    if problem not in (None,) + HF_PROBLEM_TYPES:
        raise RunError(
            f"{source}: problem_type={problem!r} (an independent sigmoid per label); "
            "electra-tf's classifiers pick one label by softmax and regressors give one "
            "number, so it is not imported."
        )
    regression = problem == "regression" or (problem is None and num_labels == 1)
    if regression and num_labels != 1:
        raise RunError(
            f"{source}: regression with {num_labels} outputs; electra-tf's regressors "
            "give one number."
        )
    if not regression and num_labels < 2:
        raise RunError(
            f"{source}: problem_type={problem!r} with one label; a classifier needs two."
        )
    return regression
