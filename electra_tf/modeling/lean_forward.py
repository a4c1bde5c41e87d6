"""A lean inference forward pass of a classifier, for exports ("lean" forward).

The Keras model traced as it is (`forward="keras"`) brings its layers' shape
bookkeeping into the graph: every dense layer on a [B, L, H] input becomes a
reshape/shape/concat/gather chain around its MatMul, the bias an `AddV2`, the
attention two einsums around transposes. At batch 1 the forward pass is about
0.5 GFLOP, so those ops' dispatch costs as much as the arithmetic. This
module computes the same function from the same variables with the ops a
CPU graph executor runs best:

* the token axis is flattened once, so every dense layer is one 2-D `MatMul`
  + `BiasAdd` (+ `tf.nn.gelu`), the pattern Grappler's remapper fuses into one
  `_FusedMatMul` kernel on a CPU;
* queries, keys and values are split by one transpose and multiplied
  batch-wise, with the kernel that is faster for the request's size (below);
* the last layer runs only the [CLS] row through its attention output and
  feed-forward network: the classifier reads nothing else, so the other
  rows' work is skipped (exactly: each row of those layers is computed on its
  own).

The maths is the Keras model's (exact GELU, the same LayerNorm formula,
softmax in float32); results agree with it to float32 rounding (tests: within
1e-5). Inference only: no dropout.

With `BfloatWeights` (bfloat16 copies of the encoder's dense kernels and
biases, saved beside the float32 ones), the encoder's dense layers multiply
in bfloat16: each casts its input down, runs the fused MatMul + BiasAdd
(+ GELU) in bfloat16 and casts the result back, while the residual stream,
LayerNorms, attention and head stay float32. On CPUs with AVX512-BF16 or AMX,
oneDNN runs those products about 1.5x (batch 1) to 2x (batch 32) as fast as
float32; elsewhere it emulates them, slower. The outputs then differ from
float32 by bfloat16's rounding (2^-8 relative per product; see
docs/serving.md for the measured probability error).

Small requests and many threads. With more than one intra-op thread,
TensorFlow's oneDNN kernels split even a single text's few-kilobyte attention
tensors over the threads and wait for them: on a 2-core CPU, with two threads,
a 25-token request's `Transpose` took 69 against 16 us, its `Softmax` 52
against 25 us, and its batched products 3x their one-thread time, so the
default thread count answered one text slower than one thread did (18 against
10 ms). So transposes are unary `Einsum`s (16 us at either thread count) and
the softmax is its formula in element-wise ops (25 us), no slower at batch 32;
and a request of at most `SMALL_REQUEST_TOKENS` tokens (B * L) takes a branch
whose batched products are `BatchMatMulV3`, which TensorFlow's oneDNN rewrite
leaves to Eigen's kernel; larger ones keep oneDNN's `BatchMatMulV2`, about 3x
as fast at 32 texts of 32 tokens.

The portable variant (`forward="portable"`, the ONNX and LiteRT exports')
is the same pass with the plain op of each step instead of the ones chosen
for TensorFlow's CPU kernels: no branch, `Transpose`s, `Softmax`, batched
`MatMul`s, and LayerNorm and GELU written as the graphs other runtimes'
optimizers recognise and fuse (ONNX Runtime's LayerNormalization,
SkipLayerNormalization and (Bias)Gelu fusions: mean, `x - mean`, `Pow` 2,
mean, `+ epsilon`, `Sqrt`, `Div`, `* gamma + beta`; `x * (1 + erf(x / sqrt 2)) * 0.5`).

Conventions: B = batch, L = sequence length, N = B * L, E = embedding size,
H = hidden size.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import keras
import tensorflow as tf

from electra_tf.modeling.encoder import ElectraEncoder
from electra_tf.modeling.layers import ElectraEmbeddings, TransformerLayer

FORWARDS = ("lean", "portable", "keras")
DEFAULT_FORWARD = "lean"
# Requests of at most this many tokens (B * L) multiply attention with Eigen's kernel.
SMALL_REQUEST_TOKENS = 64


def supports(model) -> bool:
    """Whether `model` (an `ElectraClassifier`) can be exported with the lean forward pass.

    It needs the plain float32 encoder this module re-implements: shared-table
    embeddings of its own, bidirectional attention, the standard layers.
    """
    encoder = getattr(model, "encoder", None)
    head = head_layers(model)
    if (
        not isinstance(encoder, ElectraEncoder)
        or model.compute_dtype != "float32"
        or head is None
        or any(layer.activation not in _ACTIVATIONS for layer in head)
    ):
        return False
    return (
        type(encoder.embeddings) is ElectraEmbeddings
        and encoder.transformer_layers
        and encoder.attention_direction == "bidirectional"
        and all(
            type(layer) is TransformerLayer
            and layer.intermediate.activation is keras.activations.gelu
            for layer in encoder.transformer_layers
        )
    )


def head_layers(model) -> "tuple | None":
    """The dense layers of a classifier's head from [CLS] to its outputs (None: not dense layers).

    The paper's head is one `Dense` layer (`task_head`); a head of several
    (transformers' `dense` + GELU, then `out_proj`) lists them as `dense_layers`.
    """
    head = getattr(model, "task_head", None)
    if isinstance(head, keras.layers.Dense):
        return (head,)
    layers = getattr(head, "dense_layers", None)
    if layers and all(isinstance(layer, keras.layers.Dense) for layer in layers):
        return tuple(layers)
    return None


def _layer_norm(x, layer):
    """Keras' LayerNormalization over the last axis (its formula: x * inv + (beta - mean * inv))."""
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return tf.nn.batch_normalization(x, mean, variance, layer.beta, layer.gamma, layer.epsilon)


def _softmax(scores):
    """Softmax over the last axis, by its formula (see the module docstring for why)."""
    exps = tf.exp(scores - tf.reduce_max(scores, axis=-1, keepdims=True))
    return exps / tf.reduce_sum(exps, axis=-1, keepdims=True)


def _portable_layer_norm(x, layer):
    """LayerNorm over the last axis in the op pattern runtimes fuse (see the module docstring)."""
    centred = x - tf.reduce_mean(x, axis=-1, keepdims=True)
    variance = tf.reduce_mean(tf.pow(centred, 2.0), axis=-1, keepdims=True)
    return centred / tf.sqrt(variance + layer.epsilon) * layer.gamma + layer.beta


def _portable_gelu(x):
    """Exact GELU, x * (1 + erf(x / sqrt 2)) * 0.5, in the op order runtimes fuse."""
    return x * (1.0 + tf.math.erf(x / math.sqrt(2.0))) * 0.5


def _onednn_batch_matmul(x, y, adj_y=False):
    """x @ y (y transposed with `adj_y`) for [..., M, K] float32 operands: `BatchMatMulV2`."""
    return tf.matmul(x, y, adjoint_b=adj_y)


def _eigen_batch_matmul(x, y, adj_y=False):
    """The same product with `BatchMatMulV3`, which TensorFlow runs with Eigen's kernel."""
    return tf.raw_ops.BatchMatMulV3(x=x, y=y, Tout=tf.float32, adj_y=adj_y)


def encoder_dense_layers(encoder) -> list:
    """The encoder's dense layers in order: embedding projection (if any), then per layer
    the fused QKV projection, attention output, FFN intermediate and FFN output."""
    layers = [] if encoder.embeddings_project is None else [encoder.embeddings_project]
    for layer in encoder.transformer_layers:
        attention = layer.attention
        layers += [attention.qkv, attention.output_dense, layer.intermediate, layer.ffn_output]
    return layers


class BfloatWeights(tf.Module):
    """bfloat16 copies of an encoder's dense kernels and biases, for bfloat16 products.

    Args:
        encoder: a plain float32 `ElectraEncoder` (see `supports`).

    A serving module that holds one saves the copies as variables of its own
    (half the size of the float32 weights they copy), so no cast of a weight
    runs per request.
    """

    def __init__(self, encoder):
        super().__init__(name="bfloat16_weights")
        layers = encoder_dense_layers(encoder)
        self.kernels = [
            tf.Variable(tf.cast(d.kernel, tf.bfloat16), trainable=False) for d in layers
        ]
        self.biases = [tf.Variable(tf.cast(d.bias, tf.bfloat16), trainable=False) for d in layers]
        self._position = self._no_dependency({id(d): i for i, d in enumerate(layers)})

    def of(self, layer):
        """(kernel, bias) in bfloat16 of one of the encoder's dense layers, or None."""
        position = self._position.get(id(layer))
        return None if position is None else (self.kernels[position], self.biases[position])


def _dense(x, layer, activation=None, bfloat=None):
    """[M, in] -> [M, out]: MatMul + BiasAdd (+ activation), one fusable pattern.

    With `bfloat` (a `BfloatWeights` holding `layer`) the pattern runs in
    bfloat16 between a cast of `x` down and a cast of the result back.
    """
    weights = None if bfloat is None else bfloat.of(layer)
    if weights is None:
        y = tf.nn.bias_add(tf.matmul(x, layer.kernel), layer.bias)
        return y if activation is None else activation(y)
    kernel, bias = weights
    y = tf.nn.bias_add(tf.matmul(tf.cast(x, tf.bfloat16), kernel), bias)
    return tf.cast(y if activation is None else activation(y), tf.float32)


def _gelu(x):
    return tf.nn.gelu(x, approximate=False)


# The activations of a head's dense layers this module computes, and how.
_ACTIVATIONS = {None: None, keras.activations.linear: None, keras.activations.gelu: _gelu}


class _Ops(NamedTuple):
    """The ops a variant computes the steps of the pass with."""

    batch_matmul: Callable  # (x, y, adj_y=False) -> x @ y, [..., M, K] operands
    heads_first: Callable  # qkv [B, L, 3, heads, d] -> [3, B, heads, L, d]
    heads_last: Callable  # [B, heads, L, d] -> [B, L, heads, d]
    softmax: Callable
    layer_norm: Callable  # (x, keras LayerNormalization) -> x normalised
    gelu: Callable


def _lean_ops(batch_matmul) -> _Ops:
    return _Ops(
        batch_matmul,
        lambda qkv: tf.einsum("blthd->tbhld", qkv),
        lambda context: tf.einsum("bhld->blhd", context),
        _softmax,
        _layer_norm,
        _gelu,
    )


_PORTABLE_OPS = _Ops(
    lambda x, y, adj_y=False: tf.matmul(x, y, transpose_b=adj_y),
    lambda qkv: tf.transpose(qkv, [2, 0, 3, 1, 4]),
    lambda context: tf.transpose(context, [0, 2, 1, 3]),
    lambda scores: tf.nn.softmax(scores, axis=-1),
    _portable_layer_norm,
    _portable_gelu,
)


def first_token_hidden(encoder, input_ids, input_mask, segment_ids, bfloat=None, portable=False):
    """The encoder's final hidden state of the first ([CLS]) position.

    A request of at most `SMALL_REQUEST_TOKENS` tokens runs its attention
    products with Eigen's kernel, a larger one with oneDNN's (module docstring).

    Args:
        encoder: a plain `ElectraEncoder` (see `supports`).
        input_ids, input_mask, segment_ids: int32 [B, L], L >= 1.
        bfloat: None (float32 throughout), or the encoder's `BfloatWeights`
            (its dense layers multiply in bfloat16).
        portable: the portable variant (module docstring; no `bfloat`).

    Returns:
        float32 [B, H], equal to `encoder(inputs)[:, 0]` up to rounding
        (float32's, or bfloat16's with `bfloat`).
    """
    inputs = (encoder, input_ids, input_mask, segment_ids, bfloat)
    if portable:
        return _first_token_hidden(*inputs, _PORTABLE_OPS)
    return tf.cond(
        tf.size(input_ids) <= SMALL_REQUEST_TOKENS,
        lambda: _first_token_hidden(*inputs, _lean_ops(_eigen_batch_matmul)),
        lambda: _first_token_hidden(*inputs, _lean_ops(_onednn_batch_matmul)),
    )


def _first_token_hidden(encoder, input_ids, input_mask, segment_ids, bfloat, ops: _Ops):
    """`first_token_hidden` computing its steps with `ops`."""
    embeddings = encoder.embeddings
    shape = tf.shape(input_ids)
    batch, length = shape[0], shape[1]
    hidden_size, heads = encoder.hidden_size, encoder.num_heads
    head_size = hidden_size // heads
    x = (
        tf.gather(embeddings.word_embeddings, input_ids)
        + embeddings.position_embeddings[:length][None]
        + tf.gather(embeddings.token_type_embeddings, segment_ids)
    )  # [B, L, E]
    x = ops.layer_norm(tf.reshape(x, [-1, embeddings.embedding_size]), embeddings.layer_norm)
    if encoder.embeddings_project is not None:
        x = _dense(x, encoder.embeddings_project, bfloat=bfloat)  # [N, H]
    # The additive mask of `attention_bias_from_mask`: 0 visible, -10000 padding.
    bias = (1.0 - tf.cast(input_mask, tf.float32))[:, None, None, :] * -10000.0  # [B,1,1,L]
    last = len(encoder.transformer_layers) - 1
    for index, layer in enumerate(encoder.transformer_layers):
        attention = layer.attention
        qkv = _dense(x, attention.qkv, bfloat=bfloat)
        qkv = tf.reshape(qkv, [batch, length, 3, heads, head_size])
        query, key, value = tf.unstack(ops.heads_first(qkv))  # [B, heads, L, d]
        if index == last:  # only [CLS] is read from the last layer
            query = query[:, :, :1]
            x = tf.reshape(x, [batch, length, hidden_size])[:, 0]  # [B, H]
        # [B, heads, Lq, L]
        scores = ops.batch_matmul(query, key, adj_y=True) / math.sqrt(head_size) + bias
        context = ops.batch_matmul(ops.softmax(scores), value)  # [B, heads, Lq, d]
        context = tf.reshape(ops.heads_last(context), [-1, hidden_size])
        attended = _dense(context, attention.output_dense, bfloat=bfloat)
        x = ops.layer_norm(x + attended, layer.attention_layer_norm)
        intermediate = _dense(x, layer.intermediate, ops.gelu, bfloat=bfloat)
        ffn = _dense(intermediate, layer.ffn_output, bfloat=bfloat)
        x = ops.layer_norm(x + ffn, layer.ffn_layer_norm)
    return x


def classifier_outputs(model, inputs: dict, bfloat=None, portable=False) -> tf.Tensor:
    """An `ElectraClassifier`'s output for `inputs` (int32 [B, L] each; L >= 1), lean.

    `bfloat`: None, or the encoder's `BfloatWeights`; `portable`: the portable
    variant (see `first_token_hidden`).

    Returns:
        float32 [B, C] logits, or [B] for a regression model, as `model(inputs)`.
    """
    cls = first_token_hidden(
        model.encoder,
        inputs["input_ids"],
        inputs["input_mask"],
        inputs["segment_ids"],
        bfloat,
        portable,
    )
    outputs = cls
    for layer in head_layers(model):
        activation = _ACTIVATIONS[layer.activation]
        if portable and activation is _gelu:
            activation = _portable_gelu
        outputs = _dense(outputs, layer, activation)
    return tf.reshape(outputs, [-1]) if model.regression else outputs
