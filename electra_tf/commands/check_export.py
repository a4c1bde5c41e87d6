"""Check an export before deploying it: what its runtime would answer, against the Keras model.

    python -m electra_tf.commands.check_export <export_base>/<model_name>/<version>
    python -m electra_tf.commands.check_export export/sst2/1 --benchmark_requests=200
    python -m electra_tf.commands.check_export export/nsmc/2 --eval_file=ratings_test.txt \
        --text_column=document --label_column=label

Loads the export in a fresh interpreter that cannot import this project. A
SavedModel (as TF Serving would) gets sample requests (several scripts,
empty, too long, invalid UTF-8, malformed), see `electra_tf.serving.check`;
an ONNX or LiteRT export gets the token-id requests in ONNX Runtime or the
LiteRT interpreter, with the agreement of its labels and its largest
probability difference, see `electra_tf.serving.formats.runtime_check`.
The answers are compared with the in-process model. With --eval_file (a
classifier's labelled CSV / TSV / JSONL file, read as finetune.py reads
--dev_file, with its column flags), the export and the float32 Keras model
are also scored on the whole file: each metric of the task for both, their
difference in points and the agreement of their labels; a lower score is
reported, not failed. Exits 1 if anything fails or disagrees, 2 on a usage
error.
"""

from __future__ import annotations

import base64
import dataclasses
import sys
from typing import Optional

from absl import app, flags

from electra_tf import cli
from electra_tf.config import flag_field
from electra_tf.errors import RunError
from electra_tf.finetuning.classification.check import SAMPLE_TEXTS
from electra_tf.finetuning.kind.file_scoring import DEFAULT_BATCH_SIZE, EvalFile
from electra_tf.finetuning.kind.files import FileTaskOptions, TaskDataError
from electra_tf.serving.check import CheckError

# finetune.py's flags that say how --eval_file is read.
EVAL_FILE_FIELDS = ("text_column", "text_pair_column", "label_column", "quoting", "max_row_chars")


@dataclasses.dataclass
class CheckExportOptions:
    """The command's flags (the version directory is its argument)."""

    tolerance: Optional[float] = flag_field(
        None,
        "Largest absolute difference allowed in float outputs (default: the format's, 1e-5 for "
        "a SavedModel, 1e-4 for onnx and litert; a quantized litert export is not bounded).",
    )
    benchmark_requests: int = flag_field(
        0, "Also time this many serving_default calls per batch size."
    )
    benchmark_batch_sizes: str = flag_field(
        "1,32", "Batch sizes of the benchmark, comma-separated."
    )
    eval_file: Optional[str] = flag_field(
        None,
        "A labelled file (CSV, TSV or JSONL, as finetune.py's --dev_file) to score the export "
        "and the float32 Keras model on: classifiers; read with --text_column, "
        "--text_pair_column, --label_column, --quoting.",
    )
    eval_batch_size: int = flag_field(DEFAULT_BATCH_SIZE, "Examples per --eval_file request.")
    benchmark_text: str = flag_field(
        SAMPLE_TEXTS[0],
        "The text of every benchmark example (question answering: a fixed question and "
        "paragraph of about 150 words).",
    )


def define_flags(flag_values: flags.FlagValues) -> None:
    """The command's flags (the version directory is its argument)."""
    cli.define_option_flags(CheckExportOptions, flag_values)
    cli.define_field_flags(FileTaskOptions, __name__, flag_values, only=EVAL_FILE_FIELDS)


def check(arguments: list[str], flag_values: flags.FlagValues) -> int:
    """Checks the export; prints the report; returns the exit code."""
    if len(arguments) != 1:
        raise app.UsageError("expected one argument: <export_base>/<model_name>/<version>")
    benchmark = None
    if flag_values.benchmark_requests > 0:
        try:
            sizes = [int(b) for b in flag_values.benchmark_batch_sizes.split(",")]
        except ValueError:
            raise app.UsageError(
                f"--benchmark_batch_sizes={flag_values.benchmark_batch_sizes}: "
                "expected integers separated by commas."
            ) from None
        benchmark = {
            "requests": flag_values.benchmark_requests,
            "batch_sizes": sizes,
            "text": base64.b64encode(flag_values.benchmark_text.encode()).decode(),
        }
    eval_file = None
    if flag_values.eval_file:
        if flag_values.eval_batch_size <= 0:
            raise app.UsageError(
                f"--eval_batch_size={flag_values.eval_batch_size}: must be a positive integer."
            )
        try:
            files = FileTaskOptions(**{n: flag_values[n].value for n in EVAL_FILE_FIELDS})
        except RunError as error:
            raise app.UsageError(str(error)) from None
        eval_file = EvalFile(flag_values.eval_file, files, flag_values.eval_batch_size)
    from electra_tf.serving.formats import ExportError, check_version

    try:
        report = check_version(arguments[0], flag_values.tolerance, benchmark, eval_file)
    except (CheckError, ExportError, RunError, TaskDataError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print("\n".join(report.lines))
    print("PASSED" if report.ok else "FAILED")
    return 0 if report.ok else 1


def main(argv: list[str]) -> int:
    """Runs the command in this process on `argv` (no program name); returns the exit code."""
    return cli.call(define_flags, check, argv, "python -m electra_tf.commands.check_export")


if __name__ == "__main__":
    cli.run_command(define_flags, check, __name__)
