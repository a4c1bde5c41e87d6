"""Dynamic masking of pre-training examples, following ELECTRA's rules.

Masking happens on the fly in the input pipeline, so every time an example is
seen it gets a fresh mask. All randomness is stateless (Philox keyed by an
explicit seed): the same example with the same seed always gets the same mask,
which lets a resumed or multi-replica run see exactly the data stream of an
uninterrupted single-device run.

Two entry points share one vectorised implementation:

* ``mask_example``: one example, one ``[2]`` stateless seed.
* ``mask_batch``: a batch whose rows carry their global example index. Row
  ``i`` depends only on ``(seed, example_index[i])`` and its own tokens, never
  on the other rows or on where the batch starts, yet the noise for the whole
  batch comes from a single Philox call when the indices are consecutive.
"""

from __future__ import annotations

import numbers

import tensorflow as tf

# Probability that a chosen position is shown to the generator as [MASK]; the
# rest keep their original token. ELECTRA uses no random-token replacement.
MASK_TOKEN_RATE = 0.85

_PHILOX = 1  # tf.random.Algorithm.PHILOX; fixed so CPU and GPU draw alike.
_PHILOX_OUTPUTS_PER_COUNTER = 4  # uint32 words per Philox-4x32 block


def _validate(mask_rate, max_predictions_per_seq, mask_token_rate, seq_len):
    if (
        isinstance(mask_rate, bool)
        or not isinstance(mask_rate, numbers.Real)
        or not 0.0 < mask_rate <= 1.0
    ):
        raise ValueError(f"mask_rate={mask_rate!r}: must be in (0, 1].")
    if (
        isinstance(max_predictions_per_seq, bool)
        or not isinstance(max_predictions_per_seq, int)
        or max_predictions_per_seq < 1
    ):
        raise ValueError(
            f"max_predictions_per_seq={max_predictions_per_seq!r}: must be a positive integer."
        )
    if not 0.0 <= mask_token_rate <= 1.0:
        raise ValueError(f"mask_token_rate={mask_token_rate!r}: must be in [0, 1].")
    if seq_len is None:
        raise ValueError("input_ids must have a static sequence length (last dimension).")
    if max_predictions_per_seq > seq_len:
        raise ValueError(
            f"max_predictions_per_seq={max_predictions_per_seq} is larger than the sequence "
            f"length {seq_len}; lower --max_predictions_per_seq."
        )


def _noise_width(seq_len, n):
    """Uniforms used per example: L position scores, N keep/mask draws, N sampling draws."""
    return seq_len + 2 * n


def _mask_rows(
    input_ids,
    input_mask,
    uniforms,
    *,
    mask_rate,
    n,
    pad_id,
    cls_id,
    sep_id,
    mask_id,
    mask_token_rate,
):
    """Vectorised masking of ``[B, L]`` rows given per-row uniforms ``[B, >= L + 2N]``."""
    seq_len = input_ids.shape[-1]
    scores_u = uniforms[:, :seq_len]
    replace_u = uniforms[:, seq_len : seq_len + n]
    sampling_uniforms = uniforms[:, seq_len + n : seq_len + 2 * n]

    is_real = tf.equal(input_mask, 1)
    is_candidate = (
        is_real
        & tf.not_equal(input_ids, pad_id)
        & tf.not_equal(input_ids, cls_id)
        & tf.not_equal(input_ids, sep_id)
        & tf.not_equal(input_ids, mask_id)
    )
    num_tokens = tf.reduce_sum(tf.cast(is_real, tf.int32), axis=1)
    num_candidates = tf.reduce_sum(tf.cast(is_candidate, tf.int32), axis=1)
    # float64 so the count matches Python/NumPy arithmetic: 0.15 * 190 is
    # 28.5 and rounds (half to even) to 28, while float32 gives 28.500002 -> 29.
    rounded = tf.cast(tf.round(tf.cast(num_tokens, tf.float64) * float(mask_rate)), tf.int32)
    count = tf.minimum(tf.maximum(1, tf.minimum(n, rounded)), num_candidates)  # [B]

    # Scores in [0, 1) for candidates and -1 elsewhere: since count <=
    # num_candidates, the top `count` indices are a uniformly random subset of
    # the candidates, drawn without replacement.
    scores = tf.where(is_candidate, scores_u, -1.0)
    _, top_positions = tf.math.top_k(scores, k=n, sorted=True)  # [B, N]

    used = tf.range(n)[None, :] < count[:, None]  # [B, N]
    positions = tf.where(used, top_positions, 0)
    ids = tf.where(used, tf.gather(input_ids, positions, batch_dims=1), 0)
    weights = tf.cast(used, tf.float32)

    replace = used & (replace_u < mask_token_rate)
    # Used positions within a row are distinct and unused slots add 0 at
    # index 0, so the summed scatter is exactly the replace indicator.
    rows = tf.broadcast_to(tf.range(tf.shape(positions)[0])[:, None], tf.shape(positions))
    replace_at = (
        tf.scatter_nd(
            tf.stack([rows, positions], axis=-1), tf.cast(replace, tf.int32), tf.shape(input_ids)
        )
        > 0
    )
    masked_input_ids = tf.where(replace_at, tf.cast(mask_id, input_ids.dtype), input_ids)
    return {
        "masked_input_ids": masked_input_ids,
        "masked_lm_positions": positions,
        "masked_lm_ids": ids,
        "masked_lm_weights": weights,
        "sampling_uniforms": sampling_uniforms,
    }


def mask_example(
    input_ids,
    input_mask,
    seed,
    *,
    mask_rate,
    max_predictions_per_seq,
    pad_id,
    cls_id,
    sep_id,
    mask_id,
    mask_token_rate=MASK_TOKEN_RATE,
):
    """Chooses and masks positions of one example (ELECTRA's ``mask()`` rules).

    Candidates are the real tokens (``input_mask == 1``, and not ``pad_id``)
    other than ``[CLS]``, ``[SEP]`` and ``[MASK]``. The number of predictions is
    ``max(1, min(N, round(mask_rate * num_tokens)))`` where ``num_tokens`` counts
    all real tokens including ``[CLS]``/``[SEP]`` and ``round`` is half-to-even
    (``tf.round``), then capped at the number of candidates, so a row without
    candidates masks nothing.

    Unlike the original, which draws ``N`` positions with replacement (duplicates
    silently lower the effective count), this draws ``count`` *distinct*
    candidate positions uniformly at random (top-k of uniform scores), so exactly
    ``count`` positions are predicted. Each chosen position becomes ``[MASK]``
    with probability ``mask_token_rate`` (0.85) and otherwise keeps its original
    token; there is no random-token replacement.

    Used slots come first, in random order; unused slots have position 0, id 0
    and weight 0.

    Args:
      input_ids: int32 ``[L]`` token ids (L static).
      input_mask: int32 ``[L]``, 1 for real tokens and 0 for padding.
      seed: int32/int64 ``[2]`` stateless seed. The output is a pure function of
        ``(input_ids, input_mask, seed)``.
      mask_rate: fraction of real tokens to predict, in (0, 1].
      max_predictions_per_seq: ``N``, the number of prediction slots (<= L).
      pad_id, cls_id, sep_id, mask_id: special-token ids of the vocabulary.
      mask_token_rate: probability that a chosen position is replaced by
        ``[MASK]`` (0.85 in ELECTRA).

    Returns:
      A dict of tensors:
        masked_input_ids: int32 ``[L]``, ``input_ids`` with chosen positions set
          to ``mask_id`` (or kept).
        masked_lm_positions: int32 ``[N]`` chosen positions, 0 in unused slots.
        masked_lm_ids: int32 ``[N]`` original ids at those positions, 0 in
          unused slots.
        masked_lm_weights: float32 ``[N]``, 1.0 for used slots, else 0.0.
        sampling_uniforms: float32 ``[N]`` U[0, 1) noise for sampling generator
          tokens (values in unused slots are never used).

    Raises:
      ValueError: on an out-of-range rate, a non-static ``L`` or ``N > L``.
    """
    input_ids = tf.cast(tf.convert_to_tensor(input_ids), tf.int32)
    input_mask = tf.cast(tf.convert_to_tensor(input_mask), tf.int32)
    seq_len = input_ids.shape[0] if input_ids.shape.rank == 1 else None
    _validate(mask_rate, max_predictions_per_seq, mask_token_rate, seq_len)
    n = max_predictions_per_seq
    uniforms = tf.random.stateless_uniform(
        [_noise_width(seq_len, n)], seed=tf.cast(seed, tf.int64), dtype=tf.float32, alg="philox"
    )
    out = _mask_rows(
        input_ids[None],
        input_mask[None],
        uniforms[None],
        mask_rate=mask_rate,
        n=n,
        pad_id=pad_id,
        cls_id=cls_id,
        sep_id=sep_id,
        mask_id=mask_id,
        mask_token_rate=mask_token_rate,
    )
    return {k: v[0] for k, v in out.items()}


def example_uniforms(seed, example_index, width):
    """Per-example U[0, 1) noise, a pure function of ``(seed, example_index)``.

    Example ``g`` owns Philox counter blocks ``[g * S, (g + 1) * S)`` under the
    key derived from ``seed`` (``S = ceil(width / 4)``). A run of consecutive
    indices therefore maps to one contiguous counter range and is drawn with a
    single stateless call; otherwise rows are drawn one by one. Both give
    identical rows because the stateless Philox kernel fills output word ``i``
    from counter block ``start + i // 4`` whatever the threading (that layout
    is what makes stateless ops reproducible); the unit tests compare a whole
    batch against rows drawn alone to guard it.

    Args:
      seed: int32/int64 ``[2]`` stateless seed.
      example_index: int ``[B]`` non-negative global example indices.
      width: uniforms per example.

    Returns:
      float32 ``[B, width]``.
    """
    # The seed is scrambled into a Philox key and counter; the counter's low
    # word is replaced by the example's block offset, its high word kept.
    key, counter = tf.raw_ops.StatelessRandomGetKeyCounter(seed=tf.cast(seed, tf.int64))
    blocks = -(-width // _PHILOX_OUTPUTS_PER_COUNTER)
    row_len = blocks * _PHILOX_OUTPUTS_PER_COUNTER
    index = tf.cast(example_index, tf.int64)
    batch = tf.shape(index)[0]

    def draw(first_index, num_rows):
        start = tf.bitcast(first_index * blocks, tf.uint64)
        u = tf.raw_ops.StatelessRandomUniformV2(
            shape=tf.reshape(num_rows * row_len, [1]),
            key=key,
            counter=tf.stack([start, counter[1]]),
            alg=_PHILOX,
            dtype=tf.float32,
        )
        return tf.reshape(u, [num_rows, row_len])

    def contiguous():
        return draw(index[0], batch)

    def row_by_row():
        return tf.map_fn(
            lambda g: draw(g, 1)[0], index, fn_output_signature=tf.TensorSpec([row_len], tf.float32)
        )

    # Empty and one-row batches count as consecutive (no gaps); empty ones
    # still take the row-by-row branch since index[0] does not exist.
    consecutive = tf.reduce_all(tf.equal(index[1:] - index[:-1], 1))
    u = tf.cond(tf.logical_and(batch > 0, consecutive), contiguous, row_by_row)
    u = u[:, :width]
    u.set_shape([index.shape[0] if index.shape.rank == 1 else None, width])
    return u


def mask_batch(
    input_ids,
    input_mask,
    example_index,
    seed,
    *,
    mask_rate,
    max_predictions_per_seq,
    pad_id,
    cls_id,
    sep_id,
    mask_id,
    mask_token_rate=MASK_TOKEN_RATE,
):
    """Masks a batch; row ``i`` depends only on its tokens and ``(seed, example_index[i])``.

    Same rules as ``mask_example`` (see there), vectorised over rows. Because a
    row's noise is tied to its global index rather than to its place in the
    batch, splitting or regrouping batches (e.g. per-replica splits, resuming
    with another batch size) never changes an example's mask.

    Args:
      input_ids: int32 ``[B, L]`` token ids (L static).
      input_mask: int32 ``[B, L]``.
      example_index: int ``[B]`` non-negative global index of each row.
      seed: int32/int64 ``[2]`` stateless seed.
      mask_rate, max_predictions_per_seq, pad_id, cls_id, sep_id, mask_id,
      mask_token_rate: as in ``mask_example``.

    Returns:
      The ``mask_example`` dict with a leading batch dimension ``B``.

    Raises:
      ValueError: on an out-of-range rate, a non-static ``L`` or ``N > L``.
    """
    input_ids = tf.cast(tf.convert_to_tensor(input_ids), tf.int32)
    input_mask = tf.cast(tf.convert_to_tensor(input_mask), tf.int32)
    seq_len = input_ids.shape[1] if input_ids.shape.rank == 2 else None
    _validate(mask_rate, max_predictions_per_seq, mask_token_rate, seq_len)
    n = max_predictions_per_seq
    uniforms = example_uniforms(seed, example_index, _noise_width(seq_len, n))
    return _mask_rows(
        input_ids,
        input_mask,
        uniforms,
        mask_rate=mask_rate,
        n=n,
        pad_id=pad_id,
        cls_id=cls_id,
        sep_id=sep_id,
        mask_id=mask_id,
        mask_token_rate=mask_token_rate,
    )
