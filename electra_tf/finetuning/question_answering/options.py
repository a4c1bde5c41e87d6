"""The question-answering flags of `finetune.py` (`SquadTask.OPTIONS`).

Each field's metadata holds its flag's help; the module imports no TensorFlow.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from electra_tf.config import flag_field
from electra_tf.finetuning.question_answering.data import VERSIONS
from electra_tf.finetuning.question_answering.metrics import METRICS


@dataclasses.dataclass
class QuestionAnsweringOptions:
    """How SQuAD-format data is read, windowed, decoded and scored (`--task=squad`)."""

    squad_version: str = flag_field(
        "1.1",
        "SQuAD version: 1.1, or 2.0, which has unanswerable questions (null odds, "
        "threshold search).",
        choices=VERSIONS,
    )
    qa_metric: Optional[str] = flag_field(
        None,
        "Whose official scores to report: SQuAD's (squad), KorQuAD 1.0's (korquad: "
        "character F1), CMRC 2018's (cmrc2018) or DRCD's (drcd; both: mixed segmentation, "
        "longest common run) or KLUE-baseline's for KLUE-MRC (klue_mrc: exact match and "
        "ROUGE-W, unanswerable questions with --squad_version=2.0). Default: the one the "
        "--predict_file's version field names (KorQuAD_v1.0_dev), else squad.",
        choices=METRICS,
    )
    predict_file: Optional[str] = flag_field(
        None,
        "SQuAD-format JSON to predict and score (with --task=squad; default: TFDS squad "
        "validation when --train_file is absent).",
    )
    doc_stride: int = flag_field(128, "SQuAD: tokens between the starts of context windows.")
    max_query_length: int = flag_field(64, "SQuAD: question tokens kept.")
    max_answer_length: int = flag_field(30, "SQuAD: longest answer in tokens.")
    n_best_size: int = flag_field(20, "SQuAD: candidate answers kept per question.")
    beam_size: int = flag_field(20, "SQuAD: start positions (and ends per start) searched.")
    null_score_threshold: float = flag_field(
        -2.75,
        "SQuAD 2.0: a question whose null odds exceed it is answered with the empty "
        "string (the original code's -2.75).",
    )
