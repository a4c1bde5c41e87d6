"""The layers of electra-tf, lowest first: a module imports only from its own layer or below.

Each layer lists module prefixes: `electra_tf.modeling` covers the package
and every module in it; the longest listed prefix decides where a module
sits, so a module inside a package can sit above (or below) the rest of it.
`tests/test_layering.py` reads this list and fails on any import from a
lower layer to a higher one and on any import cycle. The package's own `__init__` stands outside the order: it imports the modules
that define Keras classes, so that `import electra_tf` registers them. The
research tools in the repository's `tools/` (benchmark, study, parity...) are
not part of the package and not listed: they import it, never the reverse.
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
        "electra_tf.vocab_learning",
        "electra_tf.finiteness",
        "electra_tf.keras_compat",
        "electra_tf.text_compat",
        "electra_tf.text_packing",
    ),
    # Models, input pipelines, and the optimiser and train step every training run uses.
    (
        "electra_tf.modeling",
        "electra_tf.data",
        "electra_tf.optimization",
        "electra_tf.training.train_step",
    ),
    # What is on disk: run, export, trial and results layouts, serving versions.
    ("electra_tf.artifacts",),
    # Objectives and tasks: pre-training, and fine-tuning data, heads, losses and metrics.
    ("electra_tf.pretraining", "electra_tf.finetuning"),
    # Other implementations' checkpoints.
    ("electra_tf.interop",),
    # Loops, callbacks and checkpoints; serving exports and clients.
    # electra_tf.inspect runs a run's generator and discriminator on text.
    ("electra_tf.training", "electra_tf.serving", "electra_tf.inspect"),
    # Command lines: every user command is a module of electra_tf.commands.
    ("electra_tf.cli", "electra_tf.commands", "pretrain", "finetune"),
)
