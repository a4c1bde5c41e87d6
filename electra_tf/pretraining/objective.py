"""ELECTRA's replaced-token-detection objective as pure tensor functions.

Shapes: B = batch, L = sequence length, N = masked slots per sequence, V = vocab.
Every loss here is returned as a (sum, count) pair rather than a mean, so the
caller can divide by the count of the *global* batch under tf.distribute.
"""

from __future__ import annotations

import tensorflow as tf


# Vocabulary entries per block of the two-level searches over the vocabulary
# (the sampler's inverse CDF, the accuracy's argmax).
SAMPLING_BLOCK = 128
# XLA:CPU rewrites a reduction along an axis longer than 32 into a tree
# (reduce-window, then reduce) that is not fused with what it reduces, so the
# [M, V] scores it reads get written out once more first. Each block is
# therefore reduced as [4, 32]: under XLA this made the generator's output
# (loss, accuracy, sampling, gradients) about 1.5x faster.
_REDUCE_SPLIT = (SAMPLING_BLOCK // 32, 32)


def _vocab_blocks(scores):
    """[M, V] float32 -> [M, blocks, 4, 32], padded with float32's lowest value.

    The padding has probability 0 under any softmax and never wins a max.
    """
    vocab_size = scores.shape[-1] or tf.shape(scores)[-1]
    num_blocks = (vocab_size + SAMPLING_BLOCK - 1) // SAMPLING_BLOCK
    padded = tf.pad(scores, [[0, 0], [0, num_blocks * SAMPLING_BLOCK - vocab_size]],
                    constant_values=tf.float32.min)
    return tf.reshape(padded, [tf.shape(scores)[0], num_blocks, *_REDUCE_SPLIT])


def _softmax_blocks(scores):
    """Per-block softmax statistics of [M, V] float32 scores, without gradient.

    Returns:
        (blocks [M, K, 4, 32] from `_vocab_blocks`, block maxima [M, K], row
        maxima [M], block sums of exp(scores - row max) [M, K]). The loss and
        the sampler compute these the same way, so with temperature 1 XLA
        computes them once for both.
    """
    blocks = _vocab_blocks(tf.stop_gradient(scores))
    block_max = tf.reduce_max(blocks, axis=[2, 3])
    row_max = tf.reduce_max(block_max, axis=1)
    block_sums = tf.reduce_sum(tf.exp(blocks - row_max[:, None, None, None]), axis=[2, 3])
    return blocks, block_max, row_max, block_sums


def _block_rows(blocks, index):
    """blocks [M, K, 4, 32], index int32 [M] -> the chosen block of each row, [M, 128]."""
    flat = tf.reshape(blocks, [tf.shape(blocks)[0], -1, SAMPLING_BLOCK])
    return tf.gather(flat, index, batch_dims=1)


def sample_tokens(logits, uniforms, temperature: float = 1.0, disallow_ids=None):
    """Draws one token per slot from softmax(logits / temperature).

    Uses inverse-CDF sampling driven by one pre-drawn uniform per slot, which
    is exact categorical sampling (the same distribution as the original
    code's Gumbel-max trick) and makes the draw a pure function of the data:
    the same example gets the same sample on any number of replicas.

    The CDF is searched in two levels: the cumulative sums of blocks of
    `SAMPLING_BLOCK` probabilities locate the block, then the cumulative sum
    within that one block locates the token. Same result as one cumulative
    sum over the vocabulary, without its cost (a scan over V per slot is slow
    under XLA on CPU).

    Args:
        logits: float [B, N, V].
        uniforms: float32 [B, N] in [0, 1).
        temperature: softmax temperature (> 0).
        disallow_ids: optional int32 [B, N]; those ids are made (almost)
            impossible, as the original code's `disallow` (logit - 1000).

    Returns:
        int32 [B, N] sampled ids, with no gradient path to `logits`.
    """
    vocab_size = logits.shape[-1] or tf.shape(logits)[-1]
    scores = tf.reshape(tf.stop_gradient(tf.cast(logits, tf.float32)), [-1, vocab_size])
    if not (isinstance(temperature, (int, float)) and temperature == 1):
        scores /= temperature
    if disallow_ids is not None:
        scores -= 1000.0 * tf.one_hot(tf.reshape(disallow_ids, [-1]), vocab_size,
                                      dtype=tf.float32)
    blocks, _, row_max, block_sums = _softmax_blocks(scores)
    num_blocks = tf.shape(block_sums)[1]
    # Unnormalised CDF; the target is scaled by the total instead, so rounding
    # in the sums can never push u past the end.
    block_cdf = tf.cumsum(block_sums, axis=-1)  # [M, blocks]
    targets = tf.reshape(uniforms, [-1, 1]) * block_cdf[:, -1:]
    block = tf.minimum(tf.searchsorted(block_cdf, targets, side="right", out_type=tf.int32),
                       num_blocks - 1)  # [M, 1]
    before = tf.where(block > 0, tf.gather(block_cdf, tf.maximum(block - 1, 0), batch_dims=1),
                      0.0)
    chosen = _block_rows(blocks, block[:, 0])
    within_cdf = before + tf.cumsum(tf.exp(chosen - row_max[:, None]), axis=-1)
    offset = tf.minimum(tf.searchsorted(within_cdf, targets, side="right", out_type=tf.int32),
                        SAMPLING_BLOCK - 1)
    ids = tf.minimum(block * SAMPLING_BLOCK + offset, vocab_size - 1)
    return tf.reshape(ids, tf.shape(uniforms))


@tf.custom_gradient
def _softmax_cross_entropy(scores, labels, row_max, total):
    """-log softmax(scores)[label] per row.

    Args:
        scores: float32 [M, V].
        labels: int32 [M].
        row_max: [M], the row maxima of `scores` (from `_softmax_blocks`).
        total: [M], the row sums of exp(scores - row_max).

    Returns:
        float32 [M]. The gradient, softmax - one_hot(label), flows to `scores`
        only and is written as one expression, so XLA computes it in a single
        pass over [M, V].
    """
    nll = row_max + tf.math.log(total) - tf.gather(scores, labels, batch_dims=1)

    def grad(upstream):
        dscores = (tf.exp(scores - row_max[:, None]) * (upstream / total)[:, None]
                   - tf.one_hot(labels, tf.shape(scores)[1], dtype=scores.dtype)
                   * upstream[:, None])
        return dscores, None, None, None

    return nll, grad


def _first_argmax(blocks, block_max, row_max):
    """tf.argmax over the vocabulary (first index of the maximum) from the block maxima.

    Args: as returned by `_softmax_blocks`. Returns: int32 [M].
    """
    # The first block holding the row's maximum, then the first index within it.
    top_block = tf.argmax(tf.cast(tf.equal(block_max, row_max[:, None]), tf.int32), axis=1,
                          output_type=tf.int32)
    chosen = _block_rows(blocks, top_block)
    offset = tf.argmax(tf.cast(tf.equal(chosen, row_max[:, None]), tf.int32), axis=1,
                       output_type=tf.int32)
    return top_block * SAMPLING_BLOCK + offset


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
    batch_index = tf.broadcast_to(tf.range(tf.shape(input_ids)[0])[:, None],
                                  tf.shape(masked_lm_positions))
    indices = tf.stack([batch_index, masked_lm_positions], axis=-1)
    fake_ids = tf.tensor_scatter_nd_update(input_ids, indices, updates)
    labels = tf.cast(tf.not_equal(fake_ids, input_ids), tf.int32)
    return fake_ids, labels


def masked_lm_sums(logits, masked_lm_ids, masked_lm_weights):
    """Weighted MLM cross-entropy and argmax accuracy, as sums.

    Args:
        logits: float [B, N, V].
        masked_lm_ids: int32 [B, N], the original tokens.
        masked_lm_weights: float [B, N].

    Returns:
        dict of float32 scalars: `nll` (sum of w * NLL), `correct` (sum of w
        where argmax == target) and `count` (sum of w).
    """
    vocab_size = logits.shape[-1] or tf.shape(logits)[-1]
    scores = tf.reshape(tf.cast(logits, tf.float32), [-1, vocab_size])
    targets = tf.reshape(tf.cast(masked_lm_ids, tf.int32), [-1])
    weights = tf.reshape(tf.cast(masked_lm_weights, tf.float32), [-1])
    blocks, block_max, row_max, block_sums = _softmax_blocks(scores)
    nll = _softmax_cross_entropy(scores, targets, row_max, tf.reduce_sum(block_sums, axis=1))
    predicted = _first_argmax(blocks, block_max, row_max)
    correct = tf.cast(tf.equal(predicted, targets), tf.float32)
    return {"nll": tf.reduce_sum(weights * nll), "correct": tf.reduce_sum(weights * correct),
            "count": tf.reduce_sum(weights)}


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
    hits = tf.reduce_sum(tf.one_hot(masked_lm_positions, seq_len, dtype=tf.float32)
                         * used[:, :, None], axis=1)
    return tf.minimum(hits, 1.0)


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
    log_copy = tf.math.log_sigmoid(copy_logits)       # log D
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
    return {"nll": -tf.reduce_sum(mask * log_prob), "count": tf.reduce_sum(mask),
            "correct": tf.reduce_sum(mask * correct)}


def reinforce_sums(logits, sampled_ids, rewards, masked_lm_weights, temperature: float = 1.0,
                   disallow_ids=None):
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
    return {"loss": -tf.reduce_sum(weights * advantage * sample_log_prob),
            "reward": tf.reduce_sum(weights * rewards)}


# The original code divides by (count + 1e-6); so do we, so a batch with
# nothing masked gives a zero loss, not NaN.
DENOMINATOR_EPSILON = 1e-6


def safe_ratio(numerator, denominator):
    return numerator / (denominator + DENOMINATOR_EPSILON)
