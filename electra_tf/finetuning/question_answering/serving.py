"""Serving signatures of a fine-tuned SQuAD model (`finetuning.qa_model.ElectraQA`).

`serving_default` (raw text; B may be 0, answered with empty outputs):
    inputs:  `question` string [B], `context` string [B]
    outputs: `answer_text` string [B]: the best span, a byte-exact substring
                 of `context` ("" when there is no valid span);
             `start_char`, `end_char` int32 [B]: its span [start, end) in
                 Unicode code points of `context` (as SQuAD's `answer_start`);
             `start_byte`, `end_byte` int32 [B]: the same span in bytes of the
                 UTF-8 `context` (-1 for all four when there is no valid span);
             `score` float32 [B]: start log-prob + end log-prob of the span, the
                 score of the project's decoding (`finetuning.squad_decoding`);
                 `NO_SPAN_SCORE` when there is no valid span;
    SQuAD 2.0 models also:
             `no_answer_score` float32 [B]: the answerability logit (the null
                 odds of `squad_decoding`; higher = more likely unanswerable;
                 for the `transformers` head, the null span's score minus the
                 best span's, transformers' `null_score_diff`);
             `has_answer` bool [B]: `no_answer_score <= null_score_threshold`,
                 the threshold the model was fine-tuned with. `answer_text`
                 still holds the best span when it is False.

`token_ids` (for clients that tokenize themselves, `[CLS] question [SEP]
context [SEP]`, context in segment 1):
    inputs:  `input_ids`, `input_mask`, `segment_ids` int32 [B, L]
    outputs: `start_logits` float32 [B, L] (-1000 added outside the context
             and [CLS]); the beam of the model's prediction mode, K =
             min(beam_size, L): `start_top_index` int32 [B, K],
             `start_top_log_probs` float32 [B, K], `end_top_index` int32
             [B, K, K], `end_top_log_probs` float32 [B, K, K]; `end_logits`:
             float32 [B, K, L], the end logits given each of those starts
             (the `electra` head), or [B, L], masked as `start_logits` (the
             `transformers` head, whose end does not depend on the start;
             `serving_config.json` names the head); SQuAD 2.0 models also
             `answerable_logit` float32 [B] (the `transformers` head: the
             null span's score minus the best span's).

Only the first window of a context is searched: the question is cut to
`max_query_length` pieces and the context to the
`max_seq_length - len(question) - 3` pieces that fit after it, where
fine-tuning would slide further windows over the rest (`doc_stride`). A
context that fits gets the answer the project's Python decoding gives.

Candidate spans follow `squad_decoding.decode`: both ends are context
pieces, end >= start, at most `max_answer_length` pieces; the best start
log-prob + end log-prob wins. A piece's span in the original context comes
from the byte offsets of the tokenizer: the context is split into clusters
(a character and the combining marks or Hangul jamo after it), each
cluster is normalised on its own and the normalised clusters are joined
and cut into word pieces with offsets, so every piece maps back to the
clusters it came from, as in `squad_features.OffsetTokenizer`. Invalid
UTF-8 bytes are dropped by the tokenizer (never an error) but stay in the
context the answer is cut from.
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_text as tf_text

from electra_tf import text_packing as text_ops
from electra_tf.finetuning.kind.signatures import IDS_SIGNATURE, TEXT_SIGNATURE, token_ids_function
from electra_tf.finetuning.question_answering.model import answer_mask

# One cluster per match: any character plus the combining marks and Hangul
# conjoining vowels/finals that follow it (`squad_features.split_clusters`).
CLUSTER_PATTERN = r"(?s).[\p{M}\x{1160}-\x{11FF}\x{D7B0}-\x{D7FF}]*"
# `score` of a request with no valid span (e.g. an empty context); valid
# scores are sums of two log-probs, far above it.
NO_SPAN_SCORE = -1e9


def _row_cumsum(lengths: tf.RaggedTensor) -> tf.RaggedTensor:
    """Inclusive cumulative sum along each row of an int64 ragged [B, (n)]."""
    flat = tf.cumsum(lengths.flat_values)
    totals = tf.concat([tf.zeros([1], flat.dtype), flat], 0)
    row_start = tf.gather(totals, lengths.row_splits[:-1])
    return lengths.with_flat_values(flat - tf.gather(row_start, lengths.value_rowids()))


def context_pieces(
    tokenizer, contexts: tf.Tensor
) -> tuple[tf.RaggedTensor, tf.RaggedTensor, tf.RaggedTensor]:
    """Word pieces of each context with their byte spans in the original context.

    Args:
        tokenizer: the `WordPieceTokenizer`.
        contexts: string [B].

    Returns:
        (ids int32, begin int64, end int64), ragged [B, (T)]: piece i came
        from bytes [begin, end) of its context.
    """
    clusters, cluster_begin, cluster_end = tf_text.regex_split_with_offsets(
        contexts, CLUSTER_PATTERN, CLUSTER_PATTERN
    )
    normalized = clusters.with_flat_values(tokenizer.normalize(clusters.flat_values))
    # Byte offset in the joined normalised text where each cluster ends.
    normalized_end = _row_cumsum(tf.cast(tf.strings.length(normalized), tf.int64))
    joined = tf.strings.reduce_join(normalized, axis=1)
    ids, begin, end = tokenizer.tokenize_normalized_with_offsets(joined)
    # The cluster holding a piece's first (last) byte: the first whose
    # normalised text ends after that byte. Empty clusters are skipped.
    limit = tf.int64.max
    ends_dense = normalized_end.to_tensor(default_value=limit)
    first = tf.searchsorted(ends_dense, begin.to_tensor(), side="right")
    last = tf.searchsorted(ends_dense, (end - 1).to_tensor(), side="right")
    original_begin = tf.gather(cluster_begin.to_tensor(), first, batch_dims=1)
    original_end = tf.gather(cluster_end.to_tensor(), last, batch_dims=1)
    lengths = ids.row_lengths()
    return (
        ids,
        tf.RaggedTensor.from_tensor(original_begin, lengths),
        tf.RaggedTensor.from_tensor(original_end, lengths),
    )


def pack_question_context(
    question: tf.RaggedTensor,
    context: tf.RaggedTensor,
    context_begin: tf.RaggedTensor,
    context_end: tf.RaggedTensor,
    max_seq_length: int,
    max_query_length: int,
    cls_id: int,
    sep_id: int,
    pad_id: int,
) -> dict[str, tf.Tensor]:
    """`[CLS] question [SEP] context [SEP]`, the first window of `convert_examples`.

    Args:
        question: int32 ragged [B, (Q)] question pieces.
        context: int32 ragged [B, (T)] context pieces.
        context_begin, context_end: int64 ragged [B, (T)] their byte spans.
        max_seq_length, max_query_length: the fine-tuning lengths.
        cls_id, sep_id, pad_id: special token ids.

    Returns:
        `input_ids`, `input_mask`, `segment_ids` int32 [B, L] and
        `span_begin`, `span_end` int64 [B, L]: each context piece's byte span,
        -1 at [CLS], the question, [SEP] and padding. L <= max_seq_length.
    """
    question = question[:, :max_query_length]
    batch = question.nrows()
    keep = tf.maximum(tf.cast(max_seq_length - 3, tf.int64) - question.row_lengths(), 0)

    def head(values):
        positions = tf.ragged.range(values.row_lengths())
        return tf.ragged.boolean_mask(values, positions < tf.expand_dims(keep, 1))

    def column(value, dtype):
        return tf.RaggedTensor.from_tensor(tf.fill([batch, 1], tf.constant(value, dtype)))

    first = tf.concat([column(cls_id, tf.int32), question, column(sep_id, tf.int32)], axis=1)
    second = tf.concat([head(context), column(sep_id, tf.int32)], axis=1)
    ids = tf.concat([first, second], axis=1)
    segments = tf.concat([tf.zeros_like(first), tf.ones_like(second)], axis=1)
    outside = tf.cast(tf.fill(tf.shape(first.flat_values), -1), tf.int64)
    outside = first.with_flat_values(outside)

    def spans(values):
        return tf.concat([outside, head(values), column(-1, tf.int64)], axis=1).to_tensor(-1)

    return {
        "input_ids": ids.to_tensor(default_value=pad_id),
        "input_mask": tf.ones_like(ids).to_tensor(default_value=0),
        "segment_ids": segments.to_tensor(default_value=0),
        "span_begin": spans(context_begin),
        "span_end": spans(context_end),
    }


def best_spans(beam: dict, span_begin: tf.Tensor, max_answer_length: int) -> dict:
    """The best valid (start, end) of each row, as `squad_decoding.decode` picks it.

    Args:
        beam: `start_top_log_probs` [B, K], `start_top_index` [B, K],
            `end_top_log_probs` [B, K, K], `end_top_index` [B, K, K].
        span_begin: [B, L], -1 where a position is not a context piece.
        max_answer_length: longest answer in pieces.

    Returns:
        `start`, `end` int32 [B] token positions (0 when none is valid),
        `score` float32 [B] (`NO_SPAN_SCORE` when none is valid), `found` bool [B].
    """
    starts, ends = beam["start_top_index"], beam["end_top_index"]
    k = tf.shape(starts)[1]
    in_context = span_begin >= 0
    start_ok = tf.gather(in_context, starts, batch_dims=1)  # [B, K]
    end_ok = tf.reshape(
        tf.gather(in_context, tf.reshape(ends, [-1, k * k]), batch_dims=1), tf.shape(ends)
    )  # [B, K, K]
    length = ends - starts[:, :, tf.newaxis] + 1
    valid = start_ok[:, :, tf.newaxis] & end_ok & (length >= 1) & (length <= max_answer_length)
    scores = beam["start_top_log_probs"][:, :, tf.newaxis] + beam["end_top_log_probs"]
    flat = tf.reshape(tf.where(valid, scores, -float("inf")), [-1, k * k])
    # argmax keeps the first of equal scores: start-major, as the Python loop.
    best = tf.argmax(flat, axis=1, output_type=tf.int32)
    found = tf.reduce_any(tf.reshape(valid, [-1, k * k]), axis=1)
    start = tf.gather(starts, best // k, batch_dims=1)
    end = tf.gather(tf.reshape(ends, [-1, k * k]), best, batch_dims=1)
    score = tf.where(found, tf.gather(flat, best, batch_dims=1), NO_SPAN_SCORE)
    return {
        "start": tf.where(found, start, 0),
        "end": tf.where(found, end, 0),
        "score": score,
        "found": found,
    }


class QuestionAnsweringServing(tf.Module):
    """Wraps a fine-tuned `ElectraQA` and its tokenizer with serving functions.

    Args:
        model: an `ElectraQA` (float32).
        tokenizer: the `WordPieceTokenizer` it was fine-tuned with.
        max_seq_length: window length of fine-tuning.
        max_query_length: question pieces kept.
        max_answer_length: longest answer in pieces.
        version_2: SQuAD 2.0 (adds the no-answer outputs).
        null_score_threshold: `has_answer` is `no_answer_score <= threshold`.
    """

    def __init__(
        self,
        model,
        tokenizer,
        max_seq_length: int,
        max_query_length: int,
        max_answer_length: int,
        version_2: bool,
        null_score_threshold: float,
    ):
        super().__init__(name="question_answering_serving")
        self.model = model
        self.tokenizer = tokenizer
        self._max_seq_length = int(max_seq_length)
        self._max_query_length = int(max_query_length)
        self._max_answer_length = int(max_answer_length)
        self._version_2 = bool(version_2)
        self._null_score_threshold = float(null_score_threshold)

    def _scores(self, inputs: dict) -> dict:
        """The model's prediction mode (its head's `call`), plus the logits it ranks.

        Returns:
            The `token_ids` outputs (with `answerable_logit` for every version).
        """
        model_inputs = {k: inputs[k] for k in ("input_ids", "input_mask", "segment_ids")}
        sequence = self.model.encoder(model_inputs, training=False)
        mask = answer_mask(inputs["input_mask"], inputs["segment_ids"])
        return self.model.task_head.scores(sequence, mask)

    def _from_text(self, question, context) -> dict:
        question, context = text_ops.ensure_text_pairs(question, context, ("question", "context"))
        # An empty request runs one empty pair and answers no row.
        count = tf.size(question)
        question = text_ops.at_least_one_row(question)
        context = text_ops.at_least_one_row(context)
        ids, begin, end = context_pieces(self.tokenizer, context)
        inputs = pack_question_context(
            self.tokenizer.tokenize(question),
            ids,
            begin,
            end,
            self._max_seq_length,
            self._max_query_length,
            self.tokenizer.cls_id,
            self.tokenizer.sep_id,
            self.tokenizer.pad_id,
        )
        scores = self._scores(inputs)
        best = best_spans(scores, inputs["span_begin"], self._max_answer_length)
        found = best["found"]
        start_byte = tf.where(
            found, tf.gather(inputs["span_begin"], best["start"], batch_dims=1), 0
        )
        end_byte = tf.where(found, tf.gather(inputs["span_end"], best["end"], batch_dims=1), 0)
        answer = tf.strings.substr(context, start_byte, end_byte - start_byte)

        def chars(byte_offset):
            # Code points before the offset (offsets fall on character boundaries).
            prefix = tf.strings.substr(context, tf.zeros_like(byte_offset), byte_offset)
            return tf.strings.length(prefix, unit="UTF8_CHAR")

        missing = tf.constant(-1, tf.int32)
        outputs = {
            "answer_text": tf.where(found, answer, ""),
            "start_char": tf.where(found, chars(start_byte), missing),
            "end_char": tf.where(found, chars(end_byte), missing),
            "start_byte": tf.where(found, tf.cast(start_byte, tf.int32), missing),
            "end_byte": tf.where(found, tf.cast(end_byte, tf.int32), missing),
            "score": best["score"],
        }
        if self._version_2:
            no_answer = scores["answerable_logit"]
            outputs["no_answer_score"] = no_answer
            outputs["has_answer"] = no_answer <= self._null_score_threshold
        return text_ops.first_rows(outputs, count)

    def _from_ids(self, input_ids, input_mask, segment_ids) -> dict:
        inputs = text_ops.checked_token_ids(
            self.model.encoder, input_ids, input_mask, segment_ids, pad_empty=True
        )
        outputs = self._scores(inputs)
        if not self._version_2:
            del outputs["answerable_logit"]  # trained on all-answerable data: meaningless
        return outputs

    def signatures(self) -> dict:
        """`{signature name: concrete function}` for `tf.saved_model.save`."""

        @tf.function(
            input_signature=[
                tf.TensorSpec([None], tf.string, name="question"),
                tf.TensorSpec([None], tf.string, name="context"),
            ]
        )
        def serve_text(question, context):
            return self._from_text(question, context)

        self.serve_text = serve_text
        self.serve_ids = token_ids_function(self._from_ids)
        return {
            TEXT_SIGNATURE: serve_text.get_concrete_function(),
            IDS_SIGNATURE: self.serve_ids.get_concrete_function(),
        }
