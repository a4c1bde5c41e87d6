"""SQuAD fine-tuning runs: windows, training with layer-wise decay, decoding, official scores.

The output directory and results.json are described in
`electra_tf.artifacts.finetuning_dir` and `electra_tf.artifacts.results`; the
dev metrics are exact_match and f1 (and for 2.0 the HasAns/NoAns breakdowns
and best thresholds). results.json is rewritten after every trial and
training checkpoints every `save_checkpoints_steps`, so re-running the same
command skips finished trials and resumes an interrupted one from its last
checkpoint.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import time
from typing import Optional

import keras
import tensorflow as tf

from electra_tf.artifacts.files import copy_file, write_json
from electra_tf.artifacts.finetuning_dir import FinetuningDir, TrialDir
from electra_tf.artifacts.pretrained import Pretrained, load_discriminator
from electra_tf.artifacts.results import (finished_trials, make_results, squad_task,
                                          write_results)
from electra_tf.errors import RunError
from electra_tf.finetuning import squad_decoding, squad_features, squad_metrics
from electra_tf.finetuning.optimization import (DEFAULT_LAYERWISE_DECAY, DEFAULT_LEARNING_RATES,
                                                create_optimizer, learning_rate_schedule)
from electra_tf.finetuning.qa_model import build_qa_model, save_qa_model
from electra_tf.training.finetuning_run import check_settings, check_vocab
from electra_tf.finetuning.squad_data import SquadSplit
from electra_tf.training.callbacks import CheckpointSaver, ProgressMonitor, format_duration

PREDICTIONS_FILE = "predictions.json"
NULL_ODDS_FILE = "null_odds.json"
NBEST_FILE = "nbest_predictions.json"
# The original code's threshold for SQuAD 2.0 test predictions.
DEFAULT_NULL_THRESHOLD = -2.75
_RESUMABLE = ("num_trials", "output_dir", "log_every_steps", "save_models", "eval_batch_size",
              "save_checkpoints_steps")


@dataclasses.dataclass
class SquadSettings:
    """Hyperparameters of a SQuAD run (defaults: the original code's QA settings)."""

    output_dir: str
    version: str = "1.1"
    model_size: Optional[str] = None
    max_seq_length: int = 512
    doc_stride: int = 128
    max_query_length: int = 64
    train_batch_size: int = 32
    eval_batch_size: int = 32
    learning_rate: Optional[float] = None
    num_train_epochs: float = 2.0
    warmup_proportion: float = 0.1
    layerwise_lr_decay: Optional[float] = None
    layerwise_lr_decay_quirk: bool = False
    weight_decay_rate: float = 0.0
    clip_norm: float = 1.0
    beam_size: int = 20
    n_best_size: int = squad_decoding.N_BEST_SIZE
    max_answer_length: int = squad_decoding.MAX_ANSWER_LENGTH
    null_score_threshold: float = DEFAULT_NULL_THRESHOLD
    num_trials: int = 1
    seed: int = 0
    log_every_steps: int = 50
    save_checkpoints_steps: int = 500
    save_models: bool = True

    def resolve(self, model_size: str) -> "SquadSettings":
        """Fills the size-dependent defaults and checks every value."""
        resolved = dataclasses.replace(self, model_size=model_size)
        if resolved.learning_rate is None:
            resolved.learning_rate = DEFAULT_LEARNING_RATES[model_size]
        if resolved.layerwise_lr_decay is None:
            resolved.layerwise_lr_decay = DEFAULT_LAYERWISE_DECAY[model_size]
        check_settings(resolved, ("max_seq_length", "doc_stride", "max_query_length",
                                  "train_batch_size", "eval_batch_size", "beam_size",
                                  "n_best_size", "max_answer_length", "num_trials",
                                  "log_every_steps", "save_checkpoints_steps"))
        return resolved


def score(version: str, examples, predictions: dict, null_odds: dict, threshold: float) -> dict:
    """Official-style scores; `exact_match` and `f1` are the headline numbers."""
    gold = {e.qas_id: [text for text, _ in e.answers] for e in examples}
    if version == "1.1":
        return squad_metrics.evaluate_v1(gold, predictions)
    results = squad_metrics.evaluate_v2(gold, predictions, null_odds, threshold)
    return {"exact_match": results["exact"], **results}


def predict_and_score(model, examples, features, settings: SquadSettings, directory: str
                      ) -> dict:
    """Runs the model over the evaluation windows, writes the prediction files, scores them.

    The beam search holds a [batch, beam, length, 512] activation: about 0.7 GB
    per 32 windows of 512 tokens with beam 20 (lower --eval_batch_size if short).
    """
    dataset = squad_features.make_dataset(features, settings.eval_batch_size, with_labels=False)
    outputs = model.predict(dataset, verbose=0)
    predictions, null_odds, nbest = squad_decoding.decode(
        examples, features, outputs, settings.n_best_size, settings.max_answer_length)
    trial = TrialDir(directory)
    os.makedirs(directory, exist_ok=True)
    write_json(trial.file(NBEST_FILE), nbest)
    if settings.version == "2.0":
        submission = squad_decoding.apply_null_threshold(predictions, null_odds,
                                                         settings.null_score_threshold)
        write_json(trial.file(NULL_ODDS_FILE), null_odds)
    else:
        submission = predictions
    write_json(trial.file(PREDICTIONS_FILE), submission)
    return score(settings.version, examples, predictions, null_odds,
                 settings.null_score_threshold)


def train_trial(model, encoder, features, settings: SquadSettings, total_steps: int,
                trial_dir: str, seed: int, print_fn=print, extra_callbacks=()) -> float:
    """Trains one trial, resuming from `trial_dir/checkpoints` if a checkpoint is there.

    Returns:
        Seconds spent training in this call.
    """
    optimizer = create_optimizer(
        model, encoder.num_layers, settings.learning_rate, total_steps,
        settings.warmup_proportion, settings.layerwise_lr_decay, settings.weight_decay_rate,
        settings.layerwise_lr_decay_quirk, settings.clip_norm)
    optimizer.build(model.trainable_variables)
    model.compile(optimizer=optimizer, jit_compile=False)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
    manager = tf.train.CheckpointManager(checkpoint, TrialDir(trial_dir).checkpoints,
                                         max_to_keep=1)
    if manager.latest_checkpoint:
        checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
        print_fn(f"Resumed from {manager.latest_checkpoint} "
                 f"(step {int(optimizer.iterations.numpy())}).")
    done = int(optimizer.iterations.numpy())
    if done >= total_steps:
        return 0.0
    started = time.perf_counter()
    schedule = learning_rate_schedule(settings.learning_rate, total_steps,
                                      settings.warmup_proportion)
    writer = tf.summary.create_file_writer(TrialDir(trial_dir).tensorboard)
    progress = ProgressMonitor(writer, total_steps, settings.train_batch_size,
                               settings.log_every_steps, schedule, print_fn=print_fn,
                               console_keys=("loss", "span_loss", "answerable_loss"))
    saver = CheckpointSaver(manager, settings.save_checkpoints_steps, print_fn=print_fn)
    # The same batch stream as an uninterrupted run: skip the batches done.
    data = squad_features.make_dataset(features, settings.train_batch_size, shuffle_seed=seed,
                                       repeat=True).skip(done)
    model.fit(data, epochs=1, steps_per_epoch=total_steps - done, verbose=0,
              callbacks=[*extra_callbacks, progress, saver])
    if saver.stop_signal is not None:
        raise KeyboardInterrupt
    return time.perf_counter() - started


def run_squad(train: Optional[SquadSplit], evaluation: Optional[SquadSplit],
              pretrained: Pretrained, settings: SquadSettings, vocab_flag_given: bool = False,
              print_fn=print) -> dict:
    """Runs `settings.num_trials` SQuAD trials; returns results (also in results.json).

    Args:
        train: training questions.
        evaluation: questions to predict and score (None: train only).
        pretrained: the checkpoint to start from.
        settings: hyperparameters and output directory.
        vocab_flag_given: whether the vocabulary came from --vocab_file (messages).
        print_fn: console output.

    Raises:
        RunError: inconsistent settings, vocabulary or output directory.
    """
    from electra_tf.tokenization import VocabError, WordPieceTokenizer

    config = pretrained.config
    settings = settings.resolve(config.model_size)
    try:
        tokenizer = WordPieceTokenizer(pretrained.vocab_file, config.do_lower_case,
                                       config.resolved_strip_accents)
    except VocabError as error:
        raise RunError(f"{'--vocab_file' if vocab_flag_given else 'vocab.txt'}: {error}")
    if config.model.vocab_size != tokenizer.vocab_size:
        raise RunError(f"{tokenizer.vocab_file} has {tokenizer.vocab_size} tokens but the "
                       f"checkpoint was pre-trained with {config.model.vocab_size}.")
    if settings.max_seq_length > config.model.max_position_embeddings:
        raise RunError(f"--max_seq_length={settings.max_seq_length} exceeds the checkpoint's "
                       f"{config.model.max_position_embeddings} position embeddings.")
    if train is None:
        raise RunError("SQuAD runs need training data (--train_file or TFDS).")

    os.makedirs(settings.output_dir, exist_ok=True)
    output = FinetuningDir(settings.output_dir)
    results_path = output.results_file
    identity = {"task": squad_task(settings.version, train.source,
                                   evaluation.source if evaluation else None),
                "init_checkpoint": pretrained.model_file,
                "vocab_file": os.path.abspath(pretrained.vocab_file),
                # The version is part of the task.
                "settings": {k: v for k, v in dataclasses.asdict(settings).items()
                             if k not in _RESUMABLE and k != "version"}}
    trials = finished_trials(results_path, identity, settings.num_trials)

    started = time.perf_counter()
    offsets = squad_features.OffsetTokenizer(tokenizer)
    window_args = dict(max_seq_length=settings.max_seq_length, doc_stride=settings.doc_stride,
                       max_query_length=settings.max_query_length, offset_tokenizer=offsets)
    try:
        train_features = squad_features.convert_examples(train.examples, tokenizer,
                                                         is_training=True, **window_args)
        eval_features = None
        if evaluation is not None:
            eval_features = squad_features.convert_examples(evaluation.examples, tokenizer,
                                                            **window_args)
    except ValueError as error:  # lengths that leave no room for the context
        raise RunError(str(error)) from None
    print_fn(f"SQuAD {settings.version}: {len(train):,} training questions -> "
             f"{len(train_features):,} windows of {settings.max_seq_length} tokens "
             f"({train.skipped + train_features.skipped} skipped: answer not found in the "
             "context)"
             + (f"; {len(evaluation):,} questions to predict -> {len(eval_features):,} windows"
                if evaluation else "") + f" [{format_duration(time.perf_counter() - started)}]")
    data_counts = {"num_train_questions": len(train), "num_train_windows": len(train_features),
                   "skipped_train_questions": train.skipped + train_features.skipped}

    steps_per_epoch = math.ceil(len(train_features) / settings.train_batch_size)
    total_steps = max(1, int(round(steps_per_epoch * settings.num_train_epochs)))
    print_fn(f"{settings.model_size} model, lr {settings.learning_rate:g}, layer-wise decay "
             f"{settings.layerwise_lr_decay:g}, batch {settings.train_batch_size}, "
             f"{settings.num_train_epochs:g} epochs = {total_steps} steps, "
             f"{settings.num_trials} trial(s).")
    finished = {t["trial"] for t in trials}
    for trial in range(settings.num_trials):
        if trial in finished:
            print_fn(f"Trial {trial}: already finished (in {results_path}), skipped.")
            continue
        seed = settings.seed + trial
        trial_dir = output.trial(trial)
        print_fn(f"--- Trial {trial + 1}/{settings.num_trials} (seed {seed}) ---")
        keras.backend.clear_session()
        keras.utils.set_random_seed(seed)
        encoder = load_discriminator(pretrained.model_file).encoder
        check_vocab(encoder, tokenizer, vocab_flag_given)
        model = build_qa_model(encoder, settings.beam_size, seed)
        seconds = train_trial(model, encoder, train_features, settings, total_steps,
                              trial_dir.path, seed, print_fn)
        predict_started = time.perf_counter()
        scores, predictions = {}, {}
        if evaluation is not None:
            scores = predict_and_score(model, evaluation.examples, eval_features, settings,
                                       trial_dir.path)
            shown = ", ".join(f"{k} {v:.2f}" for k, v in scores.items()
                              if k in ("exact_match", "f1", "best_exact", "best_f1"))
            print_fn(f"Trial {trial}: {shown}")
            names = [PREDICTIONS_FILE, NBEST_FILE] + (
                [NULL_ODDS_FILE] if settings.version == "2.0" else [])
            predictions = {name: trial_dir.file(name) for name in names}
            if trial == 0:
                for name in names:
                    if name != NBEST_FILE:
                        copy_file(trial_dir.file(name), output.file(name))
        model_file = None
        if settings.save_models:
            model_file = save_qa_model(model, trial_dir.path, {
                "squad_version": settings.version, "max_seq_length": settings.max_seq_length,
                "doc_stride": settings.doc_stride, "max_query_length": settings.max_query_length,
                "max_answer_length": settings.max_answer_length,
                "null_score_threshold": settings.null_score_threshold,
                "do_lower_case": config.do_lower_case,
                "strip_accents": config.resolved_strip_accents})
            shutil.copyfile(pretrained.vocab_file, trial_dir.vocab_file)
        trials.append({"trial": trial, "seed": seed, "steps": total_steps, "dev": scores,
                       "epochs": [], "train_seconds": round(seconds, 1),
                       "predict_seconds": round(time.perf_counter() - predict_started, 1),
                       "model": model_file, "predictions": predictions})
        write_results(results_path, make_results(identity, data_counts, "f1", trials))
        # Only once the trial is on record: a crash before this point resumes.
        shutil.rmtree(trial_dir.checkpoints, ignore_errors=True)
        print_fn(f"Trial {trial}: trained in {format_duration(seconds)}; results in "
                 f"{results_path}")
    results = make_results(identity, data_counts, "f1", trials)
    if trials:
        write_results(results_path, results)
    return results
