"""The QA head against NumPy, decoding rules, and a tiny model that learns a few questions."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.finetuning.kind.optimization import create_optimizer, layerwise_multipliers
from electra_tf.finetuning.question_answering import decoding as squad_decoding
from electra_tf.finetuning.question_answering.data import QAExample
from electra_tf.finetuning.question_answering.features import (
    QAFeatures,
    convert_examples,
    make_dataset,
)
from electra_tf.finetuning.question_answering.model import (
    ElectraQA,
    QAHead,
    answer_mask,
    build_qa_model,
    qa_losses,
)
from electra_tf.finetuning.question_answering.squad_metrics import evaluate_v1
from electra_tf.finetuning.saving import load_finetuned, save_finetuned
from electra_tf.modeling.encoder import ElectraEncoder
from electra_tf.tokenization import WordPieceTokenizer

_erf = np.vectorize(math.erf)


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_answer_mask():
    input_mask = np.array([[1, 1, 1, 1, 1, 0]])
    segment_ids = np.array([[0, 0, 0, 1, 1, 0]])
    assert answer_mask(input_mask, segment_ids).numpy().tolist() == [[1, 0, 0, 1, 1, 0]]


def _head_and_numpy(rng, batch=2, length=7, hidden=6, units=5, beam=3):
    head = QAHead(beam_size=beam, hidden_units=units, initializer_range=0.5)
    head.build((None, None, hidden))
    for variable in head.weights:  # non-zero biases too
        variable.assign(rng.normal(0, 0.5, variable.shape).astype(np.float32))
    w = {v.name: v.numpy() for v in head.weights}
    sequence = rng.normal(size=(batch, length, hidden)).astype(np.float32)
    mask = np.ones((batch, length), np.float32)
    mask[0, 1:3] = 0  # question tokens
    mask[1, 1:4] = 0
    mask[1, 6] = 0  # padding
    return head, w, sequence, mask


def _numpy_end_logits(w, sequence, start_state, mask):
    """Explicit concatenation [start state, position state] -> dense GELU -> dense."""
    length = sequence.shape[0]
    joint = np.concatenate([np.repeat(start_state[None], length, 0), sequence], -1)
    hidden = _gelu(joint @ w["end_hidden_kernel"] + w["end_hidden_bias"])
    return (hidden @ w["end_kernel"])[:, 0] + w["end_bias"][0] - 1000.0 * (1 - mask)


def test_head_training_outputs_match_numpy(rng):
    head, w, sequence, mask = _head_and_numpy(rng)
    starts = np.array([3, 5])
    outputs = head(tf.constant(sequence), tf.constant(mask), tf.constant(starts))
    for b in range(2):
        start = (sequence[b] @ w["start_kernel"])[:, 0] + w["start_bias"][0] - 1000 * (1 - mask[b])
        np.testing.assert_allclose(outputs["start_logits"][b], start, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(
            outputs["end_logits"][b],
            _numpy_end_logits(w, sequence[b], sequence[b, starts[b]], mask[b]),
            rtol=1e-5,
            atol=1e-4,
        )
        p = np.exp(_log_softmax(start))
        pooled = (p[:, None] * sequence[b]).sum(0)
        hidden = _gelu(
            np.concatenate([sequence[b, 0], pooled]) @ w["answerable_hidden_kernel"]
            + w["answerable_hidden_bias"]
        )
        expected = (hidden @ w["answerable_kernel"])[0] + w["answerable_bias"][0]
        np.testing.assert_allclose(outputs["answerable_logit"][b], expected, rtol=1e-5, atol=1e-5)

    labels = {
        "start_positions": starts,
        "end_positions": np.array([4, 0]),
        "is_impossible": np.array([0, 1]),
    }
    span, answerable = qa_losses(outputs, labels)
    for b in range(2):
        start_lp = _log_softmax(outputs["start_logits"][b].numpy())
        end_lp = _log_softmax(outputs["end_logits"][b].numpy())
        expected = -(start_lp[starts[b]] + end_lp[labels["end_positions"][b]]) / 2
        np.testing.assert_allclose(span[b], expected, rtol=1e-5)
        z, y = outputs["answerable_logit"][b].numpy(), labels["is_impossible"][b]
        np.testing.assert_allclose(answerable[b], np.log1p(np.exp(-z)) + (1 - y) * z, rtol=1e-5)


def test_head_beam_search_matches_numpy(rng):
    head, w, sequence, mask = _head_and_numpy(rng)
    outputs = head(tf.constant(sequence), tf.constant(mask))
    for b in range(2):
        start = (sequence[b] @ w["start_kernel"])[:, 0] + w["start_bias"][0] - 1000 * (1 - mask[b])
        start_lp = _log_softmax(start)
        top = np.argsort(-start_lp, kind="stable")[:3]
        assert outputs["start_top_index"][b].numpy().tolist() == top.tolist()
        np.testing.assert_allclose(outputs["start_top_log_probs"][b], start_lp[top], rtol=1e-5)
        for k, s in enumerate(top):
            end_lp = _log_softmax(_numpy_end_logits(w, sequence[b], sequence[b, s], mask[b]))
            end_top = np.argsort(-end_lp, kind="stable")[:3]
            assert outputs["end_top_index"][b, k].numpy().tolist() == end_top.tolist()
            np.testing.assert_allclose(
                outputs["end_top_log_probs"][b, k], end_lp[end_top], rtol=1e-5, atol=1e-5
            )
            assert mask[b, end_top].all()  # masked positions never win


def _features_for_decoding():
    # One example, two windows over context tokens 0..3 ("aa bb cc dd").
    context = "aa bb cc dd"
    spans = np.full((2, 6, 2), -1, np.int32)
    spans[0, 2:5] = [[0, 2], [3, 5], [6, 8]]  # window 0: tokens 0-2 at positions 2-4
    spans[1, 2:5] = [[3, 5], [6, 8], [9, 11]]  # window 1: tokens 1-3
    max_context = np.zeros((2, 6), bool)
    max_context[0, 2:4] = True  # tokens 0, 1 scored in window 0
    max_context[1, 3:5] = True  # tokens 2, 3 scored in window 1
    zeros = np.zeros((2, 6), np.int32)
    features = QAFeatures(
        zeros,
        zeros,
        zeros,
        np.zeros(2),
        np.zeros(2),
        np.zeros(2),
        np.array([0, 0]),
        spans,
        max_context,
    )
    return QAExample("q", "?", context, [("bb", 3)]), features


def test_decoding_rules_and_null_odds():
    example, features = _features_for_decoding()
    outputs = {
        # Window 0 starts: position 0 ([CLS]) best, then 4 (token 2, not max
        # context here), then 3 (token 1).
        "start_top_log_probs": np.array([[-0.1, -0.5, -1.0], [-0.2, -2.0, -3.0]]),
        "start_top_index": np.array([[0, 4, 3], [4, 1, 3]]),
        "end_top_log_probs": np.array(
            [[[-0.1, -1, -2]] * 3, [[-0.3, -0.4, -9], [-1, -1, -1], [-0.1, -5, -6]]]
        ),
        # Window 1 start 4 (token 3 "dd"): end 3 < start is dropped, end 4 kept.
        "end_top_index": np.array([[[4, 3, 5]] * 3, [[3, 4, 5], [2, 2, 2], [2, 5, 4]]]),
        "answerable_logit": np.array([0.7, -1.5]),
    }
    predictions, null_odds, nbest = squad_decoding.decode(
        [example], features, outputs, n_best_size=3, max_answer_length=2
    )
    # Candidates: w0 start 3 ("bb") + end 4 -> "bb cc" -1.1, + end 3 -> "bb" -2.0;
    # w1 start 4 ("dd") + end 4 -> "dd" -0.6; start 3 ("cc") + end 4 -> "cc dd" -3.6
    # (3 + end 2 dropped: end before start; end 5 is the [SEP]).
    assert predictions == {"q": "dd"}
    assert [c["text"] for c in nbest["q"]] == ["dd", "bb cc", "bb"]
    assert null_odds == {"q": -1.5}  # the smaller answerability logit over windows
    probs = np.exp([-0.6, -1.1, -2.0]) / np.exp([-0.6, -1.1, -2.0]).sum()
    np.testing.assert_allclose([c["probability"] for c in nbest["q"]], probs)
    # max_answer_length=1 removes the two-token spans.
    predictions, _, nbest = squad_decoding.decode([example], features, outputs, 3, 1)
    assert [c["text"] for c in nbest["q"]] == ["dd", "bb"]


QA_VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "red",
    "green",
    "blue",
    "cat",
    "dog",
    "bird",
    "fish",
    "sun",
    "moon",
    "star",
    "tree",
]


def _toy_examples(count, seed):
    """Questions are one word of the context; the answer is that word and the next."""
    rng = np.random.default_rng(seed)
    words = QA_VOCAB[5:]
    examples = []
    for i in range(count):
        context_words = list(rng.permutation(words)[:8])
        k = int(rng.integers(0, 7))
        context = " ".join(context_words)
        start = len(" ".join(context_words[:k])) + (1 if k else 0)
        answer = f"{context_words[k]} {context_words[k + 1]}"
        examples.append(QAExample(f"q{i}", context_words[k], context, [(answer, start)]))
    return examples


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    directory = tmp_path_factory.mktemp("qa")
    (directory / "vocab.txt").write_text("\n".join(QA_VOCAB) + "\n", encoding="utf-8")
    tokenizer = WordPieceTokenizer(str(directory / "vocab.txt"))
    return directory, tokenizer


def _tiny_encoder(seed=0):
    keras.utils.set_random_seed(seed)
    return ElectraEncoder(
        vocab_size=len(QA_VOCAB),
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
        embedding_size=32,
        dropout_rate=0.0,
        attention_dropout_rate=0.0,
    )


def test_head_variables_get_the_head_rate():
    model = build_qa_model(_tiny_encoder(), beam_size=4)
    multipliers = layerwise_multipliers(model.trainable_variables, 2, 0.8)
    by_part = {}
    for path, multiplier in multipliers.items():
        by_part.setdefault(path.split("/")[0], set()).add(multiplier)
    assert by_part["task_head"] == {1.0}
    assert sum(p.startswith("task_head/") for p in multipliers) == 10
    assert sorted(by_part["transformer_layer_1"]) == pytest.approx([0.8])
    assert sorted(by_part["transformer_layer_0"]) == pytest.approx([0.64])
    assert sorted(by_part["embeddings"]) == pytest.approx([0.512])


@pytest.mark.slow
@pytest.mark.parametrize("head", ["electra", "transformers"])
def test_tiny_model_learns_a_handful_of_questions(toy, tmp_path, head):
    directory, tokenizer = toy
    examples = _toy_examples(8, seed=3)
    features = convert_examples(
        examples, tokenizer, max_seq_length=16, doc_stride=8, max_query_length=4, is_training=True
    )
    assert len(features) == 8
    model = build_qa_model(_tiny_encoder(), beam_size=5, seed=0, head=head)
    steps = 120
    model.compile(optimizer=create_optimizer(model, 2, 3e-3, steps, 0.1, 1.0), jit_compile=False)
    history = model.fit(
        make_dataset(features, 8, shuffle_seed=0, repeat=True),
        epochs=1,
        steps_per_epoch=steps,
        verbose=0,
    )
    losses = history.history["loss"]
    eval_features = convert_examples(
        examples, tokenizer, max_seq_length=16, doc_stride=8, max_query_length=4
    )
    outputs = model.predict(make_dataset(eval_features, 8, with_labels=False), verbose=0)
    predictions, _, _ = squad_decoding.decode(examples, eval_features, outputs)
    gold = {e.qas_id: [e.answers[0][0]] for e in examples}
    scores = evaluate_v1(gold, predictions)
    assert scores["exact_match"] == 100.0, (losses[-1], predictions, gold)

    save_finetuned(model, str(tmp_path / "saved"), {"max_seq_length": 16})
    loaded, info = load_finetuned(str(tmp_path / "saved"))
    assert info["max_seq_length"] == 16 and isinstance(loaded, ElectraQA)
    assert loaded.head == head
    again = loaded.predict(make_dataset(eval_features, 8, with_labels=False), verbose=0)
    np.testing.assert_array_equal(again["start_top_index"], outputs["start_top_index"])
    np.testing.assert_allclose(again["answerable_logit"], outputs["answerable_logit"], atol=1e-5)
