"""Score question-answering predictions as the dataset's official script does.

    python -m electra_tf.commands.evaluate_qa KorQuAD_v1.0_dev.json predictions.json
    python -m electra_tf.commands.evaluate_qa cmrc2018_dev.json predictions.json \\
        --metric=cmrc2018
    python -m electra_tf.commands.evaluate_qa dev-v2.0.json predictions.json \\
        --null_odds_file=null_odds.json

Prints one JSON object with `exact_match` and `f1` (KLUE-MRC's `klue_mrc`:
`rouge_w`) in percent and the other numbers the official script prints. The
metric (squad, korquad, cmrc2018, drcd, klue_mrc) defaults to the one the data file's `version` field names, as
KorQuAD's `KorQuAD_v1.0_dev` does, else squad; SQuAD 2.0 scoring is used
when a question is marked `is_impossible`. `predictions.json` maps question
ids to answer texts, as `finetune.py --task=squad` writes it.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Optional

from absl import app, flags

from electra_tf import cli
from electra_tf.config import flag_field
from electra_tf.finetuning.question_answering.metrics import METRICS


def _read_json_object(path: str, what: str) -> dict:
    try:
        with open(path, encoding="utf-8-sig") as f:
            data = json.load(f)
    except OSError as error:
        raise ValueError(f"{path}: cannot read the {what} ({error.strerror}).") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: the {what} is not a UTF-8 JSON file ({error}).") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the {what} must be a JSON object of question id -> value.")
    return data


@dataclasses.dataclass
class EvaluateQAOptions:
    """The command's flags (the data and predictions files are its two arguments)."""

    metric: Optional[str] = flag_field(
        None,
        f"Whose official score: {', '.join(METRICS)} (default: named by the data file's "
        "version field, else squad).",
        choices=METRICS,
    )
    null_odds_file: Optional[str] = flag_field(
        None, "SQuAD 2.0: JSON question id -> null odds (adds the best-threshold scores)."
    )
    null_threshold: float = flag_field(
        1.0, "SQuAD 2.0: null odds above it answer '' (the official default 1.0)."
    )


def define_flags(flag_values: flags.FlagValues) -> None:
    """The command's flags (the data and predictions files are its two arguments)."""
    cli.define_option_flags(EvaluateQAOptions, flag_values)


def evaluate(arguments: list[str], flag_values: flags.FlagValues) -> int:
    """Scores `data_file predictions_file`; prints the JSON; returns the exit code."""
    from electra_tf.finetuning.question_answering import metrics as qa_metrics
    from electra_tf.finetuning.question_answering.data import SquadDataError, read_gold_answers

    if len(arguments) != 2:
        raise app.UsageError(
            "expected two arguments: the SQuAD-format data file (SQuAD, "
            "KorQuAD, CMRC 2018, DRCD) and predictions.json (question id -> "
            f"answer text); got {len(arguments)}."
        )
    data_file, predictions_file = arguments
    try:
        gold = read_gold_answers(data_file)
        predictions = {
            str(k): str(v) for k, v in _read_json_object(predictions_file, "predictions").items()
        }
        null_odds = None
        if flag_values.null_odds_file:
            null_odds = {
                str(k): float(v)
                for k, v in _read_json_object(flag_values.null_odds_file, "null odds").items()
            }
        metric = flag_values.metric or qa_metrics.metric_for_version(gold.version)
        version = "2.0" if gold.has_unanswerable else "1.1"
        if null_odds is not None and version != "2.0":
            raise ValueError(
                f"--null_odds_file: {data_file} has no unanswerable question "
                "(null odds are a SQuAD 2.0 score)."
            )
        results = qa_metrics.evaluate(
            metric, gold.answers, predictions, version, null_odds, flag_values.null_threshold
        )
    except (SquadDataError, ValueError, ImportError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    unanswered = sum(1 for q in gold.answers if q not in predictions)
    if unanswered:
        print(
            f"note: {unanswered} question(s) have no prediction"
            + (
                " and are left out of the totals."
                if metric == "squad" and version == "2.0"
                else " and score 0."
            ),
            file=sys.stderr,
        )
    print(json.dumps({"metric": metric, **results}, ensure_ascii=False))
    return 0


def main(argv: list[str]) -> int:
    """Runs the command in this process on `argv` (no program name); returns the exit code."""
    return cli.call(define_flags, evaluate, argv, "python -m electra_tf.commands.evaluate_qa")


if __name__ == "__main__":
    cli.run_command(define_flags, evaluate, __name__)
