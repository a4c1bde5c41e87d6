"""Check an export before deploying it (`python -m electra_tf.commands.check_export`).

1. Builds sample requests (English, accented, Korean and Chinese text, an
   empty string, text longer than `max_seq_length`, invalid UTF-8, a batch
   of no text at all) and the
   answers expected from the in-process model: the Keras model in
   `assets.extra/` fed by the Python tokenization path of
   fine-tuning (`finetuning.features.encode`). Question-answering exports
   are compared with the fine-tuning path instead: windows from
   `squad_features.convert_examples`, answers from `squad_decoding.decode`
   (see `check_qa`). Tagger exports are compared with
   `tagging_data.split_words` + `tagging_features.encode` + the Keras
   model on raw text, given words, an empty batch and token ids (see
   `check_tagging`). The loaded model runs the reference kernels (a saved
   model carries no kernel set), as the export was traced.
2. Runs `standalone.py` in a fresh interpreter that imports only TensorFlow
   and TensorFlow Text (and asserts that this project is not importable),
   which loads the SavedModel as TF Serving does, lists its signatures like
   `saved_model_cli show --all`, audits its TF Text ops and answers the
   requests.
3. Compares: float outputs within `--tolerance` (absolute, default 1e-5,
   plus 4 float32 ulps of the expected value, which only matters for
   values far from 0 such as the masked -1000 of QA logits), ids, labels,
   tokens and answer texts exactly; malformed requests (wrong dtype or
   rank, mismatched pair sizes, out-of-range ids) must fail with an error
   each.

"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from typing import Optional

import keras
import numpy as np

from electra_tf.artifacts.check_requests import bytes_spec, decode_output, ids_spec
from electra_tf.artifacts.finetuning_dir import holds_saved_model
from electra_tf.artifacts.serving_dir import VersionDir, read_serving_config
from electra_tf.finetuning.classification import features
from electra_tf.finetuning.classification.serving import IDS_SIGNATURE, TEXT_SIGNATURE
from electra_tf.finetuning.saving import load_finetuned
from electra_tf.finiteness import nonfinite_weights

# Registers the discriminator's classes, so that load_model finds them.
from electra_tf.modeling import electra as _electra  # noqa: F401
from electra_tf.serving.exporter import DISCRIMINATOR, QUESTION_ANSWERING, TAGGER
from electra_tf.tokenization import WordPieceTokenizer

STANDALONE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "standalone.py")
DEFAULT_TOLERANCE = 1e-5
ULPS = 4

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


class CheckError(ValueError):
    """The export cannot be checked; the message names the path."""


@dataclasses.dataclass
class Reference:
    """The in-process model of an export and what it answers."""

    config: dict
    model: object
    tokenizer: object

    @classmethod
    def load(cls, version_dir: str) -> "Reference":
        version = VersionDir(version_dir)
        if not os.path.isfile(version.saved_model_file):
            raise CheckError(
                f"{version_dir}: no saved_model.pb; pass a version directory "
                "(<export_base>/<model_name>/<version>)."
            )
        config = read_serving_config(version_dir)
        tokenizer = WordPieceTokenizer.from_settings(version.vocab_file, config)
        if config["kind"] == DISCRIMINATOR:
            if not os.path.isfile(version.keras_file):
                raise CheckError(f"{version_dir}: no model.keras in assets.extra/ to compare with.")
            return cls(config, keras.saving.load_model(version.keras_file), tokenizer)
        if not holds_saved_model(version.extra):
            raise CheckError(
                f"{version_dir}: no fine-tuned model in assets.extra/ to compare with."
            )
        return cls(config, load_finetuned(version.extra)[0], tokenizer)

    def encode(self, texts_a: list, texts_b: Optional[list]) -> dict:
        """Python-side tokenization and packing, padded to the longest example: int32 [B, L]."""
        encoded = features.encode(self.tokenizer, texts_a, texts_b, self.config["max_seq_length"])
        length = max(len(ids) for ids, _ in encoded)
        ids = np.full((len(encoded), length), self.tokenizer.pad_id, np.int32)
        mask = np.zeros_like(ids)
        segments = np.zeros_like(ids)
        for row, (example_ids, example_segments) in enumerate(encoded):
            ids[row, : len(example_ids)] = example_ids
            mask[row, : len(example_ids)] = 1
            segments[row, : len(example_ids)] = example_segments
        return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}

    def predict(self, inputs: dict, with_tokens: bool) -> dict:
        """What the signatures should return for these inputs."""
        outputs = self.model({k: np.asarray(v) for k, v in inputs.items()}, training=False)
        if self.config["kind"] == DISCRIMINATOR:
            logits = np.asarray(outputs["logits"], np.float32)
            mask = inputs["input_mask"]
            result = {"logits": logits, "replaced_probability": (1 / (1 + np.exp(-logits))) * mask}
            if self.config.get("objective") == "electric":
                ids = inputs["input_ids"]
                content = mask * (ids != self.tokenizer.cls_id) * (ids != self.tokenizer.sep_id)
                result["pseudo_log_likelihood"] = -(logits * content).sum(axis=-1)
            if with_tokens:
                vocab = np.array([t.encode() for t in self.tokenizer.vocab], dtype=object)
                result["tokens"] = np.where(mask > 0, vocab[inputs["input_ids"]], b"")
                result["input_ids"] = inputs["input_ids"]
                result["input_mask"] = mask
            return result
        raw = np.asarray(outputs, np.float32)
        if self.config["label_names"] is None:
            return {"score": raw.reshape(-1) * self.config["label_scale"]}
        shifted = np.exp(raw - raw.max(axis=-1, keepdims=True))
        label_id = raw.argmax(axis=-1).astype(np.int32)
        names = np.array([n.encode() for n in self.config["label_names"]], dtype=object)
        return {
            "logits": raw,
            "probabilities": shifted / shifted.sum(axis=-1, keepdims=True),
            "label_id": label_id,
            "label": names[label_id],
        }


def build_requests(reference: Reference) -> tuple[list[dict], list[Optional[dict]], list[str]]:
    """(requests, expected outputs or None for "must fail", a description of each)."""
    if reference.config["kind"] == QUESTION_ANSWERING:
        from electra_tf.finetuning.question_answering import check as check_qa

        return check_qa.build_requests(reference)
    if reference.config["kind"] == TAGGER:
        from electra_tf.finetuning.tagging import check as check_tagging

        return check_tagging.build_requests(reference)
    pair = reference.config["is_pair"]
    texts_a = [t.encode() for t in SAMPLE_TEXTS] + [INVALID_UTF8]
    texts_b = [t.encode() for t in SAMPLE_PAIRS] + [INVALID_UTF8] if pair else None
    text_inputs = {"text": bytes_spec(texts_a)}
    if pair:
        text_inputs["text_pair"] = bytes_spec(texts_b)
    encoded = reference.encode(texts_a, texts_b)
    expected_text = reference.predict(encoded, with_tokens=True)
    expected_ids = reference.predict(encoded, with_tokens=False)
    single = {"text": bytes_spec([texts_a[0]])}
    if pair:
        single["text_pair"] = bytes_spec([texts_b[0]])
    expected_single = reference.predict(
        reference.encode(texts_a[:1], texts_b[:1] if pair else None), with_tokens=True
    )
    requests = [
        {"signature": TEXT_SIGNATURE, "inputs": text_inputs},
        {"signature": TEXT_SIGNATURE, "inputs": single},
        {"signature": IDS_SIGNATURE, "inputs": {k: ids_spec(v) for k, v in encoded.items()}},
    ]
    expected = [expected_text, expected_single, expected_ids]
    names = [
        f"{TEXT_SIGNATURE}: {len(texts_a)} sample texts",
        f"{TEXT_SIGNATURE}: one text",
        f"{IDS_SIGNATURE}: the same examples as token ids",
    ]
    if reference.config["kind"] != DISCRIMINATOR:  # whose outputs also have a length axis
        requests.append(
            {"signature": TEXT_SIGNATURE, "inputs": {k: bytes_spec([]) for k in text_inputs}}
        )
        expected.append({k: np.asarray(v)[:0] for k, v in expected_single.items()})
        names.append(f"{TEXT_SIGNATURE}: no text (empty outputs)")
    # Malformed requests: each must come back as an error, not a crash.
    bad_ids = dict(
        encoded, input_ids=np.full_like(encoded["input_ids"], reference.tokenizer.vocab_size)
    )
    wrong_text_dtype = {k: ids_spec(np.zeros(2)) for k in text_inputs}
    wrong_text_rank = {k: bytes_spec([[b"a", b"b"]]) for k in text_inputs}
    bad = [
        ("text as int32", TEXT_SIGNATURE, wrong_text_dtype),
        ("text of rank 2", TEXT_SIGNATURE, wrong_text_rank),
        ("ids out of the vocabulary", IDS_SIGNATURE, {k: ids_spec(v) for k, v in bad_ids.items()}),
        (
            "ids with a [B, L+1] mask",
            IDS_SIGNATURE,
            {
                "input_ids": ids_spec(encoded["input_ids"]),
                "input_mask": ids_spec(np.pad(encoded["input_mask"], ((0, 0), (0, 1)))),
                "segment_ids": ids_spec(encoded["segment_ids"]),
            },
        ),
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
    for name, signature, inputs in bad:
        requests.append({"signature": signature, "inputs": inputs, "expect_error": True})
        expected.append(None)
        names.append(f"{signature}: {name} (must be rejected)")
    return requests, expected, names


def run_fresh_process(
    version_dir: str, requests: list[dict], benchmark: Optional[dict] = None, timeout: float = 600
) -> dict:
    """Runs `standalone.py` in `python -I` from an empty directory; returns its result."""
    with tempfile.TemporaryDirectory(prefix="serving-check-") as scratch:
        requests_path = os.path.join(scratch, "requests.json")
        result_path = os.path.join(scratch, "result.json")
        with open(requests_path, "w", encoding="utf-8") as f:
            json.dump({"requests": requests, "benchmark": benchmark}, f)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        process = subprocess.run(
            [
                sys.executable,
                "-I",
                STANDALONE,
                os.path.abspath(version_dir),
                requests_path,
                result_path,
            ],
            cwd=scratch,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if process.returncode != 0 or not os.path.exists(result_path):
            raise CheckError(
                f"the fresh process failed to load {version_dir} "
                f"(exit {process.returncode}):\n{process.stderr[-3000:]}"
            )
        with open(result_path, encoding="utf-8") as f:
            return json.load(f)


def _short_error(message: str) -> str:
    """The informative line of a TensorFlow error (not its "Graph execution error:" banner)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("assertion failed", "Shape of tensor")) or "expected to be" in line:
            return line[:200]
    return (lines[0] if lines else message)[:200]


def compare(expected: dict, outputs: dict, tolerance: float) -> tuple[list[str], float]:
    """(problems, largest float difference) between expected and served outputs."""
    problems, largest = [], 0.0
    missing = sorted(set(expected) - set(outputs))
    if missing:
        problems.append(f"missing outputs {missing}")
    for name in sorted(set(expected) & set(outputs)):
        want = np.asarray(expected[name])
        got = decode_output(outputs[name])
        if want.shape != got.shape:
            problems.append(f"{name}: shape {got.shape}, expected {want.shape}")
        elif want.dtype.kind == "f":
            error = np.abs(want - got)
            difference = float(np.max(error)) if want.size else 0.0
            largest = max(largest, difference)
            # Large values (the -1000 added at masked positions of QA logits) also get a
            # few float32 ulps of their own magnitude.
            allowed = tolerance + ULPS * np.spacing(np.abs(want).astype(np.float32))
            if not np.all(error <= allowed):
                worst = float(np.max(error - allowed))
                problems.append(
                    f"{name}: max |difference| {difference:.3g} exceeds {tolerance:g} "
                    f"(+ {ULPS} ulps of the value) by {worst:.3g}"
                )
        elif not np.array_equal(want.astype(got.dtype) if want.dtype.kind != "O" else want, got):
            problems.append(f"{name}: values differ")
    return problems, largest


@dataclasses.dataclass
class CheckReport:
    """Outcome of `check_export`."""

    ok: bool
    lines: list
    result: dict


def check_export(
    version_dir: str, tolerance: float = DEFAULT_TOLERANCE, benchmark: Optional[dict] = None
) -> CheckReport:
    """Loads `version_dir` in a fresh process and compares it with the in-process model.

    Weights that are not all finite fail the check at once: a diverged model
    answers NaN probabilities with a confident-looking label.
    """
    reference = Reference.load(version_dir)
    bad = nonfinite_weights(reference.model.weights)
    if bad:
        return CheckReport(
            False,
            [
                f"FAIL {len(bad)} of {len(reference.model.weights)} weight "
                f"tensors of {version_dir} hold NaN or infinite values (e.g. "
                f"{bad[0]}): the model diverged; export an earlier "
                "checkpoint of its run"
            ],
            {},
        )
    requests, expected, names = build_requests(reference)
    if benchmark and reference.config["kind"] == QUESTION_ANSWERING and "texts" not in benchmark:
        from electra_tf.finetuning.question_answering import check as check_qa

        benchmark = dict(
            benchmark,
            texts={
                "question": base64.b64encode(check_qa.BENCHMARK_QUESTION.encode()).decode(),
                "context": base64.b64encode(check_qa.BENCHMARK_CONTEXT.encode()).decode(),
            },
        )
    result = run_fresh_process(version_dir, requests, benchmark)
    lines = [result["listing"], ""]
    ok = True
    if result["project_importable"]:
        ok = False
        lines.append("FAIL the fresh process could import electra_tf; the check is not isolated")
    lines.append(f"TF Text ops used: {', '.join(result['custom_ops']) or 'none'}")
    if result["unsupported_ops"]:
        ok = False
        lines.append(
            f"FAIL ops outside the set TF Serving 2.12+ bundles: "
            f"{', '.join(result['unsupported_ops'])}"
        )
    lines.append(
        f"import TensorFlow + TF Text {result['import_seconds']:.2f} s, load "
        f"{result['load_seconds']:.2f} s"
    )
    wanted = {TEXT_SIGNATURE, IDS_SIGNATURE}
    if not wanted <= set(result["signatures"]):
        ok = False
        lines.append(f"FAIL signatures {sorted(wanted - set(result['signatures']))} missing")
    for name, want, response in zip(names, expected, result["responses"]):
        if want is None:
            if "error" in response:
                lines.append(f"ok   {name}: {_short_error(response['error'])}")
            else:
                ok = False
                lines.append(f"FAIL {name}: was accepted")
            continue
        if "error" in response:
            ok = False
            lines.append(f"FAIL {name}: {response['error']}")
            continue
        problems, largest = compare(want, response["outputs"], tolerance)
        if problems:
            ok = False
            lines.append(f"FAIL {name}: " + "; ".join(problems))
        else:
            lines.append(f"ok   {name}: max |difference| {largest:.2g} (tolerance {tolerance:g})")
    if "latency" in result:
        lines.append(f"first call {result['first_call_seconds'] * 1000:.0f} ms")
        for batch, timing in result["latency"].items():
            lines.append(
                f"latency batch {batch}: p50 {timing['p50_ms']:.2f} ms, p99 "
                f"{timing['p99_ms']:.2f} ms over {timing['requests']} requests"
            )
    return CheckReport(ok, lines, result)
