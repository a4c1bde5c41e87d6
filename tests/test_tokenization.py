"""Tests for electra_tf.tokenization (tiny vocabularies written in tmp_path)."""

import hashlib
import json
import os
import pickle
import random
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from electra_tf import tokenization
from electra_tf.tokenization import TextPath, VocabError, WordPieceTokenizer, load_vocab

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = [
    "한국어",
    "문장",
    "##입니다",  # Korean syllables (NFC)
    "中",
    "国",
    "人",  # CJK ideographs
    "cafe",
    "café",
    "Cafe",
    "Café",
    "CAFE",
    "CAFÉ",
    "the",
    "quick",
    "brown",
    "fox",
    "##es",
    "!",
    ".",
    ",",
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


@pytest.mark.parametrize(
    "lower,strip,expected",
    [
        # strip_accents=None follows do_lower_case, as the original code.
        (True, None, ["cafe", "cafe", "cafe", "cafe"]),
        (True, True, ["cafe", "cafe", "cafe", "cafe"]),
        (True, False, ["café", "café", "café", "cafe"]),
        (False, None, ["Café", "CAFÉ", "café", "Cafe"]),
        (False, False, ["Café", "CAFÉ", "café", "Cafe"]),
        (False, True, ["Cafe", "CAFE", "cafe", "Cafe"]),
    ],
)
def test_case_and_accent_flags(vocab_file, lower, strip, expected):
    tok = WordPieceTokenizer(vocab_file, do_lower_case=lower, strip_accents=strip)
    assert tok.do_lower_case is lower
    assert tok.strip_accents is (lower if strip is None else strip)
    # "Café" written with a combining acute accent must act like the NFC form.
    text = "Café CAFÉ cafe\u0301 Cafe"
    assert tok.tokenize_to_lists([text]) == [ids_of(expected)]


@pytest.mark.parametrize(
    "lower,strip,expected",
    [
        (True, True, "cafe"),
        (True, False, "café"),
        (False, True, "Cafe"),
        (False, False, "Café"),
    ],
)
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


@pytest.mark.parametrize(
    "name,content,pattern",
    [
        (
            "missing_mask.txt",
            "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n".encode(),
            r"\[MASK\].*SentencePiece",
        ),
        (
            "dup.txt",
            "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nhello\n".encode(),
            r"duplicate token 'hello' on lines 6 and 7",
        ),
        (
            "latin1.txt",
            "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\ncaf\xe9\n".encode("latin-1"),
            r"not UTF-8.*0xe9 at line 6",
        ),
        ("empty.txt", b"", r"is empty"),
        ("blank_line.txt", b"[PAD]\n[UNK]\n\n[CLS]\n[SEP]\n[MASK]\n", r"line 3 is empty"),
        (
            "spm.vocab",
            "<unk>\t0\n<s>\t0\n</s>\t0\n\u2581the\t-1.5\n".encode(),
            r"tab.*SentencePiece",
        ),
    ],
)
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


@pytest.mark.parametrize("normalization", ["casefold", "bert"])
def test_graph_tf_data_and_config_round_trip(vocab_file, normalization):
    tok = WordPieceTokenizer(vocab_file, do_lower_case=True, normalization=normalization)
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
    assert cfg == {
        "vocab_file": os.path.abspath(vocab_file),
        "do_lower_case": True,
        "strip_accents": True,
        "normalization": normalization,
    }
    assert WordPieceTokenizer(**cfg).tokenize_to_lists(texts) == expected


@pytest.mark.parametrize("normalization,case_op", [("casefold", {"CaseFoldUTF8"}), ("bert", set())])
def test_saved_model_uses_only_portable_ops(vocab_file, tmp_path, normalization, case_op):
    from tensorflow.core.protobuf import saved_model_pb2

    tok = WordPieceTokenizer(vocab_file, normalization=normalization)
    module = tf.Module()
    module.tokenizer = tok  # Tracks the lookup table.
    module.serve = tf.function(
        lambda t: tok.tokenize(t).to_tensor(default_value=tok.pad_id),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    module.serve_flat = tf.function(
        lambda t: tok.tokenize_flat(t), input_signature=[tf.TensorSpec([None], tf.string)]
    )
    export_dir = str(tmp_path / "export")
    tf.saved_model.save(module, export_dir)

    loaded = tf.saved_model.load(export_dir)
    expected = [ids_of(["the", "fox", "##es"]), ids_of(["한국어", "문장", "##입니다"])]
    out = loaded.serve(tf.constant(["the foxes", KOREAN])).numpy()
    np.testing.assert_array_equal(out, expected)
    flat_ids, splits = loaded.serve_flat(tf.constant(["the foxes", KOREAN]))
    assert flat_ids.numpy().tolist() == expected[0] + expected[1]
    assert splits.numpy().tolist() == [0, 3, 6]

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
    assert (
        text_ops
        == {
            "NormalizeUTF8",
            "RegexSplitWithOffsets",
            "WordpieceTokenizeWithOffsets",
            "FastWordpieceTokenizeWithOffsets",
        }
        | case_op
    )
    if normalization == "bert":  # lower-casing and Hangul composition are core ops
        assert {"StringLower", "UnicodeDecode", "UnicodeEncode"} <= ops


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


# --------------------------------------------------------------------------- normalization="bert"

# Text that tells the normalizations apart: full-width punctuation, digits and
# Latin letters, the ligature ﬁ, an ellipsis, accents (precomposed and
# combining), control, format, private-use and replacement characters, and
# Unicode spaces.
MIXED_ZH_EN = [
    "中国，你好！（测试）１２３……",
    "「北京」是中國的首都。Hello, World!",
    "Ｆｕｌｌ－ｗｉｄｔｈ ＬＡＴＩＮ and the ﬁne ﬁsh",
    "Café NAÏVE re\u0301sume\u0301 über Ærø",
    "tab\tnew\nline\u3000ideographic\u00a0nbsp\u2028ls",
    "zero\u200bwidth\ufeffbom\x07bell\ue000private\ufffdreplaced",
    "价格：￥１２０，折扣？是的；“好”",
]
MIXED_KO_ZH_EN = MIXED_ZH_EN + [
    "한국어 문장입니다. 서울에서 만나요!",
    "KorQuAD 1.0은 「질의응답」 데이터셋，ＫＯＲＥＡ ﬁle Café",
    "대한민국의 수도는 서울특별시이다（首爾）……",
]


def _bert_vocab(path, texts, lower):
    """A vocabulary made with Python's own str methods (not the code under test):
    whole words, their lower-case forms, every character alone and as ##c, and
    a few multi-character pieces, so that WordPiece has real choices."""
    import unicodedata as ud

    tokens = list(SPECIALS)
    for text in texts:
        for word in text.split():
            for form in (word, word.lower(), ud.normalize("NFKC", word).lower()):
                for piece in (form, form[:3], "##" + form[3:]):
                    if piece and piece != "##" and piece not in tokens and len(piece.split()) == 1:
                        tokens.append(piece)
            for char in word + word.lower():
                for piece in (char, "##" + char):
                    if piece not in tokens and piece.strip() == piece and len(piece.split()) == 1:
                        tokens.append(piece)
    # Drop some characters so that unknown words occur too.
    tokens = [t for t in tokens if t not in ("ｗ", "Ｗ", "##ｗ", "ö", "##ö", "Ø", "##ø")]
    return write_vocab(path, tokens)


@pytest.mark.parametrize(
    "lower,texts",
    [(True, MIXED_ZH_EN), (False, MIXED_KO_ZH_EN)],
    ids=["uncased-zh-en", "cased-ko-zh-en"],
)
def test_bert_normalization_gives_the_ids_of_the_reference_bert_tokenizer(tmp_path, lower, texts):
    tokenizers = pytest.importorskip("tokenizers")
    vocab = _bert_vocab(tmp_path / "vocab.txt", MIXED_KO_ZH_EN, lower)
    reference = tokenizers.BertWordPieceTokenizer(vocab, lowercase=lower)
    expected = [reference.encode(t, add_special_tokens=False).ids for t in texts]
    ours = WordPieceTokenizer(vocab, do_lower_case=lower, normalization="bert")
    assert ours.tokenize_to_lists(texts) == expected
    # The cases are real: some pieces are unknown, and casefold gives other ids
    # (it folds compatibility characters, and recomposes résumé's accents).
    assert any(1 in ids for ids in expected)
    folded = WordPieceTokenizer(vocab, do_lower_case=lower, normalization="casefold")
    assert folded.tokenize_to_lists(texts) != expected


def test_bert_normalization_keeps_full_width_and_compatibility_characters(vocab_file):
    tok = WordPieceTokenizer(vocab_file, do_lower_case=True, normalization="bert")
    normalized = [
        t.decode("utf-8")
        for t in tok.normalize(["中国，你好！１２３……", "ﬁ ＡＢＣ Straße ǅ", "ÀÉÎ Ωmega"]).numpy()
    ]
    assert normalized == ["中国，你好！１２３……", "ﬁ ａｂｃ straße ǆ", "aei ωmega"]
    legacy = WordPieceTokenizer(vocab_file, do_lower_case=True)
    assert legacy.normalize(["中国，你好！１２３……"]).numpy()[0].decode() == "中国,你好!123......"


@pytest.mark.parametrize("lower,strip", FLAGS)
def test_bert_normalization_keeps_hangul_syllables(vocab_file, lower, strip):
    tok = WordPieceTokenizer(
        vocab_file, do_lower_case=lower, strip_accents=strip, normalization="bert"
    )
    assert tok.tokenize_to_lists([KOREAN]) == [ids_of(["한국어", "문장", "##입니다"])]
    out = tok.normalize([KOREAN]).numpy()[0].decode("utf-8")
    assert code_points(out) == code_points(KOREAN)


def test_compose_hangul_composes_only_hangul():
    # L V -> LV, L V T -> LVT, a lone L or V stays, an accent after NFD stays
    # decomposed, and composition never reaches across texts.
    texts = [
        "\u1112\u1161\u11ab\u1100\u1173\u11af",
        "\u1100\u1100\u1161 \u1161",
        "e\u0301 \u0b47\u0b3e",
        "\u1100",
        "\u1161",
        "",
    ]
    expected = ["한글", "\u1100가 \u1161", "e\u0301 \u0b47\u0b3e", "\u1100", "\u1161", ""]
    out = tokenization.compose_hangul(tf.constant(texts)).numpy().tolist()
    assert [o.decode("utf-8") for o in out] == expected
    # Every syllable decomposed and composed again is itself (all 11,172).
    syllables = "".join(chr(c) for c in range(0xAC00, 0xD7A4))
    decomposed = unicodedata.normalize("NFD", syllables)
    again = tokenization.compose_hangul(tf.constant([[decomposed]])).numpy()[0, 0]
    assert again.decode("utf-8") == syllables


def test_text_settings_round_trip_and_records_without_normalization(vocab_file):
    tok = WordPieceTokenizer(vocab_file, do_lower_case=False, normalization="bert")
    assert tok.text_settings() == {
        "do_lower_case": False,
        "strip_accents": False,
        "normalization": "bert",
    }
    assert WordPieceTokenizer(**tok.get_config()).get_config() == tok.get_config()
    old = TextPath.from_dict({"do_lower_case": True, "max_seq_length": 16})
    assert old == TextPath(True, True, "casefold", 16)
    assert old.tokenizer(vocab_file).text_settings() == {
        "do_lower_case": True,
        "strip_accents": True,
        "normalization": "casefold",
    }
    path = TextPath.of(tok, 24)
    assert TextPath.from_dict(json.loads(json.dumps(path.to_dict()))) == path
    assert path.to_dict() == {**tok.text_settings(), "max_seq_length": 24}
    with pytest.raises(ValueError, match="--normalization='nfkc'"):
        WordPieceTokenizer(vocab_file, normalization="nfkc")


@pytest.mark.parametrize("normalization", ["casefold", "bert"])
@pytest.mark.parametrize("lower,strip", [(True, None), (False, None), (False, True)])
def test_tokenize_flat_gives_the_ids_of_tokenize(tmp_path, normalization, lower, strip):
    """The trie WordPiece of `tokenize_flat` against the lookup-table one of `tokenize`:
    random text over letters, accents, Hangul (syllables and jamo), CJK, punctuation,
    control, format and space characters, and words around the 200-byte limit."""
    vocab = (
        SPECIALS
        + WORDS
        + [
            "a" * 40,
            "##" + "b" * 30,
            "ab",
            "##ab",
            "##a",
            "##b",
            "é",
            "##é",
            "ß",
            "ss",
            "ς",
            "σ",
            "##",
            "#",
            "[",
            "]",
            "…",
            "，",
        ]
    )
    tok = WordPieceTokenizer(
        write_vocab(tmp_path / "vocab.txt", vocab), lower, strip, normalization
    )
    rng = random.Random(7)
    pool = (
        list("abcdefxyzABC019 .,!?#[]'-")
        + list("éÉçñüßİςΣ")
        + list(KOREAN)
        + list("中国人")
        + [
            "e\u0301",
            "\u0301",
            "\u200b",
            "\ufeff",
            "\u00ad",
            "\t",
            "\n",
            "\x00",
            "\x85",
            "\u00a0",
            "\u3000",
            "\u2028",
            "\ufffd",
            "\ue000",
            "\U0001f600",
            "\u1112\u1161\u11ab",
            "\uff21",
            "\u00a8",
            "…",
            "，",
        ]
    )
    texts = ["", " ", "[UNK]", "##", "the foxes!"]
    for _ in range(300):
        text = "".join(rng.choice(pool) for _ in range(rng.choice([1, 5, 20, 80])))
        if rng.random() < 0.3:
            text += " " + "ab" * rng.choice([99, 100, 101]) + " " + "é" * rng.choice([99, 100, 101])
        if rng.random() < 0.4:
            text += " " + " ".join(
                rng.choice(vocab[5:]).lstrip("#") + rng.choice(["", "s", "é"])
                for _ in range(rng.choice([1, 10, 40]))
            )
        texts.append(text)
    expected = tok.tokenize(tf.constant(texts))
    ids, splits = tok.tokenize_flat(tf.constant(texts))
    assert ids.dtype == tf.int32 and splits.dtype == tf.int64
    assert ids.numpy().tolist() == expected.flat_values.numpy().tolist()
    assert splits.numpy().tolist() == expected.row_splits.numpy().tolist()
    # Some words are known and some are [UNK], so both paths were exercised.
    assert 0 < np.mean(ids.numpy() == tok.unk_id) < 0.9
    raw = tf.constant([b"bad \xff bytes caf\xc3", b"\xed\xa0\x80x"])
    assert (
        tok.tokenize_flat(raw)[0].numpy().tolist() == tok.tokenize(raw).flat_values.numpy().tolist()
    )
