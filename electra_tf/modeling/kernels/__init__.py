"""The two kernel sets of the model, and which one runs.

`reference` writes the bias add, GELU, attention, dropout masks and the
masked-LM loss, accuracy and sampler with standard TensorFlow ops and
automatic differentiation, as the paper reads. `cpu_fast` computes the same
things with hand-written gradients and layouts measured faster under XLA on
a CPU. Neither owns variables, so weights, checkpoints and saved models are
the same whichever set ran, and a model trained with one runs with the other.

The layers and the objective ask `active()` for the set when they are traced:
choose it before building and compiling a model, with `set_kernels(name)`
for a whole run or `with use(name):` for a block. Exports trace with
`reference`, so a SavedModel is plain TensorFlow on any hardware.

    kernels.set_kernels("auto")       # cpu_fast on a CPU, reference on a GPU/TPU
    with kernels.use("reference"):
        model.export(...)
"""

from __future__ import annotations

import contextlib
from types import ModuleType

import tensorflow as tf

from electra_tf.modeling.kernels import cpu_fast, reference

NAMES = ("reference", "cpu_fast")
CHOICES = ("auto",) + NAMES
_SETS = {"reference": reference, "cpu_fast": cpu_fast}

# The current choice; "auto" is resolved when a set is asked for, after
# TensorFlow has initialised its devices.
_choice = "auto"


def _check(name: str) -> None:
    if name not in CHOICES:
        raise ValueError(f"kernels={name!r}: choose one of {', '.join(CHOICES)}.")


def resolve(name: str) -> str:
    """The kernel set `name` stands for: `auto` is cpu_fast without a GPU/TPU, else reference.

    Raises:
        ValueError: `name` is not one of `CHOICES`.
    """
    _check(name)
    if name != "auto":
        return name
    accelerators = tf.config.list_logical_devices("GPU") + tf.config.list_logical_devices("TPU")
    return "reference" if accelerators else "cpu_fast"


def set_kernels(name: str) -> None:
    """Makes `name` (one of `CHOICES`) the kernel set of everything traced from now on.

    Raises:
        ValueError: `name` is not one of `CHOICES`.
    """
    global _choice
    _check(name)
    _choice = name


@contextlib.contextmanager
def use(name: str):
    """Traces the block with the kernel set `name`, then restores the previous choice."""
    global _choice
    previous = _choice
    set_kernels(name)
    try:
        yield
    finally:
        _choice = previous


def active_name() -> str:
    """The name of the kernel set in use: "reference" or "cpu_fast"."""
    return resolve(_choice)


def active() -> ModuleType:
    """The kernel set in use: the `reference` or `cpu_fast` module."""
    return _SETS[active_name()]
