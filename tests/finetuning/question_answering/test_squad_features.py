"""SQuAD reading, windows and character offsets on hand-made contexts."""

import json

import numpy as np
import pytest

from electra_tf.finetuning.question_answering import data as squad_data
from electra_tf.finetuning.question_answering.data import QAExample
from electra_tf.finetuning.question_answering.features import (
    OffsetTokenizer,
    convert_examples,
    doc_windows,
    max_context_windows,
    split_units,
)
from electra_tf.tokenization import WordPieceTokenizer

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PIECES = [
    "the",
    "caf",
    "##e",
    "##s",
    "fi",
    "##sh",
    "a",
    "한국",
    "##어",
    "##는",
    "(",
    ")",
    ",",
    ".",
    "😀",
    "中",
    "文",
    "jo",
    "##se",
    "1",
    "##9",
    "##0",
    "in",
    "what",
    "?",
    "city",
    "paris",
    "is",
    "big",
    "##ger",
    "rome",
    "dog",
    "cat",
    "서울",
    "##은",
    "##의",
    "수도",
    "##이다",
    "어디",
]


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(SPECIAL + PIECES) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def uncased(vocab_file):
    return WordPieceTokenizer(vocab_file, do_lower_case=True)


def _pieces(tokenizer, text):
    [doc] = OffsetTokenizer(tokenizer).tokenize([text])
    return [(tokenizer.vocab[i], text[s:e]) for i, (s, e) in zip(doc.ids, doc.spans)]


def test_split_units_cuts_at_spaces_punctuation_and_ideographs():
    text = "Hi, 한국어(x) 𝐀b\u00a0中文."
    assert [text[a:b] for a, b in split_units(text)] == [
        "Hi",
        ",",
        "한국어",
        "(",
        "x",
        ")",
        "𝐀b",
        "中",
        "文",
        ".",
    ]
    assert split_units("   ") == []


def test_offsets_map_pieces_to_original_characters(uncased):
    # NFD accent (e + U+0301), a ligature (U+FB01), Korean, a non-BMP emoji
    # and ideographs: every piece maps to exactly the characters it came from.
    text = "The Cafe\u0301s (한국어는) \ufb01sh,😀 中文 Jose\u0301 1990."
    assert _pieces(uncased, text) == [
        ("the", "The"),
        ("caf", "Caf"),
        ("##e", "e\u0301"),
        ("##s", "s"),
        ("(", "("),
        ("한국", "한국"),
        ("##어", "어"),
        ("##는", "는"),
        (")", ")"),
        ("fi", "\ufb01"),
        ("##sh", "sh"),
        (",", ","),
        ("😀", "😀"),
        ("中", "中"),
        ("文", "文"),
        ("jo", "Jo"),
        ("##se", "se\u0301"),
        ("1", "1"),
        ("##9", "9"),
        ("##9", "9"),
        ("##0", "0"),
        (".", "."),
    ]


def test_offsets_with_decomposed_hangul_and_astral_letters(uncased):
    # 한 as conjoining jamo (U+1112 U+1161 U+11AB) recomposes to one syllable;
    # MATHEMATICAL BOLD CAPITAL A (U+1D400, outside the BMP) folds to "a".
    text = "\u1112\u1161\u11ab국어 \U0001d400"
    assert _pieces(uncased, text) == [
        ("한국", "\u1112\u1161\u11ab국"),
        ("##어", "어"),
        ("a", "\U0001d400"),
    ]
    [doc] = OffsetTokenizer(uncased).tokenize([text])
    assert doc.spans.tolist() == [[0, 4], [4, 5], [6, 7]]  # code points, not UTF-16 units


def test_unknown_word_spans_the_whole_unit(uncased):
    assert _pieces(uncased, "dogxyz cat") == [("[UNK]", "dogxyz"), ("cat", "cat")]


def test_doc_windows_and_max_context():
    windows = doc_windows(10, max_tokens=4, stride=3)
    assert windows == [(0, 4), (3, 4), (6, 4)]
    # Hand-computed: token 3 ties between windows 0 and 1 (0 context either
    # side) and the first wins; token 6 likewise between windows 1 and 2.
    assert max_context_windows(windows, 10).tolist() == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert doc_windows(3, max_tokens=4, stride=2) == [(0, 3)]
    assert doc_windows(0, max_tokens=4, stride=2) == [(0, 0)]


def _ids(tokenizer, tokens):
    return tokenizer.convert_tokens_to_ids(tokens)


def test_windows_locate_the_answer(uncased):
    context = "dog cat dog cat paris is bigger dog cat"
    start = context.index("paris is bigger")
    example = QAExample("q1", "what city is big ?", context, [("paris is bigger", start)])
    features = convert_examples(
        [example], uncased, max_seq_length=12, doc_stride=2, max_query_length=3, is_training=True
    )
    question = _ids(uncased, ["what", "city", "is"])  # truncated to 3 tokens
    doc = _ids(uncased, ["dog", "cat", "dog", "cat", "paris", "is", "big", "##ger", "dog", "cat"])
    # 12 - 3 - 3 = 6 context tokens per window, windows start at 0, 2, 4.
    assert features.example_index.tolist() == [0, 0, 0]
    for w, first in enumerate([0, 2, 4]):
        expected = (
            [uncased.cls_id]
            + question
            + [uncased.sep_id]
            + doc[first : first + 6]
            + [uncased.sep_id]
        )
        assert features.input_ids[w, : len(expected)].tolist() == expected
        assert features.input_mask[w].tolist() == [1] * len(expected) + [0] * (12 - len(expected))
        assert features.segment_ids[w, : len(expected)].tolist() == [0] * 5 + [1] * 7
    # The answer (doc tokens 4..7) fits windows 1 (tokens 2..7) and 2 (4..9), not 0.
    assert features.start_positions.tolist() == [0, 7, 5]
    assert features.end_positions.tolist() == [0, 10, 8]
    for w in (1, 2):
        a = features.token_spans[w, features.start_positions[w], 0]
        b = features.token_spans[w, features.end_positions[w], 1]
        assert context[a:b] == "paris is bigger"
    assert (features.token_spans[:, :5] == -1).all()  # [CLS] question [SEP]
    # Doc token 4 ("paris"): 2 left / 1 right of context in window 1, 0 / 5 in
    # window 2 -> window 1; token 7: 5/0 in w1, 3/2 in w2 -> window 2.
    assert features.max_context[1, 5 + 2] and not features.max_context[2, 5 + 0]
    assert features.max_context[2, 5 + 3] and not features.max_context[1, 5 + 5]


def test_korean_answer_after_astral_characters(uncased):
    # Two emoji (outside the BMP) before the answer: answer_start counts code points.
    context = "😀😀 서울은 한국의 수도이다."
    example = QAExample("k", "수도는 어디?", context, [("서울", 3)])
    assert context[3:5] == "서울"
    features = convert_examples([example], uncased, max_seq_length=24, is_training=True)
    start, end = features.start_positions[0], features.end_positions[0]
    assert start == end and start > 0
    assert uncased.vocab[features.input_ids[0, start]] == "서울"
    a, b = features.token_spans[0, start]
    assert context[a:b] == "서울"
    # Every context token's span is inside the context and in order.
    spans = features.token_spans[0][features.token_spans[0, :, 0] >= 0]
    assert (np.diff(spans[:, 0]) >= 0).all() and spans[-1, 1] == len(context)


def test_unanswerable_example_points_at_cls(uncased):
    example = QAExample("q2", "dog ?", "cat cat cat", [], is_impossible=True)
    features = convert_examples(
        [example], uncased, max_seq_length=8, doc_stride=1, is_training=True
    )
    assert features.start_positions.tolist() == [0] and features.end_positions.tolist() == [0]
    assert features.is_impossible.tolist() == [1]


def test_too_short_max_seq_length_is_an_error(uncased):
    example = QAExample("q3", "what city is big ?", "paris", [("paris", 0)])
    with pytest.raises(ValueError, match="--max_seq_length=7 .* 5 question tokens of q3"):
        convert_examples([example], uncased, max_seq_length=7, max_query_length=64)


def _write(path, document):
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return str(path)


def test_read_squad_json_skips_mismatched_answers_and_counts_them(tmp_path):
    context = "KorQuAD는 한국어 데이터셋이다."
    paragraph = {
        "context": context,
        "qas": [
            {"id": "ok", "question": "무엇?", "answers": [{"text": "한국어", "answer_start": 9}]},
            {"id": "bad", "question": "무엇?", "answers": [{"text": "한국어", "answer_start": 2}]},
        ],
    }
    document = {"version": "1.0", "data": [{"title": "t", "paragraphs": [paragraph]}]}
    path = _write(tmp_path / "ko.json", document)
    warnings = []
    train = squad_data.read_squad_json(path, "1.1", is_training=True, warn=warnings.append)
    assert [e.qas_id for e in train.examples] == ["ok"] and train.skipped == 1
    assert "id bad" in warnings[0] and "character 2" in warnings[0]
    assert train.examples[0].answer_span == (9, 12)
    evaluation = squad_data.read_squad_json(path, "1.1", is_training=False)
    assert len(evaluation) == 2 and evaluation.skipped == 0


@pytest.mark.parametrize("start", [99, -1])
def test_a_dev_answer_start_outside_its_context_is_refused_by_name(tmp_path, start):
    """Training skips and names such an answer; a dev file stops, naming it, in one line."""
    context = "KorQuAD는 한국어 데이터셋이다."
    qas = [
        {"id": "ok", "question": "무엇?", "answers": [{"text": "한국어", "answer_start": 9}]},
        {"id": "far", "question": "무엇?", "answers": [{"text": "한국어", "answer_start": start}]},
    ]
    document = {"version": "1.0", "data": [{"paragraphs": [{"context": context, "qas": qas}]}]}
    path = _write(tmp_path / "dev.json", document)
    warnings = []
    train = squad_data.read_squad_json(path, "1.1", is_training=True, warn=warnings.append)
    assert train.skipped == 1 and "id far" in warnings[0]
    with pytest.raises(squad_data.SquadDataError) as refused:
        squad_data.read_squad_json(path, "1.1", is_training=False)
    assert str(refused.value) == (
        f"{path}: data[0].paragraphs[0].qas[1].answers[0] (id far): answer_start={start} lies "
        "outside its context of 20 characters; answer_start counts characters into the "
        "context: fix that offset."
    )


def test_lone_surrogates_are_replaced_one_for_one(tmp_path, uncased):
    # A JSON escape of half an emoji: not encodable as UTF-8, so the reader
    # swaps it for U+FFFD without moving the answer.
    path = tmp_path / "surrogate.json"
    path.write_text(
        '{"data": [{"paragraphs": [{"context": "\\ud83d paris", "qas": [{"id": "s", '
        '"question": "city \\ude00", "answers": [{"text": "paris", '
        '"answer_start": 2}]}]}]}]}',
        encoding="utf-8",
    )
    [example] = squad_data.read_squad_json(str(path), "1.1", is_training=True).examples
    assert example.context == "\ufffd paris" and example.question == "city \ufffd"
    features = convert_examples([example], uncased, max_seq_length=16, is_training=True)
    a, b = features.token_spans[0, features.start_positions[0]]
    assert example.context[a:b] == "paris"


def test_read_squad_json_v2_unanswerable(tmp_path):
    document = {
        "data": [
            {
                "paragraphs": [
                    {
                        "context": "a b",
                        "qas": [{"id": "n", "question": "q", "answers": [], "is_impossible": True}],
                    }
                ]
            }
        ]
    }
    path = _write(tmp_path / "v2.json", document)
    [example] = squad_data.read_squad_json(path, "2.0", is_training=True).examples
    assert example.is_impossible and example.answer_span is None
    with pytest.raises(squad_data.SquadDataError, match="no usable questions"):
        squad_data.read_squad_json(path, "1.1", is_training=True)  # 1.1 needs answers


@pytest.mark.parametrize(
    "document, where",
    [
        ({"rows": []}, "no 'data' key"),
        ({"data": [{"title": "x"}]}, r"data\[0\]"),
        (
            {
                "data": [
                    {
                        "paragraphs": [
                            {
                                "context": "c",
                                "qas": [{"id": 1, "question": "q", "answers": [{"text": "c"}]}],
                            }
                        ]
                    }
                ]
            },
            r"data\[0\].paragraphs\[0\].qas\[0\].answers\[0\]",
        ),
    ],
)
def test_not_squad_format_names_the_file_and_entry(tmp_path, document, where):
    path = _write(tmp_path / "bad.json", document)
    with pytest.raises(squad_data.SquadDataError, match=where) as error:
        squad_data.read_squad_json(path, "1.1", is_training=True)
    assert "bad.json" in str(error.value)


def test_tfds_squad_reader_with_mock_data():
    import tensorflow_datasets as tfds

    with tfds.testing.mock_data(num_examples=4):
        split = squad_data.load_tfds_squad("2.0", "validation", None, is_training=False)
    assert len(split) + split.skipped == 4 and split.source == "tfds:squad/v2.0/validation"
    for example in split.examples:
        assert isinstance(example.context, str) and isinstance(example.qas_id, str)
        assert example.is_impossible == (example.answers == [])
