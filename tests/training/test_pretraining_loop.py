import errno
import json
import os
import re
import shutil
import signal

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.artifacts.pretrained import load_discriminator
from electra_tf.config import preset
from electra_tf.data.pipeline import dummy_batch
from electra_tf.data.shard_build import write_shards
from electra_tf.errors import RunError
from electra_tf.finiteness import NonFiniteError
from electra_tf.flops import train_flops_per_step
from electra_tf.pretraining.objectives import ElectraPretrainer
from electra_tf.tokenization import WordPieceTokenizer
from electra_tf.training.pretraining_loop import RunConfigMismatch, run_pretraining

WORDS = [
    "the",
    "cat",
    "sat",
    "on",
    "a",
    "mat",
    "dog",
    "ran",
    "to",
    "park",
    "big",
    "small",
    "red",
    "blue",
    "and",
    "with",
    "house",
    "tree",
    "bird",
    "sang",
]
METRIC_TAGS = {
    "total_loss",
    "masked_lm_loss",
    "disc_loss",
    "masked_lm_accuracy",
    "sampled_masked_lm_accuracy",
    "disc_accuracy",
    "disc_precision",
    "disc_recall",
    "learning_rate",
    "sequences_per_second",
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A vocabulary and shards of random sentences (10 documents)."""
    root = tmp_path_factory.mktemp("corpus")
    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *WORDS]) + "\n")
    rng = np.random.default_rng(0)
    lines = []
    for _ in range(10):
        for _ in range(12):
            lines.append(" ".join(rng.choice(WORDS, size=rng.integers(3, 9))) + " .")
        lines.append("")
    text = root / "text.txt"
    text.write_text("\n".join(lines) + "\n")
    tokenizer = WordPieceTokenizer(str(vocab), do_lower_case=True)
    shard_dir = str(root / "shards")
    write_shards([str(text)], shard_dir, tokenizer.get_config(), max_seq_length=24, num_shards=2)
    return str(vocab), shard_dir, tokenizer


def tiny(**overrides):
    values = dict(
        vocab_size=26,
        hidden_size=32,
        num_layers=2,
        embedding_size=16,
        num_heads=2,
        max_seq_length=24,
        train_batch_size=4,
        num_train_steps=6,
        num_warmup_steps=2,
        learning_rate=1e-3,
        log_every_steps=2,
        save_checkpoints_steps=2,
        keep_checkpoint_max=2,
        shuffle_buffer_size=16,
    )
    values.update(overrides)
    return preset("tiny", **values)


def _sample_inputs(tokenizer):
    ids = tokenizer.tokenize(["the cat sat on a mat ."]).to_tensor()
    ids = tf.concat([[[tokenizer.cls_id]], ids, [[tokenizer.sep_id]]], axis=1)
    return {"input_ids": ids, "input_mask": tf.ones_like(ids), "segment_ids": tf.zeros_like(ids)}


def read_scalars(event_dir):
    tags = {}
    for name in os.listdir(event_dir):
        for event in tf.compat.v1.train.summary_iterator(os.path.join(event_dir, name)):
            for value in event.summary.value:
                tags.setdefault(value.tag, []).append(event.step)
    return tags


def read_scalar_values(event_dir, tag):
    values = []
    for name in os.listdir(event_dir):
        for event in tf.compat.v1.train.summary_iterator(os.path.join(event_dir, name)):
            values += [
                (event.step, float(tf.make_ndarray(v.tensor)))
                for v in event.summary.value
                if v.tag == tag
            ]
    return sorted(values)


@pytest.mark.slow
def test_run_trains_logs_checkpoints_and_exports(corpus, tmp_path):
    vocab, shard_dir, tokenizer = corpus
    run_dir = str(tmp_path / "run")
    lines = []
    result = run_pretraining(
        tiny(), run_dir, shard_dir, vocab, tokenizer.special_ids, print_fn=lines.append
    )
    assert result.finished and result.steps_done == 6 and not result.interrupted
    assert all(np.isfinite(v) for v in result.metrics.values())
    # The default picks the CPU kernels on a machine without accelerators.
    expected = "cpu_fast" if not tf.config.list_logical_devices("GPU") else "reference"
    assert f"Kernels: {expected} (--kernels=auto)." in lines
    # Console: progress lines with throughput and ETA.
    progress = [line for line in lines if line.startswith("step ")]
    assert [line.split()[1] for line in progress] == ["2/6", "4/6", "6/6"]
    assert all("seq/s" in line and "ETA" in line for line in progress)
    # TensorBoard scalars under the original code's names, every 2 steps.
    tags = read_scalars(os.path.join(run_dir, "tensorboard"))
    assert METRIC_TAGS <= set(tags)
    assert tags["total_loss"] == [2, 4, 6]
    # Cumulative training FLOPs, so runs can be compared at equal compute.
    per_step = train_flops_per_step(tiny())
    assert per_step > 0
    flops = read_scalar_values(os.path.join(run_dir, "tensorboard"), "train_flops")
    assert [step for step, _ in flops] == [2, 4, 6]
    assert [value for _, value in flops] == pytest.approx(
        [2 * per_step, 4 * per_step, 6 * per_step], rel=1e-6
    )
    # Checkpoints: only the last K kept.
    state = tf.train.get_checkpoint_state(os.path.join(run_dir, "checkpoints"))
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["ckpt-4", "ckpt-6"]
    assert json.load(open(os.path.join(run_dir, "config.json")))["model"]["hidden_size"] == 32
    # Export: the exported discriminator equals the trained one (restored from
    # the final checkpoint), as a Keras file and as a SavedModel.
    inputs = _sample_inputs(tokenizer)
    trained = ElectraPretrainer(tiny())
    trained.build_from_batch(dummy_batch(tiny()))
    tf.train.Checkpoint(model=trained).restore(
        tf.train.latest_checkpoint(os.path.join(run_dir, "checkpoints"))
    ).expect_partial()
    expected = trained.discriminator(inputs, training=False)["logits"].numpy()
    disc = load_discriminator(run_dir)
    np.testing.assert_allclose(disc(inputs, training=False)["logits"].numpy(), expected, atol=1e-6)
    saved = tf.saved_model.load(os.path.join(run_dir, "export", "discriminator_savedmodel"))
    saved_out = saved.signatures["serving_default"](**inputs)
    np.testing.assert_allclose(saved_out["logits"].numpy(), expected, atol=1e-5)
    gen = keras.saving.load_model(os.path.join(run_dir, "export", "generator.keras"))
    assert gen.encoder.hidden_size == 8  # 32 * 0.25
    assert open(os.path.join(run_dir, "export", "vocab.txt")).read() == open(vocab).read()


class _Interrupt(keras.callbacks.Callback):
    """Sends this process a real SIGTERM after `at` steps."""

    def __init__(self, at):
        super().__init__()
        self.at = at

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) == self.at:
            signal.raise_signal(signal.SIGTERM)


def _checkpoint_values(run_dir):
    path = tf.train.latest_checkpoint(os.path.join(run_dir, "checkpoints"))
    reader = tf.train.load_checkpoint(path)
    return path, {
        name: reader.get_tensor(name)
        for name in reader.get_variable_to_shape_map()
        if "OBJECT_GRAPH" not in name and not name.startswith("save_counter")
    }


def test_interrupted_and_resumed_run_equals_a_straight_run(corpus, tmp_path):
    vocab, shard_dir, tokenizer = corpus
    config = tiny(save_checkpoints_steps=100)  # only the signal and the end save
    straight_dir, split_dir = str(tmp_path / "straight"), str(tmp_path / "split")
    run_pretraining(
        config,
        straight_dir,
        shard_dir,
        vocab,
        tokenizer.special_ids,
        export=False,
        print_fn=lambda _: None,
    )
    first = run_pretraining(
        config,
        split_dir,
        shard_dir,
        vocab,
        tokenizer.special_ids,
        export=False,
        print_fn=lambda _: None,
        extra_callbacks=[_Interrupt(3)],
    )
    assert first.interrupted and first.steps_done == 3 and not first.finished
    assert tf.train.latest_checkpoint(os.path.join(split_dir, "checkpoints")).endswith("ckpt-3")
    lines = []
    second = run_pretraining(
        config,
        split_dir,
        shard_dir,
        vocab,
        tokenizer.special_ids,
        export=False,
        print_fn=lines.append,
    )
    assert second.finished and second.steps_done == 6
    assert any("Resumed from" in line and "step 3" in line for line in lines)
    path_a, straight = _checkpoint_values(straight_dir)
    path_b, resumed = _checkpoint_values(split_dir)
    assert os.path.basename(path_a) == os.path.basename(path_b) == "ckpt-6"
    assert straight.keys() == resumed.keys()
    # Weights, optimizer moments, step counters and the data position all agree.
    for name in straight:
        np.testing.assert_allclose(
            resumed[name], straight[name], rtol=1e-5, atol=1e-7, err_msg=name
        )


@pytest.mark.slow
def test_a_run_of_another_configuration_is_refused_untouched(corpus, tmp_path):
    vocab, shard_dir, tokenizer = corpus
    run_dir = str(tmp_path / "run")
    run_pretraining(
        tiny(num_train_steps=2),
        run_dir,
        shard_dir,
        vocab,
        tokenizer.special_ids,
        export=False,
        print_fn=lambda _: None,
    )
    before = open(os.path.join(run_dir, "config.json")).read()
    with pytest.raises(RunConfigMismatch, match=r"model\.hidden_size: 32 -> 64"):
        run_pretraining(
            tiny(num_train_steps=2, hidden_size=64),
            run_dir,
            shard_dir,
            vocab,
            tokenizer.special_ids,
            export=False,
            print_fn=lambda _: None,
        )
    assert open(os.path.join(run_dir, "config.json")).read() == before
    other_vocab = tmp_path / "other_vocab.txt"
    other_vocab.write_text(open(vocab).read().replace("park", "garden"))
    with pytest.raises(RunConfigMismatch, match="vocabulary"):
        run_pretraining(
            tiny(num_train_steps=2),
            run_dir,
            shard_dir,
            str(other_vocab),
            tokenizer.special_ids,
            export=False,
            print_fn=lambda _: None,
        )
    # Extending the schedule is allowed, and so are other kernels (the run began with the
    # default, auto): it resumes.
    lines = []
    result = run_pretraining(
        tiny(num_train_steps=3, kernels="reference"),
        run_dir,
        shard_dir,
        vocab,
        tokenizer.special_ids,
        export=False,
        print_fn=lines.append,
    )
    assert result.steps_done == 3
    assert "Kernels: reference (--kernels=reference)." in lines


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["float16", "bfloat16"])
def test_mixed_precision_runs_reach_the_target_and_export_float32(corpus, tmp_path, precision):
    vocab, shard_dir, tokenizer = corpus
    run_dir = str(tmp_path / "run")
    # float16 skips the first steps (loss-scale overflow); the run must still
    # complete all 3 optimizer steps, and export float32 models.
    result = run_pretraining(
        tiny(num_train_steps=3, mixed_precision=precision, save_checkpoints_steps=1),
        run_dir,
        shard_dir,
        vocab,
        tokenizer.special_ids,
        print_fn=lambda _: None,
    )
    assert result.finished and result.steps_done == 3
    assert np.isfinite(result.metrics["total_loss"])
    checkpoints = tf.train.get_checkpoint_state(os.path.join(run_dir, "checkpoints"))
    assert os.path.basename(checkpoints.model_checkpoint_path) == "ckpt-3"
    assert not any(p.endswith("ckpt-0") for p in checkpoints.all_model_checkpoint_paths)
    keras.mixed_precision.set_global_policy("float32")
    disc = load_discriminator(run_dir)
    assert disc(_sample_inputs(tokenizer))["logits"].dtype == tf.float32


def test_batch_not_divisible_by_replicas_is_refused_before_writing(
    corpus, tmp_path, two_replica_strategy
):
    vocab, shard_dir, tokenizer = corpus
    run_dir = tmp_path / "run"
    with pytest.raises(ValueError, match="--train_batch_size=5 is not divisible by the 2"):
        run_pretraining(
            tiny(train_batch_size=5),
            str(run_dir),
            shard_dir,
            vocab,
            tokenizer.special_ids,
            strategy=two_replica_strategy,
            print_fn=lambda _: None,
        )
    assert not run_dir.exists()


@tf.custom_gradient
def _infinite_gradient(x):
    return tf.identity(x), lambda upstream: upstream * float("inf")


@pytest.mark.slow
def test_a_diverged_float16_run_stops_with_an_error_instead_of_looping(
    corpus, tmp_path, monkeypatch
):
    vocab, shard_dir, tokenizer = corpus
    original = ElectraPretrainer._loss

    def overflowing_gradients(self, local, counts):  # a finite loss, gradients that never fit
        return _infinite_gradient(original(self, local, counts))

    monkeypatch.setattr(ElectraPretrainer, "_loss", overflowing_gradients)
    run_dir = tmp_path / "run"
    with pytest.raises(RunError, match="batches in a row gave non-finite gradients at step 0"):
        run_pretraining(
            tiny(num_train_steps=40, mixed_precision="float16"),
            str(run_dir),
            shard_dir,
            vocab,
            tokenizer.special_ids,
            print_fn=lambda _: None,
        )
    assert (run_dir / "config.json").exists()


def _from_step_4(value):
    """A `_loss` that applies `value` (loss -> loss) from the 4th optimizer step on."""
    original = ElectraPretrainer._loss

    def loss(self, local, counts):
        plain = original(self, local, counts)
        return tf.cond(self.optimizer.iterations >= 3, lambda: value(plain), lambda: plain)

    return loss


@pytest.mark.slow
@pytest.mark.parametrize(
    "precision, fault, message",
    [
        ("none", lambda loss: loss * float("nan"), "step 4: the loss is nan"),
        ("none", _infinite_gradient, r"step 4: the gradient norm is (nan|inf) \(loss \d"),
        ("bfloat16", lambda loss: loss + float("inf"), "step 4: the loss is inf"),
        ("float16", lambda loss: loss * float("nan"), "step 4: the loss is nan"),
    ],
)
def test_a_non_finite_step_stops_the_run_before_anything_non_finite_is_saved(
    corpus, tmp_path, monkeypatch, precision, fault, message
):
    vocab, shard_dir, tokenizer = corpus
    monkeypatch.setattr(ElectraPretrainer, "_loss", _from_step_4(fault))
    run_dir = tmp_path / "run"
    config = tiny(
        num_train_steps=8, mixed_precision=precision, save_checkpoints_steps=2, log_every_steps=2
    )
    with pytest.raises(NonFiniteError) as stopped:
        run_pretraining(
            config, str(run_dir), shard_dir, vocab, tokenizer.special_ids, print_fn=lambda _: None
        )
    text = str(stopped.value)
    assert re.search(rf"^Training stopped at {message}", text), text
    assert f"the last checkpoint, {run_dir}/checkpoints/ckpt-2, is finite and intact" in text
    assert "--learning_rate=<lower> --change_hyperparameters" in text and "\n" not in text
    assert [
        os.path.basename(p)
        for p in tf.train.get_checkpoint_state(
            str(run_dir / "checkpoints")
        ).all_model_checkpoint_paths
    ] == ["ckpt-2"]
    reader = tf.train.load_checkpoint(str(run_dir / "checkpoints" / "ckpt-2"))
    assert all(
        np.isfinite(reader.get_tensor(name)).all()
        for name in reader.get_variable_to_shape_map()
        if reader.get_variable_to_dtype_map()[name].is_floating
    )
    assert not (run_dir / "export").exists() and not (run_dir / "result.json").exists()
    assert not (run_dir / ".lock").exists()


@pytest.mark.slow
def test_after_a_nan_the_run_resumes_from_the_last_good_checkpoint_with_a_lower_rate(
    corpus, tmp_path, monkeypatch
):
    vocab, shard_dir, tokenizer = corpus
    run_dir = tmp_path / "run"
    settings = dict(num_train_steps=8, save_checkpoints_steps=2, log_every_steps=2)
    with monkeypatch.context() as patch:
        patch.setattr(ElectraPretrainer, "_loss", _from_step_4(lambda loss: loss * np.nan))
        with pytest.raises(NonFiniteError):
            run_pretraining(
                tiny(learning_rate=1e-3, **settings),
                str(run_dir),
                shard_dir,
                vocab,
                tokenizer.special_ids,
                print_fn=lambda _: None,
            )
    lower = tiny(learning_rate=2e-4, **settings)
    with pytest.raises(
        RunConfigMismatch,
        match=r"learning_rate: 0\.001 -> 0\.0002\n.*add "
        r"--change_hyperparameters to resume with the "
        r"new learning_rate",
    ):
        run_pretraining(
            lower, str(run_dir), shard_dir, vocab, tokenizer.special_ids, print_fn=lambda _: None
        )
    # Anything else than the optimisation hyperparameters still may not change.
    with pytest.raises(RunConfigMismatch, match=r"model\.hidden_size: 32 -> 64"):
        run_pretraining(
            tiny(learning_rate=2e-4, hidden_size=64, **settings),
            str(run_dir),
            shard_dir,
            vocab,
            tokenizer.special_ids,
            print_fn=lambda _: None,
            change_hyperparameters=True,
        )
    lines = []
    result = run_pretraining(
        lower,
        str(run_dir),
        shard_dir,
        vocab,
        tokenizer.special_ids,
        export=False,
        print_fn=lines.append,
        change_hyperparameters=True,
    )
    assert result.finished and result.steps_done == 8
    assert f"Resumed from {run_dir}/checkpoints/ckpt-2 (step 2)." in lines
    assert (
        "Resuming with changed hyperparameters (--change_hyperparameters): "
        "learning_rate: 0.001 -> 0.0002."
    ) in lines
    assert json.load(open(run_dir / "config.json"))["learning_rate"] == 2e-4
    # Strict JSON: the NaN step is on record, its loss as the string "nan"; the resumed
    # steps follow the new schedule, 2e-4 * (1 - 4/8) at step 4.
    logged = [json.loads(line, parse_constant=_refuse) for line in open(run_dir / "metrics.jsonl")]
    step_4 = [e for e in logged if e["step"] == 4]
    assert step_4[0]["total_loss"] == "nan" and step_4[0]["learning_rate"] == pytest.approx(5e-4)
    assert step_4[-1]["learning_rate"] == pytest.approx(1e-4)
    assert np.isfinite(step_4[-1]["total_loss"])


def _refuse(constant):
    raise ValueError(f"{constant} is not JSON")


@pytest.mark.slow
def test_a_nan_after_changed_hyperparameters_leaves_the_runs_config_as_it_was(corpus, tmp_path):
    vocab, shard_dir, tokenizer = corpus
    run_dir = tmp_path / "run"
    quiet = dict(export=False, print_fn=lambda _: None)
    settings = dict(save_checkpoints_steps=2, log_every_steps=2)
    run_pretraining(
        tiny(num_train_steps=4, **settings),
        str(run_dir),
        shard_dir,
        vocab,
        tokenizer.special_ids,
        **quiet,
    )
    before = (run_dir / "config.json").read_text()
    lines = []
    with pytest.raises(NonFiniteError, match="the last checkpoint, .*/ckpt-4, is finite"):
        run_pretraining(
            tiny(num_train_steps=8, learning_rate=1e30, **settings),
            str(run_dir),
            shard_dir,
            vocab,
            tokenizer.special_ids,
            change_hyperparameters=True,
            export=False,
            print_fn=lines.append,
        )
    # No checkpoint holds a step of the new rate: config.json is the one of the checkpoints.
    assert json.loads((run_dir / "config.json").read_text()) == {
        **json.loads(before),
        "num_train_steps": 8,
    }
    assert (
        f"{run_dir}/config.json keeps the run's previous hyperparameters: no checkpoint was "
        "saved with the new ones (learning_rate: 0.001 -> 1e+30)."
    ) in lines
    # metrics.jsonl is strict JSON although the losses were not finite.
    logged = [json.loads(line, parse_constant=_refuse) for line in open(run_dir / "metrics.jsonl")]
    assert {e["total_loss"] for e in logged if e["step"] > 4} <= {"nan", "inf"}
    # The original command (longer) resumes from the last good checkpoint.
    again = []
    result = run_pretraining(
        tiny(num_train_steps=8, **settings),
        str(run_dir),
        shard_dir,
        vocab,
        tokenizer.special_ids,
        export=False,
        print_fn=again.append,
    )
    assert result.finished and f"Resumed from {run_dir}/checkpoints/ckpt-4 (step 4)." in again


@pytest.mark.slow
def test_resuming_skips_a_damaged_newest_checkpoint_and_never_restarts_unasked(corpus, tmp_path):
    vocab, shard_dir, tokenizer = corpus
    run_dir = tmp_path / "run"
    checkpoints = run_dir / "checkpoints"
    settings = dict(save_checkpoints_steps=2, keep_checkpoint_max=5)
    run_pretraining(
        tiny(num_train_steps=6, **settings),
        str(run_dir),
        shard_dir,
        vocab,
        tokenizer.special_ids,
        export=False,
        print_fn=lambda _: None,
    )
    os.remove(checkpoints / "ckpt-6.index")
    lines = []
    result = run_pretraining(
        tiny(num_train_steps=8, **settings),
        str(run_dir),
        shard_dir,
        vocab,
        tokenizer.special_ids,
        export=False,
        print_fn=lines.append,
    )
    assert result.steps_done == 8
    assert f"Resumed from {checkpoints}/ckpt-4 (step 4)." in lines
    damaged = [line for line in lines if "is damaged" in line]
    assert len(damaged) == 1 and damaged[0].startswith(
        f"Checkpoint {checkpoints}/ckpt-6 is damaged (ckpt-6.index is missing): skipped; its "
        f"files are kept in {checkpoints}/set_aside/"
    )
    kept = checkpoints / "set_aside" / os.listdir(checkpoints / "set_aside")[0]
    assert os.listdir(kept) == ["ckpt-6.data-00000-of-00001"]
    state = tf.train.get_checkpoint_state(str(checkpoints))
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == [
        "ckpt-2",
        "ckpt-4",
        "ckpt-6",
        "ckpt-8",
    ]
    # No checkpoint usable: refused, nothing changed, unless --restart is asked for.
    for name in os.listdir(checkpoints):
        if name.endswith(".index"):
            os.remove(checkpoints / name)
    before = sorted(os.listdir(checkpoints))
    with pytest.raises(RunError, match="none can be resumed from .* pass --restart"):
        run_pretraining(
            tiny(num_train_steps=8, **settings),
            str(run_dir),
            shard_dir,
            vocab,
            tokenizer.special_ids,
            export=False,
            print_fn=lambda _: None,
        )
    assert sorted(os.listdir(checkpoints)) == before
    lines = []
    result = run_pretraining(
        tiny(num_train_steps=2, **settings),
        str(run_dir),
        shard_dir,
        vocab,
        tokenizer.special_ids,
        export=False,
        print_fn=lines.append,
        restart=True,
    )
    assert result.steps_done == 2
    moved = [p for p in os.listdir(run_dir) if p.startswith("checkpoints.before-restart-")]
    assert len(moved) == 1 and sorted(os.listdir(run_dir / moved[0])) == before
    assert any(
        line.startswith("Warning: --restart: training starts again from step 0") for line in lines
    )


def test_a_run_directory_in_use_is_refused_and_a_dead_holders_lock_taken_over(corpus, tmp_path):
    from electra_tf.artifacts.run_lock import Holder, RunLock, RunLocked

    vocab, shard_dir, tokenizer = corpus
    run_dir = tmp_path / "run"
    with RunLock(str(run_dir)):
        with pytest.raises(
            RunLocked,
            match=rf"^--output_dir={run_dir} is in use by pid "
            rf"{os.getpid()} on ",
        ):
            run_pretraining(
                tiny(num_train_steps=2),
                str(run_dir),
                shard_dir,
                vocab,
                tokenizer.special_ids,
                print_fn=lambda _: None,
            )
        assert os.listdir(run_dir) == [".lock"]
    # A holder killed with -9 leaves its file behind, unlocked.
    (run_dir).mkdir(exist_ok=True)
    (run_dir / ".lock").write_text(Holder(999999, "vm", "2020-01-01 00:00:00", "x").to_json())
    lines = []
    result = run_pretraining(
        tiny(num_train_steps=2),
        str(run_dir),
        shard_dir,
        vocab,
        tokenizer.special_ids,
        export=False,
        print_fn=lines.append,
    )
    assert result.finished
    assert (
        f"Taking over the lock of {run_dir} from pid 999999 on vm, started 2020-01-01 "
        "00:00:00, which ended without releasing it."
    ) in lines
    assert not (run_dir / ".lock").exists()
    assert json.load(open(run_dir / "result.json"))["steps_done"] == 2


def test_a_shard_corrupted_under_a_running_job_is_named(corpus, tmp_path):
    vocab, shard_dir, tokenizer = corpus
    copy = tmp_path / "shards"
    shutil.copytree(shard_dir, copy)
    shard = sorted(p for p in os.listdir(copy) if p.endswith("-of-00002"))[1]
    data = bytearray((copy / shard).read_bytes())
    data[len(data) // 2] ^= 0x55
    (copy / shard).write_bytes(bytes(data))
    run_dir = tmp_path / "run"
    with pytest.raises(RunError) as stopped:
        run_pretraining(
            tiny(num_train_steps=200, save_checkpoints_steps=100),
            str(run_dir),
            str(copy),
            vocab,
            tokenizer.special_ids,
            print_fn=lambda _: None,
        )
    text = str(stopped.value)
    assert re.match(
        rf"Shard {copy}/{shard} is corrupt \(corrupted record at byte \d+\); "
        rf"training stopped at step \d+, saved in {run_dir}/checkpoints/ckpt-\d+\. "
        "Delete that file and re-run the same command",
        text,
    ), text


@pytest.mark.slow
def test_a_full_disk_stops_with_one_line_and_leaves_no_temporary_files(
    corpus, tmp_path, monkeypatch
):
    import resource

    vocab, shard_dir, tokenizer = corpus
    run_dir = tmp_path / "run"
    original_save = tf.train.CheckpointManager.save

    def save_on_a_full_disk(manager, checkpoint_number=None, **kwargs):
        if checkpoint_number < 4:
            return original_save(manager, checkpoint_number=checkpoint_number, **kwargs)
        # Writes beyond 1 KB fail (EFBIG), as they do on a full disk (ENOSPC).
        handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, hard))
        try:
            return original_save(manager, checkpoint_number=checkpoint_number, **kwargs)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            signal.signal(signal.SIGXFSZ, handler)

    with monkeypatch.context() as patch:
        patch.setattr(tf.train.CheckpointManager, "save", save_on_a_full_disk)
        with pytest.raises(RunError) as stopped:
            run_pretraining(
                tiny(num_train_steps=6, save_checkpoints_steps=2),
                str(run_dir),
                shard_dir,
                vocab,
                tokenizer.special_ids,
                print_fn=lambda _: None,
            )
    text = str(stopped.value)
    assert text.startswith(f"Could not write the checkpoint of step 4 in {run_dir}/checkpoints: ")
    assert "File too large" in text and "\n" not in text
    assert text.endswith(
        "The previous checkpoints are intact (newest: ckpt-2); free some space "
        "and re-run the same command to resume."
    )
    assert sorted(os.listdir(run_dir / "checkpoints")) == [
        "checkpoint",
        "ckpt-2.data-00000-of-00001",
        "ckpt-2.index",
    ]
    # A config.json that cannot be written: one line, no config.json.tmp, the old one kept.
    before = (run_dir / "config.json").read_text()

    def full_disk_dump(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(run_dir / "config.json.tmp"))

    with monkeypatch.context() as patch:
        patch.setattr("electra_tf.config.json.dump", full_disk_dump)
        with pytest.raises(
            RunError,
            match=rf"^Could not write {run_dir}/config\.json\.tmp: No space left on device "
            rf"\(the disk holding {run_dir} is full\)\. Nothing half-written was left and the "
            "checkpoints saved so far are intact",
        ):
            run_pretraining(
                tiny(num_train_steps=6, save_checkpoints_steps=2),
                str(run_dir),
                shard_dir,
                vocab,
                tokenizer.special_ids,
                print_fn=lambda _: None,
            )
    assert sorted(os.listdir(run_dir)) == [
        "checkpoints",
        "config.json",
        "data.json",
        "identity.json",
        "metrics.jsonl",
        "tensorboard",
        "vocab.txt",
    ]
    assert (run_dir / "config.json").read_text() == before
    # With room again, the run resumes from the last checkpoint written.
    lines = []
    result = run_pretraining(
        tiny(num_train_steps=6, save_checkpoints_steps=2),
        str(run_dir),
        shard_dir,
        vocab,
        tokenizer.special_ids,
        export=False,
        print_fn=lines.append,
    )
    assert result.finished and f"Resumed from {run_dir}/checkpoints/ckpt-2 (step 2)." in lines


@pytest.mark.slow
def test_two_worker_processes_train_in_lockstep_and_only_the_chief_writes(corpus, tmp_path):
    from multi_worker_support import SETTINGS, run_workers

    vocab, shard_dir, tokenizer = corpus
    run_dir = tmp_path / "run"
    outputs = run_workers(
        tmp_path,
        "pretrain",
        lambda index: (shard_dir, vocab, run_dir, tmp_path / f"weights{index}.npz"),
    )
    # Both workers hold the same weights after the steps...
    weights = [np.load(tmp_path / f"weights{i}.npz") for i in range(2)]
    for name in weights[0].files:
        np.testing.assert_array_equal(weights[0][name], weights[1][name])
    # ...which are those of one process training on the same global batches.
    single = run_pretraining(
        tiny(**SETTINGS),
        str(tmp_path / "single"),
        shard_dir,
        vocab,
        tokenizer.special_ids,
        print_fn=lambda _: None,
    )
    reference = ElectraPretrainer(tiny(**SETTINGS))
    reference.build_from_batch(dummy_batch(tiny(**SETTINGS)))
    tf.train.Checkpoint(model=reference).restore(
        tf.train.latest_checkpoint(os.path.join(single.run_dir, "checkpoints"))
    ).expect_partial()
    for i, variable in enumerate(reference.trainable_variables):
        np.testing.assert_allclose(
            weights[0][f"arr_{i}"], variable.numpy(), rtol=1e-4, atol=2e-6, err_msg=variable.path
        )
    # Checkpoints, logs and the export come from the chief (worker 0) only;
    # the other worker's scratch checkpoints are gone.
    state = tf.train.get_checkpoint_state(str(run_dir / "checkpoints"))
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["ckpt-2", "ckpt-4"]
    assert len(os.listdir(run_dir / "tensorboard")) == 1
    assert (run_dir / "export" / "discriminator.keras").exists()
    assert os.listdir(tmp_path / "tmp1") == []
    assert "Run directory" in outputs[0] and "[worker-1] Run directory" in outputs[1]


def test_flops_budget_sets_the_steps_and_metrics_log_records_them(corpus, tmp_path):
    vocab, shard_dir, tokenizer = corpus
    per_step = train_flops_per_step(tiny(objective="mlm"))
    run_dir = str(tmp_path / "run")
    lines = []
    result = run_pretraining(
        tiny(objective="mlm", num_train_steps=1000, max_train_flops=4.5 * per_step),
        run_dir,
        shard_dir,
        vocab,
        tokenizer.special_ids,
        print_fn=lines.append,
        export=False,
    )
    assert result.finished and result.steps_done == 4
    assert any("--max_train_flops" in line and "4 steps" in line for line in lines)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    assert [r["step"] for r in records] == [2, 4]
    assert records[-1]["train_flops"] == pytest.approx(4 * per_step)
    assert "disc_loss" not in records[-1] and np.isfinite(records[-1]["masked_lm_loss"])


@pytest.mark.slow
def test_two_stage_run_switches_once_and_resumes_in_the_second_stage(corpus, tmp_path):
    vocab, shard_dir, tokenizer = corpus

    def two_stage(steps):
        return tiny(
            training="two_stage",
            weight_sharing="none",
            generator_hidden_fraction=1.0,
            num_heads=None,
            two_stage_generator_steps=2,
            num_train_steps=steps,
        )

    run_dir = str(tmp_path / "run")
    lines = []
    run_pretraining(
        two_stage(3),
        run_dir,
        shard_dir,
        vocab,
        tokenizer.special_ids,
        print_fn=lines.append,
        export=False,
    )
    assert sum("starts from the generator" in line for line in lines) == 1
    lines.clear()
    result = run_pretraining(
        two_stage(4),
        run_dir,
        shard_dir,
        vocab,
        tokenizer.special_ids,
        print_fn=lines.append,
        export=False,
    )
    assert result.steps_done == 4
    assert not any("starts from the generator" in line for line in lines)  # not copied again
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    assert "disc_loss" not in records[0] and records[0]["step"] == 2  # generator stage
    assert "disc_loss" in records[-1] and records[-1]["step"] == 4


@pytest.mark.slow
def test_two_stage_boundary_is_kept_when_a_resumed_run_is_extended(corpus, tmp_path):
    vocab, shard_dir, tokenizer = corpus

    def two_stage(steps):  # the boundary left to its default, half of the steps
        return tiny(
            training="two_stage",
            weight_sharing="none",
            generator_hidden_fraction=1.0,
            num_heads=None,
            num_train_steps=steps,
        )

    run_dir = str(tmp_path / "run")
    run_pretraining(
        two_stage(4),
        run_dir,
        shard_dir,
        vocab,
        tokenizer.special_ids,
        print_fn=lambda _: None,
        export=False,
    )
    lines = []
    result = run_pretraining(
        two_stage(6),
        run_dir,
        shard_dir,
        vocab,
        tokenizer.special_ids,
        print_fn=lines.append,
        export=False,
    )
    assert result.steps_done == 6
    # Still the discriminator's stage: 2 generator steps, as written in config.json.
    assert not any("Training the generator" in line for line in lines)
    with open(os.path.join(run_dir, "config.json")) as f:
        assert json.load(f)["two_stage_generator_steps"] == 2


def test_a_budget_smaller_than_a_step_is_refused(corpus, tmp_path):
    vocab, shard_dir, tokenizer = corpus
    with pytest.raises(RunError, match="--max_train_flops.*less than"):
        run_pretraining(
            tiny(max_train_flops=1e6),
            str(tmp_path / "run"),
            shard_dir,
            vocab,
            tokenizer.special_ids,
            print_fn=lambda _: None,
            export=False,
        )


@pytest.mark.slow
def test_held_out_evaluation_is_logged_and_summarised(corpus, tmp_path):
    vocab, shard_dir, tokenizer = corpus
    run_dir = str(tmp_path / "run")
    lines = []
    # The training shards stand in for held-out ones: this checks the mechanics.
    result = run_pretraining(
        tiny(num_eval_examples=8),
        run_dir,
        shard_dir,
        vocab,
        tokenizer.special_ids,
        print_fn=lines.append,
        eval_shard_dir=shard_dir,
    )
    evals = [line for line in lines if line.startswith("eval at step")]
    assert [line.split()[3] for line in evals] == ["2", "4", "6"]  # every checkpoint, once each
    assert all("8 held-out sequences" in line and "disc_auc" in line for line in evals)
    summary = next(line for line in lines if line.startswith("Held-out evaluation at step 6"))
    assert "AUC" in summary and "precision" in summary and "recall" in summary
    logged = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    auc = {r["step"]: r["eval/disc_auc"] for r in logged if "eval/disc_auc" in r}
    assert sorted(auc) == [2, 4, 6] and all(0.0 <= v <= 1.0 for v in auc.values())
    assert result.evaluation["disc_auc"] == auc[6]
    tags = read_scalars(os.path.join(run_dir, "tensorboard"))
    assert tags["eval/disc_auc"] == [2, 4, 6] and tags["eval/disc_recall"] == [2, 4, 6]
    assert "eval/replacements" in tags
    # An evaluation-only pass over the finished run gives the same numbers.
    lines.clear()
    again = run_pretraining(
        tiny(num_eval_examples=8),
        run_dir,
        shard_dir,
        vocab,
        tokenizer.special_ids,
        print_fn=lines.append,
        eval_shard_dir=shard_dir,
        eval_only=True,
    )
    assert again.evaluation == pytest.approx(result.evaluation)
    assert not any(line.startswith("step ") for line in lines)


def _damage_keeping_mtime(path, offset):
    """Flips 16 bytes of `path` at `offset` and gives the file back its times (silent damage)."""
    times = os.stat(path)
    data = bytearray(open(path, "rb").read())
    for i in range(offset, offset + 16):
        data[i] ^= 0xA5
    with open(path, "wb") as f:
        f.write(bytes(data))
    os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))


def _full_disk_from(step):
    """A `CheckpointManager.save` that fails with ENOSPC from checkpoint `step` on."""
    original = tf.train.CheckpointManager.save

    def save(manager, checkpoint_number=None, **kwargs):
        if checkpoint_number >= step:
            raise OSError(errno.ENOSPC, "No space left on device", manager.directory)
        return original(manager, checkpoint_number=checkpoint_number, **kwargs)

    return save


@pytest.mark.slow
@pytest.mark.parametrize(
    "fault, per_execution",
    [("damaged shard", 1), ("damaged shard", 3), ("nan", 1), ("signal", 1), ("full disk", 1)],
)
def test_a_run_stopped_by_any_fault_resumes_to_the_uninterrupted_result(
    corpus, tmp_path, monkeypatch, fault, per_execution
):
    """Stop, repair, resume: every tensor of the run equals the uninterrupted run's.

    The stop's checkpoint (or, when it saves none, the last one before it)
    holds one moment: weights, optimizer moments and step, batches seen and
    dropout seeds. A damaged shard is found while a step's batch is read; no
    part of that step may reach the checkpoint.
    """
    vocab, shard_dir, tokenizer = corpus
    config = tiny(
        num_train_steps=9,
        save_checkpoints_steps=3,
        keep_checkpoint_max=5,
        log_every_steps=per_execution,
        steps_per_execution=per_execution,
    )
    straight_dir, stopped_dir = str(tmp_path / "straight"), str(tmp_path / "stopped")
    quiet = dict(export=False, print_fn=lambda _: None)
    run_pretraining(config, straight_dir, shard_dir, vocab, tokenizer.special_ids, **quiet)
    shards = str(tmp_path / "shards")
    shutil.copytree(shard_dir, shards)
    extra = []
    with monkeypatch.context() as patch:
        if fault == "damaged shard":
            # The last records of a shard: read for the second window of 16
            # records, the batch of step 5 (after 4 steps of the first window).
            last = os.path.join(
                shards, sorted(p for p in os.listdir(shards) if p.endswith("-of-00002"))[1]
            )
            _damage_keeping_mtime(last, os.path.getsize(last) - 60)
        elif fault == "nan":
            patch.setattr(ElectraPretrainer, "_loss", _from_step_4(lambda loss: loss * np.nan))
        elif fault == "signal":
            extra = [_Interrupt(5)]
        else:
            patch.setattr(tf.train.CheckpointManager, "save", _full_disk_from(6))
        try:
            first = run_pretraining(
                config,
                stopped_dir,
                shards,
                vocab,
                tokenizer.special_ids,
                extra_callbacks=extra,
                **quiet,
            )
            stop = "interrupted" if first.interrupted else "finished"
        except RunError as error:
            stop = str(error)
    saved = (
        f"saved in {stopped_dir}/checkpoints/ckpt-4"
        if per_execution == 1
        else rf"inside a group of --steps_per_execution=3 steps, so the run resumes from "
        rf"{stopped_dir}/checkpoints/ckpt-3"
    )
    expected_stop = {
        "damaged shard": rf"^Shard {shards}/\S+ is corrupt .*; training stopped at step 4, "
        rf"{saved}\. ",
        "nan": r"^Training stopped at step 4: the loss is nan .* the last checkpoint, "
        rf"{stopped_dir}/checkpoints/ckpt-3, is finite",
        "signal": "^interrupted$",
        "full disk": rf"^Could not write the checkpoint of step 6 in {stopped_dir}/checkpoints: ",
    }[fault]
    assert re.search(expected_stop, stop), stop
    # The shard is rebuilt (the same bytes), and the same command resumes.
    shutil.rmtree(shards)
    shutil.copytree(shard_dir, shards)
    lines = []
    second = run_pretraining(
        config,
        stopped_dir,
        shards,
        vocab,
        tokenizer.special_ids,
        export=False,
        print_fn=lines.append,
    )
    assert second.finished and second.steps_done == 9
    resumed_from = {"damaged shard": 4 if per_execution == 1 else 3, "nan": 3, "signal": 5}.get(
        fault, 3
    )
    assert any(f"(step {resumed_from})." in line for line in lines if "Resumed" in line), lines
    path_a, straight = _checkpoint_values(straight_dir)
    path_b, resumed = _checkpoint_values(stopped_dir)
    assert os.path.basename(path_a) == os.path.basename(path_b) == "ckpt-9"
    assert straight.keys() == resumed.keys()
    different = [
        name
        for name in straight
        if not np.allclose(resumed[name], straight[name], rtol=1e-5, atol=1e-7)
    ]
    assert different == []


@pytest.mark.slow
@pytest.mark.parametrize("writer", ["savedmodel", "keras"])
def test_a_full_disk_while_exporting_is_one_line_and_the_next_run_exports(
    corpus, tmp_path, monkeypatch, writer
):
    vocab, shard_dir, tokenizer = corpus
    run_dir = tmp_path / "run"
    config = tiny(num_train_steps=2, save_checkpoints_steps=2)

    def no_room(self, path, *args, **kwargs):
        # What TensorFlow's and Python's writes raise on a full disk (seen on a full tmpfs).
        if writer == "savedmodel":
            raise tf.errors.ResourceExhaustedError(
                None, None, f"{path}/saved_model.pb.tmp0123; No space left on device"
            )
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    with monkeypatch.context() as patch:
        patch.setattr(keras.Model, "export" if writer == "savedmodel" else "save", no_room)
        with pytest.raises(RunError) as stopped:
            run_pretraining(
                config,
                str(run_dir),
                shard_dir,
                vocab,
                tokenizer.special_ids,
                print_fn=lambda _: None,
            )
    assert str(stopped.value) == (
        f"Could not write the export {run_dir}/export: No space left on device. Training is "
        "done and its checkpoints are intact (nothing of the export was left); free some "
        "space and re-run the same command to export."
    )
    assert sorted(os.listdir(run_dir)) == [
        "checkpoints",
        "config.json",
        "data.json",
        "identity.json",
        "metrics.jsonl",
        "tensorboard",
        "vocab.txt",
    ]
    lines = []
    result = run_pretraining(
        config, str(run_dir), shard_dir, vocab, tokenizer.special_ids, print_fn=lines.append
    )
    assert result.export_dir == str(run_dir / "export") and not any(
        line.startswith("step ") for line in lines
    )
    assert (run_dir / "export" / "discriminator_savedmodel" / "saved_model.pb").exists()


@pytest.mark.slow  # two tiny runs, about 10 s
def test_a_shard_damaged_before_the_start_stops_in_one_line_and_the_rerun_is_exact(
    corpus, tmp_path
):
    """Damage kept from the modification time is found by the rarity baseline's count,
    before the first step: one line naming the shard, nothing saved; rebuilt, the run
    ends with every tensor of a run never stopped."""
    vocab, shard_dir, tokenizer = corpus
    config = tiny(num_train_steps=2, save_checkpoints_steps=2, num_eval_examples=8)
    quiet = dict(export=False, print_fn=lambda _: None)
    straight_dir, stopped_dir = str(tmp_path / "straight"), str(tmp_path / "stopped")
    run_pretraining(
        config,
        straight_dir,
        shard_dir,
        vocab,
        tokenizer.special_ids,
        eval_shard_dir=shard_dir,
        **quiet,
    )
    shards = str(tmp_path / "shards")
    shutil.copytree(shard_dir, shards)
    first = os.path.join(shards, sorted(p for p in os.listdir(shards) if "-of-" in p)[0])
    _damage_keeping_mtime(first, 100)
    with pytest.raises(RunError) as stopped:
        run_pretraining(
            config,
            stopped_dir,
            shards,
            vocab,
            tokenizer.special_ids,
            eval_shard_dir=shards,
            **quiet,
        )
    message = str(stopped.value)
    assert re.match(
        rf"^Shard {first} is corrupt \(.+\); training stopped before step 1, nothing was "
        r"saved\. Delete that file and re-run the same command: the shard is rebuilt and "
        r"training resumes \(with --shard_dir, rebuild the shards where they were built\)\.$",
        message,
    ), message
    assert tf.train.latest_checkpoint(os.path.join(stopped_dir, "checkpoints")) is None
    shutil.rmtree(shards)
    shutil.copytree(shard_dir, shards)
    second = run_pretraining(
        config,
        stopped_dir,
        shards,
        vocab,
        tokenizer.special_ids,
        eval_shard_dir=shards,
        **quiet,
    )
    assert second.finished and second.steps_done == 2
    _, straight = _checkpoint_values(straight_dir)
    _, resumed = _checkpoint_values(stopped_dir)
    assert straight.keys() == resumed.keys()
    assert [name for name in straight if not np.array_equal(straight[name], resumed[name])] == []
