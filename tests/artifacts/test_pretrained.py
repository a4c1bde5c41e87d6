"""From a user's path (run, export directory, .keras file) to the files of a pre-trained model."""

import os

import pytest

from electra_tf.artifacts.pretrained import locate_pretrained, resolve_pretrained, run_name
from electra_tf.config import preset
from electra_tf.errors import RunError


def _touch(path, text="x"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return str(path)


def _config(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    preset("tiny").save_json(str(path))
    return str(path)


@pytest.fixture
def run(tmp_path):
    """A finished run: config.json, vocab.txt, checkpoints/ and export/ with both models."""
    root = tmp_path / "run"
    _config(root / "config.json")
    _touch(root / "vocab.txt")
    _touch(root / "checkpoints" / "checkpoint")
    for name in ("discriminator.keras", "generator.keras", "vocab.txt"):
        _touch(root / "export" / name)
    _config(root / "export" / "config.json")
    return root


def test_run_directory(run):
    files = locate_pretrained(str(run))
    assert files.config_file == str(run / "config.json")
    assert files.vocab_file == str(run / "vocab.txt")
    assert files.discriminator_file == str(run / "export" / "discriminator.keras")
    assert files.generator_file == str(run / "export" / "generator.keras")
    assert files.checkpoint_dir == str(run / "checkpoints")
    assert files.is_run


def test_export_directory_carries_its_own_config_and_vocabulary(run):
    files = locate_pretrained(str(run / "export"))
    assert files.config_file == str(run / "export" / "config.json")
    assert files.vocab_file == str(run / "export" / "vocab.txt")
    assert files.discriminator_file == str(run / "export" / "discriminator.keras")
    assert files.is_run


def test_keras_file_finds_the_config_one_directory_up(tmp_path):
    _config(tmp_path / "run" / "config.json")
    _touch(tmp_path / "run" / "vocab.txt")
    model = _touch(tmp_path / "run" / "models" / "disc.keras")
    files = locate_pretrained(model)
    assert files.discriminator_file == model
    assert files.config_file == str(tmp_path / "run" / "config.json")
    assert files.vocab_file == str(tmp_path / "run" / "vocab.txt")
    assert files.generator_file is None


def test_run_still_training_has_only_checkpoints(tmp_path):
    _config(tmp_path / "config.json")
    _touch(tmp_path / "checkpoints" / "checkpoint")
    files = locate_pretrained(str(tmp_path))
    assert files.discriminator_file is None and files.is_run
    with pytest.raises(RunError, match="no discriminator.keras found"):
        resolve_pretrained(str(tmp_path))


def test_not_a_run(tmp_path):
    assert not locate_pretrained(str(tmp_path)).is_run
    _config(tmp_path / "config.json")  # a config alone holds no weights
    assert not locate_pretrained(str(tmp_path)).is_run


def test_resolve_reads_the_config_and_checks_size_and_vocabulary(run, tmp_path):
    pretrained = resolve_pretrained(str(run))
    assert pretrained.model_file == str(run / "export" / "discriminator.keras")
    assert pretrained.config.model_size == "tiny"
    assert pretrained.vocab_file == str(run / "vocab.txt")
    other_vocab = _touch(tmp_path / "other.txt")
    assert resolve_pretrained(str(run), vocab_file=other_vocab).vocab_file == other_vocab
    with pytest.raises(RunError, match="--model_size=base but the checkpoint is 'tiny'"):
        resolve_pretrained(str(run), model_size="base")


def test_resolve_names_what_is_missing(tmp_path):
    model = _touch(tmp_path / "bare" / "discriminator.keras")
    with pytest.raises(RunError, match="no config.json beside"):
        resolve_pretrained(model)
    _config(tmp_path / "bare" / "config.json")
    with pytest.raises(RunError, match="no vocab.txt beside .*--vocab_file"):
        resolve_pretrained(model)


def test_run_name(tmp_path):
    assert run_name(str(tmp_path / "small-wiki" / "export" / "discriminator.keras")) == "small-wiki"
    assert run_name(str(tmp_path / "mine" / "discriminator.keras")) == "mine"
