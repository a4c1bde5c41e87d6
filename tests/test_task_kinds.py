"""The task-kind contract: which kind the command line selects, and the registry's look-ups."""

import os

import pytest
from finetuning_support import make_pretrained_dir

from electra_tf.errors import RunError
from electra_tf.finetuning import kinds
from electra_tf.finetuning.classification.data import FileTaskOptions, TaskDataError
from electra_tf.finetuning.classification.task import ClassificationTask
from electra_tf.finetuning.question_answering.task import SquadTask
from electra_tf.finetuning.settings import FinetuneOptions
from electra_tf.finetuning.tagging.data import TaggingFileOptions
from electra_tf.finetuning.tagging.task import TaggingTask
from electra_tf.finetuning.task_kind import TaskKind, TaskOptions


def options(run=None, files=None, **kind_options):
    return TaskOptions(
        FinetuneOptions(**(run or {})),
        FileTaskOptions(**(files or {})),
        print_fn=lambda _: None,
        kind_options={TaggingFileOptions: TaggingFileOptions(**kind_options)}
        if kind_options
        else {},
    )


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_each_kind_is_selected_by_its_own_flags_and_classification_by_the_rest():
    def selected(opts):
        return next(k for k in kinds.TASK_KINDS if k.selected_by(opts))

    assert selected(options({"task": "squad"})) is SquadTask
    # --task=squad wins over --task_type=tagging, as it always did.
    assert selected(options({"task": "squad"}, {"task_type": "tagging"})) is SquadTask
    assert selected(options({"task": "ner"}, {"task_type": "tagging"})) is TaggingTask
    assert selected(options({"task": "sst2"})) is ClassificationTask
    assert selected(options({}, {"task_type": "regression"})) is ClassificationTask


def test_the_registry_names_every_kind_once_and_knows_their_models():
    names = [k.KIND for k in kinds.TASK_KINDS]
    assert sorted(names) == ["classifier", "question_answering", "tagger"]
    assert all(issubclass(k, TaskKind) for k in kinds.TASK_KINDS)
    for kind in kinds.TASK_KINDS:
        assert kinds.kind_named(kind.KIND) is kind
    with pytest.raises(RunError, match="unknown model kind 'ranker'.*classifier"):
        kinds.kind_named("ranker", "model.json")


def test_a_model_is_of_its_class_s_kind(tmp_path):
    from electra_tf.artifacts.pretrained import load_discriminator
    from electra_tf.finetuning.classification.model import build_classifier
    from electra_tf.finetuning.tagging.model import build_tagger

    encoder = load_discriminator(make_pretrained_dir(str(tmp_path), num_layers=1)).encoder
    assert kinds.kind_of(build_classifier(encoder, 2, False, 0)) is ClassificationTask
    assert kinds.kind_of(build_tagger(encoder, 3, 0)) is TaggingTask
    with pytest.raises(RunError, match="not a fine-tuned model"):
        kinds.kind_of(encoder)


def test_flags_another_kind_uses_are_refused_naming_the_flag(tmp_path):
    train = _write(tmp_path / "train.conll", "actor B-PER\nfilm O\n\n")
    with pytest.raises(RunError, match="--double_unordered is not used with --task_type=tagging"):
        kinds.task_from_options(
            options(
                {"task": "ner", "train_file": train, "double_unordered": True},
                {"task_type": "tagging"},
            )
        )
    with pytest.raises(RunError, match="--dev_file is not used with --task=squad"):
        kinds.task_from_options(options({"task": "squad", "dev_file": train}))
    with pytest.raises(RunError, match="Give --task"):
        kinds.task_from_options(options())


def test_the_tagging_layout_flag_reaches_the_reader(tmp_path):
    """A Naver NER file (sentence per line) is read by auto-detection, and refused as CoNLL."""
    train = _write(
        tmp_path / "train.tsv",
        "김 감독은 영화를\tPER-B CVL-B O\n서울 에서\tLOC-B O\n",
    )
    run = {"task": "ner", "train_file": train}
    task = kinds.task_from_options(options(run, {"task_type": "tagging"}))
    assert isinstance(task, TaggingTask)
    assert task.data.train.sentences == [["김", "감독은", "영화를"], ["서울", "에서"]]
    assert task.definition.tag_format == "suffix"
    with pytest.raises((TaskDataError, RunError), match=os.path.basename(train)):
        kinds.task_from_options(options(run, {"task_type": "tagging"}, tagging_layout="conll"))
