"""The check of a token-id export (ONNX, LiteRT): its runtime against the float32 Keras model.

1. The export's kind gives its check requests (`TaskKind.check_requests`);
   the token-id requests with an expected answer are kept: those formats
   take token ids only, and do not validate them (out-of-range ids or
   mismatched shapes are the client's to avoid; the SavedModel's check
   sends those).
2. `runtime_standalone.py` runs them in a fresh interpreter that imports
   NumPy and the runtime only.
3. Each answer is compared with the Keras model's: within the tolerance
   (float32 exports) and, for every export, the agreement of the non-float
   outputs (labels, ids, indices) and the largest difference of each float
   output. A quantized export is not held to the tolerance: it fails only
   on missing, ill-shaped or non-finite outputs, and reports the agreement.
4. With a labelled file (`--eval_file`), its requests go with the others
   and both models' scores on it are reported (`electra_tf.serving.file_scores`).
"""

from __future__ import annotations

import os
from typing import Optional

import numpy as np

from electra_tf.artifacts.check_requests import decode_output
from electra_tf.finetuning.kind.file_scoring import EvalFile
from electra_tf.finetuning.kind.signatures import IDS_SIGNATURE
from electra_tf.finiteness import nonfinite_weights
from electra_tf.serving.check import (
    FRESH_PROCESS_TIMEOUT,
    CheckError,
    CheckReport,
    Reference,
    allowance_text,
    compare,
    run_fresh_process,
)
from electra_tf.serving.file_scores import export_name, score_responses, scored_file

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runtime_standalone.py")


def token_id_requests(reference) -> tuple[list[dict], list[dict], list[str]]:
    """The kind's token-id check requests that expect an answer: (requests, expected, names)."""
    requests, expected, names = reference.kind.check_requests(reference)
    kept = [
        (request, want, name)
        for request, want, name in zip(requests, expected, names)
        if request["signature"] == IDS_SIGNATURE and want is not None
    ]
    return [k[0] for k in kept], [k[1] for k in kept], [k[2] for k in kept]


def agreement(expected: dict, outputs: dict) -> tuple[int, int, dict]:
    """(equal elements, elements) of the non-float outputs; {float output: max |difference|}."""
    same = total = 0
    differences = {}
    for name in sorted(set(expected) & set(outputs)):
        want, got = np.asarray(expected[name]), decode_output(outputs[name])
        if want.shape != got.shape:
            continue
        if want.dtype.kind == "f":
            differences[name] = float(np.max(np.abs(want - got))) if want.size else 0.0
        else:
            same += int(
                np.sum(want.astype(got.dtype) == got if want.dtype.kind != "O" else want == got)
            )
            total += want.size
    return same, total, differences


def _shape_problems(expected: dict, outputs: dict) -> list[str]:
    """Missing, ill-shaped or non-finite outputs (what fails even a quantized export)."""
    problems = []
    missing = sorted(set(expected) - set(outputs))
    if missing:
        problems.append(f"missing outputs {missing}")
    for name in sorted(set(expected) & set(outputs)):
        want, got = np.asarray(expected[name]), decode_output(outputs[name])
        if want.shape != got.shape:
            problems.append(f"{name}: shape {got.shape}, expected {want.shape}")
        elif got.dtype.kind == "f" and not np.all(np.isfinite(got)):
            problems.append(f"{name}: NaN or infinite values")
    return problems


def check_token_id_export(
    version_dir: str,
    runtime: str,
    model_file: str,
    tolerance: float,
    quantized: bool,
    benchmark: Optional[dict] = None,
    eval_file: Optional[EvalFile] = None,
) -> CheckReport:
    """Runs the token-id requests on `model_file` with `runtime` ("onnx" or "litert").

    With `eval_file`, also scores the export and the Keras model on it
    (the report's `result["evaluation"]`).

    Raises:
        CheckError: a latency benchmark was asked for (it times raw text).
    """
    if benchmark:
        raise CheckError(
            f"--benchmark_requests times serving_default's raw text; a {runtime} export takes "
            "token ids: time it with python -m tools.benchmark --mode=inference."
        )
    reference = Reference.load(version_dir, model_file)
    bad = nonfinite_weights(reference.model.weights)
    if bad:
        return CheckReport(
            False,
            [f"FAIL {len(bad)} weight tensors of {version_dir} hold NaN or infinite values"],
            {},
        )
    requests, expected, names = token_id_requests(reference)
    scored = scored_file(reference, eval_file)
    result = run_fresh_process(
        version_dir,
        requests + (scored.requests if scored else []),
        script=SCRIPT,
        arguments=(runtime, model_file),
        # A whole file takes what the runtime needs; the check's own requests, seconds.
        timeout=None if scored else FRESH_PROCESS_TIMEOUT,
    )
    file_responses = result["responses"][len(requests) :]
    result["responses"] = result["responses"][: len(requests)]
    ok = not result["project_importable"]
    lines = [
        f"{model_file} in {runtime}: inputs {', '.join(result['inputs'])}; outputs "
        f"{', '.join(result['outputs'])}",
        f"import and load {result['load_seconds']:.2f} s",
    ]
    if not ok:
        lines.append("FAIL the fresh process could import electra_tf; the check is not isolated")
    same = total = 0
    largest: dict = {}
    for name, want, response in zip(names, expected, result["responses"]):
        if "error" in response:
            ok = False
            lines.append(f"FAIL {name}: {response['error']}")
            continue
        outputs = response["outputs"]
        problems = _shape_problems(want, outputs)
        if not quantized and not problems:
            problems, _ = compare(want, outputs, tolerance)
        agreed, count, differences = agreement(want, outputs)
        same, total = same + agreed, total + count
        for output, difference in differences.items():
            largest[output] = max(largest.get(output, 0.0), difference)
        summary = ", ".join(f"{k} {v:.2g}" for k, v in differences.items())
        if problems:
            ok = False
            lines.append(f"FAIL {name}: " + "; ".join(problems))
        else:
            allowed = "not bounded (quantized)" if quantized else allowance_text(tolerance)
            lines.append(f"ok   {name}: max |difference| {summary} (allowed {allowed})")
    if total:
        lines.append(
            f"labels and ids agreeing with the float32 Keras model: {same}/{total} "
            f"({100.0 * same / total:.1f}%)"
        )
    probabilities = {k: v for k, v in largest.items() if "prob" in k}
    if probabilities:
        lines.append(
            "largest probability difference: "
            + ", ".join(f"{k} {v:.3g}" for k, v in sorted(probabilities.items()))
        )
    result["agreement"] = {"equal": same, "total": total}
    result["largest_difference"] = largest
    if scored:
        scored_ok, scored_lines, result["evaluation"] = score_responses(
            scored, file_responses, export_name(reference.config)
        )
        ok, lines = ok and scored_ok, lines + scored_lines
    return CheckReport(ok, lines, result)
