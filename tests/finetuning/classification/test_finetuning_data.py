"""Task readers (GLUE TSV layouts, TFDS, the user's CSV/TSV/JSONL) and input features."""

import dataclasses
import json
import os

import numpy as np
import pytest

from electra_tf.finetuning.classification import data as tasks
from electra_tf.finetuning.classification import features
from electra_tf.finetuning.kind.files import FileTaskOptions, TaskDataError


def _write(path, text, bom=False):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8-sig" if bom else "utf-8", newline="") as f:
        f.write(text)
    return str(path)


# --------------------------------------------------------------------- GLUE layouts


def test_sst2_header_and_test_index(tmp_path):
    _write(tmp_path / "SST-2" / "train.tsv", 'sentence\tlabel\na "quoted start\t1\nplain\t0\n')
    _write(tmp_path / "SST-2" / "dev.tsv", "sentence\tlabel\nok\t1\n")
    _write(tmp_path / "SST-2" / "test.tsv", "index\tsentence\n7\tfirst\n9\tsecond\n")
    data = tasks.load_glue_dir(tasks.glue_task("sst2"), str(tmp_path))
    # No quote handling: the unbalanced quote is kept and does not swallow the next line.
    assert data.train.texts_a == ['a "quoted start', "plain"]
    assert data.train.labels.tolist() == [1, 0]
    assert data.train.texts_b is None
    assert list(data.test) == ["SST-2"]
    assert data.test["SST-2"].indices == ["7", "9"]
    assert data.test["SST-2"].labels is None


def test_cola_has_no_header(tmp_path):
    rows = 'gj04\t1\t\tThe sailors rode the breeze clear of the rocks.\ngj04\t0\t*\tThe weights made the rope stretch over the pulley "\n'
    _write(tmp_path / "CoLA" / "train.tsv", rows)
    _write(tmp_path / "CoLA" / "dev.tsv", rows)
    data = tasks.load_glue_dir(tasks.glue_task("cola"), str(tmp_path))
    assert len(data.train) == 2  # the first line is data, not a header
    assert data.train.labels.tolist() == [1, 0]
    assert data.train.texts_a[1].endswith('pulley "')
    assert data.test == {}  # no test.tsv: nothing to predict


def test_mrpc_with_bom(tmp_path):
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    _write(tmp_path / "MRPC" / "train.tsv", header + "1\t1\t2\tA cat .\tThe cat .\n", bom=True)
    _write(tmp_path / "MRPC" / "dev.tsv", header + "0\t3\t4\tX\tY\n", bom=True)
    data = tasks.load_glue_dir(tasks.glue_task("mrpc"), str(tmp_path))
    assert data.train.texts_a == ["A cat ."] and data.train.texts_b == ["The cat ."]
    assert data.dev["dev"].labels.tolist() == [0]


def test_qnli_label_names_and_unknown_label(tmp_path):
    header = "index\tquestion\tsentence\tlabel\n"
    _write(
        tmp_path / "QNLI" / "train.tsv",
        header + "0\tq1\ts1\tentailment\n1\tq2\ts2\tnot_entailment\n",
    )
    _write(tmp_path / "QNLI" / "dev.tsv", header + "0\tq\ts\tentailment\n1\tq\ts\tmaybe\n")
    with pytest.raises(TaskDataError, match=r"dev\.tsv, line 3: unknown label 'maybe'"):
        tasks.load_glue_dir(tasks.glue_task("qnli"), str(tmp_path))
    _write(tmp_path / "QNLI" / "dev.tsv", header + "0\tq\ts\tnot_entailment\n")
    data = tasks.load_glue_dir(tasks.glue_task("qnli"), str(tmp_path))
    assert data.train.labels.tolist() == [0, 1]
    assert data.dev["dev"].labels.tolist() == [1]


def test_mnli_matched_and_mismatched(tmp_path):
    cols = [
        "index",
        "promptID",
        "pairID",
        "genre",
        "s1b",
        "s2b",
        "s1p",
        "s2p",
        "sentence1",
        "sentence2",
        "label1",
        "gold_label",
    ]

    def row(i, label):
        return (
            "\t".join([str(i), "p", "q", "g", "x", "x", "x", "x", f"P{i}", f"H{i}", label, label])
            + "\n"
        )

    head = "\t".join(cols) + "\n"
    _write(tmp_path / "MNLI" / "train.tsv", head + row(0, "neutral") + row(1, "contradiction"))
    _write(tmp_path / "MNLI" / "dev_matched.tsv", head + row(2, "entailment"))
    _write(tmp_path / "MNLI" / "dev_mismatched.tsv", head + row(3, "neutral"))
    test_head = "\t".join(cols[:10]) + "\n"
    _write(
        tmp_path / "MNLI" / "test_matched.tsv",
        test_head + "\t".join(row(5, "")[:-1].split("\t")[:10]) + "\n",
    )
    data = tasks.load_glue_dir(tasks.glue_task("mnli"), str(tmp_path))
    # contradiction / entailment / neutral = 0 / 1 / 2.
    assert data.train.labels.tolist() == [2, 0]
    assert data.dev["dev"].labels.tolist() == [1]
    assert data.dev["dev_mismatched"].texts_b == ["H3"]
    assert list(data.test) == ["MNLI-m"] and data.test["MNLI-m"].indices == ["5"]


def test_stsb_regression_labels(tmp_path):
    head = (
        "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    )
    _write(tmp_path / "STS-B" / "train.tsv", head + "0\tg\tf\ty\to\ts\ts\tA\tB\t3.800\n")
    _write(tmp_path / "STS-B" / "dev.tsv", head + "0\tg\tf\ty\to\ts\ts\tC\tD\t0.5\n")
    task = tasks.glue_task("stsb")
    data = tasks.load_glue_dir(task, str(tmp_path))
    assert task.task_type == "regression" and task.label_scale == 5.0
    assert task.num_train_epochs == 10.0
    assert data.train.labels.tolist() == [3.8]


def test_missing_glue_folder(tmp_path):
    with pytest.raises(TaskDataError, match="no RTE/ folder"):
        tasks.load_glue_dir(tasks.glue_task("rte"), str(tmp_path))


# --------------------------------------------------------------------- TFDS


def test_tfds_mock_mnli_maps_labels_by_name():
    tfds = pytest.importorskip("tensorflow_datasets")
    task = tasks.glue_task("mnli")
    with tfds.testing.mock_data(num_examples=6):
        data = tasks.load_tfds(task)
        raw = list(tfds.as_numpy(tfds.load("glue/mnli", split="train", download=False)))
    assert len(data.train) == 6 and set(data.dev) == {"dev", "dev_mismatched"}
    assert data.train.texts_a == [r["premise"].decode() for r in raw]
    # TFDS orders entailment, neutral, contradiction; ours contradiction, entailment, neutral.
    tfds_order = ["entailment", "neutral", "contradiction"]
    expected = [task.label_names.index(tfds_order[r["label"]]) for r in raw]
    assert data.train.labels.tolist() == expected
    assert set(data.test) == {"MNLI-m", "MNLI-mm"}


def test_tfds_mock_sst2_single_text():
    tfds = pytest.importorskip("tensorflow_datasets")
    with tfds.testing.mock_data(num_examples=4):
        data = tasks.load_tfds(tasks.glue_task("sst2"))
    assert len(data.train) == 4 and data.train.texts_b is None
    assert set(data.train.labels.tolist()) <= {0, 1}


def test_tfds_not_prepared_points_to_data_dir(tmp_path):
    pytest.importorskip("tensorflow_datasets")
    with pytest.raises(TaskDataError, match="--data_dir"):
        tasks.load_tfds(tasks.glue_task("rte"), str(tmp_path))


# --------------------------------------------------------------------- user files

NSMC_LIKE = (
    "id\tdocument\tlabel\n"
    "1\t재밌다 정말\t1\n"
    "2\t\t0\n"
    '3\t"""따옴표"" 안의\t탭"\t0\n'
    '4\t별로 "중간 따옴표\t1\n'
)


def test_nsmc_like_tsv_with_csv_quoting(tmp_path):
    path = _write(tmp_path / "ratings.txt", NSMC_LIKE)
    options = FileTaskOptions(text_column="document", label_column="label")
    task, data = tasks.load_user_files("nsmc", options, path, path)
    assert task.label_names == ["0", "1"]
    assert data.train.texts_a == ["재밌다 정말", "", '"따옴표" 안의\t탭', '별로 "중간 따옴표']
    assert data.train.labels.tolist() == [1, 0, 0, 1]
    assert task.metrics == ("accuracy", "f1", "mcc")


def test_quoting_none_keeps_quotes(tmp_path):
    path = _write(tmp_path / "t.tsv", 'text\tlabel\n"a b"\tx\nc\ty\n')
    options = FileTaskOptions(quoting="none")
    _, data = tasks.load_user_files("t", options, path)
    assert data.train.texts_a == ['"a b"', "c"]


def test_csv_pair_and_label_order(tmp_path):
    path = _write(tmp_path / "train.csv", 'q,a,y\nx1,y1,10\nx2,y2,2\nx3,"y, 3",2\n')
    options = FileTaskOptions(text_column="q", text_pair_column="a", label_column="y")
    task, data = tasks.load_user_files("pairs", options, path)
    assert task.label_names == ["2", "10"]  # integer labels sort numerically
    assert data.train.texts_b == ["y1", "y2", "y, 3"]
    assert data.train.labels.tolist() == [1, 0, 0]
    task, _ = tasks.load_user_files(
        "pairs",
        FileTaskOptions(
            text_column="q", text_pair_column="a", label_column="y", labels=["10", "2", "5"]
        ),
        path,
    )
    assert task.label_names == ["10", "2", "5"] and task.metrics == ("accuracy", "macro_f1")


def test_jsonl_and_regression(tmp_path):
    lines = [{"text": "a", "score": 1.5}, {"text": "b", "score": 3}, {"text": None, "score": 0}]
    path = _write(tmp_path / "train.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n\n")
    task, data = tasks.load_user_files(
        "r", FileTaskOptions(label_column="score", task_type="regression"), path
    )
    assert task.task_type == "regression" and task.num_outputs == 1
    assert data.train.texts_a == ["a", "b", ""]
    np.testing.assert_allclose(data.train.labels, [1.5, 3.0, 0.0])


def test_missing_column_lists_the_columns(tmp_path):
    path = _write(tmp_path / "train.tsv", "id\tdocument\tlabel\n1\tx\t0\n")
    with pytest.raises(TaskDataError) as error:
        tasks.load_user_files("t", FileTaskOptions(text_column="text"), path)
    message = str(error.value)
    assert "train.tsv" in message and "'text'" in message and "--text_column" in message
    assert "'id', 'document', 'label'" in message


def test_unknown_dev_label_names_label_and_line(tmp_path):
    train = _write(tmp_path / "train.tsv", "text\tlabel\na\tpos\nb\tneg\n")
    dev = _write(tmp_path / "dev.tsv", "text\tlabel\na\tpos\n\nb\tneutral\n")
    with pytest.raises(TaskDataError, match=r"dev\.tsv, line 4: unknown label 'neutral'"):
        tasks.load_user_files("t", FileTaskOptions(), train, dev)


def test_empty_file_and_bad_json(tmp_path):
    empty = _write(tmp_path / "empty.tsv", "text\tlabel\n")
    with pytest.raises(TaskDataError, match="empty.tsv: the file has no data rows"):
        tasks.load_user_files("t", FileTaskOptions(), empty)
    bad = _write(tmp_path / "bad.jsonl", '{"text": "a", "label": 1}\n{"text": "b", label: 0}\n')
    with pytest.raises(TaskDataError, match=r"bad\.jsonl, line 2: not valid JSON"):
        tasks.load_user_files("t", FileTaskOptions(), bad)


@pytest.mark.parametrize(
    "name, quoting", [("train.tsv", "none"), ("train.csv", "csv"), ("train.jsonl", "csv")]
)
def test_invalid_utf8_is_named_at_its_own_line(tmp_path, name, quoting):
    # Far beyond the first 8 KB block the decoder reads at a time.
    rows = [f"row number {i} with some words" for i in range(1, 600)]
    path = tmp_path / name
    if name.endswith(".jsonl"):
        lines = [json.dumps({"text": row, "label": i % 2}).encode() for i, row in enumerate(rows)]
    else:
        separator = "," if name.endswith(".csv") else "\t"
        lines = [b"text" + separator.encode() + b"label"]
        lines += [f"{row}{separator}{i % 2}".encode() for i, row in enumerate(rows)]
    lines[455] = lines[455].replace(b"some", b"so\xffme")
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(
        TaskDataError,
        match=rf"{name}, line 456: not valid UTF-8 \(byte 0xff at "
        r"column \d+, byte offset \d+",
    ):
        tasks.load_user_files("t", FileTaskOptions(quoting=quoting), str(path))


def test_unterminated_quote_suggests_quoting_none(tmp_path):
    path = _write(tmp_path / "t.tsv", 'text\tlabel\n"open\t1\nnext\t0\n')
    with pytest.raises(TaskDataError, match="--quoting=none"):
        tasks.load_user_files("t", FileTaskOptions(), path)


@pytest.mark.parametrize("quoting", ["none", "csv"])
def test_a_row_longer_than_the_limit_is_refused_with_its_line(tmp_path, quoting):
    row = "a b c d\t1\n"  # 10 characters with its line end
    text = "text\tlabel\n" + row * 3 + "e f g h i\t0\n" + row
    path = _write(tmp_path / "t.tsv", text)
    _, data = tasks.load_user_files("t", FileTaskOptions(quoting=quoting, max_row_chars=12), path)
    assert data.train.texts_a == ["a b c d"] * 3 + ["e f g h i", "a b c d"]
    with pytest.raises(TaskDataError) as refused:
        tasks.load_user_files("t", FileTaskOptions(quoting=quoting, max_row_chars=11), path)
    message = str(refused.value)
    assert message.startswith(
        f"{path}, line 5: the row is longer than --max_row_chars=11 characters"
    ) and message.endswith("; shorten that text or raise the limit.")
    assert ("--quoting=none" in message) == (quoting == "csv")
    # A quoted field over several lines counts as one row, from the line it starts on.
    path = _write(tmp_path / "q.tsv", 'text\tlabel\nx\t1\n"one\ntwo\nthree"\t0\n')
    _, data = tasks.load_user_files("t", FileTaskOptions(max_row_chars=18), path)
    assert data.train.texts_a == ["x", "one\ntwo\nthree"]
    with pytest.raises(TaskDataError, match=r"q\.tsv, line 3: the row is longer than"):
        tasks.load_user_files("t", FileTaskOptions(max_row_chars=17), path)


def test_an_enormous_field_is_refused_without_reading_it_whole(tmp_path):
    import tracemalloc

    path = tmp_path / "big.csv"
    with open(path, "w") as f:
        f.write("text,label\nshort,1\n")
        f.write('"' + "word " * 4_000_000 + '",0\n')  # a 20 MB field
        f.write("short,0\n")
    tracemalloc.start()
    try:
        with pytest.raises(TaskDataError, match=r"big\.csv, line 3: the row is longer than "):
            tasks.load_user_files("t", FileTaskOptions(), str(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The default limit is 1 Mi characters: a few times that, not the field's 20 MB
    # (read whole, the field took 140 MiB here).
    assert tasks.MAX_ROW_CHARS == 1 << 20 and peak < 16 * 2**20, peak


def test_single_label_is_refused(tmp_path):
    path = _write(tmp_path / "t.tsv", "text\tlabel\na\t1\nb\t1\n")
    with pytest.raises(TaskDataError, match="only one label"):
        tasks.load_user_files("t", FileTaskOptions(), path)


# --------------------------------------------------------------------- features

CLS, SEP = 101, 102


def test_pair_truncation_longer_side_first():
    a, b = [1, 2, 3, 4, 5], [6, 7, 8]
    # Budget 8 - 3 = 5: a loses 5 then 4 (3 vs 3), the tie takes from b.
    ids, segments = features.build_inputs(a, b, 8, CLS, SEP)
    assert ids == [CLS, 1, 2, 3, SEP, 6, 7, SEP]
    assert segments == [0, 0, 0, 0, 0, 1, 1, 1]
    assert a == [1, 2, 3, 4, 5]  # the caller's lists are untouched


def test_single_text_truncation():
    ids, segments = features.build_inputs([1, 2, 3, 4], None, 4, CLS, SEP)
    assert ids == [CLS, 1, 2, SEP] and segments == [0, 0, 0, 0]


def test_encode_with_real_tokenizer_and_padded_batches(tmp_path):
    from finetuning_support import write_vocab

    from electra_tf.tokenization import WordPieceTokenizer

    tokenizer = WordPieceTokenizer(write_vocab(str(tmp_path / "vocab.txt")))
    encoded = features.encode(tokenizer, ["Good movie", "the plot"], ["bad", ""], 16)
    # Vocabulary ids: [CLS]=2 [SEP]=3 movie=5 plot=7 the=8 good=17 bad=18.
    assert encoded[0] == ([2, 17, 5, 3, 18, 3], [0, 0, 0, 0, 1, 1])
    assert encoded[1] == ([2, 8, 7, 3, 3], [0, 0, 0, 0, 1])
    batches = list(features.make_dataset(encoded, np.array([1, 0]), batch_size=2))
    inputs, labels = batches[0]
    assert inputs["input_ids"].numpy().tolist() == [[2, 17, 5, 3, 18, 3], [2, 8, 7, 3, 3, 0]]
    assert inputs["input_mask"].numpy().tolist() == [[1] * 6, [1] * 5 + [0]]
    assert inputs["segment_ids"].numpy().tolist() == [[0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 1, 0]]
    assert labels.numpy().tolist() == [1, 0]


def test_a_sample_of_a_split_is_fixed_aligned_and_in_order():
    texts = [f"text {i}" for i in range(100)]
    split = tasks.Split(
        "train",
        "memory",
        texts,
        [f"pair {i}" for i in range(100)],
        np.arange(100) % 3,
        [str(i) for i in range(100)],
    )
    first, again = split.sample(10), split.sample(10)
    assert first.texts_a == again.texts_a  # the same draw every time
    assert len(first) == 10 and len(set(first.texts_a)) == 10
    numbers = [int(t.split()[1]) for t in first.texts_a]
    assert numbers == sorted(numbers)  # original order kept
    assert first.texts_b == [f"pair {i}" for i in numbers]
    assert first.labels.tolist() == [i % 3 for i in numbers]
    assert first.indices == [str(i) for i in numbers]
    assert split.sample(10, seed=1).texts_a != first.texts_a
    assert split.sample(500) is split  # asking for more keeps everything


def test_multi_class_user_tasks_report_macro_f1_and_regression_labels_scale(tmp_path):
    train = tmp_path / "train.tsv"
    train.write_text("text\tlabel\na\thate\nb\toffensive\nc\tnone\n", encoding="utf-8")
    task, _ = tasks.load_user_files("hate", tasks.FileTaskOptions(), str(train))
    assert task.metrics == ("accuracy", "macro_f1")
    sts = tmp_path / "sts.tsv"
    sts.write_text("text\tpair\tlabel\na\tb\t4.5\nc\td\t0.0\n", encoding="utf-8")
    options = tasks.FileTaskOptions(
        text_pair_column="pair", task_type="regression", label_scale=5.0
    )
    task, data = tasks.load_user_files("korsts", options, str(sts))
    assert task.label_scale == 5.0 and list(data.train.labels) == [4.5, 0.0]
    with pytest.raises(tasks.TaskDataError, match="--label_scale=5.0 scales regression"):
        tasks.load_user_files("x", tasks.FileTaskOptions(label_scale=5.0), str(train))
    with pytest.raises(tasks.TaskDataError, match="--label_scale=0.0: must be > 0"):
        tasks.load_user_files("x", dataclasses.replace(options, label_scale=0.0), str(sts))
