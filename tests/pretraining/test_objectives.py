"""The objective classes: one per --objective/--training, their losses by name, their layout.

The forward passes are checked against NumPy in test_pretrainer.py,
test_variants.py and test_electric.py; here each class's loss is checked on
hand-written sums, so what each objective optimises reads off this file.
"""

import hashlib
import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import make_batch
from test_pretrainer import LENGTH, SLOTS, VOCAB, tiny_config

from electra_tf.config import OBJECTIVES, TRAINING_ALGORITHMS
from electra_tf.pretraining import objectives
from electra_tf.pretraining.objectives import ElectraPretrainer, make_pretrainer
from electra_tf.pretraining.optimization import create_optimizer

# One setting of each class (two_stage and adversarial need these options).
SETTINGS = {
    "electra": dict(),
    "mlm": dict(objective="mlm"),
    "electra_15": dict(objective="electra_15"),
    "replace_mlm": dict(objective="replace_mlm"),
    "all_tokens_mlm": dict(objective="all_tokens_mlm"),
    "electric": dict(objective="electric"),
    "uniform": dict(uniform_generator=True),
    "adversarial": dict(training="adversarial"),
    "two_stage": dict(training="two_stage", weight_sharing="none", generator_hidden_fraction=1.0),
    "gdes": dict(weight_sharing="gdes"),
}

E = 1e-6  # objective.DENOMINATOR_EPSILON


def test_every_objective_and_training_algorithm_has_its_class():
    assert {o for o, _ in objectives.PRETRAINERS} == set(OBJECTIVES)
    assert {t for _, t in objectives.PRETRAINERS} == set(TRAINING_ALGORITHMS)
    for name, settings in SETTINGS.items():
        config = tiny_config(**settings)
        model = make_pretrainer(config)
        assert (model.OBJECTIVE, model.TRAINING) == (config.objective, config.training), name
    assert type(make_pretrainer(tiny_config())) is ElectraPretrainer


def test_a_class_refuses_another_objective_and_a_saved_config_picks_the_class():
    config = tiny_config(objective="mlm")
    with pytest.raises(
        ValueError,
        match="ElectraPretrainer trains --objective=electra "
        "--training=joint, not --objective=mlm.*make_pretrainer",
    ):
        ElectraPretrainer(config)
    saved = make_pretrainer(config).get_config()
    # Whatever name a pretrainer was saved under, its config decides what it is.
    for cls in (ElectraPretrainer, objectives.MaskedLMPretrainer):
        restored = cls.from_config(saved)
        assert type(restored) is objectives.MaskedLMPretrainer
        assert restored.config == config
    registered = keras.saving.get_registered_object("electra_tf>ElectraPretrainer")
    assert registered is ElectraPretrainer


def sums(**groups):
    """Named sums as `compute_sums` gives them, from plain numbers."""
    return {
        group: {k: tf.constant(float(v)) for k, v in values.items()}
        for group, values in groups.items()
    }


COUNTS = {
    "masked": tf.constant(4.0),
    "tokens": tf.constant(20.0),
    "cloze_targets": tf.constant(16.0),
}
MLM = dict(nll=8.0, correct=1.0, count=4.0)
DISC = dict(
    loss=5.0,
    count=20.0,
    correct=15.0,
    true_positive=2.0,
    predicted_positive=3.0,
    actual_positive=4.0,
)


@pytest.mark.parametrize(
    "name, groups, expected",
    [
        # ELECTRA: gen_weight * L_MLM + disc_weight * L_Disc, per masked slot and per token.
        ("electra", dict(mlm=MLM, disc=DISC), 2.0 * 8 / (4 + E) + 10.0 * 5 / (20 + E)),
        # ELECTRA 15%: the discriminator's loss is per masked slot.
        ("electra_15", dict(mlm=MLM, disc=DISC), 2.0 * 8 / (4 + E) + 10.0 * 5 / (4 + E)),
        # BERT: the full-size model's NLL per masked slot, weight 1.
        ("mlm", dict(mlm=MLM), 8 / (4 + E)),
        # Replace MLM and All-Tokens MLM: the full-size model's NLL with weight 1.
        ("replace_mlm", dict(mlm=MLM, replace_mlm=dict(nll=6.0)), 2.0 * 8 / (4 + E) + 6 / (4 + E)),
        (
            "all_tokens_mlm",
            dict(mlm=MLM, all_tokens_mlm=dict(nll=30.0)),
            2.0 * 8 / (4 + E) + 30 / (20 + E),
        ),
        # Electric: the cloze NLL per target token in place of L_MLM.
        (
            "electric",
            dict(mlm=MLM, cloze=dict(nll=32.0), disc=DISC),
            2.0 * 32 / (16 + E) + 10.0 * 5 / (20 + E),
        ),
        # A uniform generator has nothing to learn: L_Disc alone.
        ("uniform", dict(mlm=MLM, disc=DISC), 10.0 * 5 / (20 + E)),
        # Adversarial: the REINFORCE surrogate per masked slot in place of L_MLM.
        (
            "adversarial",
            dict(mlm=MLM, reinforce=dict(loss=-1.0), disc=DISC),
            2.0 * -1 / (4 + E) + 10.0 * 5 / (20 + E),
        ),
    ],
)
def test_each_objective_optimises_its_own_sums(name, groups, expected):
    model = make_pretrainer(tiny_config(gen_weight=2.0, disc_weight=10.0, **SETTINGS[name]))
    assert float(model._loss(sums(**groups), COUNTS)) == pytest.approx(expected, rel=1e-6)


def test_two_stage_optimises_one_loss_per_stage():
    model = make_pretrainer(tiny_config(gen_weight=2.0, disc_weight=10.0, **SETTINGS["two_stage"]))
    named = sums(mlm=MLM, disc=DISC)
    expected = {
        "joint": 2.0 * 8 / (4 + E) + 10.0 * 5 / (20 + E),
        "generator": 2.0 * 8 / (4 + E),
        "discriminator": 10.0 * 5 / (20 + E),
    }
    for stage, value in expected.items():
        model.set_stage(stage)
        assert float(model._loss(named, COUNTS)) == pytest.approx(value, rel=1e-6), stage


def test_metrics_are_ratios_of_the_named_sums():
    model = make_pretrainer(tiny_config())
    named = sums(
        counts=dict(masked=4.0, tokens=20.0),
        mlm=MLM,
        samples=dict(correct=2.0, replaced=3.0),
        disc=DISC,
    )
    stats = {k: float(v) for k, v in model.metrics_from_sums(named).items()}
    assert stats == pytest.approx(
        {
            "masked_lm_loss": 8 / (4 + E),
            "masked_lm_accuracy": 1 / (4 + E),
            "sampled_masked_lm_accuracy": 2 / (4 + E),
            "replaced_fraction": 3 / (20 + E),
            "disc_loss": 5 / (20 + E),
            "disc_accuracy": 15 / (20 + E),
            "disc_precision": 2 / (3 + E),
            "disc_recall": 2 / (4 + E),
            "total_loss": 8 / (4 + E) + 50 * 5 / (20 + E),
        },
        rel=1e-6,
    )


# sha256 (first 16 hex digits) of [sorted checkpoint keys, trainable variable paths in
# order] for a model, its optimizer and its dropout states, as every run saves them:
# the layout written before the objectives were split into classes. The optimizer's
# slots are stored by position, so the order of the variables is part of the layout.
LAYOUTS = {
    "electra": "071fe60c3a1798bf",
    "mlm": "8ea4ced5cecd95b8",
    "electra_15": "071fe60c3a1798bf",
    "replace_mlm": "8e4a12d83570644a",
    "all_tokens_mlm": "f4ee5334c29c70e8",
    "electric": "edc22eea2d78f032",
    "uniform": "deb1765a630d6d6f",
    "adversarial": "071fe60c3a1798bf",
    "two_stage": "6136422b68d9d833",
    "gdes": "ca67e449dfd3e0f1",
}
SLOW = ("electra_15", "uniform", "adversarial", "gdes")


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in LAYOUTS]
)
def test_checkpoints_keep_the_layout_of_earlier_runs(rng, tmp_path, name):
    config = tiny_config(dropout_rate=0.1, attention_dropout_rate=0.1, **SETTINGS[name])
    keras.utils.set_random_seed(0)
    model = make_pretrainer(config)
    model.build_from_batch(make_batch(rng, 4, LENGTH, SLOTS, VOCAB))
    optimizer = create_optimizer(config)
    optimizer.build(model.trainable_variables)
    rng_state = [v for v in model.non_trainable_variables if "seed_generator" in v.path]
    prefix = tf.train.Checkpoint(model=model, optimizer=optimizer, rng_state=rng_state).write(
        str(tmp_path / "ckpt")
    )
    keys = sorted(key for key, _ in tf.train.list_variables(prefix))
    order = [v.path for v in model.trainable_variables]
    digest = hashlib.sha256(json.dumps([keys, order]).encode()).hexdigest()[:16]
    assert digest == LAYOUTS[name], (keys, order)
    np.testing.assert_array_equal(
        tf.train.load_checkpoint(prefix).get_tensor(
            "model/seen_batches/.ATTRIBUTES/VARIABLE_VALUE"
        ),
        0,
    )
