"""The pre-training run directory: everything a run of `pretrain.py` produces.

    config.json        the resolved `PretrainingConfig` (rewritten on every start)
    vocab.txt          the vocabulary the run was trained with
    checkpoints/       tf.train checkpoints (model, optimizer, data position), last K kept
    tensorboard/       scalars (`tensorboard --logdir <run_dir>/tensorboard`)
    metrics.jsonl      progress and held-out reports, one JSON object per line
    .lock              while a process runs in the directory: who (see `run_lock`)
    result.json        how the run ended: steps_done, finished, metrics, evaluation, seconds
    export/            the pre-trained models (see `export_dir`)
    imported_from.txt  for a converted checkpoint: the path it was converted from

A directory holding config.json plus export/ or checkpoints/ is a run; the
export directory, which carries copies of config.json and vocab.txt, is
accepted wherever a run is (see `pretrained`).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

from electra_tf.artifacts.files import Within, copy_file, read_json, write_json
from electra_tf.config import PretrainingConfig

CONFIG_FILE = "config.json"
VOCAB_FILE = "vocab.txt"
EXPORT_DIR = "export"


@dataclasses.dataclass(frozen=True)
class RunDir:
    """The paths of one run directory (nothing is created or checked)."""

    path: str

    config_file = Within(CONFIG_FILE)
    vocab_file = Within(VOCAB_FILE)
    checkpoints = Within("checkpoints")
    tensorboard = Within("tensorboard")
    metrics_log = Within("metrics.jsonl")
    result_file = Within("result.json")
    export = Within(EXPORT_DIR)
    import_source_file = Within("imported_from.txt")


def write_run_files(run: RunDir, config: PretrainingConfig, vocab_file: str) -> None:
    """Writes config.json (always the latest resolved config) and a copy of the vocabulary."""
    os.makedirs(run.path, exist_ok=True)
    config.save_json(run.config_file)
    if not os.path.exists(run.vocab_file):
        copy_file(vocab_file, run.vocab_file)


def read_config(run: RunDir) -> Optional[PretrainingConfig]:
    """The run's config.json, or None before the run has written one."""
    if not os.path.exists(run.config_file):
        return None
    return PretrainingConfig.load_json(run.config_file)


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
