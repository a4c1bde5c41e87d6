"""Multiple choice (C3, RACE-style reading comprehension): the task kind.

`MultipleChoiceTask` gives the trial loop the questions as one sequence per
option (`features`), the score-per-option model on the encoder (`model`,
whose train step computes the cross-entropy over the options), the dev
accuracy and, per trial, `dev_predictions.tsv` (`index gold prediction`,
the options' texts) and `test_predictions.tsv` (`index prediction`). As a
class, it serves and checks a saved model (`serving`, `check`) and converts
it from and to `transformers`' `ElectraForMultipleChoice`, whose head it is.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
from typing import ClassVar, Optional

import numpy as np
import tensorflow as tf

from electra_tf.artifacts.files import atomic_open
from electra_tf.artifacts.finetuning_dir import TrialDir
from electra_tf.errors import RunError
from electra_tf.finetuning.kind import metrics
from electra_tf.finetuning.kind.benchmark import TEST, TRAIN
from electra_tf.finetuning.kind.contract import DefinedTask, TaskKind, TaskOptions
from electra_tf.finetuning.multiple_choice import check
from electra_tf.finetuning.multiple_choice import features as choice_features
from electra_tf.finetuning.multiple_choice.data import (
    MULTIPLE_CHOICE,
    ChoiceData,
    ChoiceSplit,
    MultipleChoiceDefinition,
    read_files,
)
from electra_tf.finetuning.multiple_choice.model import (
    ElectraMultipleChoice,
    build_multiple_choice,
)
from electra_tf.finetuning.multiple_choice.serving import MultipleChoiceServing

DEV_PREDICTIONS_FILE = "dev_predictions.tsv"
_FIELD_BREAKS = re.compile(r"[\t\r\n]+")
TEST_PREDICTIONS_FILE = "test_predictions.tsv"
# Option sequences are long (a document and a question): C3's baselines use 512.
DEFAULT_MAX_SEQ_LENGTH = 512
# transformers' names of ElectraForMultipleChoice's head: `sequence_summary`
# (SequenceSummary: first token, projection H -> H, GELU) and `classifier` (H -> 1).
HF_SUMMARY = "sequence_summary.summary"
HF_CLASSIFIER = "classifier"
HF_HEAD_KEYS = tuple(
    f"{layer}.{w}" for layer in (HF_SUMMARY, HF_CLASSIFIER) for w in ("weight", "bias")
)
# The SequenceSummary our head computes, as config.json sets it.
HF_SUMMARY_CONFIG = {
    "summary_type": "first",
    "summary_use_proj": True,
    "summary_activation": "gelu",
    "summary_proj_to_labels": False,
}


@dataclasses.dataclass
class _Encoded:
    train_split: ChoiceSplit
    train: choice_features.ChoiceFeatures
    dev: Optional[choice_features.ChoiceFeatures]
    test: Optional[choice_features.ChoiceFeatures]
    pad_id: int


def write_scored_predictions(path: str, split: ChoiceSplit, predicted: np.ndarray) -> None:
    """`index<TAB>gold<TAB>prediction` with a header, the options' texts.

    Tabs and line breaks inside an option are written as spaces, so that
    every question stays one line of three fields.
    """
    with atomic_open(path) as f:
        f.write("index\tgold\tprediction\n")
        for index, options, gold, choice in zip(
            split.indices, split.options, split.answers, predicted
        ):
            f.write(f"{index}\t{_cell(options[gold])}\t{_cell(options[choice])}\n")


def write_predictions(path: str, split: ChoiceSplit, predicted: np.ndarray) -> None:
    """`index<TAB>prediction` with a header, the chosen options' texts."""
    with atomic_open(path) as f:
        f.write("index\tprediction\n")
        for index, options, choice in zip(split.indices, split.options, predicted):
            f.write(f"{index}\t{_cell(options[choice])}\n")


def write_submission(path: str, predicted: np.ndarray) -> None:
    """CLUE's C3 submission: `{"id": <question position>, "label": <option position>}` per line.

    Questions are numbered from 0 in the test file's order (documents, then
    their questions), as CLUE's baseline numbers them (`baselines/paddlenlp/mrc/run_c3.py`).
    """
    with atomic_open(path) as f:
        for number, choice in enumerate(predicted):
            f.write(json.dumps({"id": number, "label": int(choice)}) + "\n")


def _cell(text: str) -> str:
    """An option as one TSV field: tabs and line breaks become spaces."""
    return _FIELD_BREAKS.sub(" ", text)


@dataclasses.dataclass
class MultipleChoiceTask(DefinedTask, TaskKind):
    """A multiple-choice task for the trial loop, and the multiple-choice kind.

    Attributes:
        definition: the task's name and scores.
        data: train, dev and test questions.
        max_seq_length: pieces per option sequence, special tokens included.
        max_train_examples: train on this many questions drawn from the
            training set, the same draw for every run (None: all).
        submission: the file the test predictions are also written to in
            CLUE's format (`write_submission`; None: only `test_predictions.tsv`).
    """

    definition: MultipleChoiceDefinition
    data: ChoiceData
    max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH
    max_train_examples: Optional[int] = None
    submission: Optional[str] = None
    KIND: ClassVar[str] = MULTIPLE_CHOICE
    TASK_TYPES: ClassVar[tuple[str, ...]] = (MULTIPLE_CHOICE,)
    DEFAULT_MAX_SEQ_LENGTH: ClassVar[int] = DEFAULT_MAX_SEQ_LENGTH
    SCORED_PREDICTIONS: ClassVar[str] = DEV_PREDICTIONS_FILE
    MODEL_CLASS: ClassVar[type] = ElectraMultipleChoice
    HF_ARCHITECTURE: ClassVar[Optional[str]] = "ElectraForMultipleChoice"
    # The inputs of the raw-text signature (what a request sent to `predict` holds).
    REQUEST_FIELDS: ClassVar[tuple[str, ...]] = ("question", "context", "options")
    _encoded: Optional[_Encoded] = dataclasses.field(default=None, init=False, repr=False)

    def __post_init__(self):
        self.check_sizes()

    @property
    def run_files(self) -> tuple[str, ...]:
        """Trial 0's CLUE submission, copied into the output directory to be zipped."""
        return (self.submission,) if self.submission else ()

    @classmethod
    def from_benchmark(
        cls, benchmark, recipe, present, max_seq_length, max_train_examples, warn=print
    ):
        """A suite's multiple-choice task: its training and scored files in C3's layout.

        A split's file name may list several files separated by commas (C3's
        `d-train.json,m-train.json`); with `benchmark.submission`, the test
        file is read unlabelled and its predictions written in CLUE's format.
        """
        scored = benchmark.scored_split
        files = {TRAIN: present[TRAIN], scored: present[scored]}
        test = None
        if benchmark.submission and TEST in present:
            test = read_files(present[TEST], labelled=False)
            files[TEST] = present[TEST]
        data = ChoiceData(
            read_files(present[TRAIN], unique_ids=False), read_files(present[scored]), test
        )
        definition = MultipleChoiceDefinition(
            benchmark.name,
            metrics=(benchmark.metric,),
            primary_metric=benchmark.metric,
            num_train_epochs=recipe.num_train_epochs or 3.0,
        )
        submission = benchmark.submission if test is not None else None
        return cls(definition, data, max_seq_length, max_train_examples, submission), files

    @classmethod
    def from_options(cls, options: TaskOptions) -> "MultipleChoiceTask":
        """The user's files in C3's layout (`--train_file`, `--dev_file`, `--test_file`).

        Each may name several files separated by commas (`c3-d-train.json,c3-m-train.json`).
        """
        run = options.run
        if not run.train_file:
            raise RunError("--task_type=multiple_choice needs --train_file (JSON in C3's layout).")
        options.refuse(
            "text_pair_column",
            "index_column",
            "labels",
            "data_dir",
            "predict_file",
            "double_unordered",
            reason="is not used with --task_type=multiple_choice.",
        )
        if "task_head" in options.given:
            raise RunError(
                f"--task_head={run.task_head}: multiple choice has one head (a score per "
                "option from its [CLS]), which is transformers' ElectraForMultipleChoice head."
            )
        data = ChoiceData(
            read_files(run.train_file, unique_ids=False),
            read_files(run.dev_file) if run.dev_file else None,
            read_files(run.test_file, labelled=False) if run.test_file else None,
        )
        if data.dev is None:
            options.print_fn("No dev set: training only (give --dev_file to score every epoch).")
        definition = MultipleChoiceDefinition(run.task or "multiple_choice")
        return cls(
            definition, data, run.max_seq_length or DEFAULT_MAX_SEQ_LENGTH, run.max_train_examples
        )

    def model_info(self) -> dict:
        """What serving needs beside the model and its text path: the task."""
        return {"task": self.definition.to_dict()}

    def prepare(self, tokenizer, print_fn=print) -> dict:
        """Draws the training questions and tokenizes every split.

        Returns:
            The training data counts for results.json.
        """
        data = self.data
        train = data.train
        if self.max_train_examples is not None and self.max_train_examples < len(train):
            print_fn(
                f"Training on {self.max_train_examples:,} of the {len(train):,} training "
                "questions (--max_train_examples; the same draw for every run)."
            )
            train = train.sample(self.max_train_examples)
        print_fn(
            f"Task {self.name} (multiple choice, up to {train.max_options} options): "
            f"{len(train):,} train questions"
            + (f", {len(data.dev):,} dev" if data.dev else "")
            + (f", {len(data.test):,} test" if data.test else "")
        )
        print_fn("Tokenizing...")

        def encode(split):
            if split is None:
                return None
            return choice_features.encode(
                tokenizer, split.contexts, split.questions, split.options, self.max_seq_length
            )

        self._encoded = _Encoded(
            train, encode(train), encode(data.dev), encode(data.test), tokenizer.pad_id
        )
        for name, encoded in (
            ("training", self._encoded.train),
            ("dev", self._encoded.dev),
            ("test", self._encoded.test),
        ):
            if encoded is not None and encoded.num_truncated:
                print_fn(
                    f"{encoded.num_truncated:,} {name} question(s) have an option longer than "
                    f"--max_seq_length={self.max_seq_length} pieces: its context is cut."
                )
        return {"num_train_questions": len(train)}

    @property
    def num_train_examples(self) -> int:
        """Questions per epoch (after `prepare`)."""
        return len(self._encoded.train)

    def train_dataset(self, batch_size: int, seed: int, by_length: bool) -> tf.data.Dataset:
        """(inputs, labels) batches, reshuffled every epoch with `seed`, repeated forever."""
        return choice_features.make_dataset(
            self._encoded.train,
            self._encoded.train_split.answers,
            batch_size,
            self._encoded.train_split.max_options,
            self._encoded.pad_id,
            shuffle_seed=seed,
            repeat=True,
            by_length=by_length,
        )

    def build_model(self, encoder, seed: int):
        """The model with a fresh head seeded by `seed`."""
        return build_multiple_choice(encoder, seed)

    def predict(self, model, split: ChoiceSplit, encoded, batch_size: int) -> np.ndarray:
        """The position of the best-scored option of every question: int [N]."""
        dataset = choice_features.make_dataset(
            encoded, None, batch_size, split.max_options, self._encoded.pad_id
        )
        logits = model.predict(dataset, verbose=0)
        return np.argmax(logits, axis=-1)

    def evaluate(
        self, model, batch_size: int, trial: Optional[TrialDir] = None
    ) -> tuple[dict, dict]:
        """Dev accuracy; with `trial`, also the predictions, written into it.

        Returns:
            (metrics, {file name: path}): `dev_predictions.tsv` and
            `test_predictions.tsv` (see the module docstring).
        """
        scores, files = {}, {}
        dev = self.data.dev
        if dev is not None:
            predicted = self.predict(model, dev, self._encoded.dev, batch_size)
            scores = metrics.compute(self.definition.metrics, dev.answers, predicted)
            if trial is not None:
                files[DEV_PREDICTIONS_FILE] = trial.file(DEV_PREDICTIONS_FILE)
                write_scored_predictions(files[DEV_PREDICTIONS_FILE], dev, predicted)
        test = self.data.test
        if trial is not None and test is not None:
            predicted = self.predict(model, test, self._encoded.test, batch_size)
            files[TEST_PREDICTIONS_FILE] = trial.file(TEST_PREDICTIONS_FILE)
            write_predictions(files[TEST_PREDICTIONS_FILE], test, predicted)
            if self.submission:
                files[self.submission] = trial.file(self.submission)
                write_submission(files[self.submission], predicted)
        return scores, files

    # ------------------------------------------------------------------
    # A saved multiple-choice model.

    @classmethod
    def serving_module(cls, model, tokenizer, info: dict, forward: Optional[str] = None):
        """`MultipleChoiceServing` (the Keras model's own call, its one `forward`)."""
        return MultipleChoiceServing(model, tokenizer, info["max_seq_length"])

    @classmethod
    def serving_config(cls, module, info: dict) -> dict:
        """The task, and how a request's texts make each option's sequence."""
        return {
            "task": info["task"],
            "request_fields": list(cls.REQUEST_FIELDS),
            "sequence": "[CLS] context [SEP] question option [SEP]; the context cut first",
        }

    @classmethod
    def check_requests(cls, reference) -> tuple[list[dict], list[Optional[dict]], list[str]]:
        return check.build_requests(reference)

    @classmethod
    def benchmark_inputs(cls, benchmark: dict) -> dict:
        """A fixed question, context and four options, unless the benchmark names its own."""
        if "texts" in benchmark:
            return benchmark
        options = ["在图书馆", "在教室", "在食堂", "在家里"]
        return dict(
            benchmark,
            texts={
                "question": _base64("他们明天在哪里见面？"),
                "context": _base64("男：我们明天下午三点在图书馆门口见面吧。女：好的，不见不散。"),
                "options": [_base64(o) for o in options],
            },
        )

    # ------------------------------------------------------------------
    # transformers' ElectraForMultipleChoice: `electra.*`, then on each
    # option's [CLS] `sequence_summary.summary` (H -> H) and GELU, then
    # `classifier` (H -> 1): our `task_head.summary` and `.classifier`,
    # kernels transposed.

    @classmethod
    def hf_head_state(cls, model, info: dict) -> dict[str, np.ndarray]:
        head = model.task_head
        state = {}
        for layer, key in ((head.summary, HF_SUMMARY), (head.classifier, HF_CLASSIFIER)):
            state[f"{key}.weight"] = np.asarray(layer.kernel.numpy(), np.float32).T
            state[f"{key}.bias"] = np.asarray(layer.bias.numpy(), np.float32)
        return state

    @classmethod
    def hf_config(cls, model, info: dict) -> dict:
        return {
            "finetuning_task": info["task"]["name"],
            **HF_SUMMARY_CONFIG,
            "summary_last_dropout": model.dropout_rate,
        }

    @classmethod
    def from_hf(cls, encoder, hf_config: dict, state: dict, source: str, options: dict):
        """The model of `state`'s `sequence_summary.*` and `classifier.*` on `encoder`, its info.

        Args:
            options: `max_seq_length` (default 512, at most the position embeddings).

        Raises:
            RunError: no head, a head that does not fit the encoder, or a
                sequence summary other than transformers' default for ELECTRA.
        """
        missing = [key for key in HF_HEAD_KEYS if key not in state]
        if missing:
            raise RunError(f"{source}: no {missing[0]}; not an {cls.HF_ARCHITECTURE}.")
        # ElectraConfig's defaults; anything else is a head this model does not compute.
        defaults = {"summary_type": "first", "summary_use_proj": True, "summary_activation": "gelu"}
        for key, value in defaults.items():
            if hf_config.get(key, value) != value:
                raise RunError(
                    f"{source}: config.json has {key}={hf_config[key]!r}; electra-tf's "
                    f"multiple-choice head computes {key}={value!r}."
                )
        hidden = encoder.hidden_size
        expected = {
            f"{HF_SUMMARY}.weight": (hidden, hidden),
            f"{HF_SUMMARY}.bias": (hidden,),
            f"{HF_CLASSIFIER}.weight": (1, hidden),
            f"{HF_CLASSIFIER}.bias": (1,),
        }
        for key, shape in expected.items():
            if tuple(state[key].shape) != shape:
                raise RunError(
                    f"{source}: {key} has shape {tuple(state[key].shape)}, expected {shape}."
                )
        dropout = hf_config.get("summary_last_dropout", 0.1)
        model = ElectraMultipleChoice(
            encoder,
            dropout_rate=float(dropout),
            initializer_range=encoder.initializer_range,
            name="multiple_choice",
        )
        model.build_for()
        head = model.task_head
        for layer, key in ((head.summary, HF_SUMMARY), (head.classifier, HF_CLASSIFIER)):
            layer.kernel.assign(state[f"{key}.weight"].T)
            layer.bias.assign(state[f"{key}.bias"])
        name = hf_config.get("finetuning_task") or os.path.basename(os.path.normpath(source))
        length = options.get("max_seq_length") or DEFAULT_MAX_SEQ_LENGTH
        info = {
            "task": MultipleChoiceDefinition(name).to_dict(),
            "max_seq_length": min(length, encoder.max_position_embeddings),
        }
        return model, info


def _base64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()
