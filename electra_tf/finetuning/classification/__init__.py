"""Sentence (pair) classification and regression: GLUE, KLUE-style benchmarks, the user's files.

* `data`: task definitions and readers (GLUE TSV, TFDS, CSV / TSV / JSONL files).
* `features`: text -> `[CLS] A [SEP] B [SEP]` ids with BERT-style truncation.
* `model`: the encoder with a [CLS] classification / regression head.
* `task`: the task kind: trials, metrics, predictions, export and check.
* `serving`: the raw-text and token-id signatures of an export.
"""
