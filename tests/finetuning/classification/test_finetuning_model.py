"""The classifier, its losses, and the layer-wise learning rates."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from finetuning_support import make_pretrained_dir

from electra_tf.artifacts.pretrained import load_discriminator
from electra_tf.finetuning.classification.model import build_classifier
from electra_tf.finetuning.kind import optimization


@pytest.fixture(scope="module")
def pretrained_dir(tmp_path_factory):
    return make_pretrained_dir(str(tmp_path_factory.mktemp("pretrained")))


def _inputs(rows):
    ids = np.array(rows, np.int32)
    return {
        "input_ids": ids,
        "input_mask": (ids != 0).astype(np.int32),
        "segment_ids": np.zeros_like(ids),
    }


# Expected multiplier by variable-path prefix for a 2-layer encoder, decay 0.8,
# written out by hand: embeddings at depth 0, layer i at i + 1, head on top.
PAPER_TABLE = {
    "embeddings/": 0.8**3,
    "embeddings_project/": 0.8**3,
    "transformer_layer_0/": 0.8**2,
    "transformer_layer_1/": 0.8,
    "task_head/": 1.0,
}
# The original code's head at depth num_layers + 2: one more factor everywhere below it.
QUIRK_TABLE = {
    "embeddings/": 0.8**4,
    "embeddings_project/": 0.8**4,
    "transformer_layer_0/": 0.8**3,
    "transformer_layer_1/": 0.8**2,
    "task_head/": 1.0,
}


@pytest.mark.parametrize("quirk, table", [(False, PAPER_TABLE), (True, QUIRK_TABLE)])
def test_layerwise_multipliers_table(pretrained_dir, quirk, table):
    model = build_classifier(load_discriminator(pretrained_dir).encoder, 2)
    multipliers = optimization.layerwise_multipliers(model.trainable_variables, 2, 0.8, quirk=quirk)
    assert set(multipliers) == {v.path for v in model.trainable_variables}
    seen = set()
    for path, value in multipliers.items():
        prefix = [p for p in table if path.startswith(p)]
        assert len(prefix) == 1, path
        assert value == pytest.approx(table[prefix[0]]), path
        seen.add(prefix[0])
    assert seen == set(table)  # every part of the model is present
    assert multipliers["transformer_layer_1/attention/qkv/kernel"] == pytest.approx(
        0.8**2 if quirk else 0.8
    )


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
        {kernel.path: 1.0, bias.path: 0.5},
        learning_rate=lr,
        weight_decay=wd,
        epsilon=eps,
        global_clipnorm=None,
    )
    g_kernel, g_bias = np.array([0.2, -0.4]), np.array([1.0, 3.0])
    optimizer.apply(
        [tf.constant(g_kernel, tf.float32), tf.constant(g_bias, tf.float32)], [kernel, bias]
    )

    def step(w, g, multiplier, decay):
        # One step from zero moments, no bias correction: m = 0.1 g, v = 0.001 g^2.
        m, v = 0.1 * g, 0.001 * g * g
        return w - lr * multiplier * (m / (np.sqrt(v) + eps) + decay * w)

    np.testing.assert_allclose(
        kernel.numpy(), step(np.array([1.0, -2.0]), g_kernel, 1.0, wd), rtol=1e-5
    )
    np.testing.assert_allclose(
        bias.numpy(), step(np.array([0.5, 0.5]), g_bias, 0.5, 0.0), rtol=1e-5
    )


def test_head_output(pretrained_dir):
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
    np.testing.assert_allclose(
        logits, cls @ head.kernel.numpy() + head.bias.numpy(), rtol=1e-5, atol=1e-6
    )


def test_regression_head_shape(pretrained_dir):
    model = build_classifier(load_discriminator(pretrained_dir).encoder, 1, regression=True)
    assert model(_inputs([[2, 5, 3]]), training=False).shape == (1,)


def test_per_example_losses_match_numpy(pretrained_dir):
    encoder = load_discriminator(pretrained_dir).encoder
    classifier = build_classifier(encoder, 3)
    logits = np.array([[2.0, -1.0, 0.5], [0.0, 0.0, 3.0]], np.float32)
    labels = np.array([0, 1])
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    np.testing.assert_allclose(
        classifier.per_example_loss(labels, logits), -log_probs[[0, 1], labels], rtol=1e-6
    )
    regressor = build_classifier(encoder, 1, regression=True)
    np.testing.assert_allclose(
        regressor.per_example_loss(np.array([0.5, 1.0]), np.array([0.1, 1.5], np.float32)),
        [0.16, 0.25],
        rtol=1e-6,
    )
