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

import dataclasses
import errno
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Optional

import keras

from electra_tf.artifacts.files import Within
from electra_tf.artifacts.run_dir import CONFIG_FILE, VOCAB_FILE
from electra_tf.finiteness import check_finite_weights

# Registers the custom classes so load_model finds them.
from electra_tf.modeling.electra import plain_discriminator

DISCRIMINATOR_FILE = "discriminator.keras"
DISCRIMINATOR_SAVEDMODEL = "discriminator_savedmodel"
GENERATOR_FILE = "generator.keras"
# How the TensorFlow process writing an export for another backend starts its error line.
_FAILED = "export failed: "


@dataclasses.dataclass(frozen=True)
class ExportDir:
    """The paths of one export directory (nothing is created or checked)."""

    path: str

    discriminator_file = Within(DISCRIMINATOR_FILE)
    discriminator_savedmodel = Within(DISCRIMINATOR_SAVEDMODEL)
    generator_file = Within(GENERATOR_FILE)
    vocab_file = Within(VOCAB_FILE)
    config_file = Within(CONFIG_FILE)

    def contents(self) -> list[str]:
        """The models present, as names to show (`discriminator_savedmodel/` for the directory)."""
        return [
            name + ("/" if os.path.isdir(os.path.join(self.path, name)) else "")
            for name in (DISCRIMINATOR_FILE, DISCRIMINATOR_SAVEDMODEL, GENERATOR_FILE)
            if os.path.exists(os.path.join(self.path, name))
        ]


def export_pretrained(
    generator: Optional[keras.Model],
    discriminator: keras.Model,
    export_dir: str,
    vocab_file: str,
    config_json: str,
) -> str:
    """Writes the export directory atomically (a temporary sibling, then a rename).

    Args:
        generator: the generator, or None (a discriminator imported on its own).
        discriminator: the discriminator.
        export_dir: the directory to (re)write, usually `RunDir.export`.
        vocab_file: the vocabulary to copy beside the models.
        config_json: the run's config.json to copy beside them.

    Returns:
        The export directory.

    Raises:
        NonFiniteError: a model's weights hold NaN or infinities (nothing is written).
        OSError: a write failed (a full disk); the temporary directory is
            removed and an earlier export left as it was.
    """
    for model in (discriminator, generator):
        if model is not None:
            check_finite_weights(model.weights, f"the {model.name} to export to {export_dir}")
    parent = os.path.dirname(os.path.abspath(export_dir))
    os.makedirs(parent, exist_ok=True)
    if keras.backend.backend() != "tensorflow":
        return _export_through_tensorflow(
            generator, discriminator, export_dir, vocab_file, config_json
        )
    tmp = ExportDir(os.path.join(parent, f".tmp-export-{os.getpid()}"))
    shutil.rmtree(tmp.path, ignore_errors=True)
    try:
        os.makedirs(tmp.path)
        # A discriminator trained with gradient-disentangled embeddings is saved
        # with the plain table E + ΔE: nothing downstream needs to know.
        float32_copy(plain_discriminator(discriminator)).save(tmp.discriminator_file)
        if generator is not None:
            float32_copy(generator).save(tmp.generator_file)
        # A loaded model runs the reference kernels (a saved model carries no
        # kernel set), so the SavedModel is plain TensorFlow for any hardware.
        reloaded = keras.saving.load_model(tmp.discriminator_file)
        reloaded.export(tmp.discriminator_savedmodel, format="tf_saved_model", verbose=False)
        shutil.copyfile(vocab_file, tmp.vocab_file)
        shutil.copyfile(config_json, tmp.config_file)
        if os.path.exists(export_dir):
            old = f"{export_dir}.old-{os.getpid()}"
            os.replace(export_dir, old)
            os.replace(tmp.path, export_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp.path, export_dir)
    finally:
        shutil.rmtree(tmp.path, ignore_errors=True)
    return export_dir


def _export_through_tensorflow(
    generator, discriminator, export_dir, vocab_file, config_json
) -> str:
    """`export_pretrained` from another backend: a TensorFlow process writes the export.

    A SavedModel is TensorFlow's own format, so the models go to that
    process as Keras files (which every backend reads), and it writes the
    same export directory a TensorFlow run writes.

    Raises:
        OSError: the TensorFlow process failed (its last line is the message).
    """
    # The package this process runs (a checkout or an installation), and no
    # accelerator for TensorFlow: the training process may still hold them.
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    env = {
        **os.environ,
        "KERAS_BACKEND": "tensorflow",
        "CUDA_VISIBLE_DEVICES": "",
        "PYTHONPATH": path,
    }
    with tempfile.TemporaryDirectory(prefix="electra-export-models-") as models:
        paths = [os.path.join(models, DISCRIMINATOR_FILE), ""]
        float32_copy(plain_discriminator(discriminator)).save(paths[0])
        if generator is not None:
            paths[1] = os.path.join(models, GENERATOR_FILE)
            float32_copy(generator).save(paths[1])
        done = subprocess.run(
            [sys.executable, "-m", __name__, *paths, export_dir, vocab_file, config_json],
            env=env,
            capture_output=True,
            text=True,
        )
    if done.returncode:
        failures = [line for line in done.stderr.splitlines() if line.startswith(_FAILED)]
        cause = (
            failures[-1][len(_FAILED) :] if failures else "; ".join(done.stderr.splitlines()[-1:])
        )
        raise OSError(
            errno.EIO, f"the TensorFlow process writing it failed: {cause or 'no output'}"
        )
    return export_dir


def _main(arguments: list[str]) -> None:
    """`python -m electra_tf.artifacts.export_dir DISCRIMINATOR GENERATOR|'' EXPORT VOCAB CONFIG`."""
    discriminator_file, generator_file, export_dir, vocab_file, config_json = arguments
    load = keras.saving.load_model
    try:
        generator = load(generator_file) if generator_file else None
        export_pretrained(generator, load(discriminator_file), export_dir, vocab_file, config_json)
    except Exception as error:  # the one line the training process reports
        cause = getattr(error, "strerror", None) or str(error).strip().splitlines()[0]
        sys.stderr.write(f"{_FAILED}{type(error).__name__}: {cause}\n")
        raise


def float32_copy(model: keras.Model) -> keras.Model:
    """A float32 copy of a model (which may have trained under a mixed-precision policy).

    Exports compute and return float32 whatever precision training used, and
    hold plain (not distributed) variables. The copy is built from the
    model's config, which names no kernel set: it runs the reference kernels,
    so what is exported from it traces to plain TensorFlow.
    """
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("float32")
    try:
        copy = model.__class__.from_config(model.get_config())
    finally:
        keras.config.set_dtype_policy(previous)
    copy.set_weights(model.get_weights())
    return copy


if __name__ == "__main__":
    _main(sys.argv[1:])
