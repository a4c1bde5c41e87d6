"""Check an export before deploying it (`python -m electra_tf.commands.check_export`).

1. Asks the export's kind (`serving_config.json`'s `kind`: a fine-tuning
   task kind, or the discriminator) for sample requests (English,
   accented, Korean and Chinese text, an empty string, text longer than
   `max_seq_length`, invalid UTF-8, a batch of no text at all, malformed
   requests) and the answers expected from the in-process model: the
   Keras model in `assets.extra/` fed by the Python path of fine-tuning
   (each kind's `check` module: classification's `features.encode`,
   question answering's windows and decoding, tagging's word splitting and
   first-piece positions), with the text path the export records. The
   loaded model runs the reference kernels (a saved model carries no
   kernel set), as the export was traced.
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
4. With a labelled file (`--eval_file`), its token-id requests go with the
   others and both models' scores on it are reported
   (`electra_tf.serving.file_scores`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from typing import Optional

import numpy as np

from electra_tf.artifacts.check_requests import decode_output
from electra_tf.artifacts.serving_dir import VersionDir, read_serving_config
from electra_tf.errors import RunError
from electra_tf.finetuning.kind.file_scoring import EvalFile
from electra_tf.finetuning.kind.signatures import IDS_SIGNATURE, TEXT_SIGNATURE
from electra_tf.finetuning.kinds import TASK_KINDS, kind_named
from electra_tf.finiteness import nonfinite_weights
from electra_tf.serving.discriminator import DiscriminatorExport
from electra_tf.serving.file_scores import export_name, score_responses, scored_file
from electra_tf.tokenization import TextPath

STANDALONE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "standalone.py")
DEFAULT_TOLERANCE = 1e-5
# Seconds the fresh process may take for the check's own requests.
FRESH_PROCESS_TIMEOUT = 600.0
ULPS = 4


class CheckError(ValueError):
    """The export cannot be checked; the message names the path."""


# Every kind an export can be of: the fine-tuning task kinds and the discriminator.
SERVED_KINDS = {kind.KIND: kind for kind in (*TASK_KINDS, DiscriminatorExport)}


def served_kind(name) -> Optional[type]:
    """The kind of an export whose serving_config.json says `name` (former names too)."""
    if name == DiscriminatorExport.KIND:
        return DiscriminatorExport
    try:
        return kind_named(str(name))
    except RunError:
        return None


@dataclasses.dataclass
class Reference:
    """The in-process model of an export, its kind, text path and tokenizer.

    Attributes:
        kind: the export's kind (a `TaskKind` class, or `DiscriminatorExport`).
        config: its serving_config.json.
        text: its text path, as serving_config.json records it.
        model: the Keras model in `assets.extra/`.
        tokenizer: the tokenizer of the text path over the export's vocabulary.
    """

    kind: type
    config: dict
    text: TextPath
    model: object
    tokenizer: object

    @classmethod
    def load(cls, version_dir: str, model_file: str = "saved_model.pb") -> "Reference":
        """The reference of the version directory holding `model_file` (its format's)."""
        version = VersionDir(version_dir)
        if not os.path.isfile(os.path.join(version_dir, model_file)):
            raise CheckError(
                f"{version_dir}: no {model_file}; pass a version directory "
                "(<export_base>/<model_name>/<version>)."
            )
        config = read_serving_config(version_dir)
        kind = served_kind(config.get("kind"))
        if kind is None:
            raise CheckError(
                f"{version.serving_config_file}: unknown kind {config.get('kind')!r}; this "
                f"version checks {', '.join(SERVED_KINDS)}."
            )
        text = TextPath.from_dict(config)
        try:
            model = kind.reference_model(version)
        except RunError as error:
            raise CheckError(str(error)) from None
        return cls(kind, config, text, model, text.tokenizer(version.vocab_file))


def build_requests(reference: Reference) -> tuple[list[dict], list[Optional[dict]], list[str]]:
    """(requests, expected outputs or None for "must fail", a description of each)."""
    return reference.kind.check_requests(reference)


def run_fresh_process(
    version_dir: str,
    requests: list[dict],
    benchmark: Optional[dict] = None,
    timeout: Optional[float] = FRESH_PROCESS_TIMEOUT,
    script: str = STANDALONE,
    arguments: tuple = (),
) -> dict:
    """Runs `script` (default `standalone.py`) in `python -I` from an empty directory.

    The script is called as `script *arguments version_dir requests.json result.json`;
    `timeout` None: no limit.

    Returns:
        Its result.json.
    """
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
                script,
                *arguments,
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


def allowance_text(tolerance: float, relative: float = 0.0) -> str:
    """The bound `compare` applies, in words: `1e-05 + 4 float32 ulps of the value`."""
    share = f" + {relative:g} of its row's largest value" if relative else ""
    return f"{tolerance:g}{share} + {ULPS} float32 ulps of the value"


def compare(
    expected: dict, outputs: dict, tolerance: float, relative: float = 0.0
) -> tuple[list[str], float]:
    """(problems, largest float difference) between expected and served outputs.

    A float output may differ from its expected value by `tolerance` +
    `relative` x the largest |value| of its row (the last axis; a 1-D output's
    own value) + `ULPS` float32 ulps of the value.
    """
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
            magnitude = np.abs(want).astype(np.float32)
            # Rounding inside the products (bfloat16) scales with the activations that feed
            # an output, not with the output itself: a logit near 0 beside one of -5 gets
            # the same error. The relative share is of the largest value in the row.
            scale = (
                np.max(magnitude, axis=-1, keepdims=True)
                if want.ndim >= 2 and want.shape[-1]
                else magnitude
            )
            allowed = tolerance + relative * scale + ULPS * np.spacing(magnitude)
            if not np.all(error <= allowed):
                worst = float(np.max(error - allowed))
                problems.append(
                    f"{name}: max |difference| {difference:.3g} exceeds "
                    f"{allowance_text(tolerance, relative)} by {worst:.3g}"
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
    version_dir: str,
    tolerance: float = DEFAULT_TOLERANCE,
    benchmark: Optional[dict] = None,
    eval_file: Optional[EvalFile] = None,
) -> CheckReport:
    """Loads `version_dir` in a fresh process and compares it with the in-process model.

    Weights that are not all finite fail the check at once: a diverged model
    answers NaN probabilities with a confident-looking label. With
    `eval_file`, the token-id signature and the Keras model are also scored
    on it (the report's `result["evaluation"]`).
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
    if benchmark:
        benchmark = reference.kind.benchmark_inputs(benchmark)
    scored = scored_file(reference, eval_file)
    result = run_fresh_process(
        version_dir,
        requests + (scored.requests if scored else []),
        benchmark,
        timeout=None if scored else FRESH_PROCESS_TIMEOUT,
    )
    file_responses = result["responses"][len(requests) :]
    result["responses"] = result["responses"][: len(requests)]
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
    for name, request, want, response in zip(names, requests, expected, result["responses"]):
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
        # A request may carry its own allowance (bfloat16 signatures: bfloat16's rounding).
        allowance = max(tolerance, request.get("tolerance", 0.0))
        relative = request.get("relative_tolerance", 0.0)
        problems, largest = compare(want, response["outputs"], allowance, relative)
        if problems:
            ok = False
            lines.append(f"FAIL {name}: " + "; ".join(problems))
        else:
            lines.append(
                f"ok   {name}: max |difference| {largest:.2g} (allowed "
                f"{allowance_text(allowance, relative)})"
            )
    if "latency" in result:
        lines.append(f"first call {result['first_call_seconds'] * 1000:.0f} ms")
        for batch, timing in result["latency"].items():
            lines.append(
                f"latency batch {batch}: p50 {timing['p50_ms']:.2f} ms, p99 "
                f"{timing['p99_ms']:.2f} ms over {timing['requests']} requests"
            )
    if scored:
        scored_ok, scored_lines, result["evaluation"] = score_responses(
            scored, file_responses, export_name(reference.config)
        )
        ok, lines = ok and scored_ok, lines + scored_lines
    return CheckReport(ok, lines, result)
