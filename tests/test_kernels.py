"""The two kernel sets: one model, the same losses, gradients and updates whichever runs."""

import os
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import make_batch
from tensorflow.core.protobuf import saved_model_pb2

from electra_tf.config import KERNELS, preset
from electra_tf.modeling import kernels
from electra_tf.modeling.kernels import cpu_fast, reference
from electra_tf.pretraining.optimization import create_optimizer
from electra_tf.pretraining.objectives import make_pretrainer
from electra_tf.pretraining.pretrainer import statistics

# A vocabulary of three blocks of cpu_fast's vocabulary searches, the last one padded.
VOCAB, LENGTH, SLOTS = 2 * cpu_fast.SAMPLING_BLOCK + 44, 12, 4


def tiny_config(**overrides):
    values = dict(vocab_size=VOCAB, hidden_size=32, num_layers=1, embedding_size=16,
                  generator_hidden_fraction=0.5, num_heads=2, max_seq_length=LENGTH,
                  max_predictions_per_seq=SLOTS, dropout_rate=0.0, attention_dropout_rate=0.0,
                  num_warmup_steps=0, num_train_steps=100, learning_rate=1e-3)
    values.update(overrides)
    config = preset("tiny", **values)
    config.validate()
    return config


def build(config, batch, seed=0):
    keras.utils.set_random_seed(seed)
    model = make_pretrainer(config)
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
    assert kernels.CHOICES == KERNELS  # the config names them without importing TensorFlow
    assert [kernels.resolve(name) for name in kernels.NAMES] == list(kernels.NAMES)
    devices = {"GPU": [], "TPU": []}
    monkeypatch.setattr(tf.config, "list_logical_devices", lambda kind: devices.get(kind, []))
    assert kernels.resolve("auto") == "cpu_fast"
    devices["GPU"] = ["/device:GPU:0"]
    assert kernels.resolve("auto") == "reference"
    devices["GPU"], devices["TPU"] = [], ["/device:TPU:0"]
    assert kernels.resolve("auto") == "reference"
    message = "kernels='gpu_fast': choose one of auto, reference, cpu_fast"
    for call in (kernels.resolve, kernels.set_kernels):
        with pytest.raises(ValueError, match=message):
            call("gpu_fast")
    with pytest.raises(ValueError, match=message):
        with kernels.use("gpu_fast"):
            pass


def test_use_restores_the_previous_choice_even_after_an_error():
    kernels.set_kernels("reference")
    assert kernels.active() is reference
    with pytest.raises(RuntimeError):
        with kernels.use("cpu_fast"):
            assert kernels.active_name() == "cpu_fast" and kernels.active() is cpu_fast
            raise RuntimeError
    assert kernels.active_name() == "reference"


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


@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("objective", ["electra", "mlm"])
def test_both_sets_give_the_same_losses_and_gradients(rng, objective, jit_compile):
    config = tiny_config(objective=objective)
    batch = tf.nest.map_structure(tf.convert_to_tensor, make_batch(rng, 4, LENGTH, SLOTS, VOCAB))
    model = build(config, batch)
    results = {}
    for name in kernels.NAMES:
        with kernels.use(name):
            results[name] = _sums_and_gradients(model, batch, jit_compile)
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


def test_one_training_step_gives_the_same_weights_under_both_sets(rng, tmp_path):
    config = tiny_config()
    batch = make_batch(rng, 4, LENGTH, SLOTS, VOCAB)
    models, initial = {}, {}
    for name in kernels.NAMES:
        with kernels.use(name):
            model = build(config, batch)
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
    keras_configs = [zipfile.ZipFile(tmp_path / f"{name}.keras").read("config.json")
                     for name in kernels.NAMES]
    assert keras_configs[0] == keras_configs[1]
    assert int(ref.optimizer.iterations.numpy()) == int(fast.optimizer.iterations.numpy()) == 1
    for before, a, b in zip(initial["reference"], fast.trainable_variables,
                            ref.trainable_variables):
        assert np.any(b.numpy() != before), b.path  # the step moved every weight
        assert_close(a.numpy(), b.numpy(), b.path)


@pytest.mark.parametrize("saved_under, loaded_under",
                         [("cpu_fast", "reference"), ("reference", "cpu_fast")])
def test_a_model_saved_under_one_set_loads_and_runs_under_the_other(rng, tmp_path, saved_under,
                                                                     loaded_under):
    from electra_tf.modeling.electra import build_generator_and_discriminator

    config = tiny_config()
    batch = make_batch(rng, 4, LENGTH, SLOTS, VOCAB)
    inputs = {"input_ids": batch["input_ids"], "input_mask": batch["input_mask"],
              "segment_ids": batch["segment_ids"]}
    generator_inputs = dict(inputs, masked_lm_positions=batch["masked_lm_positions"])
    keras.utils.set_random_seed(0)
    with kernels.use(saved_under):
        generator, discriminator = build_generator_and_discriminator(config.model)
        saved = {"generator": generator, "discriminator": discriminator}
        before = {"generator": generator(generator_inputs).numpy(),
                  "discriminator": discriminator(inputs)["logits"].numpy()}
        for name, model in saved.items():
            model.save(str(tmp_path / f"{name}.keras"))
    with kernels.use(loaded_under):
        for name, model in saved.items():
            loaded = keras.saving.load_model(str(tmp_path / f"{name}.keras"))
            for a, b in zip(loaded.get_weights(), model.get_weights()):
                np.testing.assert_array_equal(a, b)
            after = loaded(generator_inputs if name == "generator" else inputs)
            after = after.numpy() if name == "generator" else after["logits"].numpy()
            assert_close(after, before[name], name)


def test_exact_gelu_is_saved_by_its_registered_name_and_loads_back():
    from electra_tf.modeling.layers import Dense, exact_gelu

    config = keras.saving.serialize_keras_object(Dense(4, activation=exact_gelu))
    assert config["config"]["activation"]["config"] == "electra_tf>exact_gelu"
    assert keras.saving.deserialize_keras_object(config).activation is exact_gelu


def test_reference_dropout_masks_differ_across_steps_and_layers():
    from electra_tf.modeling.layers import ReplicaDropout

    keras.utils.set_random_seed(5)
    with kernels.use("reference"):
        first, second = ReplicaDropout(0.5), ReplicaDropout(0.5)
        x = tf.ones((32, 64))
        masks = [first(x, training=True).numpy() == 0, first(x, training=True).numpy() == 0,
                 second(x, training=True).numpy() == 0]
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
    generator, discriminator = build_generator_and_discriminator(config.model)
    spec = {name: tf.TensorSpec([None, None], tf.int32)
            for name in ("input_ids", "input_mask", "segment_ids")}
    with kernels.use("cpu_fast"):
        # What the model traces to under cpu_fast: custom gradients, which the check detects.
        traced = tf.function(lambda x: discriminator(x)).get_concrete_function(spec)
        assert custom_gradient_ops(traced.graph.as_graph_def())
        export_dir = export_pretrained(generator, discriminator, str(tmp_path / "export"),
                                       str(vocab_file), str(tmp_path / "config.json"))
        version_dir = export_discriminator(discriminator, config, str(vocab_file),
                                           str(tmp_path / "serving"), "discriminator")
        assert kernels.active_name() == "cpu_fast"  # the exports left the choice alone
    for saved_model in (os.path.join(export_dir, "discriminator_savedmodel"), version_dir):
        message = saved_model_pb2.SavedModel()
        with open(os.path.join(saved_model, "saved_model.pb"), "rb") as f:
            message.ParseFromString(f.read())
        assert custom_gradient_ops(message.meta_graphs[0].graph_def) == [], saved_model
