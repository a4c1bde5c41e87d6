"""Training runs: the train step, the loops, their callbacks and their checkpoints.

* `train_step`: the one train step of every model (pre-training objectives
  and fine-tuning tasks): replicas, accumulation, loss scaling, XLA, logs.
* `pretraining_loop`: a pre-training run under a distribution strategy:
  resume, fit, checkpoint, held-out evaluation, export.
* `finetuning_loop`: the trials of any fine-tuning task (classification,
  regression, SQuAD): seeds, resuming, results, saved models.
* `callbacks`: progress with ETA and TensorBoard scalars, checkpoints and
  signals, held-out evaluation.
"""
