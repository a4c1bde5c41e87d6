"""One process at a time in a run's or fine-tuning's output directory, on every worker.

The chief takes the directory's lock (`electra_tf.artifacts.run_lock`); the
other workers learn whether it could, so that all of them stop together
instead of waiting for it in the collectives.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator, Optional

import tensorflow as tf

from electra_tf.artifacts.run_lock import RunLock, RunLocked
from electra_tf.distribute import in_multi_worker_mode, is_chief, true_on_all_workers
from electra_tf.errors import RunError


def hold_run_dir(
    run_dir: str, strategy: tf.distribute.Strategy, print_fn: Callable[[str], None] = print
) -> Optional[RunLock]:
    """Takes the run directory's lock on the chief (None on the other workers).

    The other workers stop with the chief when it cannot take it, instead of
    waiting for it in the collectives; every worker calls this.

    Raises:
        RunLocked: another live process holds it.
        RunError: the lock file cannot be written (a full disk).
    """
    lock, refused = None, None
    if is_chief(strategy):
        try:
            lock = RunLock(run_dir, print_fn).acquire()
        except RunError as error:
            refused = error
    if in_multi_worker_mode(strategy) and not true_on_all_workers(strategy, refused is None):
        refused = refused or RunLocked(
            f"The chief could not lock --output_dir={run_dir} (see its message)."
        )
    if refused is not None:
        raise refused
    return lock


@contextlib.contextmanager
def holding_run_dir(
    run_dir: str, strategy: tf.distribute.Strategy, print_fn: Callable[[str], None] = print
) -> Iterator[None]:
    """`hold_run_dir` for the length of a `with` block; the lock is released after it.

    Raises:
        RunLocked, RunError: as `hold_run_dir`, before the block runs.
    """
    lock = hold_run_dir(run_dir, strategy, print_fn)
    try:
        yield
    finally:
        if lock is not None:
            lock.release()
