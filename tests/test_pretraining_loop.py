import json
import os
import signal

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.artifacts.pretrained import load_discriminator
from electra_tf.config import preset
from electra_tf.data.pipeline import dummy_batch
from electra_tf.data.shards import write_shards
from electra_tf.errors import RunError
from electra_tf.flops import train_flops_per_step
from electra_tf.modeling import kernels
from electra_tf.pretraining.pretrainer import ElectraPretrainer
from electra_tf.tokenization import WordPieceTokenizer
from electra_tf.training.pretraining_loop import RunConfigMismatch, run_pretraining

WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "to", "park", "big", "small",
         "red", "blue", "and", "with", "house", "tree", "bird", "sang"]
METRIC_TAGS = {"total_loss", "masked_lm_loss", "disc_loss", "masked_lm_accuracy",
               "sampled_masked_lm_accuracy", "disc_accuracy", "disc_precision", "disc_recall",
               "learning_rate", "sequences_per_second"}


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
    values = dict(vocab_size=26, hidden_size=32, num_layers=2, embedding_size=16, num_heads=2,
                  max_seq_length=24, train_batch_size=4, num_train_steps=6, num_warmup_steps=2,
                  learning_rate=1e-3, log_every_steps=2, save_checkpoints_steps=2,
                  keep_checkpoint_max=2, shuffle_buffer_size=16)
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
            values += [(event.step, float(tf.make_ndarray(v.tensor)))
                       for v in event.summary.value if v.tag == tag]
    return sorted(values)


def test_run_trains_logs_checkpoints_and_exports(corpus, tmp_path):
    vocab, shard_dir, tokenizer = corpus
    run_dir = str(tmp_path / "run")
    lines = []
    result = run_pretraining(tiny(), run_dir, shard_dir, vocab, tokenizer.special_ids,
                             print_fn=lines.append)
    assert result.finished and result.steps_done == 6 and not result.interrupted
    assert all(np.isfinite(v) for v in result.metrics.values())
    assert f"Kernels: {kernels.resolve('auto')} (--kernels=auto)." in lines
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
    assert [value for _, value in flops] == pytest.approx([2 * per_step, 4 * per_step,
                                                           6 * per_step], rel=1e-6)
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
        tf.train.latest_checkpoint(os.path.join(run_dir, "checkpoints"))).expect_partial()
    expected = trained.discriminator(inputs, training=False)["logits"].numpy()
    disc = load_discriminator(run_dir)
    np.testing.assert_allclose(disc(inputs, training=False)["logits"].numpy(), expected,
                               atol=1e-6)
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
    return path, {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
                  if "OBJECT_GRAPH" not in name and not name.startswith("save_counter")}


def test_interrupted_and_resumed_run_equals_a_straight_run(corpus, tmp_path):
    vocab, shard_dir, tokenizer = corpus
    config = tiny(save_checkpoints_steps=100)  # only the signal and the end save
    straight_dir, split_dir = str(tmp_path / "straight"), str(tmp_path / "split")
    run_pretraining(config, straight_dir, shard_dir, vocab, tokenizer.special_ids,
                    export=False, print_fn=lambda _: None)
    first = run_pretraining(config, split_dir, shard_dir, vocab, tokenizer.special_ids,
                            export=False, print_fn=lambda _: None,
                            extra_callbacks=[_Interrupt(3)])
    assert first.interrupted and first.steps_done == 3 and not first.finished
    assert tf.train.latest_checkpoint(os.path.join(split_dir, "checkpoints")).endswith("ckpt-3")
    lines = []
    second = run_pretraining(config, split_dir, shard_dir, vocab, tokenizer.special_ids,
                             export=False, print_fn=lines.append)
    assert second.finished and second.steps_done == 6
    assert any("Resumed from" in line and "step 3" in line for line in lines)
    path_a, straight = _checkpoint_values(straight_dir)
    path_b, resumed = _checkpoint_values(split_dir)
    assert os.path.basename(path_a) == os.path.basename(path_b) == "ckpt-6"
    assert straight.keys() == resumed.keys()
    # Weights, optimizer moments, step counters and the data position all agree.
    for name in straight:
        np.testing.assert_allclose(resumed[name], straight[name], rtol=1e-5, atol=1e-7,
                                   err_msg=name)


def test_a_run_of_another_configuration_is_refused_untouched(corpus, tmp_path):
    vocab, shard_dir, tokenizer = corpus
    run_dir = str(tmp_path / "run")
    run_pretraining(tiny(num_train_steps=2), run_dir, shard_dir, vocab, tokenizer.special_ids,
                    export=False, print_fn=lambda _: None)
    before = open(os.path.join(run_dir, "config.json")).read()
    with pytest.raises(RunConfigMismatch, match=r"model\.hidden_size: 32 -> 64"):
        run_pretraining(tiny(num_train_steps=2, hidden_size=64), run_dir, shard_dir, vocab,
                        tokenizer.special_ids, export=False, print_fn=lambda _: None)
    assert open(os.path.join(run_dir, "config.json")).read() == before
    other_vocab = tmp_path / "other_vocab.txt"
    other_vocab.write_text(open(vocab).read().replace("park", "garden"))
    with pytest.raises(RunConfigMismatch, match="vocabulary"):
        run_pretraining(tiny(num_train_steps=2), run_dir, shard_dir, str(other_vocab),
                        tokenizer.special_ids, export=False, print_fn=lambda _: None)
    # Extending the schedule is allowed, and so are other kernels: it resumes.
    lines = []
    result = run_pretraining(tiny(num_train_steps=3, kernels="reference"), run_dir, shard_dir,
                             vocab, tokenizer.special_ids, export=False, print_fn=lines.append)
    assert result.steps_done == 3
    assert "Kernels: reference (--kernels=reference)." in lines


@pytest.mark.parametrize("precision", ["float16", "bfloat16"])
def test_mixed_precision_runs_reach_the_target_and_export_float32(corpus, tmp_path, precision):
    vocab, shard_dir, tokenizer = corpus
    run_dir = str(tmp_path / "run")
    # float16 skips the first steps (loss-scale overflow); the run must still
    # complete all 3 optimizer steps, and export float32 models.
    result = run_pretraining(tiny(num_train_steps=3, mixed_precision=precision,
                                  save_checkpoints_steps=1), run_dir, shard_dir, vocab,
                             tokenizer.special_ids, print_fn=lambda _: None)
    assert result.finished and result.steps_done == 3
    assert np.isfinite(result.metrics["total_loss"])
    checkpoints = tf.train.get_checkpoint_state(os.path.join(run_dir, "checkpoints"))
    assert os.path.basename(checkpoints.model_checkpoint_path) == "ckpt-3"
    assert not any(p.endswith("ckpt-0") for p in checkpoints.all_model_checkpoint_paths)
    keras.mixed_precision.set_global_policy("float32")
    disc = load_discriminator(run_dir)
    assert disc(_sample_inputs(tokenizer))["logits"].dtype == tf.float32


def test_batch_not_divisible_by_replicas_is_refused_before_writing(corpus, tmp_path,
                                                                    two_replica_strategy):
    vocab, shard_dir, tokenizer = corpus
    run_dir = tmp_path / "run"
    with pytest.raises(ValueError, match="--train_batch_size=5 is not divisible by the 2"):
        run_pretraining(tiny(train_batch_size=5), str(run_dir), shard_dir, vocab,
                        tokenizer.special_ids, strategy=two_replica_strategy,
                        print_fn=lambda _: None)
    assert not run_dir.exists()


def test_a_diverged_float16_run_stops_with_an_error_instead_of_looping(corpus, tmp_path,
                                                                       monkeypatch):
    vocab, shard_dir, tokenizer = corpus
    original = ElectraPretrainer._loss

    def nan_loss(self, local, counts):
        return original(self, local, counts) * float("nan")

    monkeypatch.setattr(ElectraPretrainer, "_loss", nan_loss)
    run_dir = tmp_path / "run"
    with pytest.raises(RunError, match="batches in a row gave non-finite gradients at step 0"):
        run_pretraining(tiny(num_train_steps=40, mixed_precision="float16"), str(run_dir),
                        shard_dir, vocab, tokenizer.special_ids, print_fn=lambda _: None)
    assert (run_dir / "config.json").exists()


def test_two_worker_processes_train_in_lockstep_and_only_the_chief_writes(corpus, tmp_path):
    from multi_worker_support import SETTINGS, run_workers

    vocab, shard_dir, tokenizer = corpus
    run_dir = tmp_path / "run"
    outputs = run_workers(tmp_path, "pretrain", lambda index: (
        shard_dir, vocab, run_dir, tmp_path / f"weights{index}.npz"))
    # Both workers hold the same weights after the steps...
    weights = [np.load(tmp_path / f"weights{i}.npz") for i in range(2)]
    for name in weights[0].files:
        np.testing.assert_array_equal(weights[0][name], weights[1][name])
    # ...which are those of one process training on the same global batches.
    single = run_pretraining(tiny(**SETTINGS), str(tmp_path / "single"), shard_dir, vocab,
                             tokenizer.special_ids, print_fn=lambda _: None)
    reference = ElectraPretrainer(tiny(**SETTINGS))
    reference.build_from_batch(dummy_batch(tiny(**SETTINGS)))
    tf.train.Checkpoint(model=reference).restore(tf.train.latest_checkpoint(
        os.path.join(single.run_dir, "checkpoints"))).expect_partial()
    for i, variable in enumerate(reference.trainable_variables):
        np.testing.assert_allclose(weights[0][f"arr_{i}"], variable.numpy(), rtol=1e-4,
                                   atol=2e-6, err_msg=variable.path)
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
    result = run_pretraining(tiny(objective="mlm", num_train_steps=1000,
                                  max_train_flops=4.5 * per_step),
                             run_dir, shard_dir, vocab, tokenizer.special_ids,
                             print_fn=lines.append, export=False)
    assert result.finished and result.steps_done == 4
    assert any("--max_train_flops" in line and "4 steps" in line for line in lines)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    assert [r["step"] for r in records] == [2, 4]
    assert records[-1]["train_flops"] == pytest.approx(4 * per_step)
    assert "disc_loss" not in records[-1] and np.isfinite(records[-1]["masked_lm_loss"])


def test_two_stage_run_switches_once_and_resumes_in_the_second_stage(corpus, tmp_path):
    vocab, shard_dir, tokenizer = corpus

    def two_stage(steps):
        return tiny(training="two_stage", weight_sharing="none", generator_hidden_fraction=1.0,
                    num_heads=None, two_stage_generator_steps=2, num_train_steps=steps)

    run_dir = str(tmp_path / "run")
    lines = []
    run_pretraining(two_stage(3), run_dir, shard_dir, vocab, tokenizer.special_ids,
                    print_fn=lines.append, export=False)
    assert sum("starts from the generator" in line for line in lines) == 1
    lines.clear()
    result = run_pretraining(two_stage(4), run_dir, shard_dir, vocab, tokenizer.special_ids,
                             print_fn=lines.append, export=False)
    assert result.steps_done == 4
    assert not any("starts from the generator" in line for line in lines)  # not copied again
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    assert "disc_loss" not in records[0] and records[0]["step"] == 2  # generator stage
    assert "disc_loss" in records[-1] and records[-1]["step"] == 4


def test_two_stage_boundary_is_kept_when_a_resumed_run_is_extended(corpus, tmp_path):
    vocab, shard_dir, tokenizer = corpus

    def two_stage(steps):  # the boundary left to its default, half of the steps
        return tiny(training="two_stage", weight_sharing="none", generator_hidden_fraction=1.0,
                    num_heads=None, num_train_steps=steps)

    run_dir = str(tmp_path / "run")
    run_pretraining(two_stage(4), run_dir, shard_dir, vocab, tokenizer.special_ids,
                    print_fn=lambda _: None, export=False)
    lines = []
    result = run_pretraining(two_stage(6), run_dir, shard_dir, vocab, tokenizer.special_ids,
                             print_fn=lines.append, export=False)
    assert result.steps_done == 6
    # Still the discriminator's stage: 2 generator steps, as written in config.json.
    assert not any("Training the generator" in line for line in lines)
    with open(os.path.join(run_dir, "config.json")) as f:
        assert json.load(f)["two_stage_generator_steps"] == 2


def test_a_budget_smaller_than_a_step_is_refused(corpus, tmp_path):
    vocab, shard_dir, tokenizer = corpus
    with pytest.raises(RunError, match="--max_train_flops.*less than"):
        run_pretraining(tiny(max_train_flops=1e6), str(tmp_path / "run"), shard_dir, vocab,
                        tokenizer.special_ids, print_fn=lambda _: None, export=False)


def test_held_out_evaluation_is_logged_and_summarised(corpus, tmp_path):
    vocab, shard_dir, tokenizer = corpus
    run_dir = str(tmp_path / "run")
    lines = []
    # The training shards stand in for held-out ones: this checks the mechanics.
    result = run_pretraining(tiny(num_eval_examples=8), run_dir, shard_dir, vocab,
                             tokenizer.special_ids, print_fn=lines.append,
                             eval_shard_dir=shard_dir)
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
    again = run_pretraining(tiny(num_eval_examples=8), run_dir, shard_dir, vocab,
                            tokenizer.special_ids, print_fn=lines.append,
                            eval_shard_dir=shard_dir, eval_only=True)
    assert again.evaluation == pytest.approx(result.evaluation)
    assert not any(line.startswith("step ") for line in lines)
