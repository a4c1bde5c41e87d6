"""Token classification as a fine-tuning task: words and tags in, seqeval's scores out.

`TaggingTask` gives the trial loop what it needs: the sentences as inputs
with a label on each word's first piece, the tagger on the encoder (whose
train step computes the loss), entity-level dev scores (`tagging_metrics`)
and, per trial, `dev_predictions.txt` (and `test_predictions.txt`) in the
conlleval layout.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import ClassVar, Optional

import tensorflow as tf

from electra_tf.artifacts.finetuning_dir import TrialDir
from electra_tf.artifacts.tagged_predictions import (
    DEV_PREDICTIONS_FILE,
    TEST_PREDICTIONS_FILE,
    write_tagged,
)
from electra_tf.finetuning.settings import require_positive
from electra_tf.finetuning.tagging import features as tagging_features
from electra_tf.finetuning.tagging import metrics as tagging_metrics
from electra_tf.finetuning.tagging.data import (
    OUTSIDE,
    PLAIN,
    TaggedSplit,
    TaggingData,
    TaggingDefinition,
)
from electra_tf.finetuning.tagging.model import build_tagger

TAGGER = "tagger"  # the `kind` of a saved tagger


@dataclasses.dataclass
class _Encoded:
    train: tagging_features.TaggedFeatures
    train_tags: list[list[int]]
    dev: Optional[tagging_features.TaggedFeatures]
    test: Optional[tagging_features.TaggedFeatures]
    pad_id: int


def tag_strings(definition: TaggingDefinition, ids: list[list[int]]) -> list[list[str]]:
    """Tag ids as names; an unseen word's -1 (no `O` tag) is written `O` too."""
    names = definition.tag_names
    return [[names[i] if i >= 0 else OUTSIDE for i in sentence] for sentence in ids]


@dataclasses.dataclass
class TaggingTask:
    """A tagging task for the trial loop.

    Attributes:
        definition: the tags and how they are scored.
        data: train, dev and test sentences.
        max_seq_length: pieces per sentence, [CLS] and [SEP] included.
        max_train_examples: train on this many sentences drawn from the
            training set, the same draw for every run (None: all).
    """

    definition: TaggingDefinition
    data: TaggingData
    max_seq_length: int = 128
    max_train_examples: Optional[int] = None
    console_keys: ClassVar[tuple[str, ...]] = ("loss", "accuracy")
    evaluate_every_epoch: ClassVar[bool] = True
    run_files: ClassVar[tuple[str, ...]] = ()
    _encoded: Optional[_Encoded] = dataclasses.field(default=None, init=False, repr=False)

    def __post_init__(self):
        require_positive(max_seq_length=self.max_seq_length)
        if self.max_train_examples is not None:
            require_positive(max_train_examples=self.max_train_examples)

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
        """The task's entry in results.json."""
        return self.definition.to_dict()

    def settings(self) -> dict:
        """The task's own settings in results.json."""
        values = {"max_seq_length": self.max_seq_length}
        if self.max_train_examples is not None:
            values["max_train_examples"] = self.max_train_examples
        return values

    def model_info(self) -> dict:
        """What serving needs beside the model: the tags and the length."""
        return {
            "kind": TAGGER,
            "task": self.definition.to_dict(),
            "max_seq_length": self.max_seq_length,
        }

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
            tagging_features.encode(tokenizer, train.sentences, length),
            self._tag_ids(train),
            tagging_features.encode(tokenizer, data.dev.sentences, length) if data.dev else None,
            tagging_features.encode(tokenizer, data.test.sentences, length) if data.test else None,
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

    def train_dataset(self, batch_size: int, seed: int) -> tf.data.Dataset:
        """(inputs, labels) batches, reshuffled every epoch with `seed`, repeated forever."""
        return tagging_features.make_dataset(
            self._encoded.train,
            self._encoded.train_tags,
            batch_size,
            self._encoded.pad_id,
            shuffle_seed=seed,
            repeat=True,
        )

    def build_model(self, encoder, seed: int):
        """The tagger with a fresh head seeded by `seed`."""
        return build_tagger(encoder, self.definition.num_tags, seed)

    def predict(
        self, model, features: tagging_features.TaggedFeatures, batch_size: int
    ) -> list[list[str]]:
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
            predicted`) and `test_predictions.txt` (`word predicted`).
        """
        files, scores = {}, {}
        dev = self.data.dev
        if dev is not None:
            predicted = self.predict(model, self._encoded.dev, batch_size)
            scores = tagging_metrics.score(dev.tags, predicted, self.definition.tag_format)
            if trial is not None:
                files[DEV_PREDICTIONS_FILE] = trial.file(DEV_PREDICTIONS_FILE)
                write_tagged(files[DEV_PREDICTIONS_FILE], dev.sentences, dev.tags, predicted)
        if trial is not None and self.data.test is not None:
            predicted = self.predict(model, self._encoded.test, batch_size)
            files[TEST_PREDICTIONS_FILE] = trial.file(TEST_PREDICTIONS_FILE)
            write_tagged(files[TEST_PREDICTIONS_FILE], self.data.test.sentences, predicted)
        return scores, files

    def format_metrics(self, scores: dict) -> str:
        """The micro-averaged metrics for the console, in percent."""
        return ", ".join(f"{k} {100 * v:.2f}" for k, v in scores.items() if "/" not in k)


def format_tables(results: dict, tag_format: str) -> str:
    """A tagging run's trials and per-type scores as text tables (percent).

    Args:
        results: the run's results.json.
        tag_format: the task's tag format (plain tags have no types).
    """
    median = results["median"]
    micro = [k for k in median if "/" not in k]
    trials = results["trials"]

    def table(header, rows):
        widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
        lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in [header] + rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def percent(value):
        return "" if value is None else f"{100 * value:.2f}"

    rows = [
        [str(t["trial"]), str(t["seed"])] + [percent(t["dev"].get(k)) for k in micro]
        for t in trials
    ]
    rows.append(["median", ""] + [percent(median[k]) for k in micro])
    text = table(["trial", "seed"] + micro, rows)
    types = sorted({k.split("/", 1)[1] for k in median if "/" in k})
    if tag_format != PLAIN and types:
        type_rows = [
            [t] + [percent(median.get(f"{m}/{t}")) for m in ("precision", "recall", "f1")]
            for t in types
        ]
        text += "\n\nPer entity type (median):\n" + table(
            ["type", "precision", "recall", "f1"], type_rows
        )
    return text
