"""Checkpoint interoperability: original TF1 checkpoints and Hugging Face directories."""

import json
import math
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
from finetuning_support import VOCAB, write_vocab
from transformers_support import needs_transformers, transformers_outputs

from electra_tf.commands.convert import run as convert
from electra_tf.config import preset
from electra_tf.interop import checkpoints
from electra_tf.interop.huggingface import read_hf_dir
from electra_tf.interop.tf1 import write_tf1_checkpoint
from electra_tf.interop.weight_names import hf_key, model_entries
from electra_tf.modeling.electra import build_generator_and_discriminator

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_erf = np.vectorize(math.erf)

# The tiny architecture of the hand-written checkpoints below.
V, E, H, L, FFN, HEADS, P = len(VOCAB), 16, 32, 2, 64, 2, 64
GEN_H, GEN_HEADS = 24, 1
FLAGS = [
    "--model_size=tiny",
    f"--hidden_size={H}",
    f"--num_layers={L}",
    f"--embedding_size={E}",
    f"--num_heads={HEADS}",
    f"--intermediate_size={FFN}",
    f"--max_position_embeddings={P}",
]


def tf1_weights(rng, generator_hidden=GEN_H):
    """Weights under google-research/electra's names and TF1 shapes, written out by hand."""
    w = {}

    def dense(name, n_in, n_out):
        w[f"{name}/kernel"] = rng.normal(0, 0.2, (n_in, n_out))
        w[f"{name}/bias"] = rng.normal(0, 0.1, (n_out,))

    def norm(name, n):
        w[f"{name}/gamma"] = 1.0 + rng.normal(0, 0.1, (n,))
        w[f"{name}/beta"] = rng.normal(0, 0.1, (n,))

    w["electra/embeddings/word_embeddings"] = rng.normal(0, 0.5, (V, E))
    w["electra/embeddings/position_embeddings"] = rng.normal(0, 0.5, (P, E))
    w["electra/embeddings/token_type_embeddings"] = rng.normal(0, 0.5, (2, E))
    norm("electra/embeddings/LayerNorm", E)
    for scope, hidden in (("electra", H), ("generator", generator_hidden)):
        ffn = FFN if scope == "electra" else 4 * hidden
        if hidden != E:  # the original projects only when the widths differ
            dense(f"{scope}/embeddings_project", E, hidden)
        for i in range(L):
            layer = f"{scope}/encoder/layer_{i}"
            for part in ("query", "key", "value"):
                dense(f"{layer}/attention/self/{part}", hidden, hidden)
            dense(f"{layer}/attention/output/dense", hidden, hidden)
            norm(f"{layer}/attention/output/LayerNorm", hidden)
            dense(f"{layer}/intermediate/dense", hidden, ffn)
            dense(f"{layer}/output/dense", ffn, hidden)
            norm(f"{layer}/output/LayerNorm", hidden)
    dense("discriminator_predictions/dense", H, H)
    dense("discriminator_predictions/dense_1", H, 1)
    dense("generator_predictions/dense", generator_hidden, E)
    norm("generator_predictions/LayerNorm", E)
    w["generator_predictions/output_bias"] = rng.normal(0, 0.1, (V,))
    return {k: v.astype(np.float32) for k, v in w.items()}


def write_original_checkpoint(directory, weights):
    """What the original code leaves: model variables, Adam slots, the step, vocab.txt."""
    os.makedirs(directory, exist_ok=True)
    everything = dict(weights)
    for name, value in weights.items():
        everything[f"{name}/adam_m"] = np.zeros_like(value)
        everything[f"{name}/adam_v"] = np.zeros_like(value)
    everything["global_step"] = np.array(1000, np.int64)
    write_tf1_checkpoint(everything, os.path.join(directory, "model.ckpt-1000"))
    with open(os.path.join(directory, "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "model.ckpt-1000"\n')
    write_vocab(os.path.join(directory, "vocab.txt"))
    return directory


# --- an independent float64 forward pass over the TF1 weights ------------------------------


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _norm(x, w, name):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * w[f"{name}/gamma"] + w[f"{name}/beta"]


def _dense(x, w, name):
    return x @ w[f"{name}/kernel"] + w[f"{name}/bias"]


def np_encoder(w, scope, heads, ids, mask, segments):
    w = {k: v.astype(np.float64) for k, v in w.items()}
    n = ids.shape[1]
    x = (
        w["electra/embeddings/word_embeddings"][ids]
        + w["electra/embeddings/position_embeddings"][:n][None]
        + w["electra/embeddings/token_type_embeddings"][segments]
    )
    x = _norm(x, w, "electra/embeddings/LayerNorm")
    if f"{scope}/embeddings_project/kernel" in w:
        x = _dense(x, w, f"{scope}/embeddings_project")
    hidden = x.shape[-1]
    d = hidden // heads
    bias = (1.0 - mask[:, None, None, :]) * -10000.0
    heads_of = lambda t: t.reshape(t.shape[0], n, heads, d).transpose(0, 2, 1, 3)  # noqa: E731
    for i in range(L):
        layer = f"{scope}/encoder/layer_{i}"
        q, k, v = (
            heads_of(_dense(x, w, f"{layer}/attention/self/{p}")) for p in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + bias
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(x.shape[0], n, hidden)
        x = _norm(
            x + _dense(context, w, f"{layer}/attention/output/dense"),
            w,
            f"{layer}/attention/output/LayerNorm",
        )
        inner = _gelu(_dense(x, w, f"{layer}/intermediate/dense"))
        x = _norm(x + _dense(inner, w, f"{layer}/output/dense"), w, f"{layer}/output/LayerNorm")
    return x, w


def np_discriminator_logits(weights, ids, mask, segments):
    x, w = np_encoder(weights, "electra", HEADS, ids, mask, segments)
    hidden = _gelu(_dense(x, w, "discriminator_predictions/dense"))
    return _dense(hidden, w, "discriminator_predictions/dense_1")[..., 0]


def np_generator_logits(weights, ids, mask, segments, positions):
    x, w = np_encoder(weights, "generator", GEN_HEADS, ids, mask, segments)
    gathered = np.take_along_axis(x, positions[:, :, None], axis=1)
    hidden = _norm(
        _gelu(_dense(gathered, w, "generator_predictions/dense")),
        w,
        "generator_predictions/LayerNorm",
    )
    return (
        hidden @ w["electra/embeddings/word_embeddings"].T + w["generator_predictions/output_bias"]
    )


def sample_inputs(rng, batch=3, length=12):
    ids = rng.integers(5, V, size=(batch, length)).astype(np.int32)
    ids[:, 0] = 2
    mask = np.ones((batch, length), np.int32)
    mask[1, 7:] = 0
    segments = np.zeros((batch, length), np.int32)
    segments[:, 6:] = 1
    positions = np.array([[1, 4, 9], [2, 3, 5], [1, 10, 11]], np.int32)
    return ids, mask, segments, positions


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    weights = tf1_weights(np.random.default_rng(7))
    directory = write_original_checkpoint(str(tmp_path_factory.mktemp("tf1") / "ckpt"), weights)
    return directory, weights


@pytest.fixture(scope="module")
def imported(original, tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("imported") / "run")
    assert convert(["import-tf1", original[0], run_dir, f"--num_heads={HEADS}"]) == 0
    return run_dir


# --- name tables -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        dict(embedding_size=16, generator_hidden_fraction=0.5),  # both models project
        dict(embedding_size=32, generator_hidden_fraction=1.0),  # neither projects
        dict(embedding_size=32, generator_hidden_fraction=0.5, generator_layers_fraction=0.5),
    ],
)
def test_every_variable_is_mapped_exactly_once_in_both_directions(overrides):
    config = preset("tiny", vocab_size=V, hidden_size=32, num_layers=2, num_heads=2, **overrides)
    generator, discriminator = build_generator_and_discriminator(config.model)
    checkpoints.build_inputs(generator, discriminator)
    entries = model_entries(generator, discriminator)
    mapped = [id(e.variable) for e in entries]
    model_vars = {id(v) for v in generator.weights + discriminator.weights}
    assert len(mapped) == len(set(mapped)) == len(model_vars)
    assert set(mapped) == model_vars
    names = [n for e in entries for n in e.names]
    assert len(names) == len(set(names))
    # Hugging Face keys: unique within each of the two models, and back to one name each.
    for is_gen in (False, True):
        keys = [
            hf_key(n)[0]
            for n in names
            if n.startswith(("generator/", "generator_predictions/")) == is_gen
        ]
        assert len(keys) == len(set(keys))


def test_hugging_face_keys_and_transposes_follow_transformers_layout():
    expected = {
        "electra/embeddings/word_embeddings": ("electra.embeddings.word_embeddings.weight", False),
        "electra/embeddings/LayerNorm/gamma": ("electra.embeddings.LayerNorm.weight", False),
        "electra/embeddings_project/kernel": ("electra.embeddings_project.weight", True),
        "generator/embeddings_project/bias": ("electra.embeddings_project.bias", False),
        "electra/encoder/layer_11/attention/self/key/kernel": (
            "electra.encoder.layer.11.attention.self.key.weight",
            True,
        ),
        "electra/encoder/layer_0/attention/output/LayerNorm/beta": (
            "electra.encoder.layer.0.attention.output.LayerNorm.bias",
            False,
        ),
        "generator/encoder/layer_2/output/dense/kernel": (
            "electra.encoder.layer.2.output.dense.weight",
            True,
        ),
        "discriminator_predictions/dense_1/kernel": (
            "discriminator_predictions.dense_prediction.weight",
            True,
        ),
        "discriminator_predictions/dense/bias": ("discriminator_predictions.dense.bias", False),
        "generator_predictions/LayerNorm/gamma": ("generator_predictions.LayerNorm.weight", False),
        "generator_predictions/output_bias": ("generator_lm_head.bias", False),
    }
    for name, key in expected.items():
        assert hf_key(name) == key, name


# --- original TF1 checkpoints -----------------------------------------------------------


def test_tf1_import_gives_the_original_models_outputs(original, imported):
    _, weights = original
    ids, mask, segments, positions = sample_inputs(np.random.default_rng(1))
    inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": segments}
    export = os.path.join(imported, "export")
    disc = keras.saving.load_model(os.path.join(export, "discriminator.keras"))
    gen = keras.saving.load_model(os.path.join(export, "generator.keras"))
    ours = disc(inputs, training=False)["logits"].numpy()
    np.testing.assert_allclose(
        ours, np_discriminator_logits(weights, ids, mask, segments), atol=1e-4
    )
    gen_logits = gen({**inputs, "masked_lm_positions": positions}, training=False).numpy()
    np.testing.assert_allclose(
        gen_logits, np_generator_logits(weights, ids, mask, segments, positions), atol=1e-4
    )
    with open(os.path.join(imported, "config.json")) as f:
        config = json.load(f)
    assert config["model"]["generator_hidden_fraction"] == 0.75
    assert (config["model"]["hidden_size"], config["model"]["num_layers"]) == (H, L)
    assert config["do_lower_case"] is True


def test_config_is_inferred_from_shapes(original):
    _, weights = original
    model, has_generator = checkpoints.infer_model_config(weights, num_heads=HEADS)
    assert has_generator
    assert (model.vocab_size, model.embedding_size, model.hidden_size, model.num_layers) == (
        V,
        E,
        H,
        L,
    )
    assert (model.resolved_num_heads, model.resolved_intermediate_size) == (HEADS, FFN)
    assert model.max_position_embeddings == P
    generator = model.generator_config()
    assert (generator.hidden_size, generator.num_layers, generator.resolved_num_heads) == (
        GEN_H,
        L,
        1,
    )


def test_generator_size_mismatch_names_the_flag_and_the_fix(original):
    _, weights = original
    found, _ = checkpoints.infer_model_config(weights, num_heads=HEADS)
    wanted = preset(
        "tiny",
        vocab_size=V,
        hidden_size=H,
        num_layers=L,
        embedding_size=E,
        num_heads=HEADS,
        intermediate_size=FFN,
        max_position_embeddings=P,
    ).model
    lines = checkpoints.architecture_differences(wanted, found)
    assert lines == [
        "--generator_hidden_fraction: the flags give a generator of hidden size 8, "
        "the checkpoint's generator has 24 (pass --generator_hidden_fraction=0.75)"
    ]


def test_broken_checkpoints_are_refused_with_the_reason(original, tmp_path):
    _, weights = original
    incomplete = {
        k: v for k, v in weights.items() if k != "electra/encoder/layer_1/intermediate/dense/kernel"
    }
    directory = write_original_checkpoint(str(tmp_path / "incomplete"), incomplete)
    loaded = checkpoints.load_checkpoint(directory, num_heads=HEADS)
    with pytest.raises(
        checkpoints.CheckpointError,
        match="missing electra/encoder/layer_1/intermediate/dense/kernel",
    ):
        checkpoints.build_models(loaded)
    stray = dict(
        weights,
        **{
            "generator/encoder/layer_0/attention/self/extra/kernel": weights[
                "electra/embeddings/token_type_embeddings"
            ]
        },
    )
    directory = write_original_checkpoint(str(tmp_path / "stray"), stray)
    with pytest.raises(
        checkpoints.CheckpointError,
        match="not used by the model: generator/encoder/layer_0/attention/self/extra",
    ):
        checkpoints.build_models(checkpoints.load_checkpoint(directory, num_heads=HEADS))
    untied = dict(
        weights,
        **{"generator/embeddings/word_embeddings": weights["electra/embeddings/word_embeddings"]},
    )
    directory = write_original_checkpoint(str(tmp_path / "untied"), untied)
    with pytest.raises(checkpoints.CheckpointError, match="embeddings of its own"):
        checkpoints.load_checkpoint(directory)
    with pytest.raises(checkpoints.CheckpointError, match="not a checkpoint electra-tf can read"):
        checkpoints.load_checkpoint(str(tmp_path))


@pytest.mark.slow
def test_pretrain_refuses_mismatched_flags_then_continues_from_the_checkpoint(original, tmp_path):
    directory, weights = original
    text = tmp_path / "corpus.txt"
    text.write_text(
        "\n".join(
            ["the movie was very good", "a dull plot", "the actor is fun", "a bad story", ""] * 8
        )
        + "\n"
    )
    common = [
        sys.executable,
        os.path.join(ROOT, "pretrain.py"),
        f"--corpus={text}",
        f"--init_checkpoint={directory}",
        f"--data_dir={tmp_path}/data",
        *FLAGS,
        "--max_seq_length=16",
        "--train_batch_size=4",
        "--num_warmup_steps=1",
        "--num_shard_workers=1",
        "--log_every_steps=1",
    ]
    refused = subprocess.run(
        common + [f"--output_dir={tmp_path}/refused"], capture_output=True, text=True, timeout=300
    )
    assert refused.returncode != 0
    assert "pass --generator_hidden_fraction=0.75" in refused.stderr + refused.stdout
    assert not os.path.exists(tmp_path / "refused")
    # Matching flags and a negligible learning rate: the export keeps the imported weights.
    run_dir = tmp_path / "run"
    done = subprocess.run(
        common
        + [
            "--generator_hidden_fraction=0.75",
            "--num_train_steps=2",
            "--learning_rate=1e-9",
            f"--output_dir={run_dir}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Initialised the generator and discriminator from" in done.stdout
    trained = checkpoints.load_checkpoint(str(run_dir)).weights
    assert set(trained) == set(weights)
    for name, value in weights.items():
        np.testing.assert_allclose(trained[name], value, atol=1e-5, err_msg=name)
    # An unfinished run (no export/ yet) is read from its latest training checkpoint.
    shutil.rmtree(run_dir / "export")
    from_checkpoint = checkpoints.load_checkpoint(str(run_dir))
    assert from_checkpoint.notes == [f"weights from {run_dir}/checkpoints/ckpt-2"]
    for name, value in trained.items():
        np.testing.assert_array_equal(from_checkpoint.weights[name], value, err_msg=name)


@pytest.mark.slow
def test_pretrain_from_a_discriminator_only_checkpoint_starts_a_fresh_generator(original, tmp_path):
    _, weights = original
    discriminator_only = {
        k: v
        for k, v in weights.items()
        if not k.startswith(("generator/", "generator_predictions/"))
    }
    directory = str(tmp_path / "disc")
    write_original_checkpoint(directory, discriminator_only)
    text = tmp_path / "corpus.txt"
    text.write_text(
        "\n".join(
            ["the movie was very good", "a dull plot", "the actor is fun", "a bad story", ""] * 8
        )
        + "\n"
    )
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "pretrain.py"),
            f"--corpus={text}",
            f"--init_checkpoint={directory}",
            f"--data_dir={tmp_path}/data",
            *FLAGS,
            "--max_seq_length=16",
            "--train_batch_size=4",
            "--num_warmup_steps=1",
            "--num_shard_workers=1",
            "--log_every_steps=1",
            "--num_train_steps=2",
            "--learning_rate=1e-9",
            f"--output_dir={run_dir}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    announced = [line for line in done.stdout.splitlines() if "fresh generator" in line]
    assert announced == [
        "The checkpoint holds only a discriminator: starting a fresh generator "
        "(it shares the checkpoint's embeddings)."
    ]
    assert "Initialised the discriminator (the generator is new) from" in done.stdout
    trained = checkpoints.load_checkpoint(str(run_dir))
    assert trained.has_generator
    for name, value in discriminator_only.items():
        np.testing.assert_allclose(trained.weights[name], value, atol=1e-5, err_msg=name)
    # An imported checkpoint tokenizes as the original code did.
    assert json.load(open(run_dir / "config.json"))["normalization"] == "bert"


def test_imports_record_the_original_tokenizers_normalization(original, imported, tmp_path):
    assert json.load(open(os.path.join(imported, "config.json")))["normalization"] == "bert"
    run_dir = str(tmp_path / "folded")
    assert (
        convert(
            ["import-tf1", original[0], run_dir, f"--num_heads={HEADS}", "--normalization=casefold"]
        )
        == 0
    )
    assert json.load(open(os.path.join(run_dir, "config.json")))["normalization"] == "casefold"


# --- Hugging Face ---------------------------------------------------------------------------


def test_hugging_face_round_trip_is_exact(imported, tmp_path):
    hf_dir = str(tmp_path / "hf")
    assert convert(["export-hf", imported, hf_dir]) == 0
    config, state = read_hf_dir(hf_dir)
    assert config["architectures"] == ["ElectraForPreTraining"]
    assert (config["hidden_size"], config["num_attention_heads"], config["embedding_size"]) == (
        H,
        HEADS,
        E,
    )
    gen_config, gen_state = read_hf_dir(os.path.join(hf_dir, "generator"))
    assert gen_config["architectures"] == ["ElectraForMaskedLM"]
    assert (
        gen_config["hidden_size"],
        gen_config["num_attention_heads"],
        gen_config["intermediate_size"],
    ) == (GEN_H, GEN_HEADS, 4 * GEN_H)
    # PyTorch layout: Linear weights are [out, in].
    assert state["electra.encoder.layer.0.intermediate.dense.weight"].shape == (FFN, H)
    np.testing.assert_array_equal(
        gen_state["generator_lm_head.weight"], state["electra.embeddings.word_embeddings.weight"]
    )
    with open(os.path.join(hf_dir, "tokenizer_config.json")) as f:
        assert json.load(f)["do_lower_case"] is True
    assert open(os.path.join(hf_dir, "vocab.txt")).read().split() == VOCAB

    back = str(tmp_path / "back")
    assert convert(["import-hf", hf_dir, back]) == 0
    before = checkpoints.load_checkpoint(imported)
    after = checkpoints.load_checkpoint(back)
    assert after.model == before.model and after.has_generator
    assert set(after.weights) == set(before.weights)
    for name in before.weights:
        np.testing.assert_array_equal(after.weights[name], before.weights[name], err_msg=name)


def test_hugging_face_errors_name_the_problem(imported, tmp_path):
    hf_dir = str(tmp_path / "hf")
    assert convert(["export-hf", imported, hf_dir]) == 0
    assert convert(["export-hf", imported, hf_dir]) == 2  # not empty: refused, left intact
    assert os.path.exists(os.path.join(hf_dir, "model.safetensors"))
    with pytest.raises(checkpoints.CheckpointError, match="is a generator"):
        checkpoints.load_checkpoint(os.path.join(hf_dir, "generator"))
    os.remove(os.path.join(hf_dir, "model.safetensors"))
    with pytest.raises(checkpoints.CheckpointError, match="no model.safetensors"):
        checkpoints.load_checkpoint(hf_dir)
    assert convert(["import-tf1", imported, str(tmp_path / "x")]) == 2  # wrong command


@needs_transformers
def test_transformers_gives_the_same_logits(imported, tmp_path):
    hf_dir = str(tmp_path / "hf")
    assert convert(["export-hf", imported, hf_dir]) == 0
    ids, mask, segments, positions = sample_inputs(np.random.default_rng(3))
    reference = transformers_outputs(
        hf_dir,
        {
            "input_ids": ids,
            "input_mask": mask,
            "segment_ids": segments,
            "masked_lm_positions": positions,
        },
        tmp_path,
    )
    inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": segments}
    export = os.path.join(imported, "export")
    disc = keras.saving.load_model(os.path.join(export, "discriminator.keras"))
    gen = keras.saving.load_model(os.path.join(export, "generator.keras"))
    np.testing.assert_allclose(disc(inputs)["logits"].numpy(), reference["disc_logits"], atol=1e-4)
    np.testing.assert_allclose(
        gen({**inputs, "masked_lm_positions": positions}).numpy(),
        reference["gen_logits"],
        atol=1e-4,
    )


@pytest.mark.slow
def test_finetune_accepts_an_original_checkpoint_directly(original, tmp_path):
    directory, _ = original
    train = tmp_path / "train.tsv"
    train.write_text(
        "text\tlabel\n"
        + "".join(f"the movie was {w}\t{int(w == 'good')}\n" for w in ["good", "bad"] * 8)
    )
    out = tmp_path / "ft"
    command = [
        sys.executable,
        os.path.join(ROOT, "finetune.py"),
        f"--init_checkpoint={directory}",
        f"--train_file={train}",
        f"--dev_file={train}",
        f"--output_dir={out}",
        "--num_train_epochs=1",
        "--max_seq_length=16",
        "--save_models=false",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "converting the tf1 checkpoint" in result.stdout
    assert (out / "imported_checkpoint" / "export" / "discriminator.keras").exists()
    with open(out / "results.json") as f:
        assert "accuracy" in json.load(f)["median"]
