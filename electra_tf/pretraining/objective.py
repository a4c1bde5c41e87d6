"""The pre-training objectives' losses and sampling as pure tensor functions.

The objective classes (`electra_tf.pretraining.objectives`) are built from
them. Shapes: B = batch, L = sequence length, N = masked slots per sequence,
V = vocab. Every loss here is returned as named sums (with their count)
rather than a mean, so the caller can divide by the count of the *global*
batch under tf.distribute. They are written in `keras.ops` and run on every
Keras backend.
"""

from __future__ import annotations

import math

from keras import ops

from electra_tf.modeling.kernels import KERNEL_SETS, resolve_kernels


def sample_tokens(
    logits, uniforms, temperature: float = 1.0, disallow_ids=None, kernels: str = "reference"
):
    """Draws one token per slot from softmax(logits / temperature).

    Uses inverse-CDF sampling driven by one pre-drawn uniform per slot, which
    is exact categorical sampling (the same distribution as the original
    code's Gumbel-max trick) and makes the draw a pure function of the data:
    the same example gets the same sample on any number of replicas.

    The CDF is searched by the kernel set `kernels` (`electra_tf.modeling.kernels`).

    Args:
        logits: float [B, N, V].
        uniforms: float32 [B, N] in [0, 1).
        temperature: softmax temperature (> 0).
        disallow_ids: optional int32 [B, N]; those ids are made (almost)
            impossible, as the original code's `disallow` (logit - 1000).
        kernels: the kernel set that searches the CDF (the generator's).

    Returns:
        int32 [B, N] sampled ids, with no gradient path to `logits`.
    """
    vocab_size = logits.shape[-1] or ops.shape(logits)[-1]
    scores = ops.reshape(ops.stop_gradient(ops.cast(logits, "float32")), (-1, vocab_size))
    if not (isinstance(temperature, (int, float)) and temperature == 1):
        scores = scores / temperature
    if disallow_ids is not None:
        scores = scores - 1000.0 * ops.one_hot(
            ops.reshape(disallow_ids, (-1,)), vocab_size, dtype="float32"
        )
    ids = KERNEL_SETS[resolve_kernels(kernels)].inverse_cdf_sample(
        scores, ops.reshape(ops.cast(uniforms, "float32"), (-1,))
    )
    return ops.reshape(ids, ops.shape(uniforms))


def replace_tokens(input_ids, masked_lm_positions, sampled_ids, masked_lm_weights):
    """Writes the generator's samples into the original sequence.

    Args:
        input_ids: int32 [B, L], the original tokens.
        masked_lm_positions: int32 [B, N].
        sampled_ids: int32 [B, N].
        masked_lm_weights: float [B, N]; slots with weight 0 are unused and
            leave the sequence unchanged.

    Returns:
        (fake_ids, labels): int32 [B, L] corrupted sequence and int32 [B, L]
        labels, 1 where the token was replaced by a *different* token. A
        sample equal to the original counts as real, as in the paper.
    """
    original_at_positions = ops.take_along_axis(input_ids, masked_lm_positions, axis=1)
    updates = ops.where(masked_lm_weights > 0, sampled_ids, original_at_positions)
    batch_index = ops.broadcast_to(
        ops.arange(ops.shape(input_ids)[0], dtype="int32")[:, None],
        ops.shape(masked_lm_positions),
    )
    indices = ops.stack([batch_index, ops.cast(masked_lm_positions, "int32")], axis=-1)
    # One (row, position) pair per slot: [B * N, 2] and [B * N].
    fake_ids = ops.scatter_update(
        input_ids, ops.reshape(indices, (-1, 2)), ops.reshape(updates, (-1,))
    )
    labels = ops.cast(ops.not_equal(fake_ids, input_ids), "int32")
    return fake_ids, labels


def masked_lm_sums(logits, masked_lm_ids, masked_lm_weights, kernels: str = "reference"):
    """Weighted MLM cross-entropy and argmax accuracy, as sums.

    Args:
        logits: float [B, N, V].
        masked_lm_ids: int32 [B, N], the original tokens.
        masked_lm_weights: float [B, N].
        kernels: the kernel set that computes the cross-entropy and argmax
            (`electra_tf.modeling.kernels`; the model's).

    Returns:
        dict of float32 scalars: `nll` (sum of w * NLL), `correct` (sum of w
        where argmax == target) and `count` (sum of w).
    """
    vocab_size = logits.shape[-1] or ops.shape(logits)[-1]
    scores = ops.reshape(ops.cast(logits, "float32"), (-1, vocab_size))
    targets = ops.reshape(ops.cast(masked_lm_ids, "int32"), (-1,))
    weights = ops.reshape(ops.cast(masked_lm_weights, "float32"), (-1,))
    nll, predicted = KERNEL_SETS[resolve_kernels(kernels)].cross_entropy_and_argmax(scores, targets)
    correct = ops.cast(ops.equal(predicted, targets), "float32")
    return {
        "nll": ops.sum(weights * nll),
        "correct": ops.sum(weights * correct),
        "count": ops.sum(weights),
    }


def discriminator_sums(logits, labels, input_mask):
    """Sigmoid cross-entropy over every non-pad token, and confusion counts, as sums.

    Args:
        logits: float [B, L].
        labels: int32 [B, L], 1 = replaced.
        input_mask: int [B, L], 1 = real token ([CLS]/[SEP] included).

    Returns:
        dict of float32 scalars: `loss`, `count` (non-pad tokens),
        `correct`, `true_positive`, `predicted_positive`, `actual_positive`.
    """
    logits = ops.cast(logits, "float32")
    mask = ops.cast(input_mask, "float32")
    targets = ops.cast(labels, "float32")
    loss = ops.binary_crossentropy(targets, logits, from_logits=True)
    predicted = ops.cast(logits > 0, "float32")
    return {
        "loss": ops.sum(mask * loss),
        "count": ops.sum(mask),
        "correct": ops.sum(mask * ops.cast(ops.equal(predicted, targets), "float32")),
        "true_positive": ops.sum(mask * predicted * targets),
        "predicted_positive": ops.sum(mask * predicted),
        "actual_positive": ops.sum(mask * targets),
    }


def positions_mask(masked_lm_positions, masked_lm_weights, seq_len):
    """Marks the masked positions of each sequence: float32 [B, L], 1 where a used slot points.

    Args:
        masked_lm_positions: int32 [B, N].
        masked_lm_weights: float [B, N]; slots with weight 0 mark nothing.
        seq_len: L.
    """
    used = ops.cast(masked_lm_weights > 0, "float32")
    hits = ops.sum(
        ops.one_hot(masked_lm_positions, seq_len, dtype="float32") * used[:, :, None], axis=1
    )
    return ops.minimum(hits, 1.0)


def cloze_targets(input_ids, input_mask):
    """The positions Electric's cloze model is trained on: real tokens but [CLS] and [SEP]s.

    The data builder lays out every example as `[CLS] A [SEP] (B [SEP])`, so
    a row's first token is its [CLS] and its last real token its [SEP]; their
    ids are read from there (the original code excludes [CLS], [SEP] and
    [MASK]; the unmasked input holds no [MASK]).

    Args:
        input_ids: int32 [B, L], the original tokens.
        input_mask: int [B, L], 1 = real token.

    Returns:
        float32 [B, L], 1 at cloze targets.
    """
    mask = ops.cast(input_mask, "int32")
    last = ops.maximum(ops.sum(mask, axis=1) - 1, 0)
    cls_id = input_ids[:, :1]
    sep_id = ops.take_along_axis(input_ids, last[:, None], axis=1)
    keep = ops.logical_and(
        ops.logical_and(mask > 0, ops.not_equal(input_ids, cls_id)),
        ops.not_equal(input_ids, sep_id),
    )
    return ops.cast(keep, "float32")


def electric_logits(energy, cloze_logits, input_ids, mask_rate: float):
    """Electric's noise-contrastive logit that each token came from the noise distribution.

    With noise q (the cloze model) and a fraction p = `mask_rate` of
    positions replaced by samples of q, a token x_t under an energy E(x_t)
    (the discriminator head's output) is noise with probability

        p q(x_t) / (p q(x_t) + (1 - p) exp(-E(x_t)))
          = sigmoid(E(x_t) + log q(x_t) + log(p / (1 - p))),

    as the original code computes it (`_get_discriminator_output`); q is
    held constant (no gradient into the cloze model through this term).

    Args:
        energy: float [B, L], the discriminator head's output.
        cloze_logits: float [B, L, V], the cloze model's logits at every
            position.
        input_ids: int32 [B, L], the sequence the discriminator saw.
        mask_rate: p.

    Returns:
        float32 [B, L].
    """
    log_q = ops.log_softmax(ops.stop_gradient(ops.cast(cloze_logits, "float32")), axis=-1)
    log_q = _at_ids(log_q, input_ids)
    return ops.cast(energy, "float32") + log_q + math.log(mask_rate / (1.0 - mask_rate))


def electric_score(energy, input_ids, input_mask, cls_id: int, sep_id: int):
    """Electric's pseudo-log-likelihood score of each sequence: -sum_t E(x_t).

    An Electric discriminator's head gives the energy E(x_t) of every token
    given the rest of the sequence (see `electric_logits`); -E(x_t) is the
    token's log-probability up to a constant of its context, so the sum over
    a sequence's tokens scores how well it reads (higher is better), from one
    forward pass, where a masked LM needs one pass per token. [CLS], [SEP]
    and padding are left out. Used to re-rank candidates (e.g. ASR or MT
    n-best lists).

    Args:
        energy: float [B, L], the discriminator head's output.
        input_ids: int32 [B, L].
        input_mask: int [B, L], 1 = real token.
        cls_id, sep_id: the vocabulary's [CLS] and [SEP] ids.

    Returns:
        float32 [B].
    """
    content = (
        ops.cast(input_mask, "float32")
        * ops.cast(ops.not_equal(input_ids, cls_id), "float32")
        * ops.cast(ops.not_equal(input_ids, sep_id), "float32")
    )
    return -ops.sum(ops.cast(energy, "float32") * content, axis=-1)


def all_tokens_sums(logits, copy_logits, input_ids, target_ids, input_mask):
    """All-Tokens MLM with the paper's copy mechanism, as sums over non-pad tokens.

    The model sees the corrupted sequence `input_ids` and predicts the
    original token at every position as a mixture:

        p(x_t) = D_t * [x_t == input_t] + (1 - D_t) * softmax(logits_t)[x_t],

    with D_t = sigmoid(copy_logits_t), the probability of copying the input.

    Args:
        logits: float [B, L, V].
        copy_logits: float [B, L].
        input_ids: int32 [B, L], the corrupted input the model saw.
        target_ids: int32 [B, L], the original tokens.
        input_mask: int [B, L], 1 = real token.

    Returns:
        dict of float32 scalars: `nll` (sum of -log p over non-pad tokens),
        `count` and `correct` (the mixture's most likely token is the original).
    """
    logits = ops.cast(logits, "float32")
    copy_logits = ops.cast(copy_logits, "float32")
    mask = ops.cast(input_mask, "float32")
    log_softmax = ops.log_softmax(logits, axis=-1)
    target_log_prob = _at_ids(log_softmax, target_ids)
    same = ops.equal(input_ids, target_ids)
    log_copy = ops.log_sigmoid(copy_logits)  # log D
    log_generate = ops.log_sigmoid(-copy_logits)  # log (1 - D)
    # log(D + (1 - D) q) where the input is the target, log((1 - D) q) where not.
    mixed = ops.logsumexp(ops.stack([log_copy, log_generate + target_log_prob]), axis=0)
    log_prob = ops.where(same, mixed, log_generate + target_log_prob)
    # The mixture's argmax: the input token (with its copy mass) or the best other token.
    probs = ops.exp(log_softmax)
    copy_prob = ops.sigmoid(copy_logits)
    input_prob = copy_prob + (1.0 - copy_prob) * _at_ids(probs, input_ids)
    vocab_size = probs.shape[-1] or ops.shape(probs)[-1]
    others = probs * (1.0 - ops.one_hot(input_ids, vocab_size, dtype="float32"))
    best_other = ops.cast(ops.argmax(others, axis=-1), "int32")
    best_other_prob = (1.0 - copy_prob) * ops.max(others, axis=-1)
    predicted = ops.where(input_prob >= best_other_prob, ops.cast(input_ids, "int32"), best_other)
    correct = ops.cast(ops.equal(predicted, ops.cast(target_ids, "int32")), "float32")
    return {
        "nll": -ops.sum(mask * log_prob),
        "count": ops.sum(mask),
        "correct": ops.sum(mask * correct),
    }


def reinforce_sums(
    logits, sampled_ids, rewards, masked_lm_weights, temperature: float = 1.0, disallow_ids=None
):
    """REINFORCE surrogate for a generator trained to fool the discriminator.

    Its gradient is -sum_t w_t (R_t - b_t) grad log p(sample_t): minimising it
    raises the probability of samples whose reward beats their baseline.
    b_t is the mean reward of the *other* masked slots of the same sequence
    (0 when there is none): it lowers the variance without biasing the
    estimate (b_t does not depend on sample t), and, being per sequence, it
    gives the same update however the batch is split over replicas or
    micro-batches. (The paper learns a baseline from the generator's states.)

    Args:
        logits: float [B, N, V], the generator's logits.
        sampled_ids: int32 [B, N], the samples drawn from them (`sample_tokens`).
        rewards: float [B, N], treated as constants.
        masked_lm_weights: float [B, N].
        temperature: the sampling temperature.
        disallow_ids: the ids `sample_tokens` made impossible, if any; the
            policy's log-probabilities are those of the distribution sampled.

    Returns:
        dict of float32 scalars: `loss` (the surrogate, a sum over slots) and
        `reward` (sum of w * R).
    """
    weights = ops.cast(masked_lm_weights, "float32")
    rewards = ops.stop_gradient(ops.cast(rewards, "float32"))
    logits = ops.cast(logits, "float32") / temperature
    if disallow_ids is not None:
        vocab_size = logits.shape[-1] or ops.shape(logits)[-1]
        logits = logits - 1000.0 * ops.one_hot(disallow_ids, vocab_size, dtype="float32")
    log_probs = ops.log_softmax(logits, axis=-1)
    sample_log_prob = _at_ids(log_probs, sampled_ids)
    # Leave-one-out mean over the sequence's other used slots.
    others = ops.sum(weights, axis=1, keepdims=True) - weights
    other_rewards = ops.sum(weights * rewards, axis=1, keepdims=True) - weights * rewards
    baseline = ops.divide_no_nan(other_rewards, others)
    advantage = ops.stop_gradient(rewards - baseline)
    return {
        "loss": -ops.sum(weights * advantage * sample_log_prob),
        "reward": ops.sum(weights * rewards),
    }


def at_positions(values, positions):
    """The rows of `values` at `positions`, sequence by sequence.

    Args:
        values: [B, L, ...].
        positions: int32 [B, N].

    Returns:
        [B, N, ...]: values[b, positions[b, n]].
    """
    shape = ops.shape(values)
    rows = ops.reshape(values, (-1,) + tuple(shape[2:]))  # [B * L, ...]
    offsets = ops.arange(shape[0], dtype="int32")[:, None] * shape[1]
    return ops.take(rows, ops.cast(positions, "int32") + offsets, axis=0)


def _at_ids(values, ids):
    """values[b, t, ids[b, t]]: float [B, T, V] read at int [B, T] ids -> [B, T]."""
    return ops.take_along_axis(values, ops.expand_dims(ids, -1), axis=-1)[..., 0]


# The original code divides by (count + 1e-6); so do we, so a batch with
# nothing masked gives a zero loss, not NaN.
DENOMINATOR_EPSILON = 1e-6


def safe_ratio(numerator, denominator):
    return numerator / (denominator + DENOMINATOR_EPSILON)


def loss_and_accuracy(sums: dict, name: str) -> dict:
    """`<name>_loss` (NLL per prediction) and `<name>_accuracy` of one term's sums.

    Args:
        sums: the term's `nll`, `correct` and `count` sums (e.g. `masked_lm_sums`).
        name: the metrics' prefix.
    """
    return {
        f"{name}_loss": safe_ratio(sums["nll"], sums["count"]),
        f"{name}_accuracy": safe_ratio(sums["correct"], sums["count"]),
    }
