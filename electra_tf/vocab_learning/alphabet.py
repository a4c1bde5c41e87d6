"""The characters a vocabulary spells words with.

WordPiece turns a word wholly into `[UNK]` when one of its characters is not
a token, so the alphabet decides how much of a script is readable at all.
Korean and Chinese text uses thousands of distinct characters (7,712 in the
50 MB Korean Wikipedia sample), so by default the alphabet holds the most
frequent characters whose tokens fit in half of the vocabulary. A character
costs two tokens, `c` (word start) and `##c` (inside a word), when it occurs
inside a word, and one otherwise: characters the word splitter always cuts
off as words of their own (CJK ideographs, punctuation) never need `##c`,
so a Chinese alphabet costs half.
"""

from __future__ import annotations

from typing import Container, Iterable, Mapping, Optional

# The automatic alphabet never has fewer characters (small vocabularies still
# spell every word of an alphabetic script).
MIN_AUTO_ALPHABET = 100


def choose_alphabet(
    char_counts: Mapping[str, int],
    inner_chars: Container[str],
    vocab_size: int,
    reserved: int,
    alphabet_size: Optional[int],
    min_size: int = MIN_AUTO_ALPHABET,
) -> list[str]:
    """The characters the vocabulary spells words with, most frequent first.

    Args:
        char_counts: character -> occurrences in the words of the text.
        inner_chars: the characters that occur inside a word (not first).
        vocab_size: the vocabulary's size.
        reserved: special and unused tokens.
        alphabet_size: a number of characters, or None: the most frequent
            characters whose tokens (`c`, and `##c` for those in
            `inner_chars`) fit in half of the `vocab_size - reserved` slots,
            and at least the `min_size` most frequent.

    Ties in count are broken by code point, so the choice is reproducible.
    """
    ranked = sorted(sorted(char_counts), key=lambda c: char_counts[c], reverse=True)
    if alphabet_size is not None:
        return ranked[:alphabet_size]
    budget, used, alphabet = (vocab_size - reserved) // 2, 0, []
    for char in ranked:
        used += 2 if char in inner_chars else 1
        if used > budget and len(alphabet) >= min_size:
            break
        alphabet.append(char)
    return alphabet


def character_class(chars: Iterable[str]) -> str:
    """A regular-expression character class matching exactly `chars` (`[\\x{41}-\\x{5a}...]`).

    Runs of consecutive code points become ranges, and every character is
    written as its code point, so no character needs escaping.
    """
    codes = sorted({ord(c) for c in chars})
    if not codes:
        raise ValueError("a character class needs at least one character")
    parts, start, previous = [], codes[0], codes[0]
    for code in codes[1:] + [None]:
        if code is not None and code == previous + 1:
            previous = code
            continue
        parts.append(
            f"\\x{{{start:x}}}" if start == previous else f"\\x{{{start:x}}}-\\x{{{previous:x}}}"
        )
        if code is not None:
            start = previous = code
    return "[" + "".join(parts) + "]"
