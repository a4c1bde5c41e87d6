"""The dependency-parsing kind: its flags, its files, its scores and predictions in a trial."""

import pytest
from dependency_parsing_support import write_klue_dp
from finetuning_support import write_vocab

from electra_tf.errors import RunError
from electra_tf.finetuning import kinds
from electra_tf.finetuning.dependency_parsing.data import DependencyDataError, read_parsed_file
from electra_tf.finetuning.dependency_parsing.task import DependencyParsingTask
from electra_tf.finetuning.kind.contract import TaskOptions
from electra_tf.finetuning.kind.files import FileTaskOptions
from electra_tf.finetuning.kind.settings import FinetuneOptions
from electra_tf.tokenization import WordPieceTokenizer

SENTENCES = [
    [("the", 3, "NP_SBJ"), ("movie", 3, "NP_OBJ"), ("was", 0, "VP")],
    [("a", 2, "NP_SBJ"), ("film", 0, "VP")],
]


def options(run, given=(), **files):
    return TaskOptions(
        FinetuneOptions(**run),
        FileTaskOptions(task_type="dependency_parsing", **files),
        given=frozenset(given),
        print_fn=lambda _: None,
    )


@pytest.fixture
def files(tmp_path):
    train = write_klue_dp(tmp_path / "train.tsv", SENTENCES)
    test = tmp_path / "test.tsv"
    test.write_text("## t\ta b\n1\tthe\tthe\tMM\n2\tfilm\tfilm\tNNG\n", encoding="utf-8")
    return {"train_file": train, "dev_file": train, "test_file": str(test)}


def test_the_command_line_gives_a_task_of_klue_dp_files(files):
    task = kinds.task_from_options(options(files))
    assert isinstance(task, DependencyParsingTask)
    assert task.name == "dependency_parsing" and task.primary_metric == "las_macro_f1"
    assert task.data.dev.heads == [[3, 3, 0], [2, 0]]
    assert task.data.test.heads == [[-1, -1]]  # a test file may hold no heads
    assert task.describe()["task_type"] == "dependency_parsing"
    assert task.settings() == {"max_seq_length": 128} and task.default_epochs == 10.0


def test_flags_that_do_not_apply_are_refused(files):
    cases = [
        ({"train_file": None}, (), {}, "needs --train_file"),
        ({"task_head": "transformers"}, ("task_head",), {}, "--task_head=transformers: a"),
        ({}, ("tag_format",), {}, "--tag_format is not used with --task_type=dependency"),
        ({}, (), {"labels": ["NP"]}, "--labels is not used with --task_type=dependency"),
        ({}, (), {"index_column": "id"}, "--index_column is not used"),
        ({"max_train_examples": 0}, (), {}, "--max_train_examples=0: must be a positive"),
    ]
    for run, given, file_options, message in cases:
        with pytest.raises(RunError, match=message):
            kinds.task_from_options(options({**files, **run}, given, **file_options))
    with pytest.raises(DependencyDataError, match="line 2: a word line of 4"):
        kinds.task_from_options(options({**files, "dev_file": files["test_file"]}))


def test_a_trial_scores_the_dev_file_and_writes_both_prediction_files(files, tmp_path):
    task = kinds.task_from_options(options(files))
    vocab = write_vocab(
        str(tmp_path / "vocab.txt"),
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "movie", "was", "a", "film"],
    )
    counts = task.prepare(WordPieceTokenizer(vocab))
    assert counts == {"num_train_sentences": 2, "num_train_words": 5}
    inputs, labels = next(iter(task.train_dataset(batch_size=2, seed=0, by_length=False)))
    assert inputs["word_starts"].shape == (2, 3) and labels["heads"].shape == (2, 3)

    def every_word_is_the_root_s_vp(inputs, training=False):
        import tensorflow as tf

        starts = tf.convert_to_tensor(inputs["word_starts"])
        return {"heads": tf.zeros_like(starts), "label_ids": tf.fill(tf.shape(starts), 2)}

    class Trial:
        def file(self, name):
            return str(tmp_path / name)

    scores, written = task.evaluate(every_word_is_the_root_s_vp, 4, Trial())
    # Gold heads 3 3 0 2 0, predicted 0 0 0 0 0. UAS classes 0 (2 TP, 3 FP: F1 4/7), 2, 3
    # (F1 0). LAS: gold NP_SBJ NP_OBJ VP NP_SBJ VP; predicted wrong-head x3, VP, VP: VP
    # has F1 1, NP_SBJ, NP_OBJ and wrong-head 0.
    assert scores == pytest.approx(
        {
            "uas_macro_f1": 4 / 21,
            "uas_micro_f1": 2 / 5,
            "las_macro_f1": 1 / 4,
            "las_micro_f1": 2 / 5,
        }
    )
    assert written == {
        "dev": str(tmp_path / "dev_predictions.tsv"),
        "test": str(tmp_path / "test_predictions.tsv"),
    }
    assert read_parsed_file(written["dev"], "dev").labels == [["VP"] * 3, ["VP"] * 2]
    test = read_parsed_file(written["test"], "test")
    assert test.words == [["the", "film"]] and test.heads == [[0, 0]]
    # Every epoch's evaluation (no trial) scores the dev file and writes nothing.
    assert task.evaluate(every_word_is_the_root_s_vp, 4) == (scores, {})
