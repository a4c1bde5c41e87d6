"""Requests and expected answers for checking a dependency-parser export (`check.py`).

The expected answers come from the fine-tuning path, independent of the
graph: `features.encode` builds the pieces and first-piece positions, and
the Keras model in `assets.extra/` parses them; the probabilities are its
scores' softmax in NumPy.
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
from electra_tf.finetuning.dependency_parsing.data import NO_VALUE
from electra_tf.finetuning.kind.signatures import IDS_SIGNATURE, TEXT_SIGNATURE
from electra_tf.finetuning.kind.word_features import padded_word_inputs

# Sentences as words: KLUE-DP-like Korean, English with accents, Chinese, a
# word that tokenizes to nothing, one word, and one longer than any export sees.
SAMPLE_SENTENCES = [
    ["유희열이", "홍정희의", "탈락에", "눈물을", "흘렸다."],
    ["ÉLAN", "Vital:", "the", "Café's", "CRÈME", "brûlée"],
    ["中文句子，", "逐字", "切分。"],
    ["x", "\u200b", "y"],
    ["혼자"],
    ["아이는", "예정보다", "일찍", "태어나"] * 40,
]


def _softmax(values: np.ndarray) -> np.ndarray:
    shifted = np.exp(values - values.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def expected_outputs(reference, inputs: dict, word_starts, seen, present) -> dict:
    """The signatures' outputs for words at `word_starts` [B, W], from the Keras model."""
    outputs = reference.model({**inputs, "word_starts": word_starts}, training=False)
    names = np.array([n.encode() for n in reference.config["label_names"]], dtype=object)
    heads = np.asarray(outputs["heads"], np.int32)
    label_ids = np.asarray(outputs["label_ids"], np.int32)
    visible = seen.astype(np.float32)[..., None]
    labels = np.where(present, NO_VALUE.encode(), b"").astype(object)
    labels[seen] = names[label_ids[seen]]
    return {
        "heads": np.where(seen, heads, -1).astype(np.int32),
        "labels": labels,
        "label_ids": np.where(seen, label_ids, -1).astype(np.int32),
        "head_probabilities": _softmax(np.asarray(outputs["arc_scores"], np.float32)) * visible,
        "label_probabilities": _softmax(np.asarray(outputs["label_scores"], np.float32)) * visible,
        "num_words": present.sum(axis=1).astype(np.int32),
    }


def python_parses(reference, sentences: list) -> tuple[dict, dict]:
    """(expected `serving_default` outputs, the inputs as token ids with `word_starts`)."""
    from electra_tf.finetuning.dependency_parsing import features as parsing_features

    features = parsing_features.encode(
        reference.tokenizer, sentences, reference.text.max_seq_length
    )
    inputs = padded_word_inputs(features, reference.tokenizer.pad_id)
    width = max([len(s) for s in sentences] + [0])
    word_starts = np.zeros((len(sentences), width), np.int32)
    present = np.zeros((len(sentences), width), bool)
    for row, (sentence, positions) in enumerate(zip(sentences, features.positions)):
        word_starts[row, : len(positions)] = positions
        present[row, : len(sentence)] = True
    expected = expected_outputs(reference, inputs, word_starts, word_starts > 0, present)
    return expected, {**inputs, "word_starts": word_starts}


def build_requests(reference) -> tuple[list[dict], list[Optional[dict]], list[str]]:
    """(requests, expected outputs or None for "must fail", a description of each)."""
    sentences = SAMPLE_SENTENCES + [[]]
    expected_words, ids = python_parses(reference, sentences)
    single, _ = python_parses(reference, sentences[:1])
    empty, _ = python_parses(reference, [[]])
    width = max(len(s) for s in sentences) + 1  # a padding column the signature must ignore
    words = [s + [""] * (width - len(s)) for s in sentences]
    # Token ids: every word given is seen, so the long sentence has as many words as it shows.
    ids_inputs = {k: ids[k] for k in ("input_ids", "input_mask", "segment_ids")}
    present = ids["word_starts"] > 0
    expected_ids = expected_outputs(reference, ids_inputs, ids["word_starts"], present, present)
    requests = [
        {"signature": TEXT_SIGNATURE, "inputs": {"words": bytes_spec(words)}},
        {"signature": TEXT_SIGNATURE, "inputs": {"words": bytes_spec([sentences[0]])}},
        {"signature": TEXT_SIGNATURE, "inputs": {"words": bytes_spec([[]])}},
        {"signature": IDS_SIGNATURE, "inputs": {k: ids_spec(v) for k, v in ids.items()}},
    ]
    expected = [expected_words, single, empty, expected_ids]
    descriptions = [
        f"{TEXT_SIGNATURE}: {len(sentences)} sentences as words (one empty, one longer "
        "than the model sees)",
        f"{TEXT_SIGNATURE}: one sentence",
        f"{TEXT_SIGNATURE}: one sentence of no words",
        f"{IDS_SIGNATURE}: the sentences as token ids and word starts",
    ]
    starts = ids["word_starts"]
    beyond = dict(ids, word_starts=np.where(present, ids["input_ids"].shape[1], 0))
    gap = dict(ids, word_starts=np.concatenate([np.zeros_like(starts[:, :1]), starts], axis=1))
    bad = [
        ("words as int32", TEXT_SIGNATURE, {"words": ids_spec([[1, 2]])}),
        ("words of rank 1", TEXT_SIGNATURE, {"words": bytes_spec(["a", "b"])}),
        ("padding before a word", TEXT_SIGNATURE, {"words": bytes_spec([["a", "", "b"]])}),
        *malformed_id_requests(ids, reference.tokenizer.vocab_size, IDS_SIGNATURE),
        (
            "word_starts past the sequence",
            IDS_SIGNATURE,
            {k: ids_spec(v) for k, v in beyond.items()},
        ),
        (
            "word_starts with padding before a word",
            IDS_SIGNATURE,
            {k: ids_spec(v) for k, v in gap.items()},
        ),
        (
            "word_starts of another batch size",
            IDS_SIGNATURE,
            {k: ids_spec(v[:1] if k == "word_starts" else v) for k, v in ids.items()},
        ),
    ]
    add_rejections(requests, expected, descriptions, bad)
    return requests, expected, descriptions
