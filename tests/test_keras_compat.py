"""The private Keras API electra-tf relies on is still there, and only `keras_compat` uses it."""

import ast
import inspect
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf import keras_compat
from electra_tf.optimization import AdamWeightDecay

PACKAGE = pathlib.Path(keras_compat.__file__).parent


def test_installed_keras_is_a_checked_version():
    # A new Keras release: check each name of PRIVATE_API in its source, then add it here.
    release = ".".join(keras.__version__.split(".")[:2])
    assert release in keras_compat.CHECKED_KERAS_VERSIONS, (
        f"keras {keras.__version__} is not among the versions electra_tf.keras_compat was "
        f"checked on: {keras_compat.CHECKED_KERAS_VERSIONS}"
    )


@pytest.mark.parametrize(
    "cls, name, parameters",
    keras_compat.PRIVATE_API,
    ids=[f"{c.__name__}.{n}" for c, n, _ in keras_compat.PRIVATE_API],
)
def test_private_names_exist_with_the_signatures_used(cls, name, parameters):
    method = getattr(cls, name, None)
    assert callable(method), f"{cls.__name__}.{name} is gone from keras {keras.__version__}"
    assert tuple(inspect.signature(method).parameters)[1:] == parameters


def test_overrides_in_the_package_are_only_in_keras_compat():
    # Any method named like one of Keras' private ones is defined in keras_compat alone.
    private = {name for _, name, _ in keras_compat.PRIVATE_API}
    found = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name in private:
                found.append(f"{path.relative_to(PACKAGE)}:{node.name}")
            if (
                isinstance(node, ast.Attribute)
                and node.attr in private
                and path.name != "keras_compat.py"
            ):
                found.append(f"{path.relative_to(PACKAGE)}:.{node.attr}")
    assert sorted(found) == sorted(
        f"keras_compat.py:{name}"
        for name in ("_maybe_symbolic_build", "_all_reduce_sum_gradients", "_apply_weight_decay")
    ), found


def test_presummed_optimizer_applies_the_gradient_each_replica_holds(two_replica_strategy):
    # The gradient each replica passes is applied as it is: Keras' own sum
    # over replicas (which would double it here) is skipped.
    with two_replica_strategy.scope():
        variable = tf.Variable([1.0, 1.0])
        optimizer = keras.optimizers.SGD(learning_rate=1.0)
        compat = type("PresummedSGD", (keras_compat.PresummedGradients, keras.optimizers.SGD), {})(
            learning_rate=1.0
        )
        other = tf.Variable([1.0, 1.0])
        optimizer.build([variable])
        compat.build([other])

    @tf.function
    def step():
        def replica_fn():
            optimizer.apply([tf.constant([0.5, 0.25])], [variable])
            compat.apply([tf.constant([0.5, 0.25])], [other])

        two_replica_strategy.run(replica_fn)

    step()
    np.testing.assert_allclose(variable.numpy(), [0.0, 0.5])  # summed over 2 replicas: 1 - 2*g
    np.testing.assert_allclose(other.numpy(), [0.5, 0.75])  # as given: 1 - g


def test_decay_in_update_step_turns_off_keras_decay_pass():
    variable = tf.Variable([2.0])
    optimizer = AdamWeightDecay(learning_rate=0.1, weight_decay=0.5, global_clipnorm=None)
    optimizer.build([variable])
    optimizer.apply([tf.constant([0.0])], [variable])
    # Zero gradient: Adam's part is 0, the decay is applied once, in update_step.
    np.testing.assert_allclose(variable.numpy(), [2.0 - 0.1 * 0.5 * 2.0], rtol=1e-6)
    assert keras_compat.uses_weight_decay(optimizer, variable)
    assert keras_compat.variable_index(optimizer, variable) == 0
