"""SQuAD as a fine-tuning task: windows, the QA model, answers and the official scores.

`SquadTask` gives the trial loop what it needs: the training windows, the
span head on the encoder (whose train step computes the loss), and, at the
end of a trial, the answers to the questions predicted (written as the
official scripts read them) with their scores.
"""

from __future__ import annotations

import dataclasses
import os
from typing import ClassVar, Optional

import tensorflow as tf

from electra_tf.artifacts.files import write_json
from electra_tf.artifacts.finetuning_dir import TrialDir
from electra_tf.artifacts.results import squad_task
from electra_tf.errors import RunError
from electra_tf.finetuning.question_answering import decoding as squad_decoding
from electra_tf.finetuning.question_answering import features as squad_features
from electra_tf.finetuning.question_answering import metrics as qa_metrics
from electra_tf.finetuning.question_answering.data import SquadSplit
from electra_tf.finetuning.question_answering.model import build_qa_model
from electra_tf.finetuning.settings import require_positive

PREDICTIONS_FILE = "predictions.json"
NULL_ODDS_FILE = "null_odds.json"
NBEST_FILE = "nbest_predictions.json"
# Scores shown on the console (the results keep every one).
_HEADLINE = ("exact_match", "f1", "best_exact", "best_f1")


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
class SquadTask:
    """SQuAD 1.1 or 2.0 (or data in its format) for the trial loop.

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
    console_keys: ClassVar[tuple[str, ...]] = ("loss", "span_loss", "answerable_loss")
    # Decoding every question with the beam search is too slow to repeat every epoch.
    evaluate_every_epoch: ClassVar[bool] = False
    primary_metric: ClassVar[str] = "f1"
    default_epochs: ClassVar[float] = 2.0
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
        if self.qa_metric not in qa_metrics.METRICS:
            raise RunError(
                f"--qa_metric={self.qa_metric}: choose one of {', '.join(qa_metrics.METRICS)}."
            )
        try:
            qa_metrics.check_available(self.qa_metric)  # before training, not after it
        except ImportError as error:
            raise RunError(str(error)) from None
        if self.qa_metric != "squad" and self.version == "2.0":
            raise RunError(
                f"--qa_metric={self.qa_metric} scores answerable questions only; use "
                "--squad_version=1.1 (or --qa_metric=squad for SQuAD 2.0)."
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
        return squad_task(
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
        }

    def model_info(self) -> dict:
        """What serving needs beside the model: the version, window and answer settings."""
        return {
            "kind": "question_answering",
            "squad_version": self.version,
            "max_seq_length": self.max_seq_length,
            "doc_stride": self.doc_stride,
            "max_query_length": self.max_query_length,
            "max_answer_length": self.max_answer_length,
            "null_score_threshold": self.null_score_threshold,
        }

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

    def train_dataset(self, batch_size: int, seed: int) -> tf.data.Dataset:
        """(inputs, labels) batches of windows, reshuffled every epoch with `seed`, repeated."""
        return squad_features.make_dataset(
            self._windows.train, batch_size, shuffle_seed=seed, repeat=True
        )

    def build_model(self, encoder, seed: int):
        """The QA model with a fresh span head seeded by `seed`."""
        return build_qa_model(encoder, self.beam_size, seed)

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
