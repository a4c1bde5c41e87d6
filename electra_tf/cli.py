"""absl flags generated from the config dataclasses, and how a command runs.

A dataclass field is a flag whose help is the field's `help` metadata:
`choices` lists a field's allowed values, `flag` names its flag when that
is not the field's name, `flag=False` keeps a field off the command line,
`required=True` makes the flag required and `flag_default` is the flag's
default when it is not the field's (a flag left unset leaves the field at
its own). A command declares its own flags as such a dataclass of options
(`define_option_flags`; `pretrain.py`'s is `PretrainingRequest`). Every
field of `ModelConfig` and `PretrainingConfig` is a pre-training
flag (`electra_tf.config`); the vocabulary flags come from `VocabOptions`,
the fine-tuning flags from `FinetuneSettings`, `FileTaskOptions` and
`FinetuneOptions` (`electra_tf.finetuning.kind.settings`) the same way. A config
flag left unset keeps the preset's value; a flag set on the command line
overrides it. `overrides_from_flags` returns only what the user set.

`run` starts a command whose flags are defined on `flags.FLAGS`; `call`
runs one in-process on its own `FlagValues` (tests, other programs). Both
report a usage error as one line plus a pointer to the help.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import os
import sys
import types
import typing
from typing import Any, Callable, Iterable, Optional, Sequence

from absl import app, flags

from electra_tf.config import ModelConfig, PretrainingConfig
from electra_tf.distribute import (
    STRATEGIES,
    create_jax_distribution,
    create_strategy,
    split_cpu,
)
from electra_tf.finetuning.kind.files import FileTaskOptions
from electra_tf.finetuning.kind.settings import FinetuneOptions, FinetuneSettings
from electra_tf.finetuning.kinds import TASK_KINDS, TASK_TYPES
from electra_tf.vocab_learning import VocabOptions

_TEXT_FIELDS = ("do_lower_case", "strip_accents", "normalization")
_DEFINERS = {
    int: flags.DEFINE_integer,
    float: flags.DEFINE_float,
    bool: flags.DEFINE_boolean,
    str: flags.DEFINE_string,
    list: flags.DEFINE_list,
    collections.abc.Sequence: flags.DEFINE_list,
}
# The dataclasses whose fields are the flags of `finetune.py`.
# The fine-tuning flags: the run's, the user's files', and each task kind's own.
FINETUNE_CLASSES = (FinetuneSettings, FileTaskOptions, FinetuneOptions) + tuple(
    kind.OPTIONS for kind in TASK_KINDS if kind.OPTIONS is not None
)


def _flag_type(annotation) -> type:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    kind = args[0] if union and args else annotation
    return typing.get_origin(kind) or kind


def flag_name(field: dataclasses.Field) -> str:
    """The name of the flag of a field: its metadata's `flag`, else the field's name."""
    return field.metadata.get("flag") or field.name


def _type_hints(cls) -> dict[str, Any]:
    """The annotations of dataclass `cls`, resolved.

    A command run by `runpy.run_module` without `alter_sys` declares its
    options in a namespace that no module holds, so its annotations are
    read with typing's names (`Optional`, `Sequence`) and the builtins.
    """
    try:
        return typing.get_type_hints(cls)
    except NameError:
        return typing.get_type_hints(cls, vars(typing))


def config_fields(cls) -> list[tuple[dataclasses.Field, type]]:
    """(field, flag type) of every field of a config dataclass that is a flag."""
    hints = _type_hints(cls)
    return [
        (field, _flag_type(hints[field.name]))
        for field in dataclasses.fields(cls)
        if field.metadata.get("flag", True) is not False
    ]


def field_help(cls, name: str) -> str:
    """The help of field `name` of `cls`, from its metadata."""
    return next(f for f in dataclasses.fields(cls) if f.name == name).metadata["help"]


def define_field_flags(
    cls,
    module_name: Optional[str],
    flag_values=flags.FLAGS,
    presets: bool = False,
    only: Optional[Iterable[str]] = None,
    choices: Optional[dict[str, Sequence[str]]] = None,
) -> None:
    """Defines the flag of every flag field of dataclass `cls`, with the field's help.

    Args:
        cls: the dataclass.
        module_name: the command's module; the flags count as its own (they
            are listed by its --helpshort).
        flag_values: where to define them.
        presets: every flag defaults to None (keep the preset's value), and a
            choice field is a string flag, which the dataclass's own check
            rejects with a message naming the flag and the choices. Otherwise
            a flag defaults to the field's default and a choice field is an
            enum flag.
        only: the names of the fields to define (default: every flag field).
        choices: {field name: allowed values} known only above the dataclass's
            module (the kinds' task types), as a field's `choices`.
    """
    for field, kind in config_fields(cls):
        if only is not None and field.name not in only:
            continue
        default = field.metadata.get("flag_default", field.default)
        default = None if presets or default is dataclasses.MISSING else default
        allowed = (choices or {}).get(field.name) or field.metadata.get("choices")
        if allowed and not presets:
            flags.DEFINE_enum(
                flag_name(field),
                default,
                list(allowed),
                field.metadata["help"],
                flag_values=flag_values,
                module_name=module_name,
            )
        else:
            _DEFINERS[kind](
                flag_name(field),
                default,
                field.metadata["help"],
                flag_values=flag_values,
                module_name=module_name,
            )


def field_values(cls, flag_values=flags.FLAGS) -> dict[str, Any]:
    """{field name: its flag's value} of the flag fields of `cls` (defined on `flag_values`).

    A field with a `flag_default` whose flag is not given keeps its own default.
    """
    values = {}
    for field, _ in config_fields(cls):
        flag = flag_values[flag_name(field)]
        unset = "flag_default" in field.metadata and not flag.present
        values[field.name] = field.default if unset else flag.value
    return values


def define_option_flags(cls, flag_values=flags.FLAGS, module_name: Optional[str] = None) -> None:
    """Defines a command's flags: those of the fields of its options dataclass `cls`.

    A field whose metadata has `required=True` is a required flag.

    Args:
        cls: the dataclass.
        flag_values: where to define them.
        module_name: the command's module, whose --helpshort lists them
            (default: the module that declares `cls`).
    """
    # A module run as a script is sys.argv[0] to absl, which lists its flags by that name.
    declared = sys.argv[0] if cls.__module__ == "__main__" else cls.__module__
    define_field_flags(cls, module_name or declared, flag_values)
    required = [flag_name(f) for f, _ in config_fields(cls) if f.metadata.get("required")]
    flags.mark_flags_as_required(required, flag_values)


def options_from_flags(cls, flag_values=flags.FLAGS):
    """Dataclass `cls` of the (parsed) flags of its fields; its other fields keep their defaults."""
    return cls(**field_values(cls, flag_values))


def define_config_flags(flag_values=flags.FLAGS, module_name: Optional[str] = None) -> None:
    """Defines one flag per config field (default None = keep the preset's value).

    Choice fields are string flags, not enums: `PretrainingConfig.validate`
    rejects a bad value with a message that names the flag and the choices.
    """
    for cls in (ModelConfig, PretrainingConfig):
        define_field_flags(cls, module_name, flag_values, presets=True)


def overrides_from_flags(flag_values=flags.FLAGS) -> dict[str, Any]:
    """The config fields the user set on the command line."""
    return {
        name: value
        for cls in (ModelConfig, PretrainingConfig)
        for name, value in field_values(cls, flag_values).items()
        if value is not None
    }


def define_text_flags(module_name: str, flag_values=flags.FLAGS) -> None:
    """--do_lower_case, --strip_accents and --normalization, as `pretrain.py` has them."""
    define_field_flags(PretrainingConfig, module_name, flag_values, only=_TEXT_FIELDS)


def text_settings_from_flags(flag_values=flags.FLAGS) -> dict:
    """`WordPieceTokenizer`'s text arguments from the flags of `define_text_flags`."""
    return {name: flag_values[name].value for name in _TEXT_FIELDS}


def define_vocab_flags(module_name: str, flag_values=flags.FLAGS) -> None:
    """How a vocabulary is learned: the `vocab` command and `pretrain.py` share these."""
    define_field_flags(VocabOptions, module_name, flag_values)


def vocab_options_from_flags(vocab_size: int, flag_values=flags.FLAGS) -> VocabOptions:
    """The `VocabOptions` of the flags of `define_vocab_flags` and a vocabulary size."""
    return VocabOptions(vocab_size=vocab_size, **field_values(VocabOptions, flag_values))


def define_finetune_flags(module_name: str, flag_values=flags.FLAGS) -> None:
    """The flags of `finetune.py` but the devices': those of `FINETUNE_CLASSES`' fields."""
    for cls in FINETUNE_CLASSES:
        define_field_flags(cls, module_name, flag_values, choices={"task_type": TASK_TYPES})


def define_strategy_flags(module_name: str, flag_values=flags.FLAGS) -> None:
    """--strategy and --num_cpu_devices, the devices a command trains on.

    Args:
        module_name: the command's module; the flags count as its own (they
            are listed by its --helpshort).
        flag_values: where to define them.
    """
    flags.DEFINE_enum(
        "strategy",
        "auto",
        list(STRATEGIES),
        "auto: MultiWorkerMirroredStrategy if TF_CONFIG lists several workers, "
        "else MirroredStrategy over all GPUs if any, else one device. mirrored: "
        "MirroredStrategy over all GPUs, or the logical CPU devices without one; "
        "multi_worker: MultiWorkerMirroredStrategy from TF_CONFIG; default: one "
        "device, no distribution.",
        flag_values=flag_values,
        module_name=module_name,
    )
    flags.DEFINE_integer(
        "num_cpu_devices",
        1,
        "Split the CPU into this many logical devices "
        "(with --strategy=mirrored: exercise multi-replica training on a CPU).",
        flag_values=flag_values,
        module_name=module_name,
    )


def strategy_from_flags(flag_values=flags.FLAGS, backends=("tensorflow",)):
    """The tf.distribute strategy of --strategy / --num_cpu_devices.

    Call it before any other TensorFlow work: the CPU split must precede
    device initialisation, and a multi-worker strategy sets up the runtime.
    On KERAS_BACKEND=jax it sets Keras' distribution instead
    (`create_jax_distribution`) and returns TensorFlow's default strategy,
    under which only the data is read.

    Args:
        flag_values: the parsed flags.
        backends: the Keras backends the command trains on (pre-training:
            tensorflow and jax; fine-tuning: tensorflow).

    Raises:
        app.UsageError: the strategy cannot be created here.
    """
    import keras
    import tensorflow as tf

    backend = keras.backend.backend()
    if backend not in backends:
        raise app.UsageError(
            f"KERAS_BACKEND={backend}: this command runs on KERAS_BACKEND="
            + " or ".join(backends)
            + " (tensorflow is the default)."
        )
    try:
        if backend == "jax":
            devices = create_jax_distribution(flag_values.strategy)
            if flag_values.num_cpu_devices > 1 and devices != flag_values.num_cpu_devices:
                raise ValueError(
                    f"--num_cpu_devices={flag_values.num_cpu_devices} splits TensorFlow's CPU; "
                    f"KERAS_BACKEND={keras.backend.backend()} sees {devices} device(s): set "
                    "XLA_FLAGS=--xla_force_host_platform_device_count="
                    f"{flag_values.num_cpu_devices} instead."
                )
            return tf.distribute.get_strategy()
        split_cpu(flag_values.num_cpu_devices)
        return create_strategy(flag_values.strategy)
    except ValueError as error:
        raise app.UsageError(str(error))


def _usage_error(program: str, message: str) -> None:
    sys.stderr.write(f"{program}: error: {message}\n(run '{program} --helpshort' for the flags)\n")


class _HelpFlag(flags.BooleanFlag):
    """--help / --helpshort / --helpfull: the command's description, then its flags.

    absl's own help flags print the docstring of the `__main__` module, which
    is a wrapper (`pretrain.py`, runpy) rather than the command; these print
    the description they are given.
    """

    def __init__(self, name: str, short_name: Optional[str], description: str, full: bool):
        super().__init__(
            name,
            False,
            "show full help" if full else "show this help",
            short_name=short_name,
            allow_hide_cpp=True,
        )
        self._description = description
        self._full = full

    def parse(self, argument):
        if not self._parse(argument):
            return
        listing = flags.FLAGS.get_help() if self._full else flags.FLAGS.main_module_help()
        sys.stdout.write(f"{self._description.rstrip()}\n\nflags:\n{listing}\n")
        if not self._full:
            sys.stdout.write("\nTry --helpfull to get a list of all flags.\n")
        sys.exit(0)


def _define_help_flags(description: str) -> None:
    """Puts help flags that print `description` in place of absl's."""
    app.define_help_flags()  # idempotent: app.run will not define them again
    for name in ("help", "?", "helpshort", "helpfull"):
        if name in flags.FLAGS:
            delattr(flags.FLAGS, name)
    flags.DEFINE_flag(_HelpFlag("help", "?", description, full=False))
    flags.DEFINE_flag(_HelpFlag("helpshort", None, description, full=False))
    flags.DEFINE_flag(_HelpFlag("helpfull", None, description, full=True))


def _module_flags(module_name: str) -> list:
    """The flags defined for `module_name`, "__main__" included.

    absl reads the name "__main__" as sys.argv[0], under which a command run
    as `python -m` (or through `electra-tf`) did not define its flags.
    """
    found = flags.FLAGS.get_key_flags_for_module(module_name)
    for flag in flags.FLAGS.flags_by_module_dict().get(module_name, []):
        if flag not in found:
            found.append(flag)
    return found


def run(
    main: Callable, flags_module: str, description: Optional[str] = None, known_only: bool = False
) -> None:
    """`absl.app.run(main)`, with errors in one line and the command's own help.

    absl prints the whole flag listing before a usage error's message; a user
    looking for what went wrong should see the message. A bad flag is
    reported the same way, and Ctrl-C ends the process with status 130.

    Args:
        main: the command's main(argv).
        flags_module: the module that defines the command's flags; they are
            what `--helpshort` shows, whichever script started the process.
        description: what `--help` shows above the flags (default: the
            docstring of `flags_module`).
        known_only: leave flags the command does not define in the argv
            `main` gets (for another parser, such as Beam's).
    """
    program = os.path.basename(sys.argv[0])
    for flag in _module_flags(flags_module):
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
    _define_help_flags(description or sys.modules[flags_module].__doc__ or "")

    def parse(argv):
        try:
            return flags.FLAGS(argv, known_only=known_only)
        except flags.Error as error:
            _usage_error(program, str(error))
            sys.exit(2)

    def checked(argv):
        try:
            return main(argv)
        except app.UsageError as error:
            _usage_error(program, str(error))
            sys.exit(2)

    try:
        app.run(checked, flags_parser=parse)
    except KeyboardInterrupt:
        # Ctrl-C is the user's choice, not a fault: no traceback, the shell's code.
        sys.exit(130)


def call(
    define_flags: Callable, main: Callable, argv: list[str], program: str, known_only: bool = False
) -> int:
    """Runs a command in this process on its own flag values; returns its exit code.

    The process's `flags.FLAGS` is not touched, so a program (or a test) may
    run several commands, or one command several times, whatever flags they
    define.

    Args:
        define_flags: define_flags(flag_values) defines the command's flags.
        main: main(arguments, flag_values) runs it (arguments: the positional
            ones) and returns the exit code (None: 0); it may raise
            `app.UsageError`.
        argv: the command line without the program name.
        program: the command's name in error messages.
        known_only: pass flags the command does not define on to `main`
            with its arguments.
    """
    flag_values = flags.FlagValues()
    define_flags(flag_values)
    try:
        arguments = flag_values([program, *argv], known_only=known_only)[1:]
        return main(arguments, flag_values) or 0
    except (flags.Error, app.UsageError) as error:
        _usage_error(program, str(error))
        return 2


def run_command(
    define_flags: Callable, main: Callable, flags_module: str, known_only: bool = False
) -> None:
    """`run` for a command written for `call`: its flags defined on `flags.FLAGS`."""
    define_flags(flags.FLAGS)

    def with_flags(argv):
        return main(argv[1:], flags.FLAGS)

    run(with_flags, flags_module, known_only=known_only)
