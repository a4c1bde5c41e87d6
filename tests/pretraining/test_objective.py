import numpy as np
import tensorflow as tf

from electra_tf.modeling.kernels import cpu_fast
from electra_tf.pretraining import objective

# Vocabulary sizes below, at and above one block of cpu_fast's two-level
# searches, and with a padded last block.
VOCAB_SIZES = (3, cpu_fast.SAMPLING_BLOCK, cpu_fast.SAMPLING_BLOCK + 1, 1000)


def test_inverse_cdf_sampling_hand_example(kernel_set):
    probs = np.array([0.1, 0.2, 0.3, 0.4])
    logits = np.log(probs).astype(np.float32)[None, None, :].repeat(5, axis=1)
    uniforms = np.array([[0.05, 0.15, 0.35, 0.95, 0.0]], np.float32)
    ids = objective.sample_tokens(logits, uniforms, kernels=kernel_set).numpy()
    np.testing.assert_array_equal(ids, [[0, 1, 2, 3, 0]])


def test_sampling_frequencies_follow_softmax(rng, kernel_set):
    logits = np.array([2.0, 0.5, -1.0, 1.0, 0.0], np.float32)
    expected = np.exp(logits) / np.exp(logits).sum()
    n = 20000
    uniforms = rng.random((1, n)).astype(np.float32)
    ids = (
        objective.sample_tokens(np.tile(logits, (1, n, 1)), uniforms, kernels=kernel_set)
        .numpy()
        .ravel()
    )
    freq = np.bincount(ids, minlength=5) / n
    np.testing.assert_allclose(freq, expected, atol=0.012)


def test_sampling_equals_one_numpy_cumulative_sum_across_blocks(rng, kernel_set):
    for vocab in VOCAB_SIZES:
        logits = (3 * rng.normal(size=(4, 50, vocab))).astype(np.float32)
        uniforms = rng.random((4, 50)).astype(np.float32)
        ids = objective.sample_tokens(logits, uniforms, kernels=kernel_set).numpy()
        probs = np.exp(logits.astype(np.float64) - logits.max(-1, keepdims=True))
        cdf = np.cumsum(probs / probs.sum(-1, keepdims=True), -1)
        expected = np.minimum((cdf <= uniforms[..., None]).sum(-1), vocab - 1)
        np.testing.assert_array_equal(ids, expected)
    # Uniforms landing exactly on block boundaries of a uniform distribution.
    vocab = 4 * cpu_fast.SAMPLING_BLOCK
    edges = np.array([[0.0, 0.25, 0.5, 0.75]], np.float32)
    ids = objective.sample_tokens(
        np.zeros((1, 4, vocab), np.float32), edges, kernels=kernel_set
    ).numpy()
    np.testing.assert_array_equal(ids, [[0, 128, 256, 384]])


def test_temperature_sharpens_and_disallow_excludes(rng, kernel_set):
    logits = np.array([1.0, 0.0, 0.5], np.float32)
    n = 20000
    uniforms = rng.random((1, n)).astype(np.float32)
    tiled = np.tile(logits, (1, n, 1))
    cold = (
        objective.sample_tokens(tiled, uniforms, temperature=0.5, kernels=kernel_set)
        .numpy()
        .ravel()
    )
    expected = np.exp(logits / 0.5) / np.exp(logits / 0.5).sum()
    np.testing.assert_allclose(np.bincount(cold, minlength=3) / n, expected, atol=0.012)
    banned = np.zeros((1, n), np.int32)  # forbid id 0, the most likely one
    ids = objective.sample_tokens(tiled, uniforms, disallow_ids=banned, kernels=kernel_set).numpy()
    assert not np.any(ids == 0)


def test_replace_tokens_labels_only_real_changes():
    input_ids = np.array([[2, 10, 11, 12, 3, 0]], np.int32)
    positions = np.array([[1, 2, 3, 0]], np.int32)
    sampled = np.array([[20, 11, 30, 99]], np.int32)  # slot 1 samples the original token
    weights = np.array([[1, 1, 1, 0]], np.float32)  # slot 3 unused (points at [CLS])
    fake, labels = objective.replace_tokens(input_ids, positions, sampled, weights)
    np.testing.assert_array_equal(fake.numpy(), [[2, 20, 11, 30, 3, 0]])
    np.testing.assert_array_equal(labels.numpy(), [[0, 1, 0, 1, 0, 0]])


def test_masked_lm_sums_against_numpy(rng, kernel_set):
    logits = rng.normal(size=(2, 3, 6)).astype(np.float32)
    ids = rng.integers(0, 6, size=(2, 3)).astype(np.int32)
    weights = np.array([[1, 1, 0], [1, 0, 0]], np.float32)
    sums = objective.masked_lm_sums(logits, ids, weights, kernels=kernel_set)
    sums = {k: v.numpy() for k, v in sums.items()}
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -np.take_along_axis(log_probs, ids[..., None], -1)[..., 0]
    np.testing.assert_allclose(sums["nll"], (nll * weights).sum(), rtol=1e-5)
    assert sums["count"] == 3
    assert sums["correct"] == ((logits.argmax(-1) == ids) * weights).sum()


def test_masked_lm_sums_and_gradient_across_vocabulary_blocks(rng, kernel_set):
    for vocab in VOCAB_SIZES:
        logits = (4 * rng.normal(size=(3, 5, vocab))).astype(np.float32)
        ids = rng.integers(0, vocab, size=(3, 5)).astype(np.int32)
        weights = (rng.random((3, 5)) < 0.7).astype(np.float32)
        ids[0, 0], weights[0, 0] = logits[0, 0].argmax(), 1.0  # at least one hit
        logits_var = tf.Variable(logits)
        with tf.GradientTape() as tape:
            sums = objective.masked_lm_sums(logits_var, ids, weights, kernels=kernel_set)
        grad = tape.gradient(sums["nll"], logits_var).numpy()
        shifted = logits.astype(np.float64) - logits.max(-1, keepdims=True)
        probs = np.exp(shifted) / np.exp(shifted).sum(-1, keepdims=True)
        nll = -np.log(np.take_along_axis(probs, ids[..., None], -1)[..., 0])
        np.testing.assert_allclose(sums["nll"].numpy(), (weights * nll).sum(), rtol=1e-5)
        assert sums["correct"].numpy() == ((logits.argmax(-1) == ids) * weights).sum()
        expected = (probs - np.eye(vocab)[ids]) * weights[..., None]
        np.testing.assert_allclose(grad, expected, atol=1e-6)


def test_masked_lm_accuracy_takes_the_first_of_tied_maxima(kernel_set):
    # As tf.argmax: ties within a block and across blocks go to the lowest id.
    vocab = 3 * cpu_fast.SAMPLING_BLOCK
    logits = np.zeros((1, 3, vocab), np.float32)
    logits[0, 0, [5, 9]] = 2.0  # tie inside block 0
    logits[0, 1, [200, 300]] = 2.0  # tie across blocks 1 and 2
    logits[0, 2, [130, 131, 383]] = 2.0
    weights = np.ones((1, 3), np.float32)
    first = np.array([[5, 200, 130]], np.int32)
    later = np.array([[9, 300, 383]], np.int32)
    for targets, correct in ((first, 3), (later, 0)):
        sums = objective.masked_lm_sums(logits, targets, weights, kernels=kernel_set)
        assert sums["correct"].numpy() == correct


def test_discriminator_sums_against_numpy(rng):
    logits = rng.normal(size=(2, 5)).astype(np.float32)
    labels = rng.integers(0, 2, size=(2, 5)).astype(np.int32)
    mask = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]], np.int32)
    sums = {k: v.numpy() for k, v in objective.discriminator_sums(logits, labels, mask).items()}
    p = 1 / (1 + np.exp(-logits))
    bce = -(labels * np.log(p) + (1 - labels) * np.log(1 - p))
    np.testing.assert_allclose(sums["loss"], (bce * mask).sum(), rtol=1e-5)
    pred = (logits > 0).astype(int)
    assert sums["count"] == 7
    assert sums["correct"] == ((pred == labels) * mask).sum()
    assert sums["true_positive"] == (pred * labels * mask).sum()
    assert sums["predicted_positive"] == (pred * mask).sum()
    assert sums["actual_positive"] == (labels * mask).sum()


def test_safe_ratio_with_nothing_counted_is_zero_not_nan():
    assert objective.safe_ratio(tf.constant(0.0), tf.constant(0.0)).numpy() == 0.0
