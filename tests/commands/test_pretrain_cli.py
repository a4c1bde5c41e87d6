"""The command line rejects bad input with a message that names the flag, file or value."""

import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# A one-layer, 32-wide model: the runs below check the command, not the model.
TINY_MODEL = [
    "--model_size=tiny",
    "--hidden_size=32",
    "--num_layers=1",
    "--embedding_size=16",
    "--num_heads=2",
]


def run_cli(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, "pretrain.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


@pytest.mark.parametrize(
    "flag, message",
    [
        ("--mask_rate=1.5", "--mask_rate=1.5: must be in (0, 1)"),
        ("--hidden_size=250", "--hidden_size=250 is not divisible"),
        ("--train_batch_size=0", "--train_batch_size=0: must be a positive integer"),
        ("--mixed_precision=fp8", "--mixed_precision='fp8'"),
    ],
)
def test_impossible_config_values_fail_fast_naming_the_flag(flag, message, tmp_path):
    result = run_cli(flag, "--corpus=" + str(tmp_path / "x.txt"), f"--output_dir={tmp_path}/run")
    assert result.returncode != 0
    assert message in result.stderr + result.stdout
    assert not os.path.exists(tmp_path / "run")


def test_missing_corpus_is_named_in_one_line_without_the_flag_listing(tmp_path):
    result = run_cli(f"--corpus={tmp_path}/nothing*.txt")
    assert result.returncode == 2
    output = result.stderr + result.stdout
    assert (
        f"pretrain.py: error: --corpus: '{tmp_path}/nothing*.txt' matches no file.\n"
        "(run 'pretrain.py --helpshort' for the flags)"
    ) in output
    assert "--builtin_corpus_bytes" not in output  # absl's listing of every flag


def test_vocab_without_mask_token_is_named(tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("hello world\n")
    vocab = tmp_path / "spm_vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\nworld\n")
    result = run_cli(
        f"--corpus={text}",
        f"--vocab_file={vocab}",
        f"--data_dir={tmp_path}/data",
        f"--output_dir={tmp_path}/run",
    )
    output = result.stderr + result.stdout
    assert result.returncode != 0
    assert str(vocab) in output and "[MASK]" in output


def test_a_tiny_run_completes_and_reports_where_everything_is(tmp_path):
    words = "the cat sat on a mat and the dog ran to the park".split()
    lines = []
    for doc in range(6):
        lines += [
            " ".join(words[(doc + i) % len(words) :] + words[: (doc + i) % len(words)])
            for i in range(8)
        ] + [""]
    text = tmp_path / "corpus.txt"
    text.write_text("\n".join(lines) + "\n")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(words))]))
    run_dir = tmp_path / "run"
    result = run_cli(
        f"--corpus={text}",
        f"--vocab_file={vocab}",
        f"--data_dir={tmp_path}/data",
        f"--output_dir={run_dir}",
        *TINY_MODEL,
        "--max_seq_length=16",
        "--train_batch_size=4",
        "--num_train_steps=2",
        "--num_warmup_steps=1",
        "--log_every_steps=1",
        "--save_checkpoints_steps=1",
        "--num_shard_workers=1",
        "--eval_fraction=0.3",
        "--kernels=reference",
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Kernels: reference (--kernels=reference)." in output
    assert "step 2/2 (100.0%)" in output
    # The last two of the six documents are held out and evaluated at the end.
    assert "Held-out shards: " in output
    assert "Held-out evaluation at step 2" in output and "AUC" in output
    evaluation = json.load(open(run_dir / "result.json"))["evaluation"]
    assert 0.0 <= evaluation["disc_auc"] <= 1.0
    assert f"TensorBoard:  tensorboard --logdir {run_dir}/tensorboard" in output
    assert f"Export:       {run_dir}/export" in output
    for name in ("discriminator.keras", "generator.keras", "vocab.txt", "config.json"):
        assert (run_dir / "export" / name).exists(), name
    assert (run_dir / "export" / "discriminator_savedmodel" / "saved_model.pb").exists()


def _toy_shard_build(tmp_path):
    """A toy corpus (8 documents), its vocabulary and 2 shards of 16 tokens in tmp_path/shards.

    Returns:
        (words, text file, vocabulary file).
    """
    from electra_tf.data.shard_build import write_shards

    words = "the cat sat on a mat and the dog ran to the park".split()
    text = tmp_path / "corpus.txt"
    text.write_text("\n\n".join(" ".join(words[i:] + words[:i]) for i in range(8)) + "\n")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(words))]))
    write_shards(
        [str(text)],
        str(tmp_path / "shards"),
        {"vocab_file": str(vocab)},
        max_seq_length=16,
        num_shards=2,
        seed=0,
    )
    return words, text, vocab


@pytest.mark.slow
def test_training_on_shards_built_elsewhere(tmp_path):
    """--shard_dir takes a finished build (e.g. from the Beam pipeline) with its vocabulary."""
    from electra_tf.data.shard_build import write_shards

    words, text, vocab = _toy_shard_build(tmp_path)
    write_shards(
        [str(text)],
        str(tmp_path / "held_out"),
        {"vocab_file": str(vocab)},
        max_seq_length=16,
        num_shards=1,
        seed=0,
    )
    run_dir = tmp_path / "run"
    result = run_cli(
        f"--shard_dir={tmp_path}/shards",
        f"--eval_shard_dir={tmp_path}/held_out",
        f"--output_dir={run_dir}",
        *TINY_MODEL,
        "--train_batch_size=4",
        "--num_train_steps=2",
        "--num_warmup_steps=1",
        "--log_every_steps=1",
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Held-out evaluation at step 2" in output and "DEMO" not in output
    config = json.load(open(run_dir / "config.json"))
    assert config["max_seq_length"] == 16 and config["model"]["vocab_size"] == len(set(words)) + 5
    # A length other than the build's is refused, naming both.
    result = run_cli(
        f"--shard_dir={tmp_path}/shards", "--max_seq_length=32", f"--output_dir={tmp_path}/run2"
    )
    assert result.returncode == 2
    assert (
        "--max_seq_length=32 but --shard_dir" in result.stderr
        and "max_seq_length=16" in result.stderr
    )


@pytest.mark.slow
def test_two_workers_build_their_own_held_out_shards_from_eval_corpus(tmp_path):
    """With --shard_dir and --eval_corpus, each worker builds its own copy of
    the held-out shards, as with --corpus, so that two builds never clean up
    or rename into one folder at the same time."""
    from multi_worker_support import run_worker_processes

    words, _, vocab = _toy_shard_build(tmp_path)
    held_out = tmp_path / "held_out.txt"
    held_out.write_text("\n\n".join(" ".join(words[i:] + words[:i]) for i in range(3)) + "\n")
    outputs = run_worker_processes(
        tmp_path,
        lambda index: [
            os.path.join(ROOT, "pretrain.py"),
            f"--shard_dir={tmp_path}/shards",
            f"--eval_corpus={held_out}",
            f"--data_dir={tmp_path}/data",
            f"--output_dir={tmp_path}/run",
            *TINY_MODEL,
            "--train_batch_size=4",
            "--num_train_steps=2",
            "--num_warmup_steps=1",
            "--log_every_steps=1",
            "--num_shard_workers=1",
        ],
    )
    assert "Held-out evaluation at step 2" in outputs[0]
    (eval_dir,) = [p for p in (tmp_path / "data").iterdir() if p.name.startswith("eval-")]
    chief = json.load(open(eval_dir / "metadata.json"))
    worker = json.load(open(eval_dir / ".worker-1" / "metadata.json"))
    assert chief["num_examples"] == worker["num_examples"] > 0
    assert chief["build"] == worker["build"]  # the same build, fingerprint included


@pytest.mark.slow
@pytest.mark.parametrize("variant", [["--weight_sharing=gdes"], ["--objective=electric"]])
def test_gdes_and_electric_runs_resume_and_export(variant, tmp_path):
    words = "the cat sat on a mat and the dog ran to the park".split()
    text = tmp_path / "corpus.txt"
    text.write_text("\n\n".join(" ".join(words[i:] + words[:i]) for i in range(12)) + "\n")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(words))]))
    run_dir = tmp_path / "run"
    common = [
        f"--corpus={text}",
        f"--vocab_file={vocab}",
        f"--data_dir={tmp_path}/data",
        f"--output_dir={run_dir}",
        *TINY_MODEL,
        "--max_seq_length=16",
        "--train_batch_size=4",
        "--num_warmup_steps=1",
        "--log_every_steps=1",
        "--save_checkpoints_steps=1",
        "--num_shard_workers=1",
        "--eval_fraction=0",
        *variant,
    ]
    first = run_cli(*common, "--num_train_steps=2")
    assert first.returncode == 0, first.stdout + first.stderr
    second = run_cli(*common, "--num_train_steps=3")
    output = second.stdout + second.stderr
    assert second.returncode == 0, output
    assert "Resumed from" in output and "(step 2)" in output and "step 3/3" in output
    config = json.load(open(run_dir / "config.json"))
    assert (config["weight_sharing"], config["objective"]) == (
        ("gdes", "electra") if "gdes" in variant[0] else ("embeddings", "electric")
    )
    for name in ("discriminator.keras", "generator.keras", "vocab.txt", "config.json"):
        assert (run_dir / "export" / name).exists(), name
    assert (run_dir / "export" / "discriminator_savedmodel" / "saved_model.pb").exists()


@pytest.mark.slow
def test_zero_steps_export_the_untrained_model_as_a_baseline(tmp_path):
    import keras
    import numpy as np

    import electra_tf
    from electra_tf.config import PretrainingConfig
    from electra_tf.modeling.electra import build_generator_and_discriminator

    words = "the cat sat on a mat and the dog ran to the park".split()
    text = tmp_path / "corpus.txt"
    text.write_text("\n\n".join(" ".join(words[i:] + words[:i]) for i in range(12)) + "\n")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(words))]))
    run_dir = tmp_path / "run"
    result = run_cli(
        f"--corpus={text}",
        f"--vocab_file={vocab}",
        f"--data_dir={tmp_path}/data",
        f"--output_dir={run_dir}",
        *TINY_MODEL,
        "--max_seq_length=16",
        "--num_train_steps=0",
        "--num_shard_workers=1",
        "--eval_fraction=0.3",
        "--seed=3",
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Held-out evaluation at step 0" in output and "Training steps" not in output
    assert not list(run_dir.glob("checkpoints/ckpt-*"))
    exported = electra_tf.load_model(run_dir / "export" / "discriminator.keras")
    # The export is the model as initialised with the run's seed, untouched by training.
    config = PretrainingConfig.load_json(str(run_dir / "config.json"))
    keras.utils.set_random_seed(3)
    _, fresh = build_generator_and_discriminator(config.model)
    for a, b in zip(exported.weights, fresh.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)


def _prebuilt(tmp_path):
    """Shards and vocabulary of a small corpus, and the flags of a tiny run on them."""
    from electra_tf.data.shard_build import write_shards

    words = "the cat sat on a mat and the dog ran to the park".split()
    text = tmp_path / "corpus.txt"
    text.write_text(
        "\n\n".join(" ".join(words[i % 12 :] + words[: i % 12]) for i in range(40)) + "\n"
    )
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(words))]))
    write_shards(
        [str(text)],
        str(tmp_path / "shards"),
        {"vocab_file": str(vocab)},
        max_seq_length=16,
        num_shards=1,
        seed=0,
    )
    return [
        f"--shard_dir={tmp_path}/shards",
        *TINY_MODEL,
        "--train_batch_size=4",
        "--num_warmup_steps=1",
        "--log_every_steps=1",
        "--save_checkpoints_steps=2",
        "--kernels=reference",
    ]


@pytest.mark.slow
def test_two_runs_started_together_on_one_directory_one_is_refused(tmp_path):
    common = _prebuilt(tmp_path) + [f"--output_dir={tmp_path}/run", "--num_train_steps=40"]
    processes = [
        subprocess.Popen(
            [sys.executable, os.path.join(ROOT, "pretrain.py"), *common],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=600)[0] for p in processes]
    codes = sorted(p.returncode for p in processes)
    assert codes == [0, 2], outputs
    refused = outputs[[p.returncode for p in processes].index(2)]
    assert f"pretrain.py: error: --output_dir={tmp_path}/run is in use by pid " in refused
    assert "step 1/" not in refused
    logged = [json.loads(line)["step"] for line in open(tmp_path / "run" / "metrics.jsonl")]
    assert logged == list(range(1, 41))  # one writer: every step once


@pytest.mark.slow
def test_a_run_killed_with_sigkill_resumes_to_the_straight_result(tmp_path):
    import signal

    import numpy as np
    import tensorflow as tf

    common = _prebuilt(tmp_path) + ["--num_train_steps=12", "--dropout_rate=0.1"]
    straight = run_cli(*common, f"--output_dir={tmp_path}/straight")
    assert straight.returncode == 0, straight.stdout + straight.stderr
    killed = subprocess.Popen(
        [
            sys.executable,
            os.path.join(ROOT, "pretrain.py"),
            *common,
            f"--output_dir={tmp_path}/killed",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )
    for line in killed.stdout:
        if line.startswith("step 7/12"):
            killed.send_signal(signal.SIGKILL)
            break
    killed.wait()
    assert (tmp_path / "killed" / ".lock").exists()  # left behind, but no longer locked
    resumed = run_cli(*common, f"--output_dir={tmp_path}/killed")
    output = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, output
    assert f"Taking over the lock of {tmp_path}/killed from pid {killed.pid} " in output
    resumed_step = int(re.search(r"Resumed from \S+ \(step (\d+)\)", output).group(1))
    assert resumed_step >= 6 and resumed_step % 2 == 0  # the last checkpoint before the kill

    def final(name):
        reader = tf.train.load_checkpoint(str(tmp_path / name / "checkpoints" / "ckpt-12"))
        return {
            key: reader.get_tensor(key)
            for key in reader.get_variable_to_shape_map()
            if "OBJECT_GRAPH" not in key and not key.startswith("save_counter")
        }

    a, b = final("straight"), final("killed")
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_allclose(b[key], a[key], rtol=1e-5, atol=1e-7, err_msg=key)


@pytest.mark.slow
def test_a_shard_damaged_in_place_stops_the_run_and_the_rebuilt_run_ends_as_a_straight_one(
    tmp_path,
):
    """16 bytes flipped in the middle of a shard, its modification time kept (the builder
    trusts it): the run stops in one line, the shard is deleted and rebuilt, and the resumed
    run ends with every tensor of a run that never stopped."""
    import numpy as np
    import tensorflow as tf

    words = "the cat sat on a mat and the dog ran to the park".split()
    lines = []
    for doc in range(40):
        lines += [" ".join(words[(doc + i) % 12 :] + words[: (doc + i) % 12]) for i in range(3)]
        lines.append("")
    (tmp_path / "corpus.txt").write_text("\n".join(lines) + "\n")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(words))]))
    common = [
        f"--corpus={tmp_path}/corpus.txt",
        f"--vocab_file={vocab}",
        f"--data_dir={tmp_path}/data",
        *TINY_MODEL,
        "--max_seq_length=16",
        "--train_batch_size=4",
        "--num_train_steps=24",
        "--num_warmup_steps=2",
        "--log_every_steps=4",
        "--save_checkpoints_steps=8",
        "--shuffle_buffer_size=4",
        "--num_shards=1",
        "--eval_fraction=0",
        "--dropout_rate=0.1",
    ]
    straight = run_cli(*common, f"--output_dir={tmp_path}/straight")
    assert straight.returncode == 0, straight.stdout + straight.stderr
    (shard_dir,) = [p for p in (tmp_path / "data").iterdir() if p.name.startswith("shards-")]
    (shard,) = [p for p in shard_dir.iterdir() if p.name.endswith("-of-00001")]
    times = os.stat(shard)
    data = bytearray(shard.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 16] = bytes(b ^ 0xA5 for b in data[middle : middle + 16])
    shard.write_bytes(bytes(data))
    os.utime(shard, ns=(times.st_atime_ns, times.st_mtime_ns))
    stopped = run_cli(*common, f"--output_dir={tmp_path}/stopped")
    output = stopped.stdout + stopped.stderr
    assert stopped.returncode == 2, output
    match = re.search(
        rf"error: Shard {shard} is corrupt \(corrupted record at byte \d+\); training stopped "
        rf"at step (\d+), saved in {tmp_path}/stopped/checkpoints/ckpt-(\d+)\. Delete that file",
        output,
    )
    assert match and match.group(1) == match.group(2) and 8 < int(match.group(1)) < 24, output
    os.remove(shard)
    resumed = run_cli(*common, f"--output_dir={tmp_path}/stopped")
    output = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, output
    assert f"Resumed from {tmp_path}/stopped/checkpoints/ckpt-{match.group(1)} " in output

    def final(name):
        reader = tf.train.load_checkpoint(str(tmp_path / name / "checkpoints" / "ckpt-24"))
        return {
            key: reader.get_tensor(key)
            for key in reader.get_variable_to_shape_map()
            if "OBJECT_GRAPH" not in key and not key.startswith("save_counter")
        }

    a, b = final("straight"), final("stopped")
    assert a.keys() == b.keys()
    assert [key for key in a if not np.allclose(b[key], a[key], rtol=1e-5, atol=1e-7)] == []


@pytest.mark.slow
@pytest.mark.parametrize("free", [4096, 8192, 16384])
def test_a_full_disk_at_the_start_names_the_file_and_its_disk_and_leaves_no_vocabulary(
    tmp_path, free
):
    """Whichever first write finds no room (vocab.txt, identity.json, TensorBoard's events)."""
    from disk_support import fill, small_disk

    words = "the cat sat on a mat and the dog ran to the park".split()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(" ".join(words[i:] + words[:i]) for i in range(8)) + "\n")
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(words))]
    vocab, other_vocab = tmp_path / "vocab.txt", tmp_path / "other.txt"
    vocab.write_text("\n".join(tokens) + "\n")
    other_vocab.write_text("\n".join(tokens + ["cats"]) + "\n")
    common = [
        f"--corpus={corpus}",
        f"--data_dir={tmp_path}/data",
        *TINY_MODEL,
        "--max_seq_length=16",
        "--train_batch_size=4",
        "--num_train_steps=2",
        "--num_warmup_steps=1",
    ]
    disk = tmp_path / "disk"
    with small_disk(disk, "16m") as mounted:
        if not mounted:
            pytest.skip("needs a tmpfs (root); test_write_run_files_leaves_nothing_on_a_full_disk")
        filler = fill(disk, free)
        run = disk / "run"
        result = run_cli(*common, f"--vocab_file={vocab}", f"--output_dir={run}")
        output = (result.stdout + result.stderr).splitlines()
        assert result.returncode == 2, output
        (line,) = [line for line in output if line.startswith("pretrain.py: error:")]
        written = re.escape(str(run))
        assert re.fullmatch(
            rf"pretrain\.py: error: Could not write {written}/[\w.]+: "
            rf"No space left on device \(the disk holding {written} is full\)\. Nothing "
            r"half-written was left and the checkpoints saved so far are intact; free some "
            r"space there and re-run the same command to resume\.",
            line,
        ), line
        assert not any("Traceback" in line for line in output), output
        left = os.listdir(run) if os.path.exists(run) else []
        assert not {"vocab.txt", "identity.json", "config.json"} & set(left), left
        # A later run with another vocabulary starts afresh: nothing of the failed one binds it.
        os.remove(filler)
        result = run_cli(*common, f"--vocab_file={other_vocab}", f"--output_dir={run}")
        assert result.returncode == 0, result.stdout + result.stderr
        assert (run / "vocab.txt").read_text() == other_vocab.read_text()
