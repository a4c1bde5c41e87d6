"""Dependency parsing (KLUE-DP) as a task kind: words in, a head and a relation per word out.

`DependencyParsingTask` gives the trial loop KLUE-DP's files (`data`),
the biaffine parser on the encoder (`model`), KLUE's UAS and LAS macro and
micro F1 on the dev file (`metrics`; LAS macro F1 first, the score
KLUE-baseline selects its small and base models by) and, per trial,
`dev_predictions.tsv` (and `test_predictions.tsv`): the input file with the
predicted HEAD and DEPREL, which `data.read_parsed_file` reads back. As a
class, it serves and checks a saved parser (`serving`, `check`).
"""

from __future__ import annotations

import base64
import dataclasses
from typing import ClassVar, Optional

import tensorflow as tf

from electra_tf.artifacts.finetuning_dir import TrialDir
from electra_tf.errors import RunError
from electra_tf.finetuning.dependency_parsing import check
from electra_tf.finetuning.dependency_parsing import features as parsing_features
from electra_tf.finetuning.dependency_parsing.data import (
    DEPENDENCY_PARSING,
    ParsedSplit,
    ParsingData,
    ParsingDefinition,
    load_parsing_files,
    write_predictions,
)
from electra_tf.finetuning.dependency_parsing.metrics import score_sentences
from electra_tf.finetuning.dependency_parsing.model import ElectraDependencyParser, build_parser
from electra_tf.finetuning.dependency_parsing.serving import ParserServing
from electra_tf.finetuning.kind.benchmark import TRAIN
from electra_tf.finetuning.kind.contract import DefinedTask, TaskKind, TaskOptions

# results.json's trial `predictions`: {split: file}.
PREDICTIONS_FILES = {"dev": "dev_predictions.tsv", "test": "test_predictions.tsv"}


@dataclasses.dataclass
class _Encoded:
    train: parsing_features.WordFeatures
    targets: tuple
    dev: Optional[parsing_features.WordFeatures]
    test: Optional[parsing_features.WordFeatures]
    pad_id: int


@dataclasses.dataclass
class DependencyParsingTask(DefinedTask, TaskKind):
    """A dependency-parsing task for the trial loop, and the dependency-parsing kind.

    Attributes:
        definition: the relations and how they are scored.
        data: train, dev and test sentences.
        max_seq_length: pieces per sentence, [CLS] and [SEP] included.
        max_train_examples: train on this many sentences drawn from the
            training set, the same draw for every run (None: all).
    """

    definition: ParsingDefinition
    data: ParsingData
    max_seq_length: int = 128
    max_train_examples: Optional[int] = None
    KIND: ClassVar[str] = DEPENDENCY_PARSING
    TASK_TYPES: ClassVar[tuple[str, ...]] = (DEPENDENCY_PARSING,)
    MODEL_CLASS: ClassVar[type] = ElectraDependencyParser
    # What a request to the served model holds (`serving_default`'s inputs).
    REQUEST_FIELDS: ClassVar[tuple[str, ...]] = ("words",)
    console_keys: ClassVar[tuple[str, ...]] = ("loss", "uas")
    _encoded: Optional[_Encoded] = dataclasses.field(default=None, init=False, repr=False)

    def __post_init__(self):
        self.check_sizes()

    @classmethod
    def from_benchmark(
        cls, benchmark, recipe, present, max_seq_length, max_train_examples, warn=print
    ):
        """A suite's KLUE-DP task: its training and scored files; trials compared by its metric."""
        scored = benchmark.scored_split
        definition, data = load_parsing_files(benchmark.name, present[TRAIN], present[scored], None)
        if benchmark.metric not in definition.metrics:
            raise RunError(
                f"{benchmark.name}: metric {benchmark.metric!r} is none of "
                f"{', '.join(definition.metrics)}."
            )
        definition.primary_metric = benchmark.metric
        if recipe.num_train_epochs:
            definition.num_train_epochs = recipe.num_train_epochs
        task = cls(definition, data, max_seq_length, max_train_examples)
        return task, {TRAIN: present[TRAIN], scored: present[scored]}

    @classmethod
    def from_options(cls, options: TaskOptions) -> "DependencyParsingTask":
        """KLUE-DP files (`--train_file`, `--dev_file`, `--test_file`)."""
        run = options.run
        if not run.train_file:
            raise RunError(
                "--task_type=dependency_parsing needs --train_file (KLUE-DP's layout, e.g. "
                "klue-dp-v1.1_train.tsv)."
            )
        if "task_head" in options.given and run.task_head != "electra":
            raise RunError(
                f"--task_head={run.task_head}: a dependency parser has one head (biaffine "
                "arcs and labels)."
            )
        if "tag_format" in options.given:
            raise RunError("--tag_format is not used with --task_type=dependency_parsing.")
        options.refuse(
            "text_pair_column",
            "index_column",
            "data_dir",
            "predict_file",
            "double_unordered",
            "labels",
            reason="is not used with --task_type=dependency_parsing.",
        )
        definition, data = load_parsing_files(
            run.task or DEPENDENCY_PARSING, run.train_file, run.dev_file, run.test_file
        )
        if data.dev is None:
            options.print_fn("No dev set: training only (give --dev_file to score every epoch).")
        return cls(definition, data, run.max_seq_length or 128, run.max_train_examples)

    def model_info(self) -> dict:
        """What serving needs beside the model and its text path: the relations."""
        return {"task": self.definition.to_dict()}

    def prepare(self, tokenizer, print_fn=print) -> dict:
        """Draws the training sentences and tokenizes every split.

        Returns:
            The training data counts for results.json.
        """
        data = self.data
        train = data.train
        if self.max_train_examples is not None and self.max_train_examples < len(train):
            print_fn(
                f"Training on {self.max_train_examples:,} of the {len(train):,} training "
                "sentences (--max_train_examples; the same draw for every run)."
            )
            train = train.sample(self.max_train_examples)
        print_fn(
            f"Task {self.definition.name} (dependency parsing, {self.definition.num_labels} "
            f"relations): {len(train):,} train sentences ({train.num_words:,} words)"
            + (f", {len(data.dev):,} dev" if data.dev else "")
            + (f", {len(data.test):,} test" if data.test else "")
        )
        print_fn("Tokenizing...")
        length = self.max_seq_length

        def encode(split: Optional[ParsedSplit]):
            if split is None:
                return None
            return parsing_features.encode(tokenizer, split.words, length)

        encoded_train = encode(train)
        self._encoded = _Encoded(
            encoded_train,
            parsing_features.training_targets(encoded_train, train.heads, train.label_ids()),
            encode(data.dev),
            encode(data.test),
            tokenizer.pad_id,
        )
        for name, features in (
            ("training", encoded_train),
            ("dev", self._encoded.dev),
            ("test", self._encoded.test),
        ):
            if features is not None and features.num_truncated:
                unseen = sum(features.num_words) - sum(len(p) for p in features.positions)
                print_fn(
                    f"{features.num_truncated:,} {name} sentence(s) exceed "
                    f"--max_seq_length={length} pieces; their last {unseen:,} words are "
                    + (
                        "not trained on."
                        if name == "training"
                        else "not parsed (written _ _, and not scored, as KLUE-baseline does)."
                    )
                )
        return {"num_train_sentences": len(train), "num_train_words": train.num_words}

    @property
    def num_train_examples(self) -> int:
        """Sentences per epoch (after `prepare`)."""
        return len(self._encoded.train)

    def train_dataset(self, batch_size: int, seed: int, by_length: bool) -> tf.data.Dataset:
        """(inputs, labels) batches, reshuffled every epoch with `seed`, repeated forever."""
        encoded = self._encoded
        return parsing_features.make_dataset(
            encoded.train,
            encoded.targets,
            batch_size,
            encoded.pad_id,
            shuffle_seed=seed,
            repeat=True,
            by_length=by_length,
        )

    def build_model(self, encoder, seed: int):
        """The parser with a fresh head seeded by `seed`."""
        return build_parser(encoder, self.definition.num_labels, seed)

    def evaluate(
        self, model, batch_size: int, trial: Optional[TrialDir] = None
    ) -> tuple[dict, dict]:
        """Dev scores; with `trial`, also the predictions, written into it.

        Returns:
            (metrics, {split: path}): `dev_predictions.tsv` and
            `test_predictions.tsv`, each its input file with the predicted
            HEAD and DEPREL in columns 5 and 6.
        """
        files, scores = {}, {}
        names = self.definition.label_names
        for name in ("dev", "test"):
            split = getattr(self.data, name)
            if split is None or (name == "test" and trial is None):
                continue
            heads, label_ids = parsing_features.predict(
                model, getattr(self._encoded, name), batch_size, self._encoded.pad_id
            )
            if name == "dev":
                scores = score_sentences(split.heads, split.label_ids(), heads, label_ids)
            if trial is not None:
                files[name] = trial.file(PREDICTIONS_FILES[name])
                labels = [[names[i] if i >= 0 else None for i in row] for row in label_ids]
                write_predictions(files[name], split.source, heads, labels)
        return scores, files

    # ------------------------------------------------------------------
    # A saved parser.

    @classmethod
    def serving_module(cls, model, tokenizer, info: dict, forward: Optional[str] = None):
        """`ParserServing` (the Keras model's own call, its one `forward`)."""
        return ParserServing(model, tokenizer, info["max_seq_length"], cls.label_names(info))

    @classmethod
    def serving_config(cls, module, info: dict) -> dict:
        """The relations, and the task."""
        definition = ParsingDefinition.from_dict(info["task"])
        return {
            "is_pair": False,
            "label_names": list(definition.label_names),
            "task": definition.to_dict(),
        }

    @classmethod
    def label_names(cls, info: dict) -> list[str]:
        return list(ParsingDefinition.from_dict(info["task"]).label_names)

    @classmethod
    def check_requests(cls, reference) -> tuple[list[dict], list[Optional[dict]], list[str]]:
        return check.build_requests(reference)

    @classmethod
    def benchmark_inputs(cls, benchmark: dict) -> dict:
        """A fixed sentence of words (a row of `words`), unless the benchmark names its own."""
        if "texts" in benchmark:
            return benchmark
        words = "그 영화는 정말 재미있었고 배우들의 연기도 훌륭했다 .".split()
        return dict(benchmark, texts={"words": [_base64(w) for w in words]})


def _base64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()
