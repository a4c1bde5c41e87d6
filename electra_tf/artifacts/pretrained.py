"""From a path a user gives to the files of a pre-trained model.

Accepted paths, as `--init_checkpoint`, `--checkpoint` or `inspect`'s
argument:

* a pre-training run directory: config.json and vocab.txt, the models in
  export/ (or, while it trains, only checkpoints/);
* its export/ directory, which carries copies of config.json and vocab.txt;
* a `.keras` discriminator file, with config.json (and vocab.txt) beside it
  or one directory up.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

import keras

from electra_tf.artifacts.export_dir import ExportDir
from electra_tf.artifacts.run_dir import EXPORT_DIR, RunDir
from electra_tf.config import ConfigError, PretrainingConfig
from electra_tf.errors import RunError

# Registers the custom classes so load_model finds them.
from electra_tf.modeling import electra as _electra  # noqa: F401


@dataclasses.dataclass(frozen=True)
class PretrainedFiles:
    """The files found for a path (None: absent).

    Attributes:
        config_file: config.json of the run (or of its export).
        vocab_file: the run's vocabulary (its copy in export/ otherwise).
        discriminator_file: the discriminator `.keras` file.
        generator_file: the generator `.keras` file beside it.
        checkpoint_dir: the run's checkpoints/ directory.
    """

    config_file: Optional[str]
    vocab_file: Optional[str]
    discriminator_file: Optional[str]
    generator_file: Optional[str]
    checkpoint_dir: Optional[str]

    @property
    def is_run(self) -> bool:
        """A config and weights to read: an exported model or a training checkpoint."""
        return self.config_file is not None and (
            self.discriminator_file is not None or self.checkpoint_dir is not None
        )


def _existing(path: str) -> Optional[str]:
    return path if os.path.exists(path) else None


def locate_pretrained(path: str) -> PretrainedFiles:
    """Finds the files of a run, an export directory or a `.keras` file at `path`."""
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.isfile(path):
        model_dir, discriminator = os.path.dirname(path), path
    else:
        run_export = RunDir(path).export
        model_dir = run_export if os.path.isdir(run_export) else path
        discriminator = _existing(ExportDir(model_dir).discriminator_file)
    start = path if os.path.isdir(path) else model_dir
    run = next(
        (
            RunDir(d)
            for d in (start, os.path.dirname(start))
            if os.path.isfile(RunDir(d).config_file)
        ),
        None,
    )
    if run is None:
        return PretrainedFiles(None, None, discriminator, None, None)
    vocab = _existing(run.vocab_file) or _existing(ExportDir(run.export).vocab_file)
    generator = discriminator and _existing(
        ExportDir(os.path.dirname(discriminator)).generator_file
    )
    return PretrainedFiles(
        run.config_file, vocab, discriminator, generator, _existing(run.checkpoints)
    )


def run_name(model_file: str) -> str:
    """The name of the run a model file belongs to (the directory above export/)."""
    directory = os.path.dirname(os.path.abspath(model_file))
    if os.path.basename(directory) == EXPORT_DIR:
        directory = os.path.dirname(directory)
    return os.path.basename(directory)


@dataclasses.dataclass
class Pretrained:
    """A pre-trained checkpoint ready for fine-tuning.

    Attributes:
        model_file: path of the discriminator `.keras` file.
        config: the pre-training config found beside it.
        vocab_file: the vocabulary to tokenize with.
    """

    model_file: str
    config: PretrainingConfig
    vocab_file: str


def resolve_pretrained(
    path: str, vocab_file: Optional[str] = None, model_size: Optional[str] = None
) -> Pretrained:
    """The discriminator, config and vocabulary of `--init_checkpoint`.

    Args:
        path: a pre-training run directory, its export/ directory, or the
            `.keras` file.
        vocab_file: overrides the checkpoint's vocab.txt.
        model_size: the size the user asked for; must match the checkpoint's.

    Raises:
        RunError: a missing file or a mismatch, naming the flag or file.
    """
    files = locate_pretrained(path)
    model_file = files.discriminator_file
    if model_file is None:
        raise RunError(
            f"--init_checkpoint={path}: no discriminator.keras found; pass a "
            "pre-training run directory, its export/ directory or the .keras file."
        )
    if files.config_file is None:
        raise RunError(
            f"--init_checkpoint={path}: no config.json beside {model_file} (it "
            "records the casing and model size the checkpoint was trained with)."
        )
    try:
        config = PretrainingConfig.load_json(files.config_file)
    except (ConfigError, ValueError, TypeError) as error:
        raise RunError(f"{files.config_file}: cannot read the pre-training config ({error}).")
    if model_size is not None and model_size != config.model_size:
        raise RunError(
            f"--model_size={model_size} but the checkpoint is {config.model_size!r} "
            f"(per {files.config_file}); drop --model_size or pick the matching "
            "checkpoint."
        )
    vocab = vocab_file or files.vocab_file
    if vocab is None:
        raise RunError(
            f"--init_checkpoint={path}: no vocab.txt beside {model_file}; pass --vocab_file."
        )
    return Pretrained(model_file, config, vocab)


def load_discriminator(path: str) -> keras.Model:
    """The `ElectraDiscriminator` of a run directory, its export/ or a `.keras` file.

    Raises:
        FileNotFoundError: there is no discriminator at `path`.
    """
    model_file = locate_pretrained(path).discriminator_file
    if model_file is None:
        raise FileNotFoundError(
            f"No discriminator.keras at {path}: pass a pre-training run "
            "directory, its export/ directory, or the .keras file."
        )
    return keras.saving.load_model(model_file)
