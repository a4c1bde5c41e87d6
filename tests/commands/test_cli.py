"""Flags generated from the config dataclasses: help from the fields, every choice named.

The pre-training and vocabulary flags come from `ModelConfig`,
`PretrainingConfig` and `VocabOptions`; the fine-tuning flags from
`cli.FINETUNE_CLASSES`.
"""

import ast
import dataclasses
import os
import re
import subprocess
import sys
from typing import Optional, Sequence

import pytest
from absl import flags

from electra_tf import cli
from electra_tf.config import (
    KERNELS,
    MIXED_PRECISION_POLICIES,
    MODEL_SIZES,
    NORMALIZATIONS,
    OBJECTIVES,
    TRAINING_ALGORITHMS,
    WEIGHT_SHARING,
    ModelConfig,
    PretrainingConfig,
    flag_field,
)
from electra_tf.finetuning.kind.files import QUOTINGS, FileTaskOptions
from electra_tf.finetuning.kind.settings import LOSS_REDUCTIONS, FinetuneSettings
from electra_tf.finetuning.kinds import TASK_TYPES
from electra_tf.finetuning.question_answering.data import VERSIONS
from electra_tf.finetuning.question_answering.metrics import METRICS
from electra_tf.finetuning.tagging.data import TAG_FORMAT_CHOICES
from electra_tf.vocab_learning import PRESEGMENTERS, VocabOptions

CLASSES = (ModelConfig, PretrainingConfig, VocabOptions, *cli.FINETUNE_CLASSES)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _generated_flags() -> flags.FlagValues:
    values = flags.FlagValues()
    cli.define_config_flags(values, module_name="test")
    cli.define_vocab_flags("test", flag_values=values)
    return values


def _finetune_flags() -> flags.FlagValues:
    values = flags.FlagValues()
    cli.define_finetune_flags("test", flag_values=values)
    return values


def _mentions(text: str, word: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


def test_every_generated_flag_has_help():
    values = _generated_flags()
    names = [name for name in values if len(name) > 1]
    assert {"objective", "kernels", "vocab_presegment", "dropout_rate"} <= set(names)
    assert [name for name in names if not values[name].help.strip()] == []


def test_every_finetuning_flag_has_help():
    values = _finetune_flags()
    names = [name for name in values if len(name) > 1]
    assert {
        "task",
        "init_checkpoint",
        "text_column",
        "task_type",
        "qa_metric",
        "loss_reduction",
        "kernels",
        "train_batch_size",
        "export",
    } <= set(names)
    assert [name for name in names if not values[name].help.strip()] == []


def test_every_flag_field_carries_its_help():
    for cls in CLASSES:
        for field, _ in cli.config_fields(cls):
            assert field.metadata.get("help", "").strip(), f"{cls.__name__}.{field.name}"


@pytest.mark.parametrize(
    "flag, choices",
    [
        ("objective", OBJECTIVES),
        ("training", TRAINING_ALGORITHMS),
        ("weight_sharing", WEIGHT_SHARING),
        ("mixed_precision", MIXED_PRECISION_POLICIES),
        ("kernels", KERNELS),
        ("normalization", NORMALIZATIONS),
        ("vocab_presegment", PRESEGMENTERS),
    ],
)
def test_the_help_of_a_choice_flag_names_every_choice(flag, choices):
    help_text = _generated_flags()[flag].help
    assert [c for c in choices if not _mentions(help_text, c)] == []


@pytest.mark.parametrize(
    "flag, choices",
    [
        ("task_type", TASK_TYPES),
        ("tag_format", TAG_FORMAT_CHOICES),
        ("quoting", QUOTINGS),
        ("squad_version", VERSIONS),
        ("qa_metric", METRICS),
        ("loss_reduction", LOSS_REDUCTIONS),
        ("mixed_precision", MIXED_PRECISION_POLICIES),
        ("kernels", KERNELS),
        ("model_size", MODEL_SIZES),
    ],
)
def test_a_finetuning_choice_flag_takes_and_names_every_choice(flag, choices):
    values = _finetune_flags()
    assert values[flag].parser.enum_values == list(choices)
    assert [c for c in choices if not _mentions(values[flag].help, c)] == []


def test_finetuning_flags_default_to_the_fields_and_fill_the_dataclasses():
    values = _finetune_flags()
    values(["prog", "--train_batch_size=8", "--labels=neg,pos", "--loss_reduction=sum"])
    settings = FinetuneSettings(
        **{**cli.field_values(FinetuneSettings, values), "output_dir": "out"}
    )
    assert settings == FinetuneSettings(output_dir="out", train_batch_size=8, loss_reduction="sum")
    assert "clip_norm" not in values and "delimiter" not in values
    assert FileTaskOptions(**cli.field_values(FileTaskOptions, values)) == FileTaskOptions(
        labels=["neg", "pos"]
    )


def test_a_bad_choice_is_one_line_naming_the_flag(capsys):
    code = cli.call(
        lambda values: cli.define_finetune_flags("test", values),
        lambda arguments, values: 0,
        ["--task_type=ranking"],
        "finetune.py",
    )
    assert code == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("finetune.py: error: ") and "--task_type" in lines[0]
    assert "|".join(TASK_TYPES) in lines[0] and len(lines) == 2


def test_every_field_with_choices_names_them_in_its_help():
    for cls in CLASSES:
        for field in dataclasses.fields(cls):
            for choice in field.metadata.get("choices", ()):
                assert _mentions(field.metadata["help"], choice), (field.name, choice)


def test_text_flags_keep_the_config_defaults():
    values = flags.FlagValues()
    cli.define_text_flags("test", flag_values=values)
    values(["prog"])
    assert cli.text_settings_from_flags(values) == {
        "do_lower_case": True,
        "strip_accents": None,
        "normalization": "casefold",
    }


@dataclasses.dataclass
class _Options:
    """A command's options: a required list, and two flags whose defaults are not the fields'."""

    corpus: Optional[list] = flag_field(None, "Text files.", required=True)
    names: Sequence[str] = flag_field((), "Names.", flag_default=None)
    fraction: Optional[float] = flag_field(None, "Held-out fraction.", flag_default=0.01)


def _options(*argv: str) -> _Options:
    values = flags.FlagValues()
    cli.define_option_flags(_Options, values)
    assert set(values.flags_by_module_dict()) == {_Options.__module__}
    assert values["names"].default is None and values["fraction"].default == 0.01
    values(["prog", *argv])
    return cli.options_from_flags(_Options, values)


def test_option_flags_are_required_as_marked_and_unset_ones_keep_the_fields_defaults():
    with pytest.raises(flags.IllegalFlagValueError, match="--corpus"):
        _options()
    assert _options("--corpus=a,b") == _Options(corpus=["a", "b"])
    assert _options("--corpus=a", "--names=x", "--fraction=0.5") == _Options(["a"], ["x"], 0.5)


def _docstring(path: str) -> str:
    """A module's docstring, without importing it (commands define flags at import)."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return ast.get_docstring(ast.parse(f.read()), clean=False)


def _pretrain_help(flag: str) -> str:
    """The output of `pretrain.py <flag>`, which must succeed."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "pretrain.py"), flag],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_help_starts_with_the_commands_description():
    stdout = _pretrain_help("--help")
    assert stdout.startswith(_docstring("electra_tf/commands/pretrain.py"))
    assert "--model_size" in stdout and "--objective" not in stdout.split("flags:")[0]


def test_short_help_lists_the_config_flags_generated_for_the_command():
    stdout = _pretrain_help("--helpshort")
    for name in ("--learning_rate", "--objective", "--hidden_size", "--disc_weight"):
        assert name in stdout, name
