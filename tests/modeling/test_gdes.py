"""Gradient-disentangled embedding sharing (DeBERTaV3): which loss moves which table."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import make_batch
from test_pretrainer import LENGTH, SLOTS, VOCAB, build, tiny_config

from electra_tf.config import ConfigError
from electra_tf.modeling.electra import plain_discriminator


def tables(model):
    embeddings = model.discriminator.encoder.embeddings
    return embeddings.shared.word_embeddings, embeddings.word_embeddings_delta


def test_discriminator_loss_reaches_only_the_residual_and_the_mlm_loss_only_e(rng):
    model = build(tiny_config(weight_sharing="gdes"), make_batch(rng, 4, LENGTH, SLOTS, VOCAB))
    batch = tf.nest.map_structure(tf.convert_to_tensor, make_batch(rng, 4, LENGTH, SLOTS, VOCAB))
    shared, delta = tables(model)
    assert model.generator.encoder.embeddings is model.discriminator.encoder.embeddings.shared
    with tf.GradientTape(persistent=True) as tape:
        sums = model.compute_sums(batch, training=False)
        disc, mlm = sums["disc"]["loss"], sums["mlm"]["nll"]
    d_shared, d_delta = tape.gradient(disc, [shared, delta])
    assert d_shared is None or not np.any(tf.convert_to_tensor(d_shared).numpy())
    assert np.any(tf.convert_to_tensor(d_delta).numpy())
    m_shared, m_delta = tape.gradient(mlm, [shared, delta])
    assert np.any(tf.convert_to_tensor(m_shared).numpy())
    assert m_delta is None or not np.any(tf.convert_to_tensor(m_delta).numpy())


def test_one_sgd_step_moves_e_by_the_mlm_gradient_and_the_residual_by_lambda_disc(rng):
    config = tiny_config(weight_sharing="gdes", learning_rate=0.5)
    first = make_batch(rng, 4, LENGTH, SLOTS, VOCAB)
    model = build(config, first)
    shared, delta = tables(model)
    delta.assign(np.random.default_rng(3).normal(size=delta.shape).astype(np.float32) * 0.02)
    batch = tf.nest.map_structure(tf.convert_to_tensor, first)
    # Each loss's gradient on its own, from the per-loss sums over the batch's counts.
    with tf.GradientTape(persistent=True) as tape:
        sums = model.compute_sums(batch, training=False)
        mlm_loss = sums["mlm"]["nll"] / (sums["mlm"]["count"] + 1e-6)
        disc_loss = sums["disc"]["loss"] / (sums["disc"]["count"] + 1e-6)
    g_shared = tf.convert_to_tensor(tape.gradient(mlm_loss, shared)).numpy()
    g_delta = tf.convert_to_tensor(tape.gradient(disc_loss, delta)).numpy()
    e0, d0 = shared.numpy().astype(np.float64), delta.numpy().astype(np.float64)
    # One plain SGD step on the total loss (dropout is off in these configs).
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.5))
    model.fit(tf.data.Dataset.from_tensor_slices(first).batch(4), epochs=1, verbose=0)
    np.testing.assert_allclose(shared.numpy(), e0 - 0.5 * g_shared, atol=1e-6)
    np.testing.assert_allclose(delta.numpy(), d0 - 0.5 * 50.0 * g_delta, atol=1e-6)


def test_the_export_holds_e_plus_the_residual_as_a_plain_table(rng, tmp_path):
    first = make_batch(rng, 2, LENGTH, SLOTS, VOCAB)
    model = build(tiny_config(weight_sharing="gdes"), first)
    shared, delta = tables(model)
    delta.assign(np.random.default_rng(4).normal(size=delta.shape).astype(np.float32))
    plain = plain_discriminator(model.discriminator)
    np.testing.assert_allclose(
        plain.encoder.embeddings.word_embeddings.numpy(), shared.numpy() + delta.numpy(), rtol=1e-6
    )
    inputs = {k: first[k] for k in ("input_ids", "input_mask", "segment_ids")}
    np.testing.assert_allclose(
        plain(inputs)["logits"].numpy(), model.discriminator(inputs)["logits"].numpy(), atol=1e-5
    )
    plain.save(tmp_path / "d.keras")
    reloaded = keras.saving.load_model(tmp_path / "d.keras")
    np.testing.assert_allclose(
        reloaded(inputs)["logits"].numpy(), plain(inputs)["logits"].numpy(), atol=1e-6
    )


def test_gdes_needs_a_generator():
    with pytest.raises(ConfigError, match="--weight_sharing=gdes"):
        tiny_config(weight_sharing="gdes", objective="mlm")
