"""The study runner: spec checks, resume of finished cells, tables and plots.

The commands a study runs (pretrain, finetune) are replaced by a stand-in
that writes what they would write, so these tests check the runner alone;
tests/commands/test_pretrain_cli.py and tests/commands/test_finetune_cli.py cover the commands.
The study plans every pre-training cell in its own process first (the
library's `plan`, which builds nothing): that part is real here.
"""

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from absl import app, flags

from electra_tf.artifacts.results import make_results, write_results
from tools import study

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("".join(f"Article {i}\nSome text of article {i}.\n\n" for i in range(200)))
    return str(path)


def make_spec(corpus, **overrides):
    spec = {
        "corpus": corpus,
        "variants": {"electra": {}, "bert": {"objective": "mlm"}},
        "budgets": [1e12],
        "tasks": ["sst2", "cola"],
        "glue_data_dir": "/glue",
        "seeds": 3,
        "model_size": "tiny",
    }
    spec.update(overrides)
    return study.resolve_spec(spec)


SCORES = {
    ("electra", "sst2"): [0.81, 0.79, 0.80],
    ("electra", "cola"): [0.20, 0.10, 0.30],
    ("bert", "sst2"): [0.78, 0.77, 0.80],
    ("bert", "cola"): [0.05, 0.15, 0.10],
}


class FakeCommands:
    """Stands in for the pretrain / finetune commands: records each call, writes their outputs."""

    def __init__(self, output_dir):
        self.output_dir = output_dir
        self.calls = []

    def __call__(self, arguments, log_path, label):
        flags = dict(a[2:].split("=", 1) for a in arguments if a.startswith("--") and "=" in a)
        assert arguments[1:3] == ["-m", "electra_tf"]  # python -m electra_tf <command>
        command = arguments[3]
        self.calls.append((command, flags))
        out = flags["output_dir"]
        os.makedirs(out, exist_ok=True)
        if command == "pretrain":
            steps = int(
                flags.get("num_train_steps", 100 if flags.get("objective") == "mlm" else 80)
            )
            with open(os.path.join(out, "config.json"), "w") as f:
                json.dump({"num_train_steps": steps}, f)
            with open(os.path.join(out, "metrics.jsonl"), "w") as f:
                for step in (50, steps):
                    f.write(
                        json.dumps(
                            {
                                "step": step,
                                "train_flops": step * 1e10,
                                "masked_lm_loss": 5.0 - step / 100,
                            }
                        )
                        + "\n"
                    )
            with open(os.path.join(out, "result.json"), "w") as f:
                json.dump({"finished": True}, f)
        else:
            cell = os.path.basename(os.path.dirname(out))
            variant, seed = cell.split("-")[0], cell.partition("-seed")[2]
            task = flags["task"]
            metric = "mcc" if task == "cola" else "accuracy"
            # Pre-training seed k shifts every score by k points.
            scores = [s + 0.01 * int(seed or 0) for s in SCORES[(variant, task)]]
            if command == "probe":
                scores = scores[:1]
            trials = [{"trial": i, "seed": i, "dev": {metric: s}} for i, s in enumerate(scores)]
            identity = {
                "task": {"name": task},
                "init_checkpoint": flags["init_checkpoint"],
                "vocab_file": "vocab.txt",
                "settings": {},
            }
            write_results(
                os.path.join(out, "results.json"), make_results(identity, {}, metric, trials)
            )


def test_runs_every_cell_then_resumes_without_recomputing(tmp_path, corpus, monkeypatch):
    out = str(tmp_path / "study")
    fake = FakeCommands(out)
    monkeypatch.setattr(study, "run_command", fake)
    spec = make_spec(corpus)
    study.run_study(spec, out)
    names = [(script, flags.get("objective"), flags.get("task")) for script, flags in fake.calls]
    assert names == [
        ("pretrain", None, None),
        ("finetune", None, "sst2"),
        ("finetune", None, "cola"),
        ("pretrain", "mlm", None),
        ("finetune", None, "sst2"),
        ("finetune", None, "cola"),
    ]
    pretrain_flags = fake.calls[0][1]
    assert float(pretrain_flags["max_train_flops"]) == 1e12
    assert pretrain_flags["model_size"] == "tiny"
    finetune_flags = fake.calls[1][1]
    assert finetune_flags["num_trials"] == "3"
    assert finetune_flags["init_checkpoint"] == os.path.join(out, "pretrain", "electra")

    fake.calls.clear()
    study.run_study(spec, out)
    assert fake.calls == []  # everything was finished

    os.remove(os.path.join(out, "finetune", "bert", "cola", "results.json"))
    study.run_study(spec, out)
    assert [(s, f.get("task")) for s, f in fake.calls] == [("finetune", "cola")]


def test_tables_hold_medians_spreads_and_the_average(tmp_path, corpus, monkeypatch):
    out = str(tmp_path / "study")
    monkeypatch.setattr(study, "run_command", FakeCommands(out))
    result = study.run_study(make_spec(corpus), out)
    with open(result["csv"]) as f:
        rows = {(r["variant"], r["task"]): r for r in csv.DictReader(f)}
    assert len(rows) == 4
    for (variant, task), scores in SCORES.items():
        row = rows[(variant, task)]
        percent = 100 * np.array(scores)
        assert float(row["median"]) == pytest.approx(np.median(percent))
        assert float(row["min"]) == pytest.approx(percent.min())
        assert float(row["max"]) == pytest.approx(percent.max())
        assert float(row["std"]) == pytest.approx(np.std(percent, ddof=1))
        assert int(row["seeds"]) == 3
    assert float(rows[("bert", "sst2")]["pretrain_steps"]) == 100
    assert float(rows[("electra", "cola")]["train_flops"]) == pytest.approx(80e10)
    table = open(result["markdown"]).read()
    electra_line = next(line for line in table.splitlines() if line.startswith("| electra"))
    # Average of the medians: (80 + 20) / 2 = 50.00; BERT: (78 + 10) / 2 = 44.00.
    assert electra_line.rstrip().endswith("| 50.00 |")
    assert "80.00 (79.00–81.00)" in electra_line
    bert_line = next(line for line in table.splitlines() if line.startswith("| bert"))
    assert bert_line.rstrip().endswith("| 44.00 |")
    for path in result["plots"]:
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_corpus_sample_ends_at_a_document_boundary(tmp_path, corpus):
    path = study.sample_corpus(corpus, 0.0005, str(tmp_path / "data"))  # 500 bytes
    text = open(path).read()
    assert 500 <= len(text.encode()) < 600
    assert text.endswith("\n") and open(corpus).read().startswith(text)
    assert text.rstrip("\n").split("\n")[-1].startswith("Some text")  # a whole article


def test_reduced_scale_fills_defaults_and_spec_errors_name_the_key(tmp_path, corpus):
    spec = study.resolve_spec(
        {
            "scale": "reduced",
            "corpus": corpus,
            "variants": {"electra": {}},
            "tasks": ["cola"],
            "glue_data_dir": "/glue",
            "pretrain": {"vocab_size": 500},
        }
    )
    assert spec["model_size"] == "tiny" and spec["seeds"] == 3
    assert spec["pretrain"]["vocab_size"] == 500  # the spec wins over the scale
    assert spec["pretrain"]["max_seq_length"] == 64  # the rest of the scale stays
    with pytest.raises(study.StudyError, match='"budgets" is required'):
        make_spec(corpus, budgets=[])
    with pytest.raises(study.StudyError, match='"corpus".*not a file'):
        make_spec(str(tmp_path / "missing.txt"))
    with pytest.raises(study.StudyError, match="unknown keys.*'varients'"):
        study.resolve_spec({"varients": {}})
    with pytest.raises(study.StudyError, match='"scale"'):
        make_spec(corpus, scale="huge")
    with pytest.raises(study.StudyError, match="glue_data_dir"):
        make_spec(corpus, glue_data_dir=None)


def test_cpu_scale_samples_at_temperature_two_unless_a_variant_says_otherwise(
    tmp_path, corpus, monkeypatch
):
    spec = make_spec(
        corpus,
        scale="cpu",
        budgets=[6e14],
        tasks=["cola"],
        seeds=5,
        variants={
            "electra": {},
            "electra_paper": {"temperature": 1.0},
            "bert": {"objective": "mlm"},
        },
    )
    assert spec["pretrain"]["max_seq_length"] == 128 and spec["finetune"]["max_seq_length"] == 128
    out = str(tmp_path / "study")
    fake = FakeCommands(out)
    monkeypatch.setattr(study, "run_command", fake)
    for variant in ("electra", "bert", "electra_paper"):
        monkeypatch.setitem(SCORES, (variant, "cola"), [0.1] * 5)
    study.run_study(spec, out)
    temperatures = {
        flags["output_dir"].split("/")[-1]: flags.get("temperature")
        for command, flags in fake.calls
        if command == "pretrain"
    }
    assert temperatures == {"electra": "2.0", "electra_paper": "1.0", "bert": "2.0"}
    assert all(
        flags["learning_rate"] == "0.001" and float(flags["max_train_flops"]) == 6e14
        for command, flags in fake.calls
        if command == "pretrain"
    )


@pytest.mark.parametrize(
    "variant, message",
    [
        ({"objective": "bogus"}, "pre-training bert: --objective='bogus'"),
        ({"objectiv": "mlm"}, "pre-training bert: Unknown command line flag 'objectiv'"),
        ({"mask_rate": 1.5}, "pre-training bert: --mask_rate=1.5: must be in (0, 1)"),
    ],
)
def test_flags_the_pretraining_refuses_stop_the_study_before_any_cell_trains(
    tmp_path, corpus, monkeypatch, variant, message
):
    out = str(tmp_path / "study")
    fake = FakeCommands(out)
    monkeypatch.setattr(study, "run_command", fake)
    spec = make_spec(corpus, variants={"electra": {}, "bert": variant})
    with pytest.raises(study.StudyError) as caught:
        study.run_study(spec, out)
    assert str(caught.value).startswith(message)
    assert fake.calls == []  # not even the first cell, whose flags are fine
    assert not os.path.exists(os.path.join(out, "pretrain", "electra", "config.json"))


def test_a_failing_command_names_its_log(tmp_path):
    log = str(tmp_path / "logs" / "x.log")
    with pytest.raises(study.StudyError, match="exit code 3.*x.log"):
        study.run_command(
            ["python3", "-c", "import sys; print('boom'); sys.exit(3)"], log, "a step"
        )
    assert "boom" in open(log).read()


def test_flag_arguments():
    assert study.flag_arguments(
        {"objective": "mlm", "disallow_correct": True, "export": False, "budget": 1e12}
    ) == ["--objective=mlm", "--disallow_correct", "--noexport", "--budget=1000000000000.0"]


def test_a_changed_spec_never_reuses_results_of_other_settings(tmp_path, corpus, monkeypatch):
    out = str(tmp_path / "study")
    fake = FakeCommands(out)
    monkeypatch.setattr(study, "run_command", fake)
    study.run_study(make_spec(corpus), out)
    changed = make_spec(
        corpus, variants={"electra": {"temperature": 2.0}, "bert": {"objective": "mlm"}}
    )
    with pytest.raises(
        study.StudyError, match="pretrain/electra was run with other settings.*--temperature=2.0"
    ):
        study.run_study(changed, out)
    with pytest.raises(study.StudyError, match="finetune/electra/cola was run with other"):
        study.run_study(make_spec(corpus, task_flags={"cola": {"learning_rate": 1e-4}}), out)
    # Fewer seeds: the same runs, summarised over their first trials only.
    fake.calls.clear()
    result = study.run_study(make_spec(corpus, seeds=2), out)
    assert fake.calls == []
    electra_cola = next(
        r for r in result["rows"] if (r["variant"], r["task"]) == ("electra", "cola")
    )
    assert electra_cola["seeds"] == 2 and electra_cola["median"] == pytest.approx(15.0)


def test_report_tabulates_finished_cells_and_runs_nothing(tmp_path, corpus, monkeypatch, capsys):
    out = str(tmp_path / "study")
    spec = make_spec(corpus)
    fake = FakeCommands(out)
    monkeypatch.setattr(study, "run_command", fake)
    study.run_study(spec, out)
    os.remove(os.path.join(out, "finetune", "bert", "cola", "results.json"))
    fake.calls.clear()
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))

    assert run_main(str(spec_path), "--output_dir", out, "--report") == 0
    assert fake.calls == []
    printed = capsys.readouterr().out
    assert "not finished yet (1): bert at 1e+12 on cola" in printed
    with open(os.path.join(out, "results.csv")) as f:
        cells = {(r["variant"], r["task"]) for r in csv.DictReader(f)}
    assert cells == {("electra", "sst2"), ("electra", "cola"), ("bert", "sst2")}
    table = open(os.path.join(out, "results.md")).read()
    bert_line = next(line for line in table.splitlines() if line.startswith("| bert"))
    assert "| – |" in bert_line  # no CoLA result, hence no average either

    assert run_main(str(spec_path), "--output_dir", str(tmp_path / "nowhere"), "--report") == 2
    assert "--output_dir" in capsys.readouterr().err


def run_main(*arguments) -> int:
    """`python -m tools.study <arguments>` in this process, on a set of flags of its own."""
    values = flags.FlagValues()
    study.define_flags(values)
    return study.main(values(["study", *arguments]), values)


def test_the_command_line_keeps_its_flags_and_needs_one_spec(tmp_path, corpus):
    values = flags.FlagValues()
    study.define_flags(values)
    assert (values["report"].default, values["output_dir"].default) == (False, None)
    with pytest.raises(flags.IllegalFlagValueError, match="output_dir"):
        values(["study", "spec.json"])  # --output_dir is required
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(make_spec(corpus)))
    with pytest.raises(app.UsageError):
        run_main("--output_dir", str(tmp_path / "out"))  # no spec
    with pytest.raises(app.UsageError):
        run_main(str(spec_path), str(spec_path), "--output_dir", str(tmp_path / "out"))


@pytest.mark.slow
def test_python_m_tools_study_runs_from_the_repository_root(tmp_path, corpus):
    """The command as the docs give it: the report of a study with nothing finished yet."""
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(make_spec(corpus)))
    (tmp_path / "out").mkdir()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tools.study",
            str(spec_path),
            f"--output_dir={tmp_path / 'out'}",
            "--report",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "not finished yet" in done.stdout
    assert (tmp_path / "out" / "results.md").exists()
    done = subprocess.run(
        [sys.executable, "-m", "tools.study", str(spec_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0 and "output_dir" in done.stderr


def test_pretraining_seeds_and_the_no_pretraining_baseline(tmp_path, corpus, monkeypatch):
    out = str(tmp_path / "study")
    fake = FakeCommands(out)
    monkeypatch.setattr(study, "run_command", fake)
    monkeypatch.setitem(SCORES, ("none", "sst2"), [0.70, 0.60, 0.65])
    monkeypatch.setitem(SCORES, ("none", "cola"), [0.0, 0.0, 0.0])
    spec = make_spec(
        corpus,
        pretrain_seeds=3,
        no_pretraining=True,
        budgets=[1e12, 2e12],
        variants={"electra": {}},
    )
    result = study.run_study(spec, out)
    pretrains = [flags for command, flags in fake.calls if command == "pretrain"]
    assert [os.path.basename(f["output_dir"]) for f in pretrains] == [
        "none-seed0",
        "none-seed1",
        "none-seed2",
        "electra-1e12-seed0",
        "electra-1e12-seed1",
        "electra-1e12-seed2",
        "electra-2e12-seed0",
        "electra-2e12-seed1",
        "electra-2e12-seed2",
    ]
    assert [f["seed"] for f in pretrains[:3]] == ["0", "1", "2"]
    # The baseline trains no step and has no budget; the variants have theirs.
    assert all(f["num_train_steps"] == "0" and "max_train_flops" not in f for f in pretrains[:3])
    assert all(float(f["max_train_flops"]) in (1e12, 2e12) for f in pretrains[3:])
    rows = {(r["variant"], r["budget"], r["task"]): r for r in result["rows"]}
    # Each pre-training run counts once, as the median of its fine-tuning seeds:
    # sst2 medians 80, 81, 82 for seeds 0, 1, 2 (the fake adds k points).
    row = rows[("electra", 1e12, "sst2")]
    assert (row["median"], row["min"], row["max"]) == pytest.approx((81.0, 80.0, 82.0))
    assert row["pretrain_runs"] == 3 and row["spread_over"] == "pre-training runs"
    baseline = rows[("none", 0.0, "sst2")]
    assert (baseline["median"], baseline["min"], baseline["max"]) == pytest.approx((66, 65, 67))
    table = open(result["markdown"]).read()
    assert table.splitlines()[2].startswith("| no pre-training | – | 0 | 66.00 (65.00–67.00)")
    assert "median over 3 pre-training runs" in table


def test_probe_tasks_on_the_two_halves_of_a_dev_set(tmp_path, corpus, monkeypatch):
    glue = tmp_path / "glue" / "QNLI"
    glue.mkdir(parents=True)
    with open(glue / "dev.tsv", "w") as f:
        f.write("index\tquestion\tsentence\tlabel\n")
        for i in range(41):
            label = "entailment" if i % 3 else "not_entailment"
            f.write(f"{i}\twhat is {i}?\tit is {i}.\t{label}\n")
    out = str(tmp_path / "study")
    fake = FakeCommands(out)
    monkeypatch.setattr(study, "run_command", fake)
    monkeypatch.setitem(SCORES, ("electra", "qnli-probe"), [0.6])
    monkeypatch.setitem(SCORES, ("bert", "qnli-probe"), [0.55])
    spec = make_spec(
        corpus,
        glue_data_dir=str(tmp_path / "glue"),
        tasks=[{"name": "qnli-probe", "probe": True, "task": "qnli", "dev_halves": True}],
    )
    result = study.run_study(spec, out)
    probes = [flags for command, flags in fake.calls if command == "probe"]
    assert len(probes) == 2 and "num_trials" not in probes[0]
    assert probes[0]["task"] == "qnli-probe" and probes[0]["text_pair_column"] == "text_pair"
    halves = [[json.loads(line) for line in open(probes[0][k])] for k in ("train_file", "dev_file")]
    assert (len(halves[0]), len(halves[1])) == (20, 21)
    texts = [r["text"] for r in halves[0] + halves[1]]
    assert sorted(texts) == sorted(f"what is {i}?" for i in range(41))  # disjoint, complete
    first = next(r for r in halves[0] + halves[1] if r["text"] == "what is 3?")
    assert first == {"text": "what is 3?", "text_pair": "it is 3.", "label": "not_entailment"}
    rows = {r["variant"]: r for r in result["rows"]}
    assert rows["electra"]["median"] == pytest.approx(60.0) and rows["electra"]["seeds"] == 1


def test_warmup_is_the_same_fraction_of_every_budget(tmp_path, corpus, monkeypatch):
    from electra_tf.config import preset
    from electra_tf.flops import train_flops_per_step

    out = str(tmp_path / "study")
    fake = FakeCommands(out)
    monkeypatch.setattr(study, "run_command", fake)
    spec = make_spec(
        corpus,
        budgets=[1e13, 4e13],
        warmup_fraction=0.1,
        pretrain={"max_seq_length": 64, "vocab_size": 1000},
        tasks=["sst2"],
    )
    monkeypatch.setitem(SCORES, ("electra", "sst2"), [0.5] * 3)
    study.run_study(spec, out)
    warmups = {
        (f.get("objective", "electra"), float(f["max_train_flops"])): int(f["num_warmup_steps"])
        for command, f in fake.calls
        if command == "pretrain"
    }
    for objective in ("electra", "mlm"):
        per_step = train_flops_per_step(
            preset("tiny", max_seq_length=64, vocab_size=1000, objective=objective)
        )
        for budget in (1e13, 4e13):
            assert warmups[(objective, budget)] == round(0.1 * (budget // per_step))
    assert warmups[("electra", 4e13)] > 3 * warmups[("electra", 1e13)]
    with pytest.raises(study.StudyError, match="warmup_fraction"):
        make_spec(corpus, warmup_fraction=1.5)


def test_a_cell_with_fewer_pretraining_runs_than_the_spec_says_so(tmp_path):
    spec = {
        "budgets": [1e12],
        "variants": {"electra": {}, "mlm": {}},
        "pretrain_seeds": 3,
        "no_pretraining": True,
        "tasks": ["sst2"],
    }

    def row(variant, budget, runs):
        return {
            "variant": variant,
            "budget": budget,
            "train_flops": budget,
            "pretrain_steps": 7,
            "task": "sst2",
            "metric": "accuracy",
            "median": 80.0,
            "min": 79.0,
            "max": 81.0,
            "std": 1.0,
            "seeds": 1,
            "pretrain_runs": runs,
            "spread_over": "pre-training runs",
            "scores": "[]",
        }

    rows = [row("none", 0.0, 1), row("electra", 1e12, 3), row("mlm", 1e12, 2)]
    _, md_path = study.write_tables(rows, spec, str(tmp_path))
    lines = {
        line.split(" | ")[0]: line
        for line in open(md_path).read().splitlines()
        if line.startswith("| ")
    }
    assert "| mlm (2 of 3 runs)" in lines
    assert "| no pre-training (1 of 3 runs)" in lines
    assert "| electra" in lines  # a complete cell: no count
