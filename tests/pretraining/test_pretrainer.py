import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import make_batch

from electra_tf.config import preset
from electra_tf.pretraining.objectives import make_pretrainer
from electra_tf.pretraining.optimization import create_optimizer

VOCAB, LENGTH, SLOTS = 60, 12, 3


def tiny_config(**overrides):
    values = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        num_layers=2,
        embedding_size=16,
        generator_hidden_fraction=0.5,
        num_heads=2,
        max_seq_length=LENGTH,
        max_predictions_per_seq=SLOTS,
        dropout_rate=0.0,
        attention_dropout_rate=0.0,
        num_warmup_steps=0,
        num_train_steps=1000,
        learning_rate=1e-2,
    )
    values.update(overrides)
    config = preset("tiny", **values)
    config.validate()
    return config


def build(config, batch, seed=0):
    keras.utils.set_random_seed(seed)
    model = make_pretrainer(config)
    model.build_from_batch(batch)
    return model


def np_inverse_cdf(logits, uniforms):
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    cdf = np.cumsum(probs, -1)
    out = np.empty(uniforms.shape, np.int64)
    for idx in np.ndindex(uniforms.shape):
        out[idx] = min(
            np.searchsorted(cdf[idx], uniforms[idx] * cdf[idx][-1], side="right"),
            logits.shape[-1] - 1,
        )
    return out


def test_losses_and_metrics_match_numpy(rng):
    config = tiny_config()
    batch = make_batch(rng, 4, LENGTH, SLOTS, VOCAB)
    model = build(config, batch)
    tensors = tf.nest.map_structure(tf.convert_to_tensor, batch)
    sums = model.compute_sums(tensors)
    _, stats = model._loss_and_stats(tensors, training=False)
    stats = {k: float(v) for k, v in stats.items()}

    gen_logits = sums["gen_logits"].numpy().astype(np.float64)
    w = batch["masked_lm_weights"]
    log_probs = gen_logits - np.log(np.exp(gen_logits).sum(-1, keepdims=True))
    nll = -np.take_along_axis(log_probs, batch["masked_lm_ids"][..., None], -1)[..., 0]
    mlm_loss = (nll * w).sum() / (w.sum() + 1e-6)

    sampled = np_inverse_cdf(gen_logits, batch["sampling_uniforms"])
    fake = batch["input_ids"].copy()
    for row in range(4):
        for slot in range(SLOTS):
            if w[row, slot] > 0:
                fake[row, batch["masked_lm_positions"][row, slot]] = sampled[row, slot]
    labels = (fake != batch["input_ids"]).astype(np.float64)
    np.testing.assert_array_equal(sums["fake_ids"].numpy(), fake)
    np.testing.assert_array_equal(sums["labels"].numpy(), labels)

    d = sums["disc_logits"].numpy().astype(np.float64)
    mask = batch["input_mask"].astype(np.float64)
    p = 1 / (1 + np.exp(-d))
    bce = -(labels * np.log(p) + (1 - labels) * np.log(1 - p))
    disc_loss = (bce * mask).sum() / (mask.sum() + 1e-6)
    pred = (d > 0).astype(np.float64)

    assert stats["masked_lm_loss"] == pytest.approx(mlm_loss, rel=1e-5)
    assert stats["disc_loss"] == pytest.approx(disc_loss, rel=1e-5)
    assert stats["total_loss"] == pytest.approx(mlm_loss + 50.0 * disc_loss, rel=1e-5)
    assert stats["masked_lm_accuracy"] == pytest.approx(
        ((gen_logits.argmax(-1) == batch["masked_lm_ids"]) * w).sum() / w.sum(), abs=1e-6
    )
    assert stats["sampled_masked_lm_accuracy"] == pytest.approx(
        ((sampled == batch["masked_lm_ids"]) * w).sum() / w.sum(), abs=1e-6
    )
    assert stats["disc_accuracy"] == pytest.approx(
        ((pred == labels) * mask).sum() / mask.sum(), abs=1e-6
    )
    tp = (pred * labels * mask).sum()
    assert stats["disc_precision"] == pytest.approx(tp / ((pred * mask).sum() + 1e-6), abs=1e-6)
    assert stats["disc_recall"] == pytest.approx(tp / ((labels * mask).sum() + 1e-6), abs=1e-6)


def test_discriminator_loss_sends_no_gradient_into_the_generator(rng):
    config = tiny_config()
    batch = tf.nest.map_structure(tf.convert_to_tensor, make_batch(rng, 4, LENGTH, SLOTS, VOCAB))
    model = build(config, batch)
    shared = {id(v) for v in model.generator.encoder.embeddings.weights}
    generator_only = [v for v in model.generator.trainable_variables if id(v) not in shared]
    with tf.GradientTape() as tape:
        sums = model.compute_sums(batch, training=True)
        disc_loss = sums["disc"]["loss"]
    grads = tape.gradient(disc_loss, generator_only)
    assert all(g is None for g in grads)
    # ...while the shared embeddings do learn from the discriminator.
    with tf.GradientTape() as tape:
        disc_loss = model.compute_sums(batch, training=True)["disc"]["loss"]
    table = model.discriminator.encoder.embeddings.word_embeddings
    assert tape.gradient(disc_loss, table) is not None


def test_shared_embedding_gets_exactly_one_update_per_step(rng):
    config = tiny_config(clip_norm=0.0, weight_decay_rate=0.01, learning_rate=1e-2)
    batch = make_batch(rng, 4, LENGTH, SLOTS, VOCAB)
    tensors = tf.nest.map_structure(tf.convert_to_tensor, batch)
    model = build(config, batch)
    table = model.generator.encoder.embeddings.word_embeddings
    before = table.numpy().astype(np.float64)
    with tf.GradientTape() as tape:
        loss, _ = model._loss_and_stats(tensors, training=True)
    grad = tf.convert_to_tensor(tape.gradient(loss, table)).numpy().astype(np.float64)
    model.compile(optimizer=create_optimizer(config))
    model.fit(tf.data.Dataset.from_tensors(batch), steps_per_epoch=1, verbose=0)
    lr, eps = 1e-2, 1e-6
    m, v = 0.1 * grad, 0.001 * grad * grad
    expected = before - lr * 0.01 * before - lr * m / (np.sqrt(v) + eps)
    # One Adam step moves each entry by about lr * 0.32 = 3e-3; a second update
    # of the shared table would be off by that much, far above this tolerance
    # (which only absorbs float32 noise where the gradient is near epsilon).
    np.testing.assert_allclose(table.numpy() - before, expected - before, atol=1e-5)
    assert int(model.optimizer.iterations.numpy()) == 1
    assert int(model.seen_batches.numpy()) == 1


def test_nothing_masked_gives_finite_losses_and_gradients(rng):
    config = tiny_config()
    batch = make_batch(rng, 4, LENGTH, SLOTS, VOCAB)
    batch["masked_lm_weights"][:] = 0.0  # no row has anything masked
    batch["masked_lm_positions"][:] = 0
    batch["masked_lm_ids"][:] = 0
    batch["masked_input_ids"] = batch["input_ids"].copy()
    model = build(config, batch)
    tensors = tf.nest.map_structure(tf.convert_to_tensor, batch)
    with tf.GradientTape() as tape:
        loss, stats = model._loss_and_stats(tensors, training=True)
    grads = tape.gradient(loss, model.trainable_variables)
    assert np.isfinite(float(loss))
    assert all(np.isfinite(float(v)) for v in stats.values())
    assert stats["masked_lm_loss"].numpy() == 0.0
    assert stats["replaced_fraction"].numpy() == 0.0
    assert all(np.all(np.isfinite(tf.convert_to_tensor(g).numpy())) for g in grads if g is not None)


def _train(strategy, config, batches, steps):
    with strategy.scope():
        model = build(config, batches[0], seed=7)
        model.compile(optimizer=create_optimizer(config))
    dataset = tf.data.Dataset.from_tensor_slices(
        {k: np.stack([b[k] for b in batches]) for k in batches[0]}
    )
    history = model.fit(dataset, steps_per_epoch=steps, verbose=0)
    return model, {k: v[-1] for k, v in history.history.items()}


def test_mirrored_strategy_update_equals_single_device_update(rng, two_replica_strategy):
    # Clipping at 0.05 is active, so this also checks the global-norm clip.
    config = tiny_config(clip_norm=0.05, learning_rate=1e-2)
    batches = [make_batch(rng, 8, LENGTH, SLOTS, VOCAB) for _ in range(2)]
    single, single_logs = _train(tf.distribute.get_strategy(), config, batches, 2)
    mirrored, mirrored_logs = _train(two_replica_strategy, config, batches, 2)
    assert two_replica_strategy.num_replicas_in_sync == 2
    for a, b in zip(single.trainable_variables, mirrored.trainable_variables):
        assert a.path == b.path
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=2e-6, err_msg=a.path)
    for key in ("total_loss", "masked_lm_loss", "disc_loss", "disc_accuracy"):
        assert single_logs[key] == pytest.approx(mirrored_logs[key], rel=1e-4), key


@pytest.mark.slow
@pytest.mark.parametrize("accumulation, use_two_replicas", [(4, False), (2, True)])
def test_gradient_accumulation_gives_the_full_batch_update(
    rng, two_replica_strategy, accumulation, use_two_replicas
):
    # Clipping is active, so the clip must see the summed (full-batch) gradient.
    config = tiny_config(clip_norm=0.05, learning_rate=1e-2)
    batches = [make_batch(rng, 8, LENGTH, SLOTS, VOCAB) for _ in range(2)]
    full, full_logs = _train(tf.distribute.get_strategy(), config, batches, 2)
    accumulated_config = tiny_config(
        clip_norm=0.05, learning_rate=1e-2, gradient_accumulation_steps=accumulation
    )
    strategy = two_replica_strategy if use_two_replicas else tf.distribute.get_strategy()
    accumulated, accumulated_logs = _train(strategy, accumulated_config, batches, 2)
    assert int(accumulated.optimizer.iterations.numpy()) == 2
    moved = 0.0
    for a, b, start in zip(
        full.trainable_variables,
        accumulated.trainable_variables,
        build(config, batches[0], seed=7).trainable_variables,
    ):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=2e-6, err_msg=a.path)
        moved = max(moved, float(np.abs(a.numpy() - start.numpy()).max()))
    assert moved > 1e-3  # the comparison is between trained weights, not initial ones
    for key in ("total_loss", "masked_lm_loss", "disc_loss", "disc_accuracy", "disc_recall"):
        assert full_logs[key] == pytest.approx(accumulated_logs[key], rel=1e-4), key


def test_global_norm_clip_sees_the_summed_gradient_of_repeated_tokens(rng):
    # Every row starts with [CLS], so embedding rows repeat within the batch.
    config = tiny_config(clip_norm=0.05, weight_decay_rate=0.0, learning_rate=1e-2)
    batch = make_batch(rng, 4, LENGTH, SLOTS, VOCAB)
    tensors = tf.nest.map_structure(tf.convert_to_tensor, batch)
    model = build(config, batch)
    before = [v.numpy().astype(np.float64) for v in model.trainable_variables]
    with tf.GradientTape() as tape:
        loss, _ = model._loss_and_stats(tensors, training=True)
    grads = [
        tf.convert_to_tensor(g).numpy().astype(np.float64)
        for g in tape.gradient(loss, model.trainable_variables)
    ]
    norm = np.sqrt(sum((g**2).sum() for g in grads))
    assert norm > 0.05  # clipping is active
    model.compile(optimizer=create_optimizer(config))
    model.fit(tf.data.Dataset.from_tensors(batch), steps_per_epoch=1, verbose=0)
    for var, start, g in zip(model.trainable_variables, before, grads):
        g = g * 0.05 / norm
        m, v = 0.1 * g, 0.001 * g * g
        np.testing.assert_allclose(
            var.numpy() - start, -1e-2 * m / (np.sqrt(v) + 1e-6), atol=2e-5, err_msg=var.path
        )


@pytest.mark.slow
@pytest.mark.parametrize("use_two_replicas", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_xla_compiled_step_gives_the_same_update(rng, two_replica_strategy, use_two_replicas):
    config = tiny_config(clip_norm=0.05, learning_rate=1e-2)
    batches = [make_batch(rng, 8, LENGTH, SLOTS, VOCAB) for _ in range(2)]
    plain, plain_logs = _train(tf.distribute.get_strategy(), config, batches, 2)
    xla_config = tiny_config(clip_norm=0.05, learning_rate=1e-2, jit_compile=True)
    strategy = two_replica_strategy if use_two_replicas else tf.distribute.get_strategy()
    with strategy.scope():
        model = build(xla_config, batches[0], seed=7)
        # One device: Keras compiles the whole step; two: each replica's pass.
        model.compile(optimizer=create_optimizer(xla_config), jit_compile=not use_two_replicas)
    dataset = tf.data.Dataset.from_tensor_slices(
        {k: np.stack([b[k] for b in batches]) for k in batches[0]}
    )
    logs = {k: v[-1] for k, v in model.fit(dataset, steps_per_epoch=2, verbose=0).history.items()}
    assert (model._xla_gradients is not None) == use_two_replicas
    for a, b in zip(plain.trainable_variables, model.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=5e-6, err_msg=a.path)
    for key in ("total_loss", "masked_lm_loss", "disc_loss"):
        assert plain_logs[key] == pytest.approx(logs[key], rel=1e-4), key
