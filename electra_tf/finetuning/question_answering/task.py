"""Extractive question answering (SQuAD and data in its format): the task kind.

`SquadTask` gives the trial loop what it needs: the training windows, the
span head on the encoder (whose train step computes the loss), and, at the
end of a trial, the answers to the questions predicted (written as the
official scripts read them) with their scores. As a class, it serves and
checks a saved QA model (`serving`, `check`) and converts one with
transformers' head from and to `ElectraForQuestionAnswering`.
"""

from __future__ import annotations

import base64
import dataclasses
import os
from typing import ClassVar, Optional

import numpy as np
import tensorflow as tf

from electra_tf.artifacts.files import write_json
from electra_tf.artifacts.finetuning_dir import TrialDir
from electra_tf.errors import RunError
from electra_tf.finetuning.kind.benchmark import TRAIN
from electra_tf.finetuning.kind.contract import TaskKind, TaskOptions
from electra_tf.finetuning.kind.settings import require_positive
from electra_tf.finetuning.question_answering import check
from electra_tf.finetuning.question_answering import data as squad_data
from electra_tf.finetuning.question_answering import decoding as squad_decoding
from electra_tf.finetuning.question_answering import features as squad_features
from electra_tf.finetuning.question_answering import metrics as qa_metrics
from electra_tf.finetuning.question_answering.data import SquadSplit
from electra_tf.finetuning.question_answering.model import (
    ELECTRA_HEAD,
    HEADS,
    TRANSFORMERS_HEAD,
    ElectraQA,
    build_qa_model,
)
from electra_tf.finetuning.question_answering.options import QuestionAnsweringOptions
from electra_tf.finetuning.question_answering.serving import QuestionAnsweringServing

PREDICTIONS_FILE = "predictions.json"
NULL_ODDS_FILE = "null_odds.json"
NBEST_FILE = "nbest_predictions.json"
# Scores shown on the console (the results keep every one).
_HEADLINE = ("exact_match", "f1", "rouge_w", "best_exact", "best_f1")
# What the scores of each --qa_metric are called on the console.
_METRIC_NAMES = {
    "korquad": "KorQuAD 1.0",
    "cmrc2018": "CMRC 2018",
    "drcd": "DRCD",
    "klue_mrc": "KLUE-MRC",
}
# What trials are compared by, where the metric has no F1 (KLUE-baseline's --metric_key).
_PRIMARY_METRICS = {"klue_mrc": "rouge_w"}
# The settings that serving reads back from model_info.json.
_SERVED = ("doc_stride", "max_query_length", "max_answer_length", "null_score_threshold")
# The describe() of a question-answering run, and the name of its task_type.
QUESTION_ANSWERING = "question_answering"
# transformers' names of ElectraForQuestionAnswering's head: one linear layer H -> 2.
HF_HEAD_WEIGHT, HF_HEAD_BIAS = "qa_outputs.weight", "qa_outputs.bias"
# An imported model's windows when the import names none: transformers' SQuAD
# scripts' defaults (run_qa.py), each at most what the model's positions allow.
HF_MAX_SEQ_LENGTH = 384
HF_MAX_QUERY_LENGTH = 64
HF_DOC_STRIDE = 128
# transformers' SQuAD 2.0 rule (run_qa.py's null_score_diff_threshold, the
# pipeline's handle_impossible_answer): no answer when the null span scores
# above the best span.
HF_NULL_SCORE_THRESHOLD = 0.0


def describe_squad(version: str, train_data, predict_data, qa_metric: str = "squad") -> dict:
    """The `task` entry of results.json of a SQuAD-format question-answering run.

    Args:
        version: "1.1" or "2.0".
        train_data: where the training questions came from.
        predict_data: where the questions predicted and scored came from (or None).
        qa_metric: whose official scores the run reports (squad, korquad,
            cmrc2018, drcd).
    """
    return {
        "name": f"squad{version.replace('.', '')}",
        "task_type": QUESTION_ANSWERING,
        "squad_version": version,
        "train_data": train_data,
        "predict_data": predict_data,
        "qa_metric": qa_metric,
    }


def score(
    version: str,
    examples,
    predictions: dict,
    null_odds: dict,
    threshold: float,
    metric: str = "squad",
) -> dict:
    """Official-style scores in percent; `exact_match` and `f1` are the headline numbers.

    Args:
        metric: the dataset whose official script defines the scores (see
            `qa_metrics`).
    """
    gold = {e.qas_id: [text for text, _ in e.answers] for e in examples}
    return qa_metrics.evaluate(metric, gold, predictions, version, null_odds, threshold)


@dataclasses.dataclass
class _Windows:
    train: squad_features.QAFeatures
    evaluation: Optional[squad_features.QAFeatures]


@dataclasses.dataclass
class SquadTask(TaskKind):
    """SQuAD 1.1 or 2.0 (or data in its format) for the trial loop, and the QA kind.

    Defaults are the original code's QA settings.

    Attributes:
        train: the training questions.
        evaluation: the questions to predict and score (None: train only).
        version: "1.1" or "2.0" (unanswerable questions, null odds).
        max_seq_length: tokens per window.
        doc_stride: tokens between the starts of context windows.
        max_query_length: question tokens kept.
        beam_size: start positions (and ends per start) searched.
        n_best_size: candidate answers kept per question.
        max_answer_length: longest answer in tokens.
        null_score_threshold: SQuAD 2.0: null odds above it answer "".
        qa_metric: whose official scores are computed: squad, korquad,
            cmrc2018 or drcd (see `qa_metrics`).
        head: the span head, `electra` (the original code's) or
            `transformers` (see `ElectraQA`).
    """

    train: SquadSplit
    evaluation: Optional[SquadSplit]
    version: str = "1.1"
    max_seq_length: int = 512
    doc_stride: int = 128
    max_query_length: int = 64
    beam_size: int = 20
    n_best_size: int = squad_decoding.N_BEST_SIZE
    max_answer_length: int = squad_decoding.MAX_ANSWER_LENGTH
    null_score_threshold: float = squad_decoding.DEFAULT_NULL_THRESHOLD
    qa_metric: str = "squad"
    head: str = ELECTRA_HEAD
    KIND: ClassVar[str] = QUESTION_ANSWERING
    TASK_TYPES: ClassVar[tuple[str, ...]] = (QUESTION_ANSWERING,)
    REQUEST_FIELDS: ClassVar[tuple[str, ...]] = ("question", "context")
    DEFAULT_MAX_SEQ_LENGTH: ClassVar[int] = 512
    # results.json holds the official scripts' percentages.
    SCORES_IN_PERCENT: ClassVar[bool] = True
    TABLE_METRICS: ClassVar[tuple[str, ...]] = ("exact_match", "f1")
    SCORED_PREDICTIONS: ClassVar[str] = PREDICTIONS_FILE
    MODEL_CLASS: ClassVar[type] = ElectraQA
    OPTIONS: ClassVar[Optional[type]] = QuestionAnsweringOptions
    HF_ARCHITECTURE: ClassVar[Optional[str]] = "ElectraForQuestionAnswering"
    HF_IMPORT_OPTIONS: ClassVar[tuple[str, ...]] = ("max_seq_length", "squad_version")
    console_keys: ClassVar[tuple[str, ...]] = ("loss", "span_loss", "answerable_loss")
    # Decoding every question with the beam search is too slow to repeat every epoch.
    evaluate_every_epoch: ClassVar[bool] = False
    default_epochs: ClassVar[float] = 2.0
    max_train_examples: ClassVar[None] = None
    _windows: Optional[_Windows] = dataclasses.field(default=None, init=False, repr=False)

    def __post_init__(self):
        require_positive(
            max_seq_length=self.max_seq_length,
            doc_stride=self.doc_stride,
            max_query_length=self.max_query_length,
            beam_size=self.beam_size,
            n_best_size=self.n_best_size,
            max_answer_length=self.max_answer_length,
        )
        if self.head not in HEADS:
            raise RunError(f"--task_head={self.head}: choose one of {', '.join(HEADS)}.")
        if self.qa_metric not in qa_metrics.METRICS:
            raise RunError(
                f"--qa_metric={self.qa_metric}: choose one of {', '.join(qa_metrics.METRICS)}."
            )
        try:
            qa_metrics.check_available(self.qa_metric)  # before training, not after it
        except ImportError as error:
            raise RunError(str(error)) from None
        if (
            self.qa_metric not in ("squad",) + qa_metrics.WITH_UNANSWERABLE
            and self.version == "2.0"
        ):
            raise RunError(
                f"--qa_metric={self.qa_metric} scores answerable questions only; use "
                "--squad_version=1.1 (or --qa_metric=squad for SQuAD 2.0)."
            )

    @property
    def primary_metric(self) -> str:
        """What trials are compared by: F1, or ROUGE-W for KLUE-MRC."""
        return _PRIMARY_METRICS.get(self.qa_metric, "f1")

    @classmethod
    def selected_by(cls, options: TaskOptions) -> bool:
        """`--task=squad`."""
        return options.run.task == "squad"

    @classmethod
    def from_benchmark(
        cls, benchmark, recipe, present, max_seq_length, max_train_examples, warn=print
    ):
        """A suite's SQuAD-format task, scored by its `qa_metric`'s official script.

        The files are read as SQuAD 1.1, or as 2.0 (unanswerable questions,
        null odds) where the metric scores unanswerable questions (KLUE-MRC).
        """
        scored = benchmark.scored_split
        version = "2.0" if benchmark.qa_metric in qa_metrics.WITH_UNANSWERABLE else "1.1"
        train = squad_data.read_squad_json(present[TRAIN], version, is_training=True, warn=warn)
        evaluation = squad_data.read_squad_json(present[scored], version, False, warn=warn)
        task = cls(
            train, evaluation, version, max_seq_length=max_seq_length, qa_metric=benchmark.qa_metric
        )
        return task, {TRAIN: present[TRAIN], scored: present[scored]}

    @classmethod
    def from_options(cls, options: TaskOptions) -> "SquadTask":
        """SQuAD-format JSON files (`--train_file`, `--predict_file`), or TFDS without them."""
        run, say = options.run, options.print_fn
        qa = options.own(QuestionAnsweringOptions)
        options.refuse(
            "dev_file",
            "test_file",
            "data_dir",
            reason="is not used with --task=squad (use --train_file / --predict_file).",
        )
        if qa.predict_file and not run.train_file:
            raise RunError("--predict_file needs --train_file (or drop both to use TFDS).")
        version = qa.squad_version
        if run.train_file:
            limit = options.files.max_row_chars
            train = squad_data.read_squad_json(run.train_file, version, True, say, limit)
            evaluation = (
                squad_data.read_squad_json(qa.predict_file, version, False, say, limit)
                if qa.predict_file
                else None
            )
        else:
            train = squad_data.load_tfds_squad(version, "train", run.tfds_data_dir, True, say)
            evaluation = squad_data.load_tfds_squad(
                version, "validation", run.tfds_data_dir, False, say
            )
        metric = qa.qa_metric or qa_metrics.metric_for_version(
            (evaluation or train).dataset_version
        )
        if qa.qa_metric is None and metric != "squad":
            say(
                f"Scoring with {metric}'s official metric (the data's version field says "
                f"{(evaluation or train).dataset_version!r}; --qa_metric overrides)."
            )
        threshold = qa.null_score_threshold
        if run.task_head == TRANSFORMERS_HEAD and "null_score_threshold" not in options.given:
            threshold = HF_NULL_SCORE_THRESHOLD  # its null odds are transformers' score diff
        return cls(
            train,
            evaluation,
            version,
            qa_metric=metric,
            max_seq_length=run.max_seq_length or 512,
            doc_stride=qa.doc_stride,
            max_query_length=qa.max_query_length,
            beam_size=qa.beam_size,
            n_best_size=qa.n_best_size,
            max_answer_length=qa.max_answer_length,
            null_score_threshold=threshold,
            head=run.task_head,
        )

    @property
    def name(self) -> str:
        return self.describe()["name"]

    @property
    def run_files(self) -> tuple[str, ...]:
        """Trial 0's answers, copied into the output directory for the official scripts."""
        return (PREDICTIONS_FILE,) + ((NULL_ODDS_FILE,) if self.version == "2.0" else ())

    def describe(self) -> dict:
        """The task's entry in results.json (the data sources are part of it)."""
        return describe_squad(
            self.version,
            self.train.source,
            self.evaluation.source if self.evaluation else None,
            self.qa_metric,
        )

    def settings(self) -> dict:
        """The task's own settings in results.json."""
        return {
            "max_seq_length": self.max_seq_length,
            "doc_stride": self.doc_stride,
            "max_query_length": self.max_query_length,
            "beam_size": self.beam_size,
            "n_best_size": self.n_best_size,
            "max_answer_length": self.max_answer_length,
            "null_score_threshold": self.null_score_threshold,
            # Recorded only off the default, so that earlier results still match.
            **({"task_head": self.head} if self.head != ELECTRA_HEAD else {}),
        }

    def model_info(self) -> dict:
        """What serving needs beside the model and its text path: version, windows, answers."""
        settings = self.settings()
        return {"squad_version": self.version, **{name: settings[name] for name in _SERVED}}

    def prepare(self, tokenizer, print_fn=print) -> dict:
        """Cuts every question and context into windows.

        Returns:
            The training data counts for results.json.

        Raises:
            RunError: the lengths leave no room for the context.
        """
        offsets = squad_features.OffsetTokenizer(tokenizer)
        window_args = dict(
            max_seq_length=self.max_seq_length,
            doc_stride=self.doc_stride,
            max_query_length=self.max_query_length,
            offset_tokenizer=offsets,
        )
        try:
            train = squad_features.convert_examples(
                self.train.examples, tokenizer, is_training=True, **window_args
            )
            evaluation = (
                None
                if self.evaluation is None
                else squad_features.convert_examples(
                    self.evaluation.examples, tokenizer, **window_args
                )
            )
        except ValueError as error:
            raise RunError(str(error)) from None
        self._windows = _Windows(train, evaluation)
        skipped = self.train.skipped + train.skipped
        print_fn(
            f"SQuAD {self.version}: {len(self.train):,} training questions -> "
            f"{len(train):,} windows of {self.max_seq_length} tokens ({skipped} skipped: "
            "answer not found in the context)"
            + (
                f"; {len(self.evaluation):,} questions to predict -> {len(evaluation):,} windows"
                if self.evaluation
                else ""
            )
        )
        return {
            "num_train_questions": len(self.train),
            "num_train_windows": len(train),
            "skipped_train_questions": skipped,
        }

    @property
    def num_train_examples(self) -> int:
        """Training windows per epoch (after `prepare`)."""
        return len(self._windows.train)

    def train_dataset(self, batch_size: int, seed: int, by_length: bool) -> tf.data.Dataset:
        """(inputs, labels) batches of windows, reshuffled every epoch with `seed`, repeated.

        Every window is `max_seq_length` long: `by_length` changes nothing.
        """
        return squad_features.make_dataset(
            self._windows.train, batch_size, shuffle_seed=seed, repeat=True
        )

    def build_model(self, encoder, seed: int):
        """The QA model with a fresh span head seeded by `seed`."""
        return build_qa_model(
            encoder,
            self.beam_size,
            seed,
            head=self.head,
            max_answer_length=self.max_answer_length,
        )

    def evaluate(
        self, model, batch_size: int, trial: Optional[TrialDir] = None
    ) -> tuple[dict, dict]:
        """Answers the questions to predict and scores them; with `trial`, writes the answers.

        The beam search holds a [batch, beam, length, 512] activation: about
        0.7 GB per 32 windows of 512 tokens with beam 20 (lower
        --eval_batch_size if short).

        Returns:
            (scores in percent, {file name: path}): predictions.json (null
            odds above the threshold answered ""), nbest_predictions.json and,
            for 2.0, null_odds.json.
        """
        if self.evaluation is None:
            return {}, {}
        windows = self._windows.evaluation
        outputs = model.predict(
            squad_features.make_dataset(windows, batch_size, with_labels=False), verbose=0
        )
        predictions, null_odds, nbest = squad_decoding.decode(
            self.evaluation.examples, windows, outputs, self.n_best_size, self.max_answer_length
        )
        files = {}
        if trial is not None:
            os.makedirs(trial.path, exist_ok=True)
            answers = {NBEST_FILE: nbest, PREDICTIONS_FILE: predictions}
            if self.version == "2.0":
                answers[PREDICTIONS_FILE] = squad_decoding.apply_null_threshold(
                    predictions, null_odds, self.null_score_threshold
                )
                answers[NULL_ODDS_FILE] = null_odds
            for name, content in answers.items():
                files[name] = trial.file(name)
                write_json(files[name], content)
        return score(
            self.version,
            self.evaluation.examples,
            predictions,
            null_odds,
            self.null_score_threshold,
            self.qa_metric,
        ), files

    def format_metrics(self, scores: dict) -> str:
        """The headline scores for the console (already in percent)."""
        return ", ".join(f"{k} {v:.2f}" for k, v in scores.items() if k in _HEADLINE)

    def format_results(self, results: dict) -> str:
        """The median of the trials' headline scores, named after the dataset's metric."""
        name = _METRIC_NAMES.get(self.qa_metric, f"SQuAD {self.version}")
        return (
            f"{name} scores (median over {len(results['trials'])} trial(s), "
            f"percent): {self.format_metrics(results['median'])}"
        )

    @classmethod
    def upgrade_description(cls, description: dict) -> dict:
        """Runs recorded before `qa_metric` existed were scored with SQuAD's."""
        return {**description, "qa_metric": description.get("qa_metric", "squad")}

    # ------------------------------------------------------------------
    # A saved question-answering model.

    @classmethod
    def resolve_info(cls, info: dict) -> dict:
        """`info` with the answer settings that the oldest saved models lack, at their defaults."""
        return {
            **info,
            "squad_version": str(info.get("squad_version", "1.1")),
            "max_query_length": int(info.get("max_query_length", 64)),
            "max_answer_length": int(
                info.get("max_answer_length", squad_decoding.MAX_ANSWER_LENGTH)
            ),
            "null_score_threshold": float(
                info.get("null_score_threshold", squad_decoding.DEFAULT_NULL_THRESHOLD)
            ),
        }

    @classmethod
    def serving_module(cls, model, tokenizer, info: dict, forward: Optional[str] = None):
        """`QuestionAnsweringServing` (the Keras model's own call, its one `forward`)."""
        return QuestionAnsweringServing(
            model,
            tokenizer,
            max_seq_length=info["max_seq_length"],
            max_query_length=info["max_query_length"],
            max_answer_length=info["max_answer_length"],
            version_2=info["squad_version"] == "2.0",
            null_score_threshold=info["null_score_threshold"],
        )

    @classmethod
    def serving_config(cls, module, info: dict) -> dict:
        """The SQuAD version, the window and answer settings, the beam."""
        return {
            "squad_version": info["squad_version"],
            "version_2": info["squad_version"] == "2.0",
            "max_query_length": info["max_query_length"],
            "max_answer_length": info["max_answer_length"],
            "null_score_threshold": info["null_score_threshold"],
            "doc_stride": info.get("doc_stride"),
            "is_pair": True,
            "label_names": None,
            "beam_size": module.model.task_head.beam_size,
            "head": module.model.head,
        }

    @classmethod
    def check_requests(cls, reference) -> tuple[list[dict], list[Optional[dict]], list[str]]:
        return check.build_requests(reference)

    @classmethod
    def benchmark_inputs(cls, benchmark: dict) -> dict:
        """A fixed SQuAD question and paragraph, unless the benchmark names its own."""
        if "texts" in benchmark:
            return benchmark
        return dict(
            benchmark,
            texts={
                "question": base64.b64encode(check.BENCHMARK_QUESTION.encode()).decode(),
                "context": base64.b64encode(check.BENCHMARK_CONTEXT.encode()).decode(),
            },
        )

    # ------------------------------------------------------------------
    # transformers' ElectraForQuestionAnswering: `electra.*` plus `qa_outputs`,
    # one linear layer H -> 2 giving independent start and end logits: our
    # `transformers` head. The original ELECTRA head (the end conditioned on
    # the start, an answerability classifier) has no place in that class.

    @classmethod
    def hf_head_state(cls, model, info: dict) -> dict[str, np.ndarray]:
        """`qa_outputs.weight` [2, H] and `qa_outputs.bias` [2].

        Raises:
            RunError: the model has the original ELECTRA head.
        """
        if model.head != TRANSFORMERS_HEAD:
            raise RunError(
                "the model has ELECTRA's span head (the end conditioned on the start, and an "
                "answerability classifier); ElectraForQuestionAnswering scores start and end "
                "independently with one linear layer and cannot compute it. Fine-tune with "
                "--task_head=transformers to write a model for transformers."
            )
        head = model.task_head
        return {
            HF_HEAD_WEIGHT: np.asarray(head.kernel.numpy(), np.float32).T,
            HF_HEAD_BIAS: np.asarray(head.bias.numpy(), np.float32),
        }

    @classmethod
    def hf_config(cls, model, info: dict) -> dict:
        """Two outputs (start, end) and the task's name."""
        version = info.get("squad_version", "1.1")
        return {"num_labels": 2, "finetuning_task": f"squad{'_v2' if version == '2.0' else ''}"}

    @classmethod
    def from_hf(cls, encoder, hf_config: dict, state: dict, source: str, options: dict):
        """The QA model of `state`'s `qa_outputs.*` on `encoder`, and its info.

        Args:
            options: `max_seq_length` (default 384, at most the position
                embeddings; the question keeps at most 64 pieces, and at
                most half the window), `squad_version` ("1.1" or "2.0";
                default "2.0" when `finetuning_task` names SQuAD v2, else
                "1.1": whether the served model says when there is no answer).

        Raises:
            RunError: no head, or one that does not fit the encoder.
        """
        if HF_HEAD_WEIGHT not in state:
            raise RunError(f"{source}: no {HF_HEAD_WEIGHT}; not an {cls.HF_ARCHITECTURE}.")
        hidden = encoder.hidden_size
        for key, shape in ((HF_HEAD_WEIGHT, (2, hidden)), (HF_HEAD_BIAS, (2,))):
            actual = tuple(state[key].shape) if key in state else None
            if actual != shape:
                raise RunError(
                    f"{source}: {key} has shape {actual}, expected {shape} "
                    "(a start and an end logit per position)."
                )
        version = options.get("squad_version")
        if version is None:
            task_name = str(hf_config.get("finetuning_task") or "").lower()
            version = "2.0" if "v2" in task_name or "squad2" in task_name else "1.1"
        if version not in squad_data.VERSIONS:
            raise RunError(
                f"squad_version={version!r}: choose one of {', '.join(squad_data.VERSIONS)}."
            )
        length = min(
            options.get("max_seq_length") or HF_MAX_SEQ_LENGTH, encoder.max_position_embeddings
        )
        if length < 8:
            raise RunError(
                f"max_seq_length={length}: a window of [CLS] question [SEP] context [SEP] "
                "needs 8 pieces or more."
            )
        model = ElectraQA(
            encoder,
            head=TRANSFORMERS_HEAD,
            max_answer_length=squad_decoding.MAX_ANSWER_LENGTH,
            name="qa",
        )
        model.build_for()
        model.task_head.kernel.assign(state[HF_HEAD_WEIGHT].T)
        model.task_head.bias.assign(state[HF_HEAD_BIAS])
        info = {
            "squad_version": version,
            "doc_stride": min(HF_DOC_STRIDE, length // 2),
            "max_query_length": min(HF_MAX_QUERY_LENGTH, length // 2),
            "max_answer_length": squad_decoding.MAX_ANSWER_LENGTH,
            "null_score_threshold": HF_NULL_SCORE_THRESHOLD,
            "max_seq_length": length,
        }
        return model, info
