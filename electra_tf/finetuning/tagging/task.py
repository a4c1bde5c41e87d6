"""Token classification (the tagger kind): words and tags in, seqeval's scores out.

`TaggingTask` gives the trial loop what it needs: the sentences as inputs
with a label on each word's first piece, the tagger on the encoder (whose
train step computes the loss), entity-level dev scores (`tagging_metrics`)
and, per trial, `dev_predictions.txt` (and `test_predictions.txt`) in the
conlleval layout. As a class, it serves and checks a saved tagger
(`serving`, `check`) and converts it from and to `transformers`'
`ElectraForTokenClassification`.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from typing import ClassVar, Optional

import numpy as np
import tensorflow as tf

from electra_tf.artifacts.finetuning_dir import TrialDir
from electra_tf.artifacts.tagged_predictions import (
    DEV_PREDICTIONS_FILE,
    TEST_PREDICTIONS_FILE,
    write_tagged,
)
from electra_tf.errors import RunError
from electra_tf.finetuning.kind.benchmark import TEST, TRAIN
from electra_tf.finetuning.kind.contract import (
    DefinedTask,
    TaskKind,
    TaskOptions,
    format_table,
    percent,
    trials_table,
)
from electra_tf.finetuning.kind.word_features import WordFeatures, encode_words
from electra_tf.finetuning.tagging import check, klue_ner
from electra_tf.finetuning.tagging import features as tagging_features
from electra_tf.finetuning.tagging import metrics as tagging_metrics
from electra_tf.finetuning.tagging.cluener import (
    CLUE_F1,
    clue_f1,
    entity_label,
    write_cluener,
)
from electra_tf.finetuning.tagging.data import (
    AUTO,
    KLUE_NER,
    OUTSIDE,
    PLAIN,
    TAG_FORMAT_CHOICES,
    TAG_FORMATS,
    TAGGING,
    TaggedSplit,
    TaggingData,
    TaggingDefinition,
    TaggingFileOptions,
    detect_tag_format,
    load_tagging_files,
)
from electra_tf.finetuning.tagging.layouts import CLUENER
from electra_tf.finetuning.tagging.model import ElectraTagger, build_tagger
from electra_tf.finetuning.tagging.serving import WORD_SPLITTING, TaggerServing

# transformers' names of the head: one linear layer on every position.
HF_HEAD_WEIGHT, HF_HEAD_BIAS = "classifier.weight", "classifier.bias"
# KLUE-NER's dev predictions: its dev file with a third column (`klue_ner`).
KLUE_NER_PREDICTIONS_FILE = "dev_predictions.tsv"
# The served length of an imported tagger when the import names none.
DEFAULT_MAX_SEQ_LENGTH = 128
# CLUENER dev predictions in the dev file's own layout, which CLUE's `score.py` reads.
CLUENER_DEV_PREDICTIONS_FILE = "dev_predictions.json"


@dataclasses.dataclass
class _Encoded:
    train: WordFeatures
    train_tags: list[list[int]]
    dev: Optional[WordFeatures]
    test: Optional[WordFeatures]
    pad_id: int


def tag_strings(definition: TaggingDefinition, ids: list[list[int]]) -> list[list[str]]:
    """Tag ids as names; an unseen word's -1 (no `O` tag) is written `O` too."""
    names = definition.tag_names
    return [[names[i] if i >= 0 else OUTSIDE for i in sentence] for sentence in ids]


@dataclasses.dataclass
class TaggingTask(DefinedTask, TaskKind):
    """A tagging task for the trial loop, and the tagger kind.

    Attributes:
        definition: the tags and how they are scored.
        data: train, dev and test sentences.
        max_seq_length: pieces per sentence, [CLS] and [SEP] included.
        max_train_examples: train on this many sentences drawn from the
            training set, the same draw for every run (None: all).
        submission: the file the test predictions are also written to as
            CLUENER lines (`{"id", "label"}`; None: only `test_predictions.txt`).
    """

    definition: TaggingDefinition
    data: TaggingData
    max_seq_length: int = 128
    max_train_examples: Optional[int] = None
    submission: Optional[str] = None
    KIND: ClassVar[str] = TAGGING
    TASK_TYPES: ClassVar[tuple[str, ...]] = (TAGGING,)
    FORMER_KINDS: ClassVar[tuple[str, ...]] = ("tagger",)
    SCORED_PREDICTIONS: ClassVar[str] = DEV_PREDICTIONS_FILE
    MODEL_CLASS: ClassVar[type] = ElectraTagger
    OPTIONS: ClassVar[Optional[type]] = TaggingFileOptions
    HF_ARCHITECTURE: ClassVar[Optional[str]] = "ElectraForTokenClassification"
    HF_IMPORT_OPTIONS: ClassVar[tuple[str, ...]] = ("max_seq_length", "tag_format")
    _encoded: Optional[_Encoded] = dataclasses.field(default=None, init=False, repr=False)

    def __post_init__(self):
        self.check_sizes()

    @classmethod
    def from_benchmark(
        cls, benchmark, recipe, present, max_seq_length, max_train_examples, warn=print
    ):
        """A suite's tagging task: its training and scored files in its `tagging_layout`.

        CLUENER (the `cluener` layout) is also scored as CLUE scores it
        (`cluener.clue_f1`), which a suite may make its headline metric; with
        `benchmark.submission`, its unlabelled test file is read and the
        predictions written in CLUENER's format under that name.
        """
        scored = benchmark.scored_split
        files = {TRAIN: present[TRAIN], scored: present[scored]}
        test_file = present.get(TEST) if benchmark.submission else None
        if test_file:
            files[TEST] = test_file
        definition, data = load_tagging_files(
            benchmark.name,
            present[TRAIN],
            present[scored],
            test_file,
            warn=warn,
            layout=benchmark.tagging_layout,
        )
        if recipe.num_train_epochs:
            definition.num_train_epochs = recipe.num_train_epochs
        if data.train.layout == CLUENER:
            definition.metrics += (CLUE_F1,)
        if benchmark.metric not in definition.metrics:
            raise RunError(
                f"{benchmark.name}: the suite scores {benchmark.metric!r}, which a "
                f"{data.train.layout} tagging task does not compute."
            )
        definition.primary_metric = benchmark.metric
        task = cls(definition, data, max_seq_length, max_train_examples)
        task.submission = benchmark.submission if test_file else None
        return task, files

    @classmethod
    def from_options(cls, options: TaskOptions) -> "TaggingTask":
        """The user's CoNLL or JSONL files (`--train_file`, `--dev_file`, `--test_file`)."""
        run = options.run
        if not run.train_file:
            raise RunError("--task_type=tagging needs --train_file (CoNLL columns or JSONL).")
        if "task_head" in options.given and run.task_head != "electra":
            raise RunError(
                f"--task_head={run.task_head}: a tagger has one head (one dense layer on every "
                "piece), which is already transformers' ElectraForTokenClassification head."
            )
        options.refuse(
            "text_pair_column",
            "index_column",
            "data_dir",
            "predict_file",
            "double_unordered",
            reason="is not used with --task_type=tagging.",
        )
        own = options.own(TaggingFileOptions)
        definition, data = load_tagging_files(
            run.task or "tagging",
            run.train_file,
            run.dev_file,
            run.test_file,
            own.tag_format,
            options.files.labels,
            words_key=options.files.text_column if "text_column" in options.given else "tokens",
            tags_key=options.files.label_column if "label_column" in options.given else "tags",
            warn=options.print_fn,
            layout=own.tagging_layout,
            max_line_chars=options.files.max_row_chars,
        )
        if data.dev is None:
            options.print_fn("No dev set: training only (give --dev_file to score every epoch).")
        return cls(definition, data, run.max_seq_length or 128, run.max_train_examples)

    def model_info(self) -> dict:
        """What serving needs beside the model and its text path: the tags."""
        return {"task": self.definition.to_dict()}

    def _tag_ids(self, split: TaggedSplit) -> list[list[int]]:
        index = {name: i for i, name in enumerate(self.definition.tag_names)}
        return [[index.get(tag, -1) for tag in tags] for tags in split.tags]

    def prepare(self, tokenizer, print_fn=print) -> dict:
        """Draws the training sentences and tokenizes every split.

        Returns:
            The training data counts for results.json.
        """
        data, definition = self.data, self.definition
        train = data.train
        if self.max_train_examples is not None and self.max_train_examples < len(train):
            print_fn(
                f"Training on {self.max_train_examples:,} of the {len(train):,} training "
                "sentences (--max_train_examples; the same draw for every run)."
            )
            train = train.sample(self.max_train_examples)
        print_fn(
            f"Task {definition.name} (tagging, {definition.tag_format} tags "
            f"{', '.join(definition.tag_names[:12])}"
            + (", ..." if definition.num_tags > 12 else "")
            + f"): {len(train):,} train "
            f"sentences ({train.num_words:,} words)"
            + (f", {len(data.dev):,} dev" if data.dev else "")
            + (f", {len(data.test):,} test" if data.test else "")
        )
        print_fn("Tokenizing...")
        length = self.max_seq_length
        encoded = _Encoded(
            encode_words(tokenizer, train.sentences, length),
            self._tag_ids(train),
            encode_words(tokenizer, data.dev.sentences, length) if data.dev else None,
            encode_words(tokenizer, data.test.sentences, length) if data.test else None,
            tokenizer.pad_id,
        )
        self._encoded = encoded
        for name, features in (
            ("training", encoded.train),
            ("dev", encoded.dev),
            ("test", encoded.test),
        ):
            if features is not None and features.num_truncated:
                print_fn(
                    f"{features.num_truncated:,} {name} sentence(s) exceed "
                    f"--max_seq_length={length} pieces; their last words are "
                    + ("not trained on." if name == "training" else f"predicted {OUTSIDE!r}.")
                )
        counts = {"num_train_sentences": len(train), "num_train_words": train.num_words}
        if definition.tag_format != PLAIN:
            types = Counter(
                type_
                for tags in train.tags
                for type_, _, _ in tagging_metrics.entities(tags, definition.tag_format)
            )
            counts["num_train_entities"] = dict(sorted(types.items()))
        return counts

    @property
    def num_train_examples(self) -> int:
        """Sentences per epoch (after `prepare`)."""
        return len(self._encoded.train)

    def train_dataset(self, batch_size: int, seed: int, by_length: bool) -> tf.data.Dataset:
        """(inputs, labels) batches, reshuffled every epoch with `seed`, repeated forever."""
        return tagging_features.make_dataset(
            self._encoded.train,
            self._encoded.train_tags,
            batch_size,
            self._encoded.pad_id,
            shuffle_seed=seed,
            repeat=True,
            by_length=by_length,
        )

    def build_model(self, encoder, seed: int):
        """The tagger with a fresh head seeded by `seed`."""
        return build_tagger(encoder, self.definition.num_tags, seed)

    def predict(self, model, features: WordFeatures, batch_size: int) -> list[list[str]]:
        """The predicted tag of every word (`O` for words past the length limit)."""
        logits = tagging_features.word_logits(model, features, batch_size, self._encoded.pad_id)
        unseen = self.definition.outside_id
        ids = tagging_features.predicted_ids(
            logits, features.num_words, -1 if unseen is None else unseen
        )
        return tag_strings(self.definition, ids)

    def evaluate(
        self, model, batch_size: int, trial: Optional[TrialDir] = None
    ) -> tuple[dict, dict]:
        """Dev scores; with `trial`, also the predictions, written into it.

        Returns:
            (metrics, {file name: path}): `dev_predictions.txt` (`word gold
            predicted`; KLUE-NER: `dev_predictions.tsv`, the dev file with the
            predicted tag as a third column) and `test_predictions.txt`
            (`word predicted`); CLUENER in the CLUE suite also `dev_predictions.json` (the dev
            lines with the predicted `label`, for CLUE's `score.py`) and the
            submission file.
        """
        files, scores = {}, {}
        dev, tag_format = self.data.dev, self.definition.tag_format
        if dev is not None:
            predicted = self.predict(model, self._encoded.dev, batch_size)
            scores = tagging_metrics.score(dev.tags, predicted, tag_format)
            klue = dev.layout == KLUE_NER
            if klue:
                scores = {**klue_ner.klue_ner_scores(dev.tags, predicted), **scores}
            if CLUE_F1 in self.definition.metrics:
                labels = [entity_label(w, t, tag_format) for w, t in zip(dev.sentences, predicted)]
                gold = [entity_label(w, t, tag_format) for w, t in zip(dev.sentences, dev.tags)]
                scores.update(clue_f1(gold, labels))
                if trial is not None:
                    files[CLUENER_DEV_PREDICTIONS_FILE] = trial.file(CLUENER_DEV_PREDICTIONS_FILE)
                    write_cluener(
                        files[CLUENER_DEV_PREDICTIONS_FILE], dev.sentences, labels, dev.ids
                    )
            if trial is not None:
                if klue:  # the dev file with a third column, which KLUE's scorer reads
                    files[DEV_PREDICTIONS_FILE] = trial.file(KLUE_NER_PREDICTIONS_FILE)
                    klue_ner.write_klue_ner_predictions(
                        files[DEV_PREDICTIONS_FILE], dev.source, predicted
                    )
                else:
                    files[DEV_PREDICTIONS_FILE] = trial.file(DEV_PREDICTIONS_FILE)
                    write_tagged(files[DEV_PREDICTIONS_FILE], dev.sentences, dev.tags, predicted)
        test = self.data.test
        if trial is not None and test is not None:
            predicted = self.predict(model, self._encoded.test, batch_size)
            files[TEST_PREDICTIONS_FILE] = trial.file(TEST_PREDICTIONS_FILE)
            write_tagged(files[TEST_PREDICTIONS_FILE], test.sentences, predicted)
            if self.submission:
                labels = [entity_label(w, t, tag_format) for w, t in zip(test.sentences, predicted)]
                files[self.submission] = trial.file(self.submission)
                write_cluener(files[self.submission], test.sentences, labels, test.ids, False)
        return scores, files

    @property
    def run_files(self) -> tuple[str, ...]:
        """Trial 0's CLUE submission, copied into the output directory to be zipped."""
        return (self.submission,) if self.submission else ()

    def format_results(self, results: dict) -> str:
        """The trials' micro-averaged scores, then the median per entity type."""
        return (
            f"Dev results ({self.name}, percent; primary metric: {self.primary_metric}):\n"
            + format_tables(results, self.definition.tag_format)
        )

    # ------------------------------------------------------------------
    # A saved tagger.

    @classmethod
    def serving_module(cls, model, tokenizer, info: dict, forward: Optional[str] = None):
        """`TaggerServing` (the Keras model's own call, its one `forward`)."""
        return TaggerServing(model, tokenizer, info["max_seq_length"], cls.label_names(info))

    @classmethod
    def serving_config(cls, module, info: dict) -> dict:
        """The tags, how they are scored and how raw text is cut into words."""
        definition = TaggingDefinition.from_dict(info["task"])
        return {
            "is_pair": False,
            "label_names": list(definition.tag_names),
            "tag_format": definition.tag_format,
            "word_splitting": WORD_SPLITTING,
            "task": definition.to_dict(),
        }

    @classmethod
    def label_names(cls, info: dict) -> list[str]:
        return list(TaggingDefinition.from_dict(info["task"]).tag_names)

    @classmethod
    def check_requests(cls, reference) -> tuple[list[dict], list[Optional[dict]], list[str]]:
        return check.build_requests(reference)

    # ------------------------------------------------------------------
    # transformers' ElectraForTokenClassification: `electra.*` plus one linear
    # layer on every position's final hidden state (our `task_head`, its
    # kernel transposed); config.json carries the tags as id2label / label2id.

    @classmethod
    def hf_head_state(cls, model, info: dict) -> dict[str, np.ndarray]:
        return {
            HF_HEAD_WEIGHT: np.asarray(model.task_head.kernel.numpy(), np.float32).T,
            HF_HEAD_BIAS: np.asarray(model.task_head.bias.numpy(), np.float32),
        }

    @classmethod
    def hf_config(cls, model, info: dict) -> dict:
        definition = TaggingDefinition.from_dict(info["task"])
        return {
            "finetuning_task": definition.name,
            "id2label": {str(i): tag for i, tag in enumerate(definition.tag_names)},
            "label2id": {tag: i for i, tag in enumerate(definition.tag_names)},
        }

    @classmethod
    def from_hf(cls, encoder, hf_config: dict, state: dict, source: str, options: dict):
        """The tagger of `state`'s `classifier.*` on `encoder`, and its info.

        Args:
            options: `tag_format` (`auto`: from the tag names) and
                `max_seq_length` (default 128, at most the position embeddings).

        Raises:
            RunError: no head, or a head that does not fit the encoder.
        """
        if HF_HEAD_WEIGHT not in state:
            raise RunError(f"{source}: no {HF_HEAD_WEIGHT}; not an {cls.HF_ARCHITECTURE}.")
        labels = hf_config.get("id2label") or {}
        num_tags = int(state[HF_HEAD_WEIGHT].shape[0])
        tags = [labels.get(str(i), f"LABEL_{i}") for i in range(num_tags)]
        tag_format = options.get("tag_format") or AUTO
        if tag_format == AUTO:
            try:
                tag_format = detect_tag_format(tags)
            except ValueError as error:
                raise RunError(f"{source}: id2label: {error}.") from None
        elif tag_format not in TAG_FORMATS:
            raise RunError(f"tag_format={tag_format!r}: choose {', '.join(TAG_FORMAT_CHOICES)}.")
        tagger = ElectraTagger(
            encoder, num_tags, initializer_range=encoder.initializer_range, name="tagger"
        )
        kernel = state[HF_HEAD_WEIGHT].T
        if kernel.shape != tuple(tagger.task_head.kernel.shape):
            raise RunError(
                f"{source}: {HF_HEAD_WEIGHT} has shape {state[HF_HEAD_WEIGHT].shape}, "
                f"expected ({num_tags}, {encoder.hidden_size})."
            )
        tagger.task_head.kernel.assign(kernel)
        tagger.task_head.bias.assign(state.get(HF_HEAD_BIAS, np.zeros(num_tags, np.float32)))
        entity = tag_format != PLAIN
        definition = TaggingDefinition(
            name=hf_config.get("finetuning_task") or os.path.basename(os.path.normpath(source)),
            tag_names=tags,
            tag_format=tag_format,
            metrics=("precision", "recall", "f1", "accuracy") if entity else ("accuracy",),
            primary_metric="f1" if entity else "accuracy",
        )
        length = options.get("max_seq_length") or DEFAULT_MAX_SEQ_LENGTH
        info = {
            "task": definition.to_dict(),
            "max_seq_length": min(length, encoder.max_position_embeddings),
        }
        return tagger, info


def format_tables(results: dict, tag_format: str) -> str:
    """A tagging run's trials and per-type scores as text tables (percent).

    Args:
        results: the run's results.json.
        tag_format: the task's tag format (plain tags have no types).
    """
    median = results["median"]
    text = trials_table(results, [k for k in median if "/" not in k])
    types = sorted({k.split("/", 1)[1] for k in median if "/" in k})
    if tag_format != PLAIN and types:
        type_rows = [
            [t] + [percent(median.get(f"{m}/{t}")) for m in ("precision", "recall", "f1")]
            for t in types
        ]
        text += "\n\nPer entity type (median):\n" + format_table(
            ["type", "precision", "recall", "f1"], type_rows
        )
    return text
