import dataclasses
import json

import pytest

from electra_tf.config import ConfigError, PretrainingConfig, config_differences, preset

# The paper's Table 6 and the original code, written out by hand.
PAPER = {
    "small": dict(
        hidden=256,
        layers=12,
        heads=4,
        ffn=1024,
        emb=128,
        gen_hidden=64,
        gen_heads=1,
        gen_ffn=256,
        mask=0.15,
        lr=5e-4,
        batch=128,
        steps=1_000_000,
        length=128,
        max_pred=19,
    ),
    "base": dict(
        hidden=768,
        layers=12,
        heads=12,
        ffn=3072,
        emb=768,
        gen_hidden=256,
        gen_heads=4,
        gen_ffn=1024,
        mask=0.15,
        lr=2e-4,
        batch=256,
        steps=766_000,
        length=512,
        max_pred=79,
    ),
    "large": dict(
        hidden=1024,
        layers=24,
        heads=16,
        ffn=4096,
        emb=1024,
        gen_hidden=256,
        gen_heads=4,
        gen_ffn=1024,
        mask=0.25,
        lr=2e-4,
        batch=2048,
        steps=400_000,
        length=512,
        max_pred=130,
    ),
}


@pytest.mark.parametrize("size", sorted(PAPER))
def test_presets_match_the_paper(size):
    expected = PAPER[size]
    config = preset(size)
    config.validate()
    model = config.model
    assert model.hidden_size == expected["hidden"]
    assert model.num_layers == expected["layers"]
    assert model.resolved_num_heads == expected["heads"]
    assert model.resolved_intermediate_size == expected["ffn"]
    assert model.embedding_size == expected["emb"]
    gen = model.generator_config()
    assert (gen.hidden_size, gen.num_layers) == (expected["gen_hidden"], expected["layers"])
    assert (gen.resolved_num_heads, gen.resolved_intermediate_size) == (
        expected["gen_heads"],
        expected["gen_ffn"],
    )
    assert config.mask_rate == expected["mask"]
    assert config.learning_rate == expected["lr"]
    assert config.train_batch_size == expected["batch"]
    assert config.num_train_steps == expected["steps"]
    assert config.max_seq_length == expected["length"]
    assert config.resolved_max_predictions_per_seq == expected["max_pred"]
    # Shared across sizes.
    assert (config.disc_weight, config.gen_weight, config.temperature) == (50.0, 1.0, 1.0)
    assert config.num_warmup_steps == 10_000
    assert (model.dropout_rate, model.attention_dropout_rate) == (0.1, 0.1)
    assert model.initializer_range == 0.02
    assert (config.adam_beta_1, config.adam_beta_2, config.adam_epsilon) == (0.9, 0.999, 1e-6)
    assert (config.weight_decay_rate, config.clip_norm) == (0.01, 1.0)


def test_tiny_preset_is_cpu_sized():
    config = preset("tiny")
    config.validate()
    assert (config.model.hidden_size, config.model.num_layers) == (128, 4)


def test_overrides_route_to_model_and_run_fields_and_rederive_heads():
    config = preset("small", hidden_size=512, learning_rate=1e-4, max_seq_length=256)
    assert config.model.hidden_size == 512 and config.model.resolved_num_heads == 8
    assert config.model.resolved_intermediate_size == 2048
    assert config.learning_rate == 1e-4
    assert config.resolved_max_predictions_per_seq == int((0.15 + 0.005) * 256)


def test_unknown_override_is_rejected():
    with pytest.raises(ConfigError, match="no_such_field"):
        preset("small", no_such_field=1)


def test_json_round_trip(tmp_path):
    config = preset(
        "base", mask_rate=0.2, strip_accents=False, mixed_precision="bfloat16", kernels="reference"
    )
    path = str(tmp_path / "config.json")
    config.save_json(path)
    loaded = PretrainingConfig.load_json(path)
    assert loaded == config
    assert dataclasses.asdict(loaded) == dataclasses.asdict(config)


@pytest.mark.parametrize(
    "overrides, flag",
    [
        (dict(mask_rate=1.5), "--mask_rate"),
        (dict(mask_rate=0.0), "--mask_rate"),
        (dict(hidden_size=250), "--hidden_size"),
        (dict(train_batch_size=0), "--train_batch_size"),
        (dict(num_train_steps=-5), "--num_train_steps"),
        (dict(max_seq_length=1024), "--max_seq_length"),
        (dict(max_seq_length=3), "--max_seq_length"),
        (dict(learning_rate=0.0), "--learning_rate"),
        (dict(temperature=0.0), "--temperature"),
        (dict(mixed_precision="float8"), "--mixed_precision"),
        (dict(kernels="gpu"), "--kernels='gpu': choose one of auto, reference, cpu_fast"),
        (dict(dropout_rate=1.0), "--dropout_rate"),
        (dict(generator_hidden_fraction=1.5), "--generator_hidden_fraction"),
        (dict(max_predictions_per_seq=0), "--max_predictions_per_seq"),
        (dict(keep_checkpoint_max=-1), "--keep_checkpoint_max"),
        (
            dict(steps_per_execution=4, save_checkpoints_steps=1000, log_every_steps=10),
            "--log_every_steps=10 must be a multiple of --steps_per_execution=4",
        ),
        (dict(seed=-1), "--seed"),
        (dict(seed=2**32), "--seed"),
        (dict(vocab_size=3), "--vocab_size"),
    ],
)
def test_impossible_values_name_the_flag(overrides, flag):
    with pytest.raises(ConfigError, match=flag):
        preset("small", **overrides).validate()


def test_unknown_model_size_names_the_flag():
    with pytest.raises(ConfigError, match="--model_size"):
        preset("huge")


def test_config_differences_lists_changed_fields_only():
    a = preset("small")
    b = preset("small", hidden_size=512, num_train_steps=5)
    diffs = config_differences(a, b, ignore=("num_train_steps",))
    assert diffs == ["model.hidden_size: 256 -> 512"]


def test_normalization_is_recorded_and_old_configs_keep_casefold(tmp_path):
    config = preset("tiny", normalization="bert")
    config.validate()
    path = str(tmp_path / "config.json")
    config.save_json(path)
    assert PretrainingConfig.load_json(path).normalization == "bert"
    with open(path, encoding="utf-8") as f:
        old = json.load(f)
    del old["normalization"]  # a run written before the option existed
    assert PretrainingConfig.from_dict(old).normalization == "casefold"
    with pytest.raises(ConfigError, match="--normalization='nfkc': choose one of casefold, bert"):
        preset("tiny", normalization="nfkc").validate()
