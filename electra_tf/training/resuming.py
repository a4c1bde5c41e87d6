"""Resuming from the newest checkpoint that is complete, readable and finite.

A run directory that holds checkpoints never silently starts again from
step 0: a checkpoint that lost a file, was truncated, changed on disk or
holds NaN is named in one line and set aside (kept, see
`artifacts.checkpoint_dir`), and the run resumes from the newest one that
is whole. When none is, the run stops and says so; starting again from step
0 is then the user's explicit choice (`restart`).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, Optional

import tensorflow as tf

from electra_tf.artifacts import checkpoint_dir
from electra_tf.artifacts.checkpoint_dir import CheckpointFiles
from electra_tf.distribute import (
    check_same_on_all_workers,
    in_multi_worker_mode,
    is_chief,
    true_on_all_workers,
)
from electra_tf.errors import RunError


@dataclasses.dataclass
class Resumption:
    """What `restore_newest_usable` found.

    Attributes:
        restored: the checkpoint the variables now hold (None: none, start at 0).
        skipped: (checkpoint, why) of each newer checkpoint passed over.
        usable: every checkpoint that was checked and found whole (the
            restored one and, when `check_all`, the older ones).
    """

    restored: Optional[CheckpointFiles]
    skipped: list[tuple[CheckpointFiles, str]]
    usable: list[CheckpointFiles]


def restore_newest_usable(
    checkpoint: tf.train.Checkpoint, directory: str, restart_flag: str = "--restart"
) -> Resumption:
    """Restores the newest whole checkpoint of `directory` into `checkpoint`'s objects.

    Only a checkpoint that `checkpoint_dir.checkpoint_problem` passes (every
    tensor read and finite) is restored, so a damaged one never leaves the
    variables half-restored.

    Args:
        checkpoint: the `tf.train.Checkpoint` of the model and optimizer.
        directory: the checkpoint directory.
        restart_flag: what the user passes to start again from step 0 (messages).

    Raises:
        RunError: there are checkpoints but none is usable (each is named);
            nothing is changed on disk.
    """
    found = checkpoint_dir.list_checkpoints(directory)
    skipped = []
    for candidate in found:
        problem = checkpoint_dir.checkpoint_problem(candidate)
        if problem is not None:
            skipped.append((candidate, problem))
            continue
        checkpoint.restore(candidate.prefix).assert_existing_objects_matched()
        older = [c for c in found if c.step < candidate.step and c.missing is None]
        return Resumption(candidate, skipped, [candidate, *older])
    if found:
        raise RunError(
            f"{directory} holds checkpoints but none can be resumed from ("
            + "; ".join(f"{c.name}: {why}" for c, why in skipped)
            + f"). Nothing was changed; pass {restart_flag} to start again from step 0 "
            "(the checkpoints are then moved aside, not deleted)."
        )
    return Resumption(None, [], [])


def tidy_after_resuming(
    directory: str, resumption: Resumption, print_fn: Callable[[str], None] = print
) -> None:
    """Sets aside the skipped checkpoints, removes unfinished saves, rewrites the state file.

    Call on the process that writes the checkpoints (the chief), once every
    process has restored. Each skipped checkpoint and a damaged state file
    get one line.
    """
    state = checkpoint_dir.state_problem(directory)
    kept = checkpoint_dir.set_aside([c for c, _ in resumption.skipped])
    for skipped, why in resumption.skipped:
        print_fn(
            f"Checkpoint {skipped.prefix} is damaged ({why}): skipped; its files are kept "
            f"in {kept}."
        )
    for name in checkpoint_dir.remove_temporary(directory):
        print_fn(f"Removed {os.path.join(directory, name)}, left by a save that did not finish.")
    if state is not None:
        print_fn(f"{state}: rewritten from the checkpoint files.")
    if resumption.restored is not None or state is not None or resumption.skipped:
        checkpoint_dir.write_state(directory, resumption.usable)


def restart(directory: str, print_fn: Callable[[str], None] = print) -> None:
    """Moves the checkpoint directory aside so that training starts again from step 0.

    The user asked for it (`--restart`); one line says where the old
    checkpoints went.
    """
    if not checkpoint_dir.list_checkpoints(directory):
        return
    kept = checkpoint_dir.move_directory_aside(directory, "before-restart")
    print_fn(
        f"Warning: --restart: training starts again from step 0; the previous checkpoints "
        f"are kept in {kept}."
    )


def restart_on_all_workers(
    directory: str, strategy: tf.distribute.Strategy, print_fn: Callable[[str], None] = print
) -> None:
    """`restart` on the chief; every other worker waits until it has moved the checkpoints."""
    if is_chief(strategy):
        restart(directory, print_fn)
    if in_multi_worker_mode(strategy):
        true_on_all_workers(strategy, True)


def settle_resumption(
    directory: str,
    resumption: Resumption,
    strategy: tf.distribute.Strategy,
    agreed: dict,
    print_fn: Callable[[str], None] = print,
) -> None:
    """Once every worker has restored: they agree on `agreed`, then the chief tidies.

    Args:
        directory: the checkpoint directory restored from.
        resumption: what `restore_newest_usable` found there.
        strategy: the run's strategy.
        agreed: {what, named for the user: an integer every worker must hold}
            (the step resumed from, a fingerprint); checked only with several workers.
        print_fn: where the chief's lines go.
    """
    if in_multi_worker_mode(strategy):
        check_same_on_all_workers(strategy, agreed)
    if is_chief(strategy):  # every worker has restored: the damaged checkpoints can move aside
        tidy_after_resuming(directory, resumption, print_fn)
