import pytest

from electra_tf import flops
from electra_tf.config import preset
from tools import gpu_estimates


def test_a_step_takes_its_flops_over_the_used_share_of_the_peak():
    # 1e12 FLOPs at half of V100's 125 TFLOP/s: 1e12 / 62.5e12 s = 16 ms.
    assert gpu_estimates.step_milliseconds(1e12, 125e12, 0.5) == pytest.approx(16.0)
    assert gpu_estimates.step_milliseconds(1e12, 125e12, 1.0) == pytest.approx(8.0)


def test_the_table_holds_each_step_at_each_gpu():
    rows = gpu_estimates.table().splitlines()
    assert len(rows) == 2 + 4  # header, rule, two pre-training and two fine-tuning steps
    small = next(row for row in rows if row.startswith("| pre-training small"))
    step = flops.executed_train_flops_per_step(preset("small"))
    # A100's cells: the whole bfloat16 peak, half and a quarter of it.
    a100 = small.split("|")[4].split(" / ")
    expected = [1e3 * step / (312e12 * u) for u in (1.0, 0.5, 0.25)]
    assert [float(cell.replace(",", "")) for cell in a100] == pytest.approx(expected, rel=5e-3)
    # Fine-tuning executes three forward passes of 32 sequences of 128 tokens.
    workloads = dict(gpu_estimates.workloads())
    forward = flops.inference_flops(preset("base").model, 128, sparse_lookup=True)
    assert workloads["fine-tuning base, batch 32 x 128"] == pytest.approx(3 * 32 * forward)
