"""Chinese-ELECTRA's benchmark table: six Chinese tasks, as ymcui/Chinese-ELECTRA reads and scores them.

Data: Chinese-ELECTRA's `finetuning_data/<task>/` folders
(`configure_finetuning.py`: `raw_data_dir`), each holding `train`, `dev`
and `test` files named as its task readers open them: `<split>.tsv` for
the classification tasks (`finetune/classification/classification_tasks.py`)
and `<split>.json` for the reading-comprehension ones
(`finetune/qa/qa_tasks.py`; the README renames CMRC 2018's SQuAD-style
train and dev files to `train.json` and `dev.json`). Every TSV is read
without quoting, its first row skipped (`read_tsv(quotechar=None)`,
`skip_first_line=True`).

Scores: the README's tables ("基线系统效果"), the best of 10 fine-tuning
runs with the mean in parentheses; CMRC 2018's test and challenge sets are
not distributed (their scores are recorded, their files are not expected).
Settings: the README gives the learning rate per size (3e-4 small, 1e-4
base, "the original paper's"), says nothing was tuned per task, and shows
CMRC 2018's settings for the small model (`params_cmrc2018.json`: length
512, 2 epochs, batch 32); the other values are `configure_finetuning.py`'s
defaults, which a run uses unless its JSON sets them. Everything was read
at commit 3765b2d8 (the `SOURCE` address).
"""

from __future__ import annotations

from electra_tf.finetuning.classification.data import CLASSIFICATION
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

COMMIT = "3765b2d8ea46dc1968223b6009c89cf1269facee"
REPOSITORY = f"https://github.com/ymcui/Chinese-ELECTRA/blob/{COMMIT}"
SOURCE = f"{REPOSITORY}/README.md (基线系统效果)"
SMALL, SMALL_180G = "ELECTRA-small", "ELECTRA-180g-small"
BASE, BASE_180G = "ELECTRA-base", "ELECTRA-180g-base"
MODELS = (SMALL, SMALL_180G, BASE, BASE_180G)
_SIZES = {SMALL: "small", SMALL_180G: "small", BASE: "base", BASE_180G: "base"}
CHALLENGE = "challenge"  # CMRC 2018's challenge set

_LEARNING_RATES = {"small": 3e-4, "base": 1e-4}
_DEFAULTS = f"{REPOSITORY}/configure_finetuning.py (defaults)"


def _classification_recipes() -> dict[str, Recipe]:
    return {
        size: Recipe(
            learning_rate=rate,
            train_batch_size=32,
            num_train_epochs=3.0,
            max_seq_length=128,
            warmup_proportion=0.1,
            weight_decay_rate=0.01,
            layerwise_lr_decay=0.8,
            source=f"learning rate: {SOURCE}; the rest: {_DEFAULTS}",
        )
        for size, rate in _LEARNING_RATES.items()
    }


def _qa_recipes(example_for_small: bool) -> dict[str, Recipe]:
    """Length, epochs and batch are stated only for CMRC 2018 with the small model."""
    recipes = {}
    for size, rate in _LEARNING_RATES.items():
        stated = example_for_small and size == "small"
        recipes[size] = Recipe(
            learning_rate=rate,
            train_batch_size=32 if stated else None,
            num_train_epochs=2.0 if stated else None,
            max_seq_length=512 if stated else None,
            warmup_proportion=0.1,
            weight_decay_rate=0.01,
            layerwise_lr_decay=0.8,
            source=(
                f"learning rate: {SOURCE}; "
                + (
                    f"length, epochs, batch: {REPOSITORY}/README.md (params_cmrc2018.json); "
                    if stated
                    else ""
                )
                + f"warmup, weight decay, layer-wise decay: {_DEFAULTS}"
            ),
        )
    return recipes


def _published(rows: dict, splits: tuple[str, ...], qa: bool) -> tuple[Published, ...]:
    """rows: model -> one cell per split; a cell is (best, mean or None), or for QA
    ((EM best, EM mean), (F1 best, F1 mean))."""
    entries = []
    for model in MODELS:
        scores = []
        for split, cell in zip(splits, rows[model]):
            if qa:
                (em, em_mean), (f1, f1_mean) = cell
                scores += [
                    Score("exact_match", split, em, em_mean),
                    Score("f1", split, f1, f1_mean),
                ]
            else:
                scores.append(Score("accuracy", split, cell[0], cell[1]))
        entries.append(Published(model, _SIZES[model], tuple(scores)))
    return tuple(entries)


def _reading_comprehension(
    name: str, title: str, splits: tuple, published: dict, stated: bool, notes: str
) -> BenchmarkTask:
    """A SQuAD-format task: <split>.json for `splits` (train first, then the published ones
    that are distributed), scored by dev F1 with its official script (`qa_metric` = name)."""
    return BenchmarkTask(
        name=name,
        title=title,
        kind=QUESTION_ANSWERING,
        directory=name,
        files={split: f"{split}.json" for split in splits},
        scored_split=DEV,
        metric="f1",
        unit="EM / F1 (CMRC 2018's official script)",
        qa_metric=name,
        recipes=_qa_recipes(example_for_small=stated),
        published=_published(published, (DEV, TEST, CHALLENGE)[: len(published[SMALL])], qa=True),
        notes=notes,
    )


def _classification(
    name: str, title: str, labels: tuple, tables: dict, published: dict, notes: str = ""
) -> BenchmarkTask:
    """A task of train/dev/test.tsv, scored by dev accuracy, published on dev and test."""
    return BenchmarkTask(
        name=name,
        title=title,
        kind=CLASSIFICATION,
        directory=name,
        files={split: f"{split}.tsv" for split in (TRAIN, DEV, TEST)},
        scored_split=DEV,
        metric="accuracy",
        unit="accuracy x 100",
        labels=labels,
        tables=tables,
        recipes=_classification_recipes(),
        published=_published(published, (DEV, TEST), qa=False),
        notes=notes,
    )


def _every_split(layout: TableLayout) -> dict[str, TableLayout]:
    return {split: layout for split in (TRAIN, DEV, TEST)}


CMRC2018 = _reading_comprehension(
    "cmrc2018",
    "CMRC 2018",
    (TRAIN, DEV),
    {
        SMALL: (
            ((63.4, 62.9), (80.8, 80.2)),
            ((67.8, 67.4), (83.4, 83.0)),
            ((16.3, 15.4), (37.2, 35.8)),
        ),
        SMALL_180G: (
            ((63.8, None), (82.7, None)),
            ((68.5, None), (85.2, None)),
            ((15.1, None), (35.8, None)),
        ),
        BASE: (
            ((68.4, 68.0), (84.8, 84.6)),
            ((73.1, 72.7), (87.1, 86.9)),
            ((22.6, 21.7), (45.0, 43.8)),
        ),
        BASE_180G: (
            ((69.3, None), (87.0, None)),
            ((73.1, None), (88.6, None)),
            ((24.0, None), (48.6, None)),
        ),
    },
    stated=True,
    notes="The SQuAD-style files of ymcui/cmrc2018 (squad-style-data/); its test and challenge sets are not public.",
)

DRCD = _reading_comprehension(
    "drcd",
    "DRCD",
    (TRAIN, DEV, TEST),
    {
        SMALL: (((79.8, 79.4), (86.7, 86.4)), ((79.0, 78.5), (85.8, 85.6))),
        SMALL_180G: (((83.5, None), (89.2, None)), ((82.9, None), (88.7, None))),
        BASE: (((87.5, 87.0), (92.5, 92.3)), ((86.9, 86.6), (91.8, 91.7))),
        BASE_180G: (((89.6, None), (94.2, None)), ((88.9, None), (93.7, None))),
    },
    stated=False,
    notes="DRCKnowledgeTeam/DRCD's DRCD_training.json, DRCD_dev.json and DRCD_test.json, renamed.",
)

_XNLI_TRAIN = TableLayout(
    description="premise<TAB>hypo<TAB>label after a header row (XNLI-MT's multinli.train.zh.tsv)",
    text=0,
    text_pair=1,
    label=2,
    label_aliases=(("contradiction", "contradictory"),),
)
_XNLI_EVALUATION = TableLayout(
    description=(
        "XNLI 1.0's xnli.dev.tsv / xnli.test.tsv columns after a header row: language, "
        "gold_label, ..., sentence1 (7th), sentence2 (8th), ...; the zh rows are read"
    ),
    text=6,
    text_pair=7,
    label=1,
    keep=(0, "zh"),
    label_aliases=(("contradiction", "contradictory"),),
)
XNLI = _classification(
    "xnli",
    "XNLI",
    ("contradictory", "entailment", "neutral"),
    {TRAIN: _XNLI_TRAIN, DEV: _XNLI_EVALUATION, TEST: _XNLI_EVALUATION},
    {
        SMALL: ((73.3, 72.5), (73.1, 72.6)),
        SMALL_180G: ((74.6, None), (74.6, None)),
        BASE: ((77.9, 77.0), (78.4, 77.8)),
        BASE_180G: ((79.6, None), (79.5, None)),
    },
    notes=(
        "Chinese-ELECTRA's labels are contradictory, entailment, neutral (XNLI-MT's training "
        "spelling); XNLI 1.0's dev and test files say contradiction, read as the same class. "
        "Rows of other languages than zh are left out, so the multilingual files can be "
        "given as they are."
    ),
)

CHNSENTICORP = _classification(
    "chnsenticorp",
    "ChnSentiCorp",
    ("0", "1"),
    _every_split(
        TableLayout(
            description="label<TAB>text_a under that header",
            text=1,
            text_pair=None,
            label=0,
            header=("label", "text_a"),
        )
    ),
    {
        SMALL: ((92.8, 92.5), (94.3, 93.5)),
        SMALL_180G: ((94.1, None), (93.6, None)),
        BASE: ((93.8, 93.0), (94.5, 93.5)),
        BASE_180G: ((94.3, None), (94.8, None)),
    },
)


def _sentence_pair(source: str) -> dict[str, TableLayout]:
    return _every_split(
        TableLayout(
            description=f"text_a<TAB>text_b<TAB>label (0/1) after a header row ({source})",
            text=0,
            text_pair=1,
            label=2,
        )
    )


LCQMC = _classification(
    "lcqmc",
    "LCQMC",
    ("0", "1"),
    _sentence_pair("LCQMC"),
    {
        SMALL: ((86.7, 86.3), (85.9, 85.6)),
        SMALL_180G: ((86.6, None), (85.8, None)),
        BASE: ((90.2, 89.8), (87.6, 87.3)),
        BASE_180G: ((90.2, None), (87.1, None)),
    },
)

BQ_CORPUS = _classification(
    "bqcorpus",
    "BQ Corpus",
    ("0", "1"),
    _sentence_pair("BQ Corpus"),
    {
        SMALL: ((83.5, 83.0), (82.0, 81.7)),
        SMALL_180G: ((83.3, None), (82.1, None)),
        BASE: ((84.8, 84.7), (84.5, 84.0)),
        BASE_180G: ((85.8, None), (84.5, None)),
    },
)

CHINESE_ELECTRA = Suite(
    name="chinese_electra",
    title="Chinese-ELECTRA (ymcui/Chinese-ELECTRA)",
    data_layout=(
        "Chinese-ELECTRA's finetuning_data/ (or the folder holding it): <task>/train.tsv, "
        "dev.tsv, test.tsv for xnli, chnsenticorp, lcqmc, bqcorpus; <task>/train.json, "
        "dev.json (and test.json) for cmrc2018 and drcd"
    ),
    tasks=(CMRC2018, DRCD, XNLI, CHNSENTICORP, LCQMC, BQ_CORPUS),
    source=SOURCE,
    models=MODELS,
    data_subdirectory="finetuning_data",
    published_as=(
        "the best of 10 fine-tuning runs, their mean in parentheses (none printed for the "
        "180g models), on the full files"
    ),
)
