"""Requests and expected answers for checking a multiple-choice export (`electra_tf.serving.check`).

The expected answers come from the fine-tuning path, independent of the
graph: `features.encode` tokenizes, cuts and packs every option in Python
and the Keras model in `assets.extra/` scores them.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from electra_tf.artifacts.check_requests import add_rejections, bytes_spec, ids_spec
from electra_tf.finetuning.kind.signatures import IDS_SIGNATURE, TEXT_SIGNATURE
from electra_tf.finetuning.multiple_choice import features

INVALID_UTF8 = b"bad \xff\xfe bytes \xc3"
# (question, context, options): scripts, accents, an empty context, a context
# and a question longer than any `max_seq_length`, fewer options than the
# widest row, and invalid UTF-8.
SAMPLES = [
    (
        "What did they watch?",
        "We went to the cinema.\nThe movie was very good.",
        ["a movie", "a play", "a game", "nothing"],
    ),
    ("Où est le CAFÉ?", "Le café est près de l'église; crème brûlée", ["ici", "là-bas", ""]),
    (
        "女的最喜欢哪种电影?",
        "男：你喜欢什么电影?\n女：我喜欢喜剧片。",
        ["恐怖片", "喜剧片", "", ""],
    ),
    ("지미 카터는 어디서 태어났나?", "", ["조지아주", "텍사스", "뉴욕", ""]),
    (
        "Which one?",
        " ".join(["a long context that goes on and on"] * 60),
        ["the first", "the last " * 3, "", ""],
    ),
    (" ".join(["a very long question"] * 60), "short", ["yes", "no", "", ""]),
    (INVALID_UTF8, INVALID_UTF8, [INVALID_UTF8, "ok", "", ""]),
]


def _bytes(text) -> bytes:
    return text if isinstance(text, bytes) else text.encode("utf-8")


def python_inputs(reference, samples: list) -> tuple[dict, np.ndarray]:
    """(the inputs fine-tuning builds, int32 [B, O, L]; bool [B, O] present options).

    Options are the non-empty ones of each row, which come first in every
    sample row (so that packing them in order puts each at its position);
    absent ones are padding.
    """
    width = max([len(options) for _, _, options in samples] + [1])
    present = np.array(
        [[k < len(o) and o[k] != "" for k in range(width)] for _, _, o in samples], bool
    ).reshape(len(samples), width)
    encoded = features.encode(
        reference.tokenizer,
        [_bytes(c) for _, c, _ in samples],
        [_bytes(q) for q, _, _ in samples],
        [[_bytes(o) for o in options if o != ""] for _, _, options in samples],
        reference.text.max_seq_length,
    )
    return features.padded_inputs(encoded, reference.tokenizer.pad_id, width), present


def expected_outputs(reference, inputs: dict, present: np.ndarray, options=None) -> dict:
    """What the signatures return for `inputs` (with `options` [B, O] bytes: the raw-text one)."""
    logits = np.asarray(reference.model(inputs, training=False), np.float32)
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True)) if logits.size else logits
    probabilities = shifted / np.maximum(shifted.sum(axis=-1, keepdims=True), 1e-30)
    probabilities = (probabilities * present).astype(np.float32)
    has_option = present.any(axis=-1)
    best = np.where(has_option, logits.argmax(axis=-1) if logits.size else 0, -1)
    outputs = {"logits": logits, "probabilities": probabilities, "choice_id": best.astype(np.int32)}
    if options is not None:
        outputs["choice"] = np.array(
            [options[i][c] if c >= 0 else b"" for i, c in enumerate(best)], dtype=object
        )
    return outputs


def _text_request(samples: list) -> dict:
    width = max(len(o) for _, _, o in samples)
    options = [[_bytes(o) for o in row] + [b""] * (width - len(row)) for _, _, row in samples]
    return {
        "question": bytes_spec([_bytes(q) for q, _, _ in samples]),
        "context": bytes_spec([_bytes(c) for _, c, _ in samples]),
        "options": bytes_spec(options),
    }, options


def build_requests(reference) -> tuple[list[dict], list[Optional[dict]], list[str]]:
    """(requests, expected outputs or None for "must fail", a description of each)."""
    requests, expected, names = [], [], []
    for samples, name in ((SAMPLES, f"{len(SAMPLES)} sample questions"), (SAMPLES[:1], "one")):
        inputs, present = python_inputs(reference, samples)
        request, options = _text_request(samples)
        requests.append({"signature": TEXT_SIGNATURE, "inputs": request})
        expected.append(expected_outputs(reference, inputs, present, options))
        names.append(f"{TEXT_SIGNATURE}: {name}")
    inputs, present = python_inputs(reference, SAMPLES)
    requests.append(
        {"signature": IDS_SIGNATURE, "inputs": {k: ids_spec(v) for k, v in inputs.items()}}
    )
    expected.append(expected_outputs(reference, inputs, present))
    names.append(f"{IDS_SIGNATURE}: the sample questions as token ids")
    # A question without options: [1, 0] options.
    requests.append(
        {
            "signature": TEXT_SIGNATURE,
            "inputs": {
                "question": bytes_spec([b"any?"]),
                "context": bytes_spec([b"none"]),
                "options": bytes_spec([[]]),
            },
        }
    )
    expected.append(
        {
            "logits": np.zeros((1, 0), np.float32),
            "probabilities": np.zeros((1, 0), np.float32),
            "choice_id": np.array([-1], np.int32),
            "choice": np.array([b""], dtype=object),
        }
    )
    names.append(f"{TEXT_SIGNATURE}: a question without options")
    good, _ = _text_request(SAMPLES[:2])
    out_of_vocabulary = dict(
        inputs, input_ids=np.full_like(inputs["input_ids"], reference.tokenizer.vocab_size)
    )
    longer_mask = dict(inputs, input_mask=np.pad(inputs["input_mask"], ((0, 0), (0, 0), (0, 1))))
    bad = [
        ("question as int32", TEXT_SIGNATURE, {**good, "question": ids_spec([1, 2])}),
        ("options of rank 1", TEXT_SIGNATURE, {**good, "options": bytes_spec([b"a", b"b"])}),
        (
            "options of another batch size",
            TEXT_SIGNATURE,
            {**good, "options": bytes_spec([[b"a", b"b"]])},
        ),
        (
            "ids of rank 2",
            IDS_SIGNATURE,
            {k: ids_spec(v[:, 0]) for k, v in inputs.items()},
        ),
        (
            "ids out of the vocabulary",
            IDS_SIGNATURE,
            {k: ids_spec(v) for k, v in out_of_vocabulary.items()},
        ),
        (
            "ids with a [B, O, L+1] mask",
            IDS_SIGNATURE,
            {k: ids_spec(v) for k, v in longer_mask.items()},
        ),
    ]
    add_rejections(requests, expected, names, bad)
    return requests, expected, names
