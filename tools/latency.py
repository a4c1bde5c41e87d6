"""Times a raw-text SavedModel as a server would run it: a fresh process, fixed threads.

The export is a single-text classifier (one `text` input, as the benchmark writes).

`python -m tools.benchmark --mode=inference` runs it as a script in a fresh
interpreter (`python -I`), importing only the standard library, absl's flags,
NumPy, TensorFlow and TensorFlow Text (as TF Serving has them; TensorFlow
imports absl itself), so the thread settings take effect before TensorFlow
starts and nothing of the exporting process (its graphs, caches, threads) is
shared:

    python -I tools/latency.py <version_dir> <texts.txt> [--threads N] [--batch 32] \\
        [--requests 100] [--batches 20] [--signature serving_default]

`--threads N` sets TensorFlow's intra-op and inter-op thread pools to N each
(TF Serving's `--tensorflow_intra_op_parallelism` and
`--tensorflow_inter_op_parallelism`); 0 keeps TensorFlow's default (one per
core). Prints one JSON line: the median latency of `requests` single texts
(one at a time, after 5 warm-up calls) and the texts per second over
`batches` batches, through the raw-text signature `--signature` (by default
`serving_default`).
"""

import json
import os
import sys
import time

from absl import app, flags

flags.DEFINE_integer("threads", 0, "TensorFlow's intra-op and inter-op threads (0: its default).")
flags.DEFINE_integer("batch", 32, "Texts per batch of the throughput part.")
flags.DEFINE_integer("requests", 100, "Single-text requests timed one at a time.")
flags.DEFINE_integer("batches", 20, "Batches timed.")
flags.DEFINE_string("signature", "serving_default", "The raw-text signature (one `text` input).")
FLAGS = flags.FLAGS


def main(argv):
    if len(argv) != 3:
        raise app.UsageError("usage: latency.py <version_dir> <texts.txt> [flags]")
    version_dir, texts_file = argv[1:]
    sys.modules["electra_tf"] = None  # an export must load without the project
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer kernels)

    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
    tf.config.threading.set_inter_op_parallelism_threads(FLAGS.threads)
    with open(texts_file, encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f if line.strip()]
    predict = tf.saved_model.load(version_dir, tags=["serve"]).signatures[FLAGS.signature]

    def call(some):
        outputs = predict(text=tf.constant(some))
        return [value.numpy() for value in outputs.values()]

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
                "threads": FLAGS.threads,
                "requests": FLAGS.requests,
                "batches": FLAGS.batches,
                "batch": batch,
                "signature": FLAGS.signature,
                "tensorflow": tf.__version__,
            }
        )
    )


if __name__ == "__main__":
    app.run(main)
