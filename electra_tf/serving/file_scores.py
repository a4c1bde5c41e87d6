"""An export's scores on a labelled file beside the float32 Keras model's (`--eval_file`).

The export's kind turns the file into token-id requests with the Keras
model's outputs of each (`TaskKind.scored_file`); the check sends them to
the export's runtime in its fresh process with its own requests, and this
module scores both answers with the task's metrics. The scores are
reported, not bounded: a runtime error or a missing output fails the check,
a lower score does not.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from electra_tf.artifacts.check_requests import decode_output
from electra_tf.finetuning.kind.contract import format_table
from electra_tf.finetuning.kind.file_scoring import EvalFile, ScoredFile


def scored_file(reference, eval_file: Optional[EvalFile]) -> Optional[ScoredFile]:
    """The kind's `ScoredFile` of `eval_file` (None: no file to score)."""
    return None if eval_file is None else reference.kind.scored_file(reference, eval_file)


def export_name(config: dict) -> str:
    """The export in the report's table: its format, and its quantization when not float32."""
    name = config.get("format", "saved_model")
    quantization = config.get("quantization", "float32")
    return name if quantization == "float32" else f"{name} {quantization.split()[0]}"


def score_responses(
    scored: ScoredFile, responses: list[dict], name: str
) -> tuple[bool, list[str], dict]:
    """(ok, report lines, JSON record) of the runtime's `responses` to `scored.requests`.

    The record: `file`, `examples`, `primary_metric`, `keras` and `export`
    ({metric: fraction}), `difference_points` ({metric: 100 x (export -
    Keras)}) and `agreement` ({"equal", "total"}: predicted labels equal to
    the Keras model's).
    """
    for number, response in enumerate(responses, 1):
        if "error" in response:
            return (
                False,
                [f"FAIL {scored.source}: request {number}/{len(responses)}: {response['error']}"],
                {},
            )
    outputs = [{k: decode_output(v) for k, v in r["outputs"].items()} for r in responses]
    try:
        served, served_probabilities = scored.predictions(outputs)
    except KeyError as error:
        return False, [f"FAIL {scored.source}: the export returned no {error} output"], {}
    if served.shape != (scored.examples,):
        return (
            False,
            [f"FAIL {scored.source}: {served.size} predictions for {scored.examples:,} examples"],
            {},
        )
    keras, keras_probabilities = scored.predictions(scored.expected)
    keras_scores = {k: float(v) for k, v in scored.scores(keras, keras_probabilities).items()}
    export_scores = {k: float(v) for k, v in scored.scores(served, served_probabilities).items()}
    differences = {k: 100.0 * (export_scores[k] - keras_scores[k]) for k in keras_scores}
    equal = int(np.sum(served == keras))
    rows = [
        [
            k,
            f"{100 * keras_scores[k]:.2f}",
            f"{100 * export_scores[k]:.2f}",
            f"{differences[k]:+.2f}",
        ]
        for k in keras_scores
    ]
    lines = [
        f"{scored.source}: {scored.examples:,} labelled examples in {len(responses)} requests "
        "(scores in percent)",
        format_table(["metric", "float32 Keras", name, "difference (points)"], rows),
        f"labels agreeing with the float32 Keras model on the file: {equal:,}/{scored.examples:,} "
        f"({100.0 * equal / max(scored.examples, 1):.2f}%)",
    ]
    record = {
        "file": scored.source,
        "examples": scored.examples,
        "primary_metric": scored.primary_metric,
        "keras": keras_scores,
        "export": export_scores,
        "difference_points": differences,
        "agreement": {"equal": equal, "total": scored.examples},
    }
    return True, lines, record


__all__ = ["export_name", "score_responses", "scored_file"]
