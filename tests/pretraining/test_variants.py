"""The paper's pre-training variants: objectives, generator options, sharing, training algorithms.

Losses are recomputed with NumPy from the logits the model produced, so the
checks are independent of the objective code under test.
"""

import numpy as np
import pytest
import tensorflow as tf
from conftest import make_batch

# The same tiny model and batch shapes as the default objective's tests.
from test_pretrainer import LENGTH, SLOTS, VOCAB
from test_pretrainer import build as built
from test_pretrainer import tiny_config as config_for

from electra_tf.config import ConfigError
from electra_tf.pretraining import objective
from electra_tf.pretraining.optimization import create_optimizer


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def masked_nll(logits, ids, weights):
    nll = -np.take_along_axis(log_softmax(logits.astype(np.float64)), ids[..., None], -1)[..., 0]
    return (nll * weights).sum() / (weights.sum() + 1e-6)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def stats_and_sums(model, batch):
    tensors = tf.nest.map_structure(tf.convert_to_tensor, batch)
    sums = model.compute_sums(tensors)
    _, stats = model._loss_and_stats(tensors, training=False)
    return {k: float(v) for k, v in stats.items()}, sums


def test_mlm_is_the_full_size_model_as_a_masked_lm(rng):
    batch = make_batch(rng, 4, LENGTH, SLOTS, VOCAB)
    model = built(config_for(objective="mlm"), batch)
    assert model.generator is None
    stats, sums = stats_and_sums(model, batch)
    logits = sums["gen_logits"].numpy()
    assert logits.shape == (4, SLOTS, VOCAB)
    expected = masked_nll(logits, batch["masked_lm_ids"], batch["masked_lm_weights"])
    assert stats["masked_lm_loss"] == pytest.approx(expected, rel=1e-5)
    assert stats["total_loss"] == pytest.approx(expected, rel=1e-5)  # weight 1, no discriminator
    assert "disc_loss" not in stats
    # The MLM is the encoder that fine-tuning takes: it gets the gradients.
    tensors = tf.nest.map_structure(tf.convert_to_tensor, batch)
    with tf.GradientTape() as tape:
        loss, _ = model._loss_and_stats(tensors, training=True)
    variables = model.trainable_variables
    grads = dict(zip([v.path for v in variables], tape.gradient(loss, variables)))
    assert all(g is not None for g in grads.values())
    encoder_paths = {v.path for v in model.discriminator.encoder.trainable_variables}
    assert encoder_paths <= set(grads)
    head_paths = {v.path for v in model.discriminator.rtd_head.weights}
    assert not head_paths & set(grads)  # the unused token head is not trained


def test_electra_15_scores_only_the_masked_positions(rng):
    batch = make_batch(rng, 4, LENGTH, SLOTS, VOCAB)
    model = built(config_for(objective="electra_15"), batch)
    stats, sums = stats_and_sums(model, batch)
    d = sums["disc_logits"].numpy().astype(np.float64)
    labels = sums["labels"].numpy().astype(np.float64)
    only_masked = np.zeros_like(d)
    for row in range(4):
        for slot in range(SLOTS):
            if batch["masked_lm_weights"][row, slot] > 0:
                only_masked[row, batch["masked_lm_positions"][row, slot]] = 1.0
    p = sigmoid(d)
    bce = -(labels * np.log(p) + (1 - labels) * np.log(1 - p))
    expected = (bce * only_masked).sum() / (only_masked.sum() + 1e-6)
    assert stats["disc_loss"] == pytest.approx(expected, rel=1e-5)
    gen = masked_nll(sums["gen_logits"].numpy(), batch["masked_lm_ids"], batch["masked_lm_weights"])
    assert stats["total_loss"] == pytest.approx(gen + 50.0 * expected, rel=1e-5)
    # A logit at an unmasked position has no influence on the loss.
    logits = tf.Variable(sums["disc_logits"])
    with tf.GradientTape() as tape:
        loss = objective.discriminator_sums(
            logits,
            sums["labels"],
            objective.positions_mask(
                batch["masked_lm_positions"], batch["masked_lm_weights"], LENGTH
            ),
        )["loss"]
    grad = tape.gradient(loss, logits).numpy()
    assert np.all(grad[only_masked == 0] == 0) and np.all(grad[only_masked == 1] != 0)


def test_replace_mlm_predicts_the_originals_from_the_generator_samples(rng):
    batch = make_batch(rng, 4, LENGTH, SLOTS, VOCAB)
    model = built(config_for(objective="replace_mlm"), batch)
    stats, sums = stats_and_sums(model, batch)
    fake = sums["fake_ids"].numpy()
    positions = batch["masked_lm_positions"]
    weights = batch["masked_lm_weights"]
    # The full-size model saw the samples, never [MASK], at the masked positions.
    seen = np.take_along_axis(fake, positions, 1)
    np.testing.assert_array_equal(seen[weights > 0], sums["sampled_ids"].numpy()[weights > 0])
    assert not np.any(fake == 4)
    main_logits = model._full_size_mlm(
        tf.constant(fake),
        tf.nest.map_structure(tf.convert_to_tensor, batch),
        tf.constant(positions),
        False,
    )[1].numpy()
    main = masked_nll(main_logits, batch["masked_lm_ids"], weights)
    gen = masked_nll(sums["gen_logits"].numpy(), batch["masked_lm_ids"], weights)
    assert stats["replace_mlm_loss"] == pytest.approx(main, rel=1e-5)
    assert stats["total_loss"] == pytest.approx(gen + main, rel=1e-5)


def numpy_all_tokens(logits, copy_logits, inputs, targets, mask):
    probs = np.exp(log_softmax(logits.astype(np.float64)))
    d = sigmoid(copy_logits.astype(np.float64))
    q = np.take_along_axis(probs, targets[..., None], -1)[..., 0]
    p = d * (inputs == targets) + (1 - d) * q
    return -(np.log(p) * mask).sum(), mask.sum()


def test_copy_mechanism_against_a_hand_example():
    # One position whose input is the target, one where it was replaced.
    logits = np.log(np.array([[[0.5, 0.25, 0.25], [0.2, 0.2, 0.6]]], np.float32))
    copy_logits = np.array([[np.log(3.0), 0.0]], np.float32)  # D = 0.75, then 0.5
    inputs = np.array([[1, 0]], np.int32)
    targets = np.array([[1, 2]], np.int32)
    sums = objective.all_tokens_sums(logits, copy_logits, inputs, targets, np.ones((1, 2)))
    # p0 = 0.75 + 0.25 * 0.25 = 0.8125 (copy); p1 = 0.5 * 0.6 = 0.3 (generate).
    assert float(sums["nll"]) == pytest.approx(-np.log(0.8125) - np.log(0.3), rel=1e-6)
    # Predictions: position 0 copies its input (0.8125 against 0.25 * 0.5), right;
    # position 1 also copies (0.5 + 0.5 * 0.2 = 0.6 against 0.5 * 0.6 for token 2), wrong.
    assert float(sums["correct"]) == 1.0
    assert float(sums["count"]) == 2.0


def test_all_tokens_mlm_loss_matches_numpy(rng):
    batch = make_batch(rng, 4, LENGTH, SLOTS, VOCAB)
    model = built(config_for(objective="all_tokens_mlm"), batch)
    stats, sums = stats_and_sums(model, batch)
    fake = sums["fake_ids"].numpy()
    tensors = tf.nest.map_structure(tf.convert_to_tensor, batch)
    outputs = model.discriminator(
        {
            "input_ids": tf.constant(fake),
            "input_mask": tensors["input_mask"],
            "segment_ids": tensors["segment_ids"],
        }
    )
    every = np.broadcast_to(np.arange(LENGTH), fake.shape).astype(np.int32)
    logits = model.mlm_head(outputs["sequence_output"], tf.constant(every)).numpy()
    nll, count = numpy_all_tokens(
        logits,
        outputs["logits"].numpy(),
        fake,
        batch["input_ids"],
        batch["input_mask"].astype(np.float64),
    )
    assert stats["all_tokens_mlm_loss"] == pytest.approx(nll / count, rel=1e-5)
    gen = masked_nll(sums["gen_logits"].numpy(), batch["masked_lm_ids"], batch["masked_lm_weights"])
    assert stats["total_loss"] == pytest.approx(gen + nll / count, rel=1e-5)


def test_uniform_generator_has_no_weights_and_samples_uniformly(rng):
    batch = make_batch(rng, 64, LENGTH, SLOTS, VOCAB)
    model = built(config_for(uniform_generator=True), batch)
    assert model.generator is None
    stats, sums = stats_and_sums(model, batch)
    assert "masked_lm_loss" not in stats  # no generator, nothing to report
    np.testing.assert_allclose(
        float(sums["mlm"]["nll"]), np.log(VOCAB) * batch["masked_lm_weights"].sum(), rtol=1e-5
    )
    d = sums["disc_logits"].numpy().astype(np.float64)
    labels = sums["labels"].numpy().astype(np.float64)
    mask = batch["input_mask"].astype(np.float64)
    bce = -(labels * np.log(sigmoid(d)) + (1 - labels) * np.log(1 - sigmoid(d)))
    # Only the discriminator's loss is optimised.
    assert stats["total_loss"] == pytest.approx(50.0 * (bce * mask).sum() / mask.sum(), rel=1e-5)
    # Inverse-CDF sampling of a uniform softmax: id = floor(u * V).
    expected = np.minimum(np.floor(batch["sampling_uniforms"] * VOCAB), VOCAB - 1)
    np.testing.assert_array_equal(sums["sampled_ids"].numpy(), expected)


def test_disallow_correct_never_samples_the_original(rng):
    batch = make_batch(rng, 16, LENGTH, SLOTS, VOCAB)
    model = built(config_for(disallow_correct=True), batch)
    # A generator sure of the right answer: without the option it samples it.
    sampled = objective.sample_tokens(
        10.0 * tf.one_hot(batch["masked_lm_ids"], VOCAB),
        batch["sampling_uniforms"],
        disallow_ids=batch["masked_lm_ids"],
    ).numpy()
    assert not np.any(sampled == batch["masked_lm_ids"])
    _, sums = stats_and_sums(model, batch)
    used = batch["masked_lm_weights"] > 0
    assert not np.any(sums["sampled_ids"].numpy()[used] == batch["masked_lm_ids"][used])
    labels = sums["labels"].numpy()
    # Every used masked position is therefore labelled replaced.
    assert labels.sum() == used.sum()


def test_weight_sharing_all_ties_every_encoder_weight(rng):
    batch = make_batch(rng, 4, LENGTH, SLOTS, VOCAB)
    model = built(config_for(weight_sharing="all", generator_hidden_fraction=1.0), batch)
    assert model.generator.encoder is model.discriminator.encoder
    generator = {id(v) for v in model.generator.weights}
    discriminator = {id(v) for v in model.discriminator.weights}
    own = generator - discriminator
    head = {id(v) for v in model.generator.mlm_head.weights} - discriminator
    assert own == head and len(head) == 5  # only the masked-LM head's dense, LN, bias
    assert len(model.generator.encoder.weights) > 10
    # One set of encoder weights: no duplicates among the trained variables.
    ids = [id(v) for v in model.trainable_variables]
    assert len(ids) == len(set(ids))


def test_weight_sharing_none_gives_the_generator_its_own_embeddings(rng):
    batch = make_batch(rng, 4, LENGTH, SLOTS, VOCAB)
    model = built(config_for(weight_sharing="none"), batch)
    gen, disc = model.generator.encoder.embeddings, model.discriminator.encoder.embeddings
    assert gen is not disc
    assert not {id(v) for v in gen.weights} & {id(v) for v in disc.weights}
    assert gen.word_embeddings.shape == disc.word_embeddings.shape


def test_sharing_and_two_stage_need_equal_sizes():
    with pytest.raises(ConfigError, match="--weight_sharing=all.*--generator_hidden_fraction=1"):
        config_for(weight_sharing="all")
    with pytest.raises(ConfigError, match="--training=two_stage.*--weight_sharing=none"):
        config_for(training="two_stage", generator_hidden_fraction=1.0)
    with pytest.raises(ConfigError, match="--training=adversarial.*--objective=electra"):
        config_for(training="adversarial", objective="mlm")
    with pytest.raises(ConfigError, match="--objective='bert'"):
        config_for(objective="bert")


def weights_of(layer):
    return [w.numpy().copy() for w in layer.weights]


def test_two_stage_trains_the_generator_then_freezes_it(rng):
    config = config_for(
        training="two_stage",
        weight_sharing="none",
        generator_hidden_fraction=1.0,
        num_train_steps=4,
    )
    batch = make_batch(rng, 4, LENGTH, SLOTS, VOCAB)
    model = built(config, batch)
    optimizer = create_optimizer(config)
    optimizer.build(model.trainable_variables)
    model.compile(optimizer=optimizer)
    data = tf.data.Dataset.from_tensors(batch).repeat()

    disc_before, gen_before = weights_of(model.discriminator), weights_of(model.generator)
    model.set_stage("generator")
    model.fit(data, steps_per_epoch=2, verbose=0)
    for a, b in zip(disc_before, weights_of(model.discriminator)):
        np.testing.assert_array_equal(a, b)  # stage 1 leaves the discriminator alone
    assert any(np.abs(a - b).max() > 0 for a, b in zip(gen_before, weights_of(model.generator)))

    model.initialise_discriminator_from_generator()
    for a, b in zip(model.generator.encoder.weights, model.discriminator.encoder.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert int(model.discriminator_initialised.numpy()) == 1

    model.set_stage("discriminator")
    gen_frozen, disc_start = weights_of(model.generator), weights_of(model.discriminator)
    history = model.fit(data, steps_per_epoch=2, verbose=0)
    for a, b in zip(gen_frozen, weights_of(model.generator)):
        np.testing.assert_array_equal(a, b)  # momentum from stage 1 must not move it either
    assert any(np.abs(a - b).max() > 0 for a, b in zip(disc_start, weights_of(model.discriminator)))
    assert "disc_loss" in history.history
    assert int(optimizer.iterations.numpy()) == 4


def test_reinforce_gradient_favours_samples_rewarded_above_the_baseline():
    logits = tf.Variable(np.zeros((1, 2, 3), np.float32))
    sampled = tf.constant([[0, 1]], tf.int32)
    rewards = tf.constant([[1.0, 0.0]])  # leave-one-out baselines: 0 for slot 0, 1 for slot 1
    weights = tf.ones((1, 2))
    with tf.GradientTape() as tape:
        loss = objective.reinforce_sums(logits, sampled, rewards, weights)["loss"]
    grad = tape.gradient(loss, logits).numpy()[0]
    # d/dz of -(r - b) log softmax(z)[s] = -(r - b) (onehot(s) - p), with p = 1/3.
    p = np.full(3, 1 / 3)
    np.testing.assert_allclose(grad[0], -1.0 * (np.eye(3)[0] - p), atol=1e-6)
    np.testing.assert_allclose(grad[1], 1.0 * (np.eye(3)[1] - p), atol=1e-6)
    # A descent step makes the rewarded sample more likely and the other less.
    stepped = tf.nn.softmax(logits - 0.1 * grad).numpy()[0]
    assert stepped[0, 0] > 1 / 3 and stepped[1, 1] < 1 / 3


def test_reinforce_surrogate_matches_numpy_and_ignores_how_the_batch_is_split(rng):
    logits = rng.normal(size=(4, 3, 7)).astype(np.float32)
    sampled = rng.integers(0, 7, size=(4, 3)).astype(np.int32)
    rewards = rng.random((4, 3)).astype(np.float32)
    weights = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0], [0, 0, 0]], np.float32)
    log_p = np.take_along_axis(
        log_softmax(logits.astype(np.float64) / 2.0), sampled[..., None], -1
    )[..., 0]
    expected = 0.0
    for row in range(4):
        for slot in range(3):
            others = [j for j in range(3) if j != slot and weights[row, j] > 0]
            baseline = np.mean(rewards[row, others]) if others else 0.0
            expected -= weights[row, slot] * (rewards[row, slot] - baseline) * log_p[row, slot]
    whole = float(objective.reinforce_sums(logits, sampled, rewards, weights, 2.0)["loss"])
    assert whole == pytest.approx(expected, rel=1e-5)
    halves = sum(
        float(
            objective.reinforce_sums(
                logits[i : i + 2], sampled[i : i + 2], rewards[i : i + 2], weights[i : i + 2], 2.0
            )["loss"]
        )
        for i in (0, 2)
    )
    assert halves == pytest.approx(whole, rel=1e-5)


def test_adversarial_generator_learns_only_from_the_reward(rng):
    batch = make_batch(rng, 4, LENGTH, SLOTS, VOCAB)
    model = built(config_for(training="adversarial"), batch)
    tensors = tf.nest.map_structure(tf.convert_to_tensor, batch)
    sums = model.compute_sums(tensors, training=False)
    d = sums["disc_logits"].numpy().astype(np.float64)
    labels = sums["labels"].numpy().astype(np.float64)
    bce = -(labels * np.log(sigmoid(d)) + (1 - labels) * np.log(1 - sigmoid(d)))
    rewards = np.take_along_axis(bce, batch["masked_lm_positions"], 1)
    w = batch["masked_lm_weights"]
    assert float(sums["reinforce"]["reward"]) == pytest.approx((rewards * w).sum(), rel=1e-5)
    # The generator's objective is the REINFORCE surrogate, not the likelihood: the
    # total loss minus lambda * L_disc is exactly it (over the global slot count).
    with tf.GradientTape(persistent=True) as tape:
        local = model._local_sums(tensors, training=False)
        loss = model._loss(local, model._global_counts(tensors))
        generator_part = loss - 50.0 * local["disc"]["loss"] / (
            tf.reduce_sum(tf.cast(tensors["input_mask"], tf.float32)) + 1e-6
        )
        surrogate = local["reinforce"]["loss"] / (w.sum() + 1e-6)
        disc_sum = local["disc"]["loss"]
    assert float(generator_part) == pytest.approx(float(surrogate), rel=1e-5, abs=1e-6)
    mlm_nll = float(local["mlm"]["nll"])
    assert mlm_nll > 0 and abs(float(generator_part)) < mlm_nll / w.sum()
    # The reward is a constant: the surrogate never reaches the discriminator's
    # own weights (which would otherwise learn to raise their loss).
    discriminator_only = [
        v
        for v in model.discriminator.trainable_variables
        if not any(v is g for g in model.generator.weights)
    ]
    assert discriminator_only
    grads = tape.gradient(surrogate, discriminator_only)
    # (None, or zeros.)
    assert all(g is None or not np.any(tf.convert_to_tensor(g).numpy()) for g in grads)
    # ...while the discriminator's own loss does reach them.
    grads = tape.gradient(disc_sum, discriminator_only)
    assert any(np.any(tf.convert_to_tensor(g).numpy()) for g in grads if g is not None)


def test_two_stage_schedule_warms_up_again_for_the_discriminator():
    from electra_tf.pretraining.optimization import learning_rate_schedule

    config = config_for(
        training="two_stage",
        weight_sharing="none",
        generator_hidden_fraction=1.0,
        num_train_steps=200,
        two_stage_generator_steps=100,
        num_warmup_steps=10,
        learning_rate=1e-3,
    )
    schedule = learning_rate_schedule(config)
    rate = lambda step: float(schedule(step))  # noqa: E731
    # Stage 1: warmup over 10 steps, linear decay to 0 at step 100.
    assert rate(5) == pytest.approx(1e-3 * (1 - 5 / 100) * 0.5)
    assert rate(50) == pytest.approx(1e-3 * 0.5)
    # Stage 2 starts again from zero and warms up: the same curve shifted by 100.
    assert rate(100) == pytest.approx(0.0)
    assert rate(105) == pytest.approx(rate(5))
    assert rate(150) == pytest.approx(rate(50))


def test_variant_flags_that_do_not_go_together_are_refused():
    with pytest.raises(ConfigError, match="--objective=mlm.*no generator"):
        config_for(objective="mlm", disallow_correct=True)
    with pytest.raises(ConfigError, match="--init_checkpoint.*--weight_sharing=embeddings"):
        config_for(weight_sharing="none", init_checkpoint="/some/run")
