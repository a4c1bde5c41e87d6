"""The host copies a JAX run's checkpoints hold: pulled before a save, pushed after a restore."""

import keras
import numpy as np
import tensorflow as tf

from electra_tf.artifacts.mirrored_checkpoint import VariableMirror


def test_a_checkpoint_of_the_copies_restores_every_model_and_optimizer_value(tmp_path):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2), keras.layers.Dropout(0.5)])
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    mirror = VariableMirror(model, optimizer)
    optimizer.iterations.assign(7)
    moment = next(v for v in optimizer.variables if tuple(v.shape) == (3, 2))
    moment.assign(np.full((3, 2), 0.25, np.float32))
    saved = [np.array(v.value) for v in model.variables]
    mirror.pull()
    path = mirror.checkpoint.save(str(tmp_path / "ckpt"))
    for variable in model.variables + optimizer.variables:
        variable.assign(np.zeros(variable.shape, variable.dtype))
    mirror.checkpoint.restore(path).assert_existing_objects_matched()
    mirror.push()
    for variable, value in zip(model.variables, saved):
        np.testing.assert_array_equal(np.asarray(variable.value), value)
    assert int(optimizer.iterations.numpy()) == 7
    np.testing.assert_array_equal(moment.numpy(), np.full((3, 2), 0.25))
    # One copy per variable, the dropout seed among them.
    reader = tf.train.load_checkpoint(path)
    keys = [k for k in reader.get_variable_to_shape_map() if k.startswith(("model/", "optimizer/"))]
    assert len(keys) == len(model.variables) + len(optimizer.variables)
    assert any("seed" in v.path for v in model.variables)


def test_a_checkpoint_of_another_models_variables_is_refused_before_anything_is_assigned(
    tmp_path,
):
    import pytest

    from electra_tf.errors import RunError

    def mirror_of(*layers):
        model = keras.Sequential([keras.Input((3,)), *layers], name="m")
        optimizer = keras.optimizers.Adam()
        optimizer.build(model.trainable_variables)
        return model, VariableMirror(model, optimizer)

    _, saved = mirror_of(keras.layers.Dense(3, name="a"), keras.layers.Dense(3, name="b"))
    path = saved.checkpoint.save(str(tmp_path / "ckpt"))
    # The same shapes in another order of names: restorable, but not this model's.
    model, other = mirror_of(keras.layers.Dense(3, name="b"), keras.layers.Dense(3, name="a"))
    before = [np.array(v.value) for v in model.variables]
    other.checkpoint.restore(path)
    with pytest.raises(RunError, match="its variable 0 is m/a/kernel, this model.s is m/b/kernel"):
        other.push()
    for variable, value in zip(model.variables, before):
        np.testing.assert_array_equal(np.asarray(variable.value), value)
