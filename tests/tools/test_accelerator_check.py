"""tools/accelerator_check.py: ELECTRA steps on JAX with no TensorFlow imported; its ids file."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tools import accelerator_check

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAD, CLS, SEP, MASK, VOCAB = 0, 2, 3, 4, 200


def token_rows(rng, rows=16, length=32):
    """[CLS] random tokens [SEP] then padding, of random lengths: int32 [rows, length]."""
    ids = rng.integers(5, VOCAB, (rows, length)).astype(np.int32)
    ids[:, 0] = CLS
    for i, n in enumerate(rng.integers(8, length + 1, rows)):
        ids[i, n - 1] = SEP
        ids[i, n:] = PAD
    return ids


def write_ids(path, ids, **overrides):
    arrays = dict(
        input_ids=ids,
        segment_ids=np.zeros(ids.shape, np.int8),
        vocab_size=np.int32(VOCAB),
        pad_id=np.int32(PAD),
        cls_id=np.int32(CLS),
        sep_id=np.int32(SEP),
        mask_id=np.int32(MASK),
    )
    arrays.update(overrides)
    np.savez(path, **arrays)


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs JAX")
@pytest.mark.slow  # about 20-40 s of CPU: a JAX process compiles the tiny model's step
def test_the_check_trains_on_jax_without_importing_tensorflow(tmp_path, rng):
    path = tmp_path / "ids.npz"
    write_ids(path, token_rows(rng))
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env.update(PYTHONPATH=REPO_ROOT, JAX_PLATFORMS="cpu")
    command = [sys.executable, "-m", "tools.accelerator_check", f"--npz={path}"]
    command += ["--model_size=tiny", "--steps=3", "--batch_size=4", "--peak_tflops=1"]
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["tensorflow_imported"] is False
    assert result["device"].startswith("cpu")
    assert (result["batch_size"], result["seq_len"], result["model_size"]) == (4, 32, "tiny")
    for key in ("seconds_per_step", "sequences_per_second", "achieved_tflops", "mfu"):
        assert result[key] > 0, key
    assert result["sequences_per_second"] == pytest.approx(4 / result["seconds_per_step"])
    assert result["mfu"] == pytest.approx(result["achieved_tflops"] / 1.0)
    for key in ("first_loss", "last_loss"):
        assert np.isfinite(result[key]), key
    # loss = MLM + 50 * disc, as reported; a fresh generator's MLM loss is about log(V).
    mlm, disc = result["first_mlm_and_disc_loss"]
    assert result["first_loss"] == pytest.approx(mlm + 50 * disc, rel=1e-4)
    assert abs(mlm - np.log(VOCAB)) < 1.0
    assert "jax" in result and "keras" in result


def test_masking_follows_the_pipeline_rules(rng):
    ids = token_rows(rng, rows=64, length=32)
    mask = (ids != PAD).astype(np.int32)
    n = 5
    out = accelerator_check.mask_rows(
        ids, mask, rng, mask_rate=0.15, n=n, pad_id=PAD, cls_id=CLS, sep_id=SEP, mask_id=MASK
    )
    for row in range(ids.shape[0]):
        real = int(mask[row].sum())
        count = min(max(1, min(n, round(0.15 * real))), real - 2)  # all but [CLS] and [SEP]
        weights = out["masked_lm_weights"][row]
        np.testing.assert_array_equal(weights, [1.0] * count + [0.0] * (n - count))
        positions = out["masked_lm_positions"][row][:count]
        assert len(set(positions)) == count
        # Only real tokens other than [CLS]/[SEP]; the ids are the originals.
        assert all(0 < p < real - 1 for p in positions)
        np.testing.assert_array_equal(out["masked_lm_ids"][row][:count], ids[row, positions])
        assert not out["masked_lm_positions"][row][count:].any()
        # Only chosen positions change, and only to [MASK].
        changed = np.flatnonzero(out["masked_input_ids"][row] != ids[row])
        assert set(changed) <= set(positions)
        assert (out["masked_input_ids"][row, changed] == MASK).all()
    chosen = out["masked_lm_weights"].sum()
    shown_as_mask = (out["masked_input_ids"] == MASK).sum()
    assert 0.7 < shown_as_mask / chosen < 0.97  # 85% on average
    u = out["sampling_uniforms"]
    assert u.dtype == np.float32 and ((0 <= u) & (u < 1)).all()


def test_an_ids_file_of_another_layout_is_refused_in_one_line(tmp_path, rng):
    path = tmp_path / "bad.npz"
    write_ids(path, token_rows(rng)[0])  # [L], not [N, L]
    with pytest.raises(SystemExit, match=r"--npz=.*bad.npz: input_ids is int32 \[32\]; expected"):
        accelerator_check.read_npz(str(path))
    write_ids(path, token_rows(rng), vocab_size=np.int32(10))
    with pytest.raises(SystemExit, match=r"token ids outside \[0, vocab_size=10\)"):
        accelerator_check.read_npz(str(path))
    (tmp_path / "text.npz").write_text("not a zip")
    with pytest.raises(SystemExit, match="not a readable .npz"):
        accelerator_check.read_npz(str(tmp_path / "text.npz"))


def test_write_npz_reads_a_shard_directory(tmp_path, rng):
    import tensorflow as tf

    ids = token_rows(rng, rows=10, length=16)
    segments = (np.arange(16)[None, :] >= 8).astype(np.int64) * (ids != PAD)
    shard = tmp_path / "pretrain_data.tfrecord-00000-of-00001"
    with tf.io.TFRecordWriter(str(shard)) as writer:
        for row, seg in zip(ids, segments):
            feature = {
                "input_ids": row,
                "input_mask": (row != PAD).astype(np.int64),
                "segment_ids": seg,
            }
            example = tf.train.Example(
                features=tf.train.Features(
                    feature={
                        k: tf.train.Feature(int64_list=tf.train.Int64List(value=v))
                        for k, v in feature.items()
                    }
                )
            )
            writer.write(example.SerializeToString())
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(VOCAB - 5)]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    metadata = {
        "max_seq_length": 16,
        "num_examples": 10,
        "shards": [{"path": shard.name, "num_examples": 10}],
        "vocab_file": str(tmp_path / "vocab.txt"),
    }
    (tmp_path / "metadata.json").write_text(json.dumps(metadata))
    out = tmp_path / "ids.npz"
    # A cap of 6 rows of 16 tokens (5 bytes each).
    summary = accelerator_check.write_npz(str(out), str(tmp_path), max_bytes=6 * 16 * 5)
    assert summary == {
        "rows": 6,
        "seq_len": 16,
        "vocab_size": VOCAB,
        "pad_id": PAD,
        "cls_id": CLS,
        "sep_id": SEP,
        "mask_id": MASK,
    }
    data = accelerator_check.read_npz(str(out))
    np.testing.assert_array_equal(data["input_ids"], ids[:6])
    np.testing.assert_array_equal(data["segment_ids"], segments[:6])
    assert data["vocab_size"] == VOCAB and data["mask_id"] == MASK
    # A run directory names its shards in data.json, as the run writes it.
    from electra_tf.artifacts.run_dir import DATA_FILE, RunDir, write_data_file

    assert accelerator_check.RUN_DATA_FILE == DATA_FILE
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text("{}")
    write_data_file(RunDir(str(run)), str(tmp_path), None, "tensorflow")
    assert accelerator_check.shard_dir_of(str(run)) == str(tmp_path)
    # Shards moved away, or a run of an earlier version: told so, not guessed.
    write_data_file(RunDir(str(run)), str(tmp_path / "moved"), None, "jax")
    with pytest.raises(SystemExit, match="names the shards .*moved, which hold no metadata"):
        accelerator_check.shard_dir_of(str(run))
    os.remove(run / "data.json")
    with pytest.raises(SystemExit, match="does not record its shards"):
        accelerator_check.shard_dir_of(str(run))


def test_the_peer_is_described_as_the_peer_script_reads_it():
    from electra_tf.config import preset

    config = preset("small", vocab_size=VOCAB)
    settings = accelerator_check.peer_settings(config)
    model = settings["model"]
    assert (model["hidden_size"], model["num_layers"], model["vocab_size"]) == (256, 12, VOCAB)
    assert settings["generator"]["hidden_size"] == config.model.generator_config().hidden_size
    # The keys hf_electra_pretraining.py reads (electra_config, learning_rate, forward).
    assert {"num_heads", "intermediate_size", "embedding_size", "dropout_rate"} <= set(model)
    recipe = settings["recipe"]
    assert recipe["disc_weight"] == 50.0 and recipe["num_warmup_steps"] == 0
    if importlib.util.find_spec("transformers") is None:
        # Without torch/transformers the check says so and goes on.
        assert (
            "the peer needs torch and transformers"
            in accelerator_check.run_peer(config, [])["error"]
        )
