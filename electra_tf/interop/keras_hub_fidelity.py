"""What of our model and tokenizer survives in keras-hub's ElectraBackbone and ElectraTokenizer.

* `tokenizer_fidelity`: the `ElectraTokenizer(lowercase, strip_accents)`
  closest to one of our casings, and whether it gives our ids ("same"),
  other ids on some ordinary text ("differs") or loses a script of the
  vocabulary ("broken"). keras-hub's tokenizer strips accents (NFD, then
  every `\\p{Mn}` mark) before it splits words and case-folds each word
  with NFKC_Casefold afterwards; our `casefold` normalization folds, strips
  and recomposes (NFC) before splitting, `bert` lower-cases without
  compatibility folding (see `electra_tf.tokenization`). The levels are
  measured by `tests/interop/test_keras_hub_preset.py` on `MIXED_SAMPLE`.
* `compare_sequence_outputs`, `compare_tokenizers`: a loaded preset's
  outputs and ids against ours, as `convert export-keras-hub` reports them.

Nothing here imports keras_hub: the keras-hub objects are passed in.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from electra_tf.config import ModelConfig

# Ordinary text in the three scripts our vocabularies are learned for: the
# export tokenizes it with both tokenizers and reports whether the ids agree.
MIXED_SAMPLE = (
    "Café Déjà vu: the naïve Zoë ordered crème brûlée at the Hôtel Müller.",
    "한국어 문장을 토큰으로 나눕니다. 서울에서 만나요!",
    "中文分词测试：北京欢迎你，我们明天见。",
)


# ---------------------------------------------------------------------------
# Tokenizer casing.


@dataclasses.dataclass(frozen=True)
class TokenizerFidelity:
    """How keras-hub's ElectraTokenizer reproduces one of our casings.

    Attributes:
        lowercase, strip_accents: the ElectraTokenizer settings written.
        level: "same" (the same ids on ordinary text; `note` names the rare
            characters that differ), "differs" (other ids on some ordinary
            text: written with a warning) or "broken" (a script of the
            vocabulary becomes [UNK]: refused).
        note: one line for the user.
    """

    lowercase: bool
    strip_accents: bool
    level: str
    note: str


_HANGUL_SYLLABLES = (0xAC00, 0xD7A3)


def _has_hangul(vocab: list[str]) -> bool:
    lo, hi = _HANGUL_SYLLABLES
    return any(lo <= ord(c) <= hi for token in vocab for c in token)


def tokenizer_fidelity(
    do_lower_case: bool, strip_accents: bool, normalization: str, vocab: list[str]
) -> TokenizerFidelity:
    """The ElectraTokenizer settings closest to our casing, and how close they are.

    The levels follow `tests/interop/test_keras_hub_preset.py`, which tokenizes a
    mixed sample (English with accents, Korean, Chinese) both ways.
    """
    rare = (
        "Unicode spaces other than ASCII space (no-break, ideographic) and zero-width "
        "characters split words otherwise"
    )
    if not do_lower_case and strip_accents:
        if _has_hangul(vocab):
            return TokenizerFidelity(
                False,
                True,
                "broken",
                "keras-hub's ElectraTokenizer with strip_accents=True and lowercase=False "
                "decomposes Hangul into jamo, so the Korean words of this vocabulary "
                "would all become [UNK]",
            )
        return TokenizerFidelity(
            False,
            True,
            "differs",
            "keras-hub's ElectraTokenizer with strip_accents=True and lowercase=False "
            "leaves Hangul and other precomposed letters decomposed (NFD); we recompose them",
        )
    if not do_lower_case:
        return TokenizerFidelity(
            False,
            False,
            "same",
            f"lowercase=False: the same ids on ordinary text, but {rare}, and text not in "
            "NFC is not recomposed",
        )
    if normalization == "bert":
        return TokenizerFidelity(
            True,
            strip_accents,
            "differs",
            "keras-hub's ElectraTokenizer case-folds with NFKC_Casefold where this run's "
            "`bert` normalization only lower-cases: full-width punctuation and letters "
            "(common in Chinese text, e.g. '，' '：'), ß, ligatures and other compatibility "
            "characters get other ids",
        )
    return TokenizerFidelity(
        True,
        strip_accents,
        "same",
        "lowercase=True: the same case folding, but a character that folds to several "
        f"('…', '½', '⑴') stays one word there, and {rare}",
    )


# ---------------------------------------------------------------------------
# A loaded preset against our model.


def use_exact_gelu(backbone) -> None:
    """Puts the exact GELU in place of keras-hub's tanh approximation, in every block.

    Reaches into keras-hub's TransformerEncoder (`_feedforward_intermediate_dense`,
    a private attribute of keras-hub 0.32): only to show that the GELU is the
    whole difference, never in a preset that is written.
    """
    import keras

    for i in range(backbone.get_config()["num_layers"]):
        dense = backbone.get_layer(f"transformer_layer_{i}")._feedforward_intermediate_dense
        dense.activation = keras.activations.gelu


def compare_sequence_outputs(
    backbone, discriminator, ids: np.ndarray, mask: np.ndarray, segments: np.ndarray
) -> dict:
    """Max |difference| of keras-hub's `sequence_output` and ours on the same inputs.

    Args:
        backbone: a keras-hub `ElectraBackbone` (its GELU is replaced by the
            exact one on the way: load one for this call alone).
        discriminator: our `ElectraDiscriminator` (or a model with its inputs
            and a "sequence_output").
        ids, mask, segments: int32 [B, L].

    Returns:
        {"keras_hub": max |diff| as keras-hub runs it (tanh GELU),
         "exact_gelu": the same with the exact GELU put in place}.
    """
    ours = np.asarray(
        discriminator({"input_ids": ids, "input_mask": mask, "segment_ids": segments})[
            "sequence_output"
        ]
    )
    inputs = {"token_ids": ids, "segment_ids": segments, "padding_mask": mask}
    valid = mask.astype(bool)  # padded positions are nobody's output

    def difference():
        theirs = np.asarray(backbone(inputs)["sequence_output"])
        return float(np.max(np.abs(theirs - ours)[valid]))

    approximate = difference()
    use_exact_gelu(backbone)
    return {"keras_hub": approximate, "exact_gelu": difference()}


def sample_inputs(model: ModelConfig, seed: int = 0, batch: int = 4) -> tuple:
    """Random ids [B, L] (L = min(128, positions)), the second row padded, two segments."""
    rng = np.random.default_rng(seed)
    length = min(128, model.max_position_embeddings)
    ids = rng.integers(0, model.vocab_size, size=(batch, length)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, length // 2 :] = 0
    segments = np.zeros_like(ids)
    if model.type_vocab_size > 1:
        segments[:, length // 3 :] = 1
    return ids, mask, segments


def compare_tokenizers(theirs, ours, texts=MIXED_SAMPLE) -> list[int]:
    """The indices of `texts` whose ids differ between keras-hub's tokenizer and ours.

    Args:
        theirs: a keras-hub `ElectraTokenizer`.
        ours: our `WordPieceTokenizer`.
        texts: raw strings.
    """
    mine = ours.tokenize_to_lists(texts)
    return [i for i, text in enumerate(texts) if np.asarray(theirs(text)).tolist() != mine[i]]
