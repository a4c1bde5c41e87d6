"""Pieces of the JAX train step that run without the JAX backend."""

import numpy as np
import pytest

pytest.importorskip("jax")

from electra_tf.modeling.jax_train_step import micro_batches  # noqa: E402


def test_micro_batches_take_every_kth_row_and_cover_the_batch_once():
    batch = {"ids": np.arange(12).reshape(6, 2), "mask": np.arange(6)}
    parts = micro_batches(batch, 3)
    assert np.asarray(parts["mask"]).tolist() == [[0, 3], [1, 4], [2, 5]]
    np.testing.assert_array_equal(parts["ids"][1], [[2, 3], [8, 9]])
    assert parts["ids"].shape == (3, 2, 2)


# Run on KERAS_BACKEND=jax: one step of a tiny pretrainer (no dropout) on one batch with
# 1, 2 and 4 micro-batches, from the same state; prints the logs and Adam's first moments.
ACCUMULATION_CHILD = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from backend_support import BATCH, LENGTH, SLOTS, VOCAB, tiny_config
from conftest import make_batch
import jax, keras
from electra_tf.modeling import jax_train_step
from electra_tf.pretraining.objectives import make_pretrainer
from electra_tf.pretraining.optimization import create_optimizer

config = tiny_config()
keras.utils.set_random_seed(0)
model = make_pretrainer(config)
batch = make_batch(np.random.default_rng(0), 4 * BATCH, LENGTH, SLOTS, VOCAB)
model.build_from_batch(batch)
optimizer = create_optimizer(config)
optimizer.build(model.trainable_variables)
model.compile(optimizer=optimizer)
state = tuple(
    [v.value for v in variables]
    for variables in (model.trainable_variables, model.non_trainable_variables, optimizer.variables)
) + ([],)
moments = [i for i, v in enumerate(optimizer.variables) if v.path.endswith("_momentum")]
out = {}
for steps in (1, 2, 4):
    model.gradient_accumulation_steps = steps
    logs, new = jax.jit(lambda s, b: jax_train_step.train_step(model, s, b))(state, batch)
    out[steps] = {
        "logs": {k: float(v) for k, v in logs.items()},
        "moments": [np.asarray(new[2][i]).ravel().tolist() for i in moments],
        "seen": int(new[1][[v.path for v in model.non_trainable_variables].index("seen_batches")]),
    }
print(json.dumps(out))
"""


@pytest.mark.slow
def test_accumulated_micro_batches_give_the_whole_batchs_gradients():
    import json
    import os
    import subprocess
    import sys

    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(tests), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", ACCUMULATION_CHILD, tests],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    whole = out["1"]
    assert whole["logs"]["total_loss"] > 0 and whole["seen"] == 1
    for steps in ("2", "4"):
        assert out[steps]["seen"] == 1  # one batch, however many micro-batches
        for name, value in whole["logs"].items():
            assert out[steps]["logs"][name] == pytest.approx(value, rel=1e-5, abs=1e-6), name
        # Adam's first moment after one step is (1 - beta_1) * gradient.
        for a, b in zip(whole["moments"], out[steps]["moments"]):
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-7)
