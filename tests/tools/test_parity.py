import json
import os
import random
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl import flags
from conftest import SPECIAL_IDS, make_batch

from electra_tf.config import preset
from electra_tf.data.pipeline import dummy_batch, make_pretraining_dataset
from electra_tf.data.shard_build import write_shards
from electra_tf.pretraining import objective
from electra_tf.pretraining.evaluation import evaluation_dataset, roc_auc
from electra_tf.pretraining.objectives import ElectraPretrainer
from electra_tf.pretraining.optimization import AdamWeightDecay, WarmupLinearDecay
from electra_tf.tokenization import WordPieceTokenizer
from tools import parity

WORDS = [
    "the",
    "cat",
    "sat",
    "on",
    "a",
    "mat",
    "dog",
    "ran",
    "to",
    "park",
    "big",
    "small",
    "red",
    "blue",
    "and",
    "with",
    "house",
    "tree",
    "bird",
    "sang",
]


def tiny(**overrides):
    values = dict(
        vocab_size=len(WORDS) + 6,
        hidden_size=32,
        num_layers=2,
        embedding_size=16,
        num_heads=2,
        max_seq_length=24,
        train_batch_size=4,
        num_train_steps=4,
        num_warmup_steps=2,
        shuffle_buffer_size=16,
    )
    values.update(overrides)
    return preset("tiny", **values)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Training and held-out shards of random sentences over a 26-token vocabulary."""
    root = tmp_path_factory.mktemp("parity")
    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *WORDS]) + "\n")
    rng = np.random.default_rng(0)
    lines = []
    for _ in range(10):
        lines += [" ".join(rng.choice(WORDS, size=rng.integers(3, 9))) + " ." for _ in range(12)]
        lines.append("")
    text = root / "text.txt"
    text.write_text("\n".join(lines) + "\n")
    tokenizer = WordPieceTokenizer(str(vocab), do_lower_case=True)
    dirs = []
    for name, text_range in (("train", (0.0, 0.7)), ("eval", (0.7, 1.0))):
        write_shards(
            [str(text)],
            str(root / name),
            tokenizer.get_config(),
            max_seq_length=24,
            num_shards=1,
            text_range=text_range,
        )
        dirs.append(str(root / name))
    return dirs


def log_records(steps, seed_offset=0.0):
    """A metrics log as the two sides write it: training steps, evaluations, a summary."""
    records = [
        {"split": "eval", "step": s, **{m: 0.5 + seed_offset + s / 1000 for m in parity.COMPARED}}
        for s in steps
    ]
    records += [{"split": "train", "step": s, "disc_loss": 0.4} for s in range(1, steps[-1] + 1)]
    records.append(
        {
            "split": "summary",
            "steps": steps[-1],
            "seconds": 12.0,
            "train_seconds": 10.0,
            "eval_seconds": 2.0,
        }
    )
    return records


def write_log(path, records):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    return str(path)


# ------------------------------------------------------------------ pure logic


def test_table_steps_are_the_evaluated_steps_nearest_to_the_fractions():
    steps = [0, 50, 100, 150, 200, 250, 300, 350, 400, 450, 500, 520]
    # 5% of 520 = 26 -> 50 (nearer than 0); 10% = 52 -> 50 again, kept once.
    assert parity.table_steps(steps) == [0, 50, 150, 250, 520]
    assert parity.table_steps([0, 10]) == [0, 10]


def test_comparison_table_shows_mean_and_spread_over_seeds(tmp_path):
    steps = [0, 100, 200]
    logs = {
        "electra-tf": [parity.read_log(write_log(tmp_path / "a", log_records(steps)))],
        "transformers": [
            parity.read_log(write_log(tmp_path / f"b{i}", log_records(steps, 0.01 * i)))
            for i in range(3)
        ],
    }
    table = parity.comparison_table(logs, metrics=["disc_auc"])
    lines = table.splitlines()
    assert lines[0] == "| step | metric | electra-tf | transformers |"
    # Seeds 0.7, 0.71, 0.72 at step 200: mean 0.71, sample standard deviation 0.01.
    assert lines[-1] == "| 200 | disc_auc | 0.7000 | 0.7100 ± 0.0100 |"
    assert len(lines) == 2 + 3


def test_a_log_without_its_summary_line_is_not_finished(tmp_path):
    records = log_records([0, 10])
    assert parity.finished_log(write_log(tmp_path / "done", records))["summary"]["steps"] == 10
    assert parity.finished_log(write_log(tmp_path / "cut", records[:-1])) is None
    assert parity.finished_log(str(tmp_path / "missing")) is None
    log = parity.read_log(str(tmp_path / "done"))
    assert [r["step"] for r in log["eval"]] == [0, 10] and len(log["train"]) == 10


def test_moving_average_averages_the_last_window_values():
    values = np.array([1.0, 3.0, 5.0, 7.0, 9.0])
    expected = [np.mean(values[max(0, i - 1) : i + 1]) for i in range(5)]
    np.testing.assert_allclose(parity._moving_average(values, 2), expected)


def test_peer_settings_describe_both_models_and_the_recipe():
    config = preset("tiny", vocab_size=8000, num_train_steps=1450, num_warmup_steps=145)
    settings = parity.peer_settings(config, eval_every_steps=50)
    assert settings["model"]["num_heads"] == 2 and settings["model"]["intermediate_size"] == 512
    assert settings["model"]["embedding_size"] == 128
    assert settings["generator"] == {
        "hidden_size": 32,
        "num_layers": 4,
        "num_heads": 1,
        "intermediate_size": 128,
    }
    assert settings["recipe"]["num_train_steps"] == 1450
    assert settings["recipe"]["adam_epsilon"] == 1e-6 and settings["recipe"]["disc_weight"] == 50
    assert settings["eval_every_steps"] == 50
    assert settings["initialisation"] == "transformers"
    assert parity.peer_settings(config, 50, "original")["initialisation"] == "original"
    json.dumps(settings)  # what the peer reads


@pytest.mark.parametrize(
    "variant", [dict(objective="mlm"), dict(disallow_correct=True), dict(weight_sharing="none")]
)
def test_peer_settings_refuse_what_the_peer_does_not_implement(variant):
    with pytest.raises(parity.ParityError, match="plain ELECTRA"):
        parity.peer_settings(preset("tiny", **variant), eval_every_steps=10)


def test_warmup_defaults_to_a_tenth_of_the_budgeted_steps():
    args = parity.parse_flags(
        ["--corpus=c", "--peer_python=p", "--max_train_flops=2e14", "--vocab_size=8000"]
    )
    config = parity.resolve_config(args)
    assert config.num_train_steps == 3713  # electra_tf.flops for tiny, batch 32 x 128
    assert config.num_warmup_steps == 371
    args = parity.parse_flags(
        ["--corpus=c", "--peer_python=p", "--num_train_steps=50", "--num_warmup_steps=7"]
    )
    assert parity.resolve_config(args).num_warmup_steps == 7


def test_flags_keep_their_defaults_and_rules():
    args = parity.parse_flags(["--corpus=c", "--peer_python=p", "--num_train_steps=50"])
    assert (
        args.model_size,
        args.train_batch_size,
        args.max_seq_length,
        args.vocab_size,
        args.seed,
        args.init_seeds,
        args.eval_fraction,
        args.num_eval_examples,
        args.eval_every_steps,
        args.peer_init,
        args.peer_threads,
    ) == ("tiny", 32, 128, 8000, 0, "0", 0.01, 1024, 100, "transformers", 1)
    assert (
        args.output_dir,
        args.figure,
        args.learning_rate,
        args.num_warmup_steps,
        args.corpus_megabytes,
    ) == (None, None, None, None, None)
    with pytest.raises(flags.Error, match="max_train_flops"):  # one of the two, not both
        parity.parse_flags(
            ["--corpus=c", "--peer_python=p", "--num_train_steps=50", "--max_train_flops=1e12"]
        )
    with pytest.raises(flags.Error, match="max_train_flops"):  # nor neither
        parity.parse_flags(["--corpus=c", "--peer_python=p"])
    with pytest.raises(flags.Error, match="peer_python"):
        parity.parse_flags(["--corpus=c", "--num_train_steps=50"])
    with pytest.raises(flags.Error, match="peer_init"):
        parity.parse_flags(
            ["--corpus=c", "--peer_python=p", "--num_train_steps=50", "--peer_init=other"]
        )


# ------------------------------------------------------------- electra-tf side


def test_dumped_batches_are_the_pipelines_batches(shards, tmp_path):
    train_dir, eval_dir = shards
    config = tiny(num_train_steps=3)
    arrays = parity.dump_batches(
        str(tmp_path / "b.npz"), config, train_dir, eval_dir, SPECIAL_IDS, num_eval_examples=9
    )
    expected = list(
        make_pretraining_dataset(
            train_dir,
            batch_size=4,
            max_predictions_per_seq=config.resolved_max_predictions_per_seq,
            mask_rate=config.mask_rate,
            special_ids=SPECIAL_IDS,
            seed=config.seed,
            shuffle_buffer_size=16,
        )
        .take(3)
        .as_numpy_iterator()
    )
    held_out = list(
        evaluation_dataset(
            eval_dir, config, SPECIAL_IDS, num_examples=9, batch_size=4
        ).as_numpy_iterator()
    )
    saved = dict(np.load(tmp_path / "b.npz"))
    assert sorted(saved) == sorted(arrays)
    for key in parity.BATCH_KEYS:
        np.testing.assert_array_equal(saved[key], np.stack([b[key] for b in expected]))
        # 9 held-out sequences: two whole batches of 4 (the partial third is left out).
        np.testing.assert_array_equal(
            saved[f"eval_{key}"], np.stack([b[key] for b in held_out[:2]])
        )


def test_recording_changes_nothing_in_the_training_step(rng):
    config = tiny()
    batch = {
        k: tf.constant(v) for k, v in make_batch(rng, 4, 24, 3, config.model.vocab_size).items()
    }
    weights = []
    for cls in (ElectraPretrainer, parity.RecordingPretrainer):
        keras.utils.set_random_seed(3)
        model = cls(config)
        model.build_from_batch(dummy_batch(config))
        optimizer = AdamWeightDecay(WarmupLinearDecay(1e-3, 10, 0))
        optimizer.build(model.trainable_variables)
        model.compile(optimizer=optimizer)
        for _ in range(2):
            stats = model.train_step(batch)
        weights.append([v.numpy() for v in model.trainable_variables])
        assert float(stats["disc_loss"]) > 0
        if cls is parity.RecordingPretrainer:
            recorded = model.last_disc_logits.numpy()
            assert np.any(recorded != 0)
            model.compute_sums(batch)  # not a training pass: the copies stay as they were
            np.testing.assert_array_equal(model.last_disc_logits.numpy(), recorded)
    for a, b in zip(*weights):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_electra_tf_side_logs_every_step_and_the_evaluations(shards, tmp_path):
    train_dir, eval_dir = shards
    config = tiny(num_train_steps=5)
    arrays = parity.dump_batches(
        str(tmp_path / "b.npz"), config, train_dir, eval_dir, SPECIAL_IDS, num_eval_examples=8
    )
    parity.train_electra_tf(
        arrays, config, eval_every_steps=2, output=str(tmp_path / "log"), seed=0
    )
    log = parity.read_log(str(tmp_path / "log"))
    assert [r["step"] for r in log["eval"]] == [0, 2, 4, 5]
    assert [r["step"] for r in log["train"]] == [1, 2, 3, 4, 5]
    # The schedule is read before each update: 0 at the first, peak * 1/2 * (1 - 1/5) next.
    assert [r["learning_rate"] for r in log["train"][:2]] == pytest.approx([0.0, 2e-4])
    for record in log["train"] + log["eval"]:
        assert set(parity.COMPARED) <= set(record)
        assert 0.0 <= record["disc_auc"] <= 1.0 or np.isnan(record["disc_auc"])
    assert log["summary"]["steps"] == 5


# ------------------------------------------- against transformers (slow, optional)


def _peer_python():
    """An interpreter with torch and transformers: this one, or ELECTRA_TF_HF_PYTHON."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401

        return sys.executable
    except ImportError:
        return os.environ.get("ELECTRA_TF_HF_PYTHON")


needs_peer = pytest.mark.skipif(
    _peer_python() is None,
    reason="needs torch + transformers (or ELECTRA_TF_HF_PYTHON "
    "pointing at an interpreter that has them)",
)

# Runs the peer's pieces on the inputs of an .npz and saves their outputs.
PEER_PIECES = """
import sys
import numpy as np
import torch
sys.path.insert(0, sys.argv[1])
import hf_electra_pretraining as peer

data = dict(np.load(sys.argv[2]))
out = {}
parameters = [torch.nn.Parameter(torch.tensor(data[f"w{i}"])) for i in range(3)]
names = ["dense.weight", "dense.bias", "LayerNorm.weight"]
recipe = {"learning_rate": 1e-2, "num_train_steps": 10, "num_warmup_steps": 2,
          "lr_decay_power": 1.0, "weight_decay_rate": 0.01, "adam_beta_1": 0.9,
          "adam_beta_2": 0.999, "adam_epsilon": 1e-6, "clip_norm": 1.0}
optimizer = peer.AdamWeightDecay(list(zip(names, parameters)), recipe)
for step in range(4):
    for i, p in enumerate(parameters):
        p.grad = torch.tensor(data[f"g{step}_{i}"])
    optimizer.step()
for i, p in enumerate(parameters):
    out[f"w{i}"] = p.detach().numpy()
out["sampled"] = peer.sample_tokens(torch.tensor(data["logits"]),
                                    torch.tensor(data["uniforms"]), 0.7).numpy()
fake, labels = peer.replace_tokens(torch.tensor(data["input_ids"]).long(),
                                   torch.tensor(data["positions"]).long(),
                                   torch.tensor(data["samples"]).long(),
                                   torch.tensor(data["weights"]))
out["fake_ids"], out["labels"] = fake.numpy(), labels.numpy()
out["auc"] = np.array(peer.roc_auc(data["scores"], data["score_labels"]))
np.savez(sys.argv[3], **out)
"""


@pytest.mark.slow
@needs_peer
def test_the_peers_optimiser_sampler_and_replacement_match_electra_tf(tmp_path, rng):
    shapes = [(3, 4), (4,), (4,)]
    data = {f"w{i}": rng.normal(size=s).astype(np.float32) for i, s in enumerate(shapes)}
    # Large gradients at the first steps, so the global-norm clip is active.
    data.update(
        {
            f"g{t}_{i}": (rng.normal(size=s) * (5.0 if t < 2 else 0.1)).astype(np.float32)
            for t in range(4)
            for i, s in enumerate(shapes)
        }
    )
    data["logits"] = (rng.normal(size=(8, 50, 300)) * 3).astype(np.float32)
    data["uniforms"] = rng.random((8, 50)).astype(np.float32)
    batch = make_batch(rng, 6, 20, 4, 40)
    data.update(
        input_ids=batch["input_ids"],
        positions=batch["masked_lm_positions"],
        weights=batch["masked_lm_weights"],
        samples=np.where(
            rng.random((6, 4)) < 0.5, batch["masked_lm_ids"], rng.integers(5, 40, (6, 4))
        ).astype(np.int32),
    )
    data["scores"] = rng.integers(0, 8, 500).astype(np.float32)  # many ties
    data["score_labels"] = rng.random(500) < 0.3
    np.savez(tmp_path / "in.npz", **data)
    subprocess.run(
        [
            _peer_python(),
            "-c",
            PEER_PIECES,
            os.path.dirname(parity.PEER_SCRIPT),
            str(tmp_path / "in.npz"),
            str(tmp_path / "out.npz"),
        ],
        check=True,
        timeout=300,
    )
    peer = np.load(tmp_path / "out.npz")

    # electra-tf's optimiser on the same weights and gradients. Keras names
    # the LayerNorm scale "gamma": excluded from weight decay like the peer's.
    variables = [
        keras.Variable(data[f"w{i}"], name=n) for i, n in enumerate(("kernel", "bias", "gamma"))
    ]
    optimizer = AdamWeightDecay(WarmupLinearDecay(1e-2, 10, 2), weight_decay=0.01)
    optimizer.build(variables)
    for t in range(4):
        optimizer.apply([tf.constant(data[f"g{t}_{i}"]) for i in range(3)], variables)
    for i, v in enumerate(variables):
        np.testing.assert_allclose(peer[f"w{i}"], v.numpy(), rtol=1e-5, atol=1e-6)

    ours = objective.sample_tokens(
        tf.constant(data["logits"]), tf.constant(data["uniforms"]), 0.7
    ).numpy()
    # Both search the same CDF; only float32 rounding of the sums can move a
    # uniform that falls right on a boundary to the neighbouring token.
    assert np.mean(peer["sampled"] == ours) > 0.995
    fake, labels = objective.replace_tokens(
        tf.constant(data["input_ids"]),
        tf.constant(data["positions"]),
        tf.constant(data["samples"]),
        tf.constant(data["weights"]),
    )
    np.testing.assert_array_equal(peer["fake_ids"], fake.numpy())
    np.testing.assert_array_equal(peer["labels"], labels.numpy())
    assert float(peer["auc"]) == pytest.approx(
        roc_auc(data["scores"], data["score_labels"]), abs=1e-12
    )


def write_markov_corpus(path, seed=0, documents=400):
    """Sentences from a random bigram chain over 45 made-up words.

    Each word is followed by one of its 3 successors 90% of the time, so the
    generator can learn much more than the unigram distribution, and its
    samples become plausible enough to make detection a real task.
    """
    rng = random.Random(seed)
    words = [c + v for c in "bcdfghklm" for v in "aeiou"]
    successors = {w: rng.sample(words, 3) for w in words}
    lines = []
    for _ in range(documents):
        for _ in range(8):
            word = rng.choice(words)
            sentence = [word]
            for _ in range(rng.randint(6, 14)):
                word = rng.choice(successors[word]) if rng.random() < 0.9 else rng.choice(words)
                sentence.append(word)
            lines.append(" ".join(sentence) + " .")
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


# Seed-to-seed standard deviations of the final held-out metrics of the run
# below, measured with initialisation seeds 0, 1 and 2 on each side (same
# batches): (electra-tf, transformers).
SEED_SPREAD = {
    "disc_loss": (0.0030, 0.0016),
    "disc_auc": (0.0043, 0.0030),
    "masked_lm_accuracy": (0.0014, 0.0078),
}
# One run per side: their difference has standard deviation sqrt(a^2 + b^2);
# three of those are allowed.
TOLERANCE = {name: 3 * float(np.hypot(*spread)) for name, spread in SEED_SPREAD.items()}


@pytest.mark.slow
@needs_peer
def test_learning_curves_agree_with_transformers(tmp_path):
    # The peer starts as the original code does (Glorot-uniform output and
    # projection layers). With transformers' own N(0, 0.02) for them its
    # discriminator collapses to the prior on this corpus: held-out AUC
    # 0.49 +- 0.02 over three seeds, against electra-tf's 0.56.
    corpus = write_markov_corpus(tmp_path / "corpus.txt")
    logs = parity.compare(
        parity.parse_flags(
            [
                f"--corpus={corpus}",
                f"--peer_python={_peer_python()}",
                f"--output_dir={tmp_path / 'out'}",
                "--vocab_size=120",
                "--max_seq_length=64",
                "--num_train_steps=300",
                "--eval_fraction=0.1",
                "--num_eval_examples=256",
                "--eval_every_steps=50",
                "--num_shard_workers=1",
                "--peer_init=original",
            ]
        )
    )
    assert os.path.getsize(tmp_path / "out" / "comparison.png") > 10_000
    final = {side: runs[0]["eval"][-1] for side, runs in logs.items()}
    assert final["electra-tf"]["step"] == final["transformers"]["step"] == 300
    for metric, tolerance in TOLERANCE.items():
        ours, theirs = final["electra-tf"][metric], final["transformers"][metric]
        assert abs(ours - theirs) <= tolerance, (metric, ours, theirs)
    # Both learned: the generator far beyond its start, the discriminator at least the prior.
    for side, runs in logs.items():
        first, last = runs[0]["eval"][0], runs[0]["eval"][-1]
        assert last["masked_lm_accuracy"] > first["masked_lm_accuracy"] + 0.1, side
        assert last["disc_loss"] < first["disc_loss"] - 0.2, side


@pytest.mark.slow
def test_python_m_tools_parity_runs_from_the_repository_root():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run(
        [sys.executable, "-m", "tools.parity", "--helpshort"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Traceback" not in done.stderr, done.stderr  # absl's help exits with 1
    assert "--peer_init" in done.stdout and "--max_train_flops" in done.stdout
    assert os.path.isfile(parity.PEER_SCRIPT)
    # The required flags are checked before anything runs.
    done = subprocess.run(
        [sys.executable, "-m", "tools.parity", "--num_train_steps=5"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0 and "--corpus" in done.stderr
