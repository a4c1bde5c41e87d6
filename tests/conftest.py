"""Shared test set-up: two logical CPU devices (for MirroredStrategy tests) and tiny batches."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from electra_tf.distribute import split_cpu  # noqa: E402

# Must happen before any test touches a TensorFlow device.
split_cpu(2)

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
SPECIAL_IDS = {"pad_id": PAD, "cls_id": CLS, "sep_id": SEP, "mask_id": MASK}


def make_batch(
    rng: np.random.Generator,
    batch_size: int,
    seq_length: int,
    num_slots: int,
    vocab_size: int,
    mask_rate: float = 0.15,
) -> dict:
    """A pipeline-shaped batch built with NumPy (independent of the pipeline code).

    Rows have random lengths with padding; masking follows ELECTRA's rules.
    """
    out = {
        k: []
        for k in (
            "input_ids",
            "input_mask",
            "segment_ids",
            "masked_input_ids",
            "masked_lm_positions",
            "masked_lm_ids",
            "masked_lm_weights",
            "sampling_uniforms",
        )
    }
    for _ in range(batch_size):
        length = int(rng.integers(4, seq_length + 1))
        ids = np.zeros(seq_length, np.int32)
        ids[:length] = rng.integers(5, vocab_size, size=length)
        ids[0], ids[length - 1] = CLS, SEP
        mask = (np.arange(seq_length) < length).astype(np.int32)
        segments = np.zeros(seq_length, np.int32)
        segments[length // 2 : length] = 1
        candidates = np.arange(1, length - 1)
        count = min(max(1, min(num_slots, int(np.round(mask_rate * length)))), len(candidates))
        positions = np.zeros(num_slots, np.int32)
        positions[:count] = rng.choice(candidates, size=count, replace=False)
        weights = (np.arange(num_slots) < count).astype(np.float32)
        masked = ids.copy()
        for p in positions[:count]:
            if rng.random() < 0.85:
                masked[p] = MASK
        out["input_ids"].append(ids)
        out["input_mask"].append(mask)
        out["segment_ids"].append(segments)
        out["masked_input_ids"].append(masked)
        out["masked_lm_positions"].append(positions)
        out["masked_lm_ids"].append(ids[positions] * (weights > 0))
        out["masked_lm_weights"].append(weights)
        out["sampling_uniforms"].append(rng.random(num_slots).astype(np.float32))
    return {k: np.stack(v) for k, v in out.items()}


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(scope="session")
def two_replica_strategy():
    """One MirroredStrategy over two logical CPUs for the whole session.

    Several strategies in one process can collide on collective-op keys, so
    tests share this one, as a real program would use a single strategy.
    """
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


@pytest.fixture(autouse=True)
def _float32_policy():
    """Runs that set a mixed-precision policy must not leak it into other tests."""
    yield
    import keras

    keras.mixed_precision.set_global_policy("float32")


@pytest.fixture(params=["reference", "cpu_fast"])
def kernel_set(request):
    """Each kernel set's name in turn, for the test to build its model or call its kernels with."""
    return request.param


@pytest.fixture(scope="session")
def serving_exports(tmp_path_factory):
    """Exports shared by the serving tests (a few seconds each).

    Returns:
        dict with `pretrained` (run dir), `pair` (pair classifier version dir),
        `regression` (single-text regressor version dir), `export_base`.
    """
    from serving_support import make_serving_pretrained_dir, make_trial_dir

    from electra_tf.serving.exporter import export_finetuned_dir

    root = tmp_path_factory.mktemp("serving")
    pretrained = make_serving_pretrained_dir(str(root / "pretrained"))
    pair_trial = make_trial_dir(str(root / "pair_trial"), pretrained)
    regression_trial = make_trial_dir(
        str(root / "regression_trial"), pretrained, label_names=None, is_pair=False, seed=1
    )
    base = str(root / "export")
    return {
        "pretrained": pretrained,
        "export_base": base,
        "pair_trial": pair_trial,
        "pair": export_finetuned_dir(pair_trial, base, "pair"),
        "regression": export_finetuned_dir(regression_trial, base, "regression"),
    }
