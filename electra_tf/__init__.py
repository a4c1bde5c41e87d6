"""electra-tf: ELECTRA pre-training, fine-tuning and serving in TensorFlow 2 / Keras 3.

Importing the package loads nothing else (no TensorFlow, no Keras): every
command and module imports what it uses. A saved model loads with its
classes registered through `load_model`:

    import electra_tf
    discriminator = electra_tf.load_model("runs/x/export/discriminator.keras")

or with `keras.saving.load_model` after `electra_tf.register_keras_classes()`.
"""

__version__ = "0.11.0"


def register_keras_classes() -> None:
    """Defines, and so registers with Keras, every Keras class a saved file can name.

    The pre-training models (with their layers, heads and encoder), every task
    kind's fine-tuned model and the optimizers and schedules. Idempotent.
    """
    from electra_tf import optimization  # noqa: F401
    from electra_tf.finetuning import kinds  # noqa: F401  (every kind's model)
    from electra_tf.modeling import electra  # noqa: F401


def load_model(path: str, **kwargs):
    """`keras.saving.load_model(path, **kwargs)` with the package's classes registered."""
    register_keras_classes()
    import keras

    return keras.saving.load_model(path, **kwargs)
