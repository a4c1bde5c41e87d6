"""Fine-tuning tasks, in three tiers (`electra_tf.layering.FINETUNING_TIERS`):

* `kind/`, the floor every kind stands on: the contract (`contract.TaskKind`),
  the user's files' options, `TaskDataError` and the draw (`files`), text
  features (`text_features`), the signature names (`signatures`), the run's
  settings (`settings`), the loss (`loss`), metrics (`metrics`), the
  layer-wise optimizer (`optimization`) and a suite's record of a task
  (`benchmark`).
* one package per kind, each built on the floor alone: `classification/`
  (and regression), `question_answering/`, `tagging/`, `multiple_choice/`,
  `dependency_parsing/`; no kind imports another.
* above them: the registry (`kinds`), one format for every fine-tuned model
  (`saving`), the linear probe (`probe`) and the benchmark suites
  (`benchmarks/`).

The trial loop itself is `electra_tf.training.finetuning_loop`.
"""
