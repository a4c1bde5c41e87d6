"""WordPiece pieces from a words file: the `tokenizers` library's WordPiece trainer.

The trainer (the one KoELECTRA and many BERT vocabularies were made with)
runs in Rust on all cores: it counts the words, starts from their characters
(`c` first in a word, `##c` inside) and merges the most frequent adjacent
pair until the vocabulary is full. Here it gets text that is already
normalized and split (`word_split`), so it splits at whitespace only and
normalizes nothing; the one rewrite it applies drops the words that hold a
character outside the alphabet, which WordPiece turns into `[UNK]` anyway
(left in, their other characters would be merged across the gap into
pieces no word has).

Two settings make its output reproducible: the alphabet is given whole
(`initial_alphabet`, so ties in character counts never change it), and
every `##c` token is registered before training, in code point order: the
trainer would otherwise number them in the order of a randomly seeded hash
map, and that order breaks ties between equally frequent pairs.
"""

from __future__ import annotations

import dataclasses
from typing import Collection, Sequence

from electra_tf.tokenization import SPECIAL_TOKENS, UNK_TOKEN
from electra_tf.vocab_learning.alphabet import character_class

CONTINUATION = "##"
# A pair must occur this often to be merged (as BertWordPieceTokenizer.train):
# pieces seen once teach nothing about unseen text.
MIN_FREQUENCY = 2


@dataclasses.dataclass
class LearnedPieces:
    """The trainer's vocabulary, in parts.

    Attributes:
        characters: the alphabet's `c` tokens, in the order given.
        continuations: the `##c` tokens, in the order given.
        pieces: the merged tokens, most frequent merge first.
    """

    characters: list
    continuations: list
    pieces: list


def learn_pieces(
    files: Sequence[str],
    num_pieces: int,
    alphabet: Sequence[str],
    inner_chars: Collection[str],
    excluded: Collection[str] = (),
) -> LearnedPieces:
    """Learns `num_pieces` WordPiece pieces beyond the alphabet from words files.

    Args:
        files: words files (words separated by whitespace, already normalized).
        num_pieces: merged pieces to learn, beyond the special tokens, the
            alphabet and its `##c` tokens.
        alphabet: the characters, most frequent first.
        inner_chars: characters that occur inside words.
        excluded: the other characters of the text: words holding one are
            left out.

    Returns:
        The learned tokens (fewer pieces than asked when no pair left occurs
        `MIN_FREQUENCY` times).
    """
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers

    continuations = [CONTINUATION + c for c in sorted(set(alphabet) & set(inner_chars))]
    tokenizer = Tokenizer(models.WordPiece(unk_token=UNK_TOKEN))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if excluded:
        tokenizer.normalizer = normalizers.Replace(
            Regex(f"[^ \\n]*{character_class(excluded)}[^ \\n]*"), ""
        )
    trainer = trainers.WordPieceTrainer(
        vocab_size=len(SPECIAL_TOKENS) + len(continuations) + len(alphabet) + num_pieces,
        min_frequency=MIN_FREQUENCY,
        show_progress=False,
        special_tokens=list(SPECIAL_TOKENS) + continuations,
        limit_alphabet=len(alphabet),
        initial_alphabet=list(alphabet),
        continuing_subword_prefix=CONTINUATION,
    )
    tokenizer.train(list(files), trainer)
    vocab = tokenizer.get_vocab(with_added_tokens=False)
    known = set(SPECIAL_TOKENS) | set(continuations) | set(alphabet)
    pieces = [t for t in sorted(vocab, key=vocab.get) if t not in known]
    by_char = {c[len(CONTINUATION) :]: c for c in continuations}
    return LearnedPieces(
        characters=list(alphabet),
        continuations=[by_char[c] for c in alphabet if c in by_char],
        pieces=pieces,
    )
