"""Electric: the two-tower cloze generator, the noise-contrastive loss, against NumPy."""

import numpy as np
import pytest
import tensorflow as tf
from conftest import CLS, SEP, make_batch
from test_pretrainer import LENGTH, SLOTS, VOCAB, build, np_inverse_cdf, tiny_config

from electra_tf.config import ConfigError
from electra_tf.modeling.electra import build_generator_and_discriminator
from electra_tf.pretraining import objective


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_cloze_targets_leave_out_cls_seps_and_padding():
    ids = np.array([[CLS, 7, 8, SEP, 9, SEP, 0], [CLS, 5, SEP, 0, 0, 0, 0]], np.int32)
    mask = (ids != 0).astype(np.int32)
    np.testing.assert_array_equal(
        objective.cloze_targets(ids, mask).numpy(), [[0, 1, 1, 0, 1, 0, 0], [0, 1, 0, 0, 0, 0, 0]]
    )


def test_electric_logit_by_hand():
    rng = np.random.default_rng(0)
    energy = rng.normal(size=(2, 3)).astype(np.float32)
    cloze = rng.normal(size=(2, 3, 5)).astype(np.float32)
    ids = rng.integers(0, 5, size=(2, 3)).astype(np.int32)
    log_q = np.take_along_axis(log_softmax(cloze.astype(np.float64)), ids[..., None], -1)[..., 0]
    expected = energy + log_q + np.log(0.15 / 0.85)
    np.testing.assert_allclose(
        objective.electric_logits(energy, cloze, ids, 0.15).numpy(), expected, rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize("which", ["left_to_right", "right_to_left"])
def test_towers_see_only_one_side_and_the_cloze_never_sees_its_own_token(which):
    config = tiny_config(objective="electric")
    generator, _ = build_generator_and_discriminator(config.model, generator_kind="two_tower_cloze")
    rng = np.random.default_rng(1)
    ids = rng.integers(5, VOCAB, size=(1, 8)).astype(np.int32)
    inputs = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
    tower = getattr(generator, which)
    before, cloze_before = tower(inputs).numpy(), generator(inputs).numpy()
    changed = ids.copy()
    changed[0, 4] = (ids[0, 4] + 1 - 5) % (VOCAB - 5) + 5
    after = tower({**inputs, "input_ids": changed}).numpy()
    cloze_after = generator({**inputs, "input_ids": changed}).numpy()
    # Changing token 4 moves the tower's states only on the side that sees it.
    unchanged = slice(0, 4) if which == "left_to_right" else slice(5, 8)
    moved = slice(4, 8) if which == "left_to_right" else slice(0, 5)
    np.testing.assert_allclose(after[0, unchanged], before[0, unchanged], atol=1e-6)
    assert np.abs(after[0, moved] - before[0, moved]).max() > 1e-4
    # The cloze distribution of position 4 does not depend on token 4 itself.
    np.testing.assert_allclose(cloze_after[0, 4], cloze_before[0, 4], atol=1e-5)
    assert np.abs(cloze_after[0, 3] - cloze_before[0, 3]).max() > 1e-4


def test_electric_loss_matches_numpy(rng):
    config = tiny_config(objective="electric", mask_rate=0.2)
    batch = make_batch(rng, 4, LENGTH, SLOTS, VOCAB, mask_rate=0.2)
    model = build(config, batch)
    tensors = tf.nest.map_structure(tf.convert_to_tensor, batch)
    sums = model.compute_sums(tensors)
    loss, stats = model._loss_and_stats(tensors, training=False)
    stats = {name: float(value) for name, value in stats.items()}

    ids, mask, w = batch["input_ids"], batch["input_mask"] > 0, batch["masked_lm_weights"]
    cloze = model.generator({k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")})
    cloze = cloze.numpy().astype(np.float64)
    log_q = log_softmax(cloze)
    # Cloze NLL over the real tokens other than [CLS] and [SEP].
    targets = mask & (ids != CLS) & (ids != SEP)
    nll = -np.take_along_axis(log_q, ids[..., None], -1)[..., 0]
    cloze_loss = nll[targets].mean()
    # Noise samples at the masked slots; every masked position is labelled noise.
    gen_logits = np.take_along_axis(cloze, batch["masked_lm_positions"][..., None], 1)
    sampled = np_inverse_cdf(gen_logits, batch["sampling_uniforms"])
    fake, labels = ids.copy(), np.zeros(ids.shape)
    for row in range(4):
        for slot in range(SLOTS):
            if w[row, slot] > 0:
                fake[row, batch["masked_lm_positions"][row, slot]] = sampled[row, slot]
                labels[row, batch["masked_lm_positions"][row, slot]] = 1
    np.testing.assert_array_equal(sums["fake_ids"].numpy(), fake)
    np.testing.assert_array_equal(sums["labels"].numpy(), labels)
    energy = model.discriminator(
        {"input_ids": fake, "input_mask": batch["input_mask"], "segment_ids": batch["segment_ids"]}
    )["logits"].numpy()
    logits = energy + np.take_along_axis(log_q, fake[..., None], -1)[..., 0] + np.log(0.2 / 0.8)
    p = 1 / (1 + np.exp(-logits))
    bce = -(labels * np.log(p) + (1 - labels) * np.log(1 - p))
    disc_loss = bce[mask].mean()
    assert stats["cloze_loss"] == pytest.approx(cloze_loss, rel=1e-5)
    assert stats["disc_loss"] == pytest.approx(disc_loss, rel=1e-5)
    assert float(loss) == pytest.approx(cloze_loss + 50.0 * disc_loss, rel=1e-5)
    # The masked-LM metrics read the cloze model at the masked slots, as the original's.
    masked_nll = -np.take_along_axis(
        log_softmax(gen_logits), batch["masked_lm_ids"][..., None], -1
    )[..., 0]
    assert stats["masked_lm_loss"] == pytest.approx((masked_nll * w).sum() / w.sum(), rel=1e-5)


def test_no_gradient_reaches_the_cloze_model_through_the_noise_term(rng):
    config = tiny_config(objective="electric")
    batch = make_batch(rng, 4, LENGTH, SLOTS, VOCAB)
    model = build(config, batch)
    tensors = tf.nest.map_structure(tf.convert_to_tensor, batch)
    towers_only = [
        v
        for v in model.generator.trainable_variables
        if not any(v is d for d in model.discriminator.trainable_variables)
    ]
    with tf.GradientTape() as tape:
        disc_sum = model.compute_sums(tensors)["disc"]["loss"]
    grads = tape.gradient(disc_sum, towers_only)
    assert towers_only and all(
        g is None or not np.any(tf.convert_to_tensor(g).numpy()) for g in grads
    )


def test_electric_needs_its_generator():
    with pytest.raises(ConfigError, match="--objective=electric"):
        tiny_config(objective="electric", uniform_generator=True)
    with pytest.raises(ConfigError, match="--objective=electric"):
        tiny_config(objective="electric", weight_sharing="all", generator_hidden_fraction=1.0)


@pytest.mark.slow
def test_exported_electric_discriminator_gives_the_pseudo_log_likelihood(tmp_path):
    from finetuning_support import VOCAB, write_vocab

    from electra_tf.serving.exporter import export_discriminator

    vocab = write_vocab(str(tmp_path / "vocab.txt"))
    config = tiny_config(objective="electric", vocab_size=len(VOCAB), max_seq_length=16)
    _, discriminator = build_generator_and_discriminator(
        config.model, generator_kind="two_tower_cloze"
    )
    version = export_discriminator(discriminator, config, vocab, str(tmp_path / "export"), "m")
    serve = tf.saved_model.load(version).signatures["serving_default"]
    out = serve(text=tf.constant(["the movie was good", "a very dull plot"]))
    ids, mask = out["input_ids"].numpy(), out["input_mask"].numpy()
    energy = discriminator(
        {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}
    )["logits"].numpy()
    content = (mask > 0) & (ids != VOCAB.index("[CLS]")) & (ids != VOCAB.index("[SEP]"))
    np.testing.assert_allclose(
        out["pseudo_log_likelihood"].numpy(), -(energy * content).sum(-1), rtol=1e-5, atol=1e-5
    )
    assert content.sum(-1).tolist() == [4, 4]
