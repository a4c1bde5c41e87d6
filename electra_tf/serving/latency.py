"""Times a raw-text SavedModel as a server would run it: a fresh process, fixed threads.

The export is a single-text classifier (one `text` input, as the benchmark writes).

Run as a script in a fresh interpreter (`python -I`), importing only the
standard library, NumPy, TensorFlow and TensorFlow Text (as TF Serving has
them), so the thread settings take effect before TensorFlow starts and
nothing of the exporting process (its graphs, caches, threads) is shared:

    python -I latency.py <version_dir> <texts.txt> [--threads N] [--batch 32] \\
        [--requests 100] [--batches 20]

`--threads N` sets TensorFlow's intra-op and inter-op thread pools to N each
(TF Serving's `--tensorflow_intra_op_parallelism` and
`--tensorflow_inter_op_parallelism`); 0 keeps TensorFlow's default (one per
core). Prints one JSON line: the median latency of `requests` single texts
(one at a time, after 5 warm-up calls) and the texts per second over
`batches` batches, through the `serving_default` signature.
"""

import argparse
import json
import os
import sys
import time


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("version_dir")
    parser.add_argument("texts", help="a text per line")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--batches", type=int, default=20)
    args = parser.parse_args(argv)
    sys.modules["electra_tf"] = None  # an export must load without the project
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer kernels)

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    with open(args.texts, encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f if line.strip()]
    predict = tf.saved_model.load(args.version_dir, tags=["serve"]).signatures["serving_default"]

    def call(some):
        outputs = predict(text=tf.constant(some))
        return [value.numpy() for value in outputs.values()]

    batch = args.batch
    for i in range(5):  # warm-up: kernel set-up, both shapes
        call(texts[i:i + 1])
        call(texts[:batch])
    latencies = []
    for i in range(args.requests):
        text = texts[i % len(texts)]
        start = time.perf_counter()
        call([text])
        latencies.append(time.perf_counter() - start)
    done = 0
    start = time.perf_counter()
    for i in range(args.batches):
        first = (i * batch) % max(1, len(texts) - batch)
        some = texts[first:first + batch]
        call(some)
        done += len(some)  # fewer than `batch` if the file is short
    seconds = time.perf_counter() - start
    print(json.dumps({"latency_ms_batch1_median": 1000 * float(np.median(latencies)),
                      "texts_per_second_batched": done / seconds,
                      "threads": args.threads, "requests": args.requests,
                      "batches": args.batches, "batch": batch,
                      "tensorflow": tf.__version__}))


if __name__ == "__main__":
    main()
