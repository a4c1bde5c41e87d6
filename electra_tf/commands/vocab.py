"""Learn a WordPiece vocabulary from raw text (Korean and Chinese included).

    python -m electra_tf.commands.vocab --corpus=ko.txt --output=vocab.txt --vocab_size=32000 \\
        --do_lower_case=false --normalization=bert --vocab_unused=200

The whole corpus is read (--vocab_max_bytes samples it), normalized and split
exactly as the tokenizer will do it (the same --do_lower_case,
--strip_accents and --normalization must be given to pre-training), and the
`tokenizers` library's WordPiece trainer learns the pieces; a temporary file
of the words, about the size of the text, is written beside --output while it
runs. --vocab_alphabet_size, --vocab_max_bytes, --vocab_unused and
--vocab_presegment are also flags of pretrain.py, which learns its vocabulary
the same way when it gets no --vocab_file.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import sys
from typing import Optional

from absl import app, flags

from electra_tf import cli
from electra_tf.config import BERT_VOCAB_SIZE, flag_field
from electra_tf.vocab_learning import VocabOptions

FLAGS = flags.FLAGS


@dataclasses.dataclass
class VocabCommandOptions:
    """The command's flags, but those of `cli.define_text_flags` and `cli.define_vocab_flags`."""

    corpus: Optional[list] = flag_field(
        None, "Text files or globs (comma-separated), UTF-8.", required=True
    )
    output: Optional[str] = flag_field(
        None, "Where to write vocab.txt (one token per line).", required=True
    )
    vocab_size: int = flag_field(BERT_VOCAB_SIZE, cli.field_help(VocabOptions, "vocab_size"))


def define_flags(module_name: str) -> None:
    """The command's flags; defined only when it runs, so importing the module defines none."""
    cli.define_option_flags(VocabCommandOptions, FLAGS, module_name)
    cli.define_text_flags(module_name)
    cli.define_vocab_flags(module_name)


def main(argv):
    del argv
    from electra_tf.vocab_learning import VocabLearningError, learn_vocab, write_vocab

    files = []
    for pattern in FLAGS.corpus:
        matches = sorted(glob.glob(os.path.expanduser(pattern)))
        if not matches:
            raise app.UsageError(f"--corpus: {pattern!r} matches no file.")
        files.extend(m for m in matches if os.path.isfile(m))
    options = cli.vocab_options_from_flags(FLAGS.vocab_size)
    work_dir = os.path.dirname(os.path.abspath(FLAGS.output))
    try:
        options.validate()
        os.makedirs(work_dir, exist_ok=True)
        tokens, stats = learn_vocab(
            files,
            options,
            **cli.text_settings_from_flags(),
            work_dir=work_dir,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
        )
    except VocabLearningError as error:
        raise app.UsageError(str(error))
    except OSError as error:  # a corpus file, or the folder of --output and its words file
        raise app.UsageError(f"{error.filename or FLAGS.output}: {error.strerror or error}.")
    write_vocab(tokens, FLAGS.output)
    print(
        f"Wrote {FLAGS.output}: {len(tokens):,} tokens; alphabet {stats['alphabet_size']:,} "
        f"of {stats['distinct_characters']:,} characters; learned from "
        f"{stats['sample_bytes'] / 1e6:,.1f} MB ({stats['words']:,} words) in "
        f"{stats['seconds']:.0f}s.",
        flush=True,
    )


if __name__ == "__main__":
    define_flags(__name__)
    cli.run(main, __name__)
    sys.exit(0)
