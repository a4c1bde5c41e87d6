"""Tests for electra_tf.vocab_learning (small corpora written in tmp_path)."""

import os
import random

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
    for lower in (True, False):
        out = build_vocab(
            str(corpus), str(tmp_path / f"vocab_{lower}.txt"), 200, do_lower_case=lower
        )
        tokens = load_vocab(out)
        # Learned pieces are syllables, never conjoining jamo.
        assert not any(0x1100 <= ord(c) <= 0x11FF for t in tokens for c in t)
        assert ("Seoul" in tokens) is (not lower)
        tok = WordPieceTokenizer(out, do_lower_case=lower)
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


def test_cap_vocab_keeps_reserved_and_alphabet():
    learned = SPECIALS + ["a", "b", "##a", "##b", "ab", "ba", "##ab", "aab"]
    assert vocab_learning.cap_vocab(learned, 11, SPECIALS) == learned[:11]
    assert vocab_learning.cap_vocab(learned, 100, SPECIALS) == learned
    with pytest.raises(ValueError, match="too small"):
        vocab_learning.cap_vocab(learned, 8, SPECIALS)


def test_text_sample_is_spread_and_line_aligned(tmp_path):
    # Two files, 4000 numbered lines of 32 bytes each: 128 kB in total.
    files, all_lines = [], []
    for part in range(2):
        lines = [f"part {part} line {i:05d} xxxxxxxxxxxxx" for i in range(2000)]
        assert all(len(line) == 31 for line in lines)
        path = tmp_path / f"part{part}.txt"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        files.append(str(path))
        all_lines += lines
    sample = vocab_learning.read_text_sample(files, max_bytes=2 * 32 * 300)
    assert set(sample) <= set(all_lines)  # Whole lines only.
    assert 0 < sum(len(s) + 1 for s in sample) <= 2 * 32 * 300
    # Budget below one chunk: one chunk at offset 0. With a larger budget the
    # chunks reach the second file and its end.
    assert sample[0] == all_lines[0]
    big = vocab_learning.read_text_sample(files, max_bytes=100_000)
    positions = [all_lines.index(s) for s in big]
    assert positions == sorted(positions)
    assert positions[0] == 0 and positions[-1] > 3500
    assert sum(len(s) + 1 for s in big) <= 100_000


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
    # Standalone characters (CJK ideographs, punctuation) never need ##c.
    assert not {"##" + h for h in hanzi} & set(tokens) and "##，" not in tokens
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


def test_choose_alphabet_by_count_and_cost():
    counts = {"가나": 10, "나": 5, "中": 4, "다": 1, "!": 2}
    # Character counts: 나 15, 가 10, 中 4, ! 2, 다 1.
    assert vocab_learning.choose_alphabet(counts, 100, 5, 2) == ["나", "가"]
    # Half of 16 - 5 = 5 slots: 나 (2) + 가 (2) + 中 (1, standalone) = 5; ! would make 6.
    assert vocab_learning.choose_alphabet(counts, 16, 5, None, min_size=0) == ["나", "가", "中"]
    # The floor (100 characters by default) keeps small alphabets whole.
    assert vocab_learning.choose_alphabet(counts, 16, 5, None) == ["나", "가", "中", "!", "다"]
    assert vocab_learning.is_standalone_character("中")
    assert vocab_learning.is_standalone_character("，") and vocab_learning.is_standalone_character(
        "~"
    )
    assert not vocab_learning.is_standalone_character("가")
    assert not vocab_learning.is_standalone_character("a")


def test_unused_slots_follow_the_special_tokens(tmp_path):
    corpus = make_corpus(tmp_path / "corpus.txt", n_lines=200)
    tokens, _ = learn_vocab(corpus, VocabOptions(vocab_size=120, num_unused=7), True)
    assert tokens[:12] == SPECIALS + [f"[unused{i}]" for i in range(7)]
    assert len(tokens) <= 120 and len(set(tokens)) == len(tokens)
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
