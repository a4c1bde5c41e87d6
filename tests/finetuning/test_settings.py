"""Fine-tuning settings: defaults by model size and task, checks naming the flag, identity."""

import pytest

from electra_tf.errors import RunError
from electra_tf.finetuning.kind.settings import FinetuneSettings


def test_defaults_follow_the_model_size_and_the_task():
    small = FinetuneSettings(output_dir="out").resolve("small", default_epochs=10.0)
    assert (small.learning_rate, small.layerwise_lr_decay, small.num_train_epochs) == (
        3e-4,
        0.8,
        10.0,
    )  # paper Table 7
    large = FinetuneSettings(output_dir="out", num_train_epochs=2).resolve("large", 3.0)
    assert (large.learning_rate, large.layerwise_lr_decay, large.num_train_epochs) == (5e-5, 0.9, 2)
    given = FinetuneSettings(output_dir="out", learning_rate=1e-3).resolve("base", 3.0)
    assert given.learning_rate == 1e-3 and given.model_size == "base"


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("train_batch_size", 0, "--train_batch_size=0: must be a positive integer"),
        ("save_checkpoints_steps", -1, "--save_checkpoints_steps=-1: must be a positive integer"),
        ("warmup_proportion", 1.0, "--warmup_proportion=1.0: must be in [0, 1)"),
        ("layerwise_lr_decay", 0.0, "--layerwise_lr_decay=0.0: must be in (0, 1]"),
        ("learning_rate", -1e-4, "--learning_rate=-0.0001: must be > 0"),
        ("seed", 2**31, "--seed=2147483648: must be in [0, 2**31)"),
        ("loss_reduction", "max", "--loss_reduction=max: choose one of mean, sum"),
        (
            "mixed_precision",
            "float8",
            "--mixed_precision=float8: choose one of none, float16, bfloat16",
        ),
        (
            "gradient_accumulation_steps",
            0,
            "--gradient_accumulation_steps=0: must be a positive integer",
        ),
        (
            "gradient_accumulation_steps",
            5,
            "--train_batch_size=32: must be divisible by --gradient_accumulation_steps=5",
        ),
    ],
)
def test_an_impossible_value_names_its_flag(field, value, message):
    with pytest.raises(RunError) as error:
        FinetuneSettings(output_dir="out", **{field: value}).resolve("small", 3.0)
    assert str(error.value) == message + "."


def test_identity_leaves_out_what_a_resumed_run_may_change():
    settings = FinetuneSettings(
        output_dir="out",
        num_trials=5,
        eval_batch_size=64,
        log_every_steps=7,
        save_checkpoints_steps=9,
        save_models=False,
    ).resolve("small", 3.0)
    identity = settings.identity()
    assert set(identity) == {
        "model_size",
        "train_batch_size",
        "learning_rate",
        "num_train_epochs",
        "warmup_proportion",
        "layerwise_lr_decay",
        "layerwise_lr_decay_quirk",
        "weight_decay_rate",
        "clip_norm",
        "seed",
        "group_by_length",
    }
    assert identity["learning_rate"] == 3e-4


def test_identity_records_length_grouping_only_when_on():
    """Runs from before the setting batched at random: their results match random batches."""
    grouped = FinetuneSettings(output_dir="out").resolve("small", 3.0).identity()
    assert grouped["group_by_length"] is True
    random = FinetuneSettings(output_dir="out", group_by_length=False).resolve("small", 3.0)
    assert "group_by_length" not in random.identity()


def test_identity_records_the_precision_and_reduction_only_away_from_their_defaults():
    """Results written before these settings existed still match a default run."""
    default = FinetuneSettings(output_dir="out").resolve("small", 3.0).identity()
    assert not {
        "mixed_precision",
        "loss_reduction",
        "gradient_accumulation_steps",
        "jit_compile",
    } & set(default)
    changed = (
        FinetuneSettings(
            output_dir="out",
            mixed_precision="bfloat16",
            loss_reduction="sum",
            gradient_accumulation_steps=4,
            jit_compile=True,
        )
        .resolve("small", 3.0)
        .identity()
    )
    # Accumulation and XLA compute the same update: a run may resume with others.
    assert changed == {**default, "mixed_precision": "bfloat16", "loss_reduction": "sum"}


def test_the_default_kernels_are_the_fast_ones_and_no_part_of_a_run_s_identity():
    """Runs made when reference was the default resume, and match, under the new default."""
    default = FinetuneSettings(output_dir="out").resolve("small", 3.0)
    assert default.kernels == "auto"
    for kernels in ("reference", "cpu_fast"):
        former = FinetuneSettings(output_dir="out", kernels=kernels).resolve("small", 3.0)
        assert former.identity() == default.identity()
