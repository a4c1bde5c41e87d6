"""Fine-tune a pre-trained ELECTRA discriminator on a GLUE task or your own data.

    python finetune.py --task=sst2 --init_checkpoint=runs/small-builtin --data_dir=glue_data
    python finetune.py --task=rte --init_checkpoint=runs/small-builtin --num_trials=10
    python finetune.py --init_checkpoint=runs/ko --train_file=ratings_train.txt \\
        --dev_file=ratings_test.txt --text_column=document --label_column=label
    python finetune.py --task=squad --squad_version=2.0 --init_checkpoint=runs/small-builtin
    python finetune.py --task=squad --init_checkpoint=runs/ko \\
        --train_file=KorQuAD_v1.0_train.json --predict_file=KorQuAD_v1.0_dev.json
    python finetune.py --task=ner --task_type=tagging --init_checkpoint=runs/ko \\
        --train_file=ner_train.conll --dev_file=ner_dev.conll

Hyperparameters default to the paper's (Table 7): batch 32, length 128, 3
epochs (10 for RTE and STS-B), learning rate by model size, layer-wise decay
0.8 (0.9 large), warmup 10%, no weight decay. Dev metrics of every trial and
their median go to <output_dir>/results.json; re-running skips finished trials. The best
trial is exported for TF Serving to <output_dir>/export/<model_name>/<version>/.

--task=squad fine-tunes the paper's question-answering head on SQuAD-format
JSON (--train_file, --predict_file) or TFDS squad/v1.1 / squad/v2.0, with
the original code's defaults: length 512, stride 128, question <= 64 tokens,
2 epochs, beam 20, n-best 20, answers <= 30 tokens. <output_dir> receives
predictions.json (and null_odds.json for 2.0) and results.json with
exact_match and f1 (official script definitions, percent): SQuAD's, or with
--qa_metric (default: named by the data's version field) KorQuAD 1.0's, CMRC
2018's or DRCD's.

--task_type=tagging fine-tunes a token classifier (NER, chunking, part of
speech) on CoNLL column files (word first, tag last, a blank line between
sentences) or JSONL {"tokens": [...], "tags": [...]}: each word's first
piece is labelled, as in the original code. BIO and IOBES tags, with the
position as prefix (B-PER) or suffix (PER-B), are scored at the entity
level as seqeval scores them (precision, recall, f1 and per type); each
trial writes dev_predictions.txt in the conlleval layout.
"""

from __future__ import annotations

import os
import warnings

from absl import app, flags, logging

from electra_tf import cli
from electra_tf.finetuning.kind.files import FileTaskOptions
from electra_tf.finetuning.kind.settings import FinetuneSettings

# Keras warns that fit() ignores shuffle=True for a tf.data input; ours shuffles itself.
warnings.filterwarnings("ignore", message=".*shuffle=True.*")

# Caches and runs go under the working directory unless flags say otherwise.
WORKING_DIR = os.getcwd()

# The flags' help and defaults are the fields of FinetuneSettings, FileTaskOptions and
# FinetuneOptions (electra_tf.finetuning.kind.settings).
cli.define_finetune_flags(__name__)
cli.define_strategy_flags(__name__)
flags.mark_flag_as_required("init_checkpoint")
FLAGS = flags.FLAGS


def _say(message: str) -> None:
    print(message, flush=True)


def _imported_if_foreign(path: str) -> str:
    """Converts an original-code or Hugging Face checkpoint once into a run directory.

    It goes to <output_dir>/imported_checkpoint, or runs/imported/<name>-<hash>
    without --output_dir; later runs reuse it.
    """
    import hashlib

    from electra_tf.artifacts.finetuning_dir import FinetuningDir
    from electra_tf.interop.imported_runs import import_if_foreign

    source = os.path.abspath(path)
    digest = hashlib.sha256(source.encode()).hexdigest()[:8]
    target = (
        FinetuningDir(FLAGS.output_dir).imported_checkpoint
        if FLAGS.output_dir
        else os.path.join(
            WORKING_DIR, "runs", "imported", f"{os.path.basename(source.rstrip('/'))}-{digest}"
        )
    )
    return import_if_foreign(path, target, FLAGS.vocab_file, _say)


def _default(value, fallback):
    return fallback if value is None else value


def _output_dir(task_name: str, model_file: str) -> str:
    from electra_tf.artifacts.pretrained import run_name

    suffix = "-random-init" if FLAGS.random_init else ""
    return FLAGS.output_dir or os.path.join(
        WORKING_DIR, "runs", "finetune", f"{task_name}-{run_name(model_file)}{suffix}"
    )


def _settings(output_dir: str) -> FinetuneSettings:
    return FinetuneSettings(**{**cli.field_values(FinetuneSettings), "output_dir": output_dir})


def _task():
    """The task the flags describe, its data read (the first task kind that claims the flags)."""
    from electra_tf.finetuning.kind.contract import TaskOptions
    from electra_tf.finetuning.kind.settings import FinetuneOptions
    from electra_tf.finetuning.kinds import TASK_KINDS, task_from_options

    given = frozenset(name for name in FLAGS if FLAGS[name].present)
    options = TaskOptions(
        cli.options_from_flags(FinetuneOptions),
        cli.options_from_flags(FileTaskOptions),
        given,
        _say,
        {
            kind.OPTIONS: cli.options_from_flags(kind.OPTIONS)
            for kind in TASK_KINDS
            if kind.OPTIONS is not None
        },
    )
    return task_from_options(options)


def _export_best_trial(output_dir: str, default_name: str) -> None:
    """Writes the TF Serving export of the best trial (unless --noexport / --nosave_models)."""
    from electra_tf.artifacts.finetuning_dir import FinetuningDir, best_saved_trial
    from electra_tf.serving.exporter import export_finetuned_dir

    trial = best_saved_trial(output_dir)
    if not (FLAGS.export and FLAGS.save_models) or trial is None:
        return
    version_dir = export_finetuned_dir(
        trial.path, FinetuningDir(output_dir).export_base, FLAGS.export_model_name or default_name
    )
    _say(f"TF Serving export of {os.path.basename(trial.path)}: {version_dir}")


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    from electra_tf.distribute import is_chief

    strategy = cli.strategy_from_flags()  # before any other TensorFlow work
    from electra_tf.artifacts.finetuning_dir import FinetuningDir
    from electra_tf.artifacts.pretrained import resolve_pretrained
    from electra_tf.errors import RunError
    from electra_tf.finetuning.kind.files import TaskDataError
    from electra_tf.interop.checkpoints import CheckpointError
    from electra_tf.training.finetuning_loop import run_trials

    try:
        pretrained = resolve_pretrained(
            _imported_if_foreign(FLAGS.init_checkpoint), FLAGS.vocab_file, FLAGS.model_size
        )
        task = _task()
        output_dir = _output_dir(task.name, pretrained.model_file)
        results = run_trials(
            task,
            pretrained,
            _settings(output_dir),
            vocab_flag_given=FLAGS.vocab_file is not None,
            print_fn=_say,
            strategy=strategy,
            restart=FLAGS.restart,
        )
    except (RunError, TaskDataError, CheckpointError) as error:
        raise app.UsageError(str(error))
    if not is_chief(strategy):  # the chief reports and exports
        return
    _say("")
    if results["median"]:
        _say(task.format_results(results))
    _say(f"Results: {FinetuningDir(output_dir).results_file}")
    from electra_tf.artifacts.serving_dir import ExportLayoutError
    from electra_tf.serving.exporter import ExportError

    try:
        _export_best_trial(output_dir, task.name)
    except (ExportError, ExportLayoutError) as error:
        raise app.UsageError(str(error))


def run() -> None:
    """The `finetune.py` / `electra-finetune` command."""
    cli.run(main, __name__)


if __name__ == "__main__":
    run()
