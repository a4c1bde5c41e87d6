"""Pre-train ELECTRA: text -> WordPiece vocab -> TFRecord shards -> generator + discriminator.

    python pretrain.py --model_size=small                      # built-in demo corpus, short run
    python pretrain.py --model_size=small --corpus='wiki/*.txt' # the paper's recipe on your text

Without --corpus the run uses the documentation text of the installed Python
packages (found offline on any machine with the requirements installed) and a
shortened schedule, announced at start. Vocabularies and shards are cached
under data/ and reused; runs go to runs/<name>/ (config, checkpoints,
TensorBoard logs, export). Re-running the same command resumes.

It trains on Keras' TensorFlow backend, or on JAX with KERAS_BACKEND=jax set
(the same flags; --strategy=auto then spreads each batch over every device
JAX sees; docs/pretraining.md, "TensorFlow or JAX").
"""

from __future__ import annotations

import os

from absl import app, flags, logging

from electra_tf import cli
from electra_tf.training.pretraining_run import PretrainingRequest
from electra_tf.vocab_learning import VocabOptions


def define_flags(flag_values: flags.FlagValues = flags.FLAGS, module_name: str = __name__) -> None:
    """Defines the command's flags on `flag_values`; importing the module defines none.

    Args:
        flag_values: where to define them (the study runner parses a cell's
            flags on a set of its own).
        module_name: the command's module; the flags count as its own (they
            are listed by its --helpshort).
    """
    cli.define_option_flags(PretrainingRequest, flag_values, module_name)
    cli.define_strategy_flags(module_name, flag_values)
    cli.define_vocab_flags(module_name, flag_values)
    cli.define_config_flags(flag_values, module_name)


def request_from_flags(flag_values: flags.FlagValues = flags.FLAGS) -> PretrainingRequest:
    """The `PretrainingRequest` of the flags of `define_flags` (parsed)."""
    return PretrainingRequest(
        **cli.field_values(PretrainingRequest, flag_values),
        overrides=cli.overrides_from_flags(flag_values),
        vocab_options=cli.options_from_flags(VocabOptions, flag_values),
        working_dir=os.getcwd(),
    )


def _say(message: str) -> None:
    print(message, flush=True)


def main(arguments: list[str], flag_values: flags.FlagValues) -> int:
    """Plans the run, runs it and prints where everything is. Returns the exit code."""
    del arguments
    from electra_tf.artifacts.export_dir import ExportDir
    from electra_tf.artifacts.run_dir import RunDir
    from electra_tf.distribute import is_chief
    from electra_tf.errors import RunError
    from electra_tf.training import pretraining_run

    # Progress is printed here; the library's INFO logs would repeat it.
    logging.set_verbosity(logging.WARNING)
    # Before any other TensorFlow work. On KERAS_BACKEND=jax: Keras' distribution.
    strategy = cli.strategy_from_flags(flag_values, backends=("tensorflow", "jax"))
    try:
        planned = pretraining_run.plan(request_from_flags(flag_values), print_fn=_say)
        result = pretraining_run.run(planned, strategy, print_fn=_say)
    except RunError as error:
        raise app.UsageError(str(error))
    if is_chief(strategy):  # the other workers wrote nothing to the run directory
        run_dir = RunDir(result.run_dir)
        _say("")
        _say(f"TensorBoard:  tensorboard --logdir {run_dir.tensorboard}")
        _say(f"Checkpoints:  {run_dir.checkpoints}")
        if result.export_dir:
            _say(
                f"Export:       {result.export_dir} "
                f"({', '.join(ExportDir(result.export_dir).contents())})"
            )
    return 130 if result.interrupted else 0


def run() -> None:
    """The `pretrain.py` / `electra-pretrain` command."""
    cli.run_command(define_flags, main, __name__)


if __name__ == "__main__":
    run()
