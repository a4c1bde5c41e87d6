"""Compute-matched comparisons of pre-training variants: pre-train, fine-tune, tabulate, plot.

    python -m tools.study spec.json --output_dir studies/electra-vs-mlm

Run it from the repository root; it runs every step there, as `python -m
electra_tf pretrain|finetune|probe`. Every pre-training cell is planned
first (`electra_tf.training.pretraining_run.plan`), so that flags the
pre-training would refuse stop the study before any cell trains.

A spec names the variants (each a set of `pretrain.py` flags), a corpus, a
model size, one or more training-FLOPs budgets and the fine-tuning tasks:

    {
      "scale": "reduced",
      "corpus": "enwiki_sample.txt",
      "variants": {"electra": {"objective": "electra"}, "bert": {"objective": "mlm"}},
      "budgets": [5e13],
      "tasks": ["sst2", "cola"],
      "glue_data_dir": "glue_data",
      "seeds": 3
    }

Every variant is pre-trained once per budget with `--max_train_flops`, so
variants are compared at equal compute (paper accounting, see
`electra_tf.flops`), not at equal steps: a variant with a cheaper step gets
more steps. Each pre-trained model is fine-tuned on every task with `seeds`
seeds. Optional keys:

    "pretrain_seeds": 3       pre-train every variant with seeds 0, 1, 2; the
                              tables then show the spread over pre-training
                              runs (each the median of its fine-tuning seeds)
    "no_pretraining": true    a baseline row: the same encoder randomly
                              initialised (a 0-step run), fine-tuned the same way
    "warmup_fraction": 0.1    warmup = this fraction of each cell's steps, so
                              every budget has the same schedule shape
    tasks: {"name": "sst2-probe", "probe": true, "task": "sst2"}
                              a linear probe (frozen mean-pooled features,
                              logistic regression; `electra_tf.commands.probe`)
           {"name": "qnli-probe", "probe": true, "task": "qnli", "dev_halves": true}
                              a GLUE task without its train file: its dev set
                              is split in two (seeded), one half trains

The output directory receives:

    results.csv, results.md   median and spread per task, the GLUE-style average
    score_vs_flops.png        dev score against pre-training FLOPs (no pre-training dashed)
    loss_curves.png           pre-training losses against FLOPs
    pretrain/<cell>/          the pre-training runs (resumable, see pretrain.py)
    finetune/<cell>/<task>/   the fine-tuning (or probe) runs (results.json per task)
    logs/                     the output of every command run
    data/                     the corpus sample, vocabulary, shards, dev halves

Re-running the same command skips every finished cell (a pre-training run
with result.json, a task with all its seeds) and resumes unfinished ones.
`--report` writes the tables and plots of the cells finished so far and runs
nothing (to look at a study that is still running, or was stopped).

`"scale": "reduced"` fills unset fields with `REDUCED_SCALE`: a CPU-sized
study that runs in about an hour on two cores. It is a smoke-scale
replication, not the paper's: the tiny model (hidden 128, 4 layers),
64-token sequences, an 8,000-token vocabulary learned from the first 10 MB
of the corpus, about ten minutes of pre-training per variant, fine-tuning on
16,000 SST-2 sentences (2 epochs) and all of CoLA (3 epochs). Expect dev
scores far below the paper's; the seeds' spread tells which differences are
real. At this budget the tiny discriminator is still predicting the majority
class, so ELECTRA and BERT tie.

`"scale": "cpu"` (`CPU_SCALE`) is the setting where the tiny discriminator's
held-out AUC rises well above chance (0.85 at 6e14 FLOPs, where temperature
1 stays at 0.5): 128-token sequences, learning rate 1e-3, the generator
sampled at temperature 2. Much of that AUC is token rarity (see
`disc_auc_rarity` in `electra_tf.pretraining.evaluation`). At 5e13 and 1e14
FLOPs ELECTRA and the masked LM are level within the pre-training-seed spread
and neither beats no pre-training on SST-2; at 6e14 the masked LM fine-tunes
as well or better (docs/comparisons.md has the tables and their baselines).
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import time
from typing import Optional

import numpy as np
from absl import app
from absl import flags as absl_flags

from electra_tf.artifacts.files import read_json
from electra_tf.artifacts.finetuning_dir import FinetuningDir
from electra_tf.artifacts.results import read_results
from electra_tf.artifacts.run_dir import RunDir, read_result

PROJECT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

REDUCED_SCALE = {
    "model_size": "tiny",
    "corpus_megabytes": 10,
    "pretrain": {
        "max_seq_length": 64,
        "train_batch_size": 32,
        "vocab_size": 8000,
        "num_warmup_steps": 200,
        "save_checkpoints_steps": 500,
        "log_every_steps": 50,
        "kernels": "auto",
    },
    # About 2,000 ELECTRA steps of the tiny model at batch 32 and length 64.
    "budgets": [5e13],
    "finetune": {"max_seq_length": 64, "train_batch_size": 32, "kernels": "auto"},
    # SST-2 on a fixed sample of 16,000 of its 67,349 sentences, CoLA whole.
    "task_flags": {
        "sst2": {"num_train_epochs": 2, "max_train_examples": 16000},
        "cola": {"num_train_epochs": 3},
    },
    "seeds": 3,
}
# Where the tiny discriminator learns at all on two cores (about 1.5 h of
# pre-training per variant at 6e14 FLOPs, 11,188 ELECTRA steps at batch 32):
# 128-token sequences, a higher learning rate than the preset's, and the
# generator sampled at temperature 2 (at temperature 1 the discriminator stays
# at the label prior on this budget). Learning here does not mean winning: in
# docs/comparisons.md, at 5e13 and 1e14 FLOPs with three pre-training seeds,
# ELECTRA and the masked LM are level within the pre-training-seed spread, and
# neither beats the no-pre-training baseline on SST-2 (fine-tuned or probed);
# at 6e14 (one pre-training run each) the masked LM fine-tunes as well or
# better. A variant may set its own "temperature" (1.0 is the paper's).
CPU_SCALE = {
    "model_size": "tiny",
    "pretrain": {
        "max_seq_length": 128,
        "train_batch_size": 32,
        "vocab_size": 8000,
        "learning_rate": 1e-3,
        "num_warmup_steps": 1000,
        "temperature": 2.0,
        "jit_compile": True,
        "eval_every_steps": 1000,
        "num_eval_examples": 1024,
        "save_checkpoints_steps": 1000,
        "log_every_steps": 200,
        "kernels": "auto",
    },
    "budgets": [6e14],
    "finetune": {"max_seq_length": 128, "train_batch_size": 32, "kernels": "auto"},
    "task_flags": {
        "sst2": {"num_train_epochs": 2, "max_train_examples": 16000},
        "cola": {"num_train_epochs": 3},
        "mrpc": {"num_train_epochs": 3},
    },
    "seeds": 5,
}
SCALES = {"reduced": REDUCED_SCALE, "cpu": CPU_SCALE}
_KNOWN_KEYS = {
    "scale",
    "name",
    "corpus",
    "corpus_megabytes",
    "model_size",
    "variants",
    "budgets",
    "pretrain",
    "tasks",
    "glue_data_dir",
    "finetune",
    "task_flags",
    "seeds",
    "pretrain_seeds",
    "no_pretraining",
    "warmup_fraction",
}
# The variant name of the no-pre-training baseline ("no_pretraining": true).
BASELINE = "none"
# Keys of a task object that are the study's, not flags of the command it runs.
_TASK_KEYS = {"name", "probe", "dev_halves"}


class StudyError(ValueError):
    """The spec or a step of the study is wrong; the message names the key or command."""


# ---------------------------------------------------------------------------- spec


def load_spec(path: str) -> dict:
    """Reads a spec and fills the defaults of its scale (see the module docstring)."""
    try:
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
    except OSError as error:
        raise StudyError(f"{path}: cannot read the spec ({error.strerror}).")
    except json.JSONDecodeError as error:
        raise StudyError(f"{path}: not valid JSON ({error}).")
    return resolve_spec(spec, source=path)


def resolve_spec(spec: dict, source: str = "spec") -> dict:
    """Applies the scale preset and checks every field, naming the one that is wrong."""
    if not isinstance(spec, dict):
        raise StudyError(f"{source}: a spec is a JSON object.")
    unknown = sorted(set(spec) - _KNOWN_KEYS)
    if unknown:
        raise StudyError(f"{source}: unknown keys {unknown}; known: {sorted(_KNOWN_KEYS)}.")
    scale = spec.get("scale")
    if scale is not None and scale not in SCALES:
        raise StudyError(f'{source}: "scale": {scale!r}; choose one of {sorted(SCALES)}.')
    resolved = json.loads(json.dumps(SCALES.get(scale, {})))
    for key, value in spec.items():
        if isinstance(value, dict) and isinstance(resolved.get(key), dict):
            resolved[key] = {**resolved[key], **value}
        else:
            resolved[key] = value
    resolved.setdefault("model_size", "small")
    resolved.setdefault("pretrain", {})
    resolved.setdefault("finetune", {})
    resolved.setdefault("task_flags", {})
    resolved.setdefault("seeds", 1)
    resolved.setdefault("pretrain_seeds", 1)
    resolved.setdefault("no_pretraining", False)
    for key in ("corpus", "variants", "budgets", "tasks"):
        if not resolved.get(key):
            raise StudyError(f'{source}: "{key}" is required.')
    corpus = resolved["corpus"]
    if not os.path.isfile(corpus):
        raise StudyError(f'{source}: "corpus": {corpus} is not a file.')
    variants = resolved["variants"]
    if not isinstance(variants, dict) or not all(isinstance(v, dict) for v in variants.values()):
        raise StudyError(
            f'{source}: "variants" maps a name to its pretrain.py flags, e.g. '
            '{"electra": {"objective": "electra"}}.'
        )
    for name in variants:
        if not name.replace("-", "").replace("_", "").isalnum():
            raise StudyError(f"{source}: variant name {name!r}: use letters, digits, - and _.")
    budgets = resolved["budgets"]
    if not isinstance(budgets, list) or not all(
        isinstance(b, (int, float)) and b > 0 for b in budgets
    ):
        raise StudyError(f'{source}: "budgets" is a list of positive FLOPs counts, e.g. [5e13].')
    for key in ("seeds", "pretrain_seeds"):
        if (
            not isinstance(resolved[key], int)
            or isinstance(resolved[key], bool)
            or resolved[key] < 1
        ):
            raise StudyError(f'{source}: "{key}": {resolved[key]!r}; a positive integer.')
    fraction = resolved.get("warmup_fraction")
    if fraction is not None and not (isinstance(fraction, (int, float)) and 0 <= fraction < 1):
        raise StudyError(f'{source}: "warmup_fraction": {fraction!r}; a number in [0, 1).')
    if not isinstance(resolved["no_pretraining"], bool):
        raise StudyError(f'{source}: "no_pretraining" is true or false.')
    if resolved["no_pretraining"] and BASELINE in variants:
        raise StudyError(
            f"{source}: variant name {BASELINE!r} is the no-pre-training baseline's; "
            "rename the variant."
        )
    tasks = resolved["tasks"]
    if not isinstance(tasks, list):
        raise StudyError(
            f'{source}: "tasks" is a list of GLUE task names or objects with '
            'finetune.py flags ("task", "train_file", ...).'
        )
    for task in tasks:
        if isinstance(task, str) and not resolved.get("glue_data_dir"):
            raise StudyError(f'{source}: GLUE task {task!r} needs "glue_data_dir".')
        if isinstance(task, dict) and task.get("dev_halves"):
            if not (task.get("task") and resolved.get("glue_data_dir")):
                raise StudyError(
                    f'{source}: task {task_name(task)!r}: "dev_halves" splits a '
                    'GLUE task\'s dev set; it needs "task" and "glue_data_dir".'
                )
    return resolved


def task_name(task) -> str:
    """A task's label: a GLUE name, or the "name" (else "task") of a user task object."""
    return task if isinstance(task, str) else str(task.get("name") or task.get("task"))


def cell_name(
    variant: str, budget: Optional[float], budgets: list, seed: int = 0, pretrain_seeds: int = 1
) -> str:
    """A pre-training cell's directory name.

    The variant, plus the budget when there are several (none for the
    no-pre-training baseline), plus `-seed<k>` when each variant is
    pre-trained with several seeds.
    """
    name = variant
    if budget is not None and len(budgets) > 1:
        name += f"-{budget:.6g}".replace("+", "")
    return name + (f"-seed{seed}" if pretrain_seeds > 1 else "")


@dataclasses.dataclass(frozen=True)
class Cell:
    """One pre-training run of a study.

    Attributes:
        variant: the variant's name (`BASELINE` for no pre-training).
        budget: its training-FLOPs budget (None for the baseline).
        seed: which pre-training seed (0 .. pretrain_seeds - 1).
        name: its directory name (`cell_name`).
    """

    variant: str
    budget: Optional[float]
    seed: int
    name: str


def cells(spec: dict) -> list[Cell]:
    """Every pre-training run of the study: the baseline first, then budget by budget."""
    seeds = range(spec["pretrain_seeds"])
    result = [
        Cell(
            BASELINE, None, k, cell_name(BASELINE, None, spec["budgets"], k, spec["pretrain_seeds"])
        )
        for k in seeds
        if spec["no_pretraining"]
    ]
    for budget in spec["budgets"]:
        for variant in spec["variants"]:
            for k in seeds:
                result.append(
                    Cell(
                        variant,
                        budget,
                        k,
                        cell_name(variant, budget, spec["budgets"], k, spec["pretrain_seeds"]),
                    )
                )
    return result


def flag_arguments(flags: dict) -> list[str]:
    """{"objective": "mlm", "disallow_correct": True} -> ["--objective=mlm", "--disallow_correct"]."""
    arguments = []
    for name, value in flags.items():
        if value is None:  # unset: the command's default
            continue
        if isinstance(value, bool):
            arguments.append(f"--{name}" if value else f"--no{name}")
        elif isinstance(value, list):
            arguments.append(f"--{name}={','.join(str(v) for v in value)}")
        else:
            arguments.append(f"--{name}={value}")
    return arguments


# ---------------------------------------------------------------------------- steps


def sample_corpus(corpus: str, megabytes: Optional[float], data_dir: str) -> str:
    """The first `megabytes` of the corpus, cut at a document boundary (or the corpus itself)."""
    if not megabytes:
        return os.path.abspath(corpus)
    # Named after the source too, so another corpus never reuses this sample.
    source = hashlib.sha256(f"{os.path.abspath(corpus)}\t{os.path.getsize(corpus)}".encode())
    path = os.path.join(data_dir, f"corpus-{megabytes:g}MB-{source.hexdigest()[:8]}.txt")
    if os.path.exists(path):
        return path
    limit = int(megabytes * 1e6)
    os.makedirs(data_dir, exist_ok=True)
    tmp = path + ".tmp"
    written = 0
    with open(corpus, "rb") as source, open(tmp, "wb") as target:
        for line in source:
            # Stop at the first blank line (a document boundary) past the limit.
            if written >= limit and not line.strip():
                break
            target.write(line)
            written += len(line)
    os.replace(tmp, path)
    return path


def run_command(arguments: list[str], log_path: str, label: str) -> None:
    """Runs a command with its output appended to `log_path`; raises StudyError on failure."""
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    started = time.perf_counter()
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"\n$ {' '.join(arguments)}\n")
        log.flush()
        # Unbuffered, so the log shows progress as it happens.
        code = subprocess.call(
            arguments,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=PROJECT_DIR,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    if code:
        with open(log_path, encoding="utf-8", errors="replace") as log:
            tail = "".join(log.readlines()[-15:])
        raise StudyError(
            f"{label} failed (exit code {code}); the last lines of {log_path}:\n"
            f"{tail}\nFix the cause and re-run the study: finished cells are kept."
        )
    print(f"  done in {time.perf_counter() - started:.0f}s", flush=True)


def check_cell(directory: str, arguments: list[str]) -> None:
    """Records the command of a cell in `directory`/study_cell.json, or checks it is unchanged.

    A finished cell is never recomputed, so a spec edited between runs must
    not silently reuse results of other settings.

    Raises:
        StudyError: the directory holds a cell run with another command.
    """
    path = os.path.join(directory, "study_cell.json")

    # The flags identify a cell, not how the program is started; the kernel
    # set computes the same model, so a cell may resume with another.
    def identity(command):
        return [a for a in command if a.startswith("--") and not a.startswith("--kernels=")]

    command = identity(arguments)
    previous = read_json(path)
    previous_flags = previous and identity(previous["command"])
    if previous is not None and previous_flags != command:
        changed = sorted(set(command) ^ set(previous_flags))
        raise StudyError(
            f"{directory} was run with other settings (differing arguments: "
            f"{' '.join(changed)}). Use another --output_dir for the new study, or "
            "delete that directory to recompute it."
        )
    if previous is None:
        os.makedirs(directory, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"command": command}, f, indent=2)


def command_arguments(command: str, flags: dict) -> list[str]:
    """The command line of a study step: `python -m electra_tf <command> <flags>`.

    Every step is a process of its own rather than a call in this one: a
    run's TensorFlow runtime (its memory, devices, the Keras precision policy
    and seeds) lives as long as its process, and a fresh process gives each
    cell the same start whatever ran before it, and its own log.
    """
    return [sys.executable, "-m", "electra_tf", command, *flag_arguments(flags)]


def cell_settings(spec: dict, cell: Cell) -> dict:
    """The `pretrain` flags that make a cell what it is (its variant, budget and seed).

    The baseline cell trains for 0 steps: its export is the encoder as
    initialised, with the same vocabulary, size and seed as the others.
    """
    if cell.budget is None:
        flags = {**spec["pretrain"], "num_train_steps": 0}
    else:
        flags = {
            **spec["pretrain"],
            **spec["variants"][cell.variant],
            "max_train_flops": cell.budget,
        }
        if spec.get("warmup_fraction") is not None:
            flags["num_warmup_steps"] = warmup_steps(spec, flags, cell.budget)
    if spec["pretrain_seeds"] > 1:
        flags["seed"] = int(flags.get("seed", 0)) + cell.seed
    return flags


def _pretraining(spec: dict, cell: Cell, corpus: str, output_dir: str) -> tuple[str, dict]:
    """(run directory, all `pretrain` flags) of a cell, its identity recorded or checked."""
    run_dir = os.path.join(output_dir, "pretrain", cell.name)
    flags = {
        "model_size": spec["model_size"],
        "corpus": corpus,
        "data_dir": os.path.join(output_dir, "data"),
        "output_dir": run_dir,
        **cell_settings(spec, cell),
    }
    check_cell(run_dir, command_arguments("pretrain", flags))
    return run_dir, flags


def plan_cell(spec: dict, cell: Cell, corpus: str, output_dir: str) -> None:
    """Plans an unfinished pre-training cell in this process, as its command will.

    The flags go through the command's own parser to the library's `plan`
    (which builds nothing), so a flag the command would refuse (an unknown
    name, an impossible value or combination, a run directory holding
    another run) stops the study before any cell trains, rather than hours
    later when the cell comes up.

    Raises:
        StudyError: the cell's flags are refused (the cell and the reason named).
    """
    from electra_tf.commands import pretrain
    from electra_tf.errors import RunError
    from electra_tf.training.pretraining_run import plan

    run_dir, flags = _pretraining(spec, cell, corpus, output_dir)
    if _finished_pretraining(run_dir):
        return
    values = absl_flags.FlagValues()
    pretrain.define_flags(values)
    try:
        values(["pretrain", *flag_arguments(flags)])
        plan(pretrain.request_from_flags(values), print_fn=lambda message: None)
    except (absl_flags.Error, RunError) as error:
        raise StudyError(f"pre-training {cell.name}: {error}")


def pretrain_cell(spec: dict, cell: Cell, corpus: str, output_dir: str) -> str:
    """Pre-trains one cell (skipped when finished). Returns the run directory."""
    run_dir, flags = _pretraining(spec, cell, corpus, output_dir)
    if _finished_pretraining(run_dir):
        print(f"pretrain {cell.name}: finished earlier ({run_dir})", flush=True)
        return run_dir
    log = os.path.join(output_dir, "logs", f"pretrain-{cell.name}.log")
    settings = flag_arguments(cell_settings(spec, cell))
    print(f"pretrain {cell.name}: {' '.join(settings)} (log: {log})", flush=True)
    run_command(command_arguments("pretrain", flags), log, f"pre-training {cell.name}")
    if not _finished_pretraining(run_dir):
        raise StudyError(f"pre-training {cell.name} stopped before the end; see {log}.")
    return run_dir


def warmup_steps(spec: dict, flags: dict, budget: float) -> int:
    """`warmup_fraction` of the steps `budget` buys with these flags: one schedule shape for all.

    The steps are counted with the spec's vocabulary size (the vocabulary
    learned may hold a few tokens fewer, which changes them by well under 1%).
    """
    from electra_tf.config import ModelConfig, PretrainingConfig, preset
    from electra_tf.flops import steps_within_budget

    fields = {f.name for f in dataclasses.fields(PretrainingConfig)} | {
        f.name for f in dataclasses.fields(ModelConfig)
    }
    config = preset(spec["model_size"], **{k: v for k, v in flags.items() if k in fields})
    return int(round(spec["warmup_fraction"] * steps_within_budget(config, budget)))


def _finished_pretraining(run_dir: str) -> bool:
    result = read_result(RunDir(run_dir))
    return bool(result and result.get("finished"))


def dev_halves(spec: dict, task: dict, output_dir: str) -> dict:
    """Splits a GLUE task's dev set in two (seeded): flags training on one half, scoring the other.

    For tasks whose training set is not at hand (e.g. a glue_data with QNLI's
    dev set only). The halves are written once, as JSONL, under data/.
    """
    from electra_tf.finetuning.classification import data as glue

    directory = os.path.join(output_dir, "data", f"{task['task']}-dev-halves")
    paths = {name: os.path.join(directory, f"{name}.jsonl") for name in ("train", "dev")}
    if not all(os.path.exists(p) for p in paths.values()):
        definition = glue.glue_task(task["task"])
        dev = glue.read_glue_dev(definition, spec["glue_data_dir"], warn=lambda _: None)
        order = np.random.default_rng(0).permutation(len(dev))
        halves = {"train": order[: len(order) // 2], "dev": order[len(order) // 2 :]}
        os.makedirs(directory, exist_ok=True)
        for name, rows in halves.items():
            with open(paths[name] + ".tmp", "w", encoding="utf-8") as f:
                for i in sorted(rows):
                    record = {
                        "text": dev.texts_a[i],
                        "label": definition.label_names[int(dev.labels[i])],
                    }
                    if dev.texts_b is not None:
                        record["text_pair"] = dev.texts_b[i]
                    f.write(json.dumps(record, ensure_ascii=False) + "\n")
            os.replace(paths[name] + ".tmp", paths[name])
    flags = {
        "task": task_name(task),
        "train_file": paths["train"],
        "dev_file": paths["dev"],
        "text_column": "text",
        "label_column": "label",
    }
    if glue.glue_task(task["task"]).is_pair:
        flags["text_pair_column"] = "text_pair"
    return flags


def task_cell(spec: dict, cell: str, task, run_dir: str, output_dir: str) -> dict:
    """Fine-tunes (or probes) one pre-trained model on one task. Returns its results.json.

    Fine-tuning runs every seed; a linear probe (a task object with
    `"probe": true`) is deterministic and runs once.
    """
    name = task_name(task)
    out = os.path.join(output_dir, "finetune", cell, name)
    results_path = FinetuningDir(out).results_file
    probe = isinstance(task, dict) and bool(task.get("probe"))
    if probe:
        flags = {k: v for k, v in spec["finetune"].items() if k == "max_seq_length"}
    else:
        flags = dict(spec["finetune"])
    flags.update(spec["task_flags"].get(name, {}))
    if isinstance(task, str):
        flags.update(task=task, data_dir=spec["glue_data_dir"])
    elif task.get("dev_halves"):
        flags.update(dev_halves(spec, task, output_dir))
        flags.update({k: v for k, v in task.items() if k not in _TASK_KEYS | {"task"}})
    else:
        flags.update({k: v for k, v in task.items() if k not in _TASK_KEYS})
        if "train_file" not in flags:
            flags["data_dir"] = spec["glue_data_dir"]
    runs = 1 if probe else spec["seeds"]
    flags.update(init_checkpoint=run_dir, output_dir=out)
    if not probe:
        flags.update(num_trials=runs, save_models=False, export=False)
    command = "probe" if probe else "finetune"
    arguments = command_arguments(command, flags)
    # The seed count may grow (more trials are added), so it is not part of the identity.
    check_cell(out, [a for a in arguments if not a.startswith("--num_trials=")])
    results = read_results(results_path)
    if results and len(results["trials"]) >= runs:
        print(f"{command} {cell} on {name}: finished earlier", flush=True)
        return results
    log = os.path.join(output_dir, "logs", f"{command}-{cell}-{name}.log")
    print(
        f"{command} {cell} on {name}" + ("" if probe else f": {runs} seed(s)") + f" (log: {log})",
        flush=True,
    )
    run_command(arguments, log, f"{'probing' if probe else 'fine-tuning'} {cell} on {name}")
    return read_results(results_path) or {}


# ---------------------------------------------------------------------------- results


def task_scores(results: dict, seeds: int) -> tuple[str, list[float]]:
    """(metric, dev scores in percent of the first `seeds` trials) of a fine-tuning results.json."""
    metric = results["primary_metric"]
    trials = results["trials"][:seeds]
    scores = [100.0 * t["dev"][metric] for t in trials if metric in t["dev"]]
    return metric, scores


def collect_rows(spec: dict, output_dir: str) -> list[dict]:
    """One row per (variant, budget, task) from the finished runs in `output_dir`.

    With one pre-training run per variant the spread is over fine-tuning
    seeds; with several (`pretrain_seeds`), each run counts once, as the
    median of its fine-tuning seeds, and the spread is over pre-training runs.
    """
    groups: dict = {}
    for cell in cells(spec):
        run = RunDir(os.path.join(output_dir, "pretrain", cell.name))
        config = read_json(run.config_file) or {}
        for task in spec["tasks"]:
            name = task_name(task)
            results = read_results(
                FinetuningDir(os.path.join(output_dir, "finetune", cell.name, name)).results_file
            )
            if not results:
                continue
            metric, scores = task_scores(results, spec["seeds"])
            if scores:
                groups.setdefault((cell.variant, cell.budget, name), []).append(
                    {
                        "metric": metric,
                        "scores": scores,
                        "steps": config.get("num_train_steps"),
                        "flops": _last_logged(run.metrics_log, "train_flops"),
                    }
                )
    rows = []
    for (variant, budget, name), runs in groups.items():
        over_runs = spec["pretrain_seeds"] > 1
        values = [float(np.median(r["scores"])) for r in runs] if over_runs else runs[0]["scores"]
        flops = [r["flops"] for r in runs if r["flops"] is not None]
        rows.append(
            {
                "variant": variant,
                "budget": 0.0 if budget is None else budget,
                "train_flops": float(np.mean(flops))
                if flops
                else (0.0 if budget is None else None),
                "pretrain_steps": runs[0]["steps"],
                "task": name,
                "metric": runs[0]["metric"],
                "median": float(np.median(values)),
                "min": min(values),
                "max": max(values),
                "std": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0,
                "seeds": min(len(r["scores"]) for r in runs),
                "pretrain_runs": len(runs),
                "spread_over": "pre-training runs" if over_runs else "fine-tuning seeds",
                "scores": " ".join(f"{v:.2f}" for v in values),
            }
        )
    return rows


def _last_logged(path: str, key: str) -> Optional[float]:
    value = None
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                value = json.loads(line).get(key, value)
    return value


def averages(rows: list[dict], tasks: list[str]) -> dict:
    """(variant, budget) -> the mean over tasks of the median scores (only when all tasks ran)."""
    by_cell: dict = {}
    for row in rows:
        by_cell.setdefault((row["variant"], row["budget"]), {})[row["task"]] = row["median"]
    return {
        cell: float(np.mean([scores[t] for t in tasks]))
        for cell, scores in by_cell.items()
        if all(t in scores for t in tasks)
    }


def _row_groups(spec: dict) -> list[tuple[str, float]]:
    """(variant, budget) of every table row, in order: the baseline, then budget by budget."""
    groups = [(BASELINE, 0.0)] if spec["no_pretraining"] else []
    return groups + [(v, b) for b in spec["budgets"] for v in spec["variants"]]


def write_tables(rows: list[dict], spec: dict, output_dir: str) -> tuple[str, str]:
    """Writes results.csv (one row per variant, budget and task) and results.md."""
    csv_path = os.path.join(output_dir, "results.csv")
    fields = [
        "variant",
        "budget",
        "train_flops",
        "pretrain_steps",
        "task",
        "metric",
        "median",
        "min",
        "max",
        "std",
        "seeds",
        "pretrain_runs",
        "spread_over",
        "scores",
    ]
    with open(csv_path + ".tmp", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(csv_path + ".tmp", csv_path)

    tasks = [task_name(t) for t in spec["tasks"]]
    metrics = {row["task"]: row["metric"] for row in rows}
    average = averages(rows, tasks)
    lines = [
        "| variant | budget (FLOPs) | steps | "
        + " | ".join(f"{t} ({metrics.get(t, '?')})" for t in tasks)
        + " | average |",
        "|---|---|---|" + "---|" * len(tasks) + "---|",
    ]
    for variant, budget in _row_groups(spec):
        group = {r["task"]: r for r in rows if r["variant"] == variant and r["budget"] == budget}
        if not group:
            continue
        steps = next(iter(group.values()))["pretrain_steps"]
        scores = [
            f"{group[t]['median']:.2f} ({group[t]['min']:.2f}–{group[t]['max']:.2f})"
            if t in group
            else "–"
            for t in tasks
        ]
        mean = average.get((variant, budget))
        label = "no pre-training" if variant == BASELINE else variant
        runs = min(r["pretrain_runs"] for r in group.values())
        if runs < spec["pretrain_seeds"]:
            label += f" ({runs} of {spec['pretrain_seeds']} runs)"  # the study is still running
        lines.append(
            f"| {label} | {'–' if variant == BASELINE else f'{budget:.3g}'} | {steps} | "
            + " | ".join(scores)
            + f" | {'–' if mean is None else f'{mean:.2f}'} |"
        )
    seeds = sorted({r["seeds"] for r in rows})
    if spec["pretrain_seeds"] > 1:
        spread = (
            f"median over {spec['pretrain_seeds']} pre-training runs (each the median of "
            f"its {'/'.join(map(str, seeds)) or 0} fine-tuning seed(s); a probe runs "
            "once), (min–max) over those runs in brackets"
        )
    else:
        spread = (
            f"median over {'/'.join(map(str, seeds)) or 0} fine-tuning seed(s), (min–max) "
            "in brackets"
        )
    lines += [
        "",
        f"Dev scores in percent: {spread}. The average is the mean of the task medians "
        "(GLUE-style). Every variant had the same pre-training FLOPs budget (paper "
        "accounting)"
        + (
            "; no pre-training is the same encoder randomly initialised, fine-tuned the same way."
            if spec["no_pretraining"]
            else "."
        ),
    ]
    md_path = os.path.join(output_dir, "results.md")
    with open(md_path + ".tmp", "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(md_path + ".tmp", md_path)
    return csv_path, md_path


def plot(rows: list[dict], spec: dict, output_dir: str) -> list[str]:
    """Writes score_vs_flops.png and loss_curves.png. Returns their paths."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    tasks = [task_name(t) for t in spec["tasks"]]
    average = averages(rows, tasks)
    paths = []
    # One panel per task and one for the average: the median over seeds at each
    # budget, with the seeds' min-max as error bars (variants side by side).
    budgets = sorted(spec["budgets"])
    panels = tasks + (["average"] if len(tasks) > 1 else [])
    figure, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 4), squeeze=False)
    for axis, panel in zip(axes[0], panels):
        for index, variant in enumerate(spec["variants"]):
            shift = 1.0 + 0.04 * (index - (len(spec["variants"]) - 1) / 2)
            xs, ys, low, high = [], [], [], []
            for budget in budgets:
                if panel == "average":
                    if (variant, budget) not in average:
                        continue
                    y = lo = hi = average[(variant, budget)]
                else:
                    row = next(
                        (
                            r
                            for r in rows
                            if (r["variant"], r["budget"], r["task"]) == (variant, budget, panel)
                        ),
                        None,
                    )
                    if row is None:
                        continue
                    y, lo, hi = row["median"], row["min"], row["max"]
                xs.append(budget * shift)
                ys.append(y)
                low.append(y - lo)
                high.append(hi - y)
            if xs:
                axis.errorbar(xs, ys, yerr=[low, high], marker="o", capsize=4, label=variant)
        baseline = (
            average.get((BASELINE, 0.0))
            if panel == "average"
            else next(
                (r["median"] for r in rows if (r["variant"], r["task"]) == (BASELINE, panel)), None
            )
        )
        if baseline is not None:
            axis.axhline(baseline, color="grey", linestyle="--", label="no pre-training")
        axis.set_xscale("log")
        axis.set_xlim(budgets[0] / 2, budgets[-1] * 2)
        axis.set_xticks(budgets, [f"{b:.2g}" for b in budgets])
        axis.minorticks_off()
        axis.set_xlabel("pre-training FLOPs")
        metric = next((r["metric"] for r in rows if r["task"] == panel), "mean of the tasks")
        axis.set_title(f"{panel} ({metric})")
        axis.grid(True, alpha=0.3)
        axis.legend()
    axes[0][0].set_ylabel("dev score (median over seeds, min-max bars)")
    figure.tight_layout()
    paths.append(os.path.join(output_dir, "score_vs_flops.png"))
    figure.savefig(paths[-1], dpi=120)
    plt.close(figure)

    curves = {}
    for cell in cells(spec):
        path = RunDir(os.path.join(output_dir, "pretrain", cell.name)).metrics_log
        if cell.budget is not None and os.path.exists(path):
            records: dict = {}
            with open(path, encoding="utf-8") as f:
                # Training and evaluation reports of a step are merged; a resumed
                # run may report a step again: its last values win.
                for record in map(json.loads, f):
                    records.setdefault(record["step"], {}).update(record)
            curves[cell.name] = [records[step] for step in sorted(records)]
    panels = [
        ("masked_lm_loss", "masked-LM loss (generator, or the MLM itself)"),
        ("disc_loss", "discriminator loss"),
    ]
    figure, axes = plt.subplots(1, len(panels), figsize=(11, 4))
    for axis, (key, title) in zip(axes, panels):
        for cell, records in curves.items():
            # float(): metrics.jsonl writes a value that is not finite as "nan" or "inf".
            points = [
                (float(r["train_flops"]), float(r[key]))
                for r in records
                if key in r and "train_flops" in r
            ]
            if points:
                axis.plot(*zip(*points), label=cell)
        axis.set_xlabel("pre-training FLOPs")
        axis.set_title(title)
        axis.grid(True, alpha=0.3)
        if axis.get_legend_handles_labels()[0]:
            axis.legend()
    figure.tight_layout()
    paths.append(os.path.join(output_dir, "loss_curves.png"))
    figure.savefig(paths[-1], dpi=120)
    plt.close(figure)
    return paths


# ---------------------------------------------------------------------------- runner


def run_study(spec: dict, output_dir: str) -> dict:
    """Runs every cell that is not finished, then writes the tables and plots."""
    os.makedirs(output_dir, exist_ok=True)
    spec_copy = os.path.join(output_dir, "spec.json")
    previous = read_json(spec_copy)
    if previous is not None and previous != spec:
        print(
            f"note: {spec_copy} differs from this spec; cells whose commands changed are "
            "refused (finished cells of unchanged commands are kept)."
        )
    with open(spec_copy, "w", encoding="utf-8") as f:
        json.dump(spec, f, indent=2)
    corpus = sample_corpus(
        spec["corpus"], spec.get("corpus_megabytes"), os.path.join(output_dir, "data")
    )
    started = time.perf_counter()
    todo = cells(spec)
    for cell in todo:
        plan_cell(spec, cell, corpus, output_dir)
    for index, cell in enumerate(todo, 1):
        print(
            f"[{index}/{len(todo)}] {_describe(cell, spec)} "
            f"({(time.perf_counter() - started) / 60:.0f} min so far)",
            flush=True,
        )
        run_dir = pretrain_cell(spec, cell, corpus, output_dir)
        for task in spec["tasks"]:
            task_cell(spec, cell.name, task, run_dir, output_dir)
    return report(spec, output_dir)


def _describe(cell: Cell, spec: dict) -> str:
    text = "no pre-training" if cell.budget is None else f"{cell.variant} at {cell.budget:.3g}"
    return text + (f" seed {cell.seed}" if spec["pretrain_seeds"] > 1 else "")


def report(spec: dict, output_dir: str) -> dict:
    """Writes the tables and plots from the cells finished so far; runs nothing.

    A study that is still running (or was stopped) can be looked at this way;
    the cells that have no results yet are listed and left out of the tables.
    """
    rows = collect_rows(spec, output_dir)
    missing = [
        f"{_describe(cell, spec)} on {task_name(task)}"
        for cell in cells(spec)
        for task in spec["tasks"]
        if not read_results(
            FinetuningDir(
                os.path.join(output_dir, "finetune", cell.name, task_name(task))
            ).results_file
        )
    ]
    if missing:
        print(f"not finished yet ({len(missing)}): {'; '.join(missing)}")
    csv_path, md_path = write_tables(rows, spec, output_dir)
    plots = plot(rows, spec, output_dir)
    with open(md_path, encoding="utf-8") as f:
        print("\n" + f.read())
    print(f"Results: {csv_path}, {md_path}; plots: {', '.join(plots)}")
    return {"rows": rows, "csv": csv_path, "markdown": md_path, "plots": plots, "missing": missing}


def define_flags(flag_values: absl_flags.FlagValues = absl_flags.FLAGS) -> None:
    """Defines the command's flags on `flag_values` (the global set when run as a command)."""
    absl_flags.DEFINE_string(
        "output_dir", None, "Where runs, tables and plots go.", flag_values=flag_values
    )
    absl_flags.DEFINE_boolean(
        "report",
        False,
        "Only write the tables and plots of the cells finished so far.",
        flag_values=flag_values,
    )
    absl_flags.mark_flag_as_required("output_dir", flag_values=flag_values)


def main(argv, flag_values: absl_flags.FlagValues = absl_flags.FLAGS) -> int:
    """The command: `argv` is what absl leaves (the program, then the spec's path).

    Pre-train variants at equal FLOPs, fine-tune each, write tables and plots.
    Returns the exit code (2: a StudyError, printed).
    """
    if len(argv) != 2:
        raise app.UsageError(
            "usage: python -m tools.study <spec.json> --output_dir=<dir> [--report]"
        )
    spec_path = argv[1]
    try:
        spec = load_spec(spec_path)
        if flag_values.report:
            if not os.path.isdir(flag_values.output_dir):
                raise StudyError(f"--output_dir={flag_values.output_dir}: no such study directory.")
            report(spec, flag_values.output_dir)
        else:
            run_study(spec, flag_values.output_dir)
    except StudyError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    define_flags()
    app.run(main)
