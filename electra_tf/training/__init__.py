"""Training runs: the loops, their callbacks and their checkpoints.

* `pretraining_loop`: a pre-training run under a distribution strategy:
  resume, fit, checkpoint, held-out evaluation, export.
* `finetuning_run`, `squad_run`: fine-tuning trials of a classification or
  regression task, and of SQuAD.
* `callbacks`: progress with ETA and TensorBoard scalars, checkpoints and
  signals, held-out evaluation.
"""
