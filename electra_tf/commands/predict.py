"""Predict: texts from a file -> one JSON line of outputs per text.

    # through TF Serving (REST or gRPC)
    python -m electra_tf.commands.predict --server http://localhost:8501 --model_name sst2 \\
        --input reviews.txt --output predictions.jsonl
    python -m electra_tf.commands.predict --server grpc://localhost:8500 --model_name sst2 ...
    # without a server, from an export
    python -m electra_tf.commands.predict --saved_model export/sst2/3 --input reviews.txt ...
    # model state and signatures
    python -m electra_tf.commands.predict --server http://localhost:8501 --model_name sst2 --status

Input formats (by extension): `.txt` one text per line; `.tsv` a text, or a
text and its pair, per line (tab-separated, no header); `.jsonl` objects with
`text` (and `text_pair`), or with `question` and `context` for a
question-answering export (a tagger takes `text` and returns one tag per
word, cut to the example's words). Lines are sent in batches of `--batch_size`. A
batch the server rejects is retried one example at a time, so only the
examples at fault get an `"error"` field in their output line and all
others are still predicted.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import Optional

from absl import app, flags

from electra_tf import cli
from electra_tf.config import flag_field
from electra_tf.serving.client import DEFAULT_SIGNATURE


@dataclasses.dataclass
class PredictOptions:
    """The command's flags."""

    server: Optional[str] = flag_field(None, "http://host:port (REST) or grpc://host:port (gRPC).")
    saved_model: Optional[str] = flag_field(None, "A version directory: predict without a server.")
    model_name: Optional[str] = flag_field(None, "The served model's name (with --server).")
    version: Optional[int] = flag_field(None, "Default: the server's latest.")
    signature_name: str = flag_field(DEFAULT_SIGNATURE, "The signature to call.")
    input: Optional[str] = flag_field(None, ".txt, .tsv or .jsonl file of texts.")
    output: Optional[str] = flag_field(
        None, "JSON-lines output (default: <input>.predictions.jsonl)."
    )
    batch_size: int = flag_field(32, "Texts per request.")
    timeout: float = flag_field(30.0, "Seconds per request.")
    status: bool = flag_field(
        False, "Print the model's status and signatures instead of predicting."
    )


def define_flags(flag_values: flags.FlagValues) -> None:
    """The command's flags."""
    cli.define_option_flags(PredictOptions, flag_values)
    flags.mark_flags_as_mutual_exclusive(
        ["server", "saved_model"], required=True, flag_values=flag_values
    )


def predict(arguments: list[str], flag_values: flags.FlagValues) -> int:
    """Predicts the --input file (or prints the status); returns the exit code."""
    from electra_tf.serving.client import LocalPredictor, ServingError, connect
    from electra_tf.serving.predict import InputError, predict_file

    if arguments:
        raise app.UsageError(f"unexpected arguments: {' '.join(arguments)}")
    try:
        if flag_values.saved_model:
            if not os.path.isfile(os.path.join(flag_values.saved_model, "saved_model.pb")):
                raise InputError(
                    f"--saved_model={flag_values.saved_model}: no saved_model.pb; pass a "
                    "version directory <export_base>/<model_name>/<version>."
                )
            client = LocalPredictor(flag_values.saved_model)
        else:
            client = connect(
                flag_values.server, flag_values.model_name, flag_values.version, flag_values.timeout
            )
        if flag_values.status:
            print(json.dumps({"status": client.status(), "metadata": client.metadata()}, indent=2))
            return 0
        if not flag_values.input:
            raise InputError("--input is required (or pass --status).")
        output = flag_values.output or os.path.splitext(flag_values.input)[0] + ".predictions.jsonl"
        count, errors = predict_file(
            client, flag_values.input, output, flag_values.batch_size, flag_values.signature_name
        )
    except (InputError, ServingError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{count} predictions ({errors} rejected) -> {output}")
    return 1 if errors else 0


def main(argv: list[str]) -> int:
    """Runs the command in this process on `argv` (no program name); returns the exit code."""
    return cli.call(define_flags, predict, argv, "python -m electra_tf.commands.predict")


if __name__ == "__main__":
    cli.run_command(define_flags, predict, __name__)
