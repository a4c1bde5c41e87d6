"""The score-per-option model: its head against NumPy, absent options, the loss, saving."""

import math

import numpy as np
import pytest
from finetuning_support import make_pretrained_dir

from electra_tf.finetuning.multiple_choice.model import MASKED_LOGIT, build_multiple_choice


def gelu(x):
    """Exact GELU, as transformers' `gelu` activation computes it."""
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from electra_tf.artifacts.pretrained import load_discriminator

    directory = make_pretrained_dir(str(tmp_path_factory.mktemp("mc_model")))
    model = build_multiple_choice(load_discriminator(directory).encoder, seed=3)
    rng = np.random.default_rng(3)
    for variable in model.task_head.trainable_weights:
        variable.assign(rng.normal(0, 0.5, variable.shape).astype(np.float32))
    return model


def inputs(seed=0):
    """Two questions of three options; question 1 has two (its third is padding)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, 19, size=(2, 3, 6)).astype(np.int32)
    ids[..., 0] = 2
    mask = np.ones_like(ids)
    mask[0, 1, 4:] = 0
    mask[1, 2] = 0
    ids[1, 2] = 0
    segments = np.zeros_like(ids)
    segments[..., 3:] = 1
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def test_scores_are_the_head_on_each_option_s_cls_in_numpy(model):
    batch = inputs()
    logits = np.asarray(model(batch))
    assert logits.shape == (2, 3) and logits.dtype == np.float32
    flat = {k: v.reshape(6, 6) for k, v in batch.items()}
    cls = np.asarray(model.encoder(flat))[:, 0]  # [6, H]
    head = model.task_head
    hidden = gelu(cls @ head.summary.kernel.numpy() + head.summary.bias.numpy())
    scores = (hidden @ head.classifier.kernel.numpy() + head.classifier.bias.numpy()).reshape(2, 3)
    present = batch["input_mask"][..., 0] == 1
    np.testing.assert_allclose(logits[present], scores[present], atol=1e-5)
    assert logits[1, 2] == MASKED_LOGIT
    assert np.ptp(logits[present]) > 1e-2  # the options score differently (far beyond 1e-5)


def test_an_option_is_scored_alone(model):
    """Each option's sequence runs on its own: other options and their number change nothing."""
    batch = inputs()
    alone = {k: v[:1, :1] for k, v in batch.items()}
    np.testing.assert_allclose(
        np.asarray(model(alone))[0, 0], np.asarray(model(batch))[0, 0], atol=1e-5
    )


def test_the_loss_is_cross_entropy_over_the_present_options(model):
    batch = inputs()
    labels = np.array([2, 1], np.int32)
    values = {k: np.asarray(v) for k, v in model.example_losses(batch, labels).items()}
    logits = np.asarray(model(batch), np.float64)
    present = batch["input_mask"][..., 0] == 1
    for row in range(2):
        scores = logits[row][present[row]]
        expected = (
            math.log(np.exp(scores - scores.max()).sum()) + scores.max() - logits[row, labels[row]]
        )
        assert values["loss"][row] == pytest.approx(expected, abs=1e-5)
        assert values["accuracy"][row] == float(np.argmax(logits[row]) == labels[row])


def test_a_saved_model_loads_with_the_same_scores(model, tmp_path):
    from electra_tf.finetuning.saving import load_finetuned, save_finetuned

    save_finetuned(model, str(tmp_path / "trial"), {"kind": "multiple_choice", "max_seq_length": 8})
    loaded, info = load_finetuned(str(tmp_path / "trial"))
    assert info["kind"] == "multiple_choice" and loaded.dropout_rate == model.dropout_rate
    np.testing.assert_array_equal(np.asarray(loaded(inputs(1))), np.asarray(model(inputs(1))))


def test_the_head_trains_at_the_top_of_the_layerwise_decay(model):
    from electra_tf.finetuning.kind.optimization import layerwise_multipliers

    multipliers = layerwise_multipliers(model.trainable_variables, 2, 0.5)
    assert multipliers["task_head/summary/kernel"] == 1.0
    assert multipliers["task_head/classifier/bias"] == 1.0
