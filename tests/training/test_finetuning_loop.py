"""The trial loop: a tiny classifier learns, trials resume, every task writes one schema."""

import json
import os
import re

import keras
import numpy as np
import pytest
import tensorflow as tf
from finetuning_support import (
    make_pretrained_dir,
    toy_regression_task,
    toy_sentences,
    toy_tagging_task,
)

from electra_tf.artifacts.pretrained import resolve_pretrained
from electra_tf.errors import RunError
from electra_tf.finetuning.classification import data as tasks
from electra_tf.finetuning.classification import features
from electra_tf.finetuning.classification.task import ClassificationTask
from electra_tf.finetuning.kind.settings import FinetuneSettings
from electra_tf.finetuning.question_answering.data import QAExample, SquadSplit
from electra_tf.finetuning.question_answering.task import SquadTask
from electra_tf.finetuning.saving import load_finetuned
from electra_tf.finiteness import NonFiniteError
from electra_tf.tokenization import WordPieceTokenizer
from electra_tf.training.finetuning_loop import run_trials


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    return resolve_pretrained(make_pretrained_dir(str(tmp_path_factory.mktemp("pretrained"))))


def _toy_task(count):
    rows = toy_sentences(count)
    texts = [r[0] for r in rows]
    labels = np.array([r[1] for r in rows], np.int64)
    indices = [str(i) for i in range(count)]
    train = tasks.Split("train", "memory", texts, None, labels, indices)
    # Dev = the training set: the check is that the rule is learned at all.
    dev = tasks.Split("dev", "memory", texts, None, labels, indices)
    test = tasks.Split("test", "memory", texts, None, None, indices)
    return ClassificationTask(
        tasks.glue_task("sst2"), tasks.TaskData(train, {"dev": dev}, {"SST-2": test})
    )


@pytest.mark.slow
def test_classifier_learns_the_toy_rule_and_later_trials_are_added(pretrained, tmp_path):
    settings = FinetuneSettings(
        output_dir=str(tmp_path / "out"),
        train_batch_size=8,
        learning_rate=3e-3,
        num_train_epochs=10,
        log_every_steps=100,
    )
    lines = []
    results = run_trials(_toy_task(16), pretrained, settings, print_fn=lines.append)
    trial = results["trials"][0]
    assert trial["dev"]["accuracy"] >= 0.9
    assert len(trial["epochs"]) == 10 and trial["epochs"][-1]["step"] == 20
    assert all(entry["dev"] for entry in trial["epochs"])  # classification: every epoch
    assert results["median"]["accuracy"] == trial["dev"]["accuracy"]
    assert results["all"]["accuracy"] == [trial["dev"]["accuracy"]]
    assert results["best_trial"] == 0 and results["primary_metric"] == "accuracy"
    assert any("ETA" in line for line in lines)
    assert any(line.startswith("epoch 10/10") for line in lines)
    with open(tmp_path / "out" / "results.json", encoding="utf-8") as f:
        assert json.load(f)["trials"][0]["dev"] == trial["dev"]

    # Test predictions in the GLUE format agree with the reloaded model; the
    # dev split's are written beside the score.
    trial_dir = tmp_path / "out" / "trial_0"
    assert trial["predictions"] == {
        "dev": str(trial_dir / "dev_predictions.tsv"),
        "SST-2": str(trial_dir / "SST-2.tsv"),
    }
    with open(trial_dir / "SST-2.tsv", encoding="utf-8") as f:
        written = [line.rstrip("\n").split("\t") for line in f]
    assert written[0] == ["index", "prediction"]
    assert [row[0] for row in written[1:]] == [str(i) for i in range(16)]
    reloaded, info = load_finetuned(str(trial_dir))
    assert info["kind"] == "classification" and info["task"]["label_names"] == ["0", "1"]
    assert trial["model"] == str(trial_dir / "model.json")
    tokenizer = WordPieceTokenizer(str(trial_dir / "vocab.txt"))
    encoded = features.encode(tokenizer, _toy_task(16).data.train.texts_a, None, 128)
    logits = reloaded.predict(features.make_dataset(encoded, None, 32), verbose=0)
    assert [str(int(i)) for i in np.argmax(logits, -1)] == [row[1] for row in written[1:]]
    # What is kept only while a trial runs is gone.
    assert not os.path.exists(trial_dir / "checkpoints")
    assert not os.path.exists(trial_dir / "history.json")

    # Re-running with one more trial keeps trial 0 and runs only trial 1.
    lines.clear()
    more = run_trials(
        _toy_task(16),
        pretrained,
        FinetuneSettings(**{**settings.__dict__, "num_trials": 2}),
        print_fn=lines.append,
    )
    assert any("Trial 0: already finished" in line for line in lines)
    assert [t["trial"] for t in more["trials"]] == [0, 1]
    assert more["trials"][0] == json.loads(json.dumps(trial))
    values = more["all"]["accuracy"]
    assert more["median"]["accuracy"] == pytest.approx((values[0] + values[1]) / 2)

    # Other hyperparameters in the same directory are refused.
    with pytest.raises(RunError, match="learning_rate"):
        run_trials(
            _toy_task(16),
            pretrained,
            FinetuneSettings(**{**settings.__dict__, "learning_rate": 1e-4}),
            print_fn=lines.append,
        )


class _Crash(keras.callbacks.Callback):
    def __init__(self, step):
        super().__init__()
        self.step = step

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) == self.step:
            raise RuntimeError("simulated crash")


def _leaves(tree, path=""):
    """(path, value) of every leaf of a JSON-like tree, in a stable order."""
    if isinstance(tree, dict):
        return [leaf for k in sorted(tree) for leaf in _leaves(tree[k], f"{path}/{k}")]
    if isinstance(tree, list):
        return [leaf for i, v in enumerate(tree) for leaf in _leaves(v, f"{path}/{i}")]
    return [(path, tree)]


def _comparable(trial):
    """A trial's leaves but what may differ between two runs of it (timings, paths)."""
    return _leaves(
        {
            k: v
            for k, v in trial.items()
            if k not in ("train_seconds", "predict_seconds", "model", "predictions")
        }
    )


def _squad_split(count):
    """Questions are a word of the context; the answer is that word."""
    words = ["movie", "film", "plot", "actor", "story", "good", "bad", "fun"]
    examples = []
    for i in range(count):
        context = " ".join(words[i % 4 : i % 4 + 4])
        answer = words[i % 4 + 1]
        examples.append(QAExample(f"q{i}", answer, context, [(answer, context.index(answer))]))
    return SquadSplit(examples, "memory")


def _squad_task(count, version="1.1"):
    return SquadTask(
        _squad_split(count),
        _squad_split(count),
        version,
        max_seq_length=16,
        doc_stride=8,
        max_query_length=4,
        beam_size=3,
    )


def _tagging_task(count):
    return toy_tagging_task(count, with_test=True)


@pytest.mark.slow
@pytest.mark.parametrize(
    "make_task", [_toy_task, _squad_task, _tagging_task], ids=["sst2", "squad", "tagging"]
)
def test_interrupted_trial_resumes_to_the_uninterrupted_result(pretrained, tmp_path, make_task):
    """Crashed at step 5 of 8 with a checkpoint at step 4, resumed: the same trial.

    The tiny pre-trained model has dropout, so this also checks that the
    dropout masks continue where they stopped.
    """

    def settings(name):
        return FinetuneSettings(
            output_dir=str(tmp_path / name),
            train_batch_size=4,
            learning_rate=3e-3,
            num_train_epochs=2,
            log_every_steps=100,
            save_checkpoints_steps=2,
        )

    straight = run_trials(make_task(16), pretrained, settings("straight"), print_fn=lambda _: None)
    assert straight["trials"][0]["steps"] == 8
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_trials(
            make_task(16),
            pretrained,
            settings("crashed"),
            print_fn=lambda _: None,
            extra_callbacks=[_Crash(5)],
        )
    assert os.path.isdir(tmp_path / "crashed" / "trial_0" / "checkpoints")
    assert not os.path.exists(tmp_path / "crashed" / "results.json")
    lines = []
    resumed = run_trials(make_task(16), pretrained, settings("crashed"), print_fn=lines.append)
    assert any("(step 4)" in line for line in lines)
    expected = _comparable(straight["trials"][0])
    got = _comparable(resumed["trials"][0])
    assert [path for path, _ in got] == [path for path, _ in expected]
    assert [value for _, value in got] == pytest.approx(
        [value for _, value in expected], rel=1e-5, abs=1e-6
    )
    assert resumed["trials"][0]["epochs"][0]["step"] == 4  # recorded before the crash
    a, _ = load_finetuned(str(tmp_path / "straight" / "trial_0"))
    b, _ = load_finetuned(str(tmp_path / "crashed" / "trial_0"))
    for x, y in zip(a.weights, b.weights):
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-5, atol=1e-6, err_msg=x.path)
    files = straight["trials"][0]["predictions"]
    assert files and set(files) == set(resumed["trials"][0]["predictions"])
    for name, path in files.items():
        with (
            open(path, encoding="utf-8") as f,
            open(resumed["trials"][0]["predictions"][name], encoding="utf-8") as g,
        ):
            assert f.read() == g.read(), name


def test_an_output_directory_in_use_is_refused(pretrained, tmp_path):
    from electra_tf.artifacts.run_lock import RunLock, RunLocked

    output = tmp_path / "out"
    settings = FinetuneSettings(output_dir=str(output), train_batch_size=8, num_train_epochs=1)
    with RunLock(str(output)):
        with pytest.raises(
            RunLocked,
            match=rf"^--output_dir={output} is in use by pid "
            rf"{os.getpid()} on ",
        ):
            run_trials(_toy_task(8), pretrained, settings, print_fn=lambda _: None)
        assert os.listdir(output) == [".lock"]


def test_weights_that_are_not_finite_are_refused_before_training(tmp_path):
    import keras

    directory = make_pretrained_dir(str(tmp_path / "diverged"))
    model_file = os.path.join(directory, "discriminator.keras")
    model = keras.saving.load_model(model_file)
    model.weights[3].assign(np.full(model.weights[3].shape, np.nan, np.float32))
    model.save(model_file)
    settings = FinetuneSettings(
        output_dir=str(tmp_path / "out"), train_batch_size=8, num_train_epochs=1
    )
    with pytest.raises(
        NonFiniteError,
        match=rf"^{model_file}: 1 of \d+ weight tensors hold NaN "
        "or infinite values",
    ):
        run_trials(_toy_task(8), resolve_pretrained(directory), settings, print_fn=lambda _: None)
    assert not os.path.exists(tmp_path / "out" / "results.json")


def test_a_trial_whose_loss_turns_nan_stops_with_its_last_checkpoint_intact(pretrained, tmp_path):
    settings = FinetuneSettings(
        output_dir=str(tmp_path / "out"),
        train_batch_size=4,
        learning_rate=3e-3,
        num_train_epochs=2,
        log_every_steps=100,
        save_checkpoints_steps=2,
    )
    with pytest.raises(
        NonFiniteError,
        match=r"^Training stopped at step 3: the loss is nan \(not "
        r"finite\); nothing after it was saved: the last "
        r"checkpoint, .*/ckpt-2, is finite and intact\. Try a "
        r"lower --learning_rate",
    ):
        run_trials(
            _toy_task(16),
            pretrained,
            settings,
            print_fn=lambda _: None,
            extra_callbacks=[_PoisonWeights(2)],
        )
    checkpoints = tmp_path / "out" / "trial_0" / "checkpoints"
    assert tf.train.latest_checkpoint(str(checkpoints)).endswith("ckpt-2")


class _PoisonWeights(keras.callbacks.Callback):
    """Sets one weight to NaN before the step after `at`: that step's loss is NaN."""

    def __init__(self, at):
        super().__init__()
        self.at = at

    def on_train_batch_begin(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) == self.at:
            weight = self.model.trainable_weights[0]
            weight.assign(np.full(weight.shape, np.nan, np.float32))


@pytest.mark.slow
def test_squad_and_classification_write_the_same_schema(pretrained, tmp_path):
    def settings(name):
        return FinetuneSettings(
            output_dir=str(tmp_path / name),
            train_batch_size=4,
            num_train_epochs=1,
            log_every_steps=100,
        )

    classification = run_trials(_toy_task(8), pretrained, settings("sst2"), print_fn=lambda _: None)
    lines = []
    qa = run_trials(_squad_task(6, "2.0"), pretrained, settings("squad"), print_fn=lines.append)
    assert list(qa) == list(classification)
    assert list(qa["trials"][0]) == list(classification["trials"][0])
    assert qa["task"]["name"] == "squad20" and qa["primary_metric"] == "f1"
    assert qa["data"] == {
        "num_train_questions": 6,
        "num_train_windows": 6,
        "skipped_train_questions": 0,
    }
    assert set(qa["median"]) >= {"exact_match", "f1", "HasAns_exact", "best_f1"}
    assert any(line.startswith("epoch 1/1") and "f1" in line for line in lines)
    # Trial 0's answers are also where the official scripts expect them.
    for name in ("predictions.json", "null_odds.json"):
        assert qa["trials"][0]["predictions"][name] == str(tmp_path / "squad" / "trial_0" / name)
        with (
            open(tmp_path / "squad" / name, encoding="utf-8") as f,
            open(tmp_path / "squad" / "trial_0" / name, encoding="utf-8") as g,
        ):
            assert json.load(f) == json.load(g)
    assert "nbest_predictions.json" in qa["trials"][0]["predictions"]
    model, info = load_finetuned(str(tmp_path / "squad" / "trial_0"))
    assert type(model).__name__ == "ElectraQA"
    assert info["kind"] == "question_answering" and info["squad_version"] == "2.0"


@pytest.mark.slow
def test_tagging_writes_the_same_schema_and_conlleval_predictions(pretrained, tmp_path):
    from electra_tf.artifacts.tagged_predictions import read_tagged
    from electra_tf.finetuning.tagging.metrics import score

    settings = FinetuneSettings(
        output_dir=str(tmp_path / "ner"),
        train_batch_size=8,
        learning_rate=3e-3,
        num_train_epochs=8,
        log_every_steps=100,
    )
    lines = []
    task = toy_tagging_task(64, 24, with_test=True)
    results = run_trials(task, pretrained, settings, print_fn=lines.append)
    classification = run_trials(
        _toy_task(8),
        pretrained,
        FinetuneSettings(
            output_dir=str(tmp_path / "sst2"),
            train_batch_size=4,
            num_train_epochs=1,
            log_every_steps=100,
        ),
        print_fn=lambda _: None,
    )
    assert list(results) == list(classification)
    trial = results["trials"][0]
    assert list(trial) == list(classification["trials"][0])
    assert results["task"]["task_type"] == "tagging" and results["primary_metric"] == "f1"
    assert results["task"]["tag_names"] == ["O", "B-PER", "B-WORK", "I-WORK"]
    assert results["data"]["num_train_sentences"] == 64
    assert set(results["data"]["num_train_entities"]) == {"PER", "WORK"}
    # The toy rule is learned; every epoch is scored; per-type scores beside the micro ones.
    assert trial["dev"]["f1"] >= 0.9 and all(entry["dev"] for entry in trial["epochs"])
    assert {"precision", "recall", "f1", "accuracy", "f1/PER", "recall/WORK"} <= set(
        results["median"]
    )
    last = [line for line in lines if line.startswith("epoch 8/8")]
    assert last and "f1" in last[0] and "/" not in last[0].split("dev:")[1]  # micro only
    # dev_predictions.txt: word gold predicted, scored as the results say.
    files = trial["predictions"]
    assert set(files) == {"dev_predictions.txt", "test_predictions.txt"}
    rows = read_tagged(files["dev_predictions.txt"])
    assert [[r[0] for r in s] for s in rows] == task.data.dev.sentences
    assert [[r[1] for r in s] for s in rows] == task.data.dev.tags
    assert (
        score([[r[1] for r in s] for s in rows], [[r[2] for r in s] for s in rows], "prefix")
        == trial["dev"]
    )
    test_rows = read_tagged(files["test_predictions.txt"])
    assert [[r[0] for r in s] for s in test_rows] == task.data.test.sentences
    assert all(len(r) == 2 for s in test_rows for r in s)
    model, info = load_finetuned(str(tmp_path / "ner" / "trial_0"))
    assert type(model).__name__ == "ElectraTagger"
    assert info["kind"] == "tagging" and info["task"]["tag_format"] == "prefix"


# --- Devices and precision -------------------------------------------------


@pytest.fixture(scope="module")
def pretrained_without_dropout(tmp_path_factory):
    return resolve_pretrained(
        make_pretrained_dir(
            str(tmp_path_factory.mktemp("pretrained_without_dropout")),
            dropout_rate=0.0,
            attention_dropout_rate=0.0,
        )
    )


@pytest.mark.slow
def test_two_replicas_train_like_one_device_and_score_every_dev_example_once(
    pretrained_without_dropout, tmp_path, two_replica_strategy
):
    # 13 dev examples in batches of 4: a last batch of 1, which two replicas cannot share.
    def run(name, strategy):
        settings = FinetuneSettings(
            output_dir=str(tmp_path / name),
            train_batch_size=4,
            eval_batch_size=4,
            learning_rate=3e-3,
            num_train_epochs=2,
            log_every_steps=100,
        )
        return run_trials(
            toy_regression_task(16, 13),
            pretrained_without_dropout,
            settings,
            print_fn=lambda _: None,
            strategy=strategy,
        )

    one, two = run("one", None), run("two", two_replica_strategy)
    one_trial, two_trial = one["trials"][0], two["trials"][0]
    assert [e["step"] for e in two_trial["epochs"]] == [4, 8]
    # The same training, up to the rounding of sums taken in another order...
    for a, b in zip(one_trial["epochs"], two_trial["epochs"]):
        assert b["train"] == pytest.approx(a["train"], rel=1e-4)
        assert b["dev"] == pytest.approx(a["dev"], rel=1e-4)
    assert two_trial["dev"] == pytest.approx(one_trial["dev"], rel=1e-4)
    assert set(two_trial["dev"]) == {"pearson", "spearman"}
    # ...and they are exactly those of the saved model scoring every dev example
    # once on one device.
    model, _ = load_finetuned(str(tmp_path / "two" / "trial_0"))
    task = toy_regression_task(16, 13)
    task.prepare(
        WordPieceTokenizer(str(tmp_path / "two" / "trial_0" / "vocab.txt")), lambda _: None
    )
    assert task.evaluate(model, 4)[0] == two_trial["dev"]


class _Inspect(keras.callbacks.Callback):
    """Records what the trial trains with."""

    def on_train_begin(self, logs=None):
        self.optimizer = self.model.optimizer
        self.compute_dtype = self.model.compute_dtype


@pytest.mark.slow
@pytest.mark.parametrize(
    "make_task, precision, reduction",
    [
        (_toy_task, "float16", "mean"),
        (_squad_task, "bfloat16", "sum"),
        (_tagging_task, "float16", "sum"),
    ],
    ids=["sst2-float16", "squad-bfloat16-sum", "tagging-float16-sum"],
)
def test_mixed_precision_on_two_replicas_with_accumulation(
    pretrained, tmp_path, make_task, precision, reduction, two_replica_strategy
):
    settings = FinetuneSettings(
        output_dir=str(tmp_path / "out"),
        train_batch_size=4,
        num_train_epochs=2,
        log_every_steps=100,
        gradient_accumulation_steps=2,
        mixed_precision=precision,
        loss_reduction=reduction,
    )
    inspect, lines = _Inspect(), []
    results = run_trials(
        make_task(16),
        pretrained,
        settings,
        print_fn=lines.append,
        extra_callbacks=[inspect],
        strategy=two_replica_strategy,
    )
    trial = results["trials"][0]
    # float16 scales the loss (a LossScaleOptimizer); bfloat16 needs no scaling.
    is_scaled = isinstance(inspect.optimizer, keras.optimizers.LossScaleOptimizer)
    assert is_scaled == (precision == "float16")
    assert inspect.compute_dtype == precision
    # A skipped float16 step is made up for: the trial still takes all its steps.
    assert trial["steps"] == 8 and [e["step"] for e in trial["epochs"]] == [4, 8]
    assert int(inspect.optimizer.iterations.numpy()) == 8
    assert all(np.isfinite(v) for v in trial["dev"].values()) and trial["dev"]
    assert results["settings"]["mixed_precision"] == precision
    assert results["settings"].get("loss_reduction", "mean") == reduction
    assert any("2 replica(s), " + precision in line for line in lines)
    # The saved model is float32, and the caller's precision policy is back.
    model, _ = load_finetuned(str(tmp_path / "out" / "trial_0"))
    assert model.compute_dtype == "float32"
    assert {v.dtype for v in model.weights} == {"float32"}
    assert keras.config.dtype_policy().name == "float32"


def test_a_batch_the_replicas_and_micro_batches_do_not_divide_is_refused(
    pretrained, tmp_path, two_replica_strategy
):
    settings = FinetuneSettings(
        output_dir=str(tmp_path / "out"), train_batch_size=6, gradient_accumulation_steps=2
    )
    with pytest.raises(RunError) as error:
        run_trials(_toy_task(8), pretrained, settings, strategy=two_replica_strategy)
    assert str(error.value) == (
        "--train_batch_size=6 is not divisible by the 2 replicas of the distribution strategy "
        "times --gradient_accumulation_steps=2."
    )
    assert not os.path.exists(tmp_path / "out")


class _DumpWeights(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.weights = None

    def on_train_end(self, logs=None):
        self.weights = [v.numpy() for v in self.model.trainable_variables]


@pytest.mark.slow
def test_two_worker_processes_train_in_lockstep_and_only_the_chief_writes(
    pretrained_without_dropout, tmp_path
):
    """Each worker gets its own --output_dir here, so that a file worker 1 wrote would show."""
    from multi_worker_support import FINETUNE_SETTINGS, run_workers

    pretrained_dir = os.path.dirname(pretrained_without_dropout.model_file)
    outputs = run_workers(
        tmp_path,
        "finetune",
        lambda index: (pretrained_dir, tmp_path / f"out{index}", tmp_path / f"weights{index}.npz"),
    )
    # Both workers hold the same weights and scored the same dev metrics...
    weights = [np.load(tmp_path / f"weights{i}.npz") for i in range(2)]
    for name in weights[0].files:
        np.testing.assert_array_equal(weights[0][name], weights[1][name])
    dev = [
        json.loads(next(line for line in out.splitlines() if line.startswith("DEV "))[4:])
        for out in outputs
    ]
    assert dev[0] == dev[1]
    # ...which are those of one process training on the same global batches.
    dump = _DumpWeights()
    single = run_trials(
        toy_regression_task(16, 13),
        pretrained_without_dropout,
        FinetuneSettings(output_dir=str(tmp_path / "single"), **FINETUNE_SETTINGS),
        print_fn=lambda _: None,
        extra_callbacks=[dump],
    )
    for i, expected in enumerate(dump.weights):
        np.testing.assert_allclose(weights[0][f"arr_{i}"], expected, rtol=1e-4, atol=2e-6)
    assert dev[0] == pytest.approx(single["trials"][0]["dev"], rel=1e-4)
    # The chief wrote the results, its trial and TensorBoard logs; worker 1
    # nothing, and its scratch checkpoints are gone.
    with open(tmp_path / "out0" / "results.json", encoding="utf-8") as f:
        assert json.load(f)["trials"][0]["dev"] == dev[0]
    assert (tmp_path / "out0" / "trial_0" / "model.weights.h5").is_file()
    assert len(os.listdir(tmp_path / "out0" / "trial_0" / "tensorboard")) == 1
    assert not os.path.exists(tmp_path / "out1")
    assert os.listdir(tmp_path / "tmp1") == []
    assert "results in" in outputs[0] and "results in" not in outputs[1]
    assert "[worker-1] --- Trial 1/1" in outputs[1]


@pytest.mark.slow
def test_random_init_fine_tunes_the_same_encoder_with_fresh_weights(pretrained, tmp_path):
    from electra_tf.artifacts.pretrained import load_discriminator

    start = load_discriminator(pretrained.model_file).encoder
    table = next(w for w in start.weights if "word_embeddings" in w.path).numpy()
    kept = {}
    for random_init in (False, True):
        # A negligible learning rate: the saved encoder is where training started.
        # The CPU kernel set: the loaded encoder is built again with it, weights and all.
        settings = FinetuneSettings(
            output_dir=str(tmp_path / str(random_init)),
            train_batch_size=8,
            learning_rate=1e-12,
            num_train_epochs=1,
            random_init=random_init,
            kernels="cpu_fast",
        )
        lines = []
        results = run_trials(_toy_task(8), pretrained, settings, print_fn=lines.append)
        model, _ = load_finetuned(str(tmp_path / str(random_init) / "trial_0"))
        kept[random_init] = next(
            w for w in model.encoder.weights if "word_embeddings" in w.path
        ).numpy()
        assert ("random_init" in results["settings"]) is random_init
        assert any("--random_init: no pre-training" in line for line in lines) is random_init
    np.testing.assert_allclose(kept[False], table, atol=1e-6)
    assert kept[True].shape == table.shape
    assert np.abs(kept[True] - table).mean() > 0.5 * np.abs(table).mean()
    # Drawn like a fresh model: truncated normal with the configured 0.02 scale.
    assert 0.01 < kept[True].std() < 0.03


@pytest.mark.parametrize("regression", [False, True], ids=["classification", "regression"])
def test_dev_predictions_are_written_beside_the_score_and_give_it_back(tmp_path, regression):
    """`dev_predictions.tsv` (index, gold, prediction) recomputes the dev metrics with NumPy."""
    from electra_tf.artifacts.finetuning_dir import TrialDir
    from electra_tf.finetuning.classification.model import build_classifier

    pretrained_dir = make_pretrained_dir(str(tmp_path / "pretrained"), num_layers=1)
    pretrained = resolve_pretrained(pretrained_dir)
    task = toy_regression_task(24, 12) if regression else _toy_task(12)
    tokenizer = WordPieceTokenizer(pretrained.vocab_file)
    task.prepare(tokenizer, print_fn=lambda _: None)
    keras.utils.set_random_seed(3)
    from electra_tf.artifacts.pretrained import load_discriminator

    encoder = load_discriminator(pretrained.model_file).encoder
    model = build_classifier(encoder, task.definition.num_outputs, regression, seed=3)
    trial = TrialDir(str(tmp_path / "trial_0"))
    os.makedirs(trial.path)
    scores, files = task.evaluate(model, 8, trial)
    with open(files["dev"], encoding="utf-8") as f:
        header, *lines = f.read().splitlines()
    assert header == "index\tgold\tprediction"
    rows = [line.split("\t") for line in lines]
    dev = task.data.dev["dev"]
    assert [r[0] for r in rows] == dev.indices
    if regression:
        gold = np.array([float(r[1]) for r in rows])
        predicted = np.array([float(r[2]) for r in rows])
        np.testing.assert_allclose(gold, dev.labels, rtol=1e-7)
        assert np.corrcoef(gold, predicted)[0, 1] == pytest.approx(scores["pearson"], abs=1e-4)
    else:
        names = task.definition.label_names
        assert [r[1] for r in rows] == [names[i] for i in dev.labels]
        accuracy = np.mean([r[1] == r[2] for r in rows])
        assert accuracy == pytest.approx(scores["accuracy"])
    assert set(files) == {"dev"} | set(task.data.test)


class _PoisonAfter(keras.callbacks.Callback):
    """Sets one weight to NaN once step `at` is done: its update overflowed, its loss was finite."""

    def __init__(self, at):
        super().__init__()
        self.at = at

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) == self.at:
            weight = self.model.trainable_weights[0]
            weight.assign(np.full(weight.shape, np.nan, np.float32))


@pytest.mark.parametrize(
    "poison, bad_step, message",
    [
        (_PoisonWeights(2), 3, r"step 3: the loss is nan \(not finite\)"),
        (_PoisonAfter(4), 4, r"step 4: the weights after it are not finite"),
        (_PoisonAfter(8), 8, r"step 8: the weights after it are not finite"),
    ],
)
def test_a_trial_stopped_by_nan_reports_no_score(pretrained, tmp_path, poison, bad_step, message):
    """A NaN before an epoch's end (step 4) or at the last step (8): the NaN model gets no score."""
    settings = FinetuneSettings(
        output_dir=str(tmp_path / "out"),
        train_batch_size=4,
        learning_rate=3e-3,
        num_train_epochs=2,
        log_every_steps=100,
        save_checkpoints_steps=100,
    )
    lines = []
    with pytest.raises(NonFiniteError, match=rf"^Training stopped at {message}.* no checkpoint"):
        run_trials(
            _toy_task(16), pretrained, settings, print_fn=lines.append, extra_callbacks=[poison]
        )
    scored = [
        int(re.search(r"\(step (\d+)\) dev:", line).group(1)) for line in lines if "dev:" in line
    ]
    assert all(step < bad_step for step in scored), lines
    trial = tmp_path / "out" / "trial_0"
    assert not (tmp_path / "out" / "results.json").exists()
    assert not os.path.exists(trial / "checkpoints") or not os.listdir(trial / "checkpoints")
    recorded = json.load(open(trial / "history.json")) if (trial / "history.json").exists() else []
    assert all(entry["step"] < bad_step for entry in recorded)


@pytest.mark.slow  # two trials, about 10 s
def test_a_full_disk_while_saving_a_trial_stops_in_one_line_and_the_rerun_saves_it(
    pretrained, tmp_path, monkeypatch
):
    """The trained model cannot be written (a real full tmpfs where mounting is allowed):
    one line, no weights file or temporary left, and the re-run saves the checkpoint's
    weights without training again, every tensor equal to an uninterrupted run's."""
    from disk_support import fill, no_space, small_disk

    from electra_tf.training import finetuning_loop

    def settings(directory):
        return FinetuneSettings(
            output_dir=str(directory),
            train_batch_size=4,
            learning_rate=3e-3,
            num_train_epochs=1,
            log_every_steps=100,
        )

    straight = tmp_path / "straight"
    run_trials(_toy_task(8), pretrained, settings(straight), print_fn=lambda _: None)
    disk = tmp_path / "disk"
    with small_disk(disk) as mounted:
        save = finetuning_loop.save_finetuned

        def save_on_a_full_disk(model, directory, *args):
            if not mounted:
                raise no_space(os.path.join(directory, "model.weights.h5.tmp"))
            fill(str(disk))
            return save(model, directory, *args)

        out = disk / "out"
        with monkeypatch.context() as patch:
            patch.setattr(finetuning_loop, "save_finetuned", save_on_a_full_disk)
            with pytest.raises(RunError) as stopped:
                run_trials(_toy_task(8), pretrained, settings(out), print_fn=lambda _: None)
        assert str(stopped.value) == (
            f"Could not write {out}/trial_0/model.weights.h5.tmp: No space left on device. "
            "Trial 0's checkpoints are intact (nothing half-written was left); free some "
            "space and re-run the same command to resume it."
        )
        assert not [f for f in os.listdir(out / "trial_0") if f.startswith("model.")]
        assert not (out / "results.json").exists()
        if mounted:
            os.remove(disk / "filler")
        lines = []
        resumed = run_trials(_toy_task(8), pretrained, settings(out), print_fn=lines.append)
        assert any(line.startswith("Resumed from ") and "(step 2)" in line for line in lines)
        a, _ = load_finetuned(str(straight / "trial_0"))
        b, _ = load_finetuned(str(out / "trial_0"))
        differ = [x.path for x, y in zip(a.weights, b.weights) if not np.array_equal(x, y)]
        assert differ == [] and len(a.weights) == len(b.weights)
        assert (
            resumed["trials"][0]["dev"]
            == json.load(open(straight / "results.json"))["trials"][0]["dev"]
        )
