"""The pre-training run directory: everything a run of `pretrain.py` produces.

    config.json        the resolved `PretrainingConfig` (rewritten on every start)
    vocab.txt          the vocabulary the run was trained with
    identity.json      what the weights' token ids mean, written once: the
                       vocabulary's SHA-256 and size, casing and normalization
                       (and the --vocab_* flags of a vocabulary the run learned)
    data.json          where the shards it trains and evaluates on are, and the Keras
                       backend it trains on (every start)
    checkpoints/       tf.train checkpoints (model, optimizer, data position), last K kept
    tensorboard/       scalars (`tensorboard --logdir <run_dir>/tensorboard`)
    metrics.jsonl      progress and held-out reports, one JSON object per line
                       (a value that is not finite is the string "nan", "inf"
                       or "-inf": JSON has no such numbers)
    .lock              while a process runs in the directory: who (see `run_lock`)
    result.json        how the run ended: steps_done, finished, metrics, evaluation, seconds
    export/            the pre-trained models (see `export_dir`)
    imported_from.txt  for a converted checkpoint: the path it was converted from

A directory holding config.json plus export/ or checkpoints/ is a run; the
export directory, which carries copies of config.json and vocab.txt, is
accepted wherever a run is (see `pretrained`).

identity.json is how a resumed run knows its vocabulary when vocab.txt is
gone or another file is offered: only a file of the recorded hash may stand
in for it. Runs of earlier versions have none; it is written, from their
vocab.txt, when they resume.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

from electra_tf import fileio
from electra_tf.artifacts.files import Within, copy_file, read_json, write_json
from electra_tf.config import ConfigError, PretrainingConfig
from electra_tf.errors import RunError
from electra_tf.tokenization import load_vocab, vocab_fingerprint

CONFIG_FILE = "config.json"
VOCAB_FILE = "vocab.txt"
IDENTITY_FILE = "identity.json"
# Where the run's training and held-out shards are (written at every start).
DATA_FILE = "data.json"
EXPORT_DIR = "export"


@dataclasses.dataclass(frozen=True)
class RunDir:
    """The paths of one run directory (nothing is created or checked)."""

    path: str

    config_file = Within(CONFIG_FILE)
    vocab_file = Within(VOCAB_FILE)
    identity_file = Within(IDENTITY_FILE)
    data_file = Within(DATA_FILE)
    checkpoints = Within("checkpoints")
    tensorboard = Within("tensorboard")
    metrics_log = Within("metrics.jsonl")
    result_file = Within("result.json")
    export = Within(EXPORT_DIR)
    import_source_file = Within("imported_from.txt")


@dataclasses.dataclass(frozen=True)
class RunIdentity:
    """What a run's token ids mean: its vocabulary (by content) and how text becomes tokens.

    Attributes:
        vocab_sha256: SHA-256 of vocab.txt's bytes (`tokenization.vocab_fingerprint`).
        vocab_size: its tokens.
        do_lower_case: casing.
        strip_accents: accent stripping (resolved: never None).
        normalization: `bert` or `casefold`.
        learned_with: for a vocabulary the run learned, the flags it was
            learned with, by name (`--vocab_size` as asked: a corpus with
            few pieces gives fewer tokens); None for one given as a file
            (or learned by an earlier version, which did not record them).
    """

    vocab_sha256: str
    vocab_size: int
    do_lower_case: bool
    strip_accents: bool
    normalization: str
    learned_with: Optional[dict] = None

    @classmethod
    def of(
        cls, config: PretrainingConfig, vocab_file: str, learned_with: Optional[dict] = None
    ) -> "RunIdentity":
        return cls(
            vocab_fingerprint(vocab_file),
            len(load_vocab(vocab_file)),
            config.do_lower_case,
            config.resolved_strip_accents,
            config.normalization,
            learned_with,
        )

    def tokenization(self) -> dict:
        """The casing and normalization, by the name of their flags."""
        return {
            "do_lower_case": self.do_lower_case,
            "strip_accents": self.strip_accents,
            "normalization": self.normalization,
        }


def write_data_file(
    run: RunDir, shard_dir: str, eval_shard_dir: Optional[str], keras_backend: str
) -> None:
    """Records where the shards this start of the run reads are, and its backend (data.json)."""
    write_json(
        run.data_file,
        {
            "shard_dir": fileio.abspath(shard_dir),
            "eval_shard_dir": fileio.abspath(eval_shard_dir) if eval_shard_dir else None,
            "keras_backend": keras_backend,
        },
    )


def checkpoint_backend(run: RunDir) -> str:
    """The Keras backend whose layout the run's checkpoints have (data.json; before it: tensorflow)."""
    try:
        data = read_json(run.data_file) or {}
    except ValueError:
        data = {}
    return data.get("keras_backend", "tensorflow")


def write_run_files(
    run: RunDir,
    config: PretrainingConfig,
    vocab_file: str,
    vocab_learned_with: Optional[dict] = None,
) -> None:
    """Writes a copy of the vocabulary and identity.json (once), then config.json (always).

    The caller has checked that `vocab_file` is the run's vocabulary
    (`read_identity`): a missing vocab.txt is restored from it. config.json
    comes last, so that a run directory with one has the other two.
    `vocab_learned_with` is `RunIdentity.learned_with`. When a write fails
    (a full disk), the files this call wrote are removed again: a vocab.txt
    without the rest would stand for a run that never started, and a later
    run with another vocabulary would be refused for it.
    """
    os.makedirs(run.path, exist_ok=True)
    written = []
    try:
        if not os.path.exists(run.vocab_file):
            copy_file(vocab_file, run.vocab_file)
            written.append(run.vocab_file)
        if not os.path.exists(run.identity_file):
            identity = RunIdentity.of(config, run.vocab_file, vocab_learned_with)
            write_json(run.identity_file, dataclasses.asdict(identity))
            written.append(run.identity_file)
        config.save_json(run.config_file)
    except BaseException:
        for path in written:
            os.remove(path)
        raise


def read_identity(run: RunDir) -> Optional[RunIdentity]:
    """identity.json, or None (a run of an earlier version, or none yet).

    Raises:
        RunError: the file is not an identity record, in one line.
    """
    try:
        data = read_json(run.identity_file)
        return None if data is None else RunIdentity(**data)
    except (ValueError, TypeError) as error:
        raise RunError(
            f"{run.identity_file} is not a run's identity record ({error}); delete it to "
            f"record it again from {run.vocab_file}, if that is the run's vocabulary."
        ) from None


def read_config(run: RunDir) -> Optional[PretrainingConfig]:
    """The run's config.json, or None before the run has written one.

    Raises:
        RunError: config.json is not valid JSON or not a configuration, in one line.
    """
    if not os.path.exists(run.config_file):
        return None
    try:
        return PretrainingConfig.load_json(run.config_file)
    except (ValueError, TypeError, ConfigError) as error:
        # json.JSONDecodeError is a ValueError; its message gives line and column.
        raise RunError(
            f"{run.config_file} is not a run's configuration ({error}). It is the record "
            "of what the checkpoints hold: put back a good copy (the export holds one, "
            f"{os.path.join(run.export, CONFIG_FILE)}, once the run has exported), or "
            "choose another --output_dir."
        ) from None


def write_result(run: RunDir, result: dict) -> None:
    """Writes result.json: how the run ended."""
    write_json(run.result_file, result)


def read_result(run: RunDir) -> Optional[dict]:
    """result.json, or None while the run has not ended."""
    return read_json(run.result_file)


def read_import_source(run: RunDir) -> Optional[str]:
    """The checkpoint this run directory was converted from, or None."""
    if not os.path.isfile(run.import_source_file):
        return None
    with open(run.import_source_file, encoding="utf-8") as f:
        return f.read().strip()


def write_import_source(run: RunDir, source: str) -> None:
    """Records the checkpoint this run directory was converted from."""
    with open(run.import_source_file, "w", encoding="utf-8") as f:
        f.write(source + "\n")
