"""Typed configuration for ELECTRA models and pre-training runs.

Two dataclasses describe a run:

* `ModelConfig`: the discriminator's architecture plus how the generator is
  derived from it (width and depth fractions).
* `PretrainingConfig`: the model plus the pre-training recipe (masking,
  loss weights, optimisation, schedule, logging).

Presets follow the ELECTRA paper (Table 6) and the original code:
`small`, `base` and `large`, plus `tiny`, a CPU-sized model for tests and
quick experiments. Every field can be overridden (see `pretrain.py`), the
resolved config is written as JSON beside every run, and `validate()` rejects
impossible values with a message that names the offending flag.

Each field carries its flag's help text (`dataclasses.field` metadata
`help`, and `choices` for a field with a fixed set of values), from which
`electra_tf.cli` generates the flags. The module imports only the standard
library; importing it through the package still loads TensorFlow, since
`electra_tf/__init__` registers the Keras classes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import typing
from typing import Any, Optional

MODEL_SIZES = ("tiny", "small", "base", "large")
# BERT's WordPiece vocabulary size, the paper's (and the default when a vocabulary is learned).
BERT_VOCAB_SIZE = 30522
MIXED_PRECISION_POLICIES = ("none", "float16", "bfloat16")
# The pre-training objectives the paper compares (Section 3.5, Table 5), and
# Electric (Clark et al., EMNLP 2020), the energy-based cloze objective of the
# original repository.
OBJECTIVES = ("electra", "mlm", "electra_15", "replace_mlm", "all_tokens_mlm", "electric")
# How generator and discriminator are trained (Section 3.2, Figure 3 right).
TRAINING_ALGORITHMS = ("joint", "two_stage", "adversarial")
# What the generator shares with the discriminator (Section 3.2), and
# gradient-disentangled embedding sharing (DeBERTaV3, He et al. 2021, Section 3):
# the discriminator's token table is the generator's, without gradient, plus a
# residual of its own.
WEIGHT_SHARING = ("none", "embeddings", "all", "gdes")
# The kernel sets a model can run (electra_tf.modeling.kernels): auto (the
# default: cpu_fast when TensorFlow sees no GPU or TPU, else reference),
# reference (Keras layers and keras.ops on any Keras backend, what a reader
# checks against the paper) or cpu_fast (TensorFlow only: hand-written
# gradients for XLA on a CPU).
KERNELS = ("auto", "reference", "cpu_fast")
DEFAULT_KERNELS = "auto"
# The --kernels help of every command that builds a model.
KERNELS_HELP = (
    "The model's kernels: auto (the default: cpu_fast when TensorFlow sees no GPU or "
    "TPU, else reference), reference (Keras layers, keras.ops and autodiff, on any Keras "
    "backend: the code to read against the paper) or cpu_fast (TensorFlow only: hand-written "
    "gradients and layouts, about 1.3x the training tokens/s of reference under "
    "--jit_compile on a CPU; see docs/performance.md). Weights, checkpoints and exports "
    "are the same under each, so a run may resume with another; exports always trace "
    "with reference."
)
# How text is normalized before WordPiece (electra_tf.tokenization): `bert`,
# the original BERT/ELECTRA BasicTokenizer (Hangul kept whole), or `casefold`
# (NFKC_Casefold when lower-casing, NFC). `casefold` is the default of new runs
# and what every run, shard build and export that records no normalization
# used; checkpoints imported from the original code or Hugging Face get `bert`.
NORMALIZATIONS = ("casefold", "bert")
DEFAULT_NORMALIZATION = "casefold"
IMPORTED_NORMALIZATION = "bert"


def flag_field(default: Any, help: str, **metadata: Any) -> Any:
    """A dataclass field with a default and its flag's help.

    Further metadata: `choices` (the allowed values), `flag` (the flag's name
    when it is not the field's; False: the field is not a flag), `required`
    (True: the flag must be given) and `flag_default` (the flag's default when
    it is not the field's; a flag left unset leaves the field at its own).
    """
    return dataclasses.field(default=default, metadata={"help": help, **metadata})


class ConfigError(ValueError):
    """A configuration value is impossible; the message names the flag."""


@dataclasses.dataclass
class ModelConfig:
    """Architecture of the discriminator and the (derived) generator.

    `num_heads` and `intermediate_size` of None are derived as in the original
    code: heads = max(1, hidden // 64), FFN = 4 * hidden. The generator has
    the same depth scaled by `generator_layers_fraction` and a width of
    round(hidden * generator_hidden_fraction); its heads and FFN are derived
    from that width the same way.
    """

    vocab_size: int = flag_field(
        BERT_VOCAB_SIZE,
        "Vocabulary size. With --vocab_file it must match the file; "
        "without, the size of the vocabulary built from the corpus.",
    )
    hidden_size: int = flag_field(256, "Discriminator hidden size.")
    num_layers: int = flag_field(12, "Discriminator transformer layers.")
    num_heads: Optional[int] = flag_field(None, "Attention heads (default hidden_size // 64).")
    intermediate_size: Optional[int] = flag_field(None, "FFN inner size (default 4 * hidden_size).")
    embedding_size: int = flag_field(
        128, "Shared embedding width; projected to each model's hidden size."
    )
    max_position_embeddings: int = flag_field(
        512,
        "Rows of the position embedding table: the longest --max_seq_length the model can take.",
    )
    type_vocab_size: int = flag_field(2, "Rows of the segment (token type) embedding table.")
    dropout_rate: float = flag_field(0.1, "Dropout on embeddings and hidden states.")
    attention_dropout_rate: float = flag_field(0.1, "Dropout on the attention probabilities.")
    initializer_range: float = flag_field(
        0.02, "Standard deviation of the truncated-normal weight initialiser."
    )
    layer_norm_epsilon: float = flag_field(1e-12, "Epsilon of every LayerNorm.")
    generator_hidden_fraction: float = flag_field(
        0.25, "Generator width as a fraction of the discriminator's."
    )
    generator_layers_fraction: float = flag_field(
        1.0, "Generator depth as a fraction of the discriminator's."
    )

    @property
    def resolved_num_heads(self) -> int:
        return self.num_heads or max(1, self.hidden_size // 64)

    @property
    def resolved_intermediate_size(self) -> int:
        return self.intermediate_size or 4 * self.hidden_size

    def generator_config(self) -> "ModelConfig":
        """The generator's architecture: narrower (and optionally shallower)."""
        hidden = max(1, round(self.hidden_size * self.generator_hidden_fraction))
        layers = max(1, round(self.num_layers * self.generator_layers_fraction))
        return dataclasses.replace(
            self,
            hidden_size=hidden,
            num_layers=layers,
            num_heads=max(1, hidden // 64),
            intermediate_size=4 * hidden,
            generator_hidden_fraction=1.0,
            generator_layers_fraction=1.0,
        )

    def validate(self) -> None:
        _positive(
            self,
            "vocab_size",
            "hidden_size",
            "num_layers",
            "embedding_size",
            "max_position_embeddings",
            "type_vocab_size",
        )
        if self.vocab_size < 6:
            raise ConfigError(
                f"--vocab_size={self.vocab_size}: a vocabulary needs at least "
                "the 5 special tokens and one word piece."
            )
        for name in ("num_heads", "intermediate_size"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"--{name}={value}: must be a positive integer.")
        if self.hidden_size % self.resolved_num_heads:
            raise ConfigError(
                f"--hidden_size={self.hidden_size} is not divisible by --num_heads="
                f"{self.resolved_num_heads}; pick a head count that divides the hidden size."
            )
        for name in ("dropout_rate", "attention_dropout_rate"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ConfigError(f"--{name}={value}: must be in [0, 1).")
        if self.initializer_range <= 0:
            raise ConfigError(f"--initializer_range={self.initializer_range}: must be > 0.")
        if self.layer_norm_epsilon <= 0:
            raise ConfigError(f"--layer_norm_epsilon={self.layer_norm_epsilon}: must be > 0.")
        for name in ("generator_hidden_fraction", "generator_layers_fraction"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise ConfigError(f"--{name}={value}: must be in (0, 1].")
        gen = self.generator_config()
        if gen.hidden_size % gen.resolved_num_heads:
            raise ConfigError(
                f"--generator_hidden_fraction={self.generator_hidden_fraction} gives a generator "
                f"width of {gen.hidden_size}, not divisible by its {gen.resolved_num_heads} heads."
            )


@dataclasses.dataclass
class PretrainingConfig:
    """Everything that defines a pre-training run (see the module docstring)."""

    # The size preset: pretrain.py's --model_size (`PretrainingRequest.model_size`).
    model_size: str = dataclasses.field(default="small", metadata={"flag": False})
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig, metadata={"flag": False})
    # Data and masking.
    max_seq_length: int = flag_field(128, "Tokens per example.")
    mask_rate: float = flag_field(
        0.15, "Fraction of tokens masked (and replaced by the generator)."
    )
    max_predictions_per_seq: Optional[int] = flag_field(
        None, "Masked slots per sequence (default int((mask_rate+0.005)*L))."
    )
    do_lower_case: bool = flag_field(
        True, "Lower-case text before WordPiece (Hangul is kept whole either way)."
    )
    strip_accents: Optional[bool] = flag_field(
        None, "Strip accents (default: same as --do_lower_case)."
    )
    normalization: str = flag_field(
        DEFAULT_NORMALIZATION,
        "Text normalization before WordPiece: bert (the original "
        "BERT/ELECTRA tokenizer: lower-case, accents stripped, nothing folded; Hangul kept "
        "whole) or casefold (NFKC case folding, NFC). Default: casefold, or the "
        "--init_checkpoint's (bert for imported checkpoints).",
        choices=NORMALIZATIONS,
    )
    shuffle_buffer_size: int = flag_field(1000, "Examples in the training data's shuffle buffer.")
    # Objective (see OBJECTIVES, TRAINING_ALGORITHMS, WEIGHT_SHARING).
    objective: str = flag_field(
        "electra",
        "electra (replaced token detection), electra_15 (only masked positions), "
        "mlm (BERT), replace_mlm (MLM on generator samples), all_tokens_mlm (every token, with "
        "the copy mechanism) or electric (the energy-based cloze objective of Electric).",
        choices=OBJECTIVES,
    )
    training: str = flag_field(
        "joint",
        "joint, two_stage (generator first, then the discriminator from its weights, "
        "generator frozen) or adversarial (REINFORCE generator).",
        choices=TRAINING_ALGORITHMS,
    )
    weight_sharing: str = flag_field(
        "embeddings",
        "What the generator shares with the discriminator: embeddings, none, all "
        "(equal sizes) or gdes (gradient-disentangled: the discriminator reads the generator's "
        "token table without gradient, plus a residual of its own).",
        choices=WEIGHT_SHARING,
    )
    two_stage_generator_steps: Optional[int] = flag_field(
        None, "Generator-only steps of --training=two_stage (default: half of --num_train_steps)."
    )
    uniform_generator: bool = flag_field(
        False, "Draw replacements uniformly from the vocabulary (no generator)."
    )
    disallow_correct: bool = flag_field(False, "The generator may not sample the original token.")
    gen_weight: float = flag_field(1.0, "Weight of the generator's MLM loss.")
    disc_weight: float = flag_field(50.0, "lambda, the weight of the discriminator loss.")
    temperature: float = flag_field(1.0, "Sampling temperature of the generator.")
    # electra_tf.flops counts the budget; num_train_steps becomes the steps that fit.
    max_train_flops: Optional[float] = flag_field(
        None,
        "Training FLOPs budget (paper accounting); sets --num_train_steps to the steps that fit.",
    )
    # Optimisation.
    learning_rate: float = flag_field(5e-4, "Peak learning rate.")
    lr_decay_power: float = flag_field(
        1.0, "Power of the polynomial decay after warmup (1: linear to 0)."
    )
    num_warmup_steps: int = flag_field(10000, "Linear warmup steps.")
    weight_decay_rate: float = flag_field(
        0.01, "Decoupled weight decay (not on LayerNorm and biases)."
    )
    adam_beta_1: float = flag_field(0.9, "Adam's beta_1.")
    adam_beta_2: float = flag_field(0.999, "Adam's beta_2.")
    adam_epsilon: float = flag_field(1e-6, "Adam's epsilon.")
    clip_norm: float = flag_field(1.0, "Clip the gradients to this global norm (0: no clipping).")
    train_batch_size: int = flag_field(128, "Global batch size (all replicas).")
    # Micro-batches per optimizer step: the same update as the full batch with
    # the activation memory of one micro-batch (train_batch_size / this).
    gradient_accumulation_steps: int = flag_field(
        1,
        "Split each batch into this many micro-batches whose gradients are summed before "
        "one update (same update, less memory).",
    )
    num_train_steps: int = flag_field(
        1_000_000,
        "Total optimizer steps (0: export the randomly "
        "initialised model, the no-pre-training baseline).",
    )
    mixed_precision: str = flag_field(
        "none",
        "none, float16 (with dynamic loss scaling) or bfloat16.",
        choices=MIXED_PRECISION_POLICIES,
    )
    # XLA: one device compiles the whole step; several replicas compile each
    # replica's forward and backward pass (a compiled step cannot span them).
    jit_compile: bool = flag_field(
        False, "Compile the training step with XLA (see docs/performance.md)."
    )
    # The same weights and maths under each kernel set, so a run may resume with another.
    kernels: str = flag_field(DEFAULT_KERNELS, KERNELS_HELP, choices=KERNELS)
    seed: int = flag_field(0, "Seed for data order, masking and sampling.")
    # Bookkeeping.
    save_checkpoints_steps: int = flag_field(1000, "Checkpoint interval in steps.")
    keep_checkpoint_max: int = flag_field(5, "How many checkpoints to keep (0: every one).")
    log_every_steps: int = flag_field(100, "Console and TensorBoard interval in steps.")
    # Held-out evaluation runs only when the run has held-out text.
    eval_every_steps: Optional[int] = flag_field(
        None,
        "Held-out evaluation interval in steps (default: every checkpoint; 0: only when "
        "training ends).",
    )
    num_eval_examples: int = flag_field(2048, "Held-out sequences per evaluation.")
    steps_per_execution: int = flag_field(
        1, "Steps run per tf.function call (fewer host round trips)."
    )
    init_checkpoint: Optional[str] = flag_field(
        None,
        "Start from these weights: an electra-tf run directory, a google-research/electra "
        "checkpoint or a Hugging Face ELECTRA directory (discriminator, with the generator in "
        "<dir>/generator). The model flags must match it; its vocab.txt and casing are used by "
        "default.",
    )

    @property
    def resolved_max_predictions_per_seq(self) -> int:
        if self.max_predictions_per_seq is not None:
            return self.max_predictions_per_seq
        return int((self.mask_rate + 0.005) * self.max_seq_length)

    @property
    def resolved_two_stage_generator_steps(self) -> int:
        if self.two_stage_generator_steps is not None:
            return self.two_stage_generator_steps
        return self.num_train_steps // 2

    @property
    def resolved_eval_every_steps(self) -> int:
        """Steps between held-out evaluations; 0 = only at the end of training."""
        if self.eval_every_steps is None:
            return self.save_checkpoints_steps
        return self.eval_every_steps

    @property
    def uses_generator(self) -> bool:
        """Whether a generator network is built and trained (not for mlm or a uniform one)."""
        return self.objective != "mlm" and not self.uniform_generator

    @property
    def resolved_strip_accents(self) -> bool:
        return self.do_lower_case if self.strip_accents is None else self.strip_accents

    def validate(self) -> None:
        if self.model_size not in MODEL_SIZES:
            raise ConfigError(
                f"--model_size={self.model_size!r}: choose one of {', '.join(MODEL_SIZES)}."
            )
        self.model.validate()
        _positive(
            self,
            "max_seq_length",
            "train_batch_size",
            "gradient_accumulation_steps",
            "save_checkpoints_steps",
            "log_every_steps",
            "steps_per_execution",
            "shuffle_buffer_size",
        )
        if (
            isinstance(self.num_train_steps, bool)
            or not isinstance(self.num_train_steps, int)
            or self.num_train_steps < 0
        ):
            raise ConfigError(
                f"--num_train_steps={self.num_train_steps}: must be >= 0 (0 exports "
                "the randomly initialised model: the no-pre-training baseline)."
            )
        if self.max_seq_length < 5:
            raise ConfigError(
                f"--max_seq_length={self.max_seq_length}: must be at least 5 "
                "([CLS] A [SEP] B [SEP])."
            )
        if self.max_seq_length > self.model.max_position_embeddings:
            raise ConfigError(
                f"--max_seq_length={self.max_seq_length} exceeds --max_position_embeddings="
                f"{self.model.max_position_embeddings}."
            )
        if not 0.0 < self.mask_rate < 1.0:
            raise ConfigError(f"--mask_rate={self.mask_rate}: must be in (0, 1).")
        n = self.resolved_max_predictions_per_seq
        if not 1 <= n <= self.max_seq_length:
            raise ConfigError(
                f"--max_predictions_per_seq={n}: must be between 1 and --max_seq_length="
                f"{self.max_seq_length} (it is int((mask_rate + 0.005) * max_seq_length) by default)."
            )
        if self.gen_weight < 0 or self.disc_weight < 0:
            raise ConfigError("--gen_weight and --disc_weight must be >= 0.")
        if self.temperature <= 0:
            raise ConfigError(f"--temperature={self.temperature}: must be > 0.")
        self._validate_variant()
        if self.learning_rate <= 0:
            raise ConfigError(f"--learning_rate={self.learning_rate}: must be > 0.")
        if self.num_warmup_steps < 0:
            raise ConfigError(f"--num_warmup_steps={self.num_warmup_steps}: must be >= 0.")
        if self.weight_decay_rate < 0:
            raise ConfigError(f"--weight_decay_rate={self.weight_decay_rate}: must be >= 0.")
        for name in ("adam_beta_1", "adam_beta_2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"--{name}={getattr(self, name)}: must be in [0, 1).")
        if self.adam_epsilon <= 0:
            raise ConfigError(f"--adam_epsilon={self.adam_epsilon}: must be > 0.")
        if self.clip_norm < 0:
            raise ConfigError(f"--clip_norm={self.clip_norm}: must be >= 0 (0 disables clipping).")
        if self.eval_every_steps is not None and self.eval_every_steps < 0:
            raise ConfigError(
                f"--eval_every_steps={self.eval_every_steps}: must be >= 0 "
                "(0 evaluates only when training ends)."
            )
        if self.num_eval_examples < 1:
            raise ConfigError(f"--num_eval_examples={self.num_eval_examples}: must be >= 1.")
        if self.keep_checkpoint_max < 0:
            raise ConfigError(
                f"--keep_checkpoint_max={self.keep_checkpoint_max}: must be >= 0 "
                "(0 keeps every checkpoint)."
            )
        for name in ("num_train_steps", "save_checkpoints_steps", "log_every_steps"):
            if getattr(self, name) % self.steps_per_execution:
                raise ConfigError(
                    f"--{name}={getattr(self, name)} must be a multiple of --steps_per_execution="
                    f"{self.steps_per_execution} (steps run in groups of that size)."
                )
        if self.train_batch_size % self.gradient_accumulation_steps:
            raise ConfigError(
                f"--train_batch_size={self.train_batch_size} is not divisible by "
                f"--gradient_accumulation_steps={self.gradient_accumulation_steps}."
            )
        if not 0 <= self.seed < 2**31:
            raise ConfigError(f"--seed={self.seed}: must be in [0, 2**31).")
        if self.mixed_precision not in MIXED_PRECISION_POLICIES:
            raise ConfigError(
                f"--mixed_precision={self.mixed_precision!r}: choose one of "
                f"{', '.join(MIXED_PRECISION_POLICIES)}."
            )
        if self.kernels not in KERNELS:
            raise ConfigError(f"--kernels={self.kernels!r}: choose one of {', '.join(KERNELS)}.")
        if self.normalization not in NORMALIZATIONS:
            raise ConfigError(
                f"--normalization={self.normalization!r}: choose one of "
                f"{', '.join(NORMALIZATIONS)}."
            )

    def _validate_variant(self) -> None:
        """Checks objective, training algorithm and weight sharing go together."""
        for name, choices in (
            ("objective", OBJECTIVES),
            ("training", TRAINING_ALGORITHMS),
            ("weight_sharing", WEIGHT_SHARING),
        ):
            if getattr(self, name) not in choices:
                raise ConfigError(
                    f"--{name}={getattr(self, name)!r}: choose one of {', '.join(choices)}."
                )
        if self.max_train_flops is not None and self.max_train_flops <= 0:
            raise ConfigError(f"--max_train_flops={self.max_train_flops}: must be > 0.")
        equal_size = (
            self.model.generator_hidden_fraction == 1.0
            and self.model.generator_layers_fraction == 1.0
        )
        if self.weight_sharing == "all" and not equal_size:
            raise ConfigError(
                "--weight_sharing=all ties every generator weight to the discriminator, so both "
                "must have the same size: pass --generator_hidden_fraction=1 and "
                "--generator_layers_fraction=1."
            )
        if self.objective == "mlm" and (self.uniform_generator or self.disallow_correct):
            raise ConfigError(
                "--objective=mlm (BERT) has no generator: drop "
                "--uniform_generator / --disallow_correct."
            )
        if self.objective == "electric" and (
            self.uniform_generator or self.weight_sharing == "all"
        ):
            raise ConfigError(
                "--objective=electric needs its two-tower cloze generator: drop "
                "--uniform_generator, and use --weight_sharing=embeddings, gdes or none."
            )
        if self.weight_sharing == "gdes" and (self.objective == "mlm" or self.uniform_generator):
            raise ConfigError(
                "--weight_sharing=gdes shares the generator's token embeddings "
                "with the discriminator: it needs a generator (not --objective=mlm "
                "or --uniform_generator)."
            )
        if self.init_checkpoint and self.weight_sharing != "embeddings":
            raise ConfigError(
                f"--init_checkpoint with --weight_sharing={self.weight_sharing}: checkpoints hold "
                "a generator that reads the discriminator's embeddings (the original code's "
                "layout); start from them with --weight_sharing=embeddings."
            )
        if self.training == "joint":
            return
        if self.objective != "electra" or self.uniform_generator:
            raise ConfigError(
                f"--training={self.training} trains a generator against the replaced-token "
                f"discriminator: it needs --objective=electra and a learned generator (got "
                f"--objective={self.objective}"
                + (", --uniform_generator" if self.uniform_generator else "")
                + ")."
            )
        if self.training == "two_stage":
            if self.weight_sharing != "none" or not equal_size:
                raise ConfigError(
                    "--training=two_stage initialises the discriminator from the generator and "
                    "then freezes the generator, so the two must have the same size and share "
                    "nothing: pass --weight_sharing=none --generator_hidden_fraction=1 "
                    "--generator_layers_fraction=1."
                )
            steps = self.resolved_two_stage_generator_steps
            if self.max_train_flops is not None and self.two_stage_generator_steps is None:
                return  # the budget decides the steps (electra_tf.flops.steps_within_budget)
            if not 0 < steps < self.num_train_steps:
                raise ConfigError(
                    f"--two_stage_generator_steps={steps}: must be between 1 and "
                    f"--num_train_steps={self.num_train_steps} - 1 (both stages need steps)."
                )
            if steps % self.steps_per_execution:
                raise ConfigError(
                    f"--two_stage_generator_steps={steps} must be a multiple of "
                    f"--steps_per_execution={self.steps_per_execution}."
                )

    # ----------------------------------------------------------------- JSON
    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["resolved"] = {
            "max_predictions_per_seq": self.resolved_max_predictions_per_seq,
            "strip_accents": self.resolved_strip_accents,
            "num_heads": self.model.resolved_num_heads,
            "intermediate_size": self.model.resolved_intermediate_size,
            "generator": {
                k: v
                for k, v in dataclasses.asdict(self.model.generator_config()).items()
                if k in ("hidden_size", "num_layers", "num_heads", "intermediate_size")
            },
        }
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PretrainingConfig":
        """The configuration `to_dict` wrote (fields added since keep their defaults).

        Raises:
            ConfigError: not an object, no `model` object, an unknown key, or
                a value of another type than its field's (`"hidden_size": "big"`).
        """
        if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
            raise ConfigError('no "model" object holding the architecture')
        data = dict(data)
        data.pop("resolved", None)
        model = data.pop("model")
        _check_types(ModelConfig, model, "model.")
        _check_types(cls, data, "")
        return cls(model=ModelConfig(**model), **data)

    def save_json(self, path: str) -> None:
        """Writes the config atomically (a failed write leaves the previous file, no temporary)."""
        tmp = path + ".tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(self.to_dict(), f, indent=2, sort_keys=True)
                f.write("\n")
            os.replace(tmp, path)
        except OSError as error:
            if error.filename is None:  # a failed write names no file: name the one written
                error.filename = tmp
            raise
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)

    @classmethod
    def load_json(cls, path: str) -> "PretrainingConfig":
        with open(path, encoding="utf-8") as f:
            return cls.from_dict(json.load(f))


# Values from the paper's Table 6 and the original code's commented-out block
# for larger models. `tiny` is ours: a CPU-sized model for tests and smoke runs.
# Model columns (ModelConfig), then run columns (PretrainingConfig).
_MODEL_COLUMNS = ("hidden_size", "num_layers", "embedding_size", "generator_hidden_fraction")
_RUN_COLUMNS = (
    "max_seq_length",
    "mask_rate",
    "learning_rate",
    "train_batch_size",
    "num_train_steps",
    "num_warmup_steps",
)
_PRESET_ROWS: dict[str, tuple] = {
    "tiny": (128, 4, 128, 0.25, 128, 0.15, 5e-4, 32, 10_000, 1000),
    "small": (256, 12, 128, 0.25, 128, 0.15, 5e-4, 128, 1_000_000, 10_000),
    "base": (768, 12, 768, 1.0 / 3.0, 512, 0.15, 2e-4, 256, 766_000, 10_000),
    "large": (1024, 24, 1024, 0.25, 512, 0.25, 2e-4, 2048, 400_000, 10_000),
}


def preset(model_size: str, **overrides: Any) -> PretrainingConfig:
    """Returns the preset for `model_size` with `overrides` applied.

    Overrides may name fields of either dataclass (`hidden_size=...` is routed
    into `model`). Unknown names raise ConfigError.
    """
    if model_size not in _PRESET_ROWS:
        raise ConfigError(f"--model_size={model_size!r}: choose one of {', '.join(MODEL_SIZES)}.")
    row = _PRESET_ROWS[model_size]
    model_values = dict(zip(_MODEL_COLUMNS, row))
    values = dict(zip(_RUN_COLUMNS, row[len(_MODEL_COLUMNS) :]))
    model_fields = {f.name for f in dataclasses.fields(ModelConfig)}
    run_fields = {f.name for f in dataclasses.fields(PretrainingConfig)} - {"model"}
    for name, value in overrides.items():
        if name in model_fields:
            model_values[name] = value
        elif name in run_fields:
            values[name] = value
        else:
            raise ConfigError(f"Unknown configuration field {name!r}.")
    config = PretrainingConfig(model_size=model_size, model=ModelConfig(**model_values), **values)
    return config


def config_differences(
    old: PretrainingConfig, new: PretrainingConfig, ignore: tuple[str, ...] = ()
) -> list[str]:
    """Lists `field: old -> new` for every field that differs (model fields flattened)."""
    a, b = _flatten(old.to_dict()), _flatten(new.to_dict())
    return [
        f"{k}: {a.get(k)!r} -> {b.get(k)!r}"
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k) and k.split(".")[-1] not in ignore and not k.startswith("resolved")
    ]


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


# What a JSON value of each field type may be (an integer is a valid float).
_JSON_TYPES = {int: (int,), float: (int, float), bool: (bool,), str: (str,)}


def _check_types(cls, data: dict[str, Any], prefix: str) -> None:
    """Every key of `data` is a field of dataclass `cls` and every value of its field's type."""
    hints = typing.get_type_hints(cls)
    unknown = sorted(set(data) - set(hints))
    if unknown:
        raise ConfigError(f"Unknown configuration keys: {[prefix + k for k in unknown]}")
    for key, value in data.items():
        args = typing.get_args(hints[key])
        kind = next((a for a in args if a is not type(None)), hints[key])
        allowed = _JSON_TYPES.get(kind)
        if allowed is None or (value is None and type(None) in args):
            continue
        if not isinstance(value, allowed) or (isinstance(value, bool) and kind is not bool):
            raise ConfigError(f"{prefix}{key}={value!r} is not {kind.__name__}")


def _positive(obj: Any, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"--{name}={value!r}: must be a positive integer.")
