"""The task-kind contract: which kind the command line selects, and the registry's look-ups."""

import os

import pytest
from finetuning_support import make_pretrained_dir

from electra_tf.errors import RunError
from electra_tf.finetuning import kinds
from electra_tf.finetuning.classification.task import ClassificationTask
from electra_tf.finetuning.kind.contract import TaskKind, TaskOptions
from electra_tf.finetuning.kind.files import FileTaskOptions, TaskDataError
from electra_tf.finetuning.kind.settings import FinetuneOptions
from electra_tf.finetuning.question_answering.task import SquadTask
from electra_tf.finetuning.tagging.data import TaggingFileOptions
from electra_tf.finetuning.tagging.task import TaggingTask


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


def test_each_kind_is_selected_by_its_task_type_or_its_own_flags():
    selected = kinds.kind_for_options

    assert selected(options({"task": "squad"})) is SquadTask
    # --task=squad wins over --task_type=tagging, as it always did.
    assert selected(options({"task": "squad"}, {"task_type": "tagging"})) is SquadTask
    assert selected(options({"task": "ner"}, {"task_type": "tagging"})) is TaggingTask
    assert selected(options({"task": "sst2"})) is ClassificationTask
    assert selected(options({}, {"task_type": "regression"})) is ClassificationTask
    assert selected(options({}, {"task_type": "question_answering"})) is SquadTask
    with pytest.raises(RunError, match="--task_type='ranking': choose one of classification, "):
        selected(options({}, {"task_type": "ranking"}))


def test_the_registry_names_every_kind_once_and_knows_their_models():
    names = [k.KIND for k in kinds.TASK_KINDS]
    assert {"classification", "question_answering", "tagging"} <= set(names)
    assert len(set(names)) == len(names)
    # One vocabulary: a kind's name is its first task type; each task type has one kind.
    assert all(k.KIND == k.TASK_TYPES[0] for k in kinds.TASK_KINDS)
    assert len(set(kinds.TASK_TYPES)) == len(kinds.TASK_TYPES)
    assert all(issubclass(k, TaskKind) for k in kinds.TASK_KINDS)
    for kind in kinds.TASK_KINDS:
        assert kinds.kind_named(kind.KIND) is kind
        assert all(kinds.kind_for_type(t) is kind for t in kind.TASK_TYPES)
    # Models saved by earlier versions name their kind as they did then.
    assert kinds.kind_named("classifier") is ClassificationTask
    assert kinds.kind_named("tagger") is TaggingTask
    with pytest.raises(RunError, match="unknown model kind 'ranker'.*classification"):
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
