"""`KERAS_BACKEND=jax python pretrain.py`: the same flags, run directory and exports as on TensorFlow.

Every run is a child process on the JAX backend (the parent stays on TensorFlow,
which reads what the children wrote).
"""

import json
import os
import re
import signal
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from commands.test_pretrain_cli import ROOT, _prebuilt

pytest.importorskip("jax")


def jax_env(devices: int = 1) -> dict:
    """The environment of a JAX child seeing `devices` host CPU devices."""
    env = {key: value for key, value in os.environ.items() if key != "XLA_FLAGS"}
    env["KERAS_BACKEND"] = "jax"
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    env["JAX_PLATFORMS"] = "cpu"
    return env


def run_on_jax(*args, devices: int = 1, script: str = "pretrain.py"):
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, script), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=jax_env(devices),
    )


def run_on_tensorflow(script: str, *args):
    """`script` run with the default backend (TensorFlow), whatever this process's environment."""
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, script), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"},
    )


def checkpoint_tensors(run_dir, step: int) -> dict:
    """{key: array} of the run's checkpoint of `step` (the save counter left out)."""
    reader = tf.train.load_checkpoint(os.path.join(run_dir, "checkpoints", f"ckpt-{step}"))
    return {
        key: reader.get_tensor(key)
        for key in reader.get_variable_to_shape_map()
        if "OBJECT_GRAPH" not in key and not key.startswith("save_counter")
    }


def assert_same_tensors(a: dict, b: dict, rtol=1e-5, atol=1e-7):
    assert a.keys() == b.keys()
    for key in a:
        if np.asarray(a[key]).dtype.kind in "SUO":  # the model's variable paths
            assert b[key] == a[key], key
        else:
            np.testing.assert_allclose(b[key], a[key], rtol=rtol, atol=atol, err_msg=key)


@pytest.mark.slow
def test_a_jax_run_killed_with_sigkill_resumes_to_the_straight_result(tmp_path):
    common = _prebuilt(tmp_path) + ["--num_train_steps=10", "--dropout_rate=0.1"]
    straight = run_on_jax(*common, f"--output_dir={tmp_path}/straight")
    output = straight.stdout + straight.stderr
    assert straight.returncode == 0, output
    assert "step 10/10 (100.0%)" in output and "Kernels: reference" in output
    killed = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "pretrain.py"), *common, f"--output_dir={tmp_path}/k"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env=jax_env(),
    )
    for line in killed.stdout:
        if line.startswith("step 5/10"):
            killed.send_signal(signal.SIGKILL)
            break
    killed.wait()
    assert killed.returncode == -signal.SIGKILL
    resumed = run_on_jax(*common, f"--output_dir={tmp_path}/k")
    output = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, output
    assert f"Taking over the lock of {tmp_path}/k from pid {killed.pid} " in output
    resumed_step = int(re.search(r"Resumed from \S+ \(step (\d+)\)", output).group(1))
    assert 4 <= resumed_step < 10 and resumed_step % 2 == 0
    # Weights, Adam moments, the step, the batches seen and the dropout seeds.
    assert_same_tensors(
        checkpoint_tensors(tmp_path / "straight", 10), checkpoint_tensors(tmp_path / "k", 10)
    )


@pytest.mark.slow
def test_two_devices_under_data_parallel_make_the_one_device_update(tmp_path):
    common = _prebuilt(tmp_path) + ["--num_train_steps=3", "--dropout_rate=0.1"]
    one = run_on_jax(*common, f"--output_dir={tmp_path}/one", devices=1)
    assert one.returncode == 0, one.stdout + one.stderr
    two = run_on_jax(*common, f"--output_dir={tmp_path}/two", devices=2)
    output = two.stdout + two.stderr
    assert two.returncode == 0, output
    assert "(2 replica(s), global batch 4)" in output
    assert "(1 replica(s), global batch 4)" in one.stdout
    # The same global batch, dropout masks and sums, summed in another order.
    assert_same_tensors(
        checkpoint_tensors(tmp_path / "one", 3), checkpoint_tensors(tmp_path / "two", 3), 1e-4, 1e-6
    )
    odd = run_on_jax(*common, "--train_batch_size=3", f"--output_dir={tmp_path}/odd", devices=2)
    assert odd.returncode != 0
    assert "--train_batch_size=3 is not divisible by the 2 replicas" in odd.stderr
    assert not (tmp_path / "odd").exists()


@pytest.mark.slow
def test_a_discriminator_pretrained_on_jax_finetunes_and_exports_on_tensorflow(tmp_path):
    from finetuning_support import toy_sentences

    common = _prebuilt(tmp_path) + [
        "--num_train_steps=2",
        "--eval_corpus=" + str(tmp_path / "corpus.txt"),
    ]
    run = run_on_jax(*common, f"--output_dir={tmp_path}/run")
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "Held-out evaluation at step 2" in output
    export = tmp_path / "run" / "export"
    assert (export / "discriminator_savedmodel" / "saved_model.pb").exists()
    # TensorBoard holds the scalars a TensorFlow run writes.
    tags = set()
    events = tmp_path / "run" / "tensorboard"
    for name in os.listdir(events):
        for event in tf.compat.v1.train.summary_iterator(str(events / name)):
            tags.update(value.tag for value in event.summary.value)
    assert {"total_loss", "disc_loss", "masked_lm_loss", "learning_rate", "eval/disc_auc"} <= tags
    # Its checkpoints are JAX's: the same command on TensorFlow is refused, untouched.
    on_tensorflow = run_on_tensorflow("pretrain.py", *common, f"--output_dir={tmp_path}/run")
    assert on_tensorflow.returncode != 0
    assert "holds checkpoints written on KERAS_BACKEND=jax, and this run is on tensorflow" in (
        on_tensorflow.stderr
    )
    assert json.load(open(tmp_path / "run" / "data.json"))["keras_backend"] == "jax"
    # The export loads on TensorFlow and computes what the JAX-trained weights say.
    from electra_tf.artifacts.pretrained import load_discriminator

    discriminator = load_discriminator(str(export))
    ids = np.array([[2, 5, 6, 7, 3]], np.int32)
    inputs = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
    logits = np.asarray(discriminator(inputs)["logits"])
    served = tf.saved_model.load(str(export / "discriminator_savedmodel")).signatures[
        "serving_default"
    ]
    np.testing.assert_allclose(
        served(**{k: tf.constant(v) for k, v in inputs.items()})["logits"].numpy(),
        logits,
        atol=1e-5,
    )
    # Without the export, the run's last checkpoint gives the same discriminator
    # (what inspect, commands.export and --init_checkpoint=<run> read).
    from electra_tf.interop.checkpoints import load_run_models

    os.rename(export, tmp_path / "export-aside")
    _, _, from_checkpoint, where = load_run_models(str(tmp_path / "run"))
    os.rename(tmp_path / "export-aside", export)
    assert where.endswith("ckpt-2")
    np.testing.assert_allclose(np.asarray(from_checkpoint(inputs)["logits"]), logits, atol=1e-6)
    # finetune.py (TensorFlow) fine-tunes it and exports for TF Serving.
    rows = toy_sentences(16)
    with open(tmp_path / "train.tsv", "w", encoding="utf-8") as f:
        f.write("text\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in rows))
    finetuned = run_on_tensorflow(
        "finetune.py",
        f"--init_checkpoint={export}",
        f"--train_file={tmp_path / 'train.tsv'}",
        f"--dev_file={tmp_path / 'train.tsv'}",
        "--task=toy",
        "--num_train_epochs=1",
        "--train_batch_size=4",
        "--max_seq_length=16",
        f"--output_dir={tmp_path / 'finetuned'}",
    )
    assert finetuned.returncode == 0, finetuned.stderr[-3000:]
    results = json.load(open(tmp_path / "finetuned" / "results.json"))
    assert 0.0 <= results["median"]["accuracy"] <= 1.0
    assert (tmp_path / "finetuned" / "export" / "toy" / "1" / "saved_model.pb").is_file()


def test_another_backend_is_refused_in_one_line_before_anything_is_written(tmp_path):
    env = {**os.environ, "KERAS_BACKEND": "numpy"}
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "pretrain.py"), f"--output_dir={tmp_path}/run"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    assert result.returncode != 0
    assert "KERAS_BACKEND=numpy: this command runs on KERAS_BACKEND=tensorflow or jax" in (
        result.stderr
    )
    assert not (tmp_path / "run").exists()
    finetune = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "finetune.py"),
            "--task=sst-2",
            f"--init_checkpoint={tmp_path}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "KERAS_BACKEND": "jax"},
    )
    assert finetune.returncode != 0
    assert "KERAS_BACKEND=jax: this command runs on KERAS_BACKEND=tensorflow" in finetune.stderr


@pytest.mark.slow
def test_two_stage_float16_accumulated_and_diverging_runs_on_jax(tmp_path):
    common = _prebuilt(tmp_path) + ["--num_train_steps=4"]
    two_stage = [
        "--training=two_stage",
        "--weight_sharing=none",
        "--generator_hidden_fraction=1",
        "--generator_layers_fraction=1",
    ]
    staged = run_on_jax(*common, *two_stage, f"--output_dir={tmp_path}/staged")
    output = staged.stdout + staged.stderr
    assert staged.returncode == 0, output
    assert "Step 2: the discriminator starts from the generator's weights" in output
    assert "step 4/4 (100.0%)" in output
    scaled = run_on_jax(
        *common,
        "--mixed_precision=float16",
        "--gradient_accumulation_steps=2",
        "--steps_per_execution=2",
        "--log_every_steps=2",
        f"--output_dir={tmp_path}/scaled",
    )
    assert scaled.returncode == 0, scaled.stdout + scaled.stderr
    # Steps whose float16 gradients overflow are skipped, so the optimizer's
    # step may end a group of two past 4, as on TensorFlow.
    result = json.load(open(tmp_path / "scaled" / "result.json"))
    assert result["finished"] and result["steps_done"] >= 4
    assert np.isfinite(result["metrics"]["total_loss"])
    refused = run_on_jax(
        *common, *two_stage, "--mixed_precision=float16", f"--output_dir={tmp_path}/refused"
    )
    assert refused.returncode != 0
    assert "--training=two_stage --mixed_precision=float16 runs on KERAS_BACKEND=tensorflow" in (
        refused.stderr
    )
    # A step whose loss is not finite stops the run before anything non-finite is saved.
    diverged = run_on_jax(
        *common, "--learning_rate=1e30", "--num_train_steps=6", f"--output_dir={tmp_path}/nan"
    )
    assert diverged.returncode != 0
    assert re.search(
        r"Training stopped at step \d: the (loss|gradient norm) is (nan|inf).* the last "
        rf"checkpoint, {tmp_path}/nan/checkpoints/ckpt-2, is finite and intact",
        diverged.stderr,
    ), diverged.stderr[-2000:]
