"""Times the dense products of one classifier request on each library's matrix kernels.

    python -m tools.dense_products --model_size=small --tokens=24 --threads=1 \\
        --peer_python=/path/to/peer-venv/bin/python

A served request of ELECTRA-Small spends most of its time in its dense layers'
products ([tokens, in] x [in, out]: the embedding projection, per layer the
fused QKV projection, attention output, FFN intermediate and FFN output, then
the head). This times exactly those products, nothing else, on TensorFlow's
kernels (what TF Serving runs) and, with `--peer_python`, on PyTorch's and
ONNX Runtime's, so a latency gap can be split into "the kernels" and "the rest
of the graph".

The shapes come from the classifier the inference benchmark exports
(`electra_tf.modeling.lean_forward.encoder_dense_layers` and `head_layers`).
Every library runs in a fresh process with `--threads` intra-op and inter-op
threads, the same NumPy-generated inputs and weights; `--rounds` rounds
alternate the libraries, and each reports the median time of one request's
products over `--repeats` calls after warm-up, its GFLOP/s, and its largest
difference from NumPy's float64 products (so each measured what it claims).

The worker part (`--worker`) imports only NumPy and the library it times, so
it runs in an interpreter without this project or TensorFlow.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Callable

import numpy as np

BACKENDS = ("tensorflow", "torch", "onnxruntime")
WARMUP_CALLS = 20


def operands(shapes: list, tokens: int, seed: int = 0) -> tuple[list, list]:
    """([x_i: [tokens, in_i]], [w_i: [in_i, out_i]]) float32, the same in every process."""
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal((tokens, k)).astype(np.float32) for k, _ in shapes]
    weights = [(0.02 * rng.standard_normal((k, n))).astype(np.float32) for k, n in shapes]
    return inputs, weights


def product_flops(shapes: list, tokens: int) -> int:
    """Multiply-adds counted as two FLOPs: 2 * tokens * sum(in * out)."""
    return 2 * tokens * sum(k * n for k, n in shapes)


def _tensorflow(inputs, weights, threads) -> tuple[Callable, Callable, str]:
    import tensorflow as tf

    if threads:  # before TensorFlow starts: the worker is a fresh process
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    xs = [tf.constant(x) for x in inputs]
    ws = [tf.constant(w) for w in weights]

    @tf.function
    def products():
        return [tf.linalg.matmul(x, w) for x, w in zip(xs, ws)]

    def call():
        return [y.numpy() for y in products()]

    return call, call, tf.__version__


def _torch(inputs, weights, threads) -> tuple[Callable, Callable, str]:
    import torch

    if threads:
        torch.set_num_threads(threads)
        torch.set_num_interop_threads(threads)
    xs = [torch.from_numpy(x) for x in inputs]
    ws = [torch.from_numpy(w) for w in weights]

    def call():
        with torch.inference_mode():
            return [x @ w for x, w in zip(xs, ws)]

    return call, lambda: [y.numpy() for y in call()], torch.__version__


def _onnxruntime(inputs, weights, threads) -> tuple[Callable, Callable, str]:
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    nodes, graph_inputs, graph_outputs, initializers = [], [], [], []
    for i, (x, w) in enumerate(zip(inputs, weights)):
        initializers.append(numpy_helper.from_array(w, f"w{i}"))
        graph_inputs.append(helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, x.shape))
        graph_outputs.append(
            helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, (x.shape[0], w.shape[1]))
        )
        nodes.append(helper.make_node("MatMul", [f"x{i}", f"w{i}"], [f"y{i}"]))
    graph = helper.make_graph(nodes, "products", graph_inputs, graph_outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    feed = {f"x{i}": x for i, x in enumerate(inputs)}

    def call():
        return session.run(None, feed)

    return call, call, ort.__version__


# backend -> setup(inputs, weights, threads): (call, call returning NumPy arrays, version).
SETUPS = {"tensorflow": _tensorflow, "torch": _torch, "onnxruntime": _onnxruntime}


def time_products(backend: str, shapes: list, tokens: int, threads: int, repeats: int) -> dict:
    """One library's median time for all of `shapes`' products of one request, in this process.

    Args:
        backend: one of `BACKENDS`.
        shapes: [(in, out)] of the request's dense layers, in order.
        tokens: rows of every product (the request's batch x length).
        threads: intra-op and inter-op threads (0: the library's default).
        repeats: timed calls after `WARMUP_CALLS`.

    Returns:
        `backend`, `version`, `median_ms`, `gflops`, `max_abs_error_vs_numpy`,
        and the settings.
    """
    inputs, weights = operands(shapes, tokens)
    call, results, version = SETUPS[backend](inputs, weights, threads)
    error = max(
        float(np.max(np.abs(y - x.astype(np.float64) @ w.astype(np.float64))))
        for y, x, w in zip(results(), inputs, weights)
    )
    for _ in range(WARMUP_CALLS):
        call()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    median = statistics.median(seconds)
    return {
        "backend": backend,
        "version": version,
        "products": len(shapes),
        "tokens": tokens,
        "threads": threads,
        "repeats": repeats,
        "median_ms": 1000 * median,
        "gflops": product_flops(shapes, tokens) / median / 1e9,
        "max_abs_error_vs_numpy": error,
    }


def request_shapes(model_size: str, vocab_size: int = 8000) -> list:
    """[(in, out)] of the dense layers a classifier request of `model_size` multiplies by."""
    import dataclasses

    from electra_tf.config import preset
    from electra_tf.modeling import lean_forward
    from tools.benchmark import random_classifier

    # Only the kernels' shapes are read, so the random weights need no seed.
    config = preset(model_size)
    model = random_classifier(
        dataclasses.replace(config, model=dataclasses.replace(config.model, vocab_size=vocab_size))
    )
    layers = [*lean_forward.encoder_dense_layers(model.encoder), *lean_forward.head_layers(model)]
    return [tuple(int(d) for d in layer.kernel.shape) for layer in layers]


def _worker_command(python: str, backend: str, shapes, args) -> list:
    return [
        python,
        os.path.abspath(__file__),
        "--worker",
        f"--backend={backend}",
        f"--shapes={json.dumps(shapes)}",
        f"--tokens={args.tokens}",
        f"--threads={args.threads}",
        f"--repeats={args.repeats}",
    ]


def compare(args) -> dict:
    """Every available library, `args.rounds` rounds alternating, medians over the rounds."""
    shapes = request_shapes(args.model_size)
    runners = [("tensorflow", sys.executable)]
    if args.peer_python:
        for backend, module in (("torch", "torch"), ("onnxruntime", "onnxruntime, onnx")):
            probe = subprocess.run(
                [args.peer_python, "-c", f"import {module}"], capture_output=True
            )
            if probe.returncode == 0:
                runners.append((backend, args.peer_python))
            else:
                print(f"{args.peer_python} cannot import {module}: {backend} left out", flush=True)
    from tools.benchmark import machine_info, run_json_script

    runs = {backend: [] for backend, _ in runners}
    for _ in range(args.rounds):
        for backend, python in runners:
            runs[backend].append(run_json_script(_worker_command(python, backend, shapes, args)))

    report = {
        "machine": machine_info(),
        "model_size": args.model_size,
        "shapes": shapes,
        "mflop": product_flops(shapes, args.tokens) / 1e6,
        "backends": {},
    }
    for backend, reports in runs.items():
        report["backends"][backend] = {
            **reports[-1],
            "median_ms": statistics.median(r["median_ms"] for r in reports),
            "gflops": statistics.median(r["gflops"] for r in reports),
            "rounds_ms": [r["median_ms"] for r in reports],
        }
    return report


def _arguments(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_size", default="small", help="Size preset of the classifier.")
    parser.add_argument("--tokens", type=int, default=24, help="Rows: the request's tokens.")
    parser.add_argument("--threads", type=int, default=1, help="0: each library's default.")
    parser.add_argument("--repeats", type=int, default=300, help="Timed calls per round.")
    parser.add_argument("--rounds", type=int, default=3, help="Rounds alternating the libraries.")
    parser.add_argument("--peer_python", help="Interpreter with torch / onnxruntime + onnx.")
    parser.add_argument("--json", help="Also write the report here.")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--backend", choices=BACKENDS, help=argparse.SUPPRESS)
    parser.add_argument("--shapes", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("tokens", "repeats", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}={getattr(args, name)}: give a positive number")
    if args.threads < 0:
        parser.error(f"--threads={args.threads}: give 0 (the default) or more")
    if args.worker and not (args.backend and args.shapes):
        parser.error("--worker needs --backend and --shapes")
    return args


def main(argv=None) -> int:
    args = _arguments(argv)
    if args.worker:
        shapes = [tuple(shape) for shape in json.loads(args.shapes)]
        result = time_products(args.backend, shapes, args.tokens, args.threads, args.repeats)
        print(json.dumps(result))
        return 0
    report = compare(args)
    print(json.dumps(report["machine"]))
    print(
        f"{report['model_size']}: {len(report['shapes'])} products of {args.tokens} rows, "
        f"{report['mflop']:.1f} MFLOP, {args.threads or 'default'} thread(s)"
    )
    tensorflow_ms = report["backends"]["tensorflow"]["median_ms"]
    for backend, result in report["backends"].items():
        rounds = ", ".join(f"{ms:.2f}" for ms in result["rounds_ms"])
        print(
            f"  {backend:<12} {result['version']:<14} {result['median_ms']:6.2f} ms ({rounds})  "
            f"{result['gflops']:5.1f} GFLOP/s  TensorFlow's time / its: "
            f"{tensorflow_ms / result['median_ms']:.2f}  "
            f"max |error| vs NumPy {result['max_abs_error_vs_numpy']:.1e}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
