"""Print the WordPiece ids (or pieces) of each line of standard input.

    echo "中国，你好！" | python -m electra_tf.commands.tokenize --vocab_file=vocab.txt \\
        --normalization=bert
    python -m electra_tf.commands.tokenize --vocab_file=vocab.txt --do_lower_case=false \\
        --pieces < text.txt

One output line per input line: the ids separated by spaces (no [CLS] or
[SEP]), or with --pieces the tokens. Give the casing and normalization the
model was trained with (see its config.json): `bert` for imported checkpoints.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Optional

from absl import app, flags

from electra_tf import cli
from electra_tf.config import flag_field

FLAGS = flags.FLAGS


@dataclasses.dataclass
class TokenizeOptions:
    """The command's flags, but the text flags of `cli.define_text_flags`."""

    vocab_file: Optional[str] = flag_field(None, "BERT-style vocab.txt.", required=True)
    pieces: bool = flag_field(False, "Print the tokens instead of their ids.")
    batch_lines: int = flag_field(512, "Lines tokenized per call.")


def define_flags(module_name: str) -> None:
    """The command's flags; defined only when it runs, so importing the module defines none."""
    cli.define_option_flags(TokenizeOptions, FLAGS, module_name)
    cli.define_text_flags(module_name)


def _batches(stream, size: int):
    batch = []
    for line in stream:
        batch.append(line.rstrip("\r\n"))
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def main(argv):
    del argv
    from electra_tf.tokenization import VocabError, WordPieceTokenizer

    if FLAGS.batch_lines <= 0:
        raise app.UsageError(f"--batch_lines={FLAGS.batch_lines}: must be positive.")
    try:
        tokenizer = WordPieceTokenizer(FLAGS.vocab_file, **cli.text_settings_from_flags())
    except VocabError as error:
        raise app.UsageError(f"--vocab_file: {error}")
    # Invalid UTF-8 reaches the tokenizer, which drops it as in training.
    stdin = open(sys.stdin.fileno(), encoding="utf-8", errors="surrogateescape", closefd=False)
    out = sys.stdout
    for batch in _batches(stdin, FLAGS.batch_lines):
        data = [line.encode("utf-8", errors="surrogateescape") for line in batch]
        for ids in tokenizer.tokenize(data).to_list():
            out.write(
                " ".join(tokenizer.convert_ids_to_tokens(ids) if FLAGS.pieces else map(str, ids))
                + "\n"
            )
    out.flush()


if __name__ == "__main__":
    define_flags(__name__)
    cli.run(main, __name__)
