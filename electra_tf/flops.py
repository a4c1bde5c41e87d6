"""Training and inference FLOPs, counted the way the ELECTRA paper counts them.

`python -m electra_tf.commands.flops` prints a table for every preset.

The paper (Clark et al., 2020, Tables 1-2) compares models by the floating
point operations their pre-training and inference take. This module applies
the same accounting to our configs, so our numbers can be set beside the
published ones. Nothing here needs TensorFlow: it is arithmetic on a config.

Accounting rules
----------------
* An operation is a mathematical operation: a multiply and an add count
  as two, so a dense layer from m to n features costs 2*m*n per token, and
  a bias add costs n.
* Element-wise work has fixed per-element costs: dropout 4, LayerNorm 5,
  GELU 8, softmax 5 (`DROPOUT_FLOPS` ... below). They only touch O(hidden)
  activations, so the totals hardly depend on them.
* Embedding lookups are counted as products with one-hot vectors (2*E*V per
  token for the word table, 2*E per row for position and segment tables),
  which is how accelerators usually perform them. `sparse_lookup=True`
  drops those products.
* Training costs `TRAIN_FORWARD_MULTIPLIER` = 2 forward passes: the paper
  treats the backward pass as costing the same as the forward pass. With
  this factor our counts land on the paper's totals (6.4e19 for
  ELECTRA-Base and BERT-Base, 7.1e20 for ELECTRA-400K, ...). The textbook
  3x (backward = 2 x forward) would inflate every figure by 1.5 and match
  none of them, so it is not used for them; `executed_train_flops_per_step`
  applies it, with sparse lookups, to count what a step really computes.
* Only the masked positions go through a masked-LM output layer (the
  generator's, or BERT's). The paper's counts used a fixed 20/128 = 0.15625
  of the tokens; by default we use the positions our models really score,
  `max_predictions_per_seq / max_seq_length` (19/128 for Small, 79/512 for
  Base, 130/512 for Large). `output_fraction=PAPER_OUTPUT_FRACTION` gives
  the paper's choice. Either way our totals are within 1% of the figures
  the paper's counting script prints; with 20/128 they agree with its three
  printed digits to within 0.1%.
* The replaced-token-detection head (dense H->H, GELU, one logit) runs on
  every token. The inference figure is one forward pass of the
  discriminator with that head, which is what the paper reports as the
  cost of classifying one example.
* ELECTRA's step = discriminator (encoder + token head) + generator
  (its own encoder + masked-LM head). Both read the one shared embedding
  table of width `embedding_size`, and each projects it to its own hidden
  size when the two differ. Each model embeds its own input, so the lookup
  is counted twice.
* The paper's other objectives are counted the same way: `mlm` is the
  full-size model with a masked-LM output and no generator; `replace_mlm`
  adds the generator to that; `electra_15` costs what `electra` costs;
  `all_tokens_mlm` scores the vocabulary at every position and adds the
  copy probability (a token head). Electric (`electric`) runs two
  generator-sized encoders (one per reading direction) and scores the
  vocabulary at every position of their concatenated states;
  gradient-disentangled sharing (`--weight_sharing=gdes`) costs what
  `electra` costs (one addition per table entry is not counted). A uniform generator costs nothing, a
  generator tied to the discriminator (`weight_sharing=all`) costs a
  full-size encoder. In the second stage of two-stage training the frozen
  generator only runs forward and counts once.

The one place we knowingly differ from the paper's own counting script: its
attention-output LayerNorm is charged 5 FLOPs per token instead of 5 per
element. We charge 5 per element everywhere; that moves totals by < 0.1%.
The attention-mask addition and the output bias of the masked-LM layer are
not counted, as in the paper.

ELECTRA-Small is the one published total this accounting does not reach:
Table 1 says 1.4e18 for 1M steps, while the paper's own script (and this
module, for `preset("small")` with its 64-wide generator) gives 1.29e18,
8% less. (A half-width generator would give 1.43e18, but nothing confirms
that the table was computed that way.) The other published totals are met
to within 1-2%.
"""

from __future__ import annotations

from typing import Optional

from electra_tf.config import OBJECTIVES, ModelConfig, PretrainingConfig

DROPOUT_FLOPS = 4
LAYER_NORM_FLOPS = 5
GELU_FLOPS = 8
SOFTMAX_FLOPS = 5
TRAIN_FORWARD_MULTIPLIER = 2
# What a training step really executes: a product's gradients with respect to
# its input and to its weights each cost as much as the product itself.
EXECUTED_TRAIN_FORWARD_MULTIPLIER = 3
PAPER_OUTPUT_FRACTION = 20 / 128
# Parts of a two-stage run (`--training=two_stage`).
STAGES = ("generator", "discriminator")


def dense_flops(fan_in: int, fan_out: int, bias: bool = True) -> float:
    """One token through a dense layer: the matmul plus the optional bias add."""
    return 2 * fan_in * fan_out + (fan_out if bias else 0)


def transformer_layer_flops(hidden: int, intermediate: int, heads: int, seq_len: int) -> float:
    """One post-LN transformer layer applied to one sequence of `seq_len` tokens."""
    h, s = hidden, seq_len
    attention = (
        3 * dense_flops(h, h)  # query, key and value projections
        + 2 * h * s  # q.k scores against every position
        + heads * s * (1 + SOFTMAX_FLOPS + DROPOUT_FLOPS)  # scale, softmax, dropout of probs
        + 2 * h * s  # probabilities times values
        + dense_flops(h, h)  # output projection
        + h * (DROPOUT_FLOPS + 1 + LAYER_NORM_FLOPS)  # dropout, residual add, LayerNorm
    )
    feed_forward = (
        dense_flops(h, intermediate)
        + GELU_FLOPS * intermediate
        + dense_flops(intermediate, h)
        + h * (DROPOUT_FLOPS + 1 + LAYER_NORM_FLOPS)
    )
    return float(s * (attention + feed_forward))


def input_embedding_flops(
    hidden: int,
    embedding_size: int,
    vocab_size: int,
    seq_len: int,
    type_vocab_size: int = 2,
    sparse_lookup: bool = False,
) -> float:
    """Embedding one sequence: lookups, sums, LayerNorm, dropout, projection to `hidden`."""
    e = embedding_size
    per_token = 2 * e + e * (LAYER_NORM_FLOPS + DROPOUT_FLOPS)  # two adds, LayerNorm, dropout
    if not sparse_lookup:
        # One-hot products: a row of the word table, of the segment table and
        # of the position table (whose used part has seq_len rows).
        per_token += 2 * e * vocab_size + 2 * e * (seq_len + type_vocab_size)
    if e != hidden:
        per_token += dense_flops(e, hidden)
    return float(seq_len * per_token)


def mlm_head_flops(
    hidden: int, embedding_size: int, vocab_size: int, num_predictions: float
) -> float:
    """The masked-LM output for `num_predictions` positions of one sequence.

    Dense H->E with GELU and LayerNorm, the tied E->V output product, the
    softmax over the vocabulary and reading off the target's log-probability.
    """
    e, v = embedding_size, vocab_size
    per_position = (
        dense_flops(hidden, e)
        + e * (GELU_FLOPS + LAYER_NORM_FLOPS)
        + 2 * e * v
        + v * (SOFTMAX_FLOPS + 2)
    )
    return float(num_predictions * per_position)


def token_classifier_flops(hidden: int, seq_len: int) -> float:
    """Dense H->H with GELU, then one logit, for every token of one sequence."""
    return float(seq_len * (dense_flops(hidden, hidden) + GELU_FLOPS * hidden + 2 * hidden))


def encoder_forward_flops(
    hidden: int,
    layers: int,
    intermediate: int,
    heads: int,
    seq_len: int,
    embedding_size: int,
    vocab_size: int,
    type_vocab_size: int = 2,
    sparse_lookup: bool = False,
) -> float:
    """One sequence through embeddings (+ projection) and `layers` transformer layers."""
    return layers * transformer_layer_flops(
        hidden, intermediate, heads, seq_len
    ) + input_embedding_flops(
        hidden, embedding_size, vocab_size, seq_len, type_vocab_size, sparse_lookup
    )


def _encoder_flops(model: ModelConfig, seq_len: int, sparse_lookup: bool) -> float:
    return encoder_forward_flops(
        model.hidden_size,
        model.num_layers,
        model.resolved_intermediate_size,
        model.resolved_num_heads,
        seq_len,
        model.embedding_size,
        model.vocab_size,
        model.type_vocab_size,
        sparse_lookup,
    )


def _generator_flops(config: PretrainingConfig, predictions: float, sparse_lookup: bool) -> float:
    """The generator's forward pass with its masked-LM output (0 for a uniform generator)."""
    if config.uniform_generator:
        return 0.0
    model = config.model
    # Tied to the discriminator (--weight_sharing=all), the generator is the
    # full-size encoder; otherwise a narrower one reading the same-width embeddings.
    generator = model if config.weight_sharing == "all" else model.generator_config()
    return _encoder_flops(generator, config.max_seq_length, sparse_lookup) + mlm_head_flops(
        generator.hidden_size, generator.embedding_size, generator.vocab_size, predictions
    )


def _cloze_generator_flops(config: PretrainingConfig, sparse_lookup: bool) -> float:
    """Electric's two-tower cloze generator: two generator-sized encoders (each embedding
    its input) and the masked-LM style output over their concatenated states at every
    position (which also gives the noise log-probabilities the discriminator adds)."""
    generator, s = config.model.generator_config(), config.max_seq_length
    return 2 * _encoder_flops(generator, s, sparse_lookup) + mlm_head_flops(
        2 * generator.hidden_size, generator.embedding_size, generator.vocab_size, s
    )


def _main_model_flops(
    config: PretrainingConfig, objective: str, predictions: float, sparse_lookup: bool
) -> float:
    """The full-size model's forward pass with the head its objective uses."""
    model, s = config.model, config.max_seq_length
    encoder = _encoder_flops(model, s, sparse_lookup)
    if objective in ("electra", "electra_15", "electric"):
        return encoder + token_classifier_flops(model.hidden_size, s)
    if objective in ("mlm", "replace_mlm"):
        return encoder + mlm_head_flops(
            model.hidden_size, model.embedding_size, model.vocab_size, predictions
        )
    # all_tokens_mlm: the softmax output at every position, plus the copy probability.
    return (
        encoder
        + mlm_head_flops(model.hidden_size, model.embedding_size, model.vocab_size, s)
        + token_classifier_flops(model.hidden_size, s)
    )


def forward_flops_per_sequence(
    config: PretrainingConfig,
    objective: Optional[str] = None,
    output_fraction: Optional[float] = None,
    sparse_lookup: bool = False,
) -> float:
    """Forward FLOPs of one pre-training example (see `train_flops_per_step`)."""
    objective = objective or config.objective
    if objective not in OBJECTIVES:
        raise ValueError(f"objective={objective!r}: choose one of {', '.join(OBJECTIVES)}.")
    predictions = _predictions(config, output_fraction)
    main = _main_model_flops(config, objective, predictions, sparse_lookup)
    if objective == "mlm":  # the BERT baseline: no generator
        return main
    if objective == "electric":
        return main + _cloze_generator_flops(config, sparse_lookup)
    return main + _generator_flops(config, predictions, sparse_lookup)


def _predictions(config: PretrainingConfig, output_fraction: Optional[float]) -> float:
    if output_fraction is None:
        return float(config.resolved_max_predictions_per_seq)
    return output_fraction * config.max_seq_length


def train_flops_per_step(
    config: PretrainingConfig,
    objective: Optional[str] = None,
    output_fraction: Optional[float] = None,
    sparse_lookup: bool = False,
    stage: Optional[str] = None,
) -> float:
    """FLOPs of one optimisation step over `config.train_batch_size` sequences.

    Args:
        config: the run; its model, sequence length, batch size, masking and
            variant (objective, generator, weight sharing) are used.
        objective: overrides `config.objective` ("electra": generator +
            discriminator; "mlm": the BERT baseline, the model itself trained
            as a masked LM; see `electra_tf.config.OBJECTIVES`).
        output_fraction: share of the tokens scored by the masked-LM output.
            None uses max_predictions_per_seq / max_seq_length; the paper used
            `PAPER_OUTPUT_FRACTION`.
        sparse_lookup: count embedding lookups as gathers (free) instead of
            one-hot products.
        stage: for two-stage training, "generator" (only the generator is
            trained) or "discriminator" (the frozen generator only runs
            forward, so it counts once, not twice). None: a joint step.
    """
    if stage is None:
        return (
            TRAIN_FORWARD_MULTIPLIER
            * config.train_batch_size
            * forward_flops_per_sequence(config, objective, output_fraction, sparse_lookup)
        )
    if stage not in STAGES:
        raise ValueError(f"stage={stage!r}: choose one of {', '.join(STAGES)}.")
    predictions = _predictions(config, output_fraction)
    generator = _generator_flops(config, predictions, sparse_lookup)
    if stage == "generator":
        return TRAIN_FORWARD_MULTIPLIER * config.train_batch_size * generator
    discriminator = _main_model_flops(config, "electra", predictions, sparse_lookup)
    return config.train_batch_size * (TRAIN_FORWARD_MULTIPLIER * discriminator + generator)


def executed_train_flops_per_step(config: PretrainingConfig) -> float:
    """FLOPs one joint training step really executes, by the textbook count.

    The paper's accounting (`train_flops_per_step`) charges the backward
    pass as one more forward pass and embedding lookups as one-hot products.
    Here the backward pass costs two forward passes and lookups are the
    gathers they are (free), which is what an implementation computes. For
    ELECTRA-Small the two counts differ by 10% (3.2e11 vs 2.9e11 FLOPs per
    step of 32 x 128 tokens), so the benchmark reports both.
    """
    return (
        EXECUTED_TRAIN_FORWARD_MULTIPLIER
        / TRAIN_FORWARD_MULTIPLIER
        * train_flops_per_step(config, sparse_lookup=True)
    )


def train_flops(
    config: PretrainingConfig,
    num_steps: Optional[int] = None,
    objective: Optional[str] = None,
    output_fraction: Optional[float] = None,
    sparse_lookup: bool = False,
) -> float:
    """Total pre-training FLOPs: `num_steps` (default `config.num_train_steps`) steps.

    A two-stage run counts its generator steps and its discriminator steps
    each at their own cost.
    """
    steps = config.num_train_steps if num_steps is None else num_steps
    if config.training != "two_stage" or objective not in (None, config.objective):
        return steps * train_flops_per_step(config, objective, output_fraction, sparse_lookup)
    first = min(steps, config.resolved_two_stage_generator_steps)
    return first * train_flops_per_step(
        config, None, output_fraction, sparse_lookup, stage="generator"
    ) + (steps - first) * train_flops_per_step(
        config, None, output_fraction, sparse_lookup, stage="discriminator"
    )


def steps_within_budget(config: PretrainingConfig, budget: float) -> int:
    """The number of training steps whose FLOPs (see `train_flops`) fit in `budget`.

    Rounded down to a multiple of `steps_per_execution` (steps run in groups
    of that size). A two-stage run without `two_stage_generator_steps`
    splits the budget into two stages of equal step counts (the paper's n
    generator steps, then n discriminator steps).
    """
    group = config.steps_per_execution
    whole = lambda steps: int(steps) // group * group  # noqa: E731
    if config.training != "two_stage":
        return whole(budget // train_flops_per_step(config))
    first_cost = train_flops_per_step(config, stage="generator")
    second_cost = train_flops_per_step(config, stage="discriminator")
    if config.two_stage_generator_steps is None:
        return 2 * whole(budget // (first_cost + second_cost))
    first = config.two_stage_generator_steps
    if first * first_cost > budget:
        return whole(budget // first_cost)
    return first + whole((budget - first * first_cost) // second_cost)


def inference_flops(model_config: ModelConfig, seq_len: int, sparse_lookup: bool = False) -> float:
    """FLOPs to classify one example of `seq_len` tokens: one forward pass with the token head."""
    return _encoder_flops(model_config, seq_len, sparse_lookup) + token_classifier_flops(
        model_config.hidden_size, seq_len
    )


def count_parameters(model_config: ModelConfig) -> int:
    """Weights of the encoder kept after pre-training (embeddings, projection, layers).

    No pre-training heads and no generator: this is the "Params" column of
    the paper (14M Small, 110M Base, 335M Large).
    """
    h, e = model_config.hidden_size, model_config.embedding_size
    i = model_config.resolved_intermediate_size
    embeddings = (
        model_config.vocab_size
        + model_config.max_position_embeddings
        + model_config.type_vocab_size
    ) * e + 2 * e
    projection = (e * h + h) if e != h else 0
    layer = (
        3 * (h * h + h)
        + (h * h + h)  # attention projections
        + (h * i + i)
        + (i * h + h)  # feed-forward
        + 2 * 2 * h
    )  # two LayerNorms
    return embeddings + projection + model_config.num_layers * layer
