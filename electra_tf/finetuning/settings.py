"""The hyperparameters every fine-tuning run shares (defaults: paper Table 7)."""

from __future__ import annotations

import dataclasses
from typing import Optional

from electra_tf.config import KERNELS, MIXED_PRECISION_POLICIES
from electra_tf.errors import RunError
from electra_tf.finetuning.optimization import DEFAULT_LAYERWISE_DECAY, DEFAULT_LEARNING_RATES
from electra_tf.finetuning.loss import LOSS_REDUCTIONS

# Settings a resumed run may change: they do not alter what a finished trial
# means (accumulation and XLA compute the same update).
RESUMABLE = ("output_dir", "num_trials", "eval_batch_size", "log_every_steps",
             "save_checkpoints_steps", "save_models", "gradient_accumulation_steps",
             "jit_compile", "kernels")
# Settings added after results.json existed: recorded in it only when not at
# these defaults, so that the results of earlier runs still match.
_RECORDED_UNLESS_DEFAULT = {"mixed_precision": "none", "loss_reduction": "mean",
                            "random_init": False}


def require_positive(**values) -> None:
    """Raises RunError naming the flag of the first value that is not a positive integer."""
    for name, value in values.items():
        if value <= 0:
            raise RunError(f"--{name}={value}: must be a positive integer.")


@dataclasses.dataclass
class FinetuneSettings:
    """Optimisation, trials and output of a fine-tuning run, whatever the task.

    None for `learning_rate`, `layerwise_lr_decay` and `num_train_epochs`
    means: the default for the model size / task (see `resolve`).

    The defaults follow the paper. Three switches reproduce the original
    code (google-research/electra) instead:

    * `layerwise_lr_decay_quirk`: the top transformer layer trains at
      lr * decay ** 2, not lr * decay (see `electra_tf.finetuning.optimization`);
    * `weight_decay_rate=0.01`: the original's decoupled weight decay (paper: 0);
    * `loss_reduction="sum"`: the loss is the *sum* of the per-example losses
      of the batch (`run_finetuning.py` takes `reduce_sum`), not their mean.
      Adam is nearly blind to the loss's scale, but the global-norm clip at
      `clip_norm` (1.0) is not: the summed gradient is `train_batch_size`
      times larger, so the clip bites on almost every step and sets the step
      size. The sum is over the global batch, as the original computes it on
      one device (on TPUs it summed each core's examples, clipped each
      core's gradients and averaged the cores').

    `mixed_precision` and `loss_reduction` change the numbers of a trial and
    belong to the run's identity; `gradient_accumulation_steps`,
    `jit_compile` and `kernels` compute the same update (`kernels` with other
    dropout masks) and may change when a run resumes.
    Which devices train (the distribution strategy) is not a setting.
    """

    output_dir: str
    model_size: Optional[str] = None
    train_batch_size: int = 32
    eval_batch_size: int = 32
    learning_rate: Optional[float] = None
    num_train_epochs: Optional[float] = None
    warmup_proportion: float = 0.1
    layerwise_lr_decay: Optional[float] = None
    layerwise_lr_decay_quirk: bool = False
    weight_decay_rate: float = 0.0
    clip_norm: float = 1.0
    num_trials: int = 1
    seed: int = 0
    log_every_steps: int = 50
    save_checkpoints_steps: int = 500
    save_models: bool = True
    mixed_precision: str = "none"  # none, float16 (dynamic loss scaling) or bfloat16
    loss_reduction: str = "mean"  # mean over the global batch, or the original code's sum
    # Micro-batches per step: the same update, the activations of one micro-batch.
    gradient_accumulation_steps: int = 1
    # XLA: one device compiles the whole step; several replicas compile each
    # replica's forward and backward pass.
    jit_compile: bool = False
    # The kernel set the model runs (electra_tf.modeling.kernels): reference,
    # cpu_fast, or auto (cpu_fast without a GPU/TPU).
    kernels: str = "reference"
    # A no-pre-training baseline: the checkpoint's encoder with fresh weights.
    random_init: bool = False

    def resolve(self, model_size: str, default_epochs: float) -> "FinetuneSettings":
        """Fills the size- and task-dependent defaults and checks every value.

        Raises:
            RunError: an impossible value, naming its flag.
        """
        resolved = dataclasses.replace(self, model_size=model_size)
        if resolved.learning_rate is None:
            resolved.learning_rate = DEFAULT_LEARNING_RATES[model_size]
        if resolved.layerwise_lr_decay is None:
            resolved.layerwise_lr_decay = DEFAULT_LAYERWISE_DECAY[model_size]
        if resolved.num_train_epochs is None:
            resolved.num_train_epochs = default_epochs
        require_positive(train_batch_size=resolved.train_batch_size,
                         eval_batch_size=resolved.eval_batch_size,
                         num_trials=resolved.num_trials,
                         log_every_steps=resolved.log_every_steps,
                         save_checkpoints_steps=resolved.save_checkpoints_steps,
                         gradient_accumulation_steps=resolved.gradient_accumulation_steps)
        checks = [("learning_rate", resolved.learning_rate > 0, "must be > 0"),
                  ("num_train_epochs", resolved.num_train_epochs > 0, "must be > 0"),
                  ("warmup_proportion", 0 <= resolved.warmup_proportion < 1, "must be in [0, 1)"),
                  ("layerwise_lr_decay", 0 < resolved.layerwise_lr_decay <= 1,
                   "must be in (0, 1]"),
                  ("weight_decay_rate", resolved.weight_decay_rate >= 0, "must be >= 0"),
                  ("clip_norm", resolved.clip_norm >= 0, "must be >= 0"),
                  ("seed", 0 <= resolved.seed < 2 ** 31, "must be in [0, 2**31)"),
                  ("mixed_precision", resolved.mixed_precision in MIXED_PRECISION_POLICIES,
                   "choose one of " + ", ".join(MIXED_PRECISION_POLICIES)),
                  ("loss_reduction", resolved.loss_reduction in LOSS_REDUCTIONS,
                   "choose one of " + ", ".join(LOSS_REDUCTIONS)),
                  ("kernels", resolved.kernels in KERNELS, "choose one of " + ", ".join(KERNELS)),
                  ("train_batch_size",
                   resolved.train_batch_size % resolved.gradient_accumulation_steps == 0,
                   "must be divisible by --gradient_accumulation_steps="
                   f"{resolved.gradient_accumulation_steps}")]
        for name, ok, rule in checks:
            if not ok:
                raise RunError(f"--{name}={getattr(resolved, name)}: {rule}.")
        return resolved

    def identity(self) -> dict:
        """The settings that define the run (in results.json); the resumable ones are left out."""
        return {k: v for k, v in dataclasses.asdict(self).items()
                if k not in RESUMABLE and _RECORDED_UNLESS_DEFAULT.get(k, object()) != v}
