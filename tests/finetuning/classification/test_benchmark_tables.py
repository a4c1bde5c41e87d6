"""Benchmark TSV files in the layouts KoELECTRA and Chinese-ELECTRA read, worked by hand."""

import pytest

from electra_tf.finetuning.benchmarks.chinese_electra import CHINESE_ELECTRA
from electra_tf.finetuning.benchmarks.koelectra import KOELECTRA
from electra_tf.finetuning.classification.data import CLASSIFICATION, REGRESSION, Task
from electra_tf.finetuning.classification.tables import TableLayout, read_table
from electra_tf.finetuning.kind.files import TaskDataError


def _write(path, text):
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return str(path)


def _task(labels=None):
    if labels is None:
        return Task("t", REGRESSION, None, ("spearman",), "spearman", True)
    return Task("t", CLASSIFICATION, list(labels), ("accuracy",), "accuracy", True)


def _read(tmp_path, suite, name, split, text, warnings=None):
    benchmark = suite.task(name)
    path = _write(tmp_path / f"{name}-{split}.tsv", text)
    task = _task(benchmark.labels)
    warn = warnings.append if warnings is not None else print
    return read_table(path, benchmark.tables[split], task, split, True, warn)


def _refusal(call, *fragments):
    with pytest.raises(TaskDataError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_nsmc_csv_quotes(tmp_path):
    text = (
        "id\tdocument\tlabel\n"
        '9037756\t"""스토리"" 최고, ""연출""도"\t1\n'  # quotes undone, as e9t/nsmc wrote them
        "5494222\t\t0\n"  # an empty review is kept (KoELECTRA keeps it)
        "4688930\t평범\t0\n"
    )
    split = _read(tmp_path, KOELECTRA, "nsmc", "train", text)
    assert split.texts_a == ['"스토리" 최고, "연출"도', "", "평범"]
    assert split.texts_b is None
    assert split.labels.tolist() == [1, 0, 0]
    assert split.indices == ["9037756", "5494222", "4688930"]


def test_paws_leaves_out_empty_sentences(tmp_path):
    text = (
        "id\tsentence1\tsentence2\tlabel\n"
        "4\tA 위원회\tB 위원회\t1\n"
        "5\t\tB\t0\n"  # KoELECTRA drops it
        '6\t"따옴표\t둘째"\t0\n'  # quotes are text: no field runs into the next
    )
    warnings = []
    split = _read(tmp_path, KOELECTRA, "paws", "dev", text, warnings)
    assert split.texts_a == ["A 위원회", '"따옴표'] and split.texts_b == ["B 위원회", '둘째"']
    assert split.labels.tolist() == [1, 0] and split.indices == ["4", "6"]
    assert len(warnings) == 1 and "left out 1 row(s) with an empty sentence" in warnings[0]


def test_kornli_quotes_are_text(tmp_path):
    text = (
        "sentence1\tsentence2\tgold_label\n"
        '그리고 그가 말했다, "엄마, 저 왔어요."\t그는 한마디도 하지 않았다.\tcontradiction\n'
        '"시작만\t끝"\tneutral\n'
        "가\t나\tentailment\n"
    )
    split = _read(tmp_path, KOELECTRA, "kornli", "test", text)
    assert split.texts_a[:2] == ['그리고 그가 말했다, "엄마, 저 왔어요."', '"시작만']
    assert split.texts_b[1] == '끝"'
    # KoELECTRA's label order: contradiction, entailment, neutral.
    assert split.labels.tolist() == [0, 2, 1]


def test_korsts_scores(tmp_path):
    header = "genre\tfilename\tyear\tid\tscore\tsentence1\tsentence2\n"
    text = header + (
        "main-captions\tMSRvid\t2012test\t0000\t5.000\t남자가 춤을 춘다.\t한 남자가 춤춘다.\n"
        "main-news\theadlines\t2015\t0042\t0.5\t가\t나\n"
    )
    benchmark = KOELECTRA.task("korsts")
    split = _read(tmp_path, KOELECTRA, "korsts", "dev", text)
    assert split.labels.dtype.kind == "f" and split.labels.tolist() == [5.0, 0.5]
    assert split.texts_a == ["남자가 춤을 춘다.", "가"] and split.texts_b == [
        "한 남자가 춤춘다.",
        "나",
    ]
    assert split.indices == ["0000", "0042"] and benchmark.label_scale == 5.0
    row = "g\tf\ty\t1\t{}\ta\tb\n"
    _refusal(
        lambda: _read(tmp_path, KOELECTRA, "korsts", "dev", header + row.format("5.2")),
        "korsts-dev.tsv, line 2",
        "score 5.2 is outside 0-5",
        "genre<TAB>filename",
    )
    _refusal(
        lambda: _read(tmp_path, KOELECTRA, "korsts", "dev", header + row.format("high")),
        "line 2",
        "score 'high' is not a number",
    )


def test_question_pair_and_hate_speech(tmp_path):
    pairs = _read(
        tmp_path,
        KOELECTRA,
        "question-pair",
        "test",
        "question1\tquestion2\tis_duplicate\n속이는 거 더 못하겠어\t속이는 거 더 이상 못하겠어\t0\n",
    )
    assert pairs.texts_b == ["속이는 거 더 이상 못하겠어"] and pairs.labels.tolist() == [0]
    text = (
        "title\tcomment\tbias\thate\n"
        "\"'아스달' 송중기 [종합]\"\t송중기 시대극은 믿고본다.\tnone\tnone\n"
        "‘섹션TV’ 유인나\t지현우 나쁜놈\tnone\toffensive\n"
        "제목\t댓글\tgender\thate\n"
    )
    hate = _read(tmp_path, KOELECTRA, "hate-speech", "dev", text)
    # The comment is the text, `hate` the label; none, offensive, hate in that order.
    assert hate.texts_a == ["송중기 시대극은 믿고본다.", "지현우 나쁜놈", "댓글"]
    assert hate.texts_b is None and hate.labels.tolist() == [0, 1, 2]
    _refusal(
        lambda: _read(
            tmp_path,
            KOELECTRA,
            "hate-speech",
            "dev",
            "title\tcomment\tbias\thate\nt\tc\tnone\tsevere\n",
        ),
        "hate-speech-dev.tsv, line 2",
        "label 'severe' is none of none, offensive, hate",
        "title<TAB>comment<TAB>bias<TAB>hate",
    )


def test_a_file_of_another_layout_is_refused_by_its_header(tmp_path):
    _refusal(
        lambda: _read(
            tmp_path, KOELECTRA, "kornli", "dev", "question1\tquestion2\tis_duplicate\na\tb\t0\n"
        ),
        "kornli-dev.tsv, line 1",
        "the header is 'question1<TAB>question2<TAB>is_duplicate'",
        "sentence1<TAB>sentence2<TAB>gold_label",
    )


def test_xnli_zh_train_and_multilingual_dev(tmp_path):
    train = _read(
        tmp_path,
        CHINESE_ELECTRA,
        "xnli",
        "train",
        "premise\thypo\tlabel\n他说\t他没说\tcontradictory\n你好\t你好啊\tentailment\n",
    )
    assert train.texts_a == ["他说", "你好"] and train.labels.tolist() == [0, 1]
    columns = ["language", "gold_label"] + [f"c{i}" for i in range(2, 6)]
    columns += ["sentence1", "sentence2", "promptID", "pairID", "genre"]

    def row(language, label, a, b):
        return "\t".join([language, label, "(", "(", "(", "(", a, b, "1", "2", "g"]) + "\n"

    text = "\t".join(columns) + "\n"
    text += row("en", "neutral", "He", "She")
    text += row("zh", "contradiction", "他说", "他没说")  # XNLI 1.0's spelling
    text += row("zh", "neutral", "你好", '"好')
    warnings = []
    dev = _read(tmp_path, CHINESE_ELECTRA, "xnli", "dev", text, warnings)
    assert dev.texts_a == ["他说", "你好"] and dev.texts_b == ["他没说", '"好']
    assert dev.labels.tolist() == [0, 2]  # contradictory, neutral
    assert len(warnings) == 1 and "1 other row(s) left out" in warnings[0]


def test_chnsenticorp_lcqmc_bqcorpus(tmp_path):
    senti = _read(
        tmp_path,
        CHINESE_ELECTRA,
        "chnsenticorp",
        "dev",
        'label\ttext_a\n1\t這間酒店環境"不錯"\n0\t怀着激动的心情\n',
    )
    assert senti.texts_a == ['這間酒店環境"不錯"', "怀着激动的心情"]
    assert senti.labels.tolist() == [1, 0] and senti.texts_b is None
    for name in ("lcqmc", "bqcorpus"):
        pairs = _read(
            tmp_path,
            CHINESE_ELECTRA,
            name,
            "test",
            "text_a\ttext_b\tlabel\n喜欢打篮球的男生\t爱打篮球的男生\t1\n借款\t还款\t0\n",
        )
        assert pairs.texts_a == ["喜欢打篮球的男生", "借款"]
        assert pairs.texts_b == ["爱打篮球的男生", "还款"] and pairs.labels.tolist() == [1, 0]
    # The first row is a header whatever it holds, as Chinese-ELECTRA reads it.
    _refusal(
        lambda: _read(tmp_path, CHINESE_ELECTRA, "lcqmc", "train", "a\tb\t1\nc\td\tyes\n"),
        "lcqmc-train.tsv, line 2",
        "label 'yes' is none of 0, 1",
        "text_a<TAB>text_b<TAB>label",
    )


def test_short_rows_are_skipped_with_a_warning_and_nothing_usable_is_refused(tmp_path):
    layout = TableLayout(
        "a<TAB>b<TAB>label", text=0, text_pair=1, label=2, header=("a", "b", "label")
    )
    path = _write(tmp_path / "f.tsv", "a\tb\tlabel\nx\ty\t1\nbroken\n")
    warnings = []
    split = read_table(path, layout, _task(("0", "1")), "dev", True, warnings.append)
    assert split.texts_a == ["x"]
    assert "skipped 1 row(s) with fewer than 3 columns (first: line 3)" in warnings[0]
    only_broken = _write(tmp_path / "g.tsv", "a\tb\tlabel\nbroken\n")
    _refusal(
        lambda: read_table(only_broken, layout, _task(("0", "1")), "dev", True, lambda m: None),
        "g.tsv: no usable rows",
        "a<TAB>b<TAB>label",
    )
    # An unlabelled file needs no label column.
    test = read_table(
        _write(tmp_path / "t.tsv", "a\tb\tlabel\nx\ty\n"), layout, _task(("0", "1")), "test", False
    )
    assert test.texts_a == ["x"] and test.labels is None
