"""KoELECTRA's benchmark table: eight Korean tasks, as monologg/KoELECTRA distributes and scores them.

Data: KoELECTRA's `finetune/data/` folder, one folder per task holding the
files its configs name (`finetune/config/<task>/<model>.json`):
`nsmc/ratings_train.txt`, `naver-ner/train.tsv`, ... Scores: KoELECTRA's
README ("Result on Subtask"), one fine-tuning run per task with the config's
settings; its scripts score every saved checkpoint on the config's
`test_file` (KorQuAD: `predict_file`), which is the file each published
number is on. Settings: `finetune/config/<task>/koelectra-{small,base}-v3.json`;
every config trains with Hugging Face's AdamW (epsilon 1e-8), no warmup,
no weight decay, no layer-wise decay, gradient-norm clip 1.0, a linear
decay to 0 (`finetune/run_seq_cls.py`, `run_ner.py`, `run_squad.py`).
Everything was read at commit 024fbdd6 (the `SOURCE` address).
"""

from __future__ import annotations

from electra_tf.finetuning.classification.data import CLASSIFICATION, REGRESSION
from electra_tf.finetuning.classification.tables import TableLayout
from electra_tf.finetuning.kind.benchmark import (
    DEV,
    TEST,
    TRAIN,
    BenchmarkTask,
    Published,
    Recipe,
    Score,
    Suite,
)
from electra_tf.finetuning.question_answering.task import QUESTION_ANSWERING
from electra_tf.finetuning.tagging.data import TAGGING
from electra_tf.finetuning.tagging.layouts import SENTENCE_PER_LINE

COMMIT = "024fbdd600e653b6e4bdfc64ceec84181b5ce6c4"
REPOSITORY = f"https://github.com/monologg/KoELECTRA/blob/{COMMIT}"
SOURCE = f"{REPOSITORY}/README.md (Result on Subtask)"
SMALL, BASE = "KoELECTRA-Small-v3", "KoELECTRA-Base-v3"


def _recipe(task: str, size: str, learning_rate, batch, epochs, length) -> Recipe:
    return Recipe(
        learning_rate=learning_rate,
        train_batch_size=batch,
        num_train_epochs=epochs,
        max_seq_length=length,
        warmup_proportion=0.0,
        weight_decay_rate=0.0,
        layerwise_lr_decay=1.0,
        source=f"{REPOSITORY}/finetune/config/{task}/koelectra-{size}-v3.json",
    )


def _recipes(task: str, small: tuple, base: tuple) -> dict[str, Recipe]:
    """(learning rate, batch, epochs, length) of the small and base v3 configs."""
    return {"small": _recipe(task, "small", *small), "base": _recipe(task, "base", *base)}


def _published(metric: str, split: str, small, base) -> tuple[Published, ...]:
    """One number (or EM / F1 pairs, for QA) per model."""

    def scores(value):
        if isinstance(value, tuple):
            return (Score("exact_match", split, value[0]), Score("f1", split, value[1]))
        return (Score(metric, split, value),)

    return (Published(SMALL, "small", scores(small)), Published(BASE, "base", scores(base)))


_BINARY = ("0", "1")


def _accuracy(
    name: str,
    title: str,
    files: dict,
    layout: TableLayout,
    labels: tuple,
    recipes: tuple,
    published: tuple,
    notes: str = "",
) -> BenchmarkTask:
    """A classification task in <name>/, every file in one `layout`, scored by test accuracy.

    recipes: the small and base configs' (learning rate, batch, epochs, length);
    published: the small and base models' test accuracy.
    """
    return BenchmarkTask(
        name=name,
        title=title,
        kind=CLASSIFICATION,
        directory=name,
        files=files,
        scored_split=TEST,
        metric="accuracy",
        unit="accuracy x 100",
        labels=labels,
        tables={split: layout for split in files},
        recipes=_recipes(name, *recipes),
        published=_published("accuracy", TEST, *published),
        notes=notes,
    )


NSMC = _accuracy(
    "nsmc",
    "NSMC",
    {TRAIN: "ratings_train.txt", TEST: "ratings_test.txt"},
    TableLayout(
        description=(
            "id<TAB>document<TAB>label under that header, a document holding a double "
            "quote wrapped in CSV quotes"
        ),
        text=1,
        text_pair=None,
        label=2,
        header=("id", "document", "label"),
        quoting="csv",
        index=0,
    ),
    _BINARY,
    ((5e-5, 32, 10.0, 128), (5e-5, 32, 10.0, 128)),
    (89.36, 90.63),
    notes=(
        "KoELECTRA cuts the lines at tabs and keeps the CSV quotes of the reviews that hold "
        "a double quote (233 of the 50,000 test reviews) as text; they are read here as the "
        "file writes them, quotes undone."
    ),
)

NAVER_NER = BenchmarkTask(
    name="naver-ner",
    title="Naver NER",
    kind=TAGGING,
    directory="naver-ner",
    files={TRAIN: "train.tsv", TEST: "test.tsv"},
    scored_split=TEST,
    metric="f1",
    unit="entity F1 x 100 (seqeval, suffix tags)",
    tagging_layout=SENTENCE_PER_LINE,
    recipes=_recipes("naver-ner", (5e-5, 32, 20.0, 128), (5e-5, 32, 20.0, 128)),
    published=_published("f1", TEST, 85.40, 88.11),
)

PAWS = _accuracy(
    "paws",
    "PAWS",
    {TRAIN: "translated_train.tsv", DEV: "dev_2k.tsv", TEST: "test_2k.tsv"},
    TableLayout(
        description="id<TAB>sentence1<TAB>sentence2<TAB>label under that header",
        text=1,
        text_pair=2,
        label=3,
        header=("id", "sentence1", "sentence2", "label"),
        index=0,
        skip_empty_texts=True,
    ),
    _BINARY,
    ((3e-5, 64, 15.0, 128), (3e-5, 32, 15.0, 128)),
    (77.45, 84.45),
)

KORNLI = _accuracy(
    "kornli",
    "KorNLI",
    {TRAIN: "multinli.train.ko.tsv", DEV: "xnli.dev.ko.tsv", TEST: "xnli.test.ko.tsv"},
    TableLayout(
        description=(
            "sentence1<TAB>sentence2<TAB>gold_label under that header, double quotes plain text"
        ),
        text=0,
        text_pair=1,
        label=2,
        header=("sentence1", "sentence2", "gold_label"),
    ),
    ("contradiction", "entailment", "neutral"),
    ((5e-5, 128, 15.0, 128), (5e-5, 64, 15.0, 128)),
    (78.60, 82.24),
)

_KORSTS = TableLayout(
    description=(
        "genre<TAB>filename<TAB>year<TAB>id<TAB>score<TAB>sentence1<TAB>sentence2 under that "
        "header, score 0-5"
    ),
    text=5,
    text_pair=6,
    label=4,
    header=("genre", "filename", "year", "id", "score", "sentence1", "sentence2"),
    index=3,
    label_range=(0.0, 5.0),
)
KORSTS = BenchmarkTask(
    name="korsts",
    title="KorSTS",
    kind=REGRESSION,
    directory="korsts",
    files={TRAIN: "sts-train.tsv", DEV: "sts-dev.tsv", TEST: "sts-test.tsv"},
    scored_split=TEST,
    metric="spearman",
    unit="Spearman correlation x 100",
    label_scale=5.0,
    tables={TRAIN: _KORSTS, DEV: _KORSTS, TEST: _KORSTS},
    recipes=_recipes("korsts", (5e-5, 32, 10.0, 128), (5e-5, 32, 10.0, 128)),
    published=_published("spearman", TEST, 80.79, 85.53),
    notes=(
        "KoELECTRA regresses the 0-5 score itself; it is divided by 5 for training here, as "
        "the original ELECTRA code does for STS-B (the correlation is unaffected)."
    ),
)

QUESTION_PAIR = _accuracy(
    "question-pair",
    "Question Pair",
    {TRAIN: "train.tsv", DEV: "dev.tsv", TEST: "test.tsv"},
    TableLayout(
        description="question1<TAB>question2<TAB>is_duplicate under that header",
        text=0,
        text_pair=1,
        label=2,
        header=("question1", "question2", "is_duplicate"),
        skip_empty_texts=True,
    ),
    _BINARY,
    ((5e-5, 32, 10.0, 128), (5e-5, 32, 10.0, 128)),
    (94.85, 95.25),
)

KORQUAD = BenchmarkTask(
    name="korquad",
    title="KorQuAD 1.0",
    kind=QUESTION_ANSWERING,
    directory="korquad",
    files={TRAIN: "KorQuAD_v1.0_train.json", DEV: "KorQuAD_v1.0_dev.json"},
    scored_split=DEV,
    metric="f1",
    unit="EM / F1 (KorQuAD 1.0's official script: character F1)",
    qa_metric="korquad",
    recipes=_recipes("korquad", (5e-5, 32, 7.0, 512), (5e-5, 8, 7.0, 512)),
    published=_published("f1", DEV, (82.11, 91.13), (84.83, 93.45)),
)

_HATE_SPEECH = TableLayout(
    description="title<TAB>comment<TAB>bias<TAB>hate under that header (comment -> hate)",
    text=1,
    text_pair=None,
    label=3,
    header=("title", "comment", "bias", "hate"),
)
HATE_SPEECH = BenchmarkTask(
    name="hate-speech",
    title="Korean Hate Speech",
    kind=CLASSIFICATION,
    directory="hate-speech",
    # KoELECTRA's config gives val.tsv as its test_file; the table calls it Dev.
    files={TRAIN: "train.tsv", DEV: "val.tsv"},
    scored_split=DEV,
    metric="macro_f1",
    unit="macro-averaged F1 x 100 (none, offensive, hate)",
    labels=("none", "offensive", "hate"),
    tables={TRAIN: _HATE_SPEECH, DEV: _HATE_SPEECH},
    recipes=_recipes("hate-speech", (5e-5, 32, 10.0, 128), (5e-5, 32, 10.0, 128)),
    published=_published("macro_f1", DEV, 63.07, 67.61),
)

KOELECTRA = Suite(
    name="koelectra",
    title="KoELECTRA (monologg/KoELECTRA)",
    data_layout=(
        "KoELECTRA's finetune/data/: <task>/<file> as its configs name them "
        "(nsmc/ratings_train.txt, naver-ner/train.tsv, korquad/KorQuAD_v1.0_dev.json, ...)"
    ),
    tasks=(NSMC, NAVER_NER, PAWS, KORNLI, KORSTS, QUESTION_PAIR, KORQUAD, HATE_SPEECH),
    source=SOURCE,
    models=(SMALL, BASE),
    published_as=(
        "one fine-tuning run per task with the config's settings, on the full files KoELECTRA "
        "distributes"
    ),
)
