"""What a training step should take on V100, A100 and H100 GPUs: FLOPs over published peaks.

    python -m tools.gpu_estimates

Run from the repository root. Nothing runs on a GPU and nothing is measured:
each figure is the step's executed FLOPs (`electra_tf.flops`: backward = two
forward passes, embedding lookups as gathers) divided by the GPU's dense
tensor-core peak in the precision the code uses on it, once at the whole peak
(a lower bound no implementation beats) and at 50% and 25% of it (the range
well-tuned transformer training reaches on large matrices; ELECTRA-Small's
256-wide matrices and short steps are more likely to sit at the bottom or
below it, where kernel launches and the host dominate).

Peaks are NVIDIA's datasheet figures for the SXM parts, without sparsity:
V100 (SXM2) 125 TFLOP/s float16 tensor cores (no bfloat16); A100 (SXM4)
312 TFLOP/s bfloat16 / float16, 156 TF32; H100 (SXM5) 989 TFLOP/s bfloat16 /
float16, 495 TF32.
"""

from __future__ import annotations

from electra_tf import flops
from electra_tf.config import preset

# name: (precision the code trains in there, its dense tensor-core peak in FLOP/s,
#        float32 matmuls' peak: TF32 tensor cores where TensorFlow uses them, else CUDA cores).
GPUS = {
    "V100": ("float16", 125e12, 15.7e12),
    "A100": ("bfloat16", 312e12, 156e12),
    "H100": ("bfloat16", 989e12, 495e12),
}
UTILISATIONS = (1.0, 0.5, 0.25)
FINETUNE_BATCH = 32
FINETUNE_LENGTH = 128


def workloads() -> list[tuple[str, float]]:
    """(description, executed FLOPs per step) of the steps estimated."""
    rows = []
    for size in ("small", "base"):
        config = preset(size)
        rows.append(
            (
                f"pre-training {size}, batch {config.train_batch_size} x {config.max_seq_length}",
                flops.executed_train_flops_per_step(config),
            )
        )
    for size in ("small", "base"):
        forward = flops.inference_flops(preset(size).model, FINETUNE_LENGTH, sparse_lookup=True)
        rows.append(
            (
                f"fine-tuning {size}, batch {FINETUNE_BATCH} x {FINETUNE_LENGTH}",
                3 * FINETUNE_BATCH * forward,
            )
        )
    return rows


def step_milliseconds(step_flops: float, peak: float, utilisation: float) -> float:
    """Milliseconds a step of `step_flops` takes at `utilisation` of `peak` FLOP/s."""
    return 1e3 * step_flops / (peak * utilisation)


def _ms(value: float) -> str:
    """Three significant digits, without an exponent."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def table() -> str:
    """The Markdown table of docs/performance.md: one row per workload, ms per GPU."""
    header = "| step | executed FLOPs | " + " | ".join(
        f"{name} ({precision}) ms at 100% / 50% / 25%" for name, (precision, _, _) in GPUS.items()
    )
    lines = [header + " |", "|---" * (2 + len(GPUS)) + "|"]
    for description, step_flops in workloads():
        cells = [
            " / ".join(_ms(step_milliseconds(step_flops, peak, u)) for u in UTILISATIONS)
            for _, peak, _ in GPUS.values()
        ]
        lines.append(f"| {description} | {step_flops:.3g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    print(table())
    print(
        "\nfloat32 without mixed precision: "
        + ", ".join(
            f"{name} {fp32 / 1e12:g} TFLOP/s ({peak / fp32:.0f}x slower at the same utilisation)"
            for name, (_, peak, fp32) in GPUS.items()
        )
    )


if __name__ == "__main__":
    main()
