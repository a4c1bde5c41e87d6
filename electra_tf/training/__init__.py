"""Training runs: the loops, their callbacks and their checkpoints.

The train step every model mixes in is `electra_tf.modeling.train_step`.

* `pretraining_loop`: a pre-training run under a distribution strategy:
  resume, fit, checkpoint, held-out evaluation, export.
* `finetuning_loop`: the trials of any fine-tuning task (classification,
  regression, SQuAD): seeds, resuming, results, saved models.
* `callbacks`: progress with ETA and TensorBoard scalars, checkpoints and
  signals, held-out evaluation.
"""
