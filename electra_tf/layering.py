"""The layers of electra-tf, lowest first: a module imports only from its own layer or below.

Each layer lists packages and top-level modules: `electra_tf.modeling` covers
the package and every module in it. A package sits in one layer whole: a
module its package's layer would put too high or too low belongs in another
package, and no module is listed apart from its package.
`tests/test_layering.py` reads this list and fails on any import from a lower
layer to a higher one, on any import cycle and on a module listed apart from
its package. The package's own `__init__` stands outside the order: its
`register_keras_classes` imports the modules that define Keras classes (when
called, not when the package is imported). The research tools in the repository's `tools/` (benchmark,
study, parity...) are not part of the package and not listed: they import
it, never the reverse.

Inside `electra_tf.finetuning` the same rule holds between three tiers
(`FINETUNING_TIERS`): the floor, the kinds, and what stands on the kinds.
Every sub-package of `electra_tf.finetuning` the floor and the top do not
name is a task kind; a kind imports the floor and itself, never another kind.
"""

LAYERS = (
    # Foundations: configuration, text, distribution and precision, cost models, errors.
    (
        "electra_tf.config",
        "electra_tf.tokenization",
        "electra_tf.distribute",
        "electra_tf.flops",
        "electra_tf.errors",
        "electra_tf.layering",
        "electra_tf.fileio",
        "electra_tf.bounded_lines",
        "electra_tf.vocab_learning",
        "electra_tf.finiteness",
        "electra_tf.keras_compat",
        "electra_tf.text_compat",
        "electra_tf.text_packing",
    ),
    # Models (with the train step every model mixes in), input pipelines, the optimiser.
    ("electra_tf.modeling", "electra_tf.data", "electra_tf.optimization"),
    # What is on disk: run, export, trial and results layouts, serving versions.
    ("electra_tf.artifacts",),
    # Objectives and tasks: pre-training, and fine-tuning data, heads, losses and metrics.
    ("electra_tf.pretraining", "electra_tf.finetuning"),
    # Other implementations' checkpoints.
    ("electra_tf.interop",),
    # Loops, callbacks and checkpoints; serving exports and clients.
    # electra_tf.inspect runs a run's generator and discriminator on text.
    ("electra_tf.training", "electra_tf.serving", "electra_tf.inspect"),
    # Command lines: every user command is a module of electra_tf.commands;
    # electra_tf.__main__ (`python -m electra_tf`, `electra-tf`) runs any of them.
    ("electra_tf.cli", "electra_tf.commands", "electra_tf.__main__", "pretrain", "finetune"),
)

# Inside electra_tf.finetuning, lowest first; the middle tier is every other
# sub-package: one per task kind, which may not import one another.
FINETUNING_FLOOR = ("electra_tf.finetuning.kind",)
FINETUNING_TOP = (
    "electra_tf.finetuning",
    "electra_tf.finetuning.kinds",
    "electra_tf.finetuning.saving",
    "electra_tf.finetuning.probe",
    "electra_tf.finetuning.benchmarks",
)
FINETUNING_TIERS = ("floor", "kind", "top")
