import os
import subprocess
import sys
import time

import pytest
from test_flops import EMBEDDING, LAYER, MLM_HEAD, SPARSE_EMBEDDING, TOKEN_HEAD, tiny_run

from electra_tf.config import preset
from electra_tf.pretraining.pretrainer import Pretrainer
from tools import benchmark


def tiny_config(**overrides):
    """A one-layer model of width 32 at batch 4 and length 16 (the benchmarks' smallest run)."""
    return preset(
        "tiny",
        **{
            "vocab_size": 64,
            "hidden_size": 32,
            "num_layers": 1,
            "embedding_size": 16,
            "num_heads": 2,
            "max_seq_length": 16,
            "train_batch_size": 4,
            **overrides,
        },
    )


REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_train_step_throughput_is_work_over_the_measured_window():
    config = tiny_config(num_warmup_steps=0, kernels="reference")
    result = benchmark.benchmark_train_step(config, steps=3, warmup_steps=1, jit_compile=False)
    assert result["kernels"] == "reference"  # the set the step ran with
    assert result["measured_steps"] == 3
    assert result["sequences_per_second"] == pytest.approx(3 * 4 / result["seconds"])
    assert result["tokens_per_second"] == pytest.approx(3 * 4 * 16 / result["seconds"])
    assert result["warmup_seconds"] > 0


@pytest.mark.slow
def test_window_spans_whole_calls_of_several_steps(monkeypatch):
    config = tiny_config(num_warmup_steps=0, steps_per_execution=2)
    compiled_with = []
    compile_model = Pretrainer.compile

    def compile_spy(model, **kwargs):
        compiled_with.append(kwargs.get("steps_per_execution"))
        return compile_model(model, **kwargs)

    monkeypatch.setattr(Pretrainer, "compile", compile_spy)
    calls = []
    result = benchmark.benchmark_train_step(
        config,
        steps=4,
        warmup_steps=2,
        jit_compile=False,
        peak_probe=lambda: calls.append(1) or 100.0,
    )
    # Steps 1-2 are the warm-up call; the window holds the two calls of steps 3-6.
    assert (result["warmup_steps"], result["measured_steps"]) == (2, 4)
    assert result["sequences_per_second"] == pytest.approx(4 * 4 / result["seconds"])
    assert compiled_with == [2] and len(calls) == 2


@pytest.mark.parametrize(
    "steps, warmup_steps, flag", [(3, 2, "--steps=3"), (4, 3, "--warmup_steps=3")]
)
def test_window_is_whole_calls(steps, warmup_steps, flag):
    config = preset("tiny", train_batch_size=4, max_seq_length=16, steps_per_execution=2)
    with pytest.raises(ValueError, match=f"{flag} must be a multiple of --steps_per_execution=2"):
        benchmark.benchmark_train_step(
            config, steps=steps, warmup_steps=warmup_steps, jit_compile=False
        )


def test_machine_info_names_the_software():
    info = benchmark.machine_info()
    assert info["cpu_count"] >= 1 and info["tensorflow"] and info["keras"]


@pytest.mark.parametrize("setting, expected", [("1", True), ("0", False)])
def test_machine_info_tells_whether_onednn_is_on(setting, expected):
    # The state is fixed when TensorFlow loads, so it is read in a fresh process.
    code = "from tools import benchmark; print(benchmark.machine_info()['onednn'])"
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS=setting, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
    ).stdout.split()
    assert out[-1] == str(expected)


def test_peer_benchmark_is_run_on_the_same_shapes_and_read(tmp_path):
    import sys

    script = tmp_path / "peer.py"
    script.write_text(
        "import argparse, json\n"
        "p = argparse.ArgumentParser()\n"
        "for name in ('--size', '--batch', '--seq', '--steps'): p.add_argument(name)\n"
        "a = p.parse_args()\n"
        "print('warming up')\n"
        "print(json.dumps({'size': a.size, 'batch': int(a.batch), 'seq': int(a.seq),\n"
        "                  'tokens_per_sec': 123.5}))\n"
    )
    config = preset("tiny", train_batch_size=8, max_seq_length=32)
    result = benchmark.benchmark_peer(sys.executable, str(script), config, 4, "tiny")
    assert result["peer_tokens_per_second"] == 123.5
    assert (result["peer"]["size"], result["peer"]["batch"], result["peer"]["seq"]) == (
        "tiny",
        8,
        32,
    )


def test_utilisation_under_both_counts():
    # The one-layer, hidden-4, vocabulary-10 run counted by hand in tests/test_flops.py
    # (generator as wide as the discriminator, batch 3, length 2, one masked position).
    paper = 2 * 3 * (2 * (LAYER + EMBEDDING) + TOKEN_HEAD + MLM_HEAD)  # 22404
    executed = 3 * 3 * (2 * (LAYER + SPARSE_EMBEDDING) + TOKEN_HEAD + MLM_HEAD)  # 29574
    result = benchmark.utilisation(tiny_run(), seconds_per_step=2.0, peak_flops_per_second=1e5)
    assert (paper, executed) == (22404, 29574)
    assert result["flops_per_step"] == paper
    assert result["executed_flops_per_step"] == executed
    assert result["achieved_flops_per_second"] == pytest.approx(paper / 2.0)
    assert result["mfu"] == pytest.approx(paper / 2.0 / 1e5)
    assert result["executed_flops_per_second"] == pytest.approx(executed / 2.0)
    assert result["executed_mfu"] == pytest.approx(executed / 2.0 / 1e5)


@pytest.mark.slow
def test_peak_is_probed_on_both_sides_of_the_window_and_outside_it():
    config = tiny_config(num_warmup_steps=0)
    readings = iter([300.0, 400.0])
    calls = []

    def probe():
        calls.append(time.perf_counter())
        time.sleep(1.0)  # far longer than three tiny steps
        return next(readings)

    started = time.perf_counter()
    result = benchmark.benchmark_train_step(
        config, steps=3, warmup_steps=1, jit_compile=False, peak_probe=probe
    )
    assert len(calls) == 2
    # The first probe follows the warm-up step (tracing included), the second the window.
    assert calls[0] >= started + result["warmup_seconds"]
    assert calls[1] - calls[0] >= 1.0 + result["seconds"]
    assert result["seconds"] < 1.0  # neither probe's second is inside the window
    assert result["peak_flops_per_second_before"] == 300.0
    assert result["peak_flops_per_second_after"] == 400.0
    assert result["peak_flops_per_second"] == 350.0
    assert result["peak_drift"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("steps, warmup_steps, flag", [(0, 1, "--steps"), (3, 0, "--warmup_steps")])
def test_window_needs_a_step_and_a_warm_up_step(steps, warmup_steps, flag):
    config = preset("tiny", train_batch_size=4, max_seq_length=16)
    with pytest.raises(ValueError, match=flag):
        benchmark.benchmark_train_step(
            config, steps=steps, warmup_steps=warmup_steps, jit_compile=False
        )


def test_finetune_step_throughput_is_work_over_the_measured_window():
    config = tiny_config()
    result = benchmark.benchmark_finetune_step(
        config, steps=3, warmup_steps=1, jit_compile=False, lengths="full", by_length=True
    )
    assert result["measured_steps"] == 3
    assert result["tokens_per_second"] == pytest.approx(3 * 4 * 16 / result["seconds"])
    assert result["padding_fraction"] == 0 and result["batch_lengths"] == [16]


def test_finetune_step_on_text_lengths_counts_the_rows_own_tokens():
    config = tiny_config(max_seq_length=32)
    _, texts = benchmark.synthetic_texts(2048)
    rows = benchmark.finetuning_rows(config, "texts", 2048)
    # 5-40 words and a full stop, one piece each, [CLS] and [SEP]; cut at 32.
    assert [len(ids) for ids, _ in rows] == [min(len(t.split()) + 2, 32) for t in texts]
    for by_length in (True, False):
        result = benchmark.benchmark_finetune_step(
            config, steps=4, warmup_steps=1, jit_compile=False, lengths="texts", by_length=by_length
        )
        tokens = result["tokens_per_second"] * result["seconds"]
        assert tokens == pytest.approx(round(tokens))  # whole rows' tokens, no padding
        positions = tokens / (1 - result["padding_fraction"])
        assert 4 * 4 * 8 <= tokens < positions < 4 * 4 * 32 + 1e-6
        if by_length:
            assert set(result["batch_lengths"]) <= {16, 32}


FAKE_INFERENCE_PEER = (
    "import argparse, json, sys\n"
    "p = argparse.ArgumentParser()\n"
    "for name in ('--vocab_file', '--texts', '--size', '--seq', '--batch', '--requests',\n"
    "             '--batches', '--threads'): p.add_argument(name)\n"
    "a = p.parse_args()\n"
    "texts = open(a.texts).read().splitlines()\n"
    "vocab = open(a.vocab_file).read().splitlines()\n"
    "latency, rate = (float(x) for x in open(sys.argv[0] + '.timings').readline().split())\n"
    "rest = open(sys.argv[0] + '.timings').read().splitlines()[1:]\n"
    "open(sys.argv[0] + '.timings', 'w').write('\\n'.join(rest))\n"
    "print(json.dumps({'peer': NAME, 'latency_ms_batch1_median': latency,\n"
    "                  'texts_per_second_batched': rate, 'texts': len(texts),\n"
    "                  'vocab': len(vocab), 'batch': int(a.batch), 'threads': int(a.threads)}))\n"
)


def fake_inference_peer(directory, name: str, timings: list) -> str:
    """A peer script reporting `timings` (latency ms, texts/s), one pair per run, in turn."""
    script = directory / f"{name}.py"
    script.write_text(f"NAME = {name!r}\n" + FAKE_INFERENCE_PEER)
    (directory / f"{name}.py.timings").write_text(
        "\n".join(f"{latency} {rate}" for latency, rate in timings)
    )
    return str(script)


@pytest.mark.slow
def test_inference_sends_the_same_texts_and_vocabulary_to_every_peer_in_rounds(tmp_path):
    import sys

    torch = fake_inference_peer(tmp_path, "torch", [(5.0, 90.0), (7.0, 80.0), (6.0, 100.0)])
    ort = fake_inference_peer(tmp_path, "ort", [(4.0, 50.0), (2.0, 70.0), (3.0, 60.0)])
    config = preset(
        "tiny",
        hidden_size=32,
        num_layers=1,
        embedding_size=16,
        num_heads=2,
        max_seq_length=16,
        train_batch_size=4,
    )
    result = benchmark.benchmark_inference(
        config,
        requests=3,
        batches=2,
        peers=[(sys.executable, torch), (sys.executable, ort)],
        size="tiny",
        threads=1,
        rounds=3,
    )
    vocab, texts = benchmark.synthetic_texts(64)
    # Ours was timed in a fresh process, once per round, with the peers' thread count.
    assert len(result["runs"]) == 3
    assert all(run["signature"] == "serving_default" for run in result["runs"])
    ours = sorted(run["latency_ms_batch1_median"] for run in result["runs"])
    assert result["latency_ms_batch1_median"] == ours[1] > 0
    assert (result["threads"], result["requests"], result["batch"]) == (1, 3, 4)
    assert result["forward"] == "lean"
    assert set(result["peers"]) == {"torch", "ort"}
    for name, latency, rate in (("torch", 6.0, 90.0), ("ort", 3.0, 60.0)):
        peer = result["peers"][name]
        assert len(peer["runs"]) == 3
        assert (peer["texts"], peer["vocab"], peer["batch"], peer["threads"]) == (
            len(texts),
            len(vocab),
            4,
            1,
        )
        # The medians over the rounds, and the ratios of the medians.
        assert (peer["latency_ms_batch1_median"], peer["texts_per_second_batched"]) == (
            latency,
            rate,
        )
        assert peer["latency_ratio_peer_over_ours"] == pytest.approx(
            latency / result["latency_ms_batch1_median"]
        )
        assert peer["throughput_ratio_vs_peer"] == pytest.approx(
            result["texts_per_second_batched"] / rate
        )


def test_inference_peers_add_onnxruntime_when_the_peer_interpreter_has_it(tmp_path, capsys):
    import sys

    assert benchmark.inference_peers(None, None) == []
    assert benchmark.inference_peers("/peer/python", "mine.py") == [("/peer/python", "mine.py")]
    torch_peer = os.path.join(benchmark.PEERS, benchmark.PEER_SCRIPTS["inference"])
    ort_peer = os.path.join(benchmark.PEERS, benchmark.ONNXRUNTIME_PEER)

    def interpreter(name: str, onnxruntime: str):
        """A Python whose `onnx` imports and whose `onnxruntime` module is `onnxruntime`."""
        modules = tmp_path / f"{name}-modules"
        modules.mkdir()
        (modules / "onnx.py").write_text("")
        (modules / "onnxruntime.py").write_text(onnxruntime)
        python = tmp_path / name
        python.write_text(f'#!/bin/sh\nPYTHONPATH={modules} exec {sys.executable} "$@"\n')
        python.chmod(0o755)
        return str(python)

    # An interpreter without onnxruntime gets PyTorch alone.
    without = interpreter("without", "raise ImportError('no onnxruntime here')\n")
    assert benchmark.inference_peers(without, None) == [(without, torch_peer)]
    assert "has no onnxruntime" in capsys.readouterr().out
    # One that can import both modules gets both peers.
    both = interpreter("both", "")
    assert benchmark.inference_peers(both, None) == [(both, torch_peer), (both, ort_peer)]


def test_python_m_tools_benchmark_runs_from_the_repository_root():
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run(
        [sys.executable, "-m", "tools.benchmark", "--helpshort"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Traceback" not in done.stderr, done.stderr  # absl's help exits with 1
    for flag in ("--mode", "--inference_threads", "--peer_python", "--[no]huge_pages"):
        assert flag in done.stdout
    assert os.path.isfile(benchmark.LATENCY_SCRIPT)
    assert all(
        os.path.isfile(os.path.join(benchmark.PEERS, name))
        for name in [*benchmark.PEER_SCRIPTS.values(), benchmark.ONNXRUNTIME_PEER]
    )


def _peer_python(*modules: str):
    """ELECTRA_TF_HF_PYTHON if that interpreter can import `modules`, else None."""
    import subprocess

    python = os.environ.get("ELECTRA_TF_HF_PYTHON")
    if not python:
        return None
    probe = subprocess.run([python, "-c", f"import {', '.join(modules)}"], capture_output=True)
    return python if probe.returncode == 0 else None


@pytest.mark.slow
@pytest.mark.skipif(
    _peer_python("torch", "transformers", "onnx", "onnxruntime") is None,
    reason="needs ELECTRA_TF_HF_PYTHON naming an interpreter with torch, transformers, onnx "
    "and onnxruntime",
)
def test_the_peers_classify_the_same_texts_with_pytorch_and_onnxruntime(tmp_path):
    import json
    import subprocess

    vocab, texts = benchmark.synthetic_texts(64)
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    common = ["--vocab_file", str(tmp_path / "vocab.txt"), "--texts", str(tmp_path / "texts.txt")]
    common += ["--size", "tiny", "--batch", "4", "--requests", "3", "--batches", "2"]
    common += ["--threads", "1"]
    reports = {}
    for script in (benchmark.PEER_SCRIPTS["inference"], benchmark.ONNXRUNTIME_PEER):
        done = subprocess.run(
            [_peer_python("onnxruntime"), os.path.join(benchmark.PEERS, script), *common],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        reports[script] = json.loads(done.stdout.splitlines()[-1])
    ort = reports[benchmark.ONNXRUNTIME_PEER]
    assert ort["peer"] == "hf-onnxruntime" and ort["threads"] == 1
    # ONNX Runtime ran the fused graph (one Attention op per layer: tiny has 4)...
    assert ort["fused_ops"]["Attention"] == 4
    # ... and it gave PyTorch's probabilities, which the script checked before timing.
    assert ort["max_abs_difference_vs_torch"] <= 1e-4
    for report in reports.values():
        assert report["latency_ms_batch1_median"] > 0 and report["texts_per_second_batched"] > 0
