"""The two kernel sets: one model, the same losses, gradients and updates whichever runs."""

import dataclasses
import os
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import make_batch
from tensorflow.core.protobuf import saved_model_pb2

from electra_tf.config import KERNELS, preset
from electra_tf.modeling.electra import build_generator_and_discriminator
from electra_tf.modeling.encoder import ElectraEncoder, copy_encoder, with_kernels
from electra_tf.modeling.kernels import KERNEL_SETS, cpu_fast, reference, resolve_kernels
from electra_tf.pretraining.objectives import make_pretrainer
from electra_tf.pretraining.optimization import create_optimizer
from electra_tf.pretraining.pretrainer import statistics

# A vocabulary of three blocks of cpu_fast's vocabulary searches, the last one padded.
VOCAB, LENGTH, SLOTS = 2 * cpu_fast.SAMPLING_BLOCK + 44, 12, 4


def tiny_config(**overrides):
    values = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        num_layers=1,
        embedding_size=16,
        generator_hidden_fraction=0.5,
        num_heads=2,
        max_seq_length=LENGTH,
        max_predictions_per_seq=SLOTS,
        dropout_rate=0.0,
        attention_dropout_rate=0.0,
        num_warmup_steps=0,
        num_train_steps=100,
        learning_rate=1e-3,
    )
    values.update(overrides)
    config = preset("tiny", **values)
    config.validate()
    return config


def build(config, batch, seed=0):
    keras.utils.set_random_seed(seed)
    model = make_pretrainer(config)
    assert model.kernels == resolve_kernels(config.kernels)
    model.build_from_batch(batch)
    return model


def assert_close(actual, expected, name):
    """Within 1e-5, relative to the expected value where it is larger than 1."""
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5, err_msg=name)


def custom_gradient_ops(graph_def):
    """Names of the ops a tf.custom_gradient left in a graph (its functions included)."""
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    return [n.name for n in nodes if "_gradient_op_type" in n.attr]


def test_choices_and_what_auto_stands_for(monkeypatch):
    # The config names the choices without importing TensorFlow; each names a set or is auto.
    assert set(KERNEL_SETS) == set(KERNELS) - {"auto"}
    assert KERNEL_SETS == {"reference": reference, "cpu_fast": cpu_fast}
    assert [resolve_kernels(name) for name in KERNEL_SETS] == list(KERNEL_SETS)
    devices = {"GPU": [], "TPU": []}
    monkeypatch.setattr(tf.config, "list_logical_devices", lambda kind: devices.get(kind, []))
    assert resolve_kernels("auto") == "cpu_fast"
    devices["GPU"] = ["/device:GPU:0"]
    assert resolve_kernels("auto") == "reference"
    devices["GPU"], devices["TPU"] = [], ["/device:TPU:0"]
    assert resolve_kernels("auto") == "reference"
    with pytest.raises(
        ValueError, match="kernels='gpu_fast': choose one of auto, reference, cpu_fast"
    ):
        resolve_kernels("gpu_fast")


def test_commands_default_to_auto_layers_to_reference_and_every_layer_takes_its_models_set():
    config = tiny_config(dropout_rate=0.1, attention_dropout_rate=0.1)
    # A command's config asks for auto (cpu_fast on a CPU); a model built without a set,
    # as exports and converted checkpoints are, runs the reference kernels.
    assert tiny_config().kernels == "auto"
    _, plain = build_generator_and_discriminator(config.model, with_generator=False)
    plain_layers = [
        layer for layer in plain._flatten_layers(include_self=False) if hasattr(layer, "kernels")
    ]
    assert len(plain_layers) > 5 and {layer.kernels for layer in plain_layers} == {"reference"}
    for name in KERNEL_SETS:
        model = make_pretrainer(dataclasses.replace(config, kernels=name))
        with_set = [
            layer
            for layer in model._flatten_layers(include_self=False)
            if hasattr(layer, "kernels")
        ]
        # Encoders, embeddings, attention, transformer layers, heads and every dropout.
        assert len(with_set) > 10
        assert {layer.kernels for layer in with_set} == {name}
        dense = [
            layer for layer in model._flatten_layers() if isinstance(layer, keras.layers.Dense)
        ]
        # Keras' own Dense, with Keras' (exact) GELU where the model has one.
        assert dense and all(type(layer) is keras.layers.Dense for layer in dense)
        assert {layer.activation for layer in dense} == {
            keras.activations.gelu,
            keras.activations.linear,
        }
        assert keras.activations.serialize(keras.activations.gelu) == "gelu"


def _sums_and_gradients(model, batch, jit_compile):
    """The replica's named sums, its loss, the sampled ids and every variable's gradient."""

    @tf.function(jit_compile=jit_compile)
    def run(batch):
        counts = model._global_counts(batch)
        with tf.GradientTape() as tape:
            sums = model.compute_sums(batch, training=True)
            local = statistics(sums)
            loss = model._loss(local, counts)
        grads = tape.gradient(loss, model.trainable_variables)
        sampled = sums.get("sampled_ids", tf.zeros([0], tf.int32))
        return local, loss, sampled, [tf.convert_to_tensor(g) for g in grads]

    return [tf.nest.map_structure(lambda t: t.numpy(), out) for out in run(batch)]


@pytest.mark.slow
@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("objective", ["electra", "mlm"])
def test_both_sets_give_the_same_losses_and_gradients(rng, objective, jit_compile):
    config = tiny_config(objective=objective)
    batch = tf.nest.map_structure(tf.convert_to_tensor, make_batch(rng, 4, LENGTH, SLOTS, VOCAB))
    # Two models in one process, the same weights (the same seed), each with its own set.
    models = {name: build(dataclasses.replace(config, kernels=name), batch) for name in KERNEL_SETS}
    results = {
        name: _sums_and_gradients(model, batch, jit_compile) for name, model in models.items()
    }
    model = models["reference"]
    (ref_sums, ref_loss, ref_sampled, ref_grads) = results["reference"]
    (fast_sums, fast_loss, fast_sampled, fast_grads) = results["cpu_fast"]
    assert ref_loss > 0 and ref_sums["mlm"]["count"] > 0  # something was masked and scored
    np.testing.assert_array_equal(fast_sampled, ref_sampled)
    assert_close(fast_loss, ref_loss, "loss")
    for group, sums in ref_sums.items():
        for stat, value in sums.items():
            assert_close(fast_sums[group][stat], value, f"{group}/{stat}")
    assert len(ref_grads) == len(model.trainable_variables)
    for variable, a, b in zip(model.trainable_variables, fast_grads, ref_grads):
        assert np.any(b != 0), variable.path
        assert_close(a, b, variable.path)


@pytest.mark.slow
def test_one_training_step_gives_the_same_weights_under_both_sets(rng, tmp_path):
    config = tiny_config()
    batch = make_batch(rng, 4, LENGTH, SLOTS, VOCAB)
    models, initial = {}, {}
    for name in KERNEL_SETS:
        model = build(dataclasses.replace(config, kernels=name), batch)
        initial[name] = [v.numpy() for v in model.trainable_variables]
        model.compile(optimizer=create_optimizer(config))
        model.fit(tf.data.Dataset.from_tensors(batch), steps_per_epoch=1, verbose=0)
        model.discriminator.save(str(tmp_path / f"{name}.keras"))
        models[name] = model
    ref, fast = models["reference"], models["cpu_fast"]
    # The same variables, initialised alike; what a saved model says about itself
    # does not depend on the set either.
    assert [v.path for v in fast.weights] == [v.path for v in ref.weights]
    for a, b in zip(initial["cpu_fast"], initial["reference"]):
        np.testing.assert_array_equal(a, b)
    keras_configs = [
        zipfile.ZipFile(tmp_path / f"{name}.keras").read("config.json") for name in KERNEL_SETS
    ]
    assert keras_configs[0] == keras_configs[1]
    assert int(ref.optimizer.iterations.numpy()) == int(fast.optimizer.iterations.numpy()) == 1
    for before, a, b in zip(
        initial["reference"], fast.trainable_variables, ref.trainable_variables
    ):
        assert np.any(b.numpy() != before), b.path  # the step moved every weight
        assert_close(a.numpy(), b.numpy(), b.path)


def test_a_model_saved_under_one_set_loads_with_the_reference_set_and_runs_under_either(
    rng, tmp_path
):
    from electra_tf.modeling.electra import build_generator_and_discriminator

    config = tiny_config()
    batch = make_batch(rng, 4, LENGTH, SLOTS, VOCAB)
    inputs = {
        "input_ids": batch["input_ids"],
        "input_mask": batch["input_mask"],
        "segment_ids": batch["segment_ids"],
    }
    generator_inputs = dict(inputs, masked_lm_positions=batch["masked_lm_positions"])
    keras.utils.set_random_seed(0)
    generator, discriminator = build_generator_and_discriminator(config.model, kernels="cpu_fast")
    saved = {"generator": generator, "discriminator": discriminator}
    before = {
        "generator": generator(generator_inputs).numpy(),
        "discriminator": discriminator(inputs)["logits"].numpy(),
    }
    for name, model in saved.items():
        model.save(str(tmp_path / f"{name}.keras"))
    for name, model in saved.items():
        loaded = keras.saving.load_model(str(tmp_path / f"{name}.keras"))
        assert loaded.encoder.kernels == "reference"  # a saved model names no kernel set
        for a, b in zip(loaded.get_weights(), model.get_weights()):
            np.testing.assert_array_equal(a, b)
        after = loaded(generator_inputs if name == "generator" else inputs)
        after = after.numpy() if name == "generator" else after["logits"].numpy()
        assert_close(after, before[name], name)
    # Fine-tuning builds a loaded encoder again with the run's set, weights and all.
    encoder = keras.saving.load_model(str(tmp_path / "discriminator.keras")).encoder
    assert with_kernels(encoder, "reference") is encoder
    fast = with_kernels(encoder, "cpu_fast")
    assert isinstance(fast, ElectraEncoder) and fast.kernels == "cpu_fast"
    assert [v.path for v in fast.weights] == [v.path for v in encoder.weights]
    assert_close(fast(inputs).numpy(), encoder(inputs).numpy(), "sequence_output")
    fresh = copy_encoder(encoder, "cpu_fast", with_weights=False)
    assert fresh.kernels == "cpu_fast" and fresh.get_config() == encoder.get_config()
    assert not np.array_equal(fresh.get_weights()[0], encoder.get_weights()[0])


def test_reference_dropout_masks_differ_across_steps_and_layers():
    from electra_tf.modeling.layers import ReplicaDropout

    keras.utils.set_random_seed(5)
    first, second = ReplicaDropout(0.5), ReplicaDropout(0.5)
    assert first.kernels == "reference"
    x = tf.ones((32, 64))
    masks = [
        first(x, training=True).numpy() == 0,
        first(x, training=True).numpy() == 0,
        second(x, training=True).numpy() == 0,
    ]
    for i in range(3):
        assert abs(masks[i].mean() - 0.5) < 0.05
        for j in range(i):
            assert abs(np.corrcoef(masks[i].ravel(), masks[j].ravel())[0, 1]) < 0.1


def test_exports_are_traced_with_the_reference_kernels(tmp_path):
    from electra_tf.artifacts.export_dir import export_pretrained
    from electra_tf.modeling.electra import build_generator_and_discriminator
    from electra_tf.serving.exporter import export_discriminator

    config = tiny_config()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("\n".join(specials + [f"w{i}" for i in range(VOCAB - 5)]) + "\n")
    config.save_json(str(tmp_path / "config.json"))
    keras.utils.set_random_seed(0)
    generator, discriminator = build_generator_and_discriminator(config.model, kernels="cpu_fast")
    spec = {
        name: tf.TensorSpec([None, None], tf.int32)
        for name in ("input_ids", "input_mask", "segment_ids")
    }
    # What the model traces to with cpu_fast: custom gradients, which the check detects.
    traced = tf.function(lambda x: discriminator(x)).get_concrete_function(spec)
    assert custom_gradient_ops(traced.graph.as_graph_def())
    export_dir = export_pretrained(
        generator,
        discriminator,
        str(tmp_path / "export"),
        str(vocab_file),
        str(tmp_path / "config.json"),
    )
    version_dir = export_discriminator(
        discriminator, config, str(vocab_file), str(tmp_path / "serving"), "discriminator"
    )
    assert discriminator.encoder.kernels == "cpu_fast"  # the exports left the model alone
    for saved_model in (os.path.join(export_dir, "discriminator_savedmodel"), version_dir):
        message = saved_model_pb2.SavedModel()
        with open(os.path.join(saved_model, "saved_model.pb"), "rb") as f:
            message.ParseFromString(f.read())
        assert custom_gradient_ops(message.meta_graphs[0].graph_def) == [], saved_model
