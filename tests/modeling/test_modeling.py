import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.config import preset
from electra_tf.modeling.electra import build_generator_and_discriminator
from electra_tf.modeling.kernels import KERNEL_SETS, cpu_fast
from electra_tf.pretraining.objectives import ElectraPretrainer

_erf = np.vectorize(math.erf)


def np_gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def np_layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _np_attention(qkv, bias, keep, keep_probability):
    """Context [B, L, heads, d] from qkv [B, L, 3, heads, d], in float64.

    keep: bool mask broadcastable to [B, heads, L, L] (True: no dropout).
    """
    q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1]) + bias
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    probs = np.where(keep, probs / keep_probability, 0.0)
    return (probs @ v).transpose(0, 2, 1, 3)


def weights_by_path(model):
    return {v.path: v.numpy().astype(np.float64) for v in model.weights}


def np_encoder(w, prefix_layers, ids, mask, segments, num_heads, project):
    """BERT post-LN encoder written from the paper's equations, in float64."""
    length = ids.shape[1]
    x = (
        w["embeddings/word_embeddings"][ids]
        + w["embeddings/position_embeddings"][:length][None]
        + w["embeddings/token_type_embeddings"][segments]
    )
    x = np_layer_norm(x, w["embeddings/layer_norm/gamma"], w["embeddings/layer_norm/beta"])
    if project:
        x = x @ w["embeddings_project/kernel"] + w["embeddings_project/bias"]
    bias = (1.0 - mask[:, None, None, :]) * -10000.0
    hidden = x.shape[-1]
    d = hidden // num_heads
    for name in prefix_layers:
        qkv = x @ w[f"{name}/attention/qkv/kernel"] + w[f"{name}/attention/qkv/bias"]
        qkv = qkv.reshape(x.shape[0], length, 3, num_heads, d)  # the kernel's columns: q, k, v
        context = _np_attention(qkv, bias, True, 1.0).reshape(x.shape[0], length, hidden)
        attn = context @ w[f"{name}/attention/output/kernel"] + w[f"{name}/attention/output/bias"]
        x = np_layer_norm(
            x + attn,
            w[f"{name}/attention_layer_norm/gamma"],
            w[f"{name}/attention_layer_norm/beta"],
        )
        inner = np_gelu(x @ w[f"{name}/intermediate/kernel"] + w[f"{name}/intermediate/bias"])
        ffn = inner @ w[f"{name}/ffn_output/kernel"] + w[f"{name}/ffn_output/bias"]
        x = np_layer_norm(
            x + ffn, w[f"{name}/ffn_layer_norm/gamma"], w[f"{name}/ffn_layer_norm/beta"]
        )
    return x


@pytest.fixture(scope="module", params=sorted(KERNEL_SETS))
def models(request):
    """(config, generator, discriminator) built with each kernel set in turn."""
    keras.utils.set_random_seed(0)
    config = preset(
        "tiny",
        vocab_size=50,
        hidden_size=32,
        num_layers=2,
        embedding_size=16,
        generator_hidden_fraction=0.5,
        num_heads=4,
    )
    gen, disc = build_generator_and_discriminator(config.model, kernels=request.param)
    return config, gen, disc


def _inputs(rng, batch=3, length=7, vocab=50):
    ids = rng.integers(0, vocab, size=(batch, length)).astype(np.int32)
    mask = np.ones((batch, length), np.int32)
    mask[1, 4:] = 0  # a padded row
    segments = np.zeros((batch, length), np.int32)
    segments[:, 3:] = 1
    return ids, mask, segments


def test_discriminator_matches_numpy_reference(models, rng):
    config, _, disc = models
    ids, mask, segments = _inputs(rng)
    out = disc({"input_ids": ids, "input_mask": mask, "segment_ids": segments}, training=False)
    w = weights_by_path(disc)
    layers = [f"transformer_layer_{i}" for i in range(2)]
    expected = np_encoder(w, layers, ids, mask.astype(np.float64), segments, 4, project=True)
    np.testing.assert_allclose(out["sequence_output"].numpy(), expected, atol=2e-5)
    head = np_gelu(
        expected @ w["discriminator_predictions/dense/kernel"]
        + w["discriminator_predictions/dense/bias"]
    )
    logits = (
        head @ w["discriminator_predictions/logit/kernel"]
        + w["discriminator_predictions/logit/bias"]
    )[..., 0]
    np.testing.assert_allclose(out["logits"].numpy(), logits, atol=2e-5)


def test_generator_mlm_head_matches_numpy_reference(models, rng):
    config, gen, _ = models
    ids, mask, segments = _inputs(rng)
    positions = np.array([[1, 2], [0, 3], [5, 6]], np.int32)
    logits = gen(
        {
            "input_ids": ids,
            "input_mask": mask,
            "segment_ids": segments,
            "masked_lm_positions": positions,
        },
        training=False,
    ).numpy()
    w = weights_by_path(gen)
    layers = [f"transformer_layer_{i}" for i in range(2)]
    # The generator is 16 wide (0.5 x 32) with max(1, 16 // 64) = 1 head.
    seq = np_encoder(w, layers, ids, mask.astype(np.float64), segments, 1, project=False)
    gathered = np.take_along_axis(seq, positions[:, :, None], axis=1)
    h = np_gelu(
        gathered @ w["generator_predictions/dense/kernel"] + w["generator_predictions/dense/bias"]
    )
    h = np_layer_norm(
        h, w["generator_predictions/layer_norm/gamma"], w["generator_predictions/layer_norm/beta"]
    )
    expected = h @ w["embeddings/word_embeddings"].T + w["generator_predictions/output_bias"]
    assert logits.shape == (3, 2, 50)
    np.testing.assert_allclose(logits, expected, atol=2e-5)


def test_generator_is_narrower_but_equally_deep(models):
    config, gen, disc = models
    assert gen.encoder.hidden_size == 16 and disc.encoder.hidden_size == 32
    assert gen.encoder.num_layers == disc.encoder.num_layers == 2
    # Embedding width 16 equals the generator width: no projection there.
    assert gen.encoder.embeddings_project is None
    assert disc.encoder.embeddings_project is not None


def test_embeddings_are_one_shared_object_and_tracked_once():
    config = preset("tiny", vocab_size=40, num_layers=1)
    model = ElectraPretrainer(config)
    gen_enc, disc_enc = model.generator.encoder, model.discriminator.encoder
    assert gen_enc.embeddings is disc_enc.embeddings
    assert model.generator.mlm_head.embeddings is gen_enc.embeddings
    shared = {id(v) for v in gen_enc.embeddings.weights}
    assert len(shared) == 5  # word, position, token type, LayerNorm gamma and beta
    variables = model.trainable_variables
    assert len({id(v) for v in variables}) == len(variables)
    gen_ids = {id(v) for v in model.generator.trainable_variables}
    disc_ids = {id(v) for v in model.discriminator.trainable_variables}
    assert gen_ids & disc_ids == shared


@pytest.mark.parametrize("which", ["discriminator", "generator"])
def test_keras_file_round_trip(models, rng, tmp_path, which):
    _, gen, disc = models
    ids, mask, segments = _inputs(rng)
    inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": segments}
    model = disc if which == "discriminator" else gen
    if which == "generator":
        inputs["masked_lm_positions"] = np.array([[1, 2]] * 3, np.int32)
    path = str(tmp_path / f"{which}.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    before = tf.nest.flatten(model(inputs, training=False))
    after = tf.nest.flatten(reloaded(inputs, training=False))
    # A reloaded model runs the reference kernels: bit for bit the same
    # outputs as a reference model, the same to float rounding as a cpu_fast one.
    assert reloaded.encoder.kernels == "reference"
    for a, b in zip(before, after):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
        if model.encoder.kernels == "reference":
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_replica_dropout_scales_kept_units_and_differs_across_replicas(
    two_replica_strategy, kernel_set
):
    from electra_tf.modeling.layers import ReplicaDropout

    keras.utils.set_random_seed(3)
    x = np.ones((64, 32), np.float32)
    with two_replica_strategy.scope():
        layer = ReplicaDropout(0.25, kernels=kernel_set)
    single = layer(x, training=True).numpy()
    # Inverted dropout: kept units scaled by 1 / (1 - rate), about a quarter zeroed.
    assert set(np.unique(single)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((single == 0).mean() - 0.25) < 0.03
    np.testing.assert_array_equal(layer(x, training=False), x)

    per_replica = two_replica_strategy.run(lambda: layer(tf.ones((64, 32)), training=True))
    first, second = [
        t.numpy() for t in two_replica_strategy.experimental_local_results(per_replica)
    ]
    assert not np.array_equal(first == 0, second == 0)


def _numpy_unit_bits(index, key):
    """MurmurHash3's finaliser applied as mix(mix(low ^ k0) + high + k1), in NumPy."""

    def mix(h):
        h = h.astype(np.uint64)
        h ^= h >> 16
        h = (h * 0x85EBCA6B) & 0xFFFFFFFF
        h ^= h >> 13
        h = (h * 0xC2B2AE35) & 0xFFFFFFFF
        h ^= h >> 16
        return h

    index = np.asarray(index, np.uint64)
    low, high = index & 0xFFFFFFFF, index >> 32
    k0, k1 = (np.uint64(k) for k in key)
    return mix((mix(low ^ k0) + high + k1) & 0xFFFFFFFF).astype(np.uint32)


def test_unit_bits_match_a_numpy_murmur_finaliser_including_high_indices():
    key = np.array([0x9E3779B9, 0x7F4A7C15], np.uint32)
    index = np.array([0, 1, 2, 12345, 2**31 + 7, 2**32 - 1, 2**32, 5 * 2**32 + 3], np.int64)
    got = cpu_fast.unit_bits(tf.constant(index), tf.constant(key)).numpy()
    np.testing.assert_array_equal(got, _numpy_unit_bits(index, key))
    # Hand value for index 0 with zero keys: fmix32(fmix32(0)) = 0.
    zero = cpu_fast.unit_bits(tf.constant([0], tf.int64), tf.constant([0, 0], tf.uint32))
    assert zero.numpy()[0] == 0


def test_hashed_dropout_mask_is_the_hash_of_each_unit_index():
    seed = tf.constant([7, 11], tf.int64)
    keep, keep_probability = cpu_fast.dropout_keep_mask([256, 1023], seed, 0.1)
    assert keep_probability == 1 - 429496730 / 2**32  # round(0.1 * 2**32) of 2**32 dropped
    # The mask is the documented hash of the flat index under the seed's two keys.
    key = tf.random.stateless_uniform(
        [2], seed=seed, minval=None, maxval=None, dtype=tf.uint32
    ).numpy()
    expected = _numpy_unit_bits(np.arange(256 * 1023), key) >= 429496730
    np.testing.assert_array_equal(keep.numpy().reshape(-1), expected)


def test_dropout_masks_have_the_rate_an_unbiased_scale_and_independent_units(kernel_set):
    dropout_keep_mask = KERNEL_SETS[kernel_set].dropout_keep_mask
    seed = tf.constant([7, 11], tf.int64)
    keep, keep_probability = dropout_keep_mask([256, 1023], seed, 0.1)
    keep = keep.numpy()
    assert keep.shape == (256, 1023)
    assert keep_probability == pytest.approx(0.9, abs=1e-9)
    # 261,888 draws: the standard error of the drop fraction is 0.0006.
    assert abs((~keep).mean() - 0.1) < 0.003
    # Neighbouring units, units a row apart, and masks under two seeds are uncorrelated.
    flat = keep.reshape(-1).astype(np.float64)
    assert abs(np.corrcoef(flat[:-1], flat[1:])[0, 1]) < 0.01
    assert abs(np.corrcoef(keep[:-1].reshape(-1), keep[1:].reshape(-1))[0, 1]) < 0.01
    other = dropout_keep_mask([256, 1023], tf.constant([7, 12], tf.int64), 0.1)[0].numpy()
    assert abs(np.corrcoef(flat, other.reshape(-1))[0, 1]) < 0.01
    np.testing.assert_array_equal(dropout_keep_mask([256, 1023], seed, 0.1)[0], keep)
    with pytest.raises(ValueError, match="rate"):
        dropout_keep_mask([4], seed, 1.0)


@pytest.mark.parametrize("activation", ["tanh", "gelu"])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_dense_value_and_gradients_against_numpy_and_keras_own_call(
    rng, jit_compile, activation, kernel_set
):
    dense = KERNEL_SETS[kernel_set].dense
    x = rng.normal(size=(3, 5, 4)).astype(np.float32)
    upstream = rng.normal(size=(3, 5, 6)).astype(np.float32)
    layer = keras.layers.Dense(6, activation=activation, bias_initializer="random_normal")
    layer.build(x.shape)

    @tf.function(jit_compile=jit_compile)
    def grads(call, x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = call(x)
        return [y] + tape.gradient(y, [x, layer.kernel, layer.bias], output_gradients=upstream)

    y, dx, dkernel, dbias = [t.numpy() for t in grads(lambda x: dense(layer, x), tf.constant(x))]
    kernel, bias = (w.astype(np.float64) for w in layer.get_weights())
    # NumPy: y = f(z), z = x W + b; the bias gradient sums dy * f'(z) over every row.
    z = x.astype(np.float64) @ kernel + bias
    if activation == "tanh":
        expected_y, slope = np.tanh(z), 1 - np.tanh(z) ** 2
    else:  # the exact GELU: d/dz [z Phi(z)] = Phi(z) + z phi(z)
        expected_y = np_gelu(z)
        slope = 0.5 * (1.0 + _erf(z / math.sqrt(2.0))) + z * np.exp(-0.5 * z**2) / math.sqrt(
            2.0 * math.pi
        )
    dz = upstream * slope
    np.testing.assert_allclose(y, expected_y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dbias, dz.reshape(-1, 6).sum(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        dkernel, x.reshape(-1, 4).T @ dz.reshape(-1, 6), rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(dx, dz @ kernel.T, rtol=1e-5, atol=1e-5)
    for a, b in zip(grads(layer, tf.constant(x)), (y, dx, dkernel, dbias)):
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-5, atol=1e-6)


def test_dense_with_lora_runs_keras_own_call(rng, kernel_set):
    """The kernel sets keep what keras.layers.Dense adds: a LoRA update is part of the output."""
    x = rng.normal(size=(2, 4)).astype(np.float32)
    layer = keras.layers.Dense(3, activation="gelu")
    layer.build(x.shape)
    layer.enable_lora(2)
    layer.lora_kernel_b.assign(rng.normal(size=(2, 3)).astype(np.float32))
    kernel, bias = layer.kernel.numpy(), layer.bias.numpy()  # kernel: W + A B (scaled)
    out = KERNEL_SETS[kernel_set].dense(layer, tf.constant(x)).numpy()
    assert not np.allclose(kernel, layer._kernel.numpy())  # the LoRA update is not zero
    np.testing.assert_allclose(
        out, np_gelu(x.astype(np.float64) @ kernel + bias), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize("jit_compile", [False, True])
def test_cpu_fast_gelu_value_and_gradient_against_numpy(jit_compile):
    x = np.linspace(-9.0, 9.0, 721).astype(np.float32)
    upstream = np.cos(3.0 * x).astype(np.float32)

    @tf.function(jit_compile=jit_compile)
    def value_and_grad(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = cpu_fast.gelu(x)
        return y, tape.gradient(y, x, output_gradients=upstream)

    y, dx = [t.numpy() for t in value_and_grad(tf.constant(x))]
    x64 = x.astype(np.float64)
    # d/dx [x Phi(x)] = Phi(x) + x phi(x)
    cdf = 0.5 * (1.0 + _erf(x64 / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * x64**2) / math.sqrt(2.0 * math.pi)
    np.testing.assert_allclose(y, np_gelu(x64), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(dx, upstream * (cdf + x64 * pdf), rtol=1e-5, atol=1e-6)
    assert cpu_fast.gelu(tf.constant(x, tf.bfloat16)).dtype == tf.bfloat16


@pytest.mark.parametrize("jit_compile", [False, True])
def test_attention_value_and_gradient_against_numpy_finite_differences(
    rng, jit_compile, kernel_set
):
    scaled_dot_product_attention = KERNEL_SETS[kernel_set].scaled_dot_product_attention
    batch, length, heads, size = 2, 5, 2, 4
    qkv = rng.normal(size=(batch, length, 3, heads, size))
    mask = np.ones((batch, length))
    mask[1, 3:] = 0  # two padded keys in the second example
    bias = ((1.0 - mask) * -10000.0)[:, None, None, :]
    keep = rng.random((batch, heads, length, length)) > 0.3
    upstream = rng.normal(size=(batch, length, heads, size))

    @tf.function(jit_compile=jit_compile)
    def value_and_grad(qkv):
        with tf.GradientTape() as tape:
            tape.watch(qkv)
            context = scaled_dot_product_attention(
                qkv, tf.constant(bias, tf.float32), tf.constant(keep), 0.7
            )
        return context, tape.gradient(context, qkv, output_gradients=upstream.astype(np.float32))

    context, grad = [t.numpy() for t in value_and_grad(tf.constant(qkv, tf.float32))]
    np.testing.assert_allclose(context, _np_attention(qkv, bias, keep, 0.7), rtol=1e-5, atol=1e-5)
    # Central differences of sum(upstream * context) in float64, one input at a time.
    expected = np.zeros_like(qkv)
    step = 1e-6
    for index in np.ndindex(qkv.shape):
        plus, minus = qkv.copy(), qkv.copy()
        plus[index] += step
        minus[index] -= step
        expected[index] = np.sum(
            upstream
            * (_np_attention(plus, bias, keep, 0.7) - _np_attention(minus, bias, keep, 0.7))
        ) / (2 * step)
    np.testing.assert_allclose(grad, expected, rtol=1e-4, atol=1e-5)
    # Padded keys get no attention, so nothing flows back into them.
    np.testing.assert_allclose(grad[1, 3:, 1:], 0.0, atol=1e-6)


def test_attention_keeps_the_compute_dtype_and_matches_without_dropout(rng, kernel_set):
    scaled_dot_product_attention = KERNEL_SETS[kernel_set].scaled_dot_product_attention
    qkv = rng.normal(size=(2, 6, 3, 2, 8))
    bias = np.zeros((2, 1, 1, 6))
    out = scaled_dot_product_attention(
        tf.constant(qkv, tf.bfloat16), tf.constant(bias, tf.bfloat16)
    )
    assert out.dtype == tf.bfloat16
    expected = _np_attention(qkv, bias, np.ones((2, 2, 6, 6), bool), 1.0)
    np.testing.assert_allclose(out.numpy().astype(np.float64), expected, rtol=0.05, atol=0.05)
