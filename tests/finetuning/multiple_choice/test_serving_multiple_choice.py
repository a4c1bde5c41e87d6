"""Multiple-choice signatures against the Keras model fed by the fine-tuning path."""

import base64
import os
from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf
from serving_support import make_serving_pretrained_dir

from electra_tf.finetuning.multiple_choice import check, features
from electra_tf.finetuning.multiple_choice.model import MASKED_LOGIT, build_multiple_choice
from electra_tf.finetuning.multiple_choice.serving import MultipleChoiceServing

MAX_SEQ_LENGTH = 12


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from electra_tf.artifacts.pretrained import load_discriminator
    from electra_tf.tokenization import TextPath

    directory = make_serving_pretrained_dir(str(tmp_path_factory.mktemp("mc_serving")))
    model = build_multiple_choice(load_discriminator(directory).encoder, seed=4)
    rng = np.random.default_rng(4)
    for variable in model.task_head.trainable_weights:
        variable.assign(rng.normal(0, 1.0, variable.shape).astype(np.float32))
    text = TextPath(True, True, "bert", MAX_SEQ_LENGTH)
    tokenizer = text.tokenizer(os.path.join(directory, "vocab.txt"))
    module = MultipleChoiceServing(model, tokenizer, MAX_SEQ_LENGTH)
    signatures = module.signatures()
    reference = SimpleNamespace(config={}, text=text, model=model, tokenizer=tokenizer)
    return SimpleNamespace(signatures=signatures, reference=reference, tokenizer=tokenizer)


def _decode(spec):
    if spec["dtype"] == "string":

        def walk(value):
            return [walk(v) for v in value] if isinstance(value, list) else base64.b64decode(value)

        return tf.constant(np.array(walk(spec["values"]), dtype=object), tf.string)
    return tf.constant(np.array(spec["values"], dtype=spec["dtype"]))


def test_raw_text_gives_the_fine_tuning_path_s_scores(served):
    contexts = ["the movie was very good", "the plot " * 8, "中文 한국어 cafe"]
    questions = ["is the film fun ?", "a story", "? ? ? ? ? ? ? ? ? ? ? ?"]
    options = [["good", "bad", "very dull"], ["fun", "", ""], ["中", "文 the", ""]]
    out = served.signatures["serving_default"](
        question=tf.constant(questions), context=tf.constant(contexts), options=tf.constant(options)
    )
    out = {k: v.numpy() for k, v in out.items()}
    encoded = features.encode(
        served.tokenizer,
        contexts,
        questions,
        [[o for o in r if o] for r in options],
        MAX_SEQ_LENGTH,
    )
    assert encoded.num_truncated == 3  # contexts cut; the last question longer than the budget
    logits = np.asarray(served.reference.model(features.padded_inputs(encoded, 0, 3)))
    np.testing.assert_allclose(out["logits"], logits, atol=1e-5)
    assert out["logits"][1, 1] == out["logits"][1, 2] == MASKED_LOGIT
    np.testing.assert_allclose(out["probabilities"].sum(axis=1), 1.0, atol=1e-6)
    assert out["probabilities"][1, 0] == pytest.approx(1.0) and out["probabilities"][1, 1] == 0
    best = logits.argmax(axis=1)
    np.testing.assert_array_equal(out["choice_id"], best)
    assert list(out["choice"]) == [options[i][c].encode() for i, c in enumerate(best)]


def test_empty_requests_give_empty_outputs(served):
    serve = served.signatures["serving_default"]
    none = serve(
        question=tf.zeros([0], tf.string),
        context=tf.zeros([0], tf.string),
        options=tf.zeros([0, 3], tf.string),
    )
    assert {k: tuple(v.shape) for k, v in none.items()} == {
        "logits": (0, 3),
        "probabilities": (0, 3),
        "choice_id": (0,),
        "choice": (0,),
    }
    blank = serve(
        question=tf.constant(["a"]), context=tf.constant(["b"]), options=tf.constant([["", ""]])
    )
    assert blank["choice_id"].numpy().tolist() == [-1] and blank["choice"].numpy().tolist() == [b""]
    np.testing.assert_array_equal(blank["probabilities"].numpy(), 0.0)


def test_the_check_s_requests_are_answered_as_it_expects(served):
    """Every request of the export check, run in this process: the expected answers hold."""
    from electra_tf.serving.check import compare

    requests, expected, names = check.build_requests(served.reference)
    assert any("without options" in n for n in names) and any(
        "must be rejected" in n for n in names
    )
    for request, want, name in zip(requests, expected, names):
        function = served.signatures[request["signature"]]
        inputs = {k: _decode(v) for k, v in request["inputs"].items()}
        if want is None:
            with pytest.raises((tf.errors.InvalidArgumentError, ValueError, TypeError)):
                function(**inputs)
            continue
        outputs = {}
        for key, value in function(**inputs).items():
            value = value.numpy()
            strings = value.dtype == object
            outputs[key] = {
                "dtype": "string" if strings else value.dtype.name,
                "shape": list(value.shape),
                "values": [base64.b64encode(v).decode() for v in value.reshape(-1)]
                if strings
                else value.reshape(-1).tolist(),
            }
        problems, _ = compare(want, outputs, 1e-5)
        assert not problems, (name, problems)
