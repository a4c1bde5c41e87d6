"""Extractive question answering: SQuAD 1.1 / 2.0 and data in its format (KorQuAD, CMRC, DRCD).

* `data`: SQuAD-format JSON and TFDS squad, read into questions with answers.
* `features`: windows over each context with character offsets.
* `model`: the original code's span head (start, end given the start, answerability).
* `decoding`: windows' logits -> answers and null odds.
* `squad_metrics`, `metrics`: the official scores (SQuAD's, KorQuAD 1.0's, CMRC 2018's, DRCD's).
* `task`: the task kind: trials, metrics, predictions, export and check.
* `serving`, `check`: the question/context signatures of an export and their check.
"""
