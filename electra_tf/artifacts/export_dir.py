"""The export directory of a pre-trained ELECTRA: the discriminator and the generator.

Layout of `<run_dir>/export/`:

    discriminator.keras          Keras file; `keras.saving.load_model` gives an
                                 `ElectraDiscriminator` (fine-tuning uses `.encoder`)
    discriminator_savedmodel/    TF SavedModel (signature `serving_default`:
                                 input_ids / input_mask / segment_ids int32 [B, L]
                                 -> sequence_output [B, L, H], logits [B, L])
    generator.keras              the generator, for continued pre-training or inspection
                                 (absent when a discriminator alone was imported)
    vocab.txt, config.json       what is needed to tokenize and rebuild
"""

from __future__ import annotations

import os
import shutil
from typing import Optional

import keras

# Registers the custom classes so load_model finds them.
from electra_tf.modeling import electra as _electra  # noqa: F401

EXPORT_FILES = ("discriminator.keras", "discriminator_savedmodel", "generator.keras", "vocab.txt",
                "config.json")


def export_pretrained(generator: Optional[keras.Model], discriminator: keras.Model,
                      export_dir: str, vocab_file: str, config_json: str) -> str:
    """Writes the export directory atomically (a temporary sibling, then a rename).

    `generator` may be None (a discriminator imported on its own).

    Returns:
        The export directory.
    """
    parent = os.path.dirname(os.path.abspath(export_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".tmp-export-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    discriminator_file = os.path.join(tmp, "discriminator.keras")
    float32_copy(discriminator).save(discriminator_file)
    if generator is not None:
        float32_copy(generator).save(os.path.join(tmp, "generator.keras"))
    reloaded = keras.saving.load_model(discriminator_file)
    reloaded.export(os.path.join(tmp, "discriminator_savedmodel"), format="tf_saved_model",
                    verbose=False)
    shutil.copyfile(vocab_file, os.path.join(tmp, "vocab.txt"))
    shutil.copyfile(config_json, os.path.join(tmp, "config.json"))
    if os.path.exists(export_dir):
        old = f"{export_dir}.old-{os.getpid()}"
        os.replace(export_dir, old)
        os.replace(tmp, export_dir)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, export_dir)
    return export_dir


def float32_copy(model: keras.Model) -> keras.Model:
    """A float32 copy of a model (which may have trained under a mixed-precision policy).

    Exports compute and return float32 whatever precision training used, and
    hold plain (not distributed) variables.
    """
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("float32")
    try:
        copy = model.__class__.from_config(model.get_config())
    finally:
        keras.config.set_dtype_policy(previous)
    copy.set_weights(model.get_weights())
    return copy


def load_discriminator(export_dir: str) -> keras.Model:
    """Loads `discriminator.keras` from an export directory (or a run directory)."""
    path = export_dir
    if os.path.isdir(path) and os.path.exists(os.path.join(path, "export")):
        path = os.path.join(path, "export")
    if os.path.isdir(path):
        path = os.path.join(path, "discriminator.keras")
    if not os.path.exists(path):
        raise FileNotFoundError(f"No discriminator.keras at {path}: pass a pre-training run "
                                "directory, its export/ directory, or the .keras file.")
    return keras.saving.load_model(path)
