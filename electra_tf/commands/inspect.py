"""See what the discriminator sees: replacements and P(replaced) on every token of your text.

    python -m electra_tf.commands.inspect runs/small-builtin "The cat sat on the mat."
    python -m electra_tf.commands.inspect runs/small-builtin/export "text one" "text two" \\
        --html view.html
    python -m electra_tf.commands.inspect runs/small-builtin "The cat ate on the mat." \\
        --no_replace

The text is tokenized as pre-training tokenized it, `--mask_rate` of its
tokens are masked by ELECTRA's rules and the generator fills them with
samples (at the run's temperature); the discriminator then scores every
token. `--no_replace` skips the generator: the text is scored as given, to
see which of your own edits the discriminator flags. Terminal output is
coloured (white to red with the probability) when it is a terminal;
`--html` writes a page.

Accepts a pre-training run directory (its export, else its latest
checkpoint) or its `export/` directory.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Optional

from absl import app, flags

from electra_tf import cli
from electra_tf.config import flag_field


@dataclasses.dataclass
class InspectOptions:
    """The command's flags (the run and the texts are its arguments)."""

    no_replace: bool = flag_field(False, "Score the text as given (no masking, no generator).")
    mask_rate: Optional[float] = flag_field(
        None, "Fraction of tokens the generator replaces (default: the run's)."
    )
    seed: int = flag_field(0, "Masking and sampling seed.")
    color: str = flag_field(
        "auto",
        "Colour the terminal output (auto: when it is a terminal).",
        choices=("auto", "always", "never"),
    )
    html: Optional[str] = flag_field(None, "Also write an HTML page to this file.")


def define_flags(flag_values: flags.FlagValues) -> None:
    """The command's flags (the run and the texts are its arguments)."""
    cli.define_option_flags(InspectOptions, flag_values)


def inspect(arguments: list[str], flag_values: flags.FlagValues) -> int:
    """Scores the texts of `run text...` and prints them; returns the exit code."""
    if len(arguments) < 2:
        raise app.UsageError(
            "expected a pre-training run directory (or its export/ "
            "directory) and at least one text to score."
        )
    run, texts = arguments[0], arguments[1:]
    mask_rate = flag_values.mask_rate
    if mask_rate is not None and not 0.0 < mask_rate < 1.0:
        raise app.UsageError(f"--mask_rate={mask_rate}: must be in (0, 1).")
    if not os.path.exists(run):
        raise app.UsageError(f"{run}: no such run or export directory.")

    from electra_tf.inspect import inspect_texts
    from electra_tf.interop.checkpoints import CheckpointError
    from electra_tf.pretraining import display

    try:
        samples, vocab, notes = inspect_texts(
            run,
            texts,
            replace=not flag_values.no_replace,
            mask_rate=mask_rate,
            seed=flag_values.seed,
        )
    except (CheckpointError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    colour = flag_values.color == "always" or (flag_values.color == "auto" and sys.stdout.isatty())
    for note in notes:
        print(f"({note})")
    print(display.legend(colour))
    sections = []
    for text, sample in zip(texts, samples):
        tokens = display.annotate(sample, vocab)
        print()
        print(display.to_ansi(tokens) if colour else display.to_plain(tokens))
        sections.append((text, display.to_html(tokens)))
    if flag_values.html:
        with open(flag_values.html, "w", encoding="utf-8") as f:
            f.write(display.html_page(sections))
        print(f"\nHTML: {flag_values.html}")
    return 0


def main(argv: list[str]) -> int:
    """Runs the command in this process on `argv` (no program name); returns the exit code."""
    return cli.call(define_flags, inspect, argv, "python -m electra_tf.commands.inspect")


if __name__ == "__main__":
    cli.run_command(define_flags, inspect, __name__)
