"""Classifier, layer-wise learning rates, saving, and a tiny end-to-end fine-tune."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from finetuning_support import make_pretrained_dir, toy_sentences

from electra_tf.artifacts.pretrained import load_discriminator, resolve_pretrained
from electra_tf.errors import RunError
from electra_tf.finetuning import optimization, tasks
from electra_tf.finetuning.model import build_classifier, load_finetuned, save_finetuned
from electra_tf.training import finetuning_run as run


@pytest.fixture(scope="module")
def pretrained_dir(tmp_path_factory):
    return make_pretrained_dir(str(tmp_path_factory.mktemp("pretrained")))


def _inputs(rows):
    ids = np.array(rows, np.int32)
    return {"input_ids": ids, "input_mask": (ids != 0).astype(np.int32),
            "segment_ids": np.zeros_like(ids)}


# Expected multiplier by variable-path prefix for a 2-layer encoder, decay 0.8,
# written out by hand: embeddings at depth 0, layer i at i + 1, head on top.
PAPER_TABLE = {"embeddings/": 0.8 ** 3, "embeddings_project/": 0.8 ** 3,
               "transformer_layer_0/": 0.8 ** 2, "transformer_layer_1/": 0.8,
               "task_head/": 1.0}
# The original code's head at depth num_layers + 2: one more factor everywhere below it.
QUIRK_TABLE = {"embeddings/": 0.8 ** 4, "embeddings_project/": 0.8 ** 4,
               "transformer_layer_0/": 0.8 ** 3, "transformer_layer_1/": 0.8 ** 2,
               "task_head/": 1.0}


@pytest.mark.parametrize("quirk, table", [(False, PAPER_TABLE), (True, QUIRK_TABLE)])
def test_layerwise_multipliers_table(pretrained_dir, quirk, table):
    model = build_classifier(load_discriminator(pretrained_dir).encoder, 2)
    multipliers = optimization.layerwise_multipliers(model.trainable_variables, 2, 0.8,
                                                     quirk=quirk)
    assert set(multipliers) == {v.path for v in model.trainable_variables}
    seen = set()
    for path, value in multipliers.items():
        prefix = [p for p in table if path.startswith(p)]
        assert len(prefix) == 1, path
        assert value == pytest.approx(table[prefix[0]]), path
        seen.add(prefix[0])
    assert seen == set(table)  # every part of the model is present
    assert multipliers["transformer_layer_1/attention/qkv/kernel"] == pytest.approx(
        0.8 ** 2 if quirk else 0.8)


def test_unknown_variable_is_refused():
    stray = keras.Variable(np.zeros(2, np.float32), name="pooler_kernel")
    with pytest.raises(ValueError, match="pooler_kernel"):
        optimization.layerwise_multipliers([stray], 2, 0.8)


def test_layerwise_update_matches_formula():
    # Two variables: multipliers 1 and 0.5, weight decay on the kernel only.
    kernel = keras.Variable(np.array([1.0, -2.0], np.float32), name="kernel")
    bias = keras.Variable(np.array([0.5, 0.5], np.float32), name="bias")
    lr, wd, eps = 0.1, 0.01, 1e-6
    optimizer = optimization.LayerwiseAdamWeightDecay(
        {kernel.path: 1.0, bias.path: 0.5}, learning_rate=lr, weight_decay=wd, epsilon=eps,
        global_clipnorm=None)
    g_kernel, g_bias = np.array([0.2, -0.4]), np.array([1.0, 3.0])
    optimizer.apply([tf.constant(g_kernel, tf.float32), tf.constant(g_bias, tf.float32)],
                    [kernel, bias])

    def step(w, g, multiplier, decay):
        # One step from zero moments, no bias correction: m = 0.1 g, v = 0.001 g^2.
        m, v = 0.1 * g, 0.001 * g * g
        return w - lr * multiplier * (m / (np.sqrt(v) + eps) + decay * w)

    np.testing.assert_allclose(kernel.numpy(), step(np.array([1.0, -2.0]), g_kernel, 1.0, wd),
                               rtol=1e-5)
    np.testing.assert_allclose(bias.numpy(), step(np.array([0.5, 0.5]), g_bias, 0.5, 0.0),
                               rtol=1e-5)


def test_head_output_and_save_reload(pretrained_dir, tmp_path):
    encoder = load_discriminator(pretrained_dir).encoder
    model = build_classifier(encoder, 3, seed=3)
    kernel = model.get_layer("task_head").kernel.numpy()
    assert kernel.shape == (32, 3)
    assert np.abs(kernel).max() <= 2 * 0.02 + 1e-6  # truncated normal, stddev 0.02
    batch = _inputs([[2, 17, 5, 3, 0], [2, 8, 3, 0, 0]])
    logits = model(batch, training=False).numpy()
    # Head = dense on the [CLS] hidden state, computed here from the encoder alone.
    cls = encoder(batch, training=False).numpy()[:, 0]
    head = model.get_layer("task_head")
    np.testing.assert_allclose(logits, cls @ head.kernel.numpy() + head.bias.numpy(), rtol=1e-5,
                               atol=1e-6)
    save_finetuned(model, str(tmp_path / "ft"), {"label_names": ["a", "b", "c"]})
    reloaded, info = load_finetuned(str(tmp_path / "ft"))
    assert info["label_names"] == ["a", "b", "c"]
    np.testing.assert_array_equal(reloaded(batch, training=False).numpy(), logits)


def test_regression_head_shape(pretrained_dir):
    model = build_classifier(load_discriminator(pretrained_dir).encoder, 1, regression=True)
    assert model(_inputs([[2, 5, 3]]), training=False).shape == (1,)


def _toy_task_data(count):
    rows = toy_sentences(count)
    texts = [r[0] for r in rows]
    labels = np.array([r[1] for r in rows], np.int64)
    indices = [str(i) for i in range(count)]
    train = tasks.Split("train", "memory", texts, None, labels, indices)
    # Dev = the training set: the check is that the rule is learned at all.
    dev = tasks.Split("dev", "memory", texts, None, labels, indices)
    test = tasks.Split("test", "memory", texts, None, None, indices)
    return tasks.TaskData(train, {"dev": dev}, {"SST-2": test})


def test_end_to_end_learns_toy_rule_and_resumes(pretrained_dir, tmp_path):
    data = _toy_task_data(16)
    task = tasks.glue_task("sst2")
    pretrained = resolve_pretrained(pretrained_dir)
    settings = run.FinetuneSettings(output_dir=str(tmp_path / "out"), train_batch_size=8,
                                    learning_rate=3e-3, num_train_epochs=10, log_every_steps=100)
    lines = []
    results = run.run_finetuning(task, data, pretrained, settings, print_fn=lines.append)
    trial = results["trials"][0]
    assert trial["dev"]["accuracy"] >= 0.9
    assert len(trial["epochs"]) == 10 and trial["epochs"][-1]["step"] == 20
    assert results["median"]["accuracy"] == trial["dev"]["accuracy"]
    assert results["all"]["accuracy"] == [trial["dev"]["accuracy"]]
    assert any("ETA" in line for line in lines)
    assert any(line.startswith("epoch 10/10") for line in lines)
    with open(tmp_path / "out" / "results.json", encoding="utf-8") as f:
        assert json.load(f)["trials"][0]["dev"] == trial["dev"]

    # Test predictions in the GLUE format agree with the reloaded model.
    trial_dir = tmp_path / "out" / "trial_0"
    with open(trial_dir / "SST-2.tsv", encoding="utf-8") as f:
        written = [line.rstrip("\n").split("\t") for line in f]
    assert written[0] == ["index", "prediction"]
    assert [row[0] for row in written[1:]] == [str(i) for i in range(16)]
    reloaded, info = load_finetuned(str(trial_dir))
    assert info["task"]["label_names"] == ["0", "1"]
    from electra_tf.tokenization import WordPieceTokenizer
    from electra_tf.finetuning import features

    tokenizer = WordPieceTokenizer(str(trial_dir / "vocab.txt"))
    encoded = features.encode(tokenizer, data.train.texts_a, None, 128)
    logits = reloaded.predict(features.make_dataset(encoded, None, 32), verbose=0)
    assert [str(int(i)) for i in np.argmax(logits, -1)] == [row[1] for row in written[1:]]

    # Re-running with one more trial keeps trial 0 and runs only trial 1.
    lines.clear()
    more = run.run_finetuning(task, data, pretrained,
                              run.FinetuneSettings(**{**settings.__dict__, "num_trials": 2,
                                                      "num_train_epochs": 10}),
                              print_fn=lines.append)
    assert any("Trial 0: already finished" in line for line in lines)
    assert [t["trial"] for t in more["trials"]] == [0, 1]
    assert more["trials"][0] == json.loads(json.dumps(trial))
    values = more["all"]["accuracy"]
    assert more["median"]["accuracy"] == pytest.approx((values[0] + values[1]) / 2)

    # Other hyperparameters in the same directory are refused.
    with pytest.raises(RunError, match="learning_rate"):
        run.run_finetuning(task, data, pretrained,
                           run.FinetuneSettings(**{**settings.__dict__, "learning_rate": 1e-4}),
                           print_fn=lines.append)


def test_model_size_mismatch(pretrained_dir):
    with pytest.raises(RunError, match="--model_size=base.*'tiny'"):
        resolve_pretrained(pretrained_dir, model_size="base")
