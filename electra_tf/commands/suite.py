"""Run KoELECTRA's or Chinese-ELECTRA's benchmark suite: every task whose files are present.

    python -m electra_tf.commands.suite --suite=koelectra --data_dir=KoELECTRA/finetune/data \\
        --init_checkpoint=runs/ko-small --output_dir=suites/ko-small
    python -m electra_tf.commands.suite --suite=chinese-electra --data_dir=finetuning_data \\
        --init_checkpoint=runs/zh-small --output_dir=suites/zh-small --num_trials=10
    python -m electra_tf.commands.suite --suite=koelectra --data_dir=data --init_checkpoint=runs/ko \\
        --output_dir=suites/ko --tasks=nsmc,naver-ner --baseline=random_init

Each task is read from its files as the project distributes them and scored
by the project's metric; a task whose training or scored file is absent is
skipped (the paths looked for are listed). Every task trains with the
settings the project publishes for the checkpoint's model size (tiny takes
small's, large base's) unless --num_train_epochs, --max_seq_length,
--train_batch_size or --learning_rate say otherwise, and is a fine-tuning
run of its own in <output_dir>/<task>/ (results.json, each trial's model
and predictions). --baseline=random_init also fine-tunes every task from a
randomly initialised encoder of the same size, into
<output_dir>/random_init/<task>/.

<output_dir>/suite.json holds each task's median score in the published
table's unit, its trials, the best trial's predictions file and its
results.json; <output_dir>/suite.md sets our row beside the published rows.
Running the same command again skips finished tasks and trials and resumes
an interrupted one.
"""

from __future__ import annotations

import warnings

from absl import app, flags, logging

from electra_tf import cli
from electra_tf.finetuning.benchmarks.options import SuiteOptions
from electra_tf.finetuning.kind.settings import FinetuneSettings

PROGRAM = "python -m electra_tf.commands.suite"
# The fine-tuning settings every task of the suite shares (the rest come from the recipes).
SHARED_SETTINGS = (
    "num_trials",
    "seed",
    "eval_batch_size",
    "log_every_steps",
    "save_checkpoints_steps",
    "save_models",
    "mixed_precision",
    "gradient_accumulation_steps",
    "jit_compile",
    "kernels",
    "group_by_length",
)
REQUIRED = ("suite", "data_dir", "init_checkpoint", "output_dir")

# Keras warns that fit() ignores shuffle=True for a tf.data input; ours shuffles itself.
warnings.filterwarnings("ignore", message=".*shuffle=True.*")


def define_flags(flag_values: flags.FlagValues) -> None:
    """The suite's flags, the shared fine-tuning settings' and the devices'."""
    cli.define_field_flags(SuiteOptions, __name__, flag_values)
    cli.define_field_flags(FinetuneSettings, __name__, flag_values, only=SHARED_SETTINGS)
    cli.define_strategy_flags(__name__, flag_values)
    for name in REQUIRED:
        flags.mark_flag_as_required(name, flag_values)


def _say(message: str) -> None:
    print(message, flush=True)


def run(arguments: list[str], flag_values: flags.FlagValues) -> int:
    """Runs the suite the flags describe; prints where its tables are."""
    if arguments:
        raise app.UsageError(
            f"unexpected arguments: {' '.join(arguments)} (every input is a flag)."
        )
    logging.set_verbosity(logging.WARNING)
    strategy = cli.strategy_from_flags(flag_values)  # before any other TensorFlow work
    from electra_tf.artifacts.pretrained import resolve_pretrained
    from electra_tf.artifacts.suite_dir import SuiteDir
    from electra_tf.distribute import is_chief
    from electra_tf.errors import RunError
    from electra_tf.finetuning.benchmarks.options import select_tasks, suite_named
    from electra_tf.finetuning.kind.files import TaskDataError
    from electra_tf.interop.checkpoints import CheckpointError
    from electra_tf.interop.imported_runs import import_if_foreign
    from electra_tf.training.suite_run import run_suite

    options = cli.options_from_flags(SuiteOptions, flag_values)
    output = SuiteDir(options.output_dir)
    base = FinetuneSettings(
        output_dir=options.output_dir,
        **{name: flag_values[name].value for name in SHARED_SETTINGS},
    )
    try:
        select_tasks(suite_named(options.suite), options.tasks)  # before anything is loaded
        pretrained = resolve_pretrained(
            import_if_foreign(
                options.init_checkpoint, output.imported_checkpoint, options.vocab_file, _say
            ),
            options.vocab_file,
        )
        run_suite(options, pretrained, base, print_fn=_say, strategy=strategy)
    except (RunError, TaskDataError, CheckpointError) as error:
        raise app.UsageError(str(error))
    if is_chief(strategy):
        _say("")
        with open(output.table_file, encoding="utf-8") as f:
            _say(f.read().rstrip())
        _say("")
        _say(f"Suite: {output.suite_file}, {output.table_file}")
    return 0


def main(argv: list[str]) -> int:
    """Runs the command in this process on `argv` (no program name); returns the exit code."""
    return cli.call(define_flags, run, argv, PROGRAM)


if __name__ == "__main__":
    cli.run_command(define_flags, run, __name__)
