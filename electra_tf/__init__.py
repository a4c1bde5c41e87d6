"""electra-tf: ELECTRA pre-training, fine-tuning and serving in TensorFlow 2 / Keras 3.

Importing the package registers its Keras classes, so that a saved model
loads without importing the module that defines it:

    import electra_tf, keras
    discriminator = keras.saving.load_model("runs/x/export/discriminator.keras")
"""

# Registration happens when the classes are defined: the models (with their
# layers, heads and encoder), the fine-tuned models and the optimizers. That
# is the only thing importing the package does.
from electra_tf import optimization as _optimization  # noqa: F401
from electra_tf.finetuning import kinds as _kinds  # noqa: F401  (every kind's model)
from electra_tf.modeling import electra as _electra  # noqa: F401

__version__ = "0.10.0"
