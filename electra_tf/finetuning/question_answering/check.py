"""Requests and expected answers for checking a question-answering export (`check.py`).

The expected answers come from the fine-tuning path, independent of the
graph: `squad_features.convert_examples` builds the windows, the Keras
model in `assets.extra/` scores them and `squad_decoding.decode` picks the
answer. Only the first window of each context is kept, as the signature
searches only that one; every sample but the long one fits in it.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from electra_tf.artifacts.check_requests import (
    add_rejections,
    bytes_spec,
    ids_spec,
    malformed_id_requests,
)
from electra_tf.finetuning.kind.signatures import IDS_SIGNATURE, TEXT_SIGNATURE

SAMPLE_QA = [
    ("What was the movie?", "The movie was very good."),
    ("What is the café's dessert?", "ÉLAN Vital: the Café's CRÈME brûlée"),
    ("무엇을 토큰화합니까?", "한국어 문장도 토큰화합니다."),
    ("어디?", "中文句子，逐字切分。"),
    ("", "An empty question still has a context."),
    ("Is there a context?", ""),
    ("How long is it?", " ".join(["a long sentence that goes on and on"] * 40)),
]
# Dropped by the tokenizer: the question reads "bad bytes".
INVALID_QUESTION = b"bad \xff\xfe bytes \xc3"
INVALID_QUESTION_CONTEXT = "Bytes that are bad are dropped."

BENCHMARK_QUESTION = "Which NFL team represented the AFC at Super Bowl 50?"
BENCHMARK_CONTEXT = (
    "Super Bowl 50 was an American football game to determine the champion of the National "
    "Football League (NFL) for the 2015 season. The American Football Conference (AFC) "
    "champion Denver Broncos defeated the National Football Conference (NFC) champion "
    "Carolina Panthers 24-10 to earn their third Super Bowl title. The game was played on "
    "February 7, 2016, at Levi's Stadium in the San Francisco Bay Area at Santa Clara, "
    'California. As this was the 50th Super Bowl, the league emphasized the "golden '
    'anniversary" with various gold-themed initiatives, as well as temporarily suspending '
    "the tradition of naming each Super Bowl game with Roman numerals (under which the game "
    'would have been known as "Super Bowl L"), so that the logo could prominently feature '
    "the Arabic numerals 50."
)


@dataclasses.dataclass
class _Example:
    """The fields of `squad_data.QAExample` that prediction reads."""

    qas_id: str
    question: str
    context: str
    answers: tuple = ()
    is_impossible: bool = False


def first_windows(features):
    """Keeps each example's first window, every context token scored in it."""
    from electra_tf.finetuning.question_answering.features import QAFeatures

    rows = np.array(
        [
            i
            for i, e in enumerate(features.example_index)
            if i == 0 or features.example_index[i - 1] != e
        ]
    )
    fields = {
        f.name: getattr(features, f.name)[rows]
        for f in dataclasses.fields(QAFeatures)
        if f.name != "skipped"
    }
    fields["max_context"] = fields["token_spans"][..., 0] >= 0
    return QAFeatures(**fields)


def python_answers(reference, pairs: list) -> tuple[dict, dict]:
    """(expected `serving_default` outputs, the first windows as token ids) for the pairs."""
    from electra_tf.finetuning.question_answering import decoding as squad_decoding
    from electra_tf.finetuning.question_answering import features as squad_features

    config = reference.config
    examples = [_Example(str(i), q, c) for i, (q, c) in enumerate(pairs)]
    features = first_windows(
        squad_features.convert_examples(
            examples,
            reference.tokenizer,
            reference.text.max_seq_length,
            config.get("doc_stride") or 128,
            config["max_query_length"],
        )
    )
    inputs = features.inputs()
    outputs = {k: np.asarray(v) for k, v in reference.model(inputs, training=False).items()}
    _, null_odds, nbest = squad_decoding.decode(
        examples, features, outputs, max_answer_length=config["max_answer_length"]
    )
    expected = {
        k: [] for k in ("answer_text", "start_char", "end_char", "start_byte", "end_byte", "score")
    }
    for example in examples:
        best = nbest[example.qas_id][0] if nbest[example.qas_id] else None
        context = example.context
        start, end = (best["start"], best["end"]) if best else (-1, -1)
        expected["answer_text"].append(context[start:end].encode() if best else b"")
        expected["start_char"].append(start)
        expected["end_char"].append(end)
        expected["start_byte"].append(len(context[:start].encode()) if best else -1)
        expected["end_byte"].append(len(context[:end].encode()) if best else -1)
        expected["score"].append(best["score"] if best else -1e9)
    result = {
        "answer_text": np.array(expected["answer_text"], dtype=object),
        "score": np.array(expected["score"], np.float32),
    }
    result.update(
        {
            k: np.array(expected[k], np.int32)
            for k in ("start_char", "end_char", "start_byte", "end_byte")
        }
    )
    if config["version_2"]:
        no_answer = np.array([null_odds[e.qas_id] for e in examples], np.float32)
        result["no_answer_score"] = no_answer
        result["has_answer"] = no_answer <= config["null_score_threshold"]
    return result, inputs


def python_scores(reference, inputs: dict) -> dict:
    """Expected `token_ids` outputs: the Keras model's prediction mode and its logits.

    The logits are the head's given the starts the model's own call chose
    (end logits per start for the `electra` head, one row for `transformers`).
    """
    from electra_tf.finetuning.question_answering.model import answer_mask

    model = reference.model
    outputs = {k: np.asarray(v) for k, v in model(inputs, training=False).items()}
    sequence = model.encoder(inputs, training=False)
    mask = answer_mask(inputs["input_mask"], inputs["segment_ids"])
    logits = model.task_head.logits(sequence, mask, outputs["start_top_index"])
    outputs.update({k: np.asarray(v) for k, v in logits.items()})
    if not reference.config["version_2"]:
        del outputs["answerable_logit"]
    return outputs


def build_requests(reference) -> tuple[list[dict], list[Optional[dict]], list[str]]:
    """(requests, expected outputs or None for "must fail", a description of each)."""
    pairs = list(SAMPLE_QA)
    expected_text, inputs = python_answers(reference, pairs)
    single, _ = python_answers(reference, pairs[:1])
    clean, _ = python_answers(reference, [("bad  bytes ", INVALID_QUESTION_CONTEXT)])

    def text_inputs(questions, contexts):
        return {"question": bytes_spec(questions), "context": bytes_spec(contexts)}

    requests = [
        {
            "signature": TEXT_SIGNATURE,
            "inputs": text_inputs([q for q, _ in pairs], [c for _, c in pairs]),
        },
        {"signature": TEXT_SIGNATURE, "inputs": text_inputs([pairs[0][0]], [pairs[0][1]])},
        {
            "signature": TEXT_SIGNATURE,
            "inputs": text_inputs([INVALID_QUESTION], [INVALID_QUESTION_CONTEXT]),
        },
        {"signature": IDS_SIGNATURE, "inputs": {k: ids_spec(v) for k, v in inputs.items()}},
    ]
    expected = [expected_text, single, clean, python_scores(reference, inputs)]
    names = [
        f"{TEXT_SIGNATURE}: {len(pairs)} sample question/context pairs",
        f"{TEXT_SIGNATURE}: one pair",
        f"{TEXT_SIGNATURE}: a question with invalid UTF-8",
        f"{IDS_SIGNATURE}: the same pairs as token ids (first windows)",
    ]
    bad = [
        (
            "question as int32",
            TEXT_SIGNATURE,
            {"question": ids_spec([1]), "context": ids_spec([2])},
        ),
        ("texts of rank 2", TEXT_SIGNATURE, text_inputs([[b"a", b"b"]], [[b"a", b"b"]])),
        ("context of another batch size", TEXT_SIGNATURE, text_inputs([b"a", b"b"], [b"a"])),
        *malformed_id_requests(inputs, reference.tokenizer.vocab_size, IDS_SIGNATURE),
    ]
    add_rejections(requests, expected, names, bad)
    return requests, expected, names
