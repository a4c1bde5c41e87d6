"""Requests and expected answers for checking a classifier export (`electra_tf.serving.check`).

The expected answers come from the fine-tuning path, independent of the
graph: `features.encode` tokenizes and packs the texts in Python and the
Keras model in `assets.extra/` scores them. `sequence_requests` also serves
the pre-trained discriminator's check, whose signatures take the same
inputs. `scored_file` reads a labelled file as fine-tuning reads its dev
file, for `check_export --eval_file`.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from electra_tf.artifacts.check_requests import (
    add_rejections,
    bytes_spec,
    ids_spec,
    malformed_id_requests,
)
from electra_tf.errors import RunError
from electra_tf.finetuning.classification import data, features
from electra_tf.finetuning.kind import metrics
from electra_tf.finetuning.kind.file_scoring import EvalFile, ScoredFile
from electra_tf.finetuning.kind.signatures import BFLOAT16_SIGNATURE, IDS_SIGNATURE, TEXT_SIGNATURE

SAMPLE_TEXTS = [
    "The movie was very good.",
    "ÉLAN Vital: the Café's CRÈME brûlée",
    "한국어 문장도 토큰화합니다.",
    "中文句子，逐字切分。",
    "",
    " ".join(["a long sentence that goes on and on"] * 40),
]
SAMPLE_PAIRS = ["Was it fun?", "", "영화", "plot twist " * 30, "naïve", "x"]
INVALID_UTF8 = b"bad \xff\xfe bytes \xc3"
# What the bfloat16 signature may differ from the float32 Keras model by, in its float
# outputs: bfloat16 keeps 8 bits of each product's inputs (2^-8 relative), and the
# encoder's 12 or 24 layers add up their rounding. On CPUs without AVX512-BF16 the
# products are emulated and round more (2.5% of the row's largest logit seen for an imported
# classifier on an AVX2 CPU); a broken export differs by the logits themselves. Its labels are
# not compared: where two classes' logits are within that rounding of each other, either may win.
BFLOAT16_TOLERANCE = 1e-2
BFLOAT16_RELATIVE_TOLERANCE = 5e-2


def encode(reference, texts_a: list, texts_b: Optional[list]) -> dict:
    """Python-side tokenization and packing, padded to the longest example: int32 [B, L]."""
    encoded = features.encode(reference.tokenizer, texts_a, texts_b, reference.text.max_seq_length)
    return pad(encoded, reference.tokenizer.pad_id)


def pad(encoded: list, pad_id: int) -> dict:
    """`features.encode`'s (ids, segments) examples padded to the longest: int32 [B, L]."""
    length = max(len(ids) for ids, _ in encoded)
    ids = np.full((len(encoded), length), pad_id, np.int32)
    mask = np.zeros_like(ids)
    segments = np.zeros_like(ids)
    for row, (example_ids, example_segments) in enumerate(encoded):
        ids[row, : len(example_ids)] = example_ids
        mask[row, : len(example_ids)] = 1
        segments[row, : len(example_ids)] = example_segments
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def classifier_outputs(reference, inputs: dict, with_tokens: bool) -> dict:
    """What a classifier's signatures return for `inputs` (the same with or without text)."""
    del with_tokens
    raw = np.asarray(reference.model(inputs, training=False), np.float32)
    config = reference.config
    if config["label_names"] is None:
        return {"score": raw.reshape(-1) * config["label_scale"]}
    shifted = np.exp(raw - raw.max(axis=-1, keepdims=True))
    label_id = raw.argmax(axis=-1).astype(np.int32)
    names = np.array([n.encode() for n in config["label_names"]], dtype=object)
    return {
        "logits": raw,
        "probabilities": shifted / shifted.sum(axis=-1, keepdims=True),
        "label_id": label_id,
        "label": names[label_id],
    }


def sequence_requests(
    reference, expect: Callable[[object, dict, bool], dict], empty_batch: bool
) -> tuple[list[dict], list[Optional[dict]], list[str]]:
    """The requests of a model served on `text` (and `text_pair`) or on token ids.

    Args:
        reference: the export's in-process model, config and tokenizer.
        expect: (reference, inputs, with_tokens) -> the outputs the
            signatures should return for those inputs (`with_tokens`: the raw
            text signature, which may also return the tokens).
        empty_batch: also send a batch of no text (outputs without a length axis).

    Returns:
        (requests, expected outputs or None for "must fail", a description of each).
    """
    pair = reference.config["is_pair"]
    texts_a = [t.encode() for t in SAMPLE_TEXTS] + [INVALID_UTF8]
    texts_b = [t.encode() for t in SAMPLE_PAIRS] + [INVALID_UTF8] if pair else None
    text_inputs = {"text": bytes_spec(texts_a)}
    if pair:
        text_inputs["text_pair"] = bytes_spec(texts_b)
    encoded = encode(reference, texts_a, texts_b)
    single = {"text": bytes_spec([texts_a[0]])}
    if pair:
        single["text_pair"] = bytes_spec([texts_b[0]])
    expected_single = expect(
        reference, encode(reference, texts_a[:1], texts_b[:1] if pair else None), True
    )
    requests = [
        {"signature": TEXT_SIGNATURE, "inputs": text_inputs},
        {"signature": TEXT_SIGNATURE, "inputs": single},
        {"signature": IDS_SIGNATURE, "inputs": {k: ids_spec(v) for k, v in encoded.items()}},
    ]
    expected = [
        expect(reference, encoded, True),
        expected_single,
        expect(reference, encoded, False),
    ]
    names = [
        f"{TEXT_SIGNATURE}: {len(texts_a)} sample texts",
        f"{TEXT_SIGNATURE}: one text",
        f"{IDS_SIGNATURE}: the same examples as token ids",
    ]
    if empty_batch:
        requests.append(
            {"signature": TEXT_SIGNATURE, "inputs": {k: bytes_spec([]) for k in text_inputs}}
        )
        expected.append({k: np.asarray(v)[:0] for k, v in expected_single.items()})
        names.append(f"{TEXT_SIGNATURE}: no text (empty outputs)")
    # Malformed requests: each must come back as an error, not a crash.
    wrong_text_dtype = {k: ids_spec(np.zeros(2)) for k in text_inputs}
    wrong_text_rank = {k: bytes_spec([[b"a", b"b"]]) for k in text_inputs}
    bad = [
        ("text as int32", TEXT_SIGNATURE, wrong_text_dtype),
        ("text of rank 2", TEXT_SIGNATURE, wrong_text_rank),
        *malformed_id_requests(encoded, reference.tokenizer.vocab_size, IDS_SIGNATURE),
        ("ids as strings", IDS_SIGNATURE, {k: bytes_spec([[b"1"]]) for k in encoded}),
    ]
    if pair:
        bad.append(
            (
                "text_pair of another batch size",
                TEXT_SIGNATURE,
                {"text": bytes_spec([b"a", b"b"]), "text_pair": bytes_spec([b"a"])},
            )
        )
    add_rejections(requests, expected, names, bad)
    return requests, expected, names


def build_requests(reference) -> tuple[list[dict], list[Optional[dict]], list[str]]:
    """The classifier's requests: raw text, one text, token ids, no text, malformed ones;
    the sample texts and one text through the bfloat16 signature, if the export has it."""
    requests, expected, names = sequence_requests(reference, classifier_outputs, empty_batch=True)
    if BFLOAT16_SIGNATURE in reference.config.get("signatures", ()):
        for position in (0, 1):  # the sample texts, one text
            floats = {
                name: value
                for name, value in expected[position].items()
                if np.asarray(value).dtype.kind == "f"
            }
            requests.append(
                {
                    **requests[position],
                    "signature": BFLOAT16_SIGNATURE,
                    "tolerance": BFLOAT16_TOLERANCE,
                    "relative_tolerance": BFLOAT16_RELATIVE_TOLERANCE,
                }
            )
            expected.append(floats)
            names.append(names[position].replace(TEXT_SIGNATURE, BFLOAT16_SIGNATURE, 1))
    return requests, expected, names


def scored_file(reference, eval_file: EvalFile) -> ScoredFile:
    """A classifier's labelled file as token-id requests, scored by the task's metrics.

    The file is read with the export's labels (serving_config.json's task),
    as `finetune.py` reads `--dev_file`, and tokenized like the check's
    other requests (`encode`, the export's text path).

    Raises:
        RunError: a regression export, or `--text_pair_column` given for a
            single-text classifier or missing for a pair classifier.
        TaskDataError: the file does not fit its layout.
    """
    task = data.Task.from_dict(reference.config["task"])
    if task.task_type == data.REGRESSION:
        raise RunError(
            f"--eval_file: {task.name} is a regression export; --eval_file scores classifiers."
        )
    if bool(eval_file.files.text_pair_column) != task.is_pair:
        takes, fix = ("text pairs", "give") if task.is_pair else ("single texts", "drop")
        raise RunError(f"--eval_file: {task.name} takes {takes}: {fix} --text_pair_column.")
    split = data.read_labelled_file(eval_file.path, "eval", task, eval_file.files)
    if not len(split):
        raise data.TaskDataError(f"{eval_file.path}: no labelled rows under the header.")
    encoded = features.encode(
        reference.tokenizer, split.texts_a, split.texts_b, reference.text.max_seq_length
    )
    # Batches of similar lengths pad less; the predictions are put back in file order.
    order = np.argsort([len(ids) for ids, _ in encoded], kind="stable")
    requests, expected = [], []
    for start in range(0, len(split), eval_file.batch_size):
        rows = order[start : start + eval_file.batch_size]
        inputs = pad([encoded[i] for i in rows], reference.tokenizer.pad_id)
        requests.append(
            {"signature": IDS_SIGNATURE, "inputs": {k: ids_spec(v) for k, v in inputs.items()}}
        )
        expected.append(classifier_outputs(reference, inputs, False))

    def predictions(outputs: list) -> tuple:
        """(label ids [N], probabilities [N, C]) in file order."""
        ids = np.concatenate([np.asarray(o["label_id"]).reshape(-1) for o in outputs])
        probabilities = np.concatenate([np.asarray(o["probabilities"]) for o in outputs])
        if len(ids) != len(order):  # (the check reports the count)
            return ids, probabilities
        ids_in_order = np.empty(len(order), np.int64)
        ids_in_order[order] = ids
        probabilities_in_order = np.empty(probabilities.shape, np.float64)
        probabilities_in_order[order] = probabilities
        return ids_in_order, probabilities_in_order

    def scores(predicted: np.ndarray, probabilities) -> dict:
        return metrics.compute(task.metrics, split.labels, predicted, probabilities)

    return ScoredFile(
        eval_file.path,
        len(split),
        requests,
        expected,
        predictions,
        scores,
        task.primary_metric,
    )
