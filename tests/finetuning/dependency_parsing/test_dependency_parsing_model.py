"""The biaffine parser: its scores and losses against NumPy, its place in the decay, saving."""

import numpy as np
import pytest
import tensorflow as tf
from finetuning_support import make_pretrained_dir

from electra_tf.finetuning.dependency_parsing.model import (
    NO_SCORE,
    BiaffineParserHead,
    build_parser,
    head_mask,
    parsing_losses,
)

# Two sentences: three words, and one word (then padding).
WORD_STARTS = np.array([[1, 2, 4], [2, 0, 0]], np.int32)


def _head(num_labels=4, arc_size=5, label_size=3, hidden=6, seed=0):
    head = BiaffineParserHead(num_labels, arc_size, label_size)
    head.build((None, None, hidden))
    rng = np.random.default_rng(seed)
    for variable in head.weights:
        variable.assign(rng.normal(0, 0.7, variable.shape).astype(np.float32))
    return head, rng.normal(size=(2, 6, hidden)).astype(np.float32)


def _elu(x):
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


def _weights(head):
    return {v.name: v.numpy() for v in head.weights}


def test_the_root_and_other_words_are_candidate_heads():
    mask = head_mask(tf.constant(WORD_STARTS)).numpy()
    # Rows: words; columns: root, word 1, word 2, word 3. No word heads itself.
    np.testing.assert_array_equal(mask[0], [[1, 0, 1, 1], [1, 1, 0, 1], [1, 1, 1, 0]])
    # The one-word sentence: its word has the root alone (the padding rows are not read).
    np.testing.assert_array_equal(mask[1], [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0]])


def test_arc_and_label_scores_are_the_biaffine_forms_computed_in_numpy():
    head, sequence = _head()
    w = _weights(head)
    gold = np.array([[2, 0, 2], [0, 0, 0]], np.int32)
    outputs = head(tf.constant(sequence), tf.constant(WORD_STARTS), tf.constant(gold))
    for b in range(2):
        nodes = np.concatenate([sequence[b, :1], sequence[b, WORD_STARTS[b]]])  # [W + 1, H]
        d = _elu(nodes[1:] @ w["arc_dependent_kernel"] + w["arc_dependent_bias"])
        h = _elu(nodes @ w["arc_head_kernel"] + w["arc_head_bias"])
        ld = _elu(nodes[1:] @ w["label_dependent_kernel"] + w["label_dependent_bias"])
        lh = _elu(nodes @ w["label_head_kernel"] + w["label_head_bias"])
        for i in range(3):
            for j in range(4):
                present = j == 0 or WORD_STARTS[b, j - 1] > 0
                want = d[i] @ w["arc_bilinear"] @ h[j] + h[j] @ w["arc_head_weight"]
                got = outputs["arc_scores"][b, i, j].numpy()
                if present and j != i + 1:
                    assert got == pytest.approx(want, rel=1e-4, abs=1e-4)
                else:
                    assert got == NO_SCORE
            g = lh[gold[b, i]]
            for k in range(4):
                want = (
                    ld[i] @ w["label_bilinear"][k] @ g
                    + ld[i] @ w["label_dependent_weight"][:, k]
                    + g @ w["label_head_weight"][:, k]
                    + w["label_bias"][k]
                )
                got = outputs["label_scores"][b, i, k].numpy()
                assert got == pytest.approx(want, rel=1e-4, abs=1e-4)
    # Heads are the argmax over the candidates; labels the argmax at the given heads.
    np.testing.assert_array_equal(outputs["heads"], outputs["arc_scores"].numpy().argmax(-1))
    np.testing.assert_array_equal(outputs["label_ids"], outputs["label_scores"].numpy().argmax(-1))
    # Without heads given, the labels are scored at the predicted ones.
    predicted = head(tf.constant(sequence), tf.constant(WORD_STARTS))
    at_predicted = head(tf.constant(sequence), tf.constant(WORD_STARTS), predicted["heads"])
    np.testing.assert_allclose(predicted["label_scores"], at_predicted["label_scores"])


def test_losses_are_the_gold_head_and_gold_label_cross_entropies_summed_per_sentence():
    rng = np.random.default_rng(1)
    arcs = rng.normal(size=(2, 3, 4)).astype(np.float32)
    arcs[1, :, 2:] = NO_SCORE
    labels = rng.normal(size=(2, 3, 5)).astype(np.float32)
    heads = np.array([[2, 0, 1], [0, 1, 0]], np.int32)
    label_ids = np.array([[1, 4, 0], [3, 2, 0]], np.int32)
    mask = np.array([[1, 1, 0], [1, 1, 0]], np.float32)
    outputs = {
        "arc_scores": arcs,
        "label_scores": labels,
        "heads": arcs.argmax(-1).astype(np.int32),
    }
    values = parsing_losses(outputs, {"heads": heads, "label_ids": label_ids, "word_mask": mask})

    def nll(scores, index):
        shifted = scores - scores.max(-1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
        return -np.take_along_axis(log_probs, index[..., None], -1)[..., 0]

    arc, label = nll(arcs, heads) * mask, nll(labels, label_ids) * mask
    np.testing.assert_allclose(values["arc_loss"], arc.sum(-1), rtol=1e-5)
    np.testing.assert_allclose(values["label_loss"], label.sum(-1), rtol=1e-5)
    np.testing.assert_allclose(values["loss"], arc.sum(-1) + label.sum(-1), rtol=1e-5)
    right = (arcs.argmax(-1) == heads) * mask
    np.testing.assert_allclose(values["uas"], right.sum(-1) / 2, rtol=1e-6)


def test_the_parser_trains_its_head_at_the_top_rate_and_saves_and_loads(tmp_path):
    from electra_tf.artifacts.pretrained import load_discriminator
    from electra_tf.finetuning.kind.optimization import layerwise_multipliers
    from electra_tf.finetuning.saving import load_finetuned, save_finetuned

    pretrained = make_pretrained_dir(str(tmp_path / "pretrained"))
    model = build_parser(load_discriminator(pretrained).encoder, num_labels=38, seed=1)
    ids = np.array([[2, 5, 6, 7, 3, 0]], np.int32)
    inputs = {
        "input_ids": ids,
        "input_mask": (ids > 0).astype(np.int32),
        "segment_ids": np.zeros_like(ids),
        "word_starts": np.array([[1, 2, 3]], np.int32),
    }
    outputs = model(inputs)
    assert outputs["arc_scores"].shape == (1, 3, 4) and outputs["label_scores"].shape == (1, 3, 38)
    rates = layerwise_multipliers(model.trainable_variables, model.encoder.num_layers, 0.8)
    assert len(rates) == len(model.trainable_variables)
    assert {rates[v.path] for v in model.task_head.trainable_variables} == {1.0}
    # Every head weight gets a gradient from the loss.
    labels = {
        "heads": np.array([[2, 0, 2]], np.int32),
        "label_ids": np.array([[3, 2, 5]], np.int32),
        "word_mask": np.ones((1, 3), np.float32),
    }
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model.example_losses(inputs, labels)["loss"])
    gradients = tape.gradient(loss, model.task_head.trainable_variables)
    assert all(g is not None and np.any(np.asarray(g) != 0) for g in gradients)
    save_finetuned(model, str(tmp_path / "trial"), {"kind": "dependency_parsing"})
    reloaded, info = load_finetuned(str(tmp_path / "trial"))
    assert type(reloaded).__name__ == "ElectraDependencyParser"
    assert info == {"kind": "dependency_parsing"}
    again = reloaded(inputs)
    for name in ("arc_scores", "label_scores", "heads", "label_ids"):
        np.testing.assert_allclose(again[name], outputs[name], rtol=1e-6, err_msg=name)
