"""CLUE: seven Chinese tasks as CLUEbenchmark distributes, reads and scores them.

Data: one folder per task, each the unzipped `<task>_public.zip` of CLUE's
download links (README, 数据集介绍与下载): `train.json`, `dev.json` and
`test.json` for TNEWS, IFLYTEK, AFQMC, OCNLI, CMNLI and CLUENER; C3's
`d-train.json`, `m-train.json`, `d-dev.json`, `m-dev.json` and
`test1.1.json`. The classification files hold one JSON object per line,
read by the fields CLUE's baselines read
(`baselines/models_pytorch/classifier_pytorch/processors/clue.py`): TNEWS
and IFLYTEK `sentence` -> `label` (TNEWS's 15 codes 100-116 without 105 and
111, IFLYTEK's 119 codes 0-118), AFQMC `sentence1`, `sentence2` -> `label`
(0/1), OCNLI and CMNLI `sentence1`, `sentence2` -> `label`
(contradiction/entailment/neutral; pairs labelled `-` left out). CLUENER
is read in the tagging kind's `cluener` layout and C3 in the
multiple-choice kind's.

Scores: accuracy on dev (the test labels are not public), CLUENER as
CLUE's `score.py` scores it (the mean over the ten entity types of the F1
of the entity texts per line; `tagging.cluener`). The test predictions go
to the file CLUE's leaderboard takes for the task (CLUE 1.1's names, as
`baselines/paddlenlp/` writes them: `tnews11_predict.json`,
`ocnli_50k_predict.json`, `c311_predict.json`, ...), one JSON object per
line.

Published rows, each from the page named in `SOURCES`: CLUE's README
(各任务详细对比, dev and test accuracy of one fine-tuning run with the
settings printed beside it) for AFQMC, TNEWS', IFLYTEK', CMNLI and C3;
OCNLI's README (mean of 5 runs trained on the 50k file) for OCNLI; the
CLUENER2020 README (test F1 on CLUE's leaderboard) for CLUENER. None of
these pages prints an ELECTRA row; the rows kept are the smallest model
(ALBERT-tiny), BERT-base and the largest (RoBERTa-wwm-large-ext) where
the page has them.

Settings: the 训练参数 column of the README's tables, ALBERT-tiny's for
`small` and BERT-base's for `base`; OCNLI's from
`run_classifier_ocnli.sh` and CLUENER's from CLUENER2020's
`run_ner_crf.sh`, which name one setting for every model. Warmup 0.1 and
weight decay 0.01 are CLUE's BERT baseline's (`run_classifier.py`,
`optimization.py`); C3's warmup is the table's.
"""

from __future__ import annotations

from electra_tf.finetuning.classification.data import CLASSIFICATION
from electra_tf.finetuning.classification.json_tables import JsonLinesLayout
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
from electra_tf.finetuning.multiple_choice.data import MULTIPLE_CHOICE
from electra_tf.finetuning.tagging.cluener import CLUE_F1
from electra_tf.finetuning.tagging.data import TAGGING
from electra_tf.finetuning.tagging.layouts import CLUENER as CLUENER_LAYOUT

COMMIT = "9d232934e74c3ddd1f7b25d8e9711900aef5b8fe"
REPOSITORY = f"https://github.com/CLUEbenchmark/CLUE/blob/{COMMIT}"
README = f"{REPOSITORY}/README.md (各任务详细对比)"
OCNLI_COMMIT = "b53efdee17257a5c33993cf6fcf8ffff0497ea0e"
OCNLI_README = (
    f"https://github.com/CLUEbenchmark/OCNLI/blob/{OCNLI_COMMIT}/README.md "
    "(Results, OCNLI.train = 50k)"
)
CLUENER_COMMIT = "2e8fccd1b8cde6b471fe440b9d766e920fb418ab"
CLUENER_REPOSITORY = f"https://github.com/CLUEbenchmark/CLUENER2020/blob/{CLUENER_COMMIT}"
CLUENER_README = f"{CLUENER_REPOSITORY}/README.md (效果对比)"
PADDLE = f"{REPOSITORY}/baselines/paddlenlp"

TINY, BERT_BASE, LARGE = "ALBERT-tiny", "BERT-base", "RoBERTa-wwm-large-ext"
MODELS = (TINY, BERT_BASE, LARGE)
_SIZES = {TINY: "small", BERT_BASE: "base", LARGE: "base"}

_BERT_DEFAULTS = (
    f"warmup: {REPOSITORY}/baselines/models/bert/run_classifier.py (warmup_proportion); "
    f"weight decay: {REPOSITORY}/baselines/models/bert/optimization.py"
)


def _recipe(batch, length, epochs, rate, source, warmup=0.1) -> Recipe:
    return Recipe(
        learning_rate=rate,
        train_batch_size=batch,
        num_train_epochs=epochs,
        max_seq_length=length,
        warmup_proportion=warmup,
        weight_decay_rate=0.01,
        layerwise_lr_decay=1.0,
        source=source,
    )


def _table_recipes(title: str, small: tuple, base: tuple, warmup=0.1) -> dict[str, Recipe]:
    """(batch, length, epochs, learning rate) of the README's ALBERT-tiny and BERT-base rows."""
    where = f"{README}, {title}"
    return {
        "small": _recipe(*small, f"{where}, {TINY}'s 训练参数; {_BERT_DEFAULTS}", warmup),
        "base": _recipe(*base, f"{where}, {BERT_BASE}'s 训练参数; {_BERT_DEFAULTS}", warmup),
    }


def _published(rows: dict) -> tuple[Published, ...]:
    """rows: model -> (dev, test) accuracy (or test alone, as (None, test)), as printed."""
    entries = []
    for model in MODELS:
        if model not in rows:
            continue
        dev, test = rows[model]
        scores = tuple(
            Score(metric, split, value)
            for metric, split, value in (
                (rows.get("metric", "accuracy"), DEV, dev),
                (rows.get("metric", "accuracy"), TEST, test),
            )
            if value is not None
        )
        entries.append(Published(model, _SIZES[model], scores))
    return tuple(entries)


_JSON_FILES = {TRAIN: "train.json", DEV: "dev.json", TEST: "test.json"}


def _classification(
    name: str,
    title: str,
    labels: tuple,
    layout: JsonLinesLayout,
    recipes: dict,
    published: dict,
    submission: str,
    notes: str = "",
) -> BenchmarkTask:
    return BenchmarkTask(
        name=name,
        title=title,
        kind=CLASSIFICATION,
        directory=name,
        files=dict(_JSON_FILES),
        scored_split=DEV,
        metric="accuracy",
        unit="accuracy x 100",
        labels=labels,
        tables={split: layout for split in _JSON_FILES},
        recipes=recipes,
        published=_published(published),
        submission=submission,
        notes=notes,
    )


def _single(field: str, labels: str) -> JsonLinesLayout:
    return JsonLinesLayout(
        description=f'one JSON object per line, {{"{field}": text, "label": {labels}, ...}}',
        text=field,
        text_pair=None,
        label="label",
    )


def _pair(labels: str, skip: tuple = ()) -> JsonLinesLayout:
    return JsonLinesLayout(
        description=(
            f'one JSON object per line, {{"sentence1": text, "sentence2": text, "label": {labels}'
            + (", or - for no agreement" if skip else "")
            + ", ...}"
        ),
        text="sentence1",
        text_pair="sentence2",
        label="label",
        skip_labels=skip,
    )


_NLI = ("contradiction", "entailment", "neutral")
_NLI_WORDS = "contradiction/entailment/neutral"

TNEWS = _classification(
    "tnews",
    "TNEWS'",
    tuple(str(100 + i) for i in range(17) if i not in (5, 11)),
    _single("sentence", "a code 100-116"),
    _table_recipes("TNEWS'", (16, 128, 3.0, 2e-5), (16, 128, 3.0, 2e-5)),
    {TINY: (53.55, 53.35), BERT_BASE: (56.09, 56.58), LARGE: (58.32, 58.61)},
    "tnews11_predict.json",
    notes=(
        "The README's test accuracy is on CLUE 1.0's test file; test.json is CLUE 1.1's "
        "(tnews11_predict.json, as baselines/paddlenlp writes it)."
    ),
)

IFLYTEK = _classification(
    "iflytek",
    "IFLYTEK'",
    tuple(str(i) for i in range(119)),
    _single("sentence", "a code 0-118"),
    _table_recipes("IFLYTEK'", (32, 128, 10.0, 2e-5), (32, 128, 3.0, 2e-5)),
    {TINY: (48.76, 48.71), BERT_BASE: (60.37, 60.29), LARGE: (62.75, 62.98)},
    "iflytek_predict.json",
)

AFQMC = _classification(
    "afqmc",
    "AFQMC",
    ("0", "1"),
    _pair("0 or 1"),
    _table_recipes("AFQMC", (16, 128, 3.0, 2e-5), (16, 128, 3.0, 2e-5)),
    {TINY: (69.13, 69.92), BERT_BASE: (74.16, 73.70), LARGE: (74.92, 76.55)},
    "afqmc_predict.json",
)

_OCNLI_SCRIPT = f"{REPOSITORY}/baselines/models_pytorch/classifier_pytorch/run_classifier_ocnli.sh"
OCNLI = _classification(
    "ocnli",
    "OCNLI",
    _NLI,
    _pair(_NLI_WORDS, skip=("-",)),
    {
        size: _recipe(16, 128, 2.0, 3e-5, f"{_OCNLI_SCRIPT}; {_BERT_DEFAULTS}")
        for size in ("small", "base")
    },
    {BERT_BASE: (74.5, 72.2), LARGE: (78.8, 78.2)},
    "ocnli_50k_predict.json",
    notes=(
        f"Published rows: {OCNLI_README}, the mean of 5 runs (BERT: BERT_base, RoBERTa: "
        "RoBERTa_large_wwm), trained on train.50k.json; CLUE's ocnli_public.zip names the "
        "50k training file train.json, which is the file read. The README's tables of CLUE "
        "have no OCNLI row."
    ),
)

CMNLI = _classification(
    "cmnli",
    "CMNLI",
    _NLI,
    _pair(_NLI_WORDS, skip=("-",)),
    _table_recipes("CMNLI", (64, 128, 2.0, 3e-5), (64, 128, 2.0, 3e-5)),
    {TINY: (70.26, 70.61), BERT_BASE: (79.47, 79.69), LARGE: (83.20, 82.12)},
    "cmnli_predict.json",
)

_CLUENER_SCRIPT = f"{CLUENER_REPOSITORY}/pytorch_version/run_ner_crf.sh"
CLUENER = BenchmarkTask(
    name="cluener",
    title="CLUENER",
    kind=TAGGING,
    directory="cluener",
    files=dict(_JSON_FILES),
    scored_split=DEV,
    metric=CLUE_F1,
    unit="F1 x 100, the mean over the ten entity types (CLUENER2020's score.py)",
    tagging_layout=CLUENER_LAYOUT,
    recipes={
        size: _recipe(24, 128, 5.0, 3e-5, f"{_CLUENER_SCRIPT}; {_BERT_DEFAULTS}")
        for size in ("small", "base")
    },
    published=_published({"metric": CLUE_F1, BERT_BASE: (None, 78.82), LARGE: (None, 80.42)}),
    submission="cluener_predict.json",
    notes=(
        f"Published rows: {CLUENER_README}, test F1 on CLUE's leaderboard (Bert-base, "
        "RoBERTa-wwm-large-ext); no dev F1 is printed, so the table's dev column shows none. "
        "Each character is a word, tagged BIOS as CLUE's baseline tags it; the dev "
        "predictions are also written as CLUENER lines (dev_predictions.json) that score.py "
        "compares with dev.json."
    ),
)

C3 = BenchmarkTask(
    name="c3",
    title="C3",
    kind=MULTIPLE_CHOICE,
    directory="c3",
    files={TRAIN: "d-train.json,m-train.json", DEV: "d-dev.json,m-dev.json", TEST: "test1.1.json"},
    scored_split=DEV,
    metric="accuracy",
    unit="accuracy x 100",
    recipes=_table_recipes("C3", (32, 512, 8.0, 5e-5), (24, 512, 8.0, 2e-5)),
    published=_published({TINY: (50.58, 50.26), BERT_BASE: (65.70, 64.50), LARGE: (74.48, 73.82)}),
    submission="c311_predict.json",
    notes=(
        "The dialogue (d-) and mixed-genre (m-) files are read together, as CLUE's baselines "
        "read them; test1.1.json's predictions go to c311_predict.json, one "
        '{"id": <question position>, "label": <option position>} per line '
        "(baselines/paddlenlp/mrc/run_c3.py). The README's test accuracy is on CLUE 1.0's "
        "test file."
    ),
)

SOURCES = (
    f"AFQMC, TNEWS', IFLYTEK', CMNLI, C3: {README}; OCNLI: {OCNLI_README}; "
    f"CLUENER: {CLUENER_README}; submission file names: {PADDLE}"
)

CLUE = Suite(
    name="clue",
    title="CLUE (CLUEbenchmark/CLUE)",
    data_layout=(
        "one folder per task, each an unzipped <task>_public.zip of CLUE: tnews/, iflytek/, "
        "afqmc/, ocnli/, cmnli/, cluener/ holding train.json, dev.json (and test.json); c3/ "
        "holding d-train.json, m-train.json, d-dev.json, m-dev.json (and test1.1.json)"
    ),
    tasks=(TNEWS, IFLYTEK, AFQMC, OCNLI, CMNLI, CLUENER, C3),
    source=SOURCES,
    models=MODELS,
    published_as=(
        "CLUE's README: one fine-tuning run per model and task, dev and test accuracy; "
        "OCNLI's README: the mean of 5 runs; CLUENER2020's README: leaderboard test F1 only"
    ),
)
