"""Raw text -> packed pre-training shards on Apache Beam, for corpora beyond one machine.

    python -m electra_tf.commands.beam_shards --corpus='gs://bucket/text/*.txt' \\
        --vocab_file=gs://bucket/vocab.txt --output_dir=gs://bucket/shards \\
        [--max_seq_length=128 --num_shards=N --seed=0 --do_lower_case=true
         --strip_accents=... --invalid_utf8=error --text_range=0,1] [Beam options]

Writes the same shards (byte for byte) and metadata.json as pretrain.py's
local builder; re-running the same command reuses finished shards. Flags
this command does not define are Beam pipeline options: without any, the
DirectRunner runs on this machine; `--runner=DataflowRunner --project=...
--region=... --temp_location=gs://...` runs on Dataflow. See
`electra_tf.data.beam_shards`. Needs the `beam` extra:
`pip install "electra-tf[beam]"`.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from typing import Optional

from absl import app, flags

from electra_tf import cli
from electra_tf.config import flag_field
from electra_tf.data.text_input import INVALID_UTF8_POLICIES


def _fractions(text: str) -> tuple[float, float]:
    try:
        start, end = (float(part) for part in text.split(","))
    except ValueError:
        raise app.UsageError(
            f"--text_range={text!r}: expected START,END fractions such as 0,0.99."
        ) from None
    return start, end


@dataclasses.dataclass
class BeamShardsOptions:
    """The command's flags, but the text flags of `cli.define_text_flags`."""

    corpus: Optional[list] = flag_field(
        None, "Text files, directories or globs, comma-separated (local or gs://).", required=True
    )
    vocab_file: Optional[str] = flag_field(None, "BERT-style vocab.txt.", required=True)
    output_dir: Optional[str] = flag_field(
        None, "Receives the shards, their sidecars and metadata.json.", required=True
    )
    max_seq_length: int = flag_field(128, "Tokens per example.")
    num_shards: Optional[int] = flag_field(None, "Default: one per 8 MiB of text, at most 1000.")
    seed: int = flag_field(0, "Base seed of the packing (pretrain.py's default seed is 0 too).")
    invalid_utf8: str = flag_field(
        "error",
        "Stop at invalid UTF-8, or replace it and count the lines.",
        choices=INVALID_UTF8_POLICIES,
    )
    text_range: str = flag_field("0,1", "START,END fractions of the text to build from.")


def define_flags(flag_values: flags.FlagValues) -> None:
    """The command's flags (Beam's options are not among them)."""
    cli.define_option_flags(BeamShardsOptions, flag_values)
    cli.define_text_flags(__name__, flag_values=flag_values)


# Values absl's boolean flags do not take as a separate argument.
_BOOLEAN_WORDS = ("true", "false", "yes", "no", "1", "0")


def build(beam_args: list[str], flag_values: flags.FlagValues) -> int:
    """Builds the shards; `beam_args` are Beam's pipeline options. Returns the exit code."""
    stray = [arg for arg in beam_args if arg.lower() in _BOOLEAN_WORDS]
    if stray:
        # `--do_lower_case false` sets the flag and leaves "false" for Beam,
        # which ignores it: refuse rather than build with the wrong casing.
        raise app.UsageError(
            f"unexpected argument {stray[0]!r}: give a boolean flag its value with '=' "
            "(--do_lower_case=false) or use its --no form (--nodo_lower_case)."
        )
    text_range = _fractions(flag_values.text_range)
    try:
        from electra_tf.data import beam_shards
    except ImportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    from apache_beam.options.pipeline_options import PipelineOptions

    from electra_tf.data.shard_layout import ShardError
    from electra_tf.tokenization import VocabError

    logging.getLogger().setLevel(logging.INFO)
    try:
        beam_shards.write_shards(
            [p for p in flag_values.corpus if p],
            flag_values.output_dir,
            {"vocab_file": flag_values.vocab_file, **cli.text_settings_from_flags(flag_values)},
            pipeline_options=PipelineOptions(beam_args),
            progress=print,
            max_seq_length=flag_values.max_seq_length,
            num_shards=flag_values.num_shards,
            seed=flag_values.seed,
            invalid_utf8=flag_values.invalid_utf8,
            text_range=text_range,
        )
    except (ShardError, VocabError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str]) -> int:
    """Runs the command in this process on `argv` (no program name); returns the exit code."""
    return cli.call(
        define_flags, build, argv, "python -m electra_tf.commands.beam_shards", known_only=True
    )


if __name__ == "__main__":
    # The DoFns Beam pickles live in electra_tf.data.beam_shards, an importable
    # module, so that workers unpickle them by reference.
    cli.run_command(define_flags, build, __name__, known_only=True)
