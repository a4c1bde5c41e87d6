"""Tests for electra_tf.vocab_learning (small corpora written in tmp_path)."""

import collections
import os
import random
import re
import unicodedata

import numpy as np
import pytest

from electra_tf import vocab_learning
from electra_tf.tokenization import WordPieceTokenizer, load_vocab
from electra_tf.vocab_learning import VocabOptions, build_vocab, learn_vocab

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


STEMS = ["walk", "talk", "jump", "play", "read", "cook", "paint", "sing", "build", "clean"]
SUFFIXES = ["", "s", "ed", "ing", "er"]
NOUNS = ["garden", "river", "window", "market", "teacher", "doctor", "Station", "Café"]


def make_corpus(path, n_lines=600, seed=0):
    rng = random.Random(seed)
    lines = []
    for i in range(n_lines):
        words = [rng.choice(STEMS) + rng.choice(SUFFIXES) for _ in range(rng.randint(3, 8))]
        words.insert(rng.randrange(len(words)), "the " + rng.choice(NOUNS))
        lines.append(" ".join(words) + rng.choice([".", "!", "?"]))
        if i % 50 == 49:
            lines.append("")  # Document break.
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_build_vocab_small_corpus(tmp_path):
    corpus = make_corpus(tmp_path / "corpus.txt")
    out1 = build_vocab([corpus], str(tmp_path / "v1" / "vocab.txt"), 120, do_lower_case=True)
    out2 = build_vocab([corpus], str(tmp_path / "vocab2.txt"), 120, do_lower_case=True)
    with open(out1, "rb") as a, open(out2, "rb") as b:
        first, second = a.read(), b.read()
    assert first == second  # Deterministic.
    assert not [p for p in os.listdir(tmp_path / "v1") if "tmp" in p]

    tokens = first.decode("utf-8").splitlines()
    assert tokens[:5] == SPECIALS
    assert 20 < len(tokens) <= 120 and len(set(tokens)) == len(tokens)
    assert any(t.startswith("##") for t in tokens)
    assert "café" not in tokens and "cafe" in tokens  # Uncased, accents stripped.

    tok = WordPieceTokenizer(out1, do_lower_case=True)
    with open(corpus, encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line]
    ids = tok.tokenize(lines).flat_values.numpy()
    assert ids.size > 3000
    assert np.mean(ids == tok.unk_id) < 0.01


def _spellable(word, vocab):
    """Whether `word` splits into vocabulary pieces (the first plain, the others ##):
    a plain search over every split, not WordPiece's greedy one."""
    reachable = [True] + [False] * len(word)
    for end in range(1, len(word) + 1):
        reachable[end] = any(
            reachable[start]
            and (word[start:end] if start == 0 else "##" + word[start:end]) in vocab
            for start in range(end)
        )
    return reachable[-1]


def test_the_vocabulary_spells_every_word_and_has_its_layout(tmp_path):
    corpus = make_corpus(tmp_path / "corpus.txt")
    tokens, stats = learn_vocab(corpus, VocabOptions(vocab_size=120, num_unused=3), True)
    assert len(tokens) == 120 and len(set(tokens)) == 120
    # The words, made with Python's own string functions: lower-cased,
    # accents stripped, cut at whitespace and punctuation.
    text = open(corpus, encoding="utf-8").read().lower()
    text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
    words = collections.Counter(re.findall(r"\w+|[^\w\s]", text))
    assert stats["words"] == sum(words.values())
    chars = collections.Counter(c for w, n in words.items() for c in w * n)
    inner = {c for w in words for c in w[1:]}
    # Special tokens, unused slots, the alphabet (most frequent character
    # first), ##c for the characters found inside words, then the pieces.
    alphabet = sorted(chars, key=lambda c: (-chars[c], c))
    continuations = ["##" + c for c in alphabet if c in inner]
    assert tokens[:8] == SPECIALS + ["[unused0]", "[unused1]", "[unused2]"]
    assert tokens[8 : 8 + len(alphabet) + len(continuations)] == alphabet + continuations
    pieces = tokens[8 + len(alphabet) + len(continuations) :]
    assert all(len(p.removeprefix("##")) > 1 for p in pieces)
    vocab = set(tokens)
    assert all(_spellable(w, vocab) for w in words)
    # The most frequent words became tokens of their own.
    assert {w for w, _ in words.most_common(8)} <= vocab
    tok = WordPieceTokenizer(vocab_learning.write_vocab(tokens, str(tmp_path / "v.txt")), True)
    assert tok.unk_id not in tok.tokenize(text.splitlines()).flat_values.numpy()


def test_the_alphabet_limit_keeps_the_most_frequent_characters(tmp_path):
    # Words over a to f (no "ab" in any), and "azb", with z the seventh most
    # frequent character: an alphabet of six leaves z out.
    rng = random.Random(5)
    common = ["ca", "bc", "de", "fe", "ad", "bf", "ea", "db", "cf", "dace", "fbd"]
    lines = [" ".join(rng.choice(common) for _ in range(12)) + " azb azb" for _ in range(100)]
    corpus = tmp_path / "letters.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    counts = collections.Counter("".join(lines).replace(" ", ""))
    ranked = [c for c, _ in counts.most_common()]
    assert ranked[6] == "z" and counts[ranked[5]] > counts["z"]
    tokens, stats = learn_vocab(
        str(corpus), VocabOptions(vocab_size=60, alphabet_size=6), False, normalization="bert"
    )
    assert stats["alphabet_size"] == 6 and stats["distinct_characters"] == 7
    assert {t for t in tokens[5:] if len(t) == 1} == set("abcdef")
    # Words with z are left out, not learned around the missing character:
    # every piece occurs, where it stands (first or inside), in a word of the
    # alphabet; "ab" (200 times across the z) does not.
    words = {w for line in lines for w in line.split() if "z" not in w}
    for token in tokens[5:]:
        if token.startswith("##"):
            assert any(token[2:] in w[1:] for w in words), token
        else:
            assert any(w.startswith(token) for w in words), token
    assert "ab" not in tokens and "##b" in tokens
    tok = WordPieceTokenizer(
        vocab_learning.write_vocab(tokens, str(tmp_path / "v.txt")), False, normalization="bert"
    )
    assert [tok.unk_id in ids for ids in tok.tokenize_to_lists(["azb", "dace", "ab"])] == [
        True,
        False,
        False,
    ]


def test_ties_between_pairs_are_broken_the_same_way_every_time(tmp_path):
    # Every two-letter word of 12 letters, three times each: 144 pairs tie,
    # and 20 of them become pieces. The trainer numbers ##c tokens in hash
    # order unless they are given, and ties go by those numbers.
    rng = random.Random(0)
    words = [a + b for a in "abcdefghijkl" for b in "abcdefghijkl"] * 3
    rng.shuffle(words)
    corpus = tmp_path / "pairs.txt"
    corpus.write_text("\n".join(" ".join(words[i : i + 12]) for i in range(0, 432, 12)) + "\n")
    options = VocabOptions(vocab_size=5 + 24 + 20)
    runs = [learn_vocab(str(corpus), options, False)[0] for _ in range(4)]
    assert len(runs[0]) == 49 and all(run == runs[0] for run in runs)


def test_a_byte_budget_learns_from_a_sample_and_no_budget_from_everything(tmp_path):
    corpus = make_corpus(tmp_path / "corpus.txt", n_lines=2000)
    size = os.path.getsize(corpus)
    _, whole = learn_vocab(corpus, VocabOptions(vocab_size=120), True)
    _, sample = learn_vocab(corpus, VocabOptions(vocab_size=120, max_bytes=size // 4), True)
    assert whole["sample_bytes"] == size
    assert size // 4 - 2 * 64 <= sample["sample_bytes"] <= size // 4
    assert sample["words"] < whole["words"] / 3


def test_build_vocab_korean_and_cased(tmp_path):
    rng = random.Random(1)
    words = [
        "한국어",
        "문장입니다",
        "학교에서",
        "공부합니다",
        "서울은",
        "도시입니다",
        "Seoul",
        "Korea",
    ]
    text = "\n".join(" ".join(rng.choice(words) for _ in range(6)) + "." for _ in range(300))
    corpus = tmp_path / "ko.txt"
    corpus.write_text(text + "\n", encoding="utf-8")
    syllables = {c for c in text if 0xAC00 <= ord(c) <= 0xD7A3}
    inner = {c for w in words for c in w[1:]} & syllables
    for norm in ("casefold", "bert"):
        for lower in (True, False):
            out = build_vocab(
                str(corpus),
                str(tmp_path / f"vocab_{norm}_{lower}.txt"),
                200,
                do_lower_case=lower,
                normalization=norm,
            )
            tokens = load_vocab(out)
            # Learned pieces are syllables, never conjoining jamo (uncased
            # text goes through NFD), and every syllable is a token (##c too
            # where it occurs inside a word).
            assert not any(0x1100 <= ord(c) <= 0x11FF for t in tokens for c in t)
            assert syllables | {"##" + c for c in inner} <= set(tokens)
            assert ("Seoul" in tokens) is (not lower)
            tok = WordPieceTokenizer(out, do_lower_case=lower, normalization=norm)
            ids = tok.tokenize(text.splitlines()).flat_values.numpy()
            assert tok.unk_id not in ids


def test_build_vocab_caps_size_and_rejects_bad_input(tmp_path):
    corpus = make_corpus(tmp_path / "corpus.txt", n_lines=200)
    tokens = load_vocab(build_vocab([corpus], str(tmp_path / "v.txt"), 80, do_lower_case=False))
    assert len(tokens) <= 80 and tokens[:5] == SPECIALS
    chars = set("".join(STEMS + SUFFIXES + NOUNS) + ".!?")
    assert chars <= set(tokens)  # Every character is still spellable.

    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(ValueError, match="no text"):
        build_vocab([str(empty)], str(tmp_path / "v_empty.txt"), 100, True)
    assert not os.path.exists(tmp_path / "v_empty.txt")
    with pytest.raises(ValueError, match="does not exist"):
        build_vocab([str(tmp_path / "missing.txt")], str(tmp_path / "v2.txt"), 100, True)
    with pytest.raises(ValueError, match="--vocab_size=5"):
        build_vocab([corpus], str(tmp_path / "v3.txt"), 5, True)
    # Too small for the characters the text needs: the flag to lower is named.
    with pytest.raises(ValueError, match="--vocab_size=40 is too small .* --vocab_alphabet_size"):
        build_vocab([corpus], str(tmp_path / "v4.txt"), 40, False)
    assert not os.path.exists(tmp_path / "v4.txt")
    # The temporary words files are gone, whatever happened.
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "empty.txt", "v.txt"]


# --------------------------------------------------------------------------- Korean and Chinese


def make_cjk_corpus(path, seed=0):
    """Korean words over 300 distinct syllables and 300 distinct Chinese characters."""
    rng = random.Random(seed)
    syllables = [chr(0xAC00 + 28 * i) for i in range(300)]  # 가, 개, 갸, ... (no final consonant)
    hanzi = [chr(0x4E00 + 7 * i) for i in range(300)]
    endings = ["에서", "으로", "입니다", "는", "를"]
    lines = []
    for _ in range(1500):
        words = [
            "".join(rng.choice(syllables) for _ in range(2)) + rng.choice(endings) for _ in range(4)
        ]
        words.append("".join(rng.choice(hanzi) for _ in range(3)) + "，")
        lines.append(" ".join(words) + ".")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path), syllables, hanzi


def test_default_alphabet_keeps_korean_and_chinese_out_of_unk(tmp_path):
    corpus, syllables, hanzi = make_cjk_corpus(tmp_path / "cjk.txt")
    text = open(corpus, encoding="utf-8").read().splitlines()
    # 300 + 300 + a few ending syllables: 613 characters, Korean ones need c
    # and ##c, Chinese ones and punctuation only c: about 930 tokens.
    tokens, stats = learn_vocab(
        corpus, VocabOptions(vocab_size=2500), do_lower_case=False, normalization="bert"
    )
    assert stats["alphabet_size"] == stats["distinct_characters"]
    assert set(syllables) | set(hanzi) <= set(tokens)
    assert {"##" + s for s in syllables} <= set(tokens)
    # Standalone characters (CJK ideographs, punctuation) never need ##c, and
    # no longer piece holds an ideograph: each is a word of its own.
    assert not {"##" + h for h in hanzi} & set(tokens) and "##，" not in tokens
    assert not [t for t in tokens if len(t.removeprefix("##")) > 1 and set(t) & set(hanzi)]
    tok = WordPieceTokenizer(
        vocab_learning.write_vocab(tokens, str(tmp_path / "v.txt")),
        do_lower_case=False,
        normalization="bert",
    )
    assert tok.unk_id not in tok.tokenize(text).flat_values.numpy()

    # A 100-character alphabet (what the previous cap gave this vocabulary size's
    # quarter rule) leaves most words unknown.
    small, stats = learn_vocab(
        corpus,
        VocabOptions(vocab_size=2500, alphabet_size=100),
        do_lower_case=False,
        normalization="bert",
    )
    assert stats["alphabet_size"] == 100
    tok = WordPieceTokenizer(
        vocab_learning.write_vocab(small, str(tmp_path / "s.txt")),
        do_lower_case=False,
        normalization="bert",
    )
    ids = tok.tokenize(text).flat_values.numpy()
    assert np.mean(ids == tok.unk_id) > 0.2


def test_unused_slots_follow_the_special_tokens(tmp_path):
    corpus = make_corpus(tmp_path / "corpus.txt", n_lines=200)
    tokens, _ = learn_vocab(corpus, VocabOptions(vocab_size=120, num_unused=7), True)
    assert tokens[:12] == SPECIALS + [f"[unused{i}]" for i in range(7)]
    assert len(tokens) == 120 and len(set(tokens)) == len(tokens)
    assert not any(t.startswith("[unused") for t in tokens[12:])


@pytest.mark.parametrize(
    "options,flag",
    [
        (VocabOptions(vocab_size=10, num_unused=5), "--vocab_size=10"),
        (VocabOptions(num_unused=-1), "--vocab_unused=-1"),
        (VocabOptions(alphabet_size=0), "--vocab_alphabet_size=0"),
        (VocabOptions(max_bytes=0), "--vocab_max_bytes=0"),
        (VocabOptions(presegment="mecab"), "--vocab_presegment='mecab'"),
    ],
)
def test_impossible_options_name_their_flag(options, flag):
    with pytest.raises(vocab_learning.VocabLearningError, match=flag.replace("[", r"\[")):
        options.validate()


def test_kiwi_presegmentation_missing_is_one_clear_line(tmp_path, monkeypatch):
    import builtins

    corpus, _, _ = make_cjk_corpus(tmp_path / "cjk.txt")
    real_import = builtins.__import__

    def no_kiwi(name, *args, **kwargs):
        if name.startswith("kiwipiepy"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_kiwi)
    with pytest.raises(vocab_learning.VocabLearningError, match="pip install kiwipiepy"):
        learn_vocab(corpus, VocabOptions(vocab_size=2500, presegment="kiwi"), False)


def test_kiwi_presegmentation_learns_inner_morphemes_as_continuations(tmp_path):
    pytest.importorskip("kiwipiepy")
    rng = random.Random(3)
    stems = ["학교", "도서관", "공원", "시장", "병원", "회사", "식당", "극장"]
    endings = ["에서", "으로", "에", "까지", "부터"]
    lines = [
        " ".join(rng.choice(stems) + rng.choice(endings) for _ in range(5)) + "."
        for _ in range(400)
    ]
    corpus = tmp_path / "ko.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tokens, _ = learn_vocab(
        str(corpus), VocabOptions(vocab_size=200, presegment="kiwi"), False, normalization="bert"
    )
    assert {"학교", "도서관", "##에서", "##까지", "##부터"} <= set(tokens)
    tok = WordPieceTokenizer(
        vocab_learning.write_vocab(tokens, str(tmp_path / "v.txt")),
        do_lower_case=False,
        normalization="bert",
    )
    pieces = tok.convert_ids_to_tokens(tok.tokenize_to_lists(["도서관에서 학교까지"])[0])
    assert pieces == ["도서관", "##에서", "학교", "##까지"]
