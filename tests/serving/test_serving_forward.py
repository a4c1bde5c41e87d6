"""The lean export forward pass (`electra_tf.modeling.lean_forward`) against the Keras model."""

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.finetuning.classification.model import build_classifier
from electra_tf.modeling import lean_forward as forward
from electra_tf.modeling.encoder import ElectraEncoder


def _classifier(regression=False, attention_direction="bidirectional", embedding_size=16):
    encoder = ElectraEncoder(
        vocab_size=50,
        hidden_size=32,
        num_layers=3,
        num_heads=4,
        intermediate_size=64,
        embedding_size=embedding_size,
        max_position_embeddings=24,
        attention_direction=attention_direction,
    )
    model = build_classifier(encoder, 1 if regression else 3, regression, seed=0)
    # Non-zero biases and LayerNorm offsets, so that every weight is exercised.
    rng = np.random.default_rng(0)
    for weight in model.weights:
        weight.assign(weight.numpy() + rng.normal(0, 0.05, weight.shape).astype(np.float32))
    return model


def _inputs(rows=3):
    rng = np.random.default_rng(1)
    ids = rng.integers(5, 50, size=(rows, 11)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 6:] = 0  # padded rows: the padding must not change [CLS]'s output
    mask[2, 2:] = 0
    segments = np.zeros_like(ids)
    segments[0, 5:] = 1
    return {
        "input_ids": tf.constant(ids),
        "input_mask": tf.constant(mask),
        "segment_ids": tf.constant(segments),
    }


@pytest.mark.parametrize("portable", [False, True], ids=["lean", "portable"])
@pytest.mark.parametrize("regression,embedding_size", [(False, 16), (True, 32)])
def test_lean_forward_equals_the_keras_model(regression, embedding_size, portable):
    model = _classifier(regression, embedding_size=embedding_size)
    inputs = _inputs()
    assert forward.supports(model)
    expected = model(inputs, training=False).numpy()
    got = tf.function(lambda x: forward.classifier_outputs(model, x, portable=portable))(inputs)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-5, rtol=0)


def test_the_portable_forward_is_one_graph_of_plain_ops():
    """No branch, einsum or Eigen-only product: the ops every converter and runtime has."""
    model = _classifier()
    spec = {
        name: tf.TensorSpec([None, None], tf.int32)
        for name in ("input_ids", "input_mask", "segment_ids")
    }
    graph = (
        tf.function(lambda x: forward.classifier_outputs(model, x, portable=True))
        .get_concrete_function(spec)
        .graph.as_graph_def()
    )
    ops = {node.op for node in graph.node}
    assert not graph.library.function
    assert not ops & {"If", "StatelessIf", "Einsum", "BatchMatMulV3", "Erfc"}
    assert {"BatchMatMulV2", "Softmax", "Erf", "Sqrt", "Pow", "Transpose"} <= ops


def test_a_large_request_agrees_with_the_keras_model_too():
    # The other tests' 3 x 11 tokens take the small-request branch, these 8 x 11 the other.
    assert 3 * 11 <= forward.SMALL_REQUEST_TOKENS < 8 * 11
    model = _classifier()
    inputs = _inputs(8)
    expected = model(inputs, training=False).numpy()
    got = tf.function(lambda x: forward.classifier_outputs(model, x))(inputs).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)


def test_the_branches_use_no_op_that_onednn_splits_over_threads_for_small_requests():
    model = _classifier()
    spec = {
        name: tf.TensorSpec([None, None], tf.int32)
        for name in ("input_ids", "input_mask", "segment_ids")
    }
    graph = (
        tf.function(lambda x: forward.classifier_outputs(model, x))
        .get_concrete_function(spec)
        .graph.as_graph_def()
    )
    branches = [
        {node.op for node in function.node_def}
        for function in graph.library.function
        if any(node.op.startswith("BatchMatMul") for node in function.node_def)
    ]
    assert len(branches) == 2
    small = [ops for ops in branches if "BatchMatMulV3" in ops]
    large = [ops for ops in branches if "BatchMatMulV2" in ops]
    assert len(small) == 1 and len(large) == 1 and "BatchMatMulV2" not in small[0]
    for ops in branches:
        assert "Transpose" not in ops and "Softmax" not in ops and "Einsum" in ops


def test_lean_forward_reads_only_cls_of_the_last_layer_yet_sees_every_token():
    model = _classifier()
    inputs = _inputs()
    changed = dict(inputs)
    ids = inputs["input_ids"].numpy().copy()
    ids[0, -1] = (ids[0, -1] + 1 - 5) % 45 + 5  # the last real token of row 0
    changed["input_ids"] = tf.constant(ids)
    before = forward.classifier_outputs(model, inputs).numpy()
    after = forward.classifier_outputs(model, changed).numpy()
    assert np.abs(after[0] - before[0]).max() > 1e-6
    np.testing.assert_allclose(after[1:], before[1:], atol=1e-6)


def test_models_outside_the_lean_forward_are_refused_or_exported_with_keras(tmp_path):
    from finetuning_support import VOCAB

    from electra_tf.artifacts.serving_dir import read_serving_config
    from electra_tf.finetuning.classification.serving import ClassifierServing
    from electra_tf.serving.exporter import export_finetuned
    from electra_tf.tokenization import WordPieceTokenizer

    model = _classifier(attention_direction="left_to_right")
    assert not forward.supports(model)
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("\n".join(VOCAB) + "\n")
    tokenizer = WordPieceTokenizer(str(vocab_file), True, True)
    with pytest.raises(ValueError, match="forward='keras'"):
        ClassifierServing(model, tokenizer, 16, False, ["a", "b", "c"], forward="lean")
    with pytest.raises(ValueError, match="forward='fast'"):
        ClassifierServing(model, tokenizer, 16, False, ["a", "b", "c"], forward="fast")
    info = {
        "task": {
            "name": "toy",
            "task_type": "classification",
            "label_names": ["a", "b", "c"],
            "metrics": ["accuracy"],
            "glue_score_metric": "accuracy",
            "is_pair": False,
        },
        "max_seq_length": 16,
        "do_lower_case": True,
        "strip_accents": True,
    }
    version = export_finetuned(model, info, str(vocab_file), str(tmp_path / "export"), "toy")
    assert read_serving_config(version)["forward"] == "keras"


def test_lean_and_keras_exports_answer_alike(tmp_path):
    from finetuning_support import VOCAB

    from electra_tf.artifacts.serving_dir import read_serving_config
    from electra_tf.serving.exporter import export_finetuned

    model = _classifier()
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("\n".join(VOCAB) + "\n")
    info = {
        "task": {
            "name": "toy",
            "task_type": "classification",
            "label_names": ["a", "b", "c"],
            "metrics": ["accuracy"],
            "glue_score_metric": "accuracy",
            "is_pair": False,
        },
        "max_seq_length": 16,
        "do_lower_case": True,
        "strip_accents": True,
    }
    lean = export_finetuned(model, info, str(vocab_file), str(tmp_path / "export"), "toy")
    keras_ = export_finetuned(
        model, info, str(vocab_file), str(tmp_path / "export"), "toy", forward="keras"
    )
    assert [read_serving_config(v)["forward"] for v in (lean, keras_)] == ["lean", "keras"]
    texts = tf.constant([VOCAB[7], " ".join(VOCAB[5:20]), ""])
    answers = [
        tf.saved_model.load(v).signatures["serving_default"](text=texts) for v in (lean, keras_)
    ]
    np.testing.assert_allclose(
        answers[0]["probabilities"].numpy(), answers[1]["probabilities"].numpy(), atol=1e-5, rtol=0
    )
    np.testing.assert_array_equal(answers[0]["label"].numpy(), answers[1]["label"].numpy())
    expected = model(_inputs(), training=False).numpy()
    got = tf.saved_model.load(lean).signatures["token_ids"](**_inputs())["logits"].numpy()
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)


def test_an_encoder_without_layers_is_left_to_the_keras_forward():
    encoder = ElectraEncoder(
        vocab_size=50,
        hidden_size=32,
        num_layers=0,
        num_heads=4,
        intermediate_size=64,
        embedding_size=32,
        max_position_embeddings=24,
    )
    assert not forward.supports(build_classifier(encoder, 2, False, seed=0))


def _round_to_bfloat16(values: np.ndarray) -> np.ndarray:
    """float32 -> the nearest bfloat16 (ties to even), as float32: NumPy bit arithmetic."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return rounded.astype(np.uint32).view(np.float32)


def test_bfloat16_weights_are_the_dense_layers_rounded_to_nearest_even():
    model = _classifier()
    weights = forward.BfloatWeights(model.encoder)
    layers = forward.encoder_dense_layers(model.encoder)
    assert len(layers) == 1 + 4 * 3  # the embedding projection, four per layer
    for layer in layers:
        kernel, bias = weights.of(layer)
        assert kernel.dtype == tf.bfloat16 and bias.dtype == tf.bfloat16
        np.testing.assert_array_equal(
            tf.cast(kernel, tf.float32).numpy(), _round_to_bfloat16(layer.kernel.numpy())
        )
        np.testing.assert_array_equal(
            tf.cast(bias, tf.float32).numpy(), _round_to_bfloat16(layer.bias.numpy())
        )
    assert weights.of(model.encoder.embeddings.layer_norm) is None  # not a dense layer


@pytest.mark.parametrize("regression", [False, True])
def test_bfloat16_products_stay_within_bfloat16_rounding_of_the_keras_model(regression):
    from electra_tf.finetuning.classification.check import (
        BFLOAT16_RELATIVE_TOLERANCE,
        BFLOAT16_TOLERANCE,
    )

    model = _classifier(regression)
    inputs = _inputs()
    expected = model(inputs, training=False).numpy()
    weights = forward.BfloatWeights(model.encoder)
    got = tf.function(lambda x: forward.classifier_outputs(model, x, weights))(inputs).numpy()
    error = np.abs(got - expected)
    # Products in bfloat16 (8 significant bits) move the outputs beyond float32's rounding...
    assert error.max() > 1e-5
    # ... by about bfloat16's own: within what the export check allows the signature.
    assert np.all(error <= BFLOAT16_TOLERANCE + BFLOAT16_RELATIVE_TOLERANCE * np.abs(expected))
