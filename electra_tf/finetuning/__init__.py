"""Fine-tuning tasks: their data, models, losses and metrics.

* `tasks`: GLUE task definitions and readers (GLUE TSV layout, TFDS, or the
  user's own CSV / TSV / JSONL files).
* `features`: text -> `[CLS] A [SEP] B [SEP]` ids with BERT-style truncation.
* `model`: the encoder with a [CLS] classification / regression head.
* `loss`: every fine-tuning model's loss for the shared train step
  (`electra_tf.modeling.train_step`): per-example losses, mean or sum.
* `classification`: classification and regression as a task of the trial loop.
* `squad_data`, `squad_features`, `qa_model`, `squad_decoding`, `squad_metrics`:
  SQuAD reading, windows with character offsets, the QA head, answer
  decoding and the official scores.
* `squad_task`: SQuAD as a task of the trial loop.
* `tagging_data`, `tagging_features`, `tagging_model`, `tagging_metrics`:
  token classification: CoNLL / JSONL words and tags, first-piece labels,
  the per-token head, seqeval's entity-level scores.
* `tagging_task`: token classification as a task of the trial loop;
  `title_mentions` builds a silver NER task from Wikipedia text.
* `optimization`: AdamW with layer-wise learning-rate decay.
* `settings`: the hyperparameters every run shares and the command's options
  (each field's flag help).
* `saving`: one format for every fine-tuned model.
* `metrics`: accuracy, F1, Matthews correlation, Pearson, Spearman.

The trial loop itself is `electra_tf.training.finetuning_loop`.
"""
