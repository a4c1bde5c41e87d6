"""The pre-training objectives' losses and sampling as pure tensor functions.

The objective classes (`electra_tf.pretraining.objectives`) are built from
them. Shapes: B = batch, L = sequence length, N = masked slots per sequence,
V = vocab. Every loss here is returned as named sums (with their count)
rather than a mean, so the caller can divide by the count of the *global*
batch under tf.distribute.
"""

from __future__ import annotations

import math

import tensorflow as tf

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
    vocab_size = logits.shape[-1] or tf.shape(logits)[-1]
    scores = tf.reshape(tf.stop_gradient(tf.cast(logits, tf.float32)), [-1, vocab_size])
    if not (isinstance(temperature, (int, float)) and temperature == 1):
        scores /= temperature
    if disallow_ids is not None:
        scores -= 1000.0 * tf.one_hot(tf.reshape(disallow_ids, [-1]), vocab_size, dtype=tf.float32)
    ids = KERNEL_SETS[resolve_kernels(kernels)].inverse_cdf_sample(
        scores, tf.reshape(uniforms, [-1])
    )
    return tf.reshape(ids, tf.shape(uniforms))


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
    original_at_positions = tf.gather(input_ids, masked_lm_positions, batch_dims=1)
    updates = tf.where(masked_lm_weights > 0, sampled_ids, original_at_positions)
    batch_index = tf.broadcast_to(
        tf.range(tf.shape(input_ids)[0])[:, None], tf.shape(masked_lm_positions)
    )
    indices = tf.stack([batch_index, masked_lm_positions], axis=-1)
    fake_ids = tf.tensor_scatter_nd_update(input_ids, indices, updates)
    labels = tf.cast(tf.not_equal(fake_ids, input_ids), tf.int32)
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
    vocab_size = logits.shape[-1] or tf.shape(logits)[-1]
    scores = tf.reshape(tf.cast(logits, tf.float32), [-1, vocab_size])
    targets = tf.reshape(tf.cast(masked_lm_ids, tf.int32), [-1])
    weights = tf.reshape(tf.cast(masked_lm_weights, tf.float32), [-1])
    nll, predicted = KERNEL_SETS[resolve_kernels(kernels)].cross_entropy_and_argmax(scores, targets)
    correct = tf.cast(tf.equal(predicted, targets), tf.float32)
    return {
        "nll": tf.reduce_sum(weights * nll),
        "correct": tf.reduce_sum(weights * correct),
        "count": tf.reduce_sum(weights),
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
    logits = tf.cast(logits, tf.float32)
    mask = tf.cast(input_mask, tf.float32)
    targets = tf.cast(labels, tf.float32)
    loss = tf.nn.sigmoid_cross_entropy_with_logits(labels=targets, logits=logits)
    predicted = tf.cast(logits > 0, tf.float32)
    return {
        "loss": tf.reduce_sum(mask * loss),
        "count": tf.reduce_sum(mask),
        "correct": tf.reduce_sum(mask * tf.cast(tf.equal(predicted, targets), tf.float32)),
        "true_positive": tf.reduce_sum(mask * predicted * targets),
        "predicted_positive": tf.reduce_sum(mask * predicted),
        "actual_positive": tf.reduce_sum(mask * targets),
    }


def positions_mask(masked_lm_positions, masked_lm_weights, seq_len):
    """Marks the masked positions of each sequence: float32 [B, L], 1 where a used slot points.

    Args:
        masked_lm_positions: int32 [B, N].
        masked_lm_weights: float [B, N]; slots with weight 0 mark nothing.
        seq_len: L.
    """
    used = tf.cast(masked_lm_weights > 0, tf.float32)
    hits = tf.reduce_sum(
        tf.one_hot(masked_lm_positions, seq_len, dtype=tf.float32) * used[:, :, None], axis=1
    )
    return tf.minimum(hits, 1.0)


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
    mask = tf.cast(input_mask, tf.int32)
    last = tf.maximum(tf.reduce_sum(mask, axis=1) - 1, 0)
    cls_id = input_ids[:, :1]
    sep_id = tf.gather(input_ids, last, batch_dims=1)[:, None]
    keep = (mask > 0) & tf.not_equal(input_ids, cls_id) & tf.not_equal(input_ids, sep_id)
    return tf.cast(keep, tf.float32)


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
    log_q = tf.nn.log_softmax(tf.stop_gradient(tf.cast(cloze_logits, tf.float32)), axis=-1)
    log_q = tf.gather(log_q, input_ids, batch_dims=2)
    return tf.cast(energy, tf.float32) + log_q + math.log(mask_rate / (1.0 - mask_rate))


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
        tf.cast(input_mask, tf.float32)
        * tf.cast(tf.not_equal(input_ids, cls_id), tf.float32)
        * tf.cast(tf.not_equal(input_ids, sep_id), tf.float32)
    )
    return -tf.reduce_sum(tf.cast(energy, tf.float32) * content, axis=-1)


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
    logits = tf.cast(logits, tf.float32)
    copy_logits = tf.cast(copy_logits, tf.float32)
    mask = tf.cast(input_mask, tf.float32)
    log_softmax = tf.nn.log_softmax(logits, axis=-1)
    target_log_prob = tf.gather(log_softmax, target_ids, batch_dims=2)
    same = tf.equal(input_ids, target_ids)
    log_copy = tf.math.log_sigmoid(copy_logits)  # log D
    log_generate = tf.math.log_sigmoid(-copy_logits)  # log (1 - D)
    # log(D + (1 - D) q) where the input is the target, log((1 - D) q) where not.
    mixed = tf.reduce_logsumexp(tf.stack([log_copy, log_generate + target_log_prob]), axis=0)
    log_prob = tf.where(same, mixed, log_generate + target_log_prob)
    # The mixture's argmax: the input token (with its copy mass) or the best other token.
    probs = tf.exp(log_softmax)
    copy_prob = tf.sigmoid(copy_logits)
    input_prob = copy_prob + (1.0 - copy_prob) * tf.gather(probs, input_ids, batch_dims=2)
    others = probs * (1.0 - tf.one_hot(input_ids, tf.shape(probs)[-1], dtype=tf.float32))
    best_other = tf.argmax(others, axis=-1, output_type=tf.int32)
    best_other_prob = (1.0 - copy_prob) * tf.reduce_max(others, axis=-1)
    predicted = tf.where(input_prob >= best_other_prob, input_ids, best_other)
    correct = tf.cast(tf.equal(predicted, target_ids), tf.float32)
    return {
        "nll": -tf.reduce_sum(mask * log_prob),
        "count": tf.reduce_sum(mask),
        "correct": tf.reduce_sum(mask * correct),
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
    weights = tf.cast(masked_lm_weights, tf.float32)
    rewards = tf.stop_gradient(tf.cast(rewards, tf.float32))
    logits = tf.cast(logits, tf.float32) / temperature
    if disallow_ids is not None:
        logits -= 1000.0 * tf.one_hot(disallow_ids, tf.shape(logits)[-1], dtype=tf.float32)
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    sample_log_prob = tf.gather(log_probs, sampled_ids, batch_dims=2)
    # Leave-one-out mean over the sequence's other used slots.
    others = tf.reduce_sum(weights, axis=1, keepdims=True) - weights
    other_rewards = tf.reduce_sum(weights * rewards, axis=1, keepdims=True) - weights * rewards
    baseline = tf.math.divide_no_nan(other_rewards, others)
    advantage = tf.stop_gradient(rewards - baseline)
    return {
        "loss": -tf.reduce_sum(weights * advantage * sample_log_prob),
        "reward": tf.reduce_sum(weights * rewards),
    }


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
