"""KLUE-DP files written in the exact layout KLUE distributes, for the dependency-parsing tests."""

import random

# The five comment lines KLUE's files start with (their Korean text in English).
HEADER = [
    "## token, label separator : \\t",
    "## token separator : \\n",
    "## sentence separator : \\n\\n",
    "## comment : ##",
    "## column names : INDEX\tWORD_FORM\tLEMMA\tPOS\tHEAD\tDEPREL",
]


def klue_dp_text(sentences, header=True, guid="toy"):
    """The file's text: `sentences` are lists of (word, head, deprel) triples."""
    lines = list(HEADER) if header else []
    for n, words in enumerate(sentences):
        lines.append(f"## {guid}_{n:05d}\t{' '.join(w for w, _, _ in words)}")
        for index, (word, head, label) in enumerate(words, start=1):
            lines.append(f"{index}\t{word}\t{word}\tNNG+JKS\t{head}\t{label}")
        lines.append("")
    return "\n".join(lines) + "\n"


def write_klue_dp(path, sentences, **kwargs):
    path.write_text(klue_dp_text(sentences, **kwargs), encoding="utf-8")
    return str(path)


def toy_parses(count, seed=0):
    """Head-final toy sentences of the tiny vocabulary's words.

    Every word but the last has the next word as its head (NP_SBJ when it
    is an article, else NP_OBJ); the last is the root (VP).
    """
    words = ["movie", "film", "plot", "the", "a", "was", "is", "very", "fun", "good", "bad"]
    rng = random.Random(seed)
    sentences = []
    for _ in range(count):
        length = rng.randint(2, 6)
        chosen = [rng.choice(words) for _ in range(length)]
        sentences.append(
            [
                (w, i + 2, "NP_SBJ" if w in ("the", "a") else "NP_OBJ")
                for i, w in enumerate(chosen[:-1])
            ]
            + [(chosen[-1], 0, "VP")]
        )
    return sentences
