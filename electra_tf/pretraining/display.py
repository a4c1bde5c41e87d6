"""What the discriminator sees: a sequence with its replacements and P(replaced) per token.

One sequence is turned into `Token`s (`annotate`), which render as Markdown
(TensorBoard's text dashboard), ANSI-coloured terminal text or HTML:

    the⁰¹ cat⁰² **ate**⁹¹ (was sat) on⁰³ the⁰¹ mat⁰⁴

* the superscript is the discriminator's probability that the token was
  replaced, in percent (⁹⁹ means 99% or more);
* a replaced token is bold (ANSI: red and underlined, HTML: boxed), with
  the original in brackets;
* a position the generator filled with the original token (a sample equal to
  the original counts as real) is marked with a dot below in HTML and
  italics elsewhere;
* continuation pieces (`##ing`) are glued to the previous piece.
"""

from __future__ import annotations

import dataclasses
import html
from typing import Callable, Sequence

import numpy as np

_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
LEGEND = (
    "superscript = the discriminator's P(replaced) in %; **bold** = replaced by the "
    "generator (was = the original); _italic_ = masked, but the generator drew the "
    "original token"
)
# The same for `to_plain`'s and `to_ansi`'s notation.
PLAIN_LEGEND = (
    "superscript = the discriminator's P(replaced) in %; *x* = replaced by the generator "
    "(was = the original); _x_ = masked, but the generator drew the original token"
)
ANSI_LEGEND = (
    "superscript and background = the discriminator's P(replaced) in %; underlined = "
    "replaced by the generator (was = the original); italic = masked, but the generator "
    "drew the original token"
)


def legend(ansi: bool) -> str:
    """The legend of `to_ansi`'s output (`ansi`) or of `to_plain`'s."""
    return ANSI_LEGEND if ansi else PLAIN_LEGEND


@dataclasses.dataclass
class Token:
    """One word piece as the discriminator saw it.

    Attributes:
        text: the piece shown to the discriminator, without a leading `##`.
        original: the piece of the original text.
        replaced: the generator replaced it by a different piece (label 1).
        masked: the generator was asked to fill this position.
        probability: the discriminator's P(replaced).
        continuation: a `##` piece, written without a space before it.
    """

    text: str
    original: str
    replaced: bool
    masked: bool
    probability: float
    continuation: bool


def annotate(sample: dict, vocab: Sequence[str]) -> list:
    """Tokens of one sequence (padding dropped).

    Args:
        sample: NumPy arrays of one sequence: `input_ids` (original),
            `fake_ids` (what the discriminator saw), `probabilities`,
            `input_mask`, and optionally `masked` (1 where the generator
            filled the position).
        vocab: id -> piece.
    """
    fake, original = np.asarray(sample["fake_ids"]), np.asarray(sample["input_ids"])
    masked = np.asarray(sample.get("masked", np.zeros_like(fake)))
    tokens = []
    for position in np.flatnonzero(np.asarray(sample["input_mask"]) > 0):
        shown, before = vocab[int(fake[position])], vocab[int(original[position])]
        tokens.append(
            Token(
                text=_strip(shown),
                original=_strip(before),
                replaced=bool(fake[position] != original[position]),
                masked=bool(masked[position]),
                probability=float(sample["probabilities"][position]),
                continuation=shown.startswith("##"),
            )
        )
    return tokens


def _strip(piece: str) -> str:
    return piece[2:] if piece.startswith("##") and len(piece) > 2 else piece


def percent(probability: float) -> str:
    """0.913 -> '91', capped to 0..99 so every token gets two digits at most."""
    return str(min(99, max(0, int(round(100 * probability)))))


def _render(tokens: Sequence[Token], token_text: Callable[[Token], str]) -> str:
    """Each token as `token_text` writes it, words separated by a space (no space before `##`)."""
    out = []
    for token in tokens:
        if out and not token.continuation:
            out.append(" ")
        out.append(token_text(token))
    return "".join(out)


def _emphasized(token: Token, text: str, original: str, strong: str, was_gap: str) -> str:
    """`text` wrapped in `strong` if replaced (`_` if only masked), with P(replaced) as a
    superscript and, after a replacement, the original token."""
    if token.replaced:
        text = f"{strong}{text}{strong}"
    elif token.masked:
        text = f"_{text}_"
    text += percent(token.probability).translate(_SUPERSCRIPT)
    if token.replaced:
        text += f"{was_gap}(was {original})"
    return text


def to_markdown(tokens: Sequence[Token]) -> str:
    """Markdown with superscript probabilities (TensorBoard's text dashboard)."""

    def escape(text):
        return "".join("\\" + c if c in "\\`*_{}[]()#+-.!|<>~" else c for c in text)

    return _render(
        tokens,
        lambda token: _emphasized(token, escape(token.text), escape(token.original), "**", " "),
    )


def to_ansi(tokens: Sequence[Token]) -> str:
    """Terminal text: background from white (0%) to red (100%), replacements underlined."""

    def coloured(token):
        # 256-colour cube: red fixed at 5, green and blue fall with the probability.
        level = 5 - int(round(5 * min(1.0, max(0.0, token.probability))))
        colour = 16 + 36 * 5 + 6 * level + level
        style = "4;" if token.replaced else ("3;" if token.masked else "")
        text = (
            f"\x1b[{style}30;48;5;{colour}m{token.text}"
            f"{percent(token.probability).translate(_SUPERSCRIPT)}\x1b[0m"
        )
        if token.replaced:
            text += f"\x1b[2m(was {token.original})\x1b[0m"
        return text

    return _render(tokens, coloured)


def to_plain(tokens: Sequence[Token]) -> str:
    """Uncoloured text in the Markdown notation (for logs and non-terminals)."""
    return _render(tokens, lambda token: _emphasized(token, token.text, token.original, "*", ""))


HTML_LEGEND = (
    "Background and superscript: the discriminator's P(replaced) in %. Outlined: "
    "replaced by the generator (the original follows, struck through). Dotted "
    "underline: masked, but the generator drew the original token."
)
HTML_STYLE = """<style>
.rtd { font-family: sans-serif; line-height: 2.2; max-width: 60em; }
.rtd span.t { padding: 1px 2px; border-radius: 3px; }
.rtd span.replaced { outline: 2px solid #a00; font-weight: bold; }
.rtd span.masked { text-decoration: underline dotted; }
.rtd sup { font-size: 60%; color: #333; }
.rtd .was { font-size: 75%; color: #777; text-decoration: line-through; }
</style>"""


def to_html(tokens: Sequence[Token]) -> str:
    """An HTML fragment: background alpha = P(replaced), replacements outlined (hover for details)."""

    def span(token):
        classes = (
            "t" + (" replaced" if token.replaced else "") + (" masked" if token.masked else "")
        )
        title = (
            f"P(replaced) = {token.probability:.3f}"
            + (f"; replaced, original: {token.original}" if token.replaced else "")
            + (
                "; masked, generator drew the original"
                if token.masked and not token.replaced
                else ""
            )
        )
        text = (
            f'<span class="{classes}" title="{html.escape(title)}" '
            f'style="background: rgba(220, 0, 0, {token.probability:.2f})">'
            f"{html.escape(token.text)}<sup>{percent(token.probability)}</sup></span>"
        )
        if token.replaced:
            text += f'<span class="was">{html.escape(token.original)}</span>'
        return text

    return '<p class="rtd">' + _render(tokens, span) + "</p>"


def html_page(sections: Sequence[tuple], title: str = "What the discriminator sees") -> str:
    """A whole page from (heading, html fragment) pairs."""
    body = "\n".join(
        f"<h3>{html.escape(heading)}</h3>\n{fragment}" for heading, fragment in sections
    )
    return (
        f'<!doctype html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}'
        f"</title>{HTML_STYLE}</head>\n<body>\n<h2>{html.escape(title)}</h2>\n"
        f"<p>{html.escape(HTML_LEGEND)}</p>\n{body}\n</body></html>\n"
    )
