"""The hyperparameters every fine-tuning run shares (defaults: paper Table 7)."""

from __future__ import annotations

import dataclasses
from typing import Optional

from electra_tf.errors import RunError
from electra_tf.finetuning.optimization import DEFAULT_LAYERWISE_DECAY, DEFAULT_LEARNING_RATES

# Settings a resumed run may change: they do not alter what a finished trial means.
RESUMABLE = ("output_dir", "num_trials", "eval_batch_size", "log_every_steps",
             "save_checkpoints_steps", "save_models")


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
                         save_checkpoints_steps=resolved.save_checkpoints_steps)
        checks = [("learning_rate", resolved.learning_rate > 0, "must be > 0"),
                  ("num_train_epochs", resolved.num_train_epochs > 0, "must be > 0"),
                  ("warmup_proportion", 0 <= resolved.warmup_proportion < 1, "must be in [0, 1)"),
                  ("layerwise_lr_decay", 0 < resolved.layerwise_lr_decay <= 1,
                   "must be in (0, 1]"),
                  ("weight_decay_rate", resolved.weight_decay_rate >= 0, "must be >= 0"),
                  ("clip_norm", resolved.clip_norm >= 0, "must be >= 0"),
                  ("seed", 0 <= resolved.seed < 2 ** 31, "must be in [0, 2**31)")]
        for name, ok, rule in checks:
            if not ok:
                raise RunError(f"--{name}={getattr(resolved, name)}: {rule}.")
        return resolved

    def identity(self) -> dict:
        """The settings that define the run (in results.json); the resumable ones are left out."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in RESUMABLE}
