"""The directories TF Serving polls: `<export_base>/<model_name>/<version>/`.

A version directory is a SavedModel:

    saved_model.pb, variables/          graph, signatures and weights
    assets/vocab.txt                    the WordPiece vocabulary
    assets/labels.txt                   class names, one per line (classifiers)
    assets/serving_config.json          model kind, tokenizer flags, task, model config
    batching_params.pbtxt               TF Serving's batching of this model (read only with
                                        --enable_batching --enable_per_model_batching_parameters)
    assets.extra/                       the Keras model, for `electra_tf.serving.check`:
                                        model.keras (a discriminator), or a
                                        fine-tuned model saved as in its trial
                                        directory (see `finetuning_dir`)

TF Serving loads the first three, and the batching parameters when asked; `assets.extra/` is the conventional
place for files beside a SavedModel that the graph does not read.

TF Serving's file-system source treats every child of `--model_base_path`
whose name is a non-negative integer as a version and ignores all other
names. A version is therefore written under a dot-prefixed staging name in
the same directory and renamed into place once complete: `rename(2)` within
one file system is atomic, so a polling server sees either no version or a
whole one. Existing versions are never overwritten; a new export takes the
next integer.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from typing import Callable, Optional

from electra_tf.artifacts.files import Within, no_room, read_json
from electra_tf.artifacts.run_dir import VOCAB_FILE

STAGING_PREFIX = ".staging-"
SERVING_CONFIG = "serving_config.json"
LABELS_FILE = "labels.txt"
# The name TF Serving looks for in a version directory (saved_model_bundle_factory).
BATCHING_PARAMS = "batching_params.pbtxt"


class ExportLayoutError(ValueError):
    """A version directory cannot be created; the message names the path."""


@dataclasses.dataclass(frozen=True)
class VersionDir:
    """The paths of one version directory (nothing is created or checked)."""

    path: str

    saved_model_file = Within("saved_model.pb")
    assets = Within("assets")
    vocab_file = Within("assets", VOCAB_FILE)
    serving_config_file = Within("assets", SERVING_CONFIG)
    extra = Within("assets.extra")
    batching_params_file = Within(BATCHING_PARAMS)
    # The discriminator in `assets.extra/`.
    keras_file = Within("assets.extra", "model.keras")


@dataclasses.dataclass(frozen=True)
class BatchingParams:
    """TF Serving's `BatchingParameters` for one model, written as `batching_params.pbtxt`.

    A server started with `--enable_batching --enable_per_model_batching_parameters`
    merges concurrent requests to one signature into a batch of at most
    `max_batch_size` rows; without those flags the file is ignored. The
    batch threads are the server's (`num_batch_threads` of its
    `--batching_parameters_file`), not the model's.

    Attributes:
        max_batch_size: rows per merged batch (32: a 2-core CPU's texts per
            second stop growing about there; docs/serving.md).
        batch_timeout_micros: how long a batch waits for more requests (TF
            Serving's guide: slightly above zero, such as 1 ms).
        max_enqueued_batches: batches queued before a request is refused, a
            bound on the time a request waits (the guide, for online serving:
            about the number of batch threads).
    """

    max_batch_size: int = 32
    batch_timeout_micros: int = 1000
    max_enqueued_batches: int = 4

    def text(self) -> str:
        """The protobuf text format of the fields, with pad_variable_length_inputs off.

        Padding stays off: TF Serving would pad token-id inputs with their
        first value ([CLS], mask 1), so token-id requests of different
        lengths are refused from one batch rather than answered wrongly.
        """
        lines = [f"{f.name} {{ value: {getattr(self, f.name)} }}" for f in dataclasses.fields(self)]
        return "\n".join([*lines, "pad_variable_length_inputs: false"]) + "\n"


def read_serving_config(version_dir: str) -> dict:
    """The `assets/serving_config.json` of a version directory.

    Raises:
        FileNotFoundError: there is none.
    """
    config = read_json(VersionDir(version_dir).serving_config_file)
    if config is None:
        raise FileNotFoundError(f"{version_dir}: no assets/{SERVING_CONFIG}.")
    return config


def list_versions(model_base: str) -> list[int]:
    """The published versions under `model_base` (ascending; [] if it does not exist)."""
    if not os.path.isdir(model_base):
        return []
    return sorted(
        int(name)
        for name in os.listdir(model_base)
        if name.isdigit() and os.path.isdir(os.path.join(model_base, name))
    )


def next_version(model_base: str) -> int:
    """One more than the highest published version, or 1."""
    versions = list_versions(model_base)
    return versions[-1] + 1 if versions else 1


def latest_version_dir(model_base: str) -> Optional[str]:
    """The directory of the highest version, or None."""
    versions = list_versions(model_base)
    return os.path.join(model_base, str(versions[-1])) if versions else None


def publish_version(
    model_base: str, write: Callable[[str], None], version: Optional[int] = None
) -> str:
    """Writes a new version with `write(staging_dir)` and renames it into place.

    Args:
        model_base: `<export_base>/<model_name>`; created if missing.
        write: fills the (empty, existing) staging directory with a SavedModel.
        version: the version number to use; None takes the next free one.

    Returns:
        The published version directory.

    Raises:
        ExportLayoutError: `version` already exists or is not positive.
    """
    if version is not None and version <= 0:
        raise ExportLayoutError(f"version {version}: TF Serving versions are positive integers.")
    os.makedirs(model_base, exist_ok=True)
    if version is not None and os.path.exists(os.path.join(model_base, str(version))):
        raise ExportLayoutError(
            f"{os.path.join(model_base, str(version))} already exists; "
            "existing versions are never overwritten."
        )
    staging = tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=model_base)
    try:
        # mkdtemp makes the directory private (0700); a server running as
        # another user (the Docker image) must be able to read the version.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(staging, 0o777 & ~umask)
        try:
            write(staging)
        except Exception as error:
            cause = no_room(error)
            if cause is None:
                raise
            raise ExportLayoutError(
                f"Could not write the export in {model_base}: {cause}. Nothing of it was "
                "left and earlier versions are intact; free some space and re-run the same "
                "command."
            ) from None
        while True:
            number = version if version is not None else next_version(model_base)
            target = os.path.join(model_base, str(number))
            if os.path.exists(target):
                if version is not None:
                    raise ExportLayoutError(f"{target} appeared while exporting; not overwritten.")
                continue  # another exporter took this number meanwhile: take the next
            try:
                os.rename(staging, target)
            except OSError:
                if version is not None or not os.path.exists(target):
                    raise
                continue
            return target
    finally:
        if os.path.exists(staging):
            shutil.rmtree(staging, ignore_errors=True)
