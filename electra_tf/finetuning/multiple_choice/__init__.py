"""Multiple choice (C3, RACE-style reading comprehension): a question, its options, one right.

* `data`: C3's JSON files as distributed (documents of context lines, questions with options).
* `features`: one `[CLS] context [SEP] question option [SEP]` per option, the context cut first.
* `model`: a score per option from its [CLS] (transformers' `ElectraForMultipleChoice` head).
* `task`: the task kind: trials, accuracy, predictions, export, check and transformers.
* `serving`, `check`: the raw-text and token-id signatures of an export and their check.
"""
