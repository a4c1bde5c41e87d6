"""The dependency parser: ELECTRA encoder -> each word's first piece -> biaffine arcs and labels.

The head is the biaffine parser of Dozat and Manning (2017), which
KLUE-baseline's parser (`klue_baseline/models/dependency_parsing.py`)
also ends with:

* the nodes: every word's final hidden state at its first piece, and the
  [CLS] state as the root (node 0), so node j is word j (1-based) as the
  HEAD column numbers them;
* arcs: two ELU layers give each word a dependent vector d_i and each
  node a head vector h_j (`arc_size` wide); the score of node j as the
  head of word i is d_i U h_j + h_j . u. (The dependent's own linear term
  and a bias, which KLUE's scorer also has, are the same for every head of
  a word, so they do not change its softmax and are left out.) Padding
  nodes and the word itself are masked out;
* labels: two more ELU layers (`label_size` wide) give d'_i and h'_j; the
  score of label k for word i with head j is
  d'_i U_k h'_j + d'_i . w_k + h'_j . v_k + b_k, computed at the gold head
  in training and at the predicted head otherwise;
* loss per sentence: the cross-entropy of the gold head among the nodes
  plus the cross-entropy of the gold label at the gold head, summed over
  its trained words; decoding: each word's most likely head (argmax, no
  tree constraint: a parse may hold a cycle or several roots, as
  KLUE-baseline's does), then its most likely label at that head.

Unlike KLUE-baseline's model, the word vectors are the encoder's states at
the first pieces alone (KLUE concatenates the first and last pieces' and
adds embeddings of the gold POS tag, then runs an LSTM encoder and
decoder over the words before the scorers). No POS tags: a served model
takes words only, with no morphological analysis that must match KLUE's
annotation, and ELECTRA's pieces already show the word's endings.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from electra_tf.finetuning.kind.loss import FinetuningLoss
from electra_tf.modeling.encoder import INPUT_NAMES, ElectraEncoder
from electra_tf.modeling.layers import truncated_normal

HEAD_NAME = "task_head"  # places the head at the top of the layer-wise decay
# KLUE-baseline's widths (its `--arc_space`, `--type_space`).
ARC_SIZE = 512
LABEL_SIZE = 256
# The score of a node that cannot be a head (finite: outputs stay valid JSON).
NO_SCORE = -1e9


def node_states(sequence, word_starts):
    """The nodes of every sentence: [CLS] (the root) then each word's first piece.

    Args:
        sequence: [B, L, H] final hidden states.
        word_starts: int32 [B, W] first-piece positions (0: no word).

    Returns:
        [B, W + 1, H].
    """
    words = tf.gather(sequence, word_starts, batch_dims=1)
    return tf.concat([sequence[:, :1], words], axis=1)


def head_mask(word_starts):
    """bool [B, W, W + 1]: node j may be the head of word i (the root, or another word)."""
    present = word_starts > 0
    root = tf.ones([tf.shape(word_starts)[0], 1], tf.bool)
    nodes = tf.concat([root, present], axis=1)  # [B, W + 1]
    width = tf.shape(word_starts)[1]
    itself = tf.equal(tf.range(width)[:, tf.newaxis] + 1, tf.range(width + 1)[tf.newaxis])
    return nodes[:, tf.newaxis, :] & ~itself[tf.newaxis]


@keras.saving.register_keras_serializable(package="electra_tf")
class BiaffineParserHead(keras.layers.Layer):
    """Arc scores between words and nodes and label scores at a head (see the module docstring).

    Args:
        num_labels: dependency relations.
        arc_size, label_size: widths of the arc and label vectors.
        initializer_range: stddev of the truncated-normal init of the kernels.
    """

    def __init__(
        self,
        num_labels: int,
        arc_size: int = ARC_SIZE,
        label_size: int = LABEL_SIZE,
        initializer_range: float = 0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_labels = num_labels
        self.arc_size = arc_size
        self.label_size = label_size
        self.initializer_range = initializer_range

    def build(self, sequence_shape):
        hidden = int(sequence_shape[-1])
        init = truncated_normal(self.initializer_range)

        def weight(name, shape, kernel=True):
            return self.add_weight(name=name, shape=shape, initializer=init if kernel else "zeros")

        a, r, k = self.arc_size, self.label_size, self.num_labels
        self.arc_dependent_kernel = weight("arc_dependent_kernel", (hidden, a))
        self.arc_dependent_bias = weight("arc_dependent_bias", (a,), False)
        self.arc_head_kernel = weight("arc_head_kernel", (hidden, a))
        self.arc_head_bias = weight("arc_head_bias", (a,), False)
        self.arc_bilinear = weight("arc_bilinear", (a, a))
        self.arc_head_weight = weight("arc_head_weight", (a,))
        self.label_dependent_kernel = weight("label_dependent_kernel", (hidden, r))
        self.label_dependent_bias = weight("label_dependent_bias", (r,), False)
        self.label_head_kernel = weight("label_head_kernel", (hidden, r))
        self.label_head_bias = weight("label_head_bias", (r,), False)
        self.label_bilinear = weight("label_bilinear", (k, r, r))
        self.label_dependent_weight = weight("label_dependent_weight", (r, k))
        self.label_head_weight = weight("label_head_weight", (r, k))
        self.label_bias = weight("label_bias", (k,), False)
        self.built = True

    @staticmethod
    def _elu(x, kernel, bias):
        return tf.nn.elu(tf.matmul(x, kernel) + bias)

    def arc_scores(self, nodes, word_starts):
        """float32 [B, W, W + 1]: score of node j as the head of word i (`NO_SCORE` if masked)."""
        dependents = self._elu(nodes[:, 1:], self.arc_dependent_kernel, self.arc_dependent_bias)
        heads = self._elu(nodes, self.arc_head_kernel, self.arc_head_bias)  # [B, W + 1, A]
        scores = tf.einsum("bia,ac,bjc->bij", dependents, self.arc_bilinear, heads)
        scores += tf.einsum("bja,a->bj", heads, self.arc_head_weight)[:, tf.newaxis, :]
        return tf.where(head_mask(word_starts), tf.cast(scores, tf.float32), NO_SCORE)

    def label_scores(self, nodes, heads):
        """float32 [B, W, K]: the labels' scores of each word with the head `heads` [B, W]."""
        dependents = self._elu(
            nodes[:, 1:], self.label_dependent_kernel, self.label_dependent_bias
        )  # [B, W, R]
        chosen = tf.gather(
            self._elu(nodes, self.label_head_kernel, self.label_head_bias), heads, batch_dims=1
        )  # [B, W, R]
        scores = tf.einsum("bir,krs,bis->bik", dependents, self.label_bilinear, chosen)
        scores += tf.matmul(dependents, self.label_dependent_weight)
        scores += tf.matmul(chosen, self.label_head_weight) + self.label_bias
        return tf.cast(scores, tf.float32)

    def call(self, sequence, word_starts, heads=None):
        """Arc scores, heads (given, or the argmax) and label scores at them.

        Args:
            sequence: [B, L, H] final hidden states.
            word_starts: int32 [B, W] (0: no word).
            heads: int32 [B, W] gold heads (training), or None (predicted).

        Returns:
            {"arc_scores": float32 [B, W, W + 1], "heads": int32 [B, W],
            "label_scores": float32 [B, W, K], "label_ids": int32 [B, W]}.
        """
        word_starts = tf.cast(word_starts, tf.int32)
        nodes = node_states(sequence, word_starts)
        arcs = self.arc_scores(nodes, word_starts)
        predicted = tf.argmax(arcs, axis=-1, output_type=tf.int32)
        labels = self.label_scores(nodes, predicted if heads is None else heads)
        return {
            "arc_scores": arcs,
            "heads": predicted,
            "label_scores": labels,
            "label_ids": tf.argmax(labels, axis=-1, output_type=tf.int32),
        }

    def get_config(self):
        return {
            **super().get_config(),
            "num_labels": self.num_labels,
            "arc_size": self.arc_size,
            "label_size": self.label_size,
            "initializer_range": self.initializer_range,
        }


def parsing_losses(outputs: dict, labels: dict) -> dict:
    """Per-sentence summed losses and head accuracy.

    Args:
        outputs: the head's outputs with the gold heads given.
        labels: `heads` int [B, W], `label_ids` int [B, W] and `word_mask`
            float [B, W] (1 at trained words).

    Returns:
        float32 [B] each: "loss" (arc + label cross-entropy, summed over the
        trained words), "arc_loss", "label_loss" and "uas" (fraction of the
        trained words whose most likely head is the gold one; 0 without any).
    """
    mask = tf.cast(labels["word_mask"], tf.float32)
    heads = tf.cast(labels["heads"], tf.int32)
    arc = tf.nn.sparse_softmax_cross_entropy_with_logits(heads, outputs["arc_scores"])
    label = tf.nn.sparse_softmax_cross_entropy_with_logits(
        tf.cast(labels["label_ids"], tf.int32), outputs["label_scores"]
    )
    arc_loss = tf.reduce_sum(arc * mask, axis=-1)
    label_loss = tf.reduce_sum(label * mask, axis=-1)
    right = tf.cast(tf.equal(outputs["heads"], heads), tf.float32) * mask
    return {
        "loss": arc_loss + label_loss,
        "arc_loss": arc_loss,
        "label_loss": label_loss,
        "uas": tf.math.divide_no_nan(tf.reduce_sum(right, -1), tf.reduce_sum(mask, -1)),
    }


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraDependencyParser(FinetuningLoss, keras.Model):
    """Dependency parsing on an `ElectraEncoder`.

    Inputs: a dict of int32 [B, L] `input_ids`, `input_mask`, `segment_ids`
    and int32 [B, W] `word_starts` (each word's first-piece position; 0:
    padding). Output: `BiaffineParserHead`'s dict with the predicted heads.
    `train_step` (see `FinetuningLoss`) takes (inputs, {heads, label_ids,
    word_mask} [B, W]).

    Args:
        encoder: a (pre-trained) `ElectraEncoder`.
        num_labels, arc_size, label_size: see `BiaffineParserHead`.
    """

    def __init__(
        self,
        encoder: ElectraEncoder,
        num_labels: int,
        arc_size: int = ARC_SIZE,
        label_size: int = LABEL_SIZE,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.encoder = encoder
        self.task_head = BiaffineParserHead(
            num_labels, arc_size, label_size, encoder.initializer_range, name=HEAD_NAME
        )
        # Built here, outside the model's name scope, so that its variable
        # paths start with `task_head/` (the layer-wise decay reads them).
        self.task_head.build((None, None, encoder.hidden_size))

    def _run(self, inputs, training, heads=None):
        sequence = self.encoder({k: inputs[k] for k in INPUT_NAMES}, training=training)
        return self.task_head(sequence, inputs["word_starts"], heads)

    def call(self, inputs, training=False):
        return self._run(inputs, training)

    def build_for(self, seq_length: int = 8):
        """Creates every variable by running a dummy batch."""
        dummy = {name: tf.ones((1, seq_length), tf.int32) for name in INPUT_NAMES}
        self({**dummy, "word_starts": tf.ones((1, 1), tf.int32)})

    # The values a train step logs (see `example_losses`).
    log_names = ("loss", "arc_loss", "label_loss", "uas")

    def example_losses(self, inputs, labels, training=False):
        """The summed losses and the head accuracy of every sentence (see `parsing_losses`)."""
        return parsing_losses(self._run(inputs, training, labels["heads"]), labels)

    def get_config(self):
        return self.config_with_encoder(
            num_labels=self.task_head.num_labels,
            arc_size=self.task_head.arc_size,
            label_size=self.task_head.label_size,
        )

    @classmethod
    def from_config(cls, config):
        model = super().from_config(config)
        model.build_for()  # a subclassed model: built here, so that its weights load
        return model


def build_parser(
    encoder: ElectraEncoder, num_labels: int, seed: int = 0
) -> ElectraDependencyParser:
    """Wraps `encoder` with a freshly initialised (seeded) head and builds it."""
    keras.utils.set_random_seed(seed)
    model = ElectraDependencyParser(encoder, num_labels, name="dependency_parser")
    model.build_for()
    return model
