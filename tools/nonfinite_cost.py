"""What the non-finite check costs a pre-training step: the same step with and without it.

    python -m tools.nonfinite_cost --model_size=tiny --train_batch_size=32 --max_seq_length=128

Run from the repository root. The train step records the first step whose loss
or gradient norm is not finite (`electra_tf.finiteness`) when the loop attaches
a `NonFiniteRecord`; this builds the same model twice, with the record and
without, and times their compiled steps in alternating windows of `--steps`
steps, `--rounds` times, in one process, so that the machine's load falls on
both alike. It prints the median milliseconds per step of each and of their
difference over the rounds, with the machine.
"""

from __future__ import annotations

import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app, flags, logging  # noqa: E402

from electra_tf.config import preset  # noqa: E402
from electra_tf.finiteness import NonFiniteRecord  # noqa: E402
from electra_tf.pretraining.objectives import make_pretrainer  # noqa: E402
from electra_tf.pretraining.optimization import create_optimizer  # noqa: E402
from tools.benchmark import machine_info, synthetic_batches  # noqa: E402

# --model_size, --train_batch_size, --max_seq_length, --vocab_size, --steps (per
# window here) and --warmup_steps are tools.benchmark's flags.
flags.DEFINE_integer("rounds", 10, "Windows of --steps steps timed per variant, alternating.")
FLAGS = flags.FLAGS


def _step_function(config, features, checked: bool):
    """(call running one compiled step, the model): the step of `config`, checked or not."""
    keras.utils.set_random_seed(0)
    model = make_pretrainer(config)
    model.build_from_batch({k: v[:1] for k, v in features.items()})
    if checked:
        model.nonfinite_record = NonFiniteRecord()
    model.compile(optimizer=create_optimizer(config, config.mixed_precision))
    model.make_train_function()
    batches = iter(
        tf.data.Dataset.from_tensor_slices(features)
        .batch(config.train_batch_size, drop_remainder=True)
        .cache()
        .repeat()
        .prefetch(2)
    )

    def step():
        logs = model.train_function(batches)
        return float(logs["total_loss"])  # waits for the step to end

    return step, model


def measure(config, steps: int, rounds: int, warmup_steps: int) -> dict:
    """Milliseconds per step with and without the check, alternating windows.

    Returns:
        `checked_ms` and `unchecked_ms` (medians over the rounds), `difference_ms`
        (the median of the rounds' differences) and every window's value.
    """
    features = synthetic_batches(config, count=4)
    variants = {
        name: _step_function(config, features, name == "checked")[0]
        for name in ("checked", "unchecked")
    }
    for step in variants.values():
        for _ in range(warmup_steps):
            step()
    windows: dict = {name: [] for name in variants}
    for round_ in range(rounds):
        order = ("checked", "unchecked") if round_ % 2 == 0 else ("unchecked", "checked")
        for name in order:
            started = time.perf_counter()
            for _ in range(steps):
                variants[name]()
            windows[name].append(1000.0 * (time.perf_counter() - started) / steps)
    differences = [a - b for a, b in zip(windows["checked"], windows["unchecked"])]
    return {
        "checked_ms": float(np.median(windows["checked"])),
        "unchecked_ms": float(np.median(windows["unchecked"])),
        "difference_ms": float(np.median(differences)),
        "windows": windows,
    }


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    config = preset(
        FLAGS.model_size,
        train_batch_size=FLAGS.train_batch_size,
        max_seq_length=FLAGS.max_seq_length,
        vocab_size=FLAGS.vocab_size,
        num_warmup_steps=0,
    )
    config.validate()
    result = measure(config, FLAGS.steps, FLAGS.rounds, FLAGS.warmup_steps)
    print(json.dumps({"machine": machine_info(), **result}, indent=2))
    print(
        f"{FLAGS.model_size}, batch {config.train_batch_size}, length {config.max_seq_length}: "
        f"{result['unchecked_ms']:.1f} ms per step without the check, "
        f"{result['checked_ms']:.1f} ms with it (medians of {FLAGS.rounds} alternating windows "
        f"of {FLAGS.steps} steps); median difference {result['difference_ms']:+.1f} ms."
    )


if __name__ == "__main__":
    app.run(main)
