"""The tagger: its loss against NumPy, its head's place in the layer-wise decay, saving."""

import numpy as np
import pytest
from finetuning_support import make_pretrained_dir

from electra_tf.artifacts.pretrained import load_discriminator
from electra_tf.finetuning.saving import load_finetuned, save_finetuned
from electra_tf.finetuning.tagging.model import build_tagger, tagging_losses


def test_losses_are_masked_summed_cross_entropy():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 5, 4)).astype(np.float32)
    tag_ids = rng.integers(0, 4, size=(3, 5))
    mask = np.array([[0, 1, 1, 0, 1], [0, 1, 0, 0, 0], [0, 0, 0, 0, 0]], np.float32)
    values = tagging_losses(logits, {"tag_ids": tag_ids, "tag_mask": mask})
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    picked = -np.take_along_axis(log_probs, tag_ids[..., None], -1)[..., 0]
    np.testing.assert_allclose(values["loss"].numpy(), (picked * mask).sum(-1), rtol=1e-5)
    right = (logits.argmax(-1) == tag_ids) * mask
    expected = [right[0].sum() / 3, right[1].sum(), 0.0]  # a sentence without labels: 0
    np.testing.assert_allclose(values["accuracy"].numpy(), expected, rtol=1e-6)


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    return make_pretrained_dir(str(tmp_path_factory.mktemp("pretrained")))


def test_logits_at_every_position_and_saved_model_round_trip(pretrained, tmp_path):
    from electra_tf.finetuning.kind.optimization import layerwise_multipliers

    model = build_tagger(load_discriminator(pretrained).encoder, num_tags=5, seed=1)
    ids = np.array([[2, 5, 6, 7, 3, 0]], np.int32)
    inputs = {
        "input_ids": ids,
        "input_mask": (ids > 0).astype(np.int32),
        "segment_ids": np.zeros_like(ids),
    }
    logits = np.asarray(model(inputs))
    assert logits.shape == (1, 6, 5)
    # The head is one dense layer on the encoder's states (no dropout at inference).
    states = np.asarray(model.encoder(inputs))
    head = model.task_head
    np.testing.assert_allclose(
        logits, states @ head.kernel.numpy() + head.bias.numpy(), rtol=1e-5, atol=1e-6
    )
    # The layer-wise decay knows every variable, the head at the full rate.
    rates = layerwise_multipliers(model.trainable_variables, model.encoder.num_layers, 0.8)
    assert len(rates) == len(model.trainable_variables)
    assert {rates[v.path] for v in head.trainable_variables} == {1.0}
    assert max(rate for path, rate in rates.items() if not path.startswith("task_head")) < 1.0
    save_finetuned(model, str(tmp_path / "trial"), {"kind": "tagger"})
    reloaded, info = load_finetuned(str(tmp_path / "trial"))
    assert type(reloaded).__name__ == "ElectraTagger" and info == {"kind": "tagging"}
    np.testing.assert_allclose(np.asarray(reloaded(inputs)), logits, rtol=1e-6)
