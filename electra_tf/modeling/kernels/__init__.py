"""The two kernel sets of the model, and how a model picks one.

`reference` writes the dense layers, attention, dropout masks and the
masked-LM loss, accuracy and sampler with Keras layers, `keras.ops` and
automatic differentiation, as the paper reads; it runs on every Keras
backend (TensorFlow, JAX, ...). `cpu_fast` computes the same things in
TensorFlow with hand-written gradients and layouts measured faster under XLA
on a CPU; it exists on the TensorFlow backend only. Neither owns variables,
so weights, checkpoints and saved models are the same whichever set ran, and
a model trained with one runs with the other.

A model is built with its set, as transformers builds a model with its
attention implementation: the layers, heads and encoders take
`kernels="reference"` (the default) or `"cpu_fast"`, keep the name, and
look their functions up in `KERNEL_SETS` when they are traced. Two models
with different sets can live in one process. The choice is not part of a
model's config, so a saved model loads with the reference kernels and an
export is plain TensorFlow on any hardware.

    encoder = ElectraEncoder(..., kernels="cpu_fast")
    KERNEL_SETS[encoder.kernels].scaled_dot_product_attention(...)
"""

from __future__ import annotations

from types import ModuleType

import keras

from electra_tf.config import KERNELS
from electra_tf.modeling.kernels import reference

# The sets that are written in TensorFlow, and so exist on that backend only.
TENSORFLOW_ONLY = ("cpu_fast",)


def _kernel_sets() -> dict[str, ModuleType]:
    sets = {"reference": reference}
    if keras.backend.backend() == "tensorflow":
        from electra_tf.modeling.kernels import cpu_fast

        sets["cpu_fast"] = cpu_fast
    return sets


# Name -> the module holding that set's functions (the same names and signatures in each):
# the sets of this process's Keras backend.
KERNEL_SETS: dict[str, ModuleType] = _kernel_sets()


def resolve_kernels(name: str) -> str:
    """The kernel set `name` (one of `config.KERNELS`) stands for: a key of `KERNEL_SETS`.

    `auto` is cpu_fast on the TensorFlow backend when TensorFlow sees no GPU
    or TPU, else reference (on every other backend too); ask after TensorFlow
    has initialised its devices (as building a model does).

    Raises:
        ValueError: `name` is not one of `config.KERNELS`, or names a
            TensorFlow-only set on another Keras backend.
    """
    if name not in KERNELS:
        raise ValueError(f"kernels={name!r}: choose one of {', '.join(KERNELS)}.")
    backend = keras.backend.backend()
    if name in TENSORFLOW_ONLY and backend != "tensorflow":
        raise ValueError(
            f"kernels={name!r} is written in TensorFlow and runs on the tensorflow Keras "
            f"backend only, not {backend!r}: use kernels='reference' (or 'auto')."
        )
    if name != "auto":
        return name
    if backend != "tensorflow":
        return "reference"
    import tensorflow as tf

    accelerators = tf.config.list_logical_devices("GPU") + tf.config.list_logical_devices("TPU")
    return "reference" if accelerators else "cpu_fast"
