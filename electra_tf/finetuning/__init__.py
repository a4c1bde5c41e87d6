"""Fine-tuning a pre-trained ELECTRA discriminator on classification and regression tasks.

* `tasks`: GLUE task definitions and readers (GLUE TSV layout, TFDS, or the
  user's own CSV / TSV / JSONL files).
* `features`: text -> `[CLS] A [SEP] B [SEP]` ids with BERT-style truncation.
* `model`: the encoder with a [CLS] classification / regression head.
* `optimization`: AdamW with layer-wise learning-rate decay.
* `metrics`: accuracy, F1, Matthews correlation, Pearson, Spearman.
* `squad_data`, `squad_features`, `qa_model`, `squad_decoding`, `squad_metrics`:
  SQuAD reading, windows with character offsets, the QA head, answer
  decoding and the official scores.
"""
