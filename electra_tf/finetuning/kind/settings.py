"""What a fine-tuning run is given: its hyperparameters (defaults: paper Table 7) and inputs.

`FinetuneSettings` holds the hyperparameters every run shares, whatever the
task; `FinetuneOptions` what `finetune.py` trains on and does with the
result. Each field's metadata holds its flag's help (and `choices`, the
allowed values), from which `electra_tf.cli` generates the fine-tuning
flags, together with those of `electra_tf.finetuning.kind.files.FileTaskOptions`
and each kind's own `OPTIONS`.
The module imports no TensorFlow.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from electra_tf.config import (
    DEFAULT_KERNELS,
    KERNELS,
    KERNELS_HELP,
    MIXED_PRECISION_POLICIES,
    MODEL_SIZES,
    flag_field,
)
from electra_tf.errors import RunError

# Learning rates of Table 7 (paper) by model size; tiny follows small.
DEFAULT_LEARNING_RATES = {"tiny": 3e-4, "small": 3e-4, "base": 1e-4, "large": 5e-5}
DEFAULT_LAYERWISE_DECAY = {"tiny": 0.8, "small": 0.8, "base": 0.8, "large": 0.9}
# How the per-example losses of a batch become the loss (see `FinetuneSettings`).
LOSS_REDUCTIONS = ("mean", "sum")
# The heads of classifiers and QA models: the original code's, or transformers' (the
# `head` of `ElectraClassifier` and `ElectraQA`).
TASK_HEADS = ("electra", "transformers")

# Settings a resumed run may change: they do not alter what a finished trial
# means (accumulation and XLA compute the same update).
RESUMABLE = (
    "output_dir",
    "num_trials",
    "eval_batch_size",
    "log_every_steps",
    "save_checkpoints_steps",
    "save_models",
    "gradient_accumulation_steps",
    "jit_compile",
    "kernels",
)
# Settings added after results.json existed: recorded in it only when not at
# these values (what runs did before the setting), so that the results of
# earlier runs still match.
_RECORDED_UNLESS_DEFAULT = {
    "mixed_precision": "none",
    "loss_reduction": "mean",
    "random_init": False,
    # Runs before this setting batched at random.
    "group_by_length": False,
}


def init_checkpoint_field(imported_into: str):
    """The --init_checkpoint field of a command that fine-tunes (foreign ones are converted)."""
    return flag_field(
        None,
        "Pre-training run directory, its export/ directory or discriminator.keras; or a "
        "google-research/electra checkpoint or Hugging Face ELECTRA directory (converted once "
        f"into {imported_into}).",
    )


def vocab_file_field():
    """The --vocab_file field of a command that fine-tunes."""
    return flag_field(None, "Vocabulary (default: the checkpoint's vocab.txt).")


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
      lr * decay ** 2, not lr * decay (see `electra_tf.finetuning.kind.optimization`);
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

    output_dir: str = dataclasses.field(
        metadata={"help": "Default: runs/finetune/<task>-<checkpoint name>."}
    )
    model_size: Optional[str] = flag_field(
        None,
        "tiny, small, base or large. Default: the checkpoint's; if given it must match "
        "it. Selects the default learning rate and layer-wise decay.",
        choices=MODEL_SIZES,
    )
    train_batch_size: int = flag_field(32, "Examples per step.")
    eval_batch_size: int = flag_field(32, "Examples per prediction batch.")
    learning_rate: Optional[float] = flag_field(
        None, "Peak learning rate (default: 3e-4 tiny/small, 1e-4 base, 5e-5 large)."
    )
    num_train_epochs: Optional[float] = flag_field(
        None, "Default: 10 for rte and stsb, 2 for squad, else 3."
    )
    warmup_proportion: float = flag_field(0.1, "Fraction of steps of linear warmup.")
    layerwise_lr_decay: Optional[float] = flag_field(
        None,
        "Learning-rate factor per layer from the top (default 0.8, 0.9 for large; 1 disables).",
    )
    layerwise_lr_decay_quirk: bool = flag_field(
        False,
        "Reproduce the original code: the top transformer layer gets lr*decay^2 instead "
        "of lr*decay.",
    )
    weight_decay_rate: float = flag_field(
        0.0, "Decoupled weight decay (paper: 0; original code: 0.01)."
    )
    clip_norm: float = flag_field(
        1.0, "Clip the gradients to this global norm (0: no clipping).", flag=False
    )
    num_trials: int = flag_field(
        1,
        "Fine-tuning runs with seeds seed, seed+1, ...; the median "
        "is reported (the paper: median of 10).",
    )
    seed: int = flag_field(0, "Seed of the first trial.")
    log_every_steps: int = flag_field(50, "Console / TensorBoard interval in steps.")
    save_checkpoints_steps: int = flag_field(
        500,
        "Training checkpoint interval in steps; an interrupted trial resumes from the last one.",
    )
    save_models: bool = flag_field(
        True, "Save each trial's fine-tuned model (model.json + model.weights.h5)."
    )
    mixed_precision: str = flag_field(
        "none",
        "none, float16 (with dynamic loss scaling) or bfloat16. Saved models and "
        "exports are float32.",
        choices=MIXED_PRECISION_POLICIES,
    )
    loss_reduction: str = flag_field(
        "mean",
        "mean: the loss is the mean of the per-example losses over the global batch. "
        "sum: their sum, as the original code (run_finetuning.py) computes it; the gradient is "
        "then batch-size times larger, so the global-norm clip at 1.0 bites on almost every "
        "step and sets the step size.",
        choices=LOSS_REDUCTIONS,
    )
    # Micro-batches per step: the same update, the activations of one micro-batch.
    gradient_accumulation_steps: int = flag_field(
        1,
        "Split each batch into this many micro-batches whose gradients are summed before "
        "one update (same update, less memory).",
    )
    # XLA: one device compiles the whole step; several replicas compile each
    # replica's forward and backward pass.
    jit_compile: bool = flag_field(
        False,
        "Compile the training step with XLA (with several "
        "replicas: each replica's forward and backward pass).",
    )
    # The kernel set the model runs (electra_tf.modeling.kernels).
    kernels: str = flag_field(DEFAULT_KERNELS, KERNELS_HELP, choices=KERNELS)
    # Fewer padded tokens per step, and a few fixed shapes for XLA to compile.
    group_by_length: bool = flag_field(
        True,
        "Batch training examples of similar length together, each batch padded to one of a "
        "few lengths (16, 32, 48, 64, 96, 128, ...), instead of random batches padded to "
        "their longest example.",
    )
    # A no-pre-training baseline: the checkpoint's encoder with fresh weights.
    random_init: bool = flag_field(
        False,
        "No-pre-training baseline: the --init_checkpoint's encoder (architecture, "
        "vocabulary, tokenizer) with freshly drawn weights, fine-tuned the same way, to see "
        "what pre-training adds.",
    )

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
        require_positive(
            train_batch_size=resolved.train_batch_size,
            eval_batch_size=resolved.eval_batch_size,
            num_trials=resolved.num_trials,
            log_every_steps=resolved.log_every_steps,
            save_checkpoints_steps=resolved.save_checkpoints_steps,
            gradient_accumulation_steps=resolved.gradient_accumulation_steps,
        )
        checks = [
            ("learning_rate", resolved.learning_rate > 0, "must be > 0"),
            ("num_train_epochs", resolved.num_train_epochs > 0, "must be > 0"),
            ("warmup_proportion", 0 <= resolved.warmup_proportion < 1, "must be in [0, 1)"),
            ("layerwise_lr_decay", 0 < resolved.layerwise_lr_decay <= 1, "must be in (0, 1]"),
            ("weight_decay_rate", resolved.weight_decay_rate >= 0, "must be >= 0"),
            ("clip_norm", resolved.clip_norm >= 0, "must be >= 0"),
            ("seed", 0 <= resolved.seed < 2**31, "must be in [0, 2**31)"),
            (
                "mixed_precision",
                resolved.mixed_precision in MIXED_PRECISION_POLICIES,
                "choose one of " + ", ".join(MIXED_PRECISION_POLICIES),
            ),
            (
                "loss_reduction",
                resolved.loss_reduction in LOSS_REDUCTIONS,
                "choose one of " + ", ".join(LOSS_REDUCTIONS),
            ),
            ("kernels", resolved.kernels in KERNELS, "choose one of " + ", ".join(KERNELS)),
            (
                "train_batch_size",
                resolved.train_batch_size % resolved.gradient_accumulation_steps == 0,
                "must be divisible by --gradient_accumulation_steps="
                f"{resolved.gradient_accumulation_steps}",
            ),
        ]
        for name, ok, rule in checks:
            if not ok:
                raise RunError(f"--{name}={getattr(resolved, name)}: {rule}.")
        return resolved

    def identity(self) -> dict:
        """The settings that define the run (in results.json); the resumable ones are left out."""
        return {
            k: v
            for k, v in dataclasses.asdict(self).items()
            if k not in RESUMABLE and _RECORDED_UNLESS_DEFAULT.get(k, object()) != v
        }


@dataclasses.dataclass
class FinetuneOptions:
    """What `finetune.py` fine-tunes, on which data, and what it does with the result.

    The flags of the command besides those of `FinetuneSettings` and
    `FileTaskOptions` (how the user's files are read) and the devices'.
    None for `max_seq_length` means the task's default (128; 512 for squad).
    """

    # What and from where.
    task: Optional[str] = flag_field(
        None,
        "A GLUE task (sst2, mnli, ...: docs/finetuning.md lists them), squad (question "
        "answering, see --squad_version), or a name for your own task given with --train_file "
        "(default name: custom).",
    )
    init_checkpoint: Optional[str] = init_checkpoint_field("runs/imported/")
    vocab_file: Optional[str] = vocab_file_field()
    data_dir: Optional[str] = flag_field(
        None,
        "GLUE data in the standard layout (CoLA/, SST-2/, ...). Without it, GLUE tasks "
        "are read from TensorFlow Datasets (prepared data only).",
    )
    tfds_data_dir: Optional[str] = flag_field(
        None, "Where TFDS datasets are prepared (default: TFDS's)."
    )
    # The user's own data (how it is read: FileTaskOptions).
    train_file: Optional[str] = flag_field(
        None,
        "Your training data: .csv, .tsv/.txt (tab-separated, with a header), .jsonl or a JSON "
        "array; with --task=squad a SQuAD-format JSON file; with another --task_type the "
        "layout its kind reads (see docs/finetuning.md).",
    )
    dev_file: Optional[str] = flag_field(
        None, "Your dev data (same format), scored after every epoch."
    )
    test_file: Optional[str] = flag_field(None, "Unlabelled data to predict (same format).")
    # The run.
    max_seq_length: Optional[int] = flag_field(
        None, "Tokens per example, special tokens included (default: 128; 512 for squad)."
    )
    max_train_examples: Optional[int] = flag_field(
        None,
        "Train on this many examples drawn from the training set (the same draw for "
        "every run; for quick comparisons).",
    )
    task_head: str = flag_field(
        "electra",
        "Classification, regression and squad: electra, the original code's head (one "
        "dense layer on [CLS]; for squad the end conditioned on the start, and an "
        "answerability classifier), or transformers, Hugging Face's "
        "ElectraForSequenceClassification / ElectraForQuestionAnswering head (dense + GELU "
        "+ out_proj on [CLS]; independent start and end logits), which `convert export-hf` "
        "can write for transformers.",
        choices=TASK_HEADS,
    )
    double_unordered: bool = flag_field(
        False,
        "Pair tasks: also train on every pair in the B, A order (the original does this "
        "for MRPC and STS-B).",
    )
    restart: bool = flag_field(
        False,
        "Start unfinished trials again from step 0 although they have checkpoints (moved "
        "aside to checkpoints.before-restart-<time>/, not deleted). Without it an unfinished "
        "trial always resumes.",
    )
    export_model_name: Optional[str] = flag_field(
        None,
        "TF Serving model name of the export written to <output_dir>/export/<name>/"
        "<version>/ from the best trial (default: the task name; needs --save_models).",
    )
    export: bool = flag_field(True, "Write that TF Serving export at the end.")
