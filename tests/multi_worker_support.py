"""Two-process MultiWorkerMirroredStrategy runs (test scaffolding).

`run_workers` starts this file once per worker of a local two-worker cluster:

    TF_CONFIG=... python multi_worker_support.py pretrain <shard_dir> <vocab> <run_dir> <weights>
    TF_CONFIG=... python multi_worker_support.py finetune <pretrained_dir> <output_dir> <weights>

`pretrain` trains the tiny configuration of tests/training/test_pretraining_loop.py,
`finetune` one trial of `finetuning_support.toy_regression_task`, both with
dropout off; each worker writes its
final trainable weights to <weights> (.npz).
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

TESTS = os.path.dirname(os.path.abspath(__file__))

# Shared with the single-process reference runs of the tests.
SETTINGS = dict(
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
    num_train_steps=4,
    save_checkpoints_steps=2,
    keep_checkpoint_max=0,
)
FINETUNE_SETTINGS = dict(
    train_batch_size=4,
    eval_batch_size=4,
    learning_rate=3e-3,
    num_train_epochs=1,
    log_every_steps=100,
    save_checkpoints_steps=2,
)


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_workers(tmp_path, command, per_worker_args):
    """Runs `command` in two worker processes; returns their outputs (stdout and stderr).

    Args:
        tmp_path: a pytest temporary directory; worker i gets tmp_path/tmp<i>
            as its TMPDIR (scratch files), which the test may inspect.
        command: `pretrain` or `finetune`.
        per_worker_args: worker index -> that worker's arguments after `command`.
    """
    return run_worker_processes(
        tmp_path,
        lambda index: [
            os.path.join(TESTS, "multi_worker_support.py"),
            command,
            *map(str, per_worker_args(index)),
        ],
    )


def run_worker_processes(tmp_path, per_worker_argv):
    """Runs a Python script as the two workers of a local cluster; returns their outputs.

    Each must exit with 0.

    Args:
        tmp_path: a pytest temporary directory; worker i gets tmp_path/tmp<i>
            as its TMPDIR (scratch files), which the test may inspect.
        per_worker_argv: worker index -> the script and its arguments.
    """
    import subprocess

    ports = [_free_port(), _free_port()]
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    root = os.path.dirname(TESTS)
    processes = []
    for index in range(2):
        scratch = tmp_path / f"tmp{index}"
        scratch.mkdir()
        env = dict(
            os.environ,
            TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}),
            PYTHONPATH=root,
            TMPDIR=str(scratch),
            CUDA_VISIBLE_DEVICES="",
        )
        processes.append(
            subprocess.Popen(
                [sys.executable, *map(str, per_worker_argv(index))],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outputs = [p.communicate(timeout=600)[0] for p in processes]
    for p, out in zip(processes, outputs):
        assert p.returncode == 0, out
    return outputs


def _dump_weights_callback(weights_file):
    import keras
    import numpy as np

    class DumpWeights(keras.callbacks.Callback):
        def on_train_end(self, logs=None):
            np.savez(weights_file, *[v.numpy() for v in self.model.trainable_variables])

    return DumpWeights()


def pretrain(strategy, shard_dir, vocab, run_dir, weights_file):
    from test_pretraining_loop import tiny

    from electra_tf.tokenization import WordPieceTokenizer
    from electra_tf.training.pretraining_loop import run_pretraining

    tokenizer = WordPieceTokenizer(vocab, do_lower_case=True)
    result = run_pretraining(
        tiny(**SETTINGS),
        run_dir,
        shard_dir,
        vocab,
        tokenizer.special_ids,
        strategy=strategy,
        extra_callbacks=[_dump_weights_callback(weights_file)],
    )
    assert result.finished


def finetune(strategy, pretrained_dir, output_dir, weights_file):
    from finetuning_support import toy_regression_task

    from electra_tf.artifacts.pretrained import resolve_pretrained
    from electra_tf.finetuning.kind.settings import FinetuneSettings
    from electra_tf.training.finetuning_loop import run_trials

    results = run_trials(
        toy_regression_task(16, 13),
        resolve_pretrained(pretrained_dir),
        FinetuneSettings(output_dir=output_dir, **FINETUNE_SETTINGS),
        extra_callbacks=[_dump_weights_callback(weights_file)],
        strategy=strategy,
    )
    print("DEV " + json.dumps(results["trials"][0]["dev"]), flush=True)


if __name__ == "__main__":
    from electra_tf.distribute import create_strategy

    # The collective runtime is configured when the strategy is created, so
    # it must exist before any other TensorFlow work.
    worker_strategy = create_strategy("multi_worker")
    sys.path[:0] = [TESTS, os.path.join(TESTS, "training")]  # pytest.ini's pythonpath
    {"pretrain": pretrain, "finetune": finetune}[sys.argv[1]](worker_strategy, *sys.argv[2:])
