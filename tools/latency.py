"""Times an exported classifier as a server would run it: a fresh process, fixed threads.

The export is a single-text classifier (as the benchmark writes), in one of
three formats, each run by its own runtime, text in and probabilities out:

* `saved_model`: the raw-text signature (`--signature`, one `text` input)
  in TensorFlow, tokenization in the graph;
* `onnx`: `model.onnx` in ONNX Runtime (every graph optimisation on);
* `litert`: `model.tflite` in the LiteRT interpreter (`ai-edge-litert`).

The two token-id formats take ids: the texts are tokenized here with the
`tokenizers` library's WordPiece from the export's vocab.txt and
serving_config.json (lower case, accents, `max_seq_length`), each batch
padded to its longest text, as transformers' fast tokenizer does for the
peers.

`python -m tools.benchmark --mode=inference` runs it as a script in a fresh
interpreter (`python -I`), importing only the standard library, absl's flags,
NumPy and the runtime (and for a SavedModel TensorFlow Text, as TF Serving
has it), so the thread settings take effect before the runtime starts and
nothing of the exporting process (its graphs, caches, threads) is shared:

    python -I tools/latency.py <version_dir> <texts.txt> [--runtime saved_model] \\
        [--threads N] [--batch 32] [--requests 100] [--batches 20] \\
        [--signature serving_default]

`--threads N` sets the runtime's intra-op and inter-op threads to N each (TF
Serving's `--tensorflow_intra_op_parallelism` and
`--tensorflow_inter_op_parallelism`; ONNX Runtime's session options; LiteRT's
`num_threads`); 0 keeps its default. Prints one JSON line: the median latency
of `requests` single texts (one at a time, after 5 warm-up calls) and the
texts per second over `batches` batches.
"""

import json
import os
import sys
import time

from absl import app, flags

flags.DEFINE_enum("runtime", "saved_model", ["saved_model", "onnx", "litert"], "The format run.")
flags.DEFINE_integer("threads", 0, "The runtime's intra-op and inter-op threads (0: its default).")
flags.DEFINE_integer("batch", 32, "Texts per batch of the throughput part.")
flags.DEFINE_integer("requests", 100, "Single-text requests timed one at a time.")
flags.DEFINE_integer("batches", 20, "Batches timed.")
flags.DEFINE_string(
    "signature", "serving_default", "SavedModel: the raw-text signature (one `text` input)."
)
FLAGS = flags.FLAGS


def saved_model_predictor(version_dir: str):
    """(predict(texts) -> output arrays, {library: version}) of the raw-text signature."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer kernels)

    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
    tf.config.threading.set_inter_op_parallelism_threads(FLAGS.threads)
    signature = tf.saved_model.load(version_dir, tags=["serve"]).signatures[FLAGS.signature]

    def predict(texts):
        outputs = signature(text=tf.constant(texts))
        return [value.numpy() for value in outputs.values()]

    return predict, {"tensorflow": tf.__version__}


def token_id_predictor(version_dir: str):
    """(predict(texts) -> probabilities, {library: version}) of model.onnx or model.tflite."""
    import numpy as np
    import tokenizers

    with open(os.path.join(version_dir, "assets", "serving_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    tokenizer = tokenizers.BertWordPieceTokenizer(
        os.path.join(version_dir, "assets", "vocab.txt"),
        lowercase=config["do_lower_case"],
        strip_accents=config["strip_accents"],
    )
    tokenizer.enable_truncation(config["max_seq_length"])
    tokenizer.enable_padding()  # to the longest text of a batch
    versions = {"tokenizers": tokenizers.__version__}
    model = os.path.join(version_dir, config["model_file"])
    if FLAGS.runtime == "onnx":
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        if FLAGS.threads:
            options.intra_op_num_threads = FLAGS.threads
            options.inter_op_num_threads = FLAGS.threads
        session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])

        def run(feed):
            return session.run(["probabilities"], feed)[0]

        versions["onnxruntime"] = onnxruntime.__version__
    else:
        from ai_edge_litert import __version__ as litert_version
        from ai_edge_litert.interpreter import Interpreter

        interpreter = Interpreter(model_path=model, num_threads=FLAGS.threads or None)
        runner = interpreter.get_signature_runner(config["signatures"][0])

        def run(feed):
            return runner(**feed)["probabilities"]

        versions["ai_edge_litert"] = litert_version

    def predict(texts):
        encodings = tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], np.int32)
        feed = {
            "input_ids": ids,
            "input_mask": np.array([e.attention_mask for e in encodings], np.int32),
            "segment_ids": np.array([e.type_ids for e in encodings], np.int32),
        }
        return [run(feed)]

    return predict, versions


def main(argv):
    if len(argv) != 3:
        raise app.UsageError("usage: latency.py <version_dir> <texts.txt> [flags]")
    version_dir, texts_file = argv[1:]
    sys.modules["electra_tf"] = None  # an export must load without the project
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np

    with open(texts_file, encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f if line.strip()]
    if FLAGS.runtime == "saved_model":
        call, versions = saved_model_predictor(version_dir)
    else:
        call, versions = token_id_predictor(version_dir)

    batch = FLAGS.batch
    for i in range(5):  # warm-up: kernel set-up, both shapes
        call(texts[i : i + 1])
        call(texts[:batch])
    latencies = []
    for i in range(FLAGS.requests):
        text = texts[i % len(texts)]
        start = time.perf_counter()
        call([text])
        latencies.append(time.perf_counter() - start)
    done = 0
    start = time.perf_counter()
    for i in range(FLAGS.batches):
        first = (i * batch) % max(1, len(texts) - batch)
        some = texts[first : first + batch]
        call(some)
        done += len(some)  # fewer than `batch` if the file is short
    seconds = time.perf_counter() - start
    print(
        json.dumps(
            {
                "latency_ms_batch1_median": 1000 * float(np.median(latencies)),
                "texts_per_second_batched": done / seconds,
                "runtime": FLAGS.runtime,
                "threads": FLAGS.threads,
                "requests": FLAGS.requests,
                "batches": FLAGS.batches,
                "batch": batch,
                "signature": FLAGS.signature if FLAGS.runtime == "saved_model" else "token_ids",
                **versions,
            }
        )
    )


if __name__ == "__main__":
    app.run(main)
