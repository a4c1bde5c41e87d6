"""The kinds of fine-tuning task: the one list every command, export and check looks in.

A kind is a `TaskKind` subclass in its own package. Adding one (say,
multiple choice) means writing that package and adding its class here.
"""

from __future__ import annotations

from electra_tf.errors import RunError
from electra_tf.finetuning.classification.task import ClassificationTask
from electra_tf.finetuning.question_answering.task import SquadTask
from electra_tf.finetuning.tagging.task import TaggingTask
from electra_tf.finetuning.task_kind import TaskKind, TaskOptions

# In the order the command line is matched against (`selected_by`): the
# first kind that claims it; classification takes whatever is left.
TASK_KINDS: tuple[type[TaskKind], ...] = (SquadTask, TaggingTask, ClassificationTask)


def kind_named(name: str, where: str = "the model") -> type[TaskKind]:
    """The kind whose `KIND` is `name` (as `model.json` and `serving_config.json` record it).

    Raises:
        RunError: no kind has that name, naming `where` it was read.
    """
    for kind in TASK_KINDS:
        if kind.KIND == name:
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


def task_from_options(options: TaskOptions) -> TaskKind:
    """The task the fine-tuning command line describes, its data read."""
    kind = next(k for k in TASK_KINDS if k.selected_by(options))
    return kind.from_options(options)
