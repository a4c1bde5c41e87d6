"""Requests and expected answers for checking a tagger export (`check.py`).

The expected answers come from the fine-tuning path, independent of the
graph: `tagging_data.split_words` cuts the texts into words,
`word_features.encode_words` builds the inputs and first-piece positions, and
the Keras model in `assets.extra/` scores them.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from electra_tf.artifacts.check_requests import (
    add_rejections,
    bytes_spec,
    ids_spec,
    malformed_id_requests,
)
from electra_tf.finetuning.kind.signatures import IDS_SIGNATURE, TEXT_SIGNATURE
from electra_tf.finetuning.kind.word_features import encode_words, padded_word_inputs
from electra_tf.finetuning.tagging.serving import WORDS_SIGNATURE

SAMPLE_TAGGING_TEXTS = [
    "The movie was very good.",
    "ÉLAN Vital: the Café's CRÈME brûlée",
    "지미 카터는 조지아주 섬터 카운티에서 태어났다.",
    "中文句子，逐字切分。",
    "",
    "tabs\tand\nnew\u00a0lines\u3000and zero\u200bwidth",
    " ".join(["a long sentence that goes on and on"] * 40),
]
INVALID_UTF8 = b"bad \xff\xfe bytes \xc3"


def _decoded(text) -> str:
    return text.decode("utf-8", errors="ignore") if isinstance(text, bytes) else text


def python_tags(reference, sentences: list) -> tuple[dict, dict]:
    """(expected word outputs, the inputs as token ids) for sentences given as word lists."""

    config = reference.config
    names = list(config["label_names"])
    unseen = names.index("O") if "O" in names else -1
    features = encode_words(reference.tokenizer, sentences, reference.text.max_seq_length)
    inputs = padded_word_inputs(features, reference.tokenizer.pad_id)
    logits = np.asarray(reference.model(inputs, training=False), np.float32)
    width = max([len(s) for s in sentences] + [0])
    tags = np.full((len(sentences), width), b"", dtype=object)
    words = np.full((len(sentences), width), b"", dtype=object)
    ids = np.full((len(sentences), width), -1, np.int32)
    probabilities = np.zeros((len(sentences), width, len(names)), np.float32)
    for row, (sentence, positions) in enumerate(zip(sentences, features.positions)):
        words[row, : len(sentence)] = [w.encode() for w in sentence]
        ids[row, : len(sentence)] = unseen
        tags[row, : len(sentence)] = b"O"
        for column, position in enumerate(positions):
            values = logits[row, position]
            shifted = np.exp(values - values.max())
            probabilities[row, column] = shifted / shifted.sum()
            ids[row, column] = int(values.argmax())
            tags[row, column] = names[ids[row, column]].encode()
    expected = {
        "words": words,
        "tags": tags,
        "tag_ids": ids,
        "probabilities": probabilities,
        "num_words": np.array([len(s) for s in sentences], np.int32),
    }
    return expected, inputs


def python_token_outputs(reference, inputs: dict) -> dict:
    """Expected `token_ids` outputs: the Keras model's logits at every position."""
    logits = np.asarray(reference.model(inputs, training=False), np.float32)
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    ids = logits.argmax(axis=-1).astype(np.int32)
    names = np.array([n.encode() for n in reference.config["label_names"]], dtype=object)
    return {
        "logits": logits,
        "probabilities": shifted / shifted.sum(axis=-1, keepdims=True),
        "tag_ids": ids,
        "tags": names[ids],
    }


def build_requests(reference) -> tuple[list[dict], list[Optional[dict]], list[str]]:
    """(requests, expected outputs or None for "must fail", a description of each)."""
    from electra_tf.finetuning.tagging.data import split_words

    texts = [t.encode() for t in SAMPLE_TAGGING_TEXTS] + [INVALID_UTF8]
    sentences = [split_words(_decoded(t)) for t in texts]
    expected_text, inputs = python_tags(reference, sentences)
    single, _ = python_tags(reference, sentences[:1])
    # Given words: a CoNLL-like sentence, a word that tokenizes to nothing, an empty row.
    given = [["EU", "rejects", "German", "call", "."], ["x", "\u200b", "y"], []]
    expected_words, _ = python_tags(reference, given)
    width = max(len(s) for s in given) + 1  # a padding column the signature must ignore
    words_request = {
        "words": bytes_spec([s + ["ignored"] * (width - len(s)) for s in given]),
        "num_words": ids_spec([len(s) for s in given]),
    }
    requests = [
        {"signature": TEXT_SIGNATURE, "inputs": {"text": bytes_spec(texts)}},
        {"signature": TEXT_SIGNATURE, "inputs": {"text": bytes_spec(texts[:1])}},
        {"signature": TEXT_SIGNATURE, "inputs": {"text": bytes_spec([])}},
        {"signature": WORDS_SIGNATURE, "inputs": words_request},
        {"signature": IDS_SIGNATURE, "inputs": {k: ids_spec(v) for k, v in inputs.items()}},
    ]
    names = len(reference.config["label_names"])
    empty = {
        "words": np.zeros((0, 0), object),
        "tags": np.zeros((0, 0), object),
        "tag_ids": np.zeros((0, 0), np.int32),
        "probabilities": np.zeros((0, 0, names), np.float32),
        "num_words": np.zeros((0,), np.int32),
    }
    expected = [
        expected_text,
        single,
        empty,
        expected_words,
        python_token_outputs(reference, inputs),
    ]
    descriptions = [
        f"{TEXT_SIGNATURE}: {len(texts)} sample texts",
        f"{TEXT_SIGNATURE}: one text",
        f"{TEXT_SIGNATURE}: an empty batch",
        f"{WORDS_SIGNATURE}: {len(given)} sentences as words (one empty)",
        f"{IDS_SIGNATURE}: the sample texts as token ids",
    ]
    bad = [
        ("text as int32", TEXT_SIGNATURE, {"text": ids_spec([1, 2])}),
        ("text of rank 2", TEXT_SIGNATURE, {"text": bytes_spec([[b"a", b"b"]])}),
        (
            "num_words above the words per row",
            WORDS_SIGNATURE,
            {"words": bytes_spec([["a"]]), "num_words": ids_spec([2])},
        ),
        (
            "num_words of another batch size",
            WORDS_SIGNATURE,
            {"words": bytes_spec([["a"], ["b"]]), "num_words": ids_spec([1])},
        ),
        *malformed_id_requests(inputs, reference.tokenizer.vocab_size, IDS_SIGNATURE),
    ]
    add_rejections(requests, expected, descriptions, bad)
    return requests, expected, descriptions
