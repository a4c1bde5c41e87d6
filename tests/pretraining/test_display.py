import numpy as np

from electra_tf.pretraining import display

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "the",
    "cat",
    "sat",
    "ate",
    "play",
    "##ing",
    "<b>",
]


def sample():
    # [CLS] the cat ate(was sat) play ##ing <b> [SEP] [PAD]; "the" was masked but kept.
    return {
        "input_ids": np.array([2, 5, 6, 7, 9, 10, 11, 3, 0]),
        "fake_ids": np.array([2, 5, 6, 8, 9, 10, 11, 3, 0]),
        "probabilities": np.array([0.001, 0.02, 0.1, 0.913, 0.5, 0.996, 0.3, 0.0, 0.7]),
        "input_mask": np.array([1, 1, 1, 1, 1, 1, 1, 1, 0]),
        "masked": np.array([0, 1, 0, 1, 0, 0, 0, 0, 0]),
    }


def test_annotate_marks_replacements_continuations_and_drops_padding():
    tokens = display.annotate(sample(), VOCAB)
    assert [t.text for t in tokens] == ["[CLS]", "the", "cat", "ate", "play", "ing", "<b>", "[SEP]"]
    assert [t.replaced for t in tokens] == [False, False, False, True, False, False, False, False]
    assert tokens[3].original == "sat" and tokens[3].probability == 0.913
    assert tokens[1].masked and not tokens[1].replaced
    assert [t.continuation for t in tokens] == [False] * 5 + [True] + [False] * 2


def test_renderings():
    tokens = display.annotate(sample(), VOCAB)
    markdown = display.to_markdown(tokens)
    assert markdown.startswith("\\[CLS\\]⁰ _the_² cat¹⁰ **ate**⁹¹ (was sat) play⁵⁰ing⁹⁹")
    assert "\\<b\\>³⁰" in markdown
    plain = display.to_plain(tokens)
    assert "*ate*⁹¹(was sat)" in plain and "play⁵⁰ing⁹⁹" in plain
    ansi = display.to_ansi(tokens)
    assert "\x1b[4;" in ansi and "(was sat)" in ansi  # the replacement is underlined
    page = display.html_page([("a <title>", display.to_html(tokens))])
    assert "&lt;b&gt;" in page and "<b>" not in page.split("<body>")[1]
    assert 'class="t replaced masked"' in page and "rgba(220, 0, 0, 0.91)" in page
    assert "a &lt;title&gt;" in page


def test_each_rendering_has_the_legend_of_its_own_notation():
    """The plain legend describes `*x*` / `_x_` (what `to_plain` writes), the terminal one the
    underline and italics, the Markdown one bold and italics."""
    tokens = display.annotate(sample(), VOCAB)
    plain = display.to_plain(tokens)
    assert "*ate*" in plain and "_the_" in plain
    assert display.legend(ansi=False) == display.PLAIN_LEGEND
    assert "*x* = replaced" in display.PLAIN_LEGEND and "_x_ = masked" in display.PLAIN_LEGEND
    assert "bold" not in display.PLAIN_LEGEND
    ansi = display.to_ansi(tokens)
    assert "\x1b[4;" in ansi and "\x1b[3;" in ansi  # underlined replacement, italic masked
    assert "underlined = replaced" in display.legend(ansi=True)
    assert "italic = masked" in display.legend(ansi=True)
    assert "**bold** = replaced" in display.LEGEND  # Markdown (TensorBoard's text dashboard)
