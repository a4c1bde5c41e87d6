"""The task kind: selection, flags, accuracy and the dev predictions TSV."""

import os

import numpy as np
import pytest
from finetuning_support import make_pretrained_dir
from mc_support import write_c3

from electra_tf.errors import RunError
from electra_tf.finetuning import kinds
from electra_tf.finetuning.kind.contract import TaskOptions
from electra_tf.finetuning.kind.files import FileTaskOptions
from electra_tf.finetuning.kind.settings import FinetuneOptions
from electra_tf.finetuning.multiple_choice.task import MultipleChoiceTask


def options(given=(), **run):
    return TaskOptions(
        FinetuneOptions(**run),
        FileTaskOptions(task_type="multiple_choice"),
        given=frozenset(given),
        print_fn=lambda _: None,
    )


@pytest.fixture()
def files(tmp_path):
    return write_c3(tmp_path / "train.json"), write_c3(tmp_path / "dev.json")


def test_task_type_multiple_choice_selects_the_kind(files):
    train, dev = files
    task = kinds.task_from_options(options(task="c3", train_file=train, dev_file=dev))
    assert isinstance(task, MultipleChoiceTask)
    assert task.max_seq_length == 512 and task.primary_metric == "accuracy"
    assert task.describe()["task_type"] == "multiple_choice" and task.name == "c3"
    assert kinds.kind_named("multiple_choice") is MultipleChoiceTask
    assert MultipleChoiceTask.REQUEST_FIELDS == ("question", "context", "options")


def test_flags_that_do_not_apply_are_refused(files):
    train, _ = files
    with pytest.raises(RunError, match="needs --train_file"):
        MultipleChoiceTask.from_options(options())
    with pytest.raises(RunError, match="--data_dir is not used"):
        MultipleChoiceTask.from_options(options(train_file=train, data_dir="glue"))
    with pytest.raises(RunError, match="one head"):
        MultipleChoiceTask.from_options(
            options({"task_head"}, train_file=train, task_head="transformers")
        )


class ChoosingModel:
    """Stands in for a model: `predict` gives logits that pick `choices`."""

    def __init__(self, choices, num_options):
        self.logits = np.full((len(choices), num_options), -1.0, np.float32)
        self.logits[np.arange(len(choices)), choices] = 1.0

    def predict(self, dataset, verbose=0):
        assert sum(len(batch["input_ids"]) for batch in dataset) == len(self.logits)
        return self.logits


def test_accuracy_and_the_dev_predictions_tsv(files, tmp_path):
    from electra_tf.artifacts.finetuning_dir import TrialDir
    from electra_tf.tokenization import TextPath

    train, dev = files
    task = MultipleChoiceTask.from_options(
        options(train_file=train, dev_file=dev, test_file=dev, max_seq_length=16)
    )
    pretrained = make_pretrained_dir(str(tmp_path / "pretrained"))
    tokenizer = TextPath(True, True, "bert", 16).tokenizer(os.path.join(pretrained, "vocab.txt"))
    assert task.prepare(tokenizer) == {"num_train_questions": 3}
    os.makedirs(tmp_path / "trial")
    trial = TrialDir(str(tmp_path / "trial"))
    # Gold answers are options 0, 0, 0: two of three right.
    scores, written = task.evaluate(ChoosingModel([0, 1, 0], 4), 2, trial)
    assert scores == {"accuracy": pytest.approx(2 / 3)}
    assert set(written) == {"dev_predictions.tsv", "test_predictions.tsv"}
    with open(written["dev_predictions.tsv"], encoding="utf-8") as f:
        assert f.read().splitlines() == [
            "index\tgold\tprediction",
            "12-34-0\tthe movie\tthe movie",
            "12-34-1\tthe plot\tthe film",
            "m5-6-0\tyes\tyes",
        ]
    with open(written["test_predictions.tsv"], encoding="utf-8") as f:
        assert f.read().splitlines()[:2] == ["index\tprediction", "12-34-0\tthe movie"]
