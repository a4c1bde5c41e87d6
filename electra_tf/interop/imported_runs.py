"""A foreign --init_checkpoint (the original code's, Hugging Face's) converted once into a run directory.

Fine-tuning commands read run directories; a checkpoint of another
implementation is converted into one at a path the command chooses, and a
later run with the same source reuses it. The conversion records its source
(`artifacts.run_dir.write_import_source`), so a directory converted from
another checkpoint is refused, not silently reused.
"""

from __future__ import annotations

import os
from typing import Optional

from electra_tf.artifacts.run_dir import RunDir, read_import_source, write_import_source
from electra_tf.interop import checkpoints


def import_if_foreign(
    path: str, target: str, vocab_file: Optional[str] = None, print_fn=print
) -> str:
    """`path` itself when it is ours (a run directory or a `.keras` file), else its conversion.

    Args:
        path: the --init_checkpoint given.
        target: where a conversion goes (or was made earlier).
        vocab_file: --vocab_file, written beside the converted weights.
        print_fn: console output.

    Returns:
        The run directory (or file) to fine-tune from.

    Raises:
        CheckpointError: `path` is no checkpoint, or `target` holds the
            conversion of another one (named with the flag).
    """
    try:
        kind = checkpoints.detect_format(path)
    except checkpoints.CheckpointError as error:
        if os.path.isfile(path):  # a .keras file: resolve_pretrained handles it
            return path
        raise checkpoints.CheckpointError(f"--init_checkpoint: {error}")
    if kind == "electra-tf":
        return path
    source = os.path.abspath(path)
    imported = RunDir(target)
    previous = read_import_source(imported)
    if os.path.exists(imported.config_file) and previous is not None:
        if previous != source:
            raise checkpoints.CheckpointError(
                f"{target} holds a conversion of {previous}, not of --init_checkpoint={source}; "
                "use another --output_dir."
            )
        print_fn(f"--init_checkpoint: using {target}, converted earlier from {source}")
        return target
    print_fn(f"--init_checkpoint: converting the {kind} checkpoint {source} into {target} ...")
    checkpoints.write_run_dir(
        checkpoints.load_checkpoint(source), target, vocab_file=vocab_file, print_fn=print_fn
    )
    write_import_source(imported, source)
    return target
