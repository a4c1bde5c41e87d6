"""Saving and loading a fine-tuned model (classifier, question answering, tagger), in one format.

`save_finetuned` writes the model's Keras config with what its text path
needs (`model.json`) and its float32 weights (`model.weights.h5`); see
`electra_tf.artifacts.finetuning_dir`. `load_finetuned` rebuilds the model
from the config and loads the weights, for any task, including models
saved in the formats used before.
"""

from __future__ import annotations

import os
from typing import Optional

import keras

from electra_tf.artifacts.export_dir import float32_copy
from electra_tf.artifacts.files import atomic_open, copy_file
from electra_tf.artifacts.finetuning_dir import SavedModelDir, load_saved_model, write_description
from electra_tf.finetuning.kinds import kind_of
from electra_tf.keras_compat import weights_h5


def save_finetuned(
    model: keras.Model, directory: str, info: dict, vocab_file: Optional[str] = None
) -> str:
    """Writes `model` (as float32, without optimizer state) into `directory`.

    Args:
        model: a fine-tuned model of any task kind (any dtype policy).
        directory: a trial directory, or `assets.extra/` of a serving version.
        info: its task kind's name (`kind`) and what the text path needs (its
            task's `model_info()` and `TextPath`).
        vocab_file: a vocabulary to copy beside the model (None: none).

    Returns:
        The path of the model's description file.
    """
    saved = SavedModelDir(directory)
    os.makedirs(directory, exist_ok=True)
    copy = float32_copy(model)
    # Built in memory and written by Python: a full disk fails the write
    # cleanly (OSError, no file left), which HDF5 writing to a file does not.
    with atomic_open(saved.weights_file, "wb") as f:
        f.write(weights_h5(copy).getbuffer())
    write_description(saved, keras.saving.serialize_keras_object(copy), info)
    if vocab_file is not None:
        copy_file(vocab_file, saved.vocab_file)
    return saved.description_file


def load_finetuned(directory: str) -> tuple[keras.Model, dict]:
    """The model saved in `directory` and what its text path needs, with its `kind`.

    Raises:
        FileNotFoundError: no fine-tuned model is saved there.
    """
    model, info = load_saved_model(directory)
    # A model's kind is its class's: models saved before model.json recorded a
    # kind, or that recorded a name the kind had then ("classifier"), get today's.
    return model, {**info, "kind": kind_of(model).KIND}
