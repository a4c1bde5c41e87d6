"""Training and inference FLOPs of every preset and objective, as the paper counts them.

    python -m electra_tf.commands.flops

See `electra_tf.flops` for the accounting rules.
"""

from __future__ import annotations

from absl import app

from electra_tf import cli, flops
from electra_tf.config import MODEL_SIZES, OBJECTIVES, preset


def main(argv) -> None:
    """Prints the tables."""
    if argv[1:]:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    print(
        f"{'size':<6} {'train (ELECTRA)':>16} {'train (MLM)':>12} {'per step':>10} "
        f"{'infer@128':>10} {'params':>8}"
    )
    for size in MODEL_SIZES:
        config = preset(size)
        mlm = flops.train_flops(config, objective="mlm")
        step = flops.train_flops_per_step(config)
        inference = flops.inference_flops(config.model, 128)
        print(
            f"{size:<6} {flops.train_flops(config):>16.3g} {mlm:>12.3g} {step:>10.3g} "
            f"{inference:>10.3g} {flops.count_parameters(config.model) / 1e6:>7.1f}M"
        )
    print(
        "\nTraining FLOPs per step of each objective (the preset's batch and length; "
        "relative to ELECTRA's):"
    )
    variants = [(name, dict(objective=name)) for name in OBJECTIVES]
    variants.append(("electra + gdes", dict(weight_sharing="gdes")))
    print(f"{'objective':<16}" + "".join(f"{size:>18}" for size in MODEL_SIZES))
    for name, overrides in variants:
        cells = []
        for size in MODEL_SIZES:
            base = flops.train_flops_per_step(preset(size))
            value = flops.train_flops_per_step(preset(size, **overrides))
            cells.append(f"{value:>10.3g} ({value / base:.2f})")
        print(f"{name:<16}" + "".join(f"{cell:>18}" for cell in cells))


if __name__ == "__main__":
    cli.run(main, __name__)
