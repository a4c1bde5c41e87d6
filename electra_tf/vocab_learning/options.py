"""How a vocabulary is learned: `VocabOptions` (the --vocab_* flags) and its errors."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Optional

from electra_tf.config import BERT_VOCAB_SIZE, flag_field
from electra_tf.tokenization import SPECIAL_TOKENS

PRESEGMENTERS = ("none", "kiwi")


class VocabLearningError(ValueError):
    """The vocabulary cannot be learned as asked; the message names the flag or file."""


@dataclasses.dataclass
class VocabOptions:
    """How a vocabulary is learned (flags of the `vocab` command and of `pretrain.py`).

    Each field's metadata holds its flag's help (and `flag`, the flag's name
    when it is not the field's, or False for `vocab_size`, which is not one
    of the shared --vocab_* flags).

    Attributes:
        vocab_size: tokens in the vocabulary, special and unused ones included.
        alphabet_size: characters kept (each a token, and also `##c` when it
            occurs inside words); None: the most frequent characters that fit
            in half of the vocabulary (at least 100). Words with another
            character become `[UNK]`.
        max_bytes: text read for learning (whole lines spread over the
            files); None: all of it.
        num_unused: `[unused<i>]` slots after the special tokens.
        presegment: `none`, or `kiwi` (Korean morphemes while learning).
    """

    vocab_size: int = flag_field(
        BERT_VOCAB_SIZE,
        "Tokens in the vocabulary, special and unused ones included (fewer when the text has "
        "too few pieces that occur twice).",
        flag=False,  # the vocab command defines --vocab_size; pretrain.py has the model's
    )
    alphabet_size: Optional[int] = flag_field(
        None,
        "Characters the vocabulary spells words with (each a token, and also ##c when it occurs "
        "inside words); words with any other character become [UNK]. Default: the most "
        "frequent characters that fit in half of the vocabulary.",
        flag="vocab_alphabet_size",
    )
    max_bytes: Optional[int] = flag_field(
        None,
        "Text read to learn the vocabulary (whole lines spread over the corpus). Default: the "
        "whole corpus.",
        flag="vocab_max_bytes",
    )
    num_unused: int = flag_field(
        0,
        "[unused0], [unused1], ... slots after the special tokens, for tokens added later.",
        flag="vocab_unused",
    )
    presegment: str = flag_field(
        "none",
        "none, or kiwi: learn pieces along Korean morpheme boundaries (pip install kiwipiepy); "
        "tokenization itself needs no analyser.",
        flag="vocab_presegment",
        choices=PRESEGMENTERS,
    )

    def validate(self) -> None:
        """Raises VocabLearningError naming the flag of an impossible value."""
        reserved = len(SPECIAL_TOKENS) + self.num_unused
        if self.num_unused < 0:
            raise VocabLearningError(f"--vocab_unused={self.num_unused}: must be >= 0.")
        if self.vocab_size <= reserved:
            raise VocabLearningError(
                f"--vocab_size={self.vocab_size}: must exceed the {len(SPECIAL_TOKENS)} special "
                f"tokens and {self.num_unused} unused slots."
            )
        if self.alphabet_size is not None and self.alphabet_size < 1:
            raise VocabLearningError(
                f"--vocab_alphabet_size={self.alphabet_size}: must be "
                ">= 1 (or unset for the automatic size)."
            )
        if self.max_bytes is not None and self.max_bytes <= 0:
            raise VocabLearningError(
                f"--vocab_max_bytes={self.max_bytes}: must be positive (or unset for the "
                "whole corpus)."
            )
        if self.presegment not in PRESEGMENTERS:
            raise VocabLearningError(
                f"--vocab_presegment={self.presegment!r}: choose one of {', '.join(PRESEGMENTERS)}."
            )

    def flag_values(self) -> dict:
        """The options by their flags' names (`vocab_size` included), as a run records them."""
        return {
            field.metadata.get("flag") or field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
        }

    def cache_key(self, text_settings: dict) -> str:
        """A short name for these options and text settings (cached vocabulary files)."""
        data = json.dumps({**dataclasses.asdict(self), **text_settings}, sort_keys=True)
        return hashlib.sha256(data.encode()).hexdigest()[:8]


def unused_tokens(count: int) -> list[str]:
    """`[unused0]` ... `[unused<count-1>]`, as in BERT's vocabularies."""
    return [f"[unused{i}]" for i in range(count)]
