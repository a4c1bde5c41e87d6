"""Tests for electra_tf.tokenization (tiny vocabularies written in tmp_path)."""

import hashlib
import os
import pickle
import random
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from electra_tf import tokenization
from electra_tf.tokenization import VocabError, WordPieceTokenizer, build_vocab, load_vocab

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = [
    "한국어", "문장", "##입니다",          # Korean syllables (NFC)
    "中", "国", "人",                      # CJK ideographs
    "cafe", "café", "Cafe", "Café", "CAFE", "CAFÉ",
    "the", "quick", "brown", "fox", "##es", "!", ".", ",",
]
KOREAN = "한국어 문장입니다"


def write_vocab(path, tokens):
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    return write_vocab(tmp_path_factory.mktemp("vocab") / "vocab.txt", SPECIALS + WORDS)


def ids_of(tokens):
    """Ids by line position in SPECIALS + WORDS, computed without the code under test."""
    table = SPECIALS + WORDS
    return [table.index(t) for t in tokens]


def code_points(s):
    return [ord(c) for c in s]


FLAGS = [(True, None), (True, True), (True, False), (False, None), (False, True), (False, False)]


# --------------------------------------------------------------------------- Korean


@pytest.mark.parametrize("lower,strip", FLAGS)
def test_korean_survives_every_mode(vocab_file, lower, strip):
    tok = WordPieceTokenizer(vocab_file, do_lower_case=lower, strip_accents=strip)
    expected = ids_of(["한국어", "문장", "##입니다"])
    decomposed = unicodedata.normalize("NFD", KOREAN)
    assert decomposed != KOREAN  # The NFD input really is conjoining jamo.
    assert tok.tokenize_to_lists([KOREAN, decomposed]) == [expected, expected]
    assert tok.unk_id not in expected

    # Compare code points: terminals compose jamo, so printed text can lie.
    nfc = unicodedata.normalize("NFC", KOREAN)
    for out in tok.normalize(tf.constant([KOREAN, decomposed])).numpy():
        text = out.decode("utf-8")
        assert code_points(text) == code_points(nfc)
        assert all(0xAC00 <= ord(c) <= 0xD7A3 for c in text if not c.isspace())


# --------------------------------------------------------------------------- Chinese


def test_cjk_ideographs_are_single_tokens(vocab_file):
    tok = WordPieceTokenizer(vocab_file)
    unk = ids_of(["[UNK]"])[0]
    assert tok.tokenize_to_lists(["中国人", "我中国"]) == [
        ids_of(["中", "国", "人"]),
        [unk] + ids_of(["中", "国"]),  # 我 is not in the vocab; its neighbours still are.
    ]


# --------------------------------------------------------------------------- case and accents


@pytest.mark.parametrize("lower,strip,expected", [
    # strip_accents=None follows do_lower_case, as the original code.
    (True, None, ["cafe", "cafe", "cafe", "cafe"]),
    (True, True, ["cafe", "cafe", "cafe", "cafe"]),
    (True, False, ["café", "café", "café", "cafe"]),
    (False, None, ["Café", "CAFÉ", "café", "Cafe"]),
    (False, False, ["Café", "CAFÉ", "café", "Cafe"]),
    (False, True, ["Cafe", "CAFE", "cafe", "Cafe"]),
])
def test_case_and_accent_flags(vocab_file, lower, strip, expected):
    tok = WordPieceTokenizer(vocab_file, do_lower_case=lower, strip_accents=strip)
    assert tok.do_lower_case is lower
    assert tok.strip_accents is (lower if strip is None else strip)
    # "Café" written with a combining acute accent must act like the NFC form.
    text = "Café CAFÉ cafe\u0301 Cafe"
    assert tok.tokenize_to_lists([text]) == [ids_of(expected)]


@pytest.mark.parametrize("lower,strip,expected", [
    (True, True, "cafe"),
    (True, False, "café"),
    (False, True, "Cafe"),
    (False, False, "Café"),
])
def test_normalize_code_points(vocab_file, lower, strip, expected):
    tok = WordPieceTokenizer(vocab_file, do_lower_case=lower, strip_accents=strip)
    for source in ("Café", "Cafe\u0301"):
        out = tok.normalize(tf.constant([source])).numpy()[0].decode("utf-8")
        assert code_points(out) == code_points(unicodedata.normalize("NFC", expected))


def test_wordpiece_punctuation_unknown_and_empty(vocab_file):
    tok = WordPieceTokenizer(vocab_file)
    ragged = tok.tokenize(["The quick foxes!", "", "zebra, fox."])
    assert isinstance(ragged, tf.RaggedTensor)
    assert ragged.dtype == tf.int32 and ragged.ragged_rank == 1
    assert ragged.to_list() == [
        ids_of(["the", "quick", "fox", "##es", "!"]),
        [],
        ids_of(["[UNK]", ",", "fox", "."]),
    ]
    assert tok.tokenize_to_lists([]) == []


def test_unicode_space_and_invalid_bytes(vocab_file):
    tok = WordPieceTokenizer(vocab_file)
    # No-break and ideographic spaces separate words; invalid UTF-8 is dropped.
    texts = tf.constant(["the\u00a0quick\u3000fox".encode(), b"qu\xffick"])
    assert tok.tokenize(texts).to_list() == [ids_of(["the", "quick", "fox"]), ids_of(["quick"])]


# --------------------------------------------------------------------------- vocab layouts


def test_specials_at_nonzero_ids(tmp_path):
    tokens = ["[PAD]", "the", "fox", "##es", "quick", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "brown"]
    tok = WordPieceTokenizer(write_vocab(tmp_path / "bert_vocab.txt", tokens))
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 5, 6, 7, 8)
    assert tok.special_ids == {"pad_id": 0, "unk_id": 5, "cls_id": 6, "sep_id": 7, "mask_id": 8}
    assert tok.vocab_size == 10 and tok.vocab == tokens
    assert tok.tokenize_to_lists(["the quick zzz brown foxes"]) == [[1, 4, 5, 9, 2, 3]]
    assert tok.convert_ids_to_tokens([9, 2, 3]) == ["brown", "fox", "##es"]
    assert tok.convert_ids_to_tokens(tf.constant([[0, 8]])) == ["[PAD]", "[MASK]"]
    assert tok.convert_tokens_to_ids(["fox", "nope"]) == [2, 5]
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.convert_ids_to_tokens([10])


def test_load_vocab_strips_whitespace_and_bom(tmp_path):
    path = tmp_path / "v.txt"
    path.write_bytes("\ufeff[PAD]\r\n[UNK]\r\n[CLS] \r\n[SEP]\r\n[MASK]\r\nword".encode("utf-8"))
    assert load_vocab(str(path)) == SPECIALS + ["word"]


def test_vocab_fingerprint(tmp_path):
    path = write_vocab(tmp_path / "v.txt", SPECIALS + ["a"])
    with open(path, "rb") as f:
        assert tokenization.vocab_fingerprint(path) == hashlib.sha256(f.read()).hexdigest()


@pytest.mark.parametrize("name,content,pattern", [
    ("missing_mask.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n".encode(), r"\[MASK\].*SentencePiece"),
    ("dup.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nhello\n".encode(),
     r"duplicate token 'hello' on lines 6 and 7"),
    ("latin1.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\ncaf\xe9\n".encode("latin-1"),
     r"not UTF-8.*0xe9 at line 6"),
    ("empty.txt", b"", r"is empty"),
    ("blank_line.txt", b"[PAD]\n[UNK]\n\n[CLS]\n[SEP]\n[MASK]\n", r"line 3 is empty"),
    ("spm.vocab", "<unk>\t0\n<s>\t0\n</s>\t0\n\u2581the\t-1.5\n".encode(), r"tab.*SentencePiece"),
])
def test_vocab_errors_name_the_file(tmp_path, name, content, pattern):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(VocabError, match=pattern) as info:
        WordPieceTokenizer(str(path))
    assert name in str(info.value)


def test_missing_vocab_file(tmp_path):
    path = str(tmp_path / "nope" / "vocab.txt")
    with pytest.raises(VocabError, match="does not exist") as info:
        load_vocab(path)
    assert path in str(info.value)
    assert issubclass(VocabError, ValueError)


# --------------------------------------------------------------------------- graph use


def test_graph_tf_data_and_config_round_trip(vocab_file):
    tok = WordPieceTokenizer(vocab_file, do_lower_case=True)
    texts = ["The quick brown fox.", KOREAN, "中国"]
    expected = tok.tokenize_to_lists(texts)
    assert expected[0] == ids_of(["the", "quick", "brown", "fox", "."])

    # Per element (scalar string -> dense ids) and batched inside tf.data.
    ds = tf.data.Dataset.from_tensor_slices(texts)
    assert [x.numpy().tolist() for x in ds.map(tok.tokenize)] == expected
    batched = next(iter(ds.batch(3).map(tok.tokenize)))
    assert batched.to_list() == expected

    fn = tf.function(tok.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
    assert fn(tf.constant(texts)).to_list() == expected

    cfg = pickle.loads(pickle.dumps(tok.get_config()))
    assert cfg == {"vocab_file": os.path.abspath(vocab_file), "do_lower_case": True,
                   "strip_accents": True}
    assert WordPieceTokenizer(**cfg).tokenize_to_lists(texts) == expected


def test_saved_model_uses_only_portable_ops(vocab_file, tmp_path):
    from tensorflow.core.protobuf import saved_model_pb2

    tok = WordPieceTokenizer(vocab_file)
    module = tf.Module()
    module.tokenizer = tok  # Tracks the lookup table.
    module.serve = tf.function(
        lambda t: tok.tokenize(t).to_tensor(default_value=tok.pad_id),
        input_signature=[tf.TensorSpec([None], tf.string)])
    export_dir = str(tmp_path / "export")
    tf.saved_model.save(module, export_dir)

    loaded = tf.saved_model.load(export_dir)
    out = loaded.serve(tf.constant(["the foxes", KOREAN])).numpy()
    np.testing.assert_array_equal(out, [ids_of(["the", "fox", "##es"]),
                                        ids_of(["한국어", "문장", "##입니다"])])

    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    ops, functions = set(), set()
    for graph in proto.meta_graphs:
        ops.update(node.op for node in graph.graph_def.node)
        for fn_def in graph.graph_def.library.function:
            functions.add(fn_def.signature.name)
            ops.update(node.op for node in fn_def.node_def)
    # Everything outside core TensorFlow must be a TF Text op that 2.12
    # already had (no FastBertTokenizer / RoundRobinTrimmer kernels).
    text_ops = {op for op in ops - functions if not hasattr(tf.raw_ops, op)}
    assert text_ops == {"CaseFoldUTF8", "NormalizeUTF8", "RegexSplitWithOffsets",
                        "WordpieceTokenizeWithOffsets"}


# --------------------------------------------------------------------------- build_vocab

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
    out1 = build_vocab([corpus], str(tmp_path / "v1" / "vocab.txt"), vocab_size=120,
                       do_lower_case=True)
    out2 = build_vocab([corpus], str(tmp_path / "vocab2.txt"), vocab_size=120,
                       do_lower_case=True)
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
    words = ["한국어", "문장입니다", "학교에서", "공부합니다", "서울은", "도시입니다", "Seoul", "Korea"]
    text = "\n".join(" ".join(rng.choice(words) for _ in range(6)) + "." for _ in range(300))
    corpus = tmp_path / "ko.txt"
    corpus.write_text(text + "\n", encoding="utf-8")
    for lower in (True, False):
        out = build_vocab(str(corpus), str(tmp_path / f"vocab_{lower}.txt"), vocab_size=200,
                          do_lower_case=lower)
        tokens = load_vocab(out)
        # Learned pieces are syllables, never conjoining jamo.
        assert not any(0x1100 <= ord(c) <= 0x11FF for t in tokens for c in t)
        assert ("Seoul" in tokens) is (not lower)
        tok = WordPieceTokenizer(out, do_lower_case=lower)
        ids = tok.tokenize(text.splitlines()).flat_values.numpy()
        assert tok.unk_id not in ids


def test_build_vocab_caps_size_and_rejects_bad_input(tmp_path):
    corpus = make_corpus(tmp_path / "corpus.txt", n_lines=200)
    tokens = load_vocab(build_vocab([corpus], str(tmp_path / "v.txt"), vocab_size=80,
                                    do_lower_case=False))
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
    with pytest.raises(ValueError, match="vocab_size"):
        build_vocab([corpus], str(tmp_path / "v3.txt"), 5, True)


def test_cap_vocab_keeps_reserved_and_alphabet():
    learned = SPECIALS + ["a", "b", "##a", "##b", "ab", "ba", "##ab", "aab"]
    assert tokenization._cap_vocab(learned, 11, SPECIALS) == learned[:11]
    assert tokenization._cap_vocab(learned, 100, SPECIALS) == learned
    with pytest.raises(ValueError, match="too small"):
        tokenization._cap_vocab(learned, 8, SPECIALS)


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
    sample = tokenization._read_text_sample(files, max_bytes=2 * 32 * 300)
    assert set(sample) <= set(all_lines)  # Whole lines only.
    assert 0 < sum(len(s) + 1 for s in sample) <= 2 * 32 * 300
    # Budget below one chunk: one chunk at offset 0. With a larger budget the
    # chunks reach the second file and its end.
    assert sample[0] == all_lines[0]
    big = tokenization._read_text_sample(files, max_bytes=100_000)
    positions = [all_lines.index(s) for s in big]
    assert positions == sorted(positions)
    assert positions[0] == 0 and positions[-1] > 3500
    assert sum(len(s) + 1 for s in big) <= 100_000


def test_control_format_and_replacement_characters_are_cleaned_like_bert(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat"]) + "\n")
    tokenizer = WordPieceTokenizer(str(vocab))
    the, cat = 5, 6
    texts = ["the\ufffdcat", "the\u200bcat", "the\tcat", "\ufeffthe cat", "the\x00cat\r\n"]
    # U+FFFD, zero-width space, BOM and NUL vanish (BERT's _clean_text), joining
    # "the" and "cat" into one word that WordPiece splits as "the" + "##cat"
    # would; with no "##cat" in the vocabulary that word is [UNK]. Tab and
    # CR/LF separate words.
    assert tokenizer.tokenize(texts).to_list() == [[1], [1], [the, cat], [the, cat], [1]]
