"""The text the vocabulary trainer sees: read, normalized and split as the tokenizer does it.

electra_tf/vocab_learning/corpus_text.py, word_split.py and alphabet.py.
"""

import re

import pytest
import tokenizers

from electra_tf.tokenization import SPECIAL_TOKENS, UNK_TOKEN, WordPieceTokenizer
from electra_tf.vocab_learning import alphabet, corpus_text, word_split

# Every normalization case at once: accents (precomposed and combining),
# ligatures and full-width forms, Greek final sigma, Hangul, CJK ideographs
# and full-width punctuation, zero-width and no-break spaces, the ideographic
# space, a tab, control characters, private use, an emoji, half-width kana,
# and a word over 200 bytes.
TEXT = [
    "Café ﬁne ＡＢＣ naïve e\u0301lan ΣΊΣΥΦΟΣ Straße",
    "한국어 문장입니다. 학교에서 공부합니다!",
    "中国，你好！（测试）１２３……",
    "zero\u200bwidth no\u00a0break ideographic\u3000space tab\there",
    "x" * 201 + " after",
    "ｶﾀｶﾅ and 🙂 and \ue000private \x1cfile\x85next",
    "",
    "   ",
]
SETTINGS = [
    {"do_lower_case": lower, "strip_accents": strip, "normalization": norm}
    for norm in ("bert", "casefold")
    for lower, strip in ((False, False), (True, True), (True, False))
]


def _split_words(tmp_path, settings, lines=TEXT):
    corpus = tmp_path / "text.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "words.txt"
    text = word_split.split_corpus([str(corpus)], None, settings, str(out))
    return text, out.read_text(encoding="utf-8").split("\n")


@pytest.mark.parametrize(
    "settings",
    SETTINGS,
    ids=lambda s: f"{s['normalization']}-lower{s['do_lower_case']:d}-strip{s['strip_accents']:d}",
)
def test_the_trainer_sees_the_words_the_tokenizer_looks_up(tmp_path, settings):
    text, lines = _split_words(tmp_path, settings)
    words = [w for line in lines for w in line.split()]
    assert text.words == len(words)
    # A vocabulary of exactly these words: the tokenizer must find each of
    # its words whole (no ## piece), in the same order, and nothing else,
    # except the word over 200 bytes, which it makes [UNK] and the trainer
    # never sees.
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(list(SPECIAL_TOKENS) + sorted(set(words))) + "\n", "utf-8")
    tokenizer = WordPieceTokenizer(str(vocab), **settings)
    pieces = tokenizer.convert_ids_to_tokens(tokenizer.tokenize(TEXT).flat_values)
    assert pieces.count(UNK_TOKEN) == 1 and pieces[pieces.index(UNK_TOKEN) + 1] == "after"
    assert [p for p in pieces if p != UNK_TOKEN] == words
    # A line per input line with words (the two blank ones give none).
    assert lines[-1] == "" and len(lines) == 7 and all(line.split() for line in lines[:-1])
    # The character counts are those of the words written.
    counted = {}
    for word in words:
        for char in word:
            counted[char] = counted.get(char, 0) + 1
    assert text.char_counts == counted
    assert text.inner_chars == {c for w in words for c in w[1:]}
    assert text.text_bytes == (tmp_path / "text.txt").stat().st_size


def test_cased_bert_words_are_those_of_the_reference_bert_tokenizer(tmp_path):
    # The reference's normalizer and word splitter (BERT's BasicTokenizer),
    # on text without the deliberate differences (docs/korean-chinese.md).
    lines = [line for line in TEXT[:4] if line]
    _, written = _split_words(
        tmp_path, {"do_lower_case": False, "strip_accents": False, "normalization": "bert"}, lines
    )
    normalizer = tokenizers.normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=False, lowercase=False
    )
    splitter = tokenizers.pre_tokenizers.BertPreTokenizer()
    expected = [
        " ".join(w for w, _ in splitter.pre_tokenize_str(normalizer.normalize_str(line)))
        for line in lines
    ]
    assert written[:-1] == expected


def test_hangul_is_never_decomposed_and_cjk_ideographs_stand_alone(tmp_path):
    for norm in ("bert", "casefold"):
        settings = {"do_lower_case": True, "strip_accents": True, "normalization": norm}
        text, lines = _split_words(tmp_path, settings, ["한국어 문장입니다 中国人民 Ｈａｎ"])
        assert lines[0].split()[:5] == ["한국어", "문장입니다", "中", "国", "人"]
        assert not any(0x1100 <= ord(c) <= 0x11FF for c in text.char_counts)
        assert not {"中", "国", "人", "民"} & text.inner_chars


def test_line_batches_read_everything_or_a_spread_sample(tmp_path):
    # Two files, 4000 numbered lines of 32 bytes each: 128 kB in total.
    files, all_lines = [], []
    for part in range(2):
        lines = [f"part {part} line {i:05d} xxxxxxxxxxxxx".encode() for i in range(2000)]
        assert all(len(line) == 31 for line in lines)
        path = tmp_path / f"part{part}.txt"
        path.write_bytes(b"\n".join(lines) + b"\n")
        files.append(str(path))
        all_lines += lines

    def read(max_bytes):
        batches = list(corpus_text.line_batches(files, max_bytes))
        lines = [line.rstrip(b"\n") for batch, _ in batches for line in batch]
        return [line for line in lines if line], sum(n for _, n in batches)

    # No budget (or one above the size): every line, in order, in batches of about 1 MiB.
    for budget in (None, 10**9):
        assert read(budget) == (all_lines, 128_000)
    assert corpus_text.text_bytes(files, None) == 128_000
    # A budget: whole lines only, within the budget, from evenly spread chunks
    # that reach the second file and its end.
    sample, read_bytes = read(2 * 32 * 300)
    assert set(sample) <= set(all_lines) and sample[0] == all_lines[0]
    assert sum(len(s) + 1 for s in sample) <= read_bytes <= 2 * 32 * 300
    big, _ = read(100_000)
    positions = [all_lines.index(s) for s in big]
    assert positions == sorted(positions)
    assert positions[0] == 0 and positions[-1] > 3500
    assert sum(len(s) + 1 for s in big) <= 100_000


def test_progress_reports_megabytes_rate_and_eta(tmp_path, monkeypatch):
    monkeypatch.setattr(word_split, "REPORT_SECONDS", 0.0)
    monkeypatch.setattr(corpus_text, "BATCH_BYTES", 1000)
    corpus = tmp_path / "c.txt"
    corpus.write_text("some words here\n" * 500, encoding="utf-8")
    lines = []
    settings = {"do_lower_case": True, "strip_accents": True, "normalization": "casefold"}
    word_split.split_corpus([str(corpus)], None, settings, str(tmp_path / "w.txt"), lines.append)
    assert len(lines) >= 5
    assert all(
        re.fullmatch(r"  vocabulary text: [\d,]+/0 MB, [\d.]+ MB/s, ETA \d+s", line)
        for line in lines
    )


def test_character_class_matches_exactly_its_characters():
    chars = ["a", "b", "c", "e", "]", "^", "-", "\\", "가", "각", "中", "🙂"]
    pattern = alphabet.character_class(chars)
    assert pattern.count("-") == 3  # \\ to ^, a to c and 가 to 각 are ranges
    # The trainer's regular expressions (Oniguruma), not Python's.
    remove = tokenizers.normalizers.Replace(tokenizers.Regex(pattern), "")
    probe = "abcdefg]^-\\[가각갂中国🙂🙃 "
    assert remove.normalize_str(probe) == "".join(c for c in probe if c not in chars)


def test_choose_alphabet_by_count_and_cost():
    counts = {"나": 15, "가": 10, "中": 4, "!": 2, "다": 1}
    inner = {"나", "다"}
    assert alphabet.choose_alphabet(counts, inner, 100, 5, 2) == ["나", "가"]
    # Half of 16 - 5 = 5 slots: 나 (2, it occurs inside words) + 가 (1) + 中 (1)
    # + ! (1) = 5; 다 (2) would make 7.
    assert alphabet.choose_alphabet(counts, inner, 16, 5, None, min_size=0) == [
        "나",
        "가",
        "中",
        "!",
    ]
    # The floor (100 characters by default) keeps small alphabets whole.
    assert alphabet.choose_alphabet(counts, inner, 16, 5, None) == ["나", "가", "中", "!", "다"]
    # Equal counts: by code point.
    assert alphabet.choose_alphabet({"b": 1, "a": 1, "c": 1}, (), 100, 5, 2) == ["a", "b"]


def test_invalid_utf8_is_dropped_as_the_tokenizer_drops_it(tmp_path):
    corpus = tmp_path / "bad.txt"
    corpus.write_bytes(b"caf\xff\xfee ok\n\xc3 fine\n")
    settings = {"do_lower_case": True, "strip_accents": True, "normalization": "bert"}
    text = word_split.split_corpus([str(corpus)], None, settings, str(tmp_path / "w.txt"))
    assert (tmp_path / "w.txt").read_text(encoding="utf-8") == "cafe ok\nfine\n"
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(list(SPECIAL_TOKENS) + ["cafe", "ok", "fine"]) + "\n", "utf-8")
    tokenizer = WordPieceTokenizer(str(vocab), **settings)
    lines = corpus.read_bytes().splitlines()
    assert tokenizer.convert_ids_to_tokens(tokenizer.tokenize(lines).flat_values) == [
        "cafe",
        "ok",
        "fine",
    ]
    assert text.words == 3
