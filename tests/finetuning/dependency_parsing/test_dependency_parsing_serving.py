"""Dependency-parser exports: signatures against the Keras model, bad inputs, the check."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from serving_support import make_serving_pretrained_dir

MAX_SEQ_LENGTH = 10
SENTENCES = [
    ["한국어", "문장도", "movie", "fun"],
    ["the"],
    [],
    ["movie"] * 12,  # longer than the model sees: 8 pieces
]


@pytest.fixture(scope="module")
def parser_export(tmp_path_factory):
    from electra_tf.artifacts.pretrained import load_discriminator
    from electra_tf.finetuning.dependency_parsing.data import ParsingDefinition
    from electra_tf.finetuning.dependency_parsing.model import build_parser
    from electra_tf.finetuning.saving import save_finetuned
    from electra_tf.serving.exporter import export_checkpoint

    root = tmp_path_factory.mktemp("parser_serving")
    pretrained = make_serving_pretrained_dir(str(root / "pretrained"))
    model = build_parser(load_discriminator(pretrained).encoder, 38, seed=2)
    rng = np.random.default_rng(2)
    # A wide head, so that heads and labels differ from word to word.
    for variable in model.task_head.weights:
        variable.assign(rng.normal(0, 1.0, variable.shape).astype(np.float32))
    trial = str(root / "trial_0")
    save_finetuned(
        model,
        trial,
        {
            "kind": "dependency_parsing",
            "task": ParsingDefinition("toydp").to_dict(),
            "max_seq_length": MAX_SEQ_LENGTH,
            "do_lower_case": True,
            "strip_accents": True,
        },
        os.path.join(pretrained, "vocab.txt"),
    )
    version = export_checkpoint(trial, str(root / "export"), "dp")
    return {
        "model": model,
        "version": version,
        "pretrained": pretrained,
        "loaded": tf.saved_model.load(version),
    }


def _keras_parses(model, tokenizer, sentences):
    """Each word's head and label id from the Keras model, read at its first piece."""
    from electra_tf.finetuning.dependency_parsing import features as dp_features

    features = dp_features.encode(tokenizer, sentences, MAX_SEQ_LENGTH)
    heads, labels = dp_features.predict(model, features, batch_size=2, pad_id=tokenizer.pad_id)
    return heads, labels, features


def _served(loaded, name, **inputs):
    return {k: v.numpy() for k, v in loaded.signatures[name](**inputs).items()}


@pytest.mark.slow
def test_signatures_and_serving_config(parser_export):
    from electra_tf.finetuning.dependency_parsing.data import DEPREL_LABELS
    from electra_tf.finetuning.dependency_parsing.task import DependencyParsingTask

    loaded = parser_export["loaded"]
    assert set(loaded.signatures) == {"serving_default", "token_ids"}
    inputs = loaded.signatures["serving_default"].structured_input_signature[1]
    assert {k: (v.dtype, v.shape.as_list()) for k, v in inputs.items()} == {
        "words": (tf.string, [None, None])
    }
    assert tuple(inputs) == DependencyParsingTask.REQUEST_FIELDS
    ids_inputs = loaded.signatures["token_ids"].structured_input_signature[1]
    assert set(ids_inputs) == {"input_ids", "input_mask", "segment_ids", "word_starts"}
    outputs = {
        k: (v.dtype, v.shape.as_list())
        for k, v in loaded.signatures["serving_default"].structured_outputs.items()
    }
    assert outputs == {
        "heads": (tf.int32, [None, None]),
        "labels": (tf.string, [None, None]),
        "label_ids": (tf.int32, [None, None]),
        "head_probabilities": (tf.float32, [None, None, None]),
        "label_probabilities": (tf.float32, [None, None, 38]),
        "num_words": (tf.int32, [None]),
    }
    assets = os.path.join(parser_export["version"], "assets")
    with open(os.path.join(assets, "serving_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    assert config["kind"] == "dependency_parsing" and config["max_seq_length"] == MAX_SEQ_LENGTH
    assert config["label_names"] == list(DEPREL_LABELS)
    with open(os.path.join(assets, "labels.txt"), encoding="utf-8") as f:
        assert f.read().split() == list(DEPREL_LABELS)


def test_words_are_parsed_as_the_keras_model_parses_them(parser_export):
    from electra_tf.finetuning.dependency_parsing.data import DEPREL_LABELS
    from electra_tf.tokenization import WordPieceTokenizer

    tokenizer = WordPieceTokenizer(os.path.join(parser_export["pretrained"], "vocab.txt"))
    heads, label_ids, features = _keras_parses(parser_export["model"], tokenizer, SENTENCES)
    loaded = parser_export["loaded"]
    width = max(len(s) for s in SENTENCES)
    words = [s + [""] * (width + 1 - len(s)) for s in SENTENCES]  # and a padding column
    served = _served(loaded, "serving_default", words=tf.constant(words))
    assert served["heads"].shape == (4, width) and list(served["num_words"]) == [4, 1, 0, 12]
    for row, sentence in enumerate(SENTENCES):
        n = len(sentence)
        assert served["heads"][row, :n].tolist() == heads[row]
        assert served["label_ids"][row, :n].tolist() == label_ids[row]
        names = [DEPREL_LABELS[i].encode() if i >= 0 else b"_" for i in label_ids[row]]
        assert served["labels"][row, :n].tolist() == names
        assert served["heads"][row, n:].tolist() == [-1] * (width - n)
        assert served["labels"][row, n:].tolist() == [b""] * (width - n)
    # The long sentence: 8 words seen, the last 4 not (head -1, label "_", no probabilities).
    assert features.positions[3] == list(range(1, 9))
    assert served["heads"][3, 8:].tolist() == [-1] * 4
    assert not served["head_probabilities"][3, 8:].any()
    # Probabilities: over the root and the row's seen words other than the word itself.
    np.testing.assert_allclose(served["head_probabilities"][0].sum(-1), [1, 1, 1, 1] + [0] * 8)
    assert served["head_probabilities"][0, 1, 2] == 0.0  # word 2 cannot head itself
    assert not served["head_probabilities"][0, :, 5:].any()  # nor can padding
    best = served["head_probabilities"].argmax(-1)
    np.testing.assert_array_equal(np.where(served["heads"] >= 0, best, -1), served["heads"])
    np.testing.assert_allclose(served["label_probabilities"][1, 0].sum(), 1.0, rtol=1e-6)


def test_token_ids_with_word_starts_parse_as_the_words_do(parser_export):
    from electra_tf.finetuning.kind.word_features import padded_word_inputs
    from electra_tf.tokenization import WordPieceTokenizer

    tokenizer = WordPieceTokenizer(os.path.join(parser_export["pretrained"], "vocab.txt"))
    sentences = SENTENCES[:2]
    _, _, features = _keras_parses(parser_export["model"], tokenizer, sentences)
    inputs = padded_word_inputs(features, tokenizer.pad_id)
    starts = np.zeros((2, 4), np.int32)
    for row, positions in enumerate(features.positions):
        starts[row, : len(positions)] = positions
    loaded = parser_export["loaded"]
    by_ids = _served(loaded, "token_ids", **inputs, word_starts=starts)
    by_words = _served(
        loaded, "serving_default", words=tf.constant([s + [""] * (4 - len(s)) for s in sentences])
    )
    assert set(by_ids) == set(by_words)
    for name, value in by_words.items():
        if value.dtype.kind == "f":
            np.testing.assert_allclose(by_ids[name], value, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(by_ids[name], value, err_msg=name)
    with pytest.raises(tf.errors.InvalidArgumentError, match="padding only after the last word"):
        _served(loaded, "serving_default", words=tf.constant([["a", "", "b"]]))


@pytest.mark.slow
def test_the_export_passes_the_check_in_a_fresh_process(parser_export):
    from electra_tf.finetuning.dependency_parsing.task import DependencyParsingTask
    from electra_tf.serving.check import check_export

    benchmark = {"requests": 2, "batch_sizes": [1, 3], "text": "eA=="}
    report = check_export(parser_export["version"], benchmark=benchmark)
    assert report.ok, "\n".join(report.lines)
    text = "\n".join(report.lines)
    assert "ok   serving_default: 7 sentences as words" in text
    assert "ok   token_ids: word_starts with padding before a word (must be rejected)" in text
    # The latency benchmark sends a row of words per example.
    assert "latency batch 3: p50" in text
    assert len(DependencyParsingTask.benchmark_inputs({})["texts"]["words"]) == 8
