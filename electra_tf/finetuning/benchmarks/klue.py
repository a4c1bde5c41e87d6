"""KLUE: the Korean benchmark, its files as KLUE-benchmark/KLUE distributes them, scored as KLUE-baseline scores them.

Data: KLUE's `klue_benchmark/` folder (v1.1), one folder per task:
`ynat-v1.1/ynat-v1.1_{train,dev}.json`, `klue-sts-v1.1/klue-sts-v1.1_{train,dev}.json`,
`klue-nli-v1.1/...json`, `klue-ner-v1.1/...tsv`, `klue-re-v1.1/...json`,
`klue-dp-v1.1/...tsv`, `klue-mrc-v1.1/...json`. The
test sets are not distributed: every task is scored on its dev file. Each
file is read as KLUE-baseline's reader (`klue_baseline/data/<task>.py`)
reads it: YNAT `title` -> `label` (7 topics), KLUE-STS `sentence1`,
`sentence2` -> `labels.real-label` (0-5), KLUE-NLI `premise`, `hypothesis`
-> `gold_label`, KLUE-RE `sentence` with its `subject_entity` and
`object_entity` spans marked (`<subj>...</subj>`, `<obj>...</obj>`) ->
`label` (30 relations; JSON arrays); KLUE-NER one character per line
(`tagging.layouts.KLUE_NER`); KLUE-DP one word per line
(`dependency_parsing.data`); KLUE-MRC SQuAD 2.0's layout, each question's
id its `guid` (`question_answering.data`).

Metrics (`klue_baseline/metrics/functional.py`): YNAT macro F1; KLUE-STS
Pearson r and the F1 of "score >= 3" (`f1_at_3`); KLUE-NLI accuracy;
KLUE-NER entity-level macro F1 (seqeval, strict IOB2) and character-level
macro F1 (`tagging.klue_ner`); KLUE-RE micro F1 without `no_relation` and
AUPRC (`relation_micro_f1`, `auprc`); KLUE-DP UAS and LAS macro F1
(`dependency_parsing.metrics`); KLUE-MRC exact match and ROUGE-W
(`question_answering.metrics`, `klue_mrc`).

Settings: `run_all.sh`, the lines for klue/roberta-small and
klue/roberta-base (one line serves both, our `small` and `base`); a value
it does not give is run_klue.py's default (`klue_baseline/models/
lightning_base.py`: learning rate 5e-5, 4 epochs, no warmup, no weight
decay; `klue_baseline/data/base.py`: batch 32). KLUE-baseline trains with
AdamW and a linear decay, without layer-wise decay.

Published numbers: KLUE's README ("Baseline Scores") at commit 3efd987,
which its commit message calls test-set results ("replace exp results
(test set)"); the KLUE paper's dev-set table was not available here, so
no dev number is recorded, and the test numbers are printed as such.
"""

from __future__ import annotations

from electra_tf.finetuning.classification.data import CLASSIFICATION, REGRESSION
from electra_tf.finetuning.classification.tables import JsonLayout
from electra_tf.finetuning.dependency_parsing.data import DEPENDENCY_PARSING
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
from electra_tf.finetuning.tagging.layouts import KLUE_NER

KLUE_COMMIT = "3efd98708a40ff49251fddde35453f8fbb11f536"
BASELINE_COMMIT = "8a03c9447e4c225e806877a84242aea11258c790"
KLUE_REPOSITORY = f"https://github.com/KLUE-benchmark/KLUE/blob/{KLUE_COMMIT}"
BASELINE_REPOSITORY = f"https://github.com/KLUE-benchmark/KLUE-baseline/blob/{BASELINE_COMMIT}"
SOURCE = f"{KLUE_REPOSITORY}/README.md (Baseline Scores)"
VERSION = "v1.1"
KOELECTRA_BASE = "koELECTRA-base"
ROBERTA_SMALL, ROBERTA_BASE = "KLUE-RoBERTa-small", "KLUE-RoBERTa-base"
MODELS = (ROBERTA_SMALL, ROBERTA_BASE, KOELECTRA_BASE)
_SIZES = {ROBERTA_SMALL: "small", ROBERTA_BASE: "base", KOELECTRA_BASE: "base"}
_DEFAULTS = (
    f"{BASELINE_REPOSITORY}/klue_baseline/models/lightning_base.py and "
    f"{BASELINE_REPOSITORY}/klue_baseline/data/base.py (run_klue.py's defaults)"
)


def _recipes(task: str, learning_rate, batch, epochs, warmup, length) -> dict[str, Recipe]:
    """run_all.sh's line for klue/roberta-small and klue/roberta-base (None: the default)."""
    defaulted = [
        name
        for name, value in (("batch", batch), ("epochs", epochs), ("warmup", warmup))
        if value is None
    ]
    recipe = Recipe(
        learning_rate=learning_rate,
        train_batch_size=32 if batch is None else batch,
        num_train_epochs=4.0 if epochs is None else float(epochs),
        max_seq_length=length,
        warmup_proportion=0.0 if warmup is None else warmup,
        weight_decay_rate=0.0,
        layerwise_lr_decay=1.0,
        source=(
            f"{BASELINE_REPOSITORY}/run_all.sh ({task}, klue/roberta-small and klue/roberta-base)"
            + (f"; {', '.join(defaulted)} and weight decay: {_DEFAULTS}" if defaulted else "")
        ),
    )
    return {"small": recipe, "base": recipe}


def _published(metrics: tuple[str, ...], rows: dict) -> tuple[Published, ...]:
    """rows: model -> its README cells, one per metric (the test set's)."""
    return tuple(
        Published(
            model, _SIZES[model], tuple(Score(m, TEST, v) for m, v in zip(metrics, rows[model]))
        )
        for model in MODELS
    )


def _files(task: str, extension: str) -> dict[str, str]:
    return {split: f"{task}-{VERSION}_{split}.{extension}" for split in (TRAIN, DEV)}


YNAT_LABELS = ("정치", "경제", "사회", "생활문화", "세계", "IT과학", "스포츠")
_YNAT = JsonLayout(
    description='a JSON array of {"guid", "title", "label" (one of the 7 topics), ...}',
    text="title",
    text_pair=None,
    label=("label",),
    index="guid",
)
YNAT = BenchmarkTask(
    name="ynat",
    title="YNAT",
    kind=CLASSIFICATION,
    directory=f"ynat-{VERSION}",
    files=_files("ynat", "json"),
    scored_split=DEV,
    metric="macro_f1",
    unit="macro-averaged F1 x 100 (7 topics)",
    labels=YNAT_LABELS,
    tables={TRAIN: _YNAT, DEV: _YNAT},
    recipes=_recipes("ynat", 5e-5, 32, None, 0.1, 128),
    published=_published(
        ("macro_f1",),
        {ROBERTA_SMALL: (84.98,), ROBERTA_BASE: (85.07,), KOELECTRA_BASE: (84.59,)},
    ),
)

_STS = JsonLayout(
    description=(
        'a JSON array of {"guid", "sentence1", "sentence2", "labels": {"label", "real-label" '
        '(0-5), "binary-label"}, ...}'
    ),
    text="sentence1",
    text_pair="sentence2",
    label=("labels", "real-label"),
    index="guid",
    label_range=(0.0, 5.0),
)
KLUE_STS = BenchmarkTask(
    name="klue-sts",
    title="KLUE-STS",
    kind=REGRESSION,
    directory=f"klue-sts-{VERSION}",
    files=_files("klue-sts", "json"),
    scored_split=DEV,
    metric="pearson",
    unit="Pearson r x 100 / F1 x 100 of score >= 3",
    label_scale=5.0,
    tables={TRAIN: _STS, DEV: _STS},
    table_metrics=("pearson", "f1_at_3"),
    recipes=_recipes("klue-sts", 5e-5, 32, 4, 0.1, 128),
    published=_published(
        ("pearson", "f1_at_3"),
        {
            ROBERTA_SMALL: (91.54, 85.16),
            ROBERTA_BASE: (92.50, 85.40),
            KOELECTRA_BASE: (92.46, 84.84),
        },
    ),
    notes=(
        "Trained on and scored against labels.real-label (the annotators' mean), as "
        "KLUE-baseline's reader does; labels.label is that mean rounded to one decimal. The "
        "0-5 score is divided by 5 for training (the correlation and F1 are unaffected)."
    ),
)

_NLI = JsonLayout(
    description=(
        'a JSON array of {"guid", "premise", "hypothesis", "gold_label" (entailment, '
        "contradiction or neutral), ...}"
    ),
    text="premise",
    text_pair="hypothesis",
    label=("gold_label",),
    index="guid",
)
KLUE_NLI = BenchmarkTask(
    name="klue-nli",
    title="KLUE-NLI",
    kind=CLASSIFICATION,
    directory=f"klue-nli-{VERSION}",
    files=_files("klue-nli", "json"),
    scored_split=DEV,
    metric="accuracy",
    unit="accuracy x 100",
    labels=("entailment", "contradiction", "neutral"),
    tables={TRAIN: _NLI, DEV: _NLI},
    recipes=_recipes("klue-nli", 5e-5, 32, 5, 0.1, 128),
    published=_published(
        ("accuracy",),
        {ROBERTA_SMALL: (79.33,), ROBERTA_BASE: (84.83,), KOELECTRA_BASE: (85.63,)},
    ),
)

KLUE_NER_TASK = BenchmarkTask(
    name="klue-ner",
    title="KLUE-NER",
    kind=TAGGING,
    directory=f"klue-ner-{VERSION}",
    files=_files("klue-ner", "tsv"),
    scored_split=DEV,
    metric="entity_macro_f1",
    unit="entity-level macro F1 x 100 (seqeval, strict IOB2) / character-level macro F1 x 100",
    tagging_layout=KLUE_NER,
    table_metrics=("entity_macro_f1", "char_macro_f1"),
    recipes=_recipes("klue-ner", 5e-5, None, 3, None, 510),
    published=_published(
        ("entity_macro_f1", "char_macro_f1"),
        {
            ROBERTA_SMALL: (83.65, 91.14),
            ROBERTA_BASE: (84.60, 91.44),
            KOELECTRA_BASE: (86.11, 92.56),
        },
    ),
    notes=(
        "The model reads every character other than a space as a word of its own (KLUE-"
        "baseline tokenizes each space-separated word and tags its pieces); both score the "
        "characters without the spaces (tagging.klue_ner)."
    ),
)

KLUE_DP = BenchmarkTask(
    name="klue-dp",
    title="KLUE-DP",
    kind=DEPENDENCY_PARSING,
    directory=f"klue-dp-{VERSION}",
    files=_files("klue-dp", "tsv"),
    scored_split=DEV,
    metric="las_macro_f1",
    unit="UAS macro F1 x 100 / LAS macro F1 x 100",
    table_metrics=("uas_macro_f1", "las_macro_f1"),
    recipes=_recipes("klue-dp", 5e-5, 32, 10, 0.1, 256),
    published=_published(
        ("uas_macro_f1", "las_macro_f1"),
        {
            ROBERTA_SMALL: (90.04, 88.14),
            ROBERTA_BASE: (93.04, 88.32),
            KOELECTRA_BASE: (92.90, 87.77),
        },
    ),
    notes="Trials are compared by LAS macro F1, run_all.sh's --metric_key for these models.",
)

# KLUE's klue-re-v1.1/relation_list.json, in its order (`no_relation` first, class 0).
KLUE_RE_RELATIONS = (
    "no_relation",
    "org:dissolved",
    "org:founded",
    "org:place_of_headquarters",
    "org:alternate_names",
    "org:member_of",
    "org:members",
    "org:political/religious_affiliation",
    "org:product",
    "org:founded_by",
    "org:top_members/employees",
    "org:number_of_employees/members",
    "per:date_of_birth",
    "per:date_of_death",
    "per:place_of_birth",
    "per:place_of_death",
    "per:place_of_residence",
    "per:origin",
    "per:employee_of",
    "per:schools_attended",
    "per:alternate_names",
    "per:parents",
    "per:children",
    "per:siblings",
    "per:spouse",
    "per:other_family",
    "per:colleagues",
    "per:product",
    "per:religion",
    "per:title",
)
_RE = JsonLayout(
    description=(
        'a JSON array of {"guid", "sentence", "subject_entity": {"word", "start_idx", "end_idx", '
        '"type"}, "object_entity": {...}, "label" (one of the 30 relations of '
        'relation_list.json), "source"}, the spans character offsets with the end included'
    ),
    text="sentence",
    text_pair=None,
    label=("label",),
    index="guid",
    marked_entities=("subject_entity", "object_entity"),
)
KLUE_RE = BenchmarkTask(
    name="klue-re",
    title="KLUE-RE",
    kind=CLASSIFICATION,
    directory=f"klue-re-{VERSION}",
    files=_files("klue-re", "json"),
    scored_split=DEV,
    metric="relation_micro_f1",
    unit="micro F1 x 100 without no_relation / AUPRC x 100 (30 relations)",
    labels=KLUE_RE_RELATIONS,
    tables={TRAIN: _RE, DEV: _RE},
    table_metrics=("relation_micro_f1", "auprc"),
    recipes=_recipes("klue-re", 5e-5, 32, 3, 0.1, 256),
    published=_published(
        ("relation_micro_f1", "auprc"),
        {
            ROBERTA_SMALL: (60.89, 58.96),
            ROBERTA_BASE: (67.65, 68.55),
            KOELECTRA_BASE: (62.85, 58.94),
        },
    ),
    notes=(
        "The sentence is read with <subj>...</subj> and <obj>...</obj> around the two spans, as "
        "KLUE-baseline marks them; KLUE-baseline adds the four markers to the vocabulary as new "
        "tokens, where this model's tokenizer reads them as the pieces of the text '<subj>' "
        "(and a word after a closing marker starts a word). The relations are "
        "relation_list.json's 30, in its order; the file itself is not read."
    ),
)

KLUE_MRC = BenchmarkTask(
    name="klue-mrc",
    title="KLUE-MRC",
    kind=QUESTION_ANSWERING,
    directory=f"klue-mrc-{VERSION}",
    files=_files("klue-mrc", "json"),
    scored_split=DEV,
    metric="rouge_w",
    unit="exact match x 100 / ROUGE-W x 100 (character LCS F1), unanswerable questions included",
    qa_metric="klue_mrc",
    table_metrics=("exact_match", "rouge_w"),
    recipes=_recipes("klue-mrc", 3e-5, 16, 5, None, 510),
    published=_published(
        ("exact_match", "rouge_w"),
        {
            ROBERTA_SMALL: (57.32, 62.70),
            ROBERTA_BASE: (68.67, 73.98),
            KOELECTRA_BASE: (59.82, 66.05),
        },
    ),
    notes=(
        "Read as SQuAD 2.0 (is_impossible questions train the answerability head and are "
        "answered '' where the null odds exceed --null_score_threshold, the ELECTRA paper's "
        "rule; KLUE-baseline answers '' where the null span outscores the best span). An "
        "is_impossible question's gold is the empty string alone, where KLUE-baseline "
        "scores it against the answers the file lists for it, the empty string when none. "
        "Trials are compared by ROUGE-W, run_all.sh's --metric_key."
    ),
)

KLUE = Suite(
    name="klue",
    title="KLUE (KLUE-benchmark/KLUE, scored as KLUE-baseline scores it)",
    data_layout=(
        "KLUE's klue_benchmark/: <task>-v1.1/<task>-v1.1_{train,dev}.json|tsv "
        "(ynat-v1.1/ynat-v1.1_train.json, klue-ner-v1.1/klue-ner-v1.1_dev.tsv, ...)"
    ),
    tasks=(YNAT, KLUE_STS, KLUE_NLI, KLUE_NER_TASK, KLUE_RE, KLUE_DP, KLUE_MRC),
    source=SOURCE,
    models=MODELS,
    data_subdirectory="klue_benchmark",
    published_as=(
        "KLUE's README table, which the commit that wrote it calls test-set results "
        "('replace exp results (test set)'): on KLUE's test set, which is not distributed, "
        "marked (test); the KLUE paper's dev-set rows were not available to copy, so none is "
        "printed"
    ),
)
