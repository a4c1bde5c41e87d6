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
import sys
import warnings

from absl import app, flags, logging

from electra_tf import cli
from electra_tf.config import KERNELS, KERNELS_HELP, MIXED_PRECISION_POLICIES, MODEL_SIZES

# Keras warns that fit() ignores shuffle=True for a tf.data input; ours shuffles itself.
warnings.filterwarnings("ignore", message=".*shuffle=True.*")

# Caches and runs go under the working directory unless flags say otherwise.
WORKING_DIR = os.getcwd()
GLUE_TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte")

# --- what and from where
flags.DEFINE_string("task", None, f"GLUE task ({', '.join(GLUE_TASKS)}), squad (question "
                    "answering, see --squad_version), or a name for your own task given with "
                    "--train_file (default name: custom).")
flags.DEFINE_string("init_checkpoint", None, "Pre-training run directory, its export/ "
                    "directory or discriminator.keras; or a google-research/electra checkpoint "
                    "or Hugging Face ELECTRA directory (converted once into runs/imported/).")
flags.DEFINE_string("vocab_file", None, "Vocabulary (default: the checkpoint's vocab.txt).")
flags.DEFINE_boolean("random_init", False, "No-pre-training baseline: the --init_checkpoint's "
                     "encoder (architecture, vocabulary, tokenizer) with freshly drawn weights, "
                     "fine-tuned the same way, to see what pre-training adds.")
flags.DEFINE_enum("model_size", None, MODEL_SIZES, "Default: the checkpoint's; if given it must "
                  "match it. Selects the default learning rate and layer-wise decay.")
flags.DEFINE_string("data_dir", None, "GLUE data in the standard layout (CoLA/, SST-2/, ...). "
                    "Without it, GLUE tasks are read from TensorFlow Datasets (prepared data only).")
flags.DEFINE_string("tfds_data_dir", None, "Where TFDS datasets are prepared (default: TFDS's).")
# --- the user's own data
flags.DEFINE_string("train_file", None, "Your training data: .csv, .tsv/.txt (tab-separated, "
                    "with a header) or .jsonl; with --task=squad a SQuAD-format JSON file; with "
                    "--task_type=tagging CoNLL columns (word first, tag last) or .jsonl.")
flags.DEFINE_string("dev_file", None, "Your dev data (same format), scored after every epoch.")
flags.DEFINE_string("test_file", None, "Unlabelled data to predict (same format).")
flags.DEFINE_string("text_column", "text", "Column of the (first) text (tagging JSONL: the "
                    "list of words, default tokens).")
flags.DEFINE_string("text_pair_column", None, "Column of the second text of a pair task.")
flags.DEFINE_string("label_column", "label", "Column of the label (tagging JSONL: the list of "
                    "tags, default tags).")
flags.DEFINE_string("index_column", None, "Column of the example id written with test "
                    "predictions (default: the row number).")
flags.DEFINE_enum("task_type", "classification", ["classification", "regression", "tagging"],
                  "Your task's kind: tagging labels every word (NER, chunking, part of speech).")
flags.DEFINE_float("label_scale", 1.0, "Regression: targets are divided by it for training and "
                   "predictions multiplied by it (5 for KorSTS's 0-5 scores, as the original "
                   "code does for STS-B).")
flags.DEFINE_list("labels", None, "Class names in id order (default: the sorted labels of the "
                  "training file; tagging: its tags, O first).")
flags.DEFINE_enum("tag_format", "auto", ["auto", "prefix", "suffix", "plain"], "Tagging: "
                  "prefix (B-PER, I-PER, E-PER, S-PER, O) or suffix (PER-B, ...) tags are scored "
                  "as entities; plain tags (part of speech) by accuracy. auto: from the "
                  "training tags.")
flags.DEFINE_enum("quoting", "csv", ["csv", "none"], "CSV/TSV files: csv = fields may be "
                  "wrapped in double quotes (doubled inside); none = quotes are plain text.")
# --- question answering (--task=squad)
flags.DEFINE_enum("squad_version", "1.1", ["1.1", "2.0"], "SQuAD version: 2.0 has unanswerable "
                  "questions (null odds, threshold search).")
flags.DEFINE_enum("qa_metric", None, ["squad", "korquad", "cmrc2018", "drcd"], "Whose "
                  "official scores to report: SQuAD's, KorQuAD 1.0's (character F1), CMRC "
                  "2018's or DRCD's (mixed segmentation, longest common run). Default: the one "
                  "the --predict_file's version field names (KorQuAD_v1.0_dev), else squad.")
flags.DEFINE_string("predict_file", None, "SQuAD-format JSON to predict and score (with "
                    "--task=squad; default: TFDS squad validation when --train_file is absent).")
flags.DEFINE_integer("doc_stride", 128, "SQuAD: tokens between the starts of context windows.")
flags.DEFINE_integer("max_query_length", 64, "SQuAD: question tokens kept.")
flags.DEFINE_integer("max_answer_length", 30, "SQuAD: longest answer in tokens.")
flags.DEFINE_integer("n_best_size", 20, "SQuAD: candidate answers kept per question.")
flags.DEFINE_integer("beam_size", 20, "SQuAD: start positions (and ends per start) searched.")
flags.DEFINE_float("null_score_threshold", -2.75, "SQuAD 2.0: a question whose null odds exceed "
                   "it is answered with the empty string (the original code's -2.75).")
# --- run
flags.DEFINE_string("output_dir", None, "Default: runs/finetune/<task>-<checkpoint name>.")
flags.DEFINE_integer("num_trials", 1, "Fine-tuning runs with seeds seed, seed+1, ...; the median "
                     "is reported (the paper: median of 10).")
flags.DEFINE_integer("seed", 0, "Seed of the first trial.")
flags.DEFINE_integer("max_seq_length", None, "Tokens per example, special tokens included "
                     "(default: 128; 512 for squad).")
flags.DEFINE_integer("train_batch_size", 32, "Examples per step.")
flags.DEFINE_integer("eval_batch_size", 32, "Examples per prediction batch.")
flags.DEFINE_float("learning_rate", None, "Peak learning rate (default: 3e-4 tiny/small, 1e-4 "
                   "base, 5e-5 large).")
flags.DEFINE_float("num_train_epochs", None, "Default: 10 for rte and stsb, 2 for squad, else 3.")
flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of steps of linear warmup.")
flags.DEFINE_float("layerwise_lr_decay", None, "Learning-rate factor per layer from the top "
                   "(default 0.8, 0.9 for large; 1 disables).")
flags.DEFINE_boolean("layerwise_lr_decay_quirk", False, "Reproduce the original code: the top "
                     "transformer layer gets lr*decay^2 instead of lr*decay.")
flags.DEFINE_float("weight_decay_rate", 0.0, "Decoupled weight decay (paper: 0; original code: "
                   "0.01).")
flags.DEFINE_integer("max_train_examples", None, "Train on this many examples drawn from the "
                     "training set (the same draw for every run; for quick comparisons).")
flags.DEFINE_boolean("double_unordered", False, "Pair tasks: also train on every pair in the "
                     "B, A order (the original does this for MRPC and STS-B).")
flags.DEFINE_integer("log_every_steps", 50, "Console / TensorBoard interval in steps.")
flags.DEFINE_integer("save_checkpoints_steps", 500, "Training checkpoint interval in steps; an "
                     "interrupted trial resumes from the last one.")
flags.DEFINE_boolean("restart", False, "Start unfinished trials again from step 0 although they "
                     "have checkpoints (moved aside to checkpoints.before-restart-<time>/, not "
                     "deleted). Without it an unfinished trial always resumes.")
flags.DEFINE_boolean("save_models", True, "Save each trial's fine-tuned model (model.json + "
                     "model.weights.h5).")
flags.DEFINE_string("export_model_name", None, "TF Serving model name of the export written to "
                    "<output_dir>/export/<name>/<version>/ from the best trial (default: the "
                    "task name; needs --save_models).")
flags.DEFINE_boolean("export", True, "Write that TF Serving export at the end.")
# --- devices, precision and the training step
cli.define_strategy_flags(__name__)
flags.DEFINE_enum("mixed_precision", "none", MIXED_PRECISION_POLICIES, "none, float16 (with "
                  "dynamic loss scaling) or bfloat16. Saved models and exports are float32.")
flags.DEFINE_boolean("jit_compile", False, "Compile the training step with XLA (with several "
                     "replicas: each replica's forward and backward pass).")
flags.DEFINE_integer("gradient_accumulation_steps", 1, "Split each batch into this many "
                     "micro-batches whose gradients are summed before one update (same update, "
                     "less memory).")
flags.DEFINE_enum("loss_reduction", "mean", ["mean", "sum"], "mean: the loss is the mean of the "
                  "per-example losses over the global batch. sum: their sum, as the original "
                  "code (run_finetuning.py) computes it; the gradient is then batch-size times "
                  "larger, so the global-norm clip at 1.0 bites on almost every step and sets "
                  "the step size.")
flags.DEFINE_enum("kernels", "reference", KERNELS, KERNELS_HELP)
flags.mark_flag_as_required("init_checkpoint")
FLAGS = flags.FLAGS


def _say(message: str) -> None:
    print(message, flush=True)


def _load_task():
    from electra_tf.finetuning import tasks

    if FLAGS.train_file:
        if FLAGS.task in GLUE_TASKS:
            raise app.UsageError(f"--task={FLAGS.task} is a GLUE task but --train_file is set; "
                                 "give your task another name (or drop --train_file).")
        options = tasks.FileTaskOptions(
            text_column=FLAGS.text_column, text_pair_column=FLAGS.text_pair_column,
            label_column=FLAGS.label_column, index_column=FLAGS.index_column,
            task_type=FLAGS.task_type, labels=FLAGS.labels, quoting=FLAGS.quoting,
            label_scale=FLAGS.label_scale)
        return tasks.load_user_files(FLAGS.task or "custom", options, FLAGS.train_file,
                                     FLAGS.dev_file, FLAGS.test_file)
    if FLAGS.task is None:
        raise app.UsageError(f"Give --task ({', '.join(GLUE_TASKS)}) or --train_file.")
    if FLAGS.dev_file or FLAGS.test_file:
        raise app.UsageError("--dev_file / --test_file need --train_file.")
    task = tasks.glue_task(FLAGS.task)
    if FLAGS.data_dir:
        return task, tasks.load_glue_dir(task, FLAGS.data_dir, warn=_say)
    return task, tasks.load_tfds(task, FLAGS.tfds_data_dir)


def _imported_if_foreign(path: str) -> str:
    """Converts an original-code or Hugging Face checkpoint once into a run directory.

    It goes to <output_dir>/imported_checkpoint, or runs/imported/<name>-<hash>
    without --output_dir; later runs reuse it.
    """
    import hashlib

    from electra_tf.artifacts.finetuning_dir import FinetuningDir
    from electra_tf.artifacts.run_dir import RunDir, read_import_source, write_import_source
    from electra_tf.interop import checkpoints

    try:
        kind = checkpoints.detect_format(path)
    except checkpoints.CheckpointError as error:
        if os.path.isfile(path):  # a .keras file: resolve_pretrained handles it
            return path
        raise checkpoints.CheckpointError(f"--init_checkpoint: {error}")
    if kind == "electra-tf":
        return path
    source = os.path.abspath(path)
    digest = hashlib.sha256(source.encode()).hexdigest()[:8]
    target = (FinetuningDir(FLAGS.output_dir).imported_checkpoint if FLAGS.output_dir else
              os.path.join(WORKING_DIR, "runs", "imported",
                           f"{os.path.basename(source.rstrip('/'))}-{digest}"))
    imported = RunDir(target)
    previous = read_import_source(imported)
    if os.path.exists(imported.config_file) and previous is not None:
        if previous != source:
            raise checkpoints.CheckpointError(
                f"{target} holds a conversion of {previous}, not of --init_checkpoint={source}; "
                "use another --output_dir.")
        _say(f"--init_checkpoint: using {target}, converted earlier from {source}")
        return target
    _say(f"--init_checkpoint: converting the {kind} checkpoint {source} into {target} ...")
    checkpoints.write_run_dir(checkpoints.load_checkpoint(source), target,
                              vocab_file=FLAGS.vocab_file, print_fn=_say)
    write_import_source(imported, source)
    return target


def _default(value, fallback):
    return fallback if value is None else value


def _output_dir(task_name: str, model_file: str) -> str:
    from electra_tf.artifacts.pretrained import run_name

    suffix = "-random-init" if FLAGS.random_init else ""
    return FLAGS.output_dir or os.path.join(WORKING_DIR, "runs", "finetune",
                                            f"{task_name}-{run_name(model_file)}{suffix}")


def _settings(output_dir: str):
    from electra_tf.finetuning.settings import FinetuneSettings

    return FinetuneSettings(
        output_dir=output_dir, train_batch_size=FLAGS.train_batch_size,
        eval_batch_size=FLAGS.eval_batch_size, learning_rate=FLAGS.learning_rate,
        num_train_epochs=FLAGS.num_train_epochs, warmup_proportion=FLAGS.warmup_proportion,
        layerwise_lr_decay=FLAGS.layerwise_lr_decay,
        layerwise_lr_decay_quirk=FLAGS.layerwise_lr_decay_quirk,
        weight_decay_rate=FLAGS.weight_decay_rate, num_trials=FLAGS.num_trials, seed=FLAGS.seed,
        log_every_steps=FLAGS.log_every_steps,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps, save_models=FLAGS.save_models,
        mixed_precision=FLAGS.mixed_precision, loss_reduction=FLAGS.loss_reduction,
        gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
        jit_compile=FLAGS.jit_compile, kernels=FLAGS.kernels, random_init=FLAGS.random_init)


def _squad_task():
    """The SQuAD task of the flags (SQuAD JSON files, or TFDS without --train_file)."""
    from electra_tf.finetuning import squad_data
    from electra_tf.finetuning.squad_task import SquadTask

    for flag in ("dev_file", "test_file", "data_dir"):
        if getattr(FLAGS, flag):
            raise app.UsageError(f"--{flag} is not used with --task=squad (use --train_file / "
                                 "--predict_file).")
    if FLAGS.predict_file and not FLAGS.train_file:
        raise app.UsageError("--predict_file needs --train_file (or drop both to use TFDS).")
    version = FLAGS.squad_version
    if FLAGS.train_file:
        train = squad_data.read_squad_json(FLAGS.train_file, version, True, warn=_say)
        evaluation = (squad_data.read_squad_json(FLAGS.predict_file, version, False, warn=_say)
                      if FLAGS.predict_file else None)
    else:
        train = squad_data.load_tfds_squad(version, "train", FLAGS.tfds_data_dir, True, _say)
        evaluation = squad_data.load_tfds_squad(version, "validation", FLAGS.tfds_data_dir,
                                                False, _say)
    from electra_tf.finetuning.qa_metrics import metric_for_version

    metric = FLAGS.qa_metric or metric_for_version(
        (evaluation or train).dataset_version)
    if FLAGS.qa_metric is None and metric != "squad":
        _say(f"Scoring with {metric}'s official metric (the data's version field says "
             f"{(evaluation or train).dataset_version!r}; --qa_metric overrides).")
    return SquadTask(train, evaluation, version,
                     qa_metric=metric,
                     max_seq_length=_default(FLAGS.max_seq_length, 512),
                     doc_stride=FLAGS.doc_stride, max_query_length=FLAGS.max_query_length,
                     beam_size=FLAGS.beam_size, n_best_size=FLAGS.n_best_size,
                     max_answer_length=FLAGS.max_answer_length,
                     null_score_threshold=FLAGS.null_score_threshold)


def _classification_task():
    """The classification or regression task of the flags (GLUE or the user's files)."""
    from electra_tf.finetuning.classification import ClassificationTask

    definition, data = _load_task()
    if not data.dev:
        _say("No dev set: training only (give --dev_file to score every epoch).")
    return ClassificationTask(definition, data, _default(FLAGS.max_seq_length, 128),
                              FLAGS.double_unordered, FLAGS.max_train_examples)


def _tagging_task():
    """The token classification task of the flags (the user's CoNLL / JSONL files)."""
    from electra_tf.finetuning.tagging_data import load_tagging_files
    from electra_tf.finetuning.tagging_task import TaggingTask

    if not FLAGS.train_file:
        raise app.UsageError("--task_type=tagging needs --train_file (CoNLL columns or JSONL).")
    for flag in ("text_pair_column", "index_column", "data_dir", "predict_file",
                 "double_unordered"):
        if getattr(FLAGS, flag):
            raise app.UsageError(f"--{flag} is not used with --task_type=tagging.")
    definition, data = load_tagging_files(
        FLAGS.task or "tagging", FLAGS.train_file, FLAGS.dev_file, FLAGS.test_file,
        FLAGS.tag_format, FLAGS.labels,
        words_key=FLAGS.text_column if FLAGS["text_column"].present else "tokens",
        tags_key=FLAGS.label_column if FLAGS["label_column"].present else "tags", warn=_say)
    if data.dev is None:
        _say("No dev set: training only (give --dev_file to score every epoch).")
    return TaggingTask(definition, data, _default(FLAGS.max_seq_length, 128),
                       FLAGS.max_train_examples)


def _task():
    """The task the flags describe."""
    if FLAGS.task == "squad":
        return _squad_task()
    if FLAGS.task_type == "tagging":
        return _tagging_task()
    return _classification_task()


def _export_best_trial(output_dir: str, default_name: str) -> None:
    """Writes the TF Serving export of the best trial (unless --noexport / --nosave_models)."""
    from electra_tf.artifacts.finetuning_dir import FinetuningDir, best_saved_trial
    from electra_tf.serving.exporter import export_finetuned_dir

    trial = best_saved_trial(output_dir)
    if not (FLAGS.export and FLAGS.save_models) or trial is None:
        return
    version_dir = export_finetuned_dir(trial.path, FinetuningDir(output_dir).export_base,
                                       FLAGS.export_model_name or default_name)
    _say(f"TF Serving export of {os.path.basename(trial.path)}: {version_dir}")


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    from electra_tf.distribute import is_chief

    strategy = cli.strategy_from_flags()  # before any other TensorFlow work
    from electra_tf.artifacts.finetuning_dir import FinetuningDir
    from electra_tf.artifacts.pretrained import resolve_pretrained
    from electra_tf.errors import RunError
    from electra_tf.finetuning.classification import format_table
    from electra_tf.finetuning.squad_data import SquadDataError
    from electra_tf.finetuning.tasks import TaskDataError
    from electra_tf.interop.checkpoints import CheckpointError
    from electra_tf.training.finetuning_loop import run_trials

    try:
        pretrained = resolve_pretrained(_imported_if_foreign(FLAGS.init_checkpoint),
                                        FLAGS.vocab_file, FLAGS.model_size)
        task = _task()
        output_dir = _output_dir(task.name, pretrained.model_file)
        results = run_trials(task, pretrained, _settings(output_dir),
                             vocab_flag_given=FLAGS.vocab_file is not None, print_fn=_say,
                             strategy=strategy, restart=FLAGS.restart)
    except (RunError, TaskDataError, SquadDataError, CheckpointError) as error:
        raise app.UsageError(str(error))
    if not is_chief(strategy):  # the chief reports and exports
        return
    _say("")
    if results["median"] and FLAGS.task == "squad":
        name = ({"korquad": "KorQuAD 1.0", "cmrc2018": "CMRC 2018", "drcd": "DRCD"}.get(
            task.qa_metric, f"SQuAD {FLAGS.squad_version}"))
        _say(f"{name} scores (median over {len(results['trials'])} trial(s), "
             f"percent): {task.format_metrics(results['median'])}")
    elif results["median"] and FLAGS.task_type == "tagging":
        from electra_tf.finetuning.tagging_task import format_tables

        _say(f"Dev results ({task.name}, percent; primary metric: {task.primary_metric}):")
        _say(format_tables(results, task.definition.tag_format))
    elif results["median"]:
        _say(f"Dev results ({task.name}, percent; primary metric: {task.primary_metric}):")
        _say(format_table(results))
    _say(f"Results: {FinetuningDir(output_dir).results_file}")
    _export_best_trial(output_dir, task.name)


def run() -> None:
    """The `finetune.py` / `electra-finetune` command."""
    try:
        cli.run(main, __name__)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    run()
