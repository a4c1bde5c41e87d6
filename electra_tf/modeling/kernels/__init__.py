"""The two kernel sets of the model, and how a model picks one.

`reference` writes the dense layers, attention, dropout masks and the
masked-LM loss, accuracy and sampler with Keras layers, standard TensorFlow
ops and automatic differentiation, as the paper reads. `cpu_fast` computes
the same things with hand-written gradients and layouts measured faster
under XLA on a CPU. Neither owns variables, so weights, checkpoints and
saved models are the same whichever set ran, and a model trained with one
runs with the other.

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

import tensorflow as tf

from electra_tf.config import KERNELS
from electra_tf.modeling.kernels import cpu_fast, reference

# Name -> the module holding that set's functions (the same names and signatures in each).
KERNEL_SETS: dict[str, ModuleType] = {"reference": reference, "cpu_fast": cpu_fast}


def resolve_kernels(name: str) -> str:
    """The kernel set `name` (one of `config.KERNELS`) stands for: a key of `KERNEL_SETS`.

    `auto` is cpu_fast when TensorFlow sees no GPU or TPU, else reference;
    ask after TensorFlow has initialised its devices (as building a model does).

    Raises:
        ValueError: `name` is not one of `config.KERNELS`.
    """
    if name not in KERNELS:
        raise ValueError(f"kernels={name!r}: choose one of {', '.join(KERNELS)}.")
    if name != "auto":
        return name
    accelerators = tf.config.list_logical_devices("GPU") + tf.config.list_logical_devices("TPU")
    return "reference" if accelerators else "cpu_fast"
