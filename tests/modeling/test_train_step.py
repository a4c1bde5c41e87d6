"""The shared train step, with fine-tuning models: replicas, accumulation, reduction, float16.

The models run one step of plain SGD with learning rate 1, so that the
change of every weight is minus its gradient (Adam's first step is nearly
blind to the gradient's scale and would hide a wrong normalisation). Like
the project's optimisers, that SGD takes the gradients as the train step
hands them over, already summed over the replicas.
Dropout is off, so one device and two replicas see the same function.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.config import preset
from electra_tf.finetuning.classification.model import ElectraClassifier
from electra_tf.finetuning.kind.optimization import LayerwiseAdamWeightDecay, create_optimizer
from electra_tf.finetuning.question_answering.model import ElectraQA
from electra_tf.finetuning.tagging.model import ElectraTagger
from electra_tf.keras_compat import PresummedGradients
from electra_tf.modeling.electra import build_generator_and_discriminator
from electra_tf.modeling.train_step import TrainStep
from electra_tf.pretraining.pretrainer import Pretrainer

BATCH, LENGTH, VOCAB = 8, 8, 20


class ReplicaSummedSGD(PresummedGradients, keras.optimizers.SGD):
    """SGD taking the gradients as the train step hands them over: summed over replicas."""


def _encoder():
    config = preset(
        "tiny",
        vocab_size=VOCAB,
        hidden_size=32,
        num_layers=2,
        embedding_size=16,
        num_heads=2,
        intermediate_size=64,
        dropout_rate=0.0,
        attention_dropout_rate=0.0,
    )
    return build_generator_and_discriminator(config.model)[1].encoder


def _classifier():
    return ElectraClassifier(_encoder(), 3, dropout_rate=0.0, name="classifier")


def _qa_model():
    model = ElectraQA(_encoder(), beam_size=3, name="qa")
    model.build_for(LENGTH)
    return model


def _inputs(rng):
    lengths = rng.integers(3, LENGTH + 1, size=BATCH)
    mask = (np.arange(LENGTH)[None] < lengths[:, None]).astype(np.int32)
    ids = rng.integers(5, VOCAB, size=(BATCH, LENGTH)).astype(np.int32) * mask
    segments = ((np.arange(LENGTH)[None] >= 2) * mask).astype(np.int32)
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def _classifier_batch(rng):
    return _inputs(rng), rng.integers(0, 3, size=BATCH).astype(np.int32)


def _qa_batch(rng):
    inputs = _inputs(rng)
    lengths = inputs["input_mask"].sum(1)
    starts = np.array([rng.integers(2, n) for n in lengths], np.int32)
    ends = np.array([rng.integers(s, n) for s, n in zip(starts, lengths)], np.int32)
    impossible = (rng.random(BATCH) < 0.3).astype(np.int32)
    labels = {
        "start_positions": starts * (1 - impossible),
        "end_positions": ends * (1 - impossible),
        "is_impossible": impossible,
    }
    return inputs, labels


@pytest.fixture(scope="module")
def weights():
    """The starting weights of each model (the same under every strategy)."""
    keras.utils.set_random_seed(0)
    return {"classifier": _classifier().get_weights(), "qa": _qa_model().get_weights()}


MODELS = {"classifier": (_classifier, _classifier_batch), "qa": (_qa_model, _qa_batch)}


def _one_step(kind, weights, batch, strategy=None, make_optimizer=None, **options):
    """(weight changes, logs, the optimizer) of one `fit` step on `batch`."""
    strategy = strategy or tf.distribute.get_strategy()
    with strategy.scope():  # optimizers too: they keep the strategy they are created in
        model = MODELS[kind][0]()
        model.set_weights(weights[kind])
        optimizer = (make_optimizer or (lambda: ReplicaSummedSGD(1.0)))()
        optimizer.build(model.trainable_variables)
        model.set_training_options(**options)
        model.compile(optimizer=optimizer)
    before = [v.numpy() for v in model.trainable_variables]
    history = model.fit(tf.data.Dataset.from_tensors(batch), epochs=1, steps_per_epoch=1, verbose=0)
    changes = [v.numpy() - b for v, b in zip(model.trainable_variables, before)]
    logs = {k: float(np.squeeze(v[-1])) for k, v in history.history.items()}
    return changes, logs, optimizer


def _assert_close(got, expected, scale=1.0):
    # Nearly every variable gets a gradient (a bias added to all of a
    # softmax's logits gets none), so the comparison is not of zeros.
    assert sum(np.abs(e).max() > 0 for e in expected) >= 0.9 * len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(
            g, scale * e, rtol=2e-4, atol=2e-6 * scale * max(1.0, np.abs(e).max())
        )


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["classifier", "qa"])
def test_two_replicas_and_accumulation_make_the_single_device_update(
    kind, weights, two_replica_strategy, rng
):
    batch = MODELS[kind][1](rng)
    single, single_logs, _ = _one_step(kind, weights, batch)
    for accumulation in (1, 2):
        changes, logs, _ = _one_step(
            kind, weights, batch, two_replica_strategy, gradient_accumulation_steps=accumulation
        )
        _assert_close(changes, single)
        assert logs == pytest.approx(single_logs, rel=1e-5)
    # Accumulation alone, on one device.
    changes, logs, _ = _one_step(kind, weights, batch, gradient_accumulation_steps=4)
    _assert_close(changes, single)
    assert logs == pytest.approx(single_logs, rel=1e-5)


def test_per_replica_xla_makes_the_same_update(weights, two_replica_strategy, rng):
    batch = _classifier_batch(rng)
    single, _, _ = _one_step("classifier", weights, batch)
    changes, _, _ = _one_step("classifier", weights, batch, two_replica_strategy, jit_compile=True)
    _assert_close(changes, single)


@pytest.mark.slow
def test_summed_loss_gives_batch_size_times_the_mean_gradient(weights, two_replica_strategy, rng):
    inputs, labels = batch = _classifier_batch(rng)
    # The mean gradient, independently: Keras' own cross-entropy on one device.
    model = _classifier()
    model.set_weights(weights["classifier"])
    with tf.GradientTape() as tape:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(
            labels, model(inputs, training=True)
        )
    mean_gradient = [
        g.numpy() if not isinstance(g, tf.IndexedSlices) else tf.convert_to_tensor(g).numpy()
        for g in tape.gradient(loss, model.trainable_variables)
    ]

    changes, logs, _ = _one_step("classifier", weights, batch, two_replica_strategy)
    _assert_close(changes, [-g for g in mean_gradient])
    for strategy in (None, two_replica_strategy):
        changes, summed_logs, _ = _one_step(
            "classifier", weights, batch, strategy, loss_reduction="sum"
        )
        _assert_close(changes, [-g for g in mean_gradient], scale=BATCH)
        # What a step logs is the mean loss, whatever is optimised.
        assert summed_logs["loss"] == pytest.approx(float(loss), rel=1e-5)
    assert logs["loss"] == pytest.approx(float(loss), rel=1e-5)


def test_an_unknown_loss_reduction_is_refused():
    with pytest.raises(ValueError, match="loss_reduction='max'.*mean, sum"):
        _classifier().set_training_options(loss_reduction="max")


@pytest.mark.slow
def test_float16_scales_the_loss_and_unscales_the_gradients(weights, two_replica_strategy, rng):
    batch = _classifier_batch(rng)
    reference, _, _ = _one_step("classifier", weights, batch)
    keras.mixed_precision.set_global_policy("mixed_float16")
    changes, logs, optimizer = _one_step(
        "classifier",
        weights,
        batch,
        two_replica_strategy,
        make_optimizer=lambda: keras.optimizers.LossScaleOptimizer(ReplicaSummedSGD(1.0)),
    )
    # The loss was multiplied by the (large) loss scale before differentiation
    # and the gradients divided by it: the update is the float32 one, within
    # float16's precision. Without the scale, the smallest gradients vanish.
    assert float(optimizer.dynamic_scale.numpy()) == 2.0**15
    assert int(optimizer.iterations.numpy()) == 1 and np.isfinite(logs["loss"])
    for got, expected in zip(changes, reference):
        np.testing.assert_allclose(got, expected, rtol=0.05, atol=0.02 * np.abs(expected).max())


@pytest.mark.parametrize(
    "precision, wrapped", [("none", False), ("bfloat16", False), ("float16", True)]
)
def test_only_float16_gets_a_loss_scale_optimizer(precision, wrapped):
    model = _classifier()
    optimizer = create_optimizer(model, 2, 1e-3, 10, mixed_precision=precision)
    assert isinstance(optimizer, keras.optimizers.LossScaleOptimizer) == wrapped
    inner = optimizer.inner_optimizer if wrapped else optimizer
    assert isinstance(inner, LayerwiseAdamWeightDecay)


def test_pretraining_and_fine_tuning_models_share_one_train_step():
    import ast
    import pathlib

    import electra_tf

    for model in (Pretrainer, ElectraClassifier, ElectraQA, ElectraTagger):
        assert model.train_step is TrainStep.train_step, model
    # No other train step in the package than its form on Keras' JAX backend,
    # which `TrainStep.train_step` calls there.
    defined = [
        path.name
        for path in pathlib.Path(electra_tf.__file__).parent.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef) and node.name == "train_step"
    ]
    assert sorted(defined) == ["jax_train_step.py", "train_step.py"]
