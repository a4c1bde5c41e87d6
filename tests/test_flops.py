"""FLOPs accounting: hand-computed small cases, the paper's totals, scaling."""

import dataclasses
import math

import pytest

from electra_tf import flops
from electra_tf.config import ModelConfig, PretrainingConfig, preset

# (name, config, objective, paper figure, figure printed by the paper's counting script)
TRAINING_RUNS = [
    ("ELECTRA-Small 1M", lambda: preset("small"), "electra", 1.4e18, 1.29e18),
    (
        "BERT-Small 1.45M",
        lambda: preset("small", num_train_steps=1_450_000),
        "mlm",
        1.4e18,
        1.42e18,
    ),
    ("ELECTRA-Base 766K", lambda: preset("base"), "electra", 6.4e19, 6.42e19),
    ("BERT-Base 1M", lambda: preset("base", num_train_steps=1_000_000), "mlm", 6.4e19, 6.43e19),
    ("ELECTRA-400K", lambda: preset("large"), "electra", 7.1e20, 7.12e20),
    (
        "ELECTRA-1.75M",
        lambda: preset("large", num_train_steps=1_750_000),
        "electra",
        3.1e21,
        3.11e21,
    ),
    (
        "BERT-Large",
        lambda: preset("large", mask_rate=0.15, train_batch_size=256, num_train_steps=1_000_000),
        "mlm",
        1.9e20,
        1.92e20,
    ),
]
RUN_IDS = [run[0] for run in TRAINING_RUNS]


def half_last_digit(printed: float) -> float:
    """Rounding slack of a figure printed with three significant digits (1.29e18 -> 5e15)."""
    return 0.005 * 10 ** math.floor(math.log10(printed))


def tiny_model(**overrides) -> ModelConfig:
    """1 layer, hidden 4, FFN 16, 1 head, vocabulary 10: small enough to count by hand."""
    values = dict(
        vocab_size=10,
        hidden_size=4,
        num_layers=1,
        intermediate_size=16,
        embedding_size=4,
        type_vocab_size=2,
        generator_hidden_fraction=1.0,
    )
    values.update(overrides)
    return ModelConfig(**values)


def tiny_run(**overrides) -> PretrainingConfig:
    values = dict(
        model=tiny_model(),
        max_seq_length=2,
        max_predictions_per_seq=1,
        train_batch_size=3,
        num_train_steps=10,
    )
    values.update(overrides)
    return PretrainingConfig(**values)


# ------------------------------------------------------------ by hand
# h=4, i=16, heads=1, s=2, e=4, V=10, 2 segment types.
# Layer, per token:
#   attention: QKV 3*(2*4*4 + 4) = 108, scores 2*4*2 = 16, scale + softmax + dropout
#   of the probabilities 1*2*(1+5+4) = 20, weighted values 16, output 2*4*4 + 4 = 36,
#   dropout + residual + LayerNorm 4*(4+1+5) = 40                       -> 236
#   feed-forward: 2*4*16 + 16 = 144, GELU 8*16 = 128, 2*16*4 + 4 = 132, 40 -> 444
#   680 per token, 1360 per sequence.
# Embeddings, per token: word one-hot 2*4*10 = 80, position + segment one-hot
#   2*4*(2+2) = 32, two adds 8, LayerNorm 20, dropout 16 -> 156; 312 per sequence.
# Token head, per token: 2*4*4 + 4 = 36, GELU 32, logit 8 -> 76; 152 per sequence.
# Masked-LM head, per scored position: dense 36, GELU + LayerNorm 4*13 = 52,
#   output 2*4*10 = 80, softmax + target 10*7 = 70 -> 238.
LAYER, EMBEDDING, TOKEN_HEAD, MLM_HEAD = 1360, 312, 152, 238
# Lookups as gathers: embeddings keep only the adds, LayerNorm and dropout,
# 44 per token (88 per sequence) instead of 156.
SPARSE_EMBEDDING = EMBEDDING - 2 * (80 + 32)


def test_components_match_hand_counts():
    assert flops.transformer_layer_flops(4, 16, 1, 2) == LAYER
    assert flops.input_embedding_flops(4, 4, 10, 2) == EMBEDDING
    assert flops.token_classifier_flops(4, 2) == TOKEN_HEAD
    assert flops.mlm_head_flops(4, 4, 10, num_predictions=1) == MLM_HEAD
    assert flops.mlm_head_flops(4, 4, 10, num_predictions=0.5) == MLM_HEAD / 2
    assert flops.encoder_forward_flops(4, 1, 16, 1, 2, 4, 10) == LAYER + EMBEDDING
    assert flops.encoder_forward_flops(4, 3, 16, 1, 2, 4, 10) == 3 * LAYER + EMBEDDING


def test_projection_and_sparse_lookup_by_hand():
    # e=2, h=4: adds 4, LayerNorm 10, dropout 8, word 2*2*10 = 40, position + segment
    # 2*2*4 = 16, projection 2*2*4 + 4 = 20 -> 98 per token.
    assert flops.input_embedding_flops(4, 2, 10, 2) == 2 * 98
    # Sparse lookups drop the 40 + 16 one-hot products.
    assert flops.input_embedding_flops(4, 2, 10, 2, sparse_lookup=True) == 2 * (98 - 56)


def test_inference_by_hand():
    assert flops.inference_flops(tiny_model(), seq_len=2) == LAYER + EMBEDDING + TOKEN_HEAD  # 1824


def test_training_step_by_hand():
    # Backward counted as one more forward: 2 x batch 3 x forward.
    mlm = flops.train_flops_per_step(tiny_run(), objective="mlm")
    assert mlm == 2 * 3 * (LAYER + EMBEDDING + MLM_HEAD)  # 11460
    # Generator of the same size (fraction 1.0): two encoders, both heads.
    electra = flops.train_flops_per_step(tiny_run(), objective="electra")
    assert electra == 2 * 3 * (2 * (LAYER + EMBEDDING) + TOKEN_HEAD + MLM_HEAD)  # 22404
    assert flops.train_flops(tiny_run(), objective="mlm") == 10 * mlm
    assert flops.train_flops(tiny_run(), num_steps=7) == 7 * electra


def test_executed_count_by_hand():
    # Backward as two forward passes, lookups as gathers.
    assert flops.executed_train_flops_per_step(tiny_run()) == 3 * 3 * (
        2 * (LAYER + SPARSE_EMBEDDING) + TOKEN_HEAD + MLM_HEAD
    )


def test_executed_count_is_the_small_steps_matmuls_plus_a_little():
    # Independent count of ELECTRA-Small's products alone (batch 32, length 128):
    # discriminator h=256, FFN 1024; generator h=64, FFN 256, one head; 128-wide
    # embeddings projected to each; the generator's vocabulary product on 19 of
    # the 128 positions. Three passes' worth (forward, input and weight gradients).
    s = 128
    discriminator = (
        12 * (2 * 256 * 768 + 2 * 256 * 256 + 2 * 2 * 256 * 1024 + 2 * 2 * s * 256)
        + 2 * 128 * 256
        + 2 * 256 * 256
        + 2 * 256
    )
    generator = (
        12 * (2 * 64 * 192 + 2 * 64 * 64 + 2 * 2 * 64 * 256 + 2 * 2 * s * 64)
        + 2 * 128 * 64
        + 19 / 128 * (2 * 64 * 128 + 2 * 128 * 30522)
    )
    products = 3 * 32 * s * (discriminator + generator)
    executed = flops.executed_train_flops_per_step(
        preset("small", train_batch_size=32, max_seq_length=s)
    )
    # The rest is element-wise work (biases, softmax, LayerNorm, GELU, dropout).
    assert products < executed < 1.03 * products


# ------------------------------------------------------- paper totals
@pytest.mark.parametrize("name,make,objective,paper,script", TRAINING_RUNS, ids=RUN_IDS)
def test_paper_output_fraction_reproduces_the_script(name, make, objective, paper, script):
    # With the paper's 20/128 masked-LM fraction we land on the script's three printed
    # digits (half a unit of the last one), give or take 0.1% for the LayerNorm term.
    value = flops.train_flops(
        make(), objective=objective, output_fraction=flops.PAPER_OUTPUT_FRACTION
    )
    assert abs(value - script) <= half_last_digit(script) + 0.001 * script


@pytest.mark.parametrize("name,make,objective,paper,script", TRAINING_RUNS, ids=RUN_IDS)
def test_default_output_fraction_close_to_the_script(name, make, objective, paper, script):
    # Default: the positions our configs score (19/128, 79/512, 130/512). The Large runs
    # mask 25%, so the generator's output costs more than at 20/128: +0.7% / +0.9%.
    value = flops.train_flops(make(), objective=objective)
    assert value == pytest.approx(script, rel=0.01)


@pytest.mark.parametrize(
    "name,make,objective,paper,script",
    [run for run in TRAINING_RUNS if run[0] != "ELECTRA-Small 1M"],
    ids=[i for i in RUN_IDS if i != "ELECTRA-Small 1M"],
)
def test_close_to_the_paper(name, make, objective, paper, script):
    # The paper prints two digits, so it can be off by up to 0.05 / 1.4 = 3.6% by itself.
    assert flops.train_flops(make(), objective=objective) == pytest.approx(paper, rel=0.02)


def test_electra_small_is_below_the_papers_figure():
    # Table 1 says 1.4e18; the counting script (and we) get 1.29e18 for a 64-wide
    # generator, 7.7% lower. Both are recorded here so a change is noticed.
    value = flops.train_flops(preset("small"))
    assert value == pytest.approx(1.29e18, rel=0.005)
    assert value == pytest.approx(1.4e18, rel=0.10)
    assert value < 1.4e18


@pytest.mark.parametrize(
    "size,seq_len,paper,script",
    [
        ("small", 128, 3.7e9, 3.68e9),
        ("base", 128, 2.9e10, 2.86e10),
        ("base", 512, None, 1.22e11),
        ("large", 512, None, 3.70e11),
    ],
)
def test_inference_figures(size, seq_len, paper, script):
    value = flops.inference_flops(preset(size).model, seq_len)
    assert abs(value - script) <= half_last_digit(script)
    if paper is not None:
        assert value == pytest.approx(paper, rel=0.02)


def test_backward_convention_is_what_matches_the_paper():
    assert flops.TRAIN_FORWARD_MULTIPLIER == 2
    config = preset("base", num_train_steps=1_000_000)
    forward = flops.forward_flops_per_sequence(config, "mlm")
    assert flops.train_flops_per_step(config, "mlm") == 2 * 256 * forward
    # Backward = 2 x forward (3 passes) would put BERT-Base at ~9.6e19, far from 6.4e19.
    assert 3 * 256 * forward * 1_000_000 == pytest.approx(9.64e19, rel=0.01)


def test_default_output_fraction_is_max_predictions_over_length():
    config = preset("small")
    assert config.resolved_max_predictions_per_seq == 19
    assert flops.train_flops_per_step(config) == pytest.approx(
        flops.train_flops_per_step(config, output_fraction=19 / 128), rel=1e-12
    )


# ------------------------------------------------------------ scaling
def test_batch_and_steps_scale_linearly():
    config = preset("small")
    double = dataclasses.replace(config, train_batch_size=2 * config.train_batch_size)
    step = flops.train_flops_per_step(config)
    assert flops.train_flops_per_step(double) == pytest.approx(2 * step)
    assert flops.train_flops(config, num_steps=500_000) == pytest.approx(500_000 * step)


def test_bigger_generator_costs_more():
    quarter = flops.train_flops(preset("small"))
    full = flops.train_flops(preset("small", generator_hidden_fraction=1.0))
    assert full > quarter
    # The paper's counting with a full-size generator on the Small recipe gives 1.92e18.
    full_paper = flops.train_flops(
        preset("small", generator_hidden_fraction=1.0), output_fraction=flops.PAPER_OUTPUT_FRACTION
    )
    assert full_paper == pytest.approx(1.92e18, rel=0.005)


def test_other_monotonicity():
    config = preset("small")
    assert flops.train_flops(config) > flops.train_flops(config, objective="mlm")
    assert flops.train_flops(config, sparse_lookup=True) < flops.train_flops(config)
    assert flops.train_flops(config, output_fraction=0.5) > flops.train_flops(
        config, output_fraction=0.15
    )
    assert flops.inference_flops(config.model, 256) > 2 * flops.inference_flops(config.model, 128)
    small, base = preset("small").model, preset("base").model
    assert flops.inference_flops(base, 128) > flops.inference_flops(small, 128)


def test_unknown_objective():
    with pytest.raises(ValueError, match="objective"):
        flops.train_flops_per_step(preset("small"), objective="gpt")


# --------------------------------------------------------- parameters
@pytest.mark.parametrize("size,paper", [("small", 14e6), ("base", 110e6), ("large", 335e6)])
def test_parameter_counts_near_the_paper(size, paper):
    assert flops.count_parameters(preset(size).model) == pytest.approx(paper, rel=0.04)


def test_parameter_count_matches_the_keras_encoder():
    from electra_tf.modeling.encoder import ElectraEncoder

    for model in (
        tiny_model(vocab_size=50, max_position_embeddings=16),
        tiny_model(vocab_size=50, max_position_embeddings=16, embedding_size=2, num_layers=2),
    ):
        encoder = ElectraEncoder.from_model_config(model)
        assert flops.count_parameters(model) == encoder.count_params()


# ------------------------------------------------------- the paper's variants
def test_variants_by_hand():
    # s=2 (so all_tokens_mlm scores 2 positions), 1 prediction, batch 3; the
    # generator has the discriminator's size (fraction 1.0).
    per_step = lambda **kw: flops.train_flops_per_step(tiny_run(**kw))  # noqa: E731
    encoder = LAYER + EMBEDDING
    assert per_step(objective="electra_15") == per_step(objective="electra")
    assert per_step(objective="replace_mlm") == 2 * 3 * (2 * (encoder + MLM_HEAD))
    assert per_step(objective="all_tokens_mlm") == 2 * 3 * (
        encoder + MLM_HEAD + encoder + 2 * MLM_HEAD + TOKEN_HEAD
    )
    assert per_step(uniform_generator=True) == 2 * 3 * (encoder + TOKEN_HEAD)
    assert per_step(weight_sharing="all") == per_step()
    assert per_step(weight_sharing="gdes") == per_step()
    # Electric: two encoders (one per direction) and the cloze output at both
    # positions, over states of width 2h = 8: dense 2*8*4 + 4 = 68, GELU + LayerNorm
    # 52, output 80, softmax + target 70 -> 270 per position.
    assert per_step(objective="electric") == 2 * 3 * (encoder + TOKEN_HEAD + 2 * encoder + 2 * 270)
    # Two-stage: generator steps train the generator; then the frozen one runs forward once.
    two = dict(training="two_stage", weight_sharing="none", num_train_steps=10)
    first = flops.train_flops_per_step(tiny_run(**two), stage="generator")
    second = flops.train_flops_per_step(tiny_run(**two), stage="discriminator")
    assert first == 2 * 3 * (encoder + MLM_HEAD)
    assert second == 3 * (2 * (encoder + TOKEN_HEAD) + encoder + MLM_HEAD)
    assert flops.train_flops(tiny_run(**two)) == 5 * first + 5 * second
    assert flops.train_flops(tiny_run(**two), num_steps=3) == 3 * first


@pytest.mark.parametrize(
    "variant",
    [
        dict(objective="electra"),
        dict(objective="mlm"),
        dict(objective="electra_15"),
        dict(objective="replace_mlm"),
        dict(objective="all_tokens_mlm"),
        dict(objective="electric"),
        dict(weight_sharing="gdes"),
        dict(uniform_generator=True),
        dict(training="adversarial"),
        dict(training="two_stage", weight_sharing="none", generator_hidden_fraction=1.0),
        dict(weight_sharing="all", generator_hidden_fraction=1.0),
    ],
    ids=lambda v: "-".join(f"{k}={x}" for k, x in v.items()),
)
def test_every_variant_spends_the_budget(variant):
    budget = 1e15
    config = preset("tiny", **variant)
    steps = flops.steps_within_budget(config, budget)
    spent = dataclasses.replace(config, num_train_steps=steps)
    total = flops.train_flops(spent)
    # Within the budget, and one more step (the costlier kind) would exceed it.
    step_cost = max(flops.train_flops(spent, steps + 1) - total, flops.train_flops(spent, 1))
    assert total <= budget < total + 2 * step_cost
    assert 0.95 * budget < total


def test_equal_budget_gives_cheaper_variants_more_steps():
    budget = 1e15
    electra = flops.steps_within_budget(preset("tiny"), budget)
    mlm = flops.steps_within_budget(preset("tiny", objective="mlm"), budget)
    all_tokens = flops.steps_within_budget(preset("tiny", objective="all_tokens_mlm"), budget)
    cost = flops.train_flops_per_step
    assert mlm / electra == pytest.approx(
        cost(preset("tiny")) / cost(preset("tiny", objective="mlm")), rel=0.01
    )
    assert all_tokens < electra < mlm


def test_budget_steps_come_in_whole_groups_of_steps_per_execution():
    config = preset("tiny", steps_per_execution=8)
    per_step = flops.train_flops_per_step(config)
    assert flops.steps_within_budget(config, 100 * per_step) == 96
    assert flops.steps_within_budget(config, 7 * per_step) == 0
    two = preset(
        "tiny",
        steps_per_execution=4,
        training="two_stage",
        weight_sharing="none",
        generator_hidden_fraction=1.0,
    )
    steps = flops.steps_within_budget(two, 1e14)
    assert steps % 8 == 0  # two equal stages, each a whole number of groups
