"""Throughput benchmark for the pre-training step, the input pipeline and shard building.

    python -m tools.benchmark --model_size=small --train_batch_size=32 --max_seq_length=128

Run from the repository root; it benchmarks the `electra_tf` that Python
imports there (the checked-out source, or the installed package).

Reports total work divided by wall time over a measured window after warm-up
(never a mean of per-step rates), the step's FLOPs by the paper's accounting,
the achieved FLOP/s and its fraction of a matmul peak measured in the same
run, right before and right after the measured steps (and the same under a
count of what the step really executes), with the machine and settings
printed beside them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Optional, Sequence

if __name__ == "__main__":  # before TensorFlow (and electra_tf, which imports it) is imported
    from tools.huge_pages import reexec_for_huge_pages

    reexec_for_huge_pages()  # only with --huge_pages: re-executes this process

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app, flags, logging  # noqa: E402

from electra_tf.config import (  # noqa: E402
    BERT_VOCAB_SIZE,
    DEFAULT_KERNELS,
    KERNELS,
    KERNELS_HELP,
    MIXED_PRECISION_POLICIES,
    MODEL_SIZES,
    preset,
)
from electra_tf.data.masking import mask_batch  # noqa: E402
from electra_tf.data.pipeline import make_pretraining_dataset, pipeline_throughput  # noqa: E402
from electra_tf.distribute import set_precision_policy  # noqa: E402
from electra_tf.finetuning.kind.settings import FinetuneSettings  # noqa: E402
from electra_tf.flops import executed_train_flops_per_step, train_flops_per_step  # noqa: E402
from electra_tf.modeling.kernels import resolve_kernels  # noqa: E402
from electra_tf.pretraining.objectives import make_pretrainer  # noqa: E402
from electra_tf.pretraining.optimization import create_optimizer  # noqa: E402
from tools.huge_pages import FLAG as HUGE_PAGES  # noqa: E402
from tools.huge_pages import FLAG_HELP as HUGE_PAGES_HELP
from tools.huge_pages import transparent_huge_page_mode  # noqa: E402

flags.DEFINE_enum("model_size", "small", MODEL_SIZES, "Size preset.")
flags.DEFINE_integer("train_batch_size", 32, "Global batch size.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length.")
flags.DEFINE_integer("vocab_size", BERT_VOCAB_SIZE, "Vocabulary size (BERT's, as in the paper).")
flags.DEFINE_integer("steps", 10, "Measured training steps (after warm-up).")
flags.DEFINE_integer("warmup_steps", 3, "Unmeasured steps first (tracing, allocation).")
flags.DEFINE_enum("mixed_precision", "none", MIXED_PRECISION_POLICIES, "Precision.")
flags.DEFINE_boolean("jit_compile", False, "Compile the train step with XLA.")
flags.DEFINE_enum("kernels", DEFAULT_KERNELS, KERNELS, KERNELS_HELP)
flags.DEFINE_integer(
    "steps_per_execution",
    1,
    "Training steps per call into the compiled "
    "function, as pretrain.py's flag; --steps and --warmup_steps must be "
    "multiples of it.",
)
flags.DEFINE_enum(
    "mode",
    "pretrain",
    ["pretrain", "finetune", "inference"],
    "pretrain: the pre-training step (and the input pipeline and shard building); "
    "finetune: a classification fine-tuning step; inference: the exported raw-text "
    "classifier, text in, probabilities out (latency at batch 1, throughput at "
    "--train_batch_size).",
)
flags.DEFINE_enum(
    "finetune_lengths",
    "texts",
    ["texts", "full"],
    "Finetune mode: the rows' lengths. texts: as long as the inference mode's texts "
    "(8-43 tokens), batched as finetune.py batches them (see --group_by_length), the peer "
    "padding each random batch to its longest row; full: every row --max_seq_length long.",
)
flags.DEFINE_boolean(
    "group_by_length",
    FinetuneSettings.group_by_length,
    "Finetune mode: finetune.py's --group_by_length (its default).",
)
flags.DEFINE_list(
    "inference_formats",
    ["saved_model", "onnx", "litert", "litert-int8"],
    "Inference mode: the export formats timed, each by its runtime (saved_model: TensorFlow; "
    "onnx: ONNX Runtime; litert, litert-int8: the LiteRT interpreter, float32 and int8 "
    "weights); those whose packages are not installed are left out, said.",
)
flags.DEFINE_integer("inference_requests", 100, "Inference mode: single-text requests timed.")
flags.DEFINE_integer("inference_batches", 20, "Inference mode: batches timed.")
flags.DEFINE_integer(
    "inference_threads",
    1,
    "Inference mode: intra-op and inter-op threads "
    "of the process serving the export (TF Serving's "
    "--tensorflow_intra_op_parallelism / --tensorflow_inter_op_parallelism) "
    "and of the peers' PyTorch and ONNX Runtime; 0: each library's default (one per core).",
)
flags.DEFINE_integer(
    "inference_rounds",
    1,
    "Inference mode: rounds of ours then each peer, every "
    "run a fresh process (the medians over the rounds are compared).",
)
flags.DEFINE_enum(
    "serving_forward",
    None,
    ["lean", "keras"],
    "Inference mode: the export's "
    "forward pass (electra_tf.modeling.lean_forward); default: the exporter's.",
)
flags.DEFINE_string(
    "serving_signature",
    "serving_default",
    "Inference mode: the export's raw-text signature timed.",
)
flags.DEFINE_integer("pipeline_batches", 200, "Batches timed for the input pipeline (0: skip).")
flags.DEFINE_float("shard_megabytes", 4.0, "Text size for the shard-building benchmark (0: skip).")
flags.DEFINE_string("json", None, "Also write the results to this JSON file.")
flags.DEFINE_string(
    "peer_script",
    None,
    "A peer implementation's script doing the same work, "
    "run in the same session, printing JSON (pretrain and finetune: taking "
    "--size/--batch/--seq/--steps, reporting tokens_per_second). Default for the "
    "finetune and inference modes: the scripts in tools/peers/ (Hugging Face "
    "transformers on PyTorch; for inference also ONNX Runtime when --peer_python "
    "has it), when --peer_python is given.",
)
flags.DEFINE_string(
    "peer_python",
    None,
    "The interpreter for --peer_script (its own "
    "virtualenv: the peer's packages are not requirements of this project).",
)
# Acted on before this module's imports (tools.huge_pages); defined here for --help and parsing.
flags.DEFINE_boolean(HUGE_PAGES, False, HUGE_PAGES_HELP)
FLAGS = flags.FLAGS

SPECIAL_IDS = {"pad_id": 0, "cls_id": 2, "sep_id": 3, "mask_id": 4}


def machine_info() -> dict:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if "model name" in line), cpu)
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "gpus": [d.name for d in tf.config.list_logical_devices("GPU")],
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "glibc_tunables": os.environ.get("GLIBC_TUNABLES", ""),
        "transparent_huge_pages": transparent_huge_page_mode(),
        "tf_enable_onednn_opts": os.environ.get("TF_ENABLE_ONEDNN_OPTS", ""),
        "onednn": onednn_enabled(),
    }


def onednn_enabled() -> Optional[bool]:
    """Whether TensorFlow runs its oneDNN kernels in this process (None: cannot tell).

    TensorFlow turns them on by itself only on some CPUs (off on AVX2-only ones), and
    ``TF_ENABLE_ONEDNN_OPTS`` overrides that; the figures differ with it, so it is printed.
    """
    try:
        from tensorflow.python.util import _pywrap_util_port
    except ImportError:  # a TensorFlow build without the private module
        return None
    return bool(_pywrap_util_port.IsMklEnabled())


def matmul_peak_flops(n: int = 2048, repeats: int = 10, dtype=tf.float32) -> float:
    """Best-case FLOP/s of one large square matmul on the default device."""
    a = tf.random.normal((n, n), dtype=dtype)
    b = tf.random.normal((n, n), dtype=dtype)
    tf.linalg.matmul(a, b).numpy()  # warm-up
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            c = tf.linalg.matmul(a, b)
        c.numpy()
        best = max(best, 2.0 * n**3 * repeats / (time.perf_counter() - start))
    return best


def synthetic_batches(config, count: int, seed: int = 0) -> dict:
    """`count` pipeline-shaped batches of random text, masked with the real masking code."""
    rng = np.random.default_rng(seed)
    batch, length = config.train_batch_size, config.max_seq_length
    ids = rng.integers(5, config.model.vocab_size, size=(count * batch, length)).astype(np.int32)
    ids[:, 0], ids[:, -1] = SPECIAL_IDS["cls_id"], SPECIAL_IDS["sep_id"]
    mask = np.ones_like(ids)
    masked = mask_batch(
        ids,
        mask,
        np.arange(count * batch),
        [seed, 0],
        mask_rate=config.mask_rate,
        max_predictions_per_seq=config.resolved_max_predictions_per_seq,
        **SPECIAL_IDS,
    )
    features = {
        "input_ids": ids,
        "input_mask": mask,
        "segment_ids": np.zeros_like(ids),
        **{k: np.asarray(v) for k, v in masked.items()},
    }
    return features


class _WindowTimer(keras.callbacks.Callback):
    """Marks the measured window; runs `probe` (if any) once, just before it opens.

    Keras calls back once per call of the compiled function, with the index of
    the call's last step, so the window counts the steps it really spans.
    """

    def __init__(self, warmup_steps: int, probe=None):
        super().__init__()
        self.warmup_steps = warmup_steps
        self.probe = probe
        self.probe_result = None
        self.warmup_end = self.start = self.end = None
        self.steps_before = self.steps_done = 0

    def on_train_batch_end(self, batch, logs=None):
        if self.start is None and batch + 1 >= self.warmup_steps:
            self.warmup_end = time.perf_counter()
            if self.probe is not None:
                self.probe_result = self.probe()
            self.steps_before = batch + 1
            self.start = time.perf_counter()
        self.steps_done = batch + 1
        self.end = time.perf_counter()


def _check_window(steps: int, warmup_steps: int, group: int = 1) -> None:
    """Raises ValueError unless the window is `steps` >= 1 whole calls after >= 1 warm-up step."""
    if warmup_steps < 1:
        raise ValueError(
            f"--warmup_steps must be at least 1 (the first step traces and "
            f"compiles), got {warmup_steps}"
        )
    if steps < 1:
        raise ValueError(f"--steps must be at least 1, got {steps}")
    for name, value in (("--warmup_steps", warmup_steps), ("--steps", steps)):
        if value % group:
            # The window can only open and close between calls of `group` steps.
            raise ValueError(f"{name}={value} must be a multiple of --steps_per_execution={group}")


def benchmark_train_step(
    config, steps: int, warmup_steps: int, jit_compile: bool, peak_probe=None
) -> dict:
    """Throughput of the training step over a window of `steps` after `warmup_steps`.

    Args:
        config: a `PretrainingConfig`; synthetic batches of its shapes are used,
            and its kernel set (`config.kernels`) runs the step.
        steps: measured steps (at least 1).
        warmup_steps: unmeasured steps first (at least 1: the first traces and
            compiles). Both must be multiples of `config.steps_per_execution`,
            the steps the compiled function runs per call.
        jit_compile: compile the step with XLA.
        peak_probe: optional callable returning a matmul peak in FLOP/s. It runs
            right before the window opens and right after it closes, outside
            it, and the result carries `bracketing_peak` of the two readings.

    Returns:
        A dict: `kernels` (the set measured), `seconds` of the window,
        sequences, tokens and seconds per step over it, `warmup_seconds`, and
        the peak readings with a probe.
    """
    group = config.steps_per_execution
    _check_window(steps, warmup_steps, group)
    set_precision_policy(config.mixed_precision)
    keras.utils.set_random_seed(0)
    features = synthetic_batches(config, count=4)
    dataset = (
        tf.data.Dataset.from_tensor_slices(features)
        .batch(config.train_batch_size, drop_remainder=True)
        .cache()
        .repeat()
        .prefetch(2)
    )
    model = make_pretrainer(config)
    model.build_from_batch({k: v[:1] for k, v in features.items()})
    model.compile(
        optimizer=create_optimizer(config, config.mixed_precision),
        jit_compile=jit_compile,
        steps_per_execution=group,
    )
    return {
        "kernels": model.kernels,
        **time_fit(model, dataset, steps, warmup_steps, config, peak_probe),
    }


def time_fit(model, dataset, steps: int, warmup_steps: int, config, peak_probe=None) -> dict:
    """Runs `fit` for `warmup_steps + steps` steps and measures the window of the last `steps`.

    Returns:
        `seconds` of the window, sequences, tokens and seconds per step over
        it, `warmup_seconds`, and the peak readings with a probe.
    """
    timer = _WindowTimer(warmup_steps, peak_probe)
    started = time.perf_counter()
    model.fit(
        dataset,
        steps_per_epoch=warmup_steps + steps,
        epochs=1,
        verbose=0,
        shuffle=False,
        callbacks=[timer],
    )
    if timer.start is None:
        raise RuntimeError(f"training stopped before the {warmup_steps} warm-up steps ended")
    seconds = timer.end - timer.start
    measured = timer.steps_done - timer.steps_before
    if measured != steps:
        raise RuntimeError(f"the window spanned {measured} steps instead of --steps={steps}")
    sequences = measured * config.train_batch_size
    result = {
        "measured_steps": measured,
        "warmup_steps": timer.steps_before,
        "warmup_seconds": timer.warmup_end - started,
        "seconds": seconds,
        "sequences_per_second": sequences / seconds,
        "tokens_per_second": sequences * config.max_seq_length / seconds,
        "seconds_per_step": seconds / measured,
    }
    if peak_probe is not None:
        result.update(bracketing_peak(timer.probe_result, peak_probe()))
    return result


def random_classifier(config, num_labels: int = 2):
    """An ELECTRA classifier of `config.model`'s size with random weights and `config.kernels`."""
    from electra_tf.finetuning.classification.model import build_classifier
    from electra_tf.modeling.electra import build_generator_and_discriminator

    _, discriminator = build_generator_and_discriminator(
        config.model, with_generator=False, kernels=config.kernels
    )
    return build_classifier(discriminator.encoder, num_labels)


def finetuning_rows(config, lengths: str, count: int, seed: int = 0) -> list:
    """`count` (token ids, segment ids) rows of random ids for the finetune mode.

    `lengths`: "texts": as long as the inference mode's synthetic texts
    (5-40 words and a full stop, one piece each, with [CLS] and [SEP]: 8-43
    tokens); "full": every row `config.max_seq_length` tokens.
    """
    rng = np.random.default_rng(seed)
    if lengths == "full":
        sizes = [config.max_seq_length] * count
    else:
        _, texts = synthetic_texts(count)
        sizes = [min(len(text.split()) + 2, config.max_seq_length) for text in texts]
    return [(rng.integers(5, config.model.vocab_size, size).tolist(), [0] * size) for size in sizes]


def benchmark_finetune_step(
    config, steps: int, warmup_steps: int, jit_compile: bool, lengths: str, by_length: bool
) -> dict:
    """Throughput of a classification fine-tuning step (the paper's optimiser) on random ids.

    The batches are finetune.py's (`classification.features.make_dataset`,
    shuffled, `by_length` or random batches padded to their longest row) of
    `finetuning_rows(config, lengths, ...)`. Every batch shape of the window
    is trained on once first (tracing, and with XLA compiling, each shape),
    then `warmup_steps`; the window is `steps` steps. Tokens are the rows'
    own tokens (padding not counted), as the peer counts them.

    Returns:
        `kernels`, `seconds`, tokens and seconds per step over the window,
        `padding_fraction` (padded positions over all positions of the
        window's batches), `batch_lengths` (the window's distinct padded
        lengths) and `warmup_seconds`.
    """
    from electra_tf.finetuning.classification.features import make_dataset
    from electra_tf.finetuning.kind.optimization import create_optimizer as finetuning_optimizer

    _check_window(steps, warmup_steps)
    set_precision_policy(config.mixed_precision)
    keras.utils.set_random_seed(0)
    batch = config.train_batch_size
    rows = finetuning_rows(config, lengths, count=max(64 * batch, 2048))
    labels = np.random.default_rng(1).integers(0, 2, len(rows)).astype(np.int32)
    dataset = make_dataset(
        rows, labels, batch, shuffle_seed=0, repeat=True, by_length=by_length
    ).take(warmup_steps + steps)
    batches = [(x, y) for x, y in dataset]
    window = batches[warmup_steps:]
    model = random_classifier(config)
    model.compile(
        optimizer=finetuning_optimizer(
            model,
            model.encoder.num_layers,
            learning_rate=1e-4,
            num_train_steps=10 * (warmup_steps + steps),
            mixed_precision=config.mixed_precision,
        ),
        jit_compile=jit_compile,
    )
    shapes = {}
    for x, y in window:
        shapes.setdefault(tuple(x["input_ids"].shape), (x, y))
    # One fit over: a batch of every shape of the window, the warm-up, the window.
    steps_before = len(shapes) + warmup_steps
    run = [*shapes.values(), *batches[:warmup_steps], *window]
    timer = _WindowTimer(steps_before)
    started = time.perf_counter()
    model.fit(
        tf.data.Dataset.from_generator(lambda: iter(run), output_signature=dataset.element_spec),
        steps_per_epoch=len(run),
        epochs=1,
        verbose=0,
        shuffle=False,
        callbacks=[timer],
    )
    if timer.steps_done - timer.steps_before != steps:
        raise RuntimeError(f"the window spanned {timer.steps_done - timer.steps_before} steps")
    seconds = timer.end - timer.start
    warmup_seconds = timer.warmup_end - started
    tokens = sum(int(tf.reduce_sum(x["input_mask"])) for x, _ in window)
    positions = sum(int(tf.size(x["input_ids"])) for x, _ in window)
    return {
        "kernels": model.encoder.kernels,
        "lengths": lengths,
        "group_by_length": by_length,
        "measured_steps": steps,
        "warmup_seconds": warmup_seconds,
        "seconds": seconds,
        "seconds_per_step": seconds / steps,
        "tokens_per_second": tokens / seconds,
        "padding_fraction": 1 - tokens / positions,
        "batch_lengths": sorted({shape[1] for shape in shapes}),
        "row_lengths": [len(ids) for ids, _ in rows],
    }


def synthetic_texts(count: int, seed: int = 3) -> tuple[list, list]:
    """(vocabulary, texts): about 3,000 random words and `count` sentences of 5-40 of them."""
    rng = np.random.default_rng(seed)
    words = sorted(
        {
            "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), size=rng.integers(2, 9)))
            for _ in range(3000)
        }
    )
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *words]
    texts = [" ".join(rng.choice(words, size=rng.integers(5, 41))) + " ." for _ in range(count)]
    return vocab, texts


def benchmark_inference(
    config,
    requests: int,
    batches: int,
    peers: Sequence[tuple[str, str]] = (),
    size: str = "small",
    threads: int = 1,
    forward: Optional[str] = None,
    signature: str = "serving_default",
    rounds: int = 1,
    formats: Sequence[str] = ("saved_model",),
) -> dict:
    """Latency and throughput of the exported classifier: text in, probabilities out.

    A classifier of the preset's size with random weights is exported in each
    of `formats` (`INFERENCE_FORMATS`: the TF Serving SavedModel with
    `forward` (None: the exporter's default), ONNX, LiteRT float32 and int8),
    each loaded in a fresh process that has only its runtime
    (`tools/latency.py`, `threads` intra-op and inter-op threads) and called
    with text (the SavedModel through its raw-text `signature`; the token-id
    formats tokenized by the `tokenizers` library): `requests` single texts
    one at a time (their median latency), then `batches` batches of
    `config.train_batch_size` texts (texts per second). Each peer, a
    (python, script) pair, gets the same texts, vocabulary and thread count.
    A round runs each of ours, then each peer, each in a fresh process;
    `rounds` rounds alternate them so that a drift of the machine meets all.

    Returns:
        The first format's `forward`, `signature`, `runs` (one report per
        round) and medians over the rounds (`latency_ms_batch1_median`,
        `texts_per_second_batched`, with the last run's other keys);
        `formats`: {format: the same}; `peers`: {the peer's name: the same,
        plus `latency_ratio_peer_over_ours` and `throughput_ratio_vs_peer` of
        the medians against the first format, and `ratios`: {format: both}}.
    """
    from electra_tf.artifacts.serving_dir import read_serving_config
    from electra_tf.serving.exporter import export_finetuned

    set_precision_policy("none")
    keras.utils.set_random_seed(0)
    batch = config.train_batch_size
    vocab, texts = synthetic_texts(max(requests, batches * batch, 64))
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        vocab_file = os.path.join(tmp, "vocab.txt")
        texts_file = os.path.join(tmp, "texts.txt")
        for path, lines in ((vocab_file, vocab), (texts_file, texts)):
            with open(path, "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
        model = random_classifier(
            dataclasses.replace(
                config, model=dataclasses.replace(config.model, vocab_size=len(vocab))
            )
        )
        info = {
            "task": {
                "name": "benchmark",
                "task_type": "classification",
                "label_names": ["0", "1"],
                "metrics": ["accuracy"],
                "glue_score_metric": "accuracy",
                "is_pair": False,
            },
            "max_seq_length": config.max_seq_length,
            "do_lower_case": True,
            "strip_accents": True,
        }
        versions = {}
        for name in formats:
            format_name, quantize = INFERENCE_FORMATS[name]
            versions[name] = export_finetuned(
                model,
                info,
                vocab_file,
                os.path.join(tmp, "export"),
                name,
                forward=forward if format_name == "saved_model" else None,
                format_name=format_name,
                quantize=quantize,
            )
        counts = [
            "--batch",
            str(batch),
            "--requests",
            str(requests),
            "--batches",
            str(batches),
            "--threads",
            str(threads),
        ]
        runs = {name: [] for name in formats}
        for _ in range(rounds):
            for name, version in versions.items():
                runtime = INFERENCE_FORMATS[name][0]
                command = [sys.executable, "-I", LATENCY_SCRIPT, version, texts_file, *counts]
                command += ["--runtime", runtime, "--signature", signature]
                report = run_json_script(command)
                report["forward"] = read_serving_config(version).get("forward")
                runs[name].append(report)
            for python, script in peers:
                command = [python, script, "--vocab_file", vocab_file, "--texts", texts_file]
                command += ["--size", size, "--seq", str(config.max_seq_length), *counts]
                report = run_json_script(command)
                runs.setdefault(report.get("peer", os.path.basename(script)), []).append(report)
    results["formats"] = {name: _medians(runs.pop(name)) for name in formats}
    results.update(results["formats"][formats[0]])
    results["peers"] = {}
    for name, reports in runs.items():
        peer = _medians(reports)
        peer["ratios"] = {
            format_name: {
                "latency_ratio_peer_over_ours": (
                    peer["latency_ms_batch1_median"] / ours["latency_ms_batch1_median"]
                ),
                "throughput_ratio_vs_peer": (
                    ours["texts_per_second_batched"] / peer["texts_per_second_batched"]
                ),
            }
            for format_name, ours in results["formats"].items()
        }
        peer.update(peer["ratios"][formats[0]])
        results["peers"][name] = peer
    return results


def _medians(reports: list) -> dict:
    """The last report's keys, its two timings replaced by their medians over `reports`."""
    return {
        **reports[-1],
        "runs": reports,
        **{
            key: float(np.median([report[key] for report in reports]))
            for key in ("latency_ms_batch1_median", "texts_per_second_batched")
        },
    }


def inference_peers(peer_python: Optional[str], peer_script: Optional[str]) -> list:
    """The (python, script) peers of the inference mode.

    `peer_script` alone if given; else, with `peer_python`, transformers on
    PyTorch (tools/peers) and, if that interpreter has onnxruntime and onnx,
    the same classifier on ONNX Runtime; else none.
    """
    python = peer_python or sys.executable
    if peer_script:
        return [(python, peer_script)]
    if not peer_python:
        return []
    peers = [(python, os.path.join(PEERS, PEER_SCRIPTS["inference"]))]
    probe = subprocess.run(
        [python, "-c", "import onnx, onnxruntime"], capture_output=True, text=True
    )
    if probe.returncode == 0:
        peers.append((python, os.path.join(PEERS, ONNXRUNTIME_PEER)))
    else:
        print(
            f"{python} has no onnxruntime (or onnx): the ONNX Runtime peer is left out", flush=True
        )
    return peers


def bracketing_peak(before: float, after: float) -> dict:
    """The matmul peak for MFU, from probes on either side of the measured window.

    Machine speed drifts over minutes (turbo, neighbours on shared hosts), so
    a single probe taken away from the window can meet a different machine
    than the steps did. The mean of one probe right before and one right after
    the window follows the speed the steps ran at; their gap says how far to
    trust the MFU.

    Args:
        before: FLOP/s measured just before the window.
        after: FLOP/s measured just after it.

    Returns:
        `peak_flops_per_second` (their mean), both probes, and `peak_drift`,
        the gap between them as a fraction of the smaller.
    """
    return {
        "peak_flops_per_second": (before + after) / 2,
        "peak_flops_per_second_before": before,
        "peak_flops_per_second_after": after,
        "peak_drift": abs(after - before) / min(before, after),
    }


def run_json_script(command: list) -> dict:
    """Runs a script (a peer's, a timing worker) and returns the last JSON object it printed."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])


def benchmark_peer(
    python: str, script: str, config, steps: int, size: str, extra: Sequence[str] = ()
) -> dict:
    """Runs a peer implementation's training-step script on the same shapes and reads its JSON.

    `extra`: more arguments of the script (the finetune mode's `--lengths`).
    """
    report = run_json_script(
        [
            python,
            script,
            "--size",
            size,
            "--batch",
            str(config.train_batch_size),
            "--seq",
            str(config.max_seq_length),
            "--steps",
            str(steps),
            *extra,
        ]
    )
    rate = report.get("tokens_per_second", report.get("tokens_per_sec"))
    return {"peer": report, "peer_tokens_per_second": float(rate)}


def benchmark_pipeline(config, num_batches: int) -> dict:
    """Batches/s of reading, parsing and masking (no model) from synthetic shards."""
    from electra_tf.data.example_encoding import serialize_examples

    rng = np.random.default_rng(1)
    length = config.max_seq_length
    with tempfile.TemporaryDirectory() as tmp:
        shards = []
        per_shard = 5000
        for i in range(4):
            ids = rng.integers(5, config.model.vocab_size, size=(per_shard, length))
            ids[:, 0], ids[:, -1] = SPECIAL_IDS["cls_id"], SPECIAL_IDS["sep_id"]
            name = f"pretrain_data.tfrecord-{i:05d}-of-00004"
            with tf.io.TFRecordWriter(os.path.join(tmp, name)) as writer:
                for record in serialize_examples(ids, np.ones_like(ids), np.zeros_like(ids)):
                    writer.write(record)
            shards.append({"path": name, "num_examples": per_shard})
        with open(os.path.join(tmp, "metadata.json"), "w") as f:
            json.dump(
                {
                    "format_version": 1,
                    "max_seq_length": length,
                    "shards": shards,
                    "num_examples": 4 * per_shard,
                },
                f,
            )
        dataset = make_pretraining_dataset(
            tmp,
            batch_size=config.train_batch_size,
            max_predictions_per_seq=config.resolved_max_predictions_per_seq,
            mask_rate=config.mask_rate,
            special_ids=SPECIAL_IDS,
            seed=0,
        )
        batches_per_second = pipeline_throughput(dataset, num_batches)
    return {
        "input_pipeline_batches_per_second": batches_per_second,
        "input_pipeline_sequences_per_second": batches_per_second * config.train_batch_size,
    }


def benchmark_shards(megabytes: float, max_seq_length: int) -> dict:
    """MB/s of raw text -> packed TFRecord shards (one process, tokenization included)."""
    from electra_tf.data.shard_build import write_shards
    from electra_tf.tokenization import WordPieceTokenizer

    rng = np.random.default_rng(2)
    words = [
        "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), size=rng.integers(2, 9)))
        for _ in range(3000)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        vocab = os.path.join(tmp, "vocab.txt")
        with open(vocab, "w") as f:
            f.write(
                "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *sorted(set(words))])
            )
        text = os.path.join(tmp, "text.txt")
        target = int(megabytes * 1e6)
        with open(text, "w") as f:
            written = 0
            while written < target:
                line = " ".join(rng.choice(words, size=rng.integers(8, 40))) + " .\n"
                if rng.random() < 0.05:
                    line += "\n"
                f.write(line)
                written += len(line)
        tokenizer = WordPieceTokenizer(vocab)
        start = time.perf_counter()
        metadata = write_shards(
            [text],
            os.path.join(tmp, "shards"),
            tokenizer.get_config(),
            max_seq_length=max_seq_length,
            num_shards=1,
            num_workers=1,
        )
        seconds = time.perf_counter() - start
    return {
        "shard_building_megabytes_per_second": written / 1e6 / seconds,
        "shard_building_examples_per_second": metadata["num_examples"] / seconds,
    }


def utilisation(config, seconds_per_step: float, peak_flops_per_second: float) -> dict:
    """FLOP/s and model-FLOPs utilisation of a step, under two counts of its work.

    `flops_per_step` / `mfu` use the paper's accounting (backward = one more
    forward pass, embedding lookups as one-hot products; see
    `electra_tf.flops`). `executed_flops_per_step` / `executed_mfu` count
    what the step really computes (backward = two forward passes, lookups
    as gathers).
    """
    paper = train_flops_per_step(config)
    executed = executed_train_flops_per_step(config)
    return {
        "flops_per_step": paper,
        "achieved_flops_per_second": paper / seconds_per_step,
        "mfu": paper / seconds_per_step / peak_flops_per_second,
        "executed_flops_per_step": executed,
        "executed_flops_per_second": executed / seconds_per_step,
        "executed_mfu": executed / seconds_per_step / peak_flops_per_second,
    }


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    group = FLAGS.steps_per_execution
    # The bookkeeping intervals are unused here; they only have to be whole groups.
    config = preset(
        FLAGS.model_size,
        train_batch_size=FLAGS.train_batch_size,
        max_seq_length=FLAGS.max_seq_length,
        vocab_size=FLAGS.vocab_size,
        mixed_precision=FLAGS.mixed_precision,
        num_warmup_steps=0,
        num_train_steps=1_000_000 * group,
        jit_compile=FLAGS.jit_compile,
        kernels=FLAGS.kernels,
        steps_per_execution=group,
        save_checkpoints_steps=1000 * group,
        log_every_steps=100 * group,
    )
    config.validate()
    results = {
        "machine": machine_info(),
        "settings": {
            "model_size": FLAGS.model_size,
            "batch": config.train_batch_size,
            "seq_length": config.max_seq_length,
            "vocab_size": config.model.vocab_size,
            "mixed_precision": config.mixed_precision,
            "jit_compile": FLAGS.jit_compile,
            "kernels": resolve_kernels(FLAGS.kernels),
            "steps_per_execution": config.steps_per_execution,
        },
    }
    if FLAGS.mode == "inference":
        results["settings"].update(
            inference_threads=FLAGS.inference_threads,
            serving_forward=FLAGS.serving_forward or "exporter default",
        )
    print(json.dumps(results, indent=2), flush=True)
    if FLAGS.mode != "pretrain":
        results["settings"]["mode"] = FLAGS.mode
        results.update(_finetune_or_inference(config))
        if FLAGS.json:
            with open(FLAGS.json, "w") as f:
                json.dump(results, f, indent=2)
        return
    peak_dtype = (
        tf.float32
        if config.mixed_precision == "none"
        else (tf.float16 if config.mixed_precision == "float16" else tf.bfloat16)
    )
    step = benchmark_train_step(
        config,
        FLAGS.steps,
        FLAGS.warmup_steps,
        FLAGS.jit_compile,
        peak_probe=lambda: matmul_peak_flops(dtype=peak_dtype),
    )
    results.update(step)
    print(
        f"matmul peak: {results['peak_flops_per_second'] / 1e9:.1f} GFLOP/s, the mean of "
        f"{results['peak_flops_per_second_before'] / 1e9:.1f} just before and "
        f"{results['peak_flops_per_second_after'] / 1e9:.1f} just after the measured steps",
        flush=True,
    )
    if results["peak_drift"] > 0.05:
        print(
            f"warning: the matmul peak moved by {results['peak_drift']:.0%} across the "
            f"measured steps (the machine's speed drifted); MFU is uncertain by about "
            f"as much. Rerun on a quieter machine to narrow it.",
            flush=True,
        )
    results.update(utilisation(config, step["seconds_per_step"], results["peak_flops_per_second"]))
    print(
        f"train step ({step['kernels']} kernels): {step['sequences_per_second']:.2f} "
        f"sequences/s, {step['tokens_per_second']:.0f} tokens/s over {step['measured_steps']} "
        f"steps ({step['seconds']:.1f}s, after {step['warmup_steps']} warm-up steps)",
        flush=True,
    )
    print(
        f"MFU {results['mfu']:.1%} by the paper's accounting "
        f"({results['flops_per_step'] / 1e9:.1f} GFLOP/step); "
        f"{results['executed_mfu']:.1%} counting what the step executes "
        f"({results['executed_flops_per_step'] / 1e9:.1f} GFLOP/step)",
        flush=True,
    )
    peer_script = FLAGS.peer_script or (
        os.path.join(PEERS, PEER_SCRIPTS["pretrain"]) if FLAGS.peer_python else None
    )
    if peer_script:
        results.update(
            benchmark_peer(
                FLAGS.peer_python or sys.executable,
                peer_script,
                config,
                FLAGS.steps,
                FLAGS.model_size,
            )
        )
        results["speedup_vs_peer"] = (
            results["tokens_per_second"] / results["peer_tokens_per_second"]
        )
        print(
            f"peer ({os.path.basename(peer_script)}): "
            f"{results['peer_tokens_per_second']:.0f} tokens/s; "
            f"this implementation is {results['speedup_vs_peer']:.2f}x that",
            flush=True,
        )
    if FLAGS.pipeline_batches:
        results.update(benchmark_pipeline(config, FLAGS.pipeline_batches))
        print(
            f"input pipeline: {results['input_pipeline_batches_per_second']:.1f} batches/s",
            flush=True,
        )
    if FLAGS.shard_megabytes:
        results.update(benchmark_shards(FLAGS.shard_megabytes, config.max_seq_length))
        print(
            f"shard building: {results['shard_building_megabytes_per_second']:.2f} MB/s", flush=True
        )
    print(
        json.dumps({k: v for k, v in results.items() if k not in ("machine", "settings")}, indent=2)
    )
    if FLAGS.json:
        with open(FLAGS.json, "w") as f:
            json.dump(results, f, indent=2)


TOOLS_DIR = os.path.dirname(os.path.abspath(__file__))
LATENCY_SCRIPT = os.path.join(TOOLS_DIR, "latency.py")
# The inference mode's formats: name -> (export format, quantization). The first
# is the one the peers' top-level ratios compare with.
INFERENCE_FORMATS = {
    "saved_model": ("saved_model", None),
    "onnx": ("onnx", None),
    "litert": ("litert", None),
    "litert-int8": ("litert", "int8"),
}
# What exporting and running each token-id format needs (the `deploy` extra).
FORMAT_MODULES = {
    "onnx": ("tf2onnx", "onnx", "onnxruntime", "tokenizers"),
    "litert": ("ai_edge_litert", "tokenizers"),
}


def available_formats(names: Sequence[str]) -> list:
    """`names` less the formats whose converter or runtime is not installed (said once each)."""
    import importlib.util

    kept = []
    for name in names:
        if name not in INFERENCE_FORMATS:
            raise app.UsageError(
                f"--inference_formats: {name!r} is not one of {', '.join(INFERENCE_FORMATS)}"
            )
        missing = [
            module
            for module in FORMAT_MODULES.get(INFERENCE_FORMATS[name][0], ())
            if importlib.util.find_spec(module) is None
        ]
        if missing:
            print(f"{name} left out: {', '.join(missing)} not installed (electra-tf[deploy])")
        else:
            kept.append(name)
    return kept


PEERS = os.path.join(TOOLS_DIR, "peers")
PEER_SCRIPTS = {
    "pretrain": "hf_pretraining_step.py",
    "finetune": "hf_finetune_step.py",
    "inference": "hf_text_classification_inference.py",
}
# The inference mode's second default peer, when the peer's interpreter has onnxruntime.
ONNXRUNTIME_PEER = "hf_onnxruntime_inference.py"


def _finetune_or_inference(config) -> dict:
    """The finetune and inference modes, with the peers beside them and the ratios printed."""
    if FLAGS.mode == "finetune":
        peer_script = FLAGS.peer_script or (
            os.path.join(PEERS, PEER_SCRIPTS["finetune"]) if FLAGS.peer_python else None
        )
        peer_python = FLAGS.peer_python or sys.executable
        results = benchmark_finetune_step(
            config,
            FLAGS.steps,
            FLAGS.warmup_steps,
            FLAGS.jit_compile,
            FLAGS.finetune_lengths,
            FLAGS.group_by_length,
        )
        row_lengths = results.pop("row_lengths")
        print(
            f"fine-tuning step ({results['kernels']} kernels, "
            f"{'length-grouped' if FLAGS.group_by_length else 'random'} batches of "
            f"{FLAGS.finetune_lengths} rows, padded lengths {results['batch_lengths']}): "
            f"{results['tokens_per_second']:.0f} tokens/s "
            f"({results['padding_fraction']:.0%} of positions padding), "
            f"{results['seconds_per_step']:.3f} s/step over {results['measured_steps']} steps",
            flush=True,
        )
        if peer_script:
            with tempfile.NamedTemporaryFile("w", suffix=".json") as lengths_file:
                json.dump(row_lengths, lengths_file)
                lengths_file.flush()
                results.update(
                    benchmark_peer(
                        peer_python,
                        peer_script,
                        config,
                        FLAGS.steps,
                        FLAGS.model_size,
                        ["--lengths", lengths_file.name],
                    )
                )
            results["speedup_vs_peer"] = (
                results["tokens_per_second"] / results["peer_tokens_per_second"]
            )
            padding = results["peer"].get("padding_fraction")
            padding = f" ({padding:.0%} of positions padding)" if padding is not None else ""
            print(
                f"peer ({os.path.basename(peer_script)}): "
                f"{results['peer_tokens_per_second']:.0f} tokens/s{padding}; this implementation is "
                f"{results['speedup_vs_peer']:.2f}x that",
                flush=True,
            )
        return results
    results = benchmark_inference(
        config,
        FLAGS.inference_requests,
        FLAGS.inference_batches,
        inference_peers(FLAGS.peer_python, FLAGS.peer_script),
        FLAGS.model_size,
        FLAGS.inference_threads,
        FLAGS.serving_forward,
        FLAGS.serving_signature,
        FLAGS.inference_rounds,
        available_formats(FLAGS.inference_formats),
    )
    threads = FLAGS.inference_threads or "default"
    rounds = f", median of {FLAGS.inference_rounds} rounds" if FLAGS.inference_rounds > 1 else ""
    print(f"exported classifier, {threads} intra-/inter-op threads, fresh processes{rounds}:")
    for name, ours in results["formats"].items():
        how = (
            f"{ours['forward']} forward, signature {ours['signature']}"
            if ours["runtime"] == "saved_model"
            else f"{ours['runtime']} runtime, tokenizers"
        )
        print(
            f"  {name} ({how}): median latency {ours['latency_ms_batch1_median']:.2f} ms at "
            f"batch 1; {ours['texts_per_second_batched']:.1f} texts/s at batch "
            f"{config.train_batch_size}",
            flush=True,
        )
    for name, peer in results["peers"].items():
        print(
            f"peer {name}: median latency {peer['latency_ms_batch1_median']:.2f} ms, "
            f"{peer['texts_per_second_batched']:.1f} texts/s; its latency over each of ours, "
            "and our throughput over its:",
            flush=True,
        )
        for format_name, ratio in peer["ratios"].items():
            print(
                f"  {format_name}: {ratio['latency_ratio_peer_over_ours']:.2f}x latency, "
                f"{ratio['throughput_ratio_vs_peer']:.2f}x throughput",
                flush=True,
            )
    return results


if __name__ == "__main__":
    app.run(main)
