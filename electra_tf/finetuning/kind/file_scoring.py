"""Scoring an export on a labelled file (`check_export --eval_file`): what a kind gives the check.

The check asks the export's kind for a `ScoredFile` of the user's file
(`TaskKind.scored_file`): the file read as fine-tuning reads a dev file,
cut into token-id requests, with the float32 Keras model's outputs of each
and the kind's way of turning outputs into predictions and scores. The
check sends the requests to the export's runtime and scores both answers
(`electra_tf.serving.file_scores`).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import numpy as np

from electra_tf.finetuning.kind.files import FileTaskOptions

# Examples per request: large enough that the runtime's per-call cost does not dominate,
# small enough that padding to the longest example of a batch stays cheap.
DEFAULT_BATCH_SIZE = 64


@dataclasses.dataclass
class EvalFile:
    """The labelled file to score an export on, and how to read it.

    Attributes:
        path: a CSV / TSV / JSONL file with a header (or keys), as `finetune.py`'s `--dev_file`.
        files: its columns, quoting and row limit (`finetune.py`'s flags of the same names).
        batch_size: examples per request.
    """

    path: str
    files: FileTaskOptions = dataclasses.field(default_factory=FileTaskOptions)
    batch_size: int = DEFAULT_BATCH_SIZE


@dataclasses.dataclass
class ScoredFile:
    """A labelled file as token-id requests, and how the answers are scored.

    Attributes:
        source: the file's path.
        examples: the file's examples (N).
        requests: token-id requests (`electra_tf.artifacts.check_requests`'
            form), the examples in file order, a batch each.
        expected: the float32 Keras model's outputs of each request.
        predictions: the outputs of every request ({name: array}, in
            request order) -> (predicted ids [N], class probabilities
            [N, C] or None).
        scores: (predicted ids, probabilities) -> {metric: fraction}, the
            metrics fine-tuning reports for the task.
        primary_metric: the metric whose difference the check headlines.
    """

    source: str
    examples: int
    requests: list
    expected: list
    predictions: Callable[[list], tuple[np.ndarray, Optional[np.ndarray]]]
    scores: Callable[[np.ndarray, Optional[np.ndarray]], dict]
    primary_metric: str


__all__ = ["DEFAULT_BATCH_SIZE", "EvalFile", "ScoredFile"]
