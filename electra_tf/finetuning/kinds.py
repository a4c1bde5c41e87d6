"""The kinds of fine-tuning task: the one list every command, export and check looks in.

A kind is a `TaskKind` subclass in its own package, built only on the floor
below every kind (`electra_tf.finetuning.kind`). Adding one means writing that
package and adding its class to `TASK_KINDS`: its `--task_type` values, flags
(`OPTIONS`), data errors, serving signatures, `predict` requests
(`REQUEST_FIELDS`), export check and suite records come with it.

The kinds' task types are the one vocabulary of kinds: the `--task_type`
values, the `kind` of `model.json` and `serving_config.json` (a kind's first
task type), and the kind of a suite's task.
"""

from __future__ import annotations

from electra_tf.errors import RunError
from electra_tf.finetuning.classification.task import ClassificationTask
from electra_tf.finetuning.dependency_parsing.task import DependencyParsingTask
from electra_tf.finetuning.kind.contract import TaskKind, TaskOptions
from electra_tf.finetuning.multiple_choice.task import MultipleChoiceTask
from electra_tf.finetuning.question_answering.task import SquadTask
from electra_tf.finetuning.tagging.task import TaggingTask

TASK_KINDS: tuple[type[TaskKind], ...] = (
    ClassificationTask,
    SquadTask,
    TaggingTask,
    MultipleChoiceTask,
    DependencyParsingTask,
)

# Every `--task_type` (and suite task kind), each claimed by one kind.
TASK_TYPES: tuple[str, ...] = tuple(t for kind in TASK_KINDS for t in kind.TASK_TYPES)


def kind_for_type(task_type: str, where: str = "--task_type") -> type[TaskKind]:
    """The kind that claims `task_type`.

    Raises:
        RunError: none does, naming `where` the type was read and the choices.
    """
    for kind in TASK_KINDS:
        if task_type in kind.TASK_TYPES:
            return kind
    raise RunError(f"{where}={task_type!r}: choose one of {', '.join(TASK_TYPES)}.")


def kind_named(name: str, where: str = "the model") -> type[TaskKind]:
    """The kind whose `KIND` is `name` (as `model.json` and `serving_config.json` record it).

    The names earlier versions wrote (`FORMER_KINDS`) are recognised too.

    Raises:
        RunError: no kind has that name, naming `where` it was read.
    """
    for kind in TASK_KINDS:
        if name == kind.KIND or name in kind.FORMER_KINDS:
            return kind
    raise RunError(
        f"{where}: unknown model kind {name!r}; this version knows "
        f"{', '.join(k.KIND for k in TASK_KINDS)}."
    )


def kind_of(model) -> type[TaskKind]:
    """The kind of a fine-tuned Keras model (by its class).

    Raises:
        RunError: the model is of no kind's class.
    """
    for kind in TASK_KINDS:
        if isinstance(model, kind.MODEL_CLASS):
            return kind
    raise RunError(f"{type(model).__name__} is not a fine-tuned model of any task kind.")


def kind_for_options(options: TaskOptions) -> type[TaskKind]:
    """The kind the fine-tuning command line asks for.

    The one whose `selected_by` claims it (`--task=squad`), else the one whose
    task types hold `--task_type`.
    """
    claimed = next((k for k in TASK_KINDS if k.selected_by(options)), None)
    return claimed or kind_for_type(options.files.task_type)


def task_from_options(options: TaskOptions) -> TaskKind:
    """The task the fine-tuning command line describes, its data read."""
    return kind_for_options(options).from_options(options)
