"""Learning-curve parity: electra-tf against an independent Hugging Face implementation.

    python -m tools.parity --corpus=wiki.txt --corpus_megabytes=20 --vocab_size=8000 \
        --max_train_flops=2e14 --peer_python=/path/to/venv/bin/python

Both implementations train on exactly the same examples, masks and sampling
uniforms: the first N training batches of `make_pretraining_dataset` (and a
fixed set of held-out batches of `evaluation_dataset`) are written once to
`batches.npz`, then

* electra-tf's `ElectraPretrainer` trains on them with its own training
  step, optimiser and schedule (`electra-tf-seed<k>.jsonl`);
* `tools/peers/hf_electra_pretraining.py`, run by `--peer_python` (an interpreter
  with `torch` and `transformers`, which electra-tf does not need), trains
  `transformers`' `ElectraForMaskedLM` + `ElectraForPreTraining` with the
  same recipe (`transformers-seed<k>.jsonl`).

Each side starts from its own random initialisation (`--init_seeds`; the
two never share weights), so the curves agree up to seed-to-seed noise, not
bit for bit: pass several seeds to see that noise. The output directory
(default `runs/parity-<model_size>`) receives the data (corpus sample,
vocabulary, shards), `batches.npz`, `settings.json` (the peer's model and
recipe), the metric logs of every side and seed, `comparison.md` (a table of
held-out metrics at a few steps and the wall times) and the figure
(`--figure`, default `comparison.png`: discriminator loss, held-out AUC,
MLM accuracy and sampled MLM accuracy against the step). Logs of finished
runs are reused when the command is repeated with the same settings.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from typing import Optional, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

from electra_tf import tokenization, vocab_learning  # noqa: E402
from electra_tf.config import MODEL_SIZES, ConfigError, preset  # noqa: E402
from electra_tf.data.pipeline import (
    dummy_batch,  # noqa: E402
    make_pretraining_dataset,  # noqa: E402
)
from electra_tf.data.shard_build import write_shards  # noqa: E402
from electra_tf.flops import steps_within_budget  # noqa: E402
from electra_tf.pretraining.evaluation import PretrainingEvaluator, evaluation_dataset, roc_auc  # noqa: E402
from electra_tf.pretraining.objectives import ElectraPretrainer  # noqa: E402
from electra_tf.pretraining.optimization import create_optimizer, learning_rate_schedule  # noqa: E402
from tools.peer_settings import ParityError, peer_settings  # noqa: E402
from tools.study import sample_corpus  # noqa: E402

TOOLS_DIR = os.path.dirname(os.path.abspath(__file__))
PROJECT_DIR = os.path.dirname(TOOLS_DIR)
PEER_SCRIPT = os.path.join(TOOLS_DIR, "peers", "hf_electra_pretraining.py")
SIDES = ("electra-tf", "transformers")
# The metrics of the figure and the table (held-out, no dropout).
COMPARED = ("disc_loss", "disc_auc", "masked_lm_accuracy", "sampled_masked_lm_accuracy")
TITLES = {
    "disc_loss": "Discriminator loss",
    "disc_auc": "Discriminator AUC",
    "masked_lm_accuracy": "MLM accuracy",
    "sampled_masked_lm_accuracy": "Sampled MLM accuracy (sample = original)",
}
# Fractions of the run at which the table reports the held-out metrics.
TABLE_FRACTIONS = (0.0, 0.05, 0.1, 0.25, 0.5, 1.0)
BATCH_KEYS = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "masked_input_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "masked_lm_weights",
    "sampling_uniforms",
)


# ---------------------------------------------------------------------- data


def prepare_data(
    corpus: str,
    data_dir: str,
    config,
    *,
    corpus_megabytes: Optional[float],
    eval_fraction: float,
    num_workers: int,
    say=print,
):
    """Corpus sample, WordPiece vocabulary, training and held-out shards (all cached).

    The held-out shards are the last `eval_fraction` of the corpus sample, cut
    at a document boundary, as `pretrain.py --eval_fraction` holds them out.

    Returns:
        (vocab_file, tokenizer, shard_dir, eval_shard_dir).
    """
    os.makedirs(data_dir, exist_ok=True)
    text = sample_corpus(corpus, corpus_megabytes, data_dir)
    vocab_file = os.path.join(data_dir, f"vocab-{config.model.vocab_size}.txt")
    if not os.path.exists(vocab_file):
        say(f"Learning a {config.model.vocab_size}-token vocabulary from {text} ...")
        vocab_learning.build_vocab(
            [text],
            vocab_file,
            config.model.vocab_size,
            config.do_lower_case,
            config.resolved_strip_accents,
            config.normalization,
        )
    tokenizer = tokenization.WordPieceTokenizer(
        vocab_file, config.do_lower_case, config.resolved_strip_accents, config.normalization
    )
    dirs = {}
    for name, text_range in (
        ("shards", (0.0, 1.0 - eval_fraction)),
        ("eval-shards", (1.0 - eval_fraction, 1.0)),
    ):
        dirs[name] = os.path.join(data_dir, f"{name}-L{config.max_seq_length}-s{config.seed}")
        metadata = write_shards(
            [text],
            dirs[name],
            tokenizer.get_config(),
            max_seq_length=config.max_seq_length,
            num_shards=None if name == "shards" else 1,
            num_workers=num_workers,
            seed=config.seed,
            text_range=text_range,
        )
        say(f"{name}: {metadata['num_examples']:,} examples in {dirs[name]}")
    return vocab_file, tokenizer, dirs["shards"], dirs["eval-shards"]


def dump_batches(
    path: str,
    config,
    shard_dir: str,
    eval_shard_dir: str,
    special_ids: dict,
    num_eval_examples: int,
) -> dict:
    """Writes the run's training and held-out batches to an `.npz`.

    Training: the first `config.num_train_steps` batches of
    `make_pretraining_dataset` (what a `pretrain.py` run of this config
    trains on), stacked to [steps, B, ...]. Held-out: the whole batches of
    `evaluation_dataset` for the first `num_eval_examples` held-out
    sequences, stacked to [E, B, ...] under `eval_`-prefixed names.

    Returns:
        The arrays written (name -> NumPy array).
    """
    batch_size = config.train_batch_size
    dataset = make_pretraining_dataset(
        shard_dir,
        batch_size=batch_size,
        max_predictions_per_seq=config.resolved_max_predictions_per_seq,
        mask_rate=config.mask_rate,
        special_ids=special_ids,
        seed=config.seed,
        shuffle_buffer_size=config.shuffle_buffer_size,
        max_seq_length=config.max_seq_length,
    )
    steps = [b for b in dataset.take(config.num_train_steps).as_numpy_iterator()]
    held_out = [
        b
        for b in evaluation_dataset(
            eval_shard_dir,
            config,
            special_ids,
            num_examples=num_eval_examples,
            batch_size=batch_size,
        ).as_numpy_iterator()
        if b["input_ids"].shape[0] == batch_size
    ]
    if not held_out:
        raise ParityError(
            f"{eval_shard_dir} holds fewer than one batch ({batch_size}) of "
            "held-out sequences: raise --eval_fraction."
        )
    arrays = {k: np.stack([b[k] for b in steps]) for k in BATCH_KEYS}
    arrays.update({f"eval_{k}": np.stack([b[k] for b in held_out]) for k in BATCH_KEYS})
    np.savez(path + ".tmp.npz", **arrays)
    os.replace(path + ".tmp.npz", path)
    return arrays


# ----------------------------------------------------------- electra-tf side


def train_electra_tf(arrays: dict, config, eval_every_steps: int, output: str, seed: int) -> None:
    """Trains `ElectraPretrainer` on the dumped batches in order, logging as the peer does.

    Args:
        arrays: `dump_batches`' arrays ([steps, B, ...] and `eval_` [E, B, ...]).
        config: the `PretrainingConfig` (its own optimiser and schedule are used).
        eval_every_steps: held-out evaluation every this many steps (and at 0
            and at the end).
        output: the JSON-lines file (same records as the peer's).
        seed: initial weights and dropout.
    """
    keras.utils.set_random_seed(seed)
    model = RecordingPretrainer(config)
    model.build_from_batch(dummy_batch(config))
    optimizer = create_optimizer(config)
    optimizer.build(model.trainable_variables)
    model.compile(optimizer=optimizer, jit_compile=False)
    train_step = tf.function(model.train_step)
    schedule = learning_rate_schedule(config)
    held_out = tf.data.Dataset.from_tensor_slices({k: arrays[f"eval_{k}"] for k in BATCH_KEYS})
    evaluator = PretrainingEvaluator(model, held_out, num_samples=0)
    num_steps = arrays["input_ids"].shape[0]
    started, eval_seconds = time.perf_counter(), 0.0
    with open(output, "w", encoding="utf-8") as log:

        def log_eval(step):
            nonlocal eval_seconds
            eval_started = time.perf_counter()
            record = {"split": "eval", "step": step, **evaluator().metrics}
            eval_seconds += time.perf_counter() - eval_started
            log.write(json.dumps(record) + "\n")
            log.flush()

        log_eval(0)
        for index in range(num_steps):
            lr = float(schedule(optimizer.iterations))
            stats = train_step({k: tf.constant(arrays[k][index]) for k in BATCH_KEYS})
            mask = arrays["input_mask"][index] > 0
            step = index + 1
            record = {
                "split": "train",
                "step": step,
                "learning_rate": lr,
                **{k: float(v) for k, v in stats.items()},
                "disc_auc": roc_auc(
                    model.last_disc_logits.numpy()[mask], model.last_labels.numpy()[mask]
                ),
            }
            log.write(json.dumps(record) + "\n")
            if step % eval_every_steps == 0 or step == num_steps:
                log_eval(step)
        seconds = time.perf_counter() - started
        log.write(
            json.dumps(
                {
                    "split": "summary",
                    "steps": num_steps,
                    "seconds": seconds,
                    "train_seconds": seconds - eval_seconds,
                    "eval_seconds": eval_seconds,
                    "tensorflow": tf.__version__,
                    "keras": keras.__version__,
                }
            )
            + "\n"
        )


class RecordingPretrainer(ElectraPretrainer):
    """An `ElectraPretrainer` that also keeps its last training pass's discriminator outputs.

    Training is the parent's own `train_step`; copying the logits [B, L] and
    labels [B, L] out of its forward pass lets the harness compute the
    batch's AUC from the same pass (dropout on) as the other training metrics.
    """

    def __init__(self, config, **kwargs):
        super().__init__(config, **kwargs)
        shape = [config.train_batch_size, config.max_seq_length]
        self.last_disc_logits = tf.Variable(tf.zeros(shape), trainable=False)
        self.last_labels = tf.Variable(tf.zeros(shape, tf.int32), trainable=False)

    def compute_sums(self, batch, training=False):
        sums = super().compute_sums(batch, training=training)
        if training:
            self.last_disc_logits.assign(tf.cast(sums["disc_logits"], tf.float32))
            self.last_labels.assign(sums["labels"])
        return sums


def run_peer(
    peer_python: str, batches: str, settings: str, output: str, seed: int, threads: int
) -> None:
    """Runs the transformers side in its own interpreter; raises ParityError if it fails."""
    command = [
        peer_python,
        PEER_SCRIPT,
        "--batches",
        batches,
        "--settings",
        settings,
        "--output",
        output,
        "--seed",
        str(seed),
        "--threads",
        str(threads),
    ]
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode:
        raise ParityError(f"the peer failed ({' '.join(command)}):\n{result.stdout[-4000:]}")


# ------------------------------------------------------------------ analysis


def read_log(path: str) -> dict:
    """A metrics log as {"train": [records], "eval": [records], "summary": record or None}."""
    out: dict = {"train": [], "eval": [], "summary": None}
    with open(path, encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            if record["split"] == "summary":
                out["summary"] = record
            else:
                out[record["split"]].append(record)
    return out


def finished_log(path: str) -> Optional[dict]:
    """The log at `path` if its run finished (it has a summary line), else None."""
    if not os.path.exists(path):
        return None
    log = read_log(path)
    return log if log["summary"] is not None else None


def table_steps(eval_steps: Sequence[int], fractions=TABLE_FRACTIONS) -> list:
    """The evaluated steps nearest to `fractions` of the last one, without repeats."""
    steps = sorted(eval_steps)
    chosen = []
    for fraction in fractions:
        step = min(steps, key=lambda s: (abs(s - fraction * steps[-1]), s))
        if step not in chosen:
            chosen.append(step)
    return chosen


def _spread(values: Sequence[float]) -> str:
    """`0.123`, or `0.123 ± 0.004` (mean ± sample standard deviation) for several runs."""
    if len(values) == 1:
        return f"{values[0]:.4f}"
    return f"{np.mean(values):.4f} ± {np.std(values, ddof=1):.4f}"


def eval_value(log: dict, step: int, metric: str) -> float:
    """The held-out `metric` of a log at `step` (NaN if not evaluated there)."""
    return next((r[metric] for r in log["eval"] if r["step"] == step), math.nan)


def comparison_table(logs: dict, metrics: Sequence[str] = COMPARED) -> str:
    """Markdown table of held-out metrics at a few steps, one column per implementation.

    Args:
        logs: {side: [read_log results, one per seed]}, sides in `SIDES` order.
    """
    steps = table_steps([r["step"] for r in logs[SIDES[0]][0]["eval"]])
    lines = ["| step | metric | " + " | ".join(logs) + " |", "|---:|---|" + "---:|" * len(logs)]
    for step in steps:
        for metric in metrics:
            cells = [
                _spread([eval_value(log, step, metric) for log in runs]) for runs in logs.values()
            ]
            lines.append(f"| {step} | {metric} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Mean of the last `window` values at each index (fewer at the start)."""
    cumulative = np.cumsum(np.r_[0.0, values])
    counts = np.minimum(np.arange(1, len(values) + 1), window)
    return (cumulative[1:] - cumulative[np.arange(len(values)) + 1 - counts]) / counts


def plot_comparison(logs: dict, path: str, title: str) -> None:
    """One panel per metric of `COMPARED`: held-out curves (lines) and training batches (faint).

    Training values are a moving average over 1/40 of the run; every seed of
    a side is drawn in that side's colour.
    """
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    colours = dict(zip(SIDES, ("tab:orange", "tab:blue")))
    fig, axes = plt.subplots(2, 2, figsize=(10, 6.4), sharex=True)
    for axis, metric in zip(axes.flat, COMPARED):
        for side, runs in logs.items():
            for i, log in enumerate(runs):
                steps = np.array([r["step"] for r in log["train"]])
                values = np.array([r[metric] for r in log["train"]], np.float64)
                window = max(1, len(values) // 40)
                # A batch without a replaced token has no AUC; count it as chance.
                values = np.nan_to_num(values, nan=0.5)
                axis.plot(
                    steps,
                    _moving_average(values, window),
                    color=colours[side],
                    alpha=0.25,
                    linewidth=0.8,
                )
                axis.plot(
                    [r["step"] for r in log["eval"]],
                    [r[metric] for r in log["eval"]],
                    color=colours[side],
                    linewidth=1.5,
                    label=f"{side} (held-out)" if i == 0 else None,
                )
        axis.set_title(TITLES[metric], fontsize=10)
        axis.grid(alpha=0.3)
    for axis in axes[1]:
        axis.set_xlabel("step")
    axes[0, 0].plot([], [], color="grey", alpha=0.4, label="training batches (moving average)")
    axes[0, 0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def report(logs: dict, settings: dict, num_eval_sequences: int) -> str:
    """`comparison.md`: what was compared, the table and the wall times."""
    recipe, model = settings["recipe"], settings["model"]
    seeds = {side: len(runs) for side, runs in logs.items()}
    lines = [
        "# ELECTRA learning curves: electra-tf and transformers",
        "",
        f"Same {recipe['num_train_steps']} training batches and masks for both; "
        f"vocabulary {model['vocab_size']}, hidden {model['hidden_size']}, "
        f"{model['num_layers']} layers, generator hidden {settings['generator']['hidden_size']}; "
        f"learning rate {recipe['learning_rate']:g}, warmup {recipe['num_warmup_steps']} steps, "
        f"lambda {recipe['disc_weight']:g}. Each side starts from its own random "
        f"initialisation ({', '.join(f'{s}: {n} seed(s)' for s, n in seeds.items())}; "
        "several seeds show mean ± standard deviation). Held-out metrics over "
        f"{num_eval_sequences} sequences, no dropout.",
        "",
        comparison_table(logs),
        "",
        "| implementation | seed | training s | held-out evaluation s |",
        "|---|---:|---:|---:|",
    ]
    for side, runs in logs.items():
        for log in runs:
            s = log["summary"]
            lines.append(
                f"| {side} | {log['seed']} | {s['train_seconds']:.0f} | {s['eval_seconds']:.0f} |"
            )
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------- CLI


def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
    """Defines the command's flags on `flag_values` (the global set when run as a command)."""
    on = {"flag_values": flag_values}
    flags.DEFINE_string(
        "corpus",
        None,
        "A text file (a blank line ends a document); its last --eval_fraction is held out.",
        **on,
    )
    flags.DEFINE_float(
        "corpus_megabytes", None, "Use only the first this many MB of the corpus.", **on
    )
    flags.DEFINE_string("peer_python", None, "An interpreter with torch and transformers.", **on)
    flags.DEFINE_string(
        "output_dir", None, "Default: runs/parity-<model_size> in the repository.", **on
    )
    flags.DEFINE_string("figure", None, "Default: <output_dir>/comparison.png.", **on)
    flags.DEFINE_enum("model_size", "tiny", MODEL_SIZES, "Size preset.", **on)
    flags.DEFINE_integer("train_batch_size", 32, "Global batch size.", **on)
    flags.DEFINE_integer("max_seq_length", 128, "Tokens per example.", **on)
    flags.DEFINE_integer("vocab_size", 8000, "Vocabulary size learned from the corpus.", **on)
    flags.DEFINE_float("learning_rate", None, "Default: the preset's.", **on)
    flags.DEFINE_float(
        "max_train_flops",
        None,
        "Train for the steps this budget buys (electra_tf.flops); or --num_train_steps.",
        **on,
    )
    flags.DEFINE_integer("num_train_steps", None, "Training steps; or --max_train_flops.", **on)
    flags.DEFINE_integer("num_warmup_steps", None, "Default: 10% of the training steps.", **on)
    flags.DEFINE_integer("seed", 0, "Data seed: shards, order, masks.", **on)
    flags.DEFINE_string(
        "init_seeds", "0", "Comma-separated initialisation seeds, each run on both sides.", **on
    )
    flags.DEFINE_float("eval_fraction", 0.01, "Fraction of the corpus held out.", **on)
    flags.DEFINE_integer("num_eval_examples", 1024, "Held-out sequences per evaluation.", **on)
    flags.DEFINE_integer("eval_every_steps", 100, "Held-out evaluation interval in steps.", **on)
    flags.DEFINE_enum(
        "peer_init",
        "transformers",
        ["transformers", "original"],
        "The peer's "
        "initialisation: transformers' own, or the original code's "
        "Glorot-uniform output and projection layers.",
        **on,
    )
    # With other work on the machine, torch's spinning OpenMP threads wait for
    # each other; one thread was about 10x faster on a busy 2-core machine.
    flags.DEFINE_integer("peer_threads", 1, "Torch threads of the peer (0: torch's default).", **on)
    flags.DEFINE_integer(
        "num_shard_workers", os.cpu_count() or 1, "Processes writing the shards.", **on
    )
    flags.mark_flags_as_required(["corpus", "peer_python"], **on)
    flags.mark_flags_as_mutual_exclusive(
        ["max_train_flops", "num_train_steps"], required=True, **on
    )


def parse_flags(arguments: Sequence[str]) -> flags.FlagValues:
    """The command's flags set from `arguments` (flags only, no program name), on a fresh set.

    For running the comparison from Python without touching the global
    flags. Raises `flags.Error` on a wrong or missing flag.
    """
    values = flags.FlagValues()
    define_flags(values)
    rest = values(["parity", *arguments])
    if len(rest) > 1:
        raise flags.Error(f"unexpected arguments: {rest[1:]}")
    return values


def resolve_config(args):
    """The `PretrainingConfig` both sides train with, from the command's flags."""
    overrides = {
        "train_batch_size": args.train_batch_size,
        "max_seq_length": args.max_seq_length,
        "vocab_size": args.vocab_size,
        "seed": args.seed,
    }
    if args.learning_rate is not None:
        overrides["learning_rate"] = args.learning_rate
    try:
        config = preset(args.model_size, **overrides)
        if args.max_train_flops is not None:
            config.num_train_steps = steps_within_budget(config, args.max_train_flops)
        else:
            config.num_train_steps = args.num_train_steps
        config.num_warmup_steps = (
            args.num_warmup_steps
            if args.num_warmup_steps is not None
            else config.num_train_steps // 10
        )
        config.validate()
    except ConfigError as error:
        raise ParityError(str(error))
    return config


def compare(args: flags.FlagValues) -> dict:
    """Runs the comparison the flags describe; returns {side: [logs, one per seed]} (`read_log`)."""
    say = lambda message: print(message, flush=True)  # noqa: E731
    config = resolve_config(args)
    output_dir = args.output_dir or os.path.join(PROJECT_DIR, "runs", f"parity-{args.model_size}")
    seeds = [int(s) for s in args.init_seeds.split(",")]
    os.makedirs(output_dir, exist_ok=True)
    vocab_file, tokenizer, shard_dir, eval_shard_dir = prepare_data(
        args.corpus,
        os.path.join(output_dir, "data"),
        config,
        corpus_megabytes=args.corpus_megabytes,
        eval_fraction=args.eval_fraction,
        num_workers=args.num_shard_workers,
        say=say,
    )
    config.model.vocab_size = tokenizer.vocab_size  # the learner may return fewer tokens
    settings = peer_settings(config, args.eval_every_steps, args.peer_init)
    settings["data"] = {
        "corpus": os.path.abspath(args.corpus),
        "corpus_megabytes": args.corpus_megabytes,
        "seed": config.seed,
        "eval_fraction": args.eval_fraction,
        "num_eval_examples": args.num_eval_examples,
        "train_batch_size": config.train_batch_size,
        "max_seq_length": config.max_seq_length,
    }
    settings_path = os.path.join(output_dir, "settings.json")
    batches_path = os.path.join(output_dir, "batches.npz")
    if os.path.exists(settings_path):
        with open(settings_path, encoding="utf-8") as f:
            if json.load(f) != settings:
                raise ParityError(
                    f"{output_dir} holds a comparison of other settings; pass another --output_dir."
                )
    if os.path.exists(batches_path):
        arrays = dict(np.load(batches_path))
    else:
        say(
            f"Writing {config.num_train_steps} training batches and the held-out batches to "
            f"{batches_path} ..."
        )
        arrays = dump_batches(
            batches_path,
            config,
            shard_dir,
            eval_shard_dir,
            tokenizer.special_ids,
            args.num_eval_examples,
        )
    with open(settings_path, "w", encoding="utf-8") as f:
        json.dump(settings, f, indent=2, sort_keys=True)

    logs: dict = {side: [] for side in SIDES}
    for seed in seeds:
        for side in SIDES:
            path = os.path.join(output_dir, f"{side}-seed{seed}.jsonl")
            log = finished_log(path)
            if log is None:
                say(f"Training {side} (seed {seed}, {config.num_train_steps} steps) ...")
                if side == "electra-tf":
                    train_electra_tf(arrays, config, args.eval_every_steps, path, seed)
                else:
                    run_peer(
                        args.peer_python, batches_path, settings_path, path, seed, args.peer_threads
                    )
                log = read_log(path)
            say(f"{side} seed {seed}: {log['summary']['train_seconds']:.0f} s of training")
            logs[side].append({**log, "seed": seed})

    num_eval_sequences = int(arrays["eval_input_ids"].shape[0] * arrays["eval_input_ids"].shape[1])
    markdown = report(logs, settings, num_eval_sequences)
    with open(os.path.join(output_dir, "comparison.md"), "w", encoding="utf-8") as f:
        f.write(markdown)
    figure = args.figure or os.path.join(output_dir, "comparison.png")
    plot_comparison(
        logs,
        figure,
        f"ELECTRA {args.model_size}, batch {config.train_batch_size}"
        f" x {config.max_seq_length}, same batches and masks: electra-tf vs "
        "transformers",
    )
    say(markdown)
    say(f"Figure: {figure}")
    return logs


def main(argv: Sequence[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    try:
        compare(flags.FLAGS)
    except ParityError as error:
        sys.exit(f"error: {error}")


if __name__ == "__main__":
    define_flags()
    app.run(main)
