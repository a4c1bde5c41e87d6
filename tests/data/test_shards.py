"""Tests for raw text -> packed TFRecord shards (the shard build of electra_tf/data/: shard_build,
shard_writer, shard_verification, shard_layout, text_input, example_packing, example_encoding)."""

import hashlib
import json
import os
import random
import zlib

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.data import (
    example_encoding,
    shard_build,
    shard_layout,
    shard_verification,
    shard_writer,
    text_input,
)
from electra_tf.data.example_packing import ExampleBuilder
from electra_tf.data.shard_layout import ShardError

WORDS = [f"w{i}" for i in range(100)]
# Special tokens deliberately not at ids 0..4, so nothing may assume BERT's layout.
VOCAB = ["[PAD]", "[UNK]", "x", "[CLS]", "[SEP]", "[MASK]"] + WORDS
PAD, UNK, CLS, SEP = 0, 1, 3, 4
WORD_ID = {w: VOCAB.index(w) for w in WORDS}


@pytest.fixture
def tokenizer_config(tmp_path):
    (tmp_path / "vocab").mkdir()
    path = tmp_path / "vocab" / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return {"vocab_file": str(path), "do_lower_case": True}


def ids_of(words):
    return [WORD_ID[w] for w in words]


def line_of(first, count):
    """Text line of `count` distinct words w<first>..w<first+count-1>."""
    return " ".join(WORDS[first : first + count])


def read_examples(output_dir, max_seq_length):
    """All examples of a build as NumPy rows, parsed independently with tf.io.

    FixedLenFeature parsing fails unless every feature is int64 of length L.
    """
    spec = {
        name: tf.io.FixedLenFeature([max_seq_length], tf.int64)
        for name in ("input_ids", "input_mask", "segment_ids")
    }
    dataset = tf.data.TFRecordDataset(shard_layout.shard_paths(output_dir)).batch(4096)
    out = []
    for batch in dataset.map(lambda records: tf.io.parse_example(records, spec)):
        for value in batch.values():
            assert value.dtype == tf.int64 and value.shape[1] == max_seq_length
        arrays = {k: v.numpy() for k, v in batch.items()}
        out.extend({k: v[r] for k, v in arrays.items()} for r in range(len(arrays["input_ids"])))
    return out


def segments_of(example):
    """(A, B) token lists recovered from one parsed example's layout."""
    ids = example["input_ids"].tolist()
    n = int(example["input_mask"].sum())
    first_sep = ids.index(SEP)
    a = ids[1:first_sep]
    b = ids[first_sep + 1 : n - 1] if first_sep != n - 1 else []
    return a, b


def check_layout(example, max_seq_length):
    ids, mask, seg = example["input_ids"], example["input_mask"], example["segment_ids"]
    n = int(mask.sum())
    assert 3 <= n <= max_seq_length
    np.testing.assert_array_equal(mask, [1] * n + [0] * (max_seq_length - n))
    np.testing.assert_array_equal(ids[n:], 0)
    np.testing.assert_array_equal(seg[n:], 0)
    assert ids[0] == CLS and ids[n - 1] == SEP
    seps = np.flatnonzero(ids[:n] == SEP)
    assert len(seps) in (1, 2)
    assert not np.isin(ids[1:n], [PAD, CLS]).any()
    a_end = seps[0] + 1
    np.testing.assert_array_equal(seg[:a_end], 0)
    np.testing.assert_array_equal(seg[a_end:n], 1)
    if len(seps) == 2:
        assert seps[1] == n - 1 and seps[0] < n - 2  # B is never empty when present.


def build(inputs, output_dir, tokenizer_config, **kwargs):
    kwargs.setdefault("max_seq_length", 16)
    return shard_build.write_shards(
        [str(p) for p in inputs], str(output_dir), tokenizer_config, **kwargs
    )


# ---------------------------------------------------------------------------
# Example building with a scripted random source.


class ScriptedRng:
    """Returns pre-set values from random() and randint(); fails on extra draws."""

    def __init__(self, uniforms, ints=()):
        self.uniforms = list(uniforms)
        self.ints = list(ints)
        self.randint_args = []

    def random(self):
        return self.uniforms.pop(0)

    def randint(self, a, b):
        self.randint_args.append((a, b))
        return self.ints.pop(0)


def feed(builder, sentences):
    out = [builder.add_sentence(s) for s in sentences]
    assert all(e is None for e in out[:-1])
    assert out[-1] is not None
    return [x.tolist() for x in out[-1]]


def seq(start, n):
    return list(range(start, start + n))


def test_builder_coin_heads_puts_overflowing_sentence_in_a():
    # L=16: first-segment target (16-3)//2 = 6. Lengths 3, 5, 4, 6 reach 18 >= 16.
    rng = ScriptedRng([0.5, 0.3, 0.9])  # two segments; coin < 0.5; full target next
    builder = ExampleBuilder(16, rng)
    s1, s2, s3, s4 = seq(100, 3), seq(200, 5), seq(300, 4), seq(400, 6)
    a, b = feed(builder, [s1, s2, s3, s4])
    assert a == s1 + s2  # 3 < 6, coin heads -> A holds 8
    assert b == (s3 + s4)[: 16 - 8 - 3]  # B truncated to 5, the rest dropped
    assert rng.uniforms == [] and builder.target_length == 16


def test_builder_coin_tails_and_truncation():
    rng = ScriptedRng([0.5, 0.7, 0.9])
    builder = ExampleBuilder(16, rng)
    s1, s2, s3, s4 = seq(100, 3), seq(200, 5), seq(300, 4), seq(400, 6)
    a, b = feed(builder, [s1, s2, s3, s4])
    assert a == s1
    assert b == (s2 + s3 + s4)[: 16 - 3 - 3]
    assert rng.uniforms == []


def test_builder_later_short_sentence_rejoins_a():
    # The original's assignment rule is per sentence: after one sentence went
    # to B, a short one that still fits under A's target goes to A.
    rng = ScriptedRng([0.5, 0.9, 0.9])
    builder = ExampleBuilder(16, rng)
    s1, s2, s3, s4 = seq(100, 2), seq(200, 5), seq(300, 2), seq(400, 8)
    a, b = feed(builder, [s1, s2, s3, s4])
    assert a == s1 + s3
    assert b == (s2 + s4)[: 16 - 4 - 3]


def test_builder_no_coin_when_a_reaches_target():
    rng = ScriptedRng([0.5, 0.9])  # no coin may be drawn
    builder = ExampleBuilder(16, rng)
    s1, s2, s3 = seq(100, 6), seq(200, 4), seq(300, 7)
    a, b = feed(builder, [s1, s2, s3])
    assert a == s1 and b == (s2 + s3)[:7]
    assert rng.uniforms == []


def test_builder_single_segment_and_short_target():
    rng = ScriptedRng([0.05, 0.01], ints=[7])  # single segment; short next target = 7
    builder = ExampleBuilder(16, rng)
    a, b = feed(builder, [seq(100, 9), seq(200, 9)])
    assert a == (seq(100, 9) + seq(200, 9))[:14] and b == []
    assert rng.randint_args == [(5, 16)] and builder.target_length == 7
    # Target 7: first-segment target (7-3)//2 = 2; a 3-token line reaches it.
    rng.uniforms = [0.5, 0.9]
    a, b = feed(builder, [seq(300, 3), seq(400, 4)])
    assert a == seq(300, 3) and b == seq(400, 4)
    assert builder.target_length == 16


def test_builder_document_end_flushes_and_empty_lines_are_ignored():
    rng = ScriptedRng([0.5, 0.9])
    builder = ExampleBuilder(16, rng)
    assert builder.end_document() is None  # nothing pending: no draws
    assert builder.add_sentence([]) is None
    assert builder.add_sentence(seq(100, 3)) is None
    a, b = [x.tolist() for x in builder.end_document()]
    assert a == seq(100, 3) and b == []
    assert rng.uniforms == [] and builder.end_document() is None


# ---------------------------------------------------------------------------
# Serialization.


def test_serialized_bytes_match_protobuf():
    rng = np.random.default_rng(0)
    n, length = 50, 12
    ids = rng.integers(0, 5, size=(n, length)) * rng.choice(
        [1, 200, 20_000, 3_000_000], size=(n, length)
    )
    mask = (rng.random((n, length)) < 0.7).astype(np.int64)
    seg = (rng.random((n, length)) < 0.5).astype(np.int64)
    records = example_encoding.serialize_examples(ids, mask, seg)
    for r in range(n):
        features = {
            name: tf.train.Feature(int64_list=tf.train.Int64List(value=arr[r].tolist()))
            for name, arr in (("input_ids", ids), ("input_mask", mask), ("segment_ids", seg))
        }
        expected = tf.train.Example(features=tf.train.Features(feature=features))
        assert records[r] == expected.SerializeToString(deterministic=True)


# ---------------------------------------------------------------------------
# Full builds.


def test_tfrecord_round_trip(tmp_path, tokenizer_config):
    rng = random.Random(0)
    docs = []
    for _ in range(30):
        lines = [
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))
            for _ in range(rng.randint(1, 8))
        ]
        docs.append("\n".join(lines))
    (tmp_path / "a.txt").write_text("\n\n".join(docs[:20]) + "\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("\n\n".join(docs[20:]), encoding="utf-8")
    messages = []
    meta = build(
        [tmp_path / "*.txt"],
        tmp_path / "out",
        tokenizer_config,
        max_seq_length=24,
        num_shards=3,
        progress=messages.append,
    )

    examples = read_examples(tmp_path / "out", 24)
    for example in examples:
        check_layout(example, 24)
    assert len(examples) == meta["num_examples"] > 0
    assert sum(s["num_examples"] for s in meta["shards"]) == meta["num_examples"]
    assert [s["path"] for s in meta["shards"]] == [
        f"pretrain_data.tfrecord-{i:05d}-of-00003" for i in range(3)
    ]
    assert meta == shard_layout.read_metadata(tmp_path / "out")
    assert meta["max_seq_length"] == 24 and meta["vocab_size"] == len(VOCAB)
    assert meta["do_lower_case"] is True and meta["replaced_lines"] == 0
    assert meta["special_ids"]["cls_id"] == CLS and meta["special_ids"]["sep_id"] == SEP
    assert [os.path.basename(s["path"]) for s in meta["sources"]] == ["a.txt", "b.txt"]
    assert meta["sources"][0]["bytes"] == os.path.getsize(tmp_path / "a.txt")
    spec = {
        name: tf.io.FixedLenFeature([24], tf.int64)
        for name in ("input_ids", "input_mask", "segment_ids")
    }
    for path, shard in zip(shard_layout.shard_paths(tmp_path / "out"), meta["shards"]):
        assert os.path.isabs(path)
        records = list(tf.data.TFRecordDataset(path))
        assert len(records) == shard["num_examples"]
        parsed = tf.io.parse_single_example(records[0], spec)
        assert sorted(parsed) == ["input_ids", "input_mask", "segment_ids"]
        check_layout({k: v.numpy() for k, v in parsed.items()}, 24)
    assert any("shard 3/3 done" in m for m in messages)
    # Nothing besides shards, sidecars and metadata is left behind.
    names = sorted(os.listdir(tmp_path / "out"))
    assert names == sorted(
        [s["path"] for s in meta["shards"]]
        + [s["path"] + ".json" for s in meta["shards"]]
        + ["metadata.json", "corpus-digests.json"]
    )


def test_packing_matches_hand_worked_examples(tmp_path, tokenizer_config):
    # L=16 and no randomness (probabilities 0/1), so the split is fixed:
    # doc 1: lines of 6, 4, 4, 5 tokens reach 19 >= 16 -> A = line 1 (fills
    # the first-segment target 6), B = the rest truncated to 16-6-3 = 7; the
    # 2-token line left before the blank line is flushed on its own.
    # doc 2: 6 + 7 tokens flushed at the end of the file.
    text = "\n".join(
        [
            "",
            "   ",
            line_of(0, 6),
            line_of(6, 4),
            line_of(10, 4),
            line_of(14, 5),
            line_of(19, 2),
            "",
            "  ",
            "",
            line_of(30, 6),
            line_of(36, 7),
        ]
    )
    (tmp_path / "c.txt").write_text(text, encoding="utf-8")
    build(
        [tmp_path / "c.txt"],
        tmp_path / "two",
        tokenizer_config,
        num_shards=1,
        single_segment_prob=0.0,
        short_seq_prob=0.0,
    )
    examples = read_examples(tmp_path / "two", 16)
    for example in examples:
        check_layout(example, 16)
    got = sorted(segments_of(e) for e in examples)
    expected = sorted(
        [
            (ids_of(WORDS[0:6]), ids_of(WORDS[6:13])),
            (ids_of(WORDS[19:21]), []),
            (ids_of(WORDS[30:36]), ids_of(WORDS[36:43])),
        ]
    )
    assert got == expected

    build(
        [tmp_path / "c.txt"],
        tmp_path / "one",
        tokenizer_config,
        num_shards=1,
        single_segment_prob=1.0,
        short_seq_prob=0.0,
    )
    examples = read_examples(tmp_path / "one", 16)
    got = sorted(segments_of(e) for e in examples)
    assert got == sorted(
        [(ids_of(WORDS[0:14]), []), (ids_of(WORDS[19:21]), []), (ids_of(WORDS[30:43]), [])]
    )
    assert all(e["segment_ids"].sum() == 0 for e in examples)


def test_single_segment_and_short_fractions(tmp_path, tokenizer_config):
    # One long document of 4-token lines with L=32. A two-segment example then
    # always has a non-empty B, a full-target example is exactly 32 tokens
    # long, and a random target t in [5, 32] gives a shorter example exactly
    # when t <= 28: expected short fraction 0.05 * 24/28.
    rng = random.Random(1)
    lines = [" ".join(rng.choice(WORDS) for _ in range(4)) for _ in range(32_000)]
    (tmp_path / "d.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    build(
        [tmp_path / "d.txt"],
        tmp_path / "out",
        tokenizer_config,
        max_seq_length=32,
        num_shards=1,
        seed=7,
    )
    examples = read_examples(tmp_path / "out", 32)
    n = len(examples)
    assert 3800 < n < 4400
    single = np.mean([e["segment_ids"].sum() == 0 for e in examples])
    short = np.mean([e["input_mask"].sum() < 32 for e in examples])
    assert abs(single - 0.10) < 0.02, single
    assert abs(short - 0.05 * 24 / 28) < 0.015, short


def test_documents_are_not_mixed_across_blank_lines_or_files(tmp_path, tokenizer_config):
    # Each document uses its own word range; every example must stay in one.
    rng = random.Random(3)
    texts = []
    for f in range(2):
        docs = []
        for d in range(5):
            base = (f * 5 + d) * 10
            docs.append(
                "\n".join(
                    " ".join(WORDS[base + rng.randrange(10)] for _ in range(rng.randint(1, 9)))
                    for _ in range(rng.randint(3, 12))
                )
            )
        texts.append("\n\n".join(docs))
        (tmp_path / f"doc{f}.txt").write_text(texts[-1], encoding="utf-8")
    build(
        [tmp_path / "doc0.txt", tmp_path / "doc1.txt"],
        tmp_path / "out",
        tokenizer_config,
        max_seq_length=20,
        num_shards=4,
    )
    examples = read_examples(tmp_path / "out", 20)
    assert examples
    for e in examples:
        n = int(e["input_mask"].sum())
        content = [t for t in e["input_ids"][:n].tolist() if t not in (CLS, SEP)]
        groups = {int(VOCAB[t][1:]) // 10 for t in content}
        assert len(groups) == 1, groups


def test_pieces_cover_input_and_cut_at_blank_lines(tmp_path):
    paragraphs = [
        ("\n".join("line %d of %d" % (i, p) for i in range(p % 5 + 1))) for p in range(60)
    ]
    data = [("\n\n".join(paragraphs[:35]) + "\n").encode(), "\n\n".join(paragraphs[35:]).encode()]
    paths = []
    for i, blob in enumerate(data):
        paths.append(str(tmp_path / f"f{i}.txt"))
        with open(paths[-1], "wb") as f:
            f.write(blob)
    sources = text_input.resolve_sources([str(tmp_path / "f*.txt")])
    pieces = text_input.plan_pieces(sources, 7)
    assert len(pieces) == 7
    joined = b"".join(data[paths.index(p)][s:e] for piece in pieces for p, s, e in piece)
    assert joined == b"".join(data)
    for piece in pieces[1:]:
        if piece:
            path, start, _ = piece[0]
            blob = data[paths.index(path)]
            # Every cut is just after a blank line (a document end) or at a file start.
            assert start == 0 or blob[:start].endswith(b"\n\n")


def test_line_reading_handles_blocks_bom_and_crlf(tmp_path, monkeypatch):
    blob = "\ufeffαβ one\r\n\r\n  two  \nthree\n\nfour".encode("utf-8")
    path = tmp_path / "t.txt"
    path.write_bytes(blob)
    expected = ["αβ one", "", "two", "three", "", "four", ""]
    for block in (3, 7, 1 << 20):
        monkeypatch.setattr(text_input, "READ_BLOCK_BYTES", block)
        stats = {"replaced_lines": 0, "first_replaced": None}
        got = list(text_input.iter_piece_lines([(str(path), 0, len(blob))], "error", stats))
        assert got == expected, block


def test_small_read_blocks_give_identical_shards(tmp_path, tokenizer_config, monkeypatch):
    rng = random.Random(5)
    text = "\n".join(
        "" if rng.random() < 0.1 else " ".join(rng.choice(WORDS) for _ in range(5))
        for _ in range(600)
    )
    (tmp_path / "e.txt").write_text(text, encoding="utf-8")
    build([tmp_path / "e.txt"], tmp_path / "big", tokenizer_config, num_shards=2)
    monkeypatch.setattr(text_input, "READ_BLOCK_BYTES", 11)
    monkeypatch.setattr(shard_writer, "TOKENIZE_BATCH_LINES", 3)
    monkeypatch.setattr(shard_writer, "ENCODE_BATCH", 5)
    build([tmp_path / "e.txt"], tmp_path / "small", tokenizer_config, num_shards=2)
    for name in ("pretrain_data.tfrecord-00000-of-00002", "pretrain_data.tfrecord-00001-of-00002"):
        assert (tmp_path / "big" / name).read_bytes() == (tmp_path / "small" / name).read_bytes()


def write_corpus(path, lines=400, seed=0):
    rng = random.Random(seed)
    text = "\n".join(
        "" if rng.random() < 0.08 else " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 9)))
        for _ in range(lines)
    )
    path.write_text(text, encoding="utf-8")


def shard_bytes(output_dir):
    return {os.path.basename(p): open(p, "rb").read() for p in shard_layout.shard_paths(output_dir)}


def test_deterministic_and_independent_of_workers(tmp_path, tokenizer_config):
    write_corpus(tmp_path / "g.txt", lines=1500)
    kwargs = dict(max_seq_length=24, num_shards=3, seed=11)
    build([tmp_path / "g.txt"], tmp_path / "a", tokenizer_config, **kwargs)
    build([tmp_path / "g.txt"], tmp_path / "b", tokenizer_config, **kwargs)
    assert shard_bytes(tmp_path / "a") == shard_bytes(tmp_path / "b")
    # Spawned workers (each imports TensorFlow) must write the very same shards.
    meta = build([tmp_path / "g.txt"], tmp_path / "c", tokenizer_config, num_workers=2, **kwargs)
    assert shard_bytes(tmp_path / "a") == shard_bytes(tmp_path / "c")
    assert meta["shards"] == shard_layout.read_metadata(tmp_path / "a")["shards"]
    # A different seed gives different examples.
    build(
        [tmp_path / "g.txt"],
        tmp_path / "d",
        tokenizer_config,
        max_seq_length=24,
        num_shards=3,
        seed=12,
    )
    assert shard_bytes(tmp_path / "a") != shard_bytes(tmp_path / "d")


def test_resume_rebuilds_only_missing_shard(tmp_path, tokenizer_config):
    write_corpus(tmp_path / "h.txt", lines=600)
    out = tmp_path / "out"
    first = build([tmp_path / "h.txt"], out, tokenizer_config, num_shards=3)
    before = shard_bytes(out)
    names = sorted(before)
    mtimes = {n: os.stat(out / n).st_mtime_ns for n in names}

    os.remove(out / names[1])
    os.remove(out / (names[1] + ".json"))
    leftover = out / f".tmp-{names[1]}-99999"
    leftover.write_bytes(b"half-written garbage")
    messages = []
    second = build(
        [tmp_path / "h.txt"], out, tokenizer_config, num_shards=3, progress=messages.append
    )

    assert not leftover.exists()
    assert shard_bytes(out) == before
    assert os.stat(out / names[0]).st_mtime_ns == mtimes[names[0]]
    assert os.stat(out / names[2]).st_mtime_ns == mtimes[names[2]]
    assert second["reused_shards"] == 2 and any("reusing 2" in m for m in messages)
    assert second["shards"] == first["shards"]
    sidecar = json.loads((out / (names[1] + ".json")).read_text())
    assert sidecar["num_examples"] == first["shards"][1]["num_examples"]
    assert sidecar["fingerprint"] == first["build"]["fingerprint"]

    # A different build into the same directory is refused; nothing is deleted.
    with pytest.raises(ShardError, match="different build.*max_seq_length"):
        build([tmp_path / "h.txt"], out, tokenizer_config, num_shards=3, max_seq_length=20)
    with pytest.raises(ShardError, match="different build"):
        build([tmp_path / "h.txt"], out, tokenizer_config, num_shards=2)
    assert shard_bytes(out) == before


def test_a_copied_or_touched_corpus_reuses_its_shards(tmp_path, tokenizer_config):
    write_corpus(tmp_path / "h.txt", lines=300)
    out = tmp_path / "out"
    first = build([tmp_path / "h.txt"], out, tokenizer_config, num_shards=2)
    before = shard_bytes(out)
    assert [s["sha256"] for s in first["sources"]] == [
        hashlib.sha256((tmp_path / "h.txt").read_bytes()).hexdigest()
    ]
    # Copied elsewhere, with a new modification time: the same text, the same shards.
    (tmp_path / "copy").mkdir()
    copy = tmp_path / "copy" / "h.txt"
    copy.write_bytes((tmp_path / "h.txt").read_bytes())
    os.utime(copy, ns=(1, 10**18))
    second = build([copy], out, tokenizer_config, num_shards=2)
    assert second["reused_shards"] == 2 and shard_bytes(out) == before
    assert second["build"]["fingerprint"] == first["build"]["fingerprint"]
    # An edit of the same size is another build, refused; nothing is deleted.
    text = copy.read_bytes()
    copy.write_bytes(text.replace(b" ", b"\n", 1))
    with pytest.raises(ShardError, match="different build .*different input text"):
        build([copy], out, tokenizer_config, num_shards=2)
    assert shard_bytes(out) == before


def test_shards_fingerprinted_by_input_paths_and_times_are_kept(tmp_path, tokenizer_config):
    # Builds recorded before content fingerprints hashed the build parameters with each
    # input's [path, size, mtime_ns]: such a directory is reused and gets the new fingerprint.
    corpus = tmp_path / "h.txt"
    write_corpus(corpus, lines=300)
    out = tmp_path / "out"
    meta = build([corpus], out, tokenizer_config, num_shards=2)
    before = shard_bytes(out)
    params = {
        k: v
        for k, v in meta["build"].items()
        if k not in ("fingerprint", "invalid_utf8", "tokenizer_config")
    }
    stat = os.stat(corpus)
    params["sources"] = [[str(corpus), stat.st_size, stat.st_mtime_ns]]
    earlier = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()
    assert earlier != meta["build"]["fingerprint"]
    for path in [out / "metadata.json", *out.glob("pretrain_data*.json")]:
        record = json.loads(path.read_text())
        record["build"]["fingerprint"] = earlier
        if "fingerprint" in record:
            record["fingerprint"] = earlier
        path.write_text(json.dumps(record))

    # Planning alone records the current fingerprint in metadata.json, so an interrupted
    # rebuild does not leave the directory recognisable only by the earlier form.
    shard_build.plan_build(
        [str(corpus)], str(out), tokenizer_config, max_seq_length=16, num_shards=2
    )
    recorded = json.loads((out / "metadata.json").read_text())["build"]["fingerprint"]
    assert recorded == meta["build"]["fingerprint"]
    again = build([corpus], out, tokenizer_config, num_shards=2)
    assert again["reused_shards"] == 2 and shard_bytes(out) == before
    for path in [out / "metadata.json", *out.glob("pretrain_data*.json")]:
        assert json.loads(path.read_text())["build"]["fingerprint"] == meta["build"]["fingerprint"]
    # Once touched, only the content fingerprint matches, and it now does.
    os.utime(corpus, ns=(1, 10**18))
    assert build([corpus], out, tokenizer_config, num_shards=2)["reused_shards"] == 2


def _record_start(data, offset):
    """Where the checksummed part holding `offset` starts: a TFRecord is an 8-byte length and
    its 4-byte CRC, then the data and its 4-byte CRC (TensorFlow names that part's offset)."""
    start = 0
    while True:
        length = int.from_bytes(data[start : start + 8], "little")
        end = start + 12 + length + 4
        if offset < end:
            return start if offset < start + 12 else start + 12
        start = end


def _flip(path, offset):
    data = bytearray(open(path, "rb").read())
    data[offset] ^= 0x55
    open(path, "wb").write(bytes(data))


def test_a_shard_corrupted_in_place_is_named_and_rebuilt(tmp_path, tokenizer_config):
    write_corpus(tmp_path / "h.txt", lines=600)
    out = tmp_path / "out"
    build([tmp_path / "h.txt"], out, tokenizer_config, num_shards=2)
    before = shard_bytes(out)
    names = sorted(before)
    sidecar = json.loads((out / (names[1] + ".json")).read_text())
    assert sidecar["crc32"] == zlib.crc32(before[names[1]])
    assert sidecar["mtime_ns"] == os.stat(out / names[1]).st_mtime_ns
    offset = len(before[names[1]]) // 2
    _flip(out / names[1], offset)  # same size, a new modification time
    assert os.path.getsize(out / names[1]) == len(before[names[1]])
    messages = []
    meta = build(
        [tmp_path / "h.txt"], out, tokenizer_config, num_shards=2, progress=messages.append
    )
    expected = _record_start(before[names[1]], offset)
    assert messages[0] == (
        f"Shard {out / names[1]} is damaged (corrupted record at byte {expected}): rebuilding it."
    )
    assert meta["reused_shards"] == 1 and shard_bytes(out) == before


def test_a_truncated_shard_is_named_and_rebuilt(tmp_path, tokenizer_config):
    write_corpus(tmp_path / "h.txt", lines=300)
    out = tmp_path / "out"
    build([tmp_path / "h.txt"], out, tokenizer_config, num_shards=1)
    before = shard_bytes(out)
    (name,) = before
    os.truncate(out / name, 100)
    messages = []
    build([tmp_path / "h.txt"], out, tokenizer_config, num_shards=1, progress=messages.append)
    assert messages[0] == (
        f"Shard {out / name} is damaged (truncated or extended: 100 bytes, "
        f"{len(before[name]):,} when built): rebuilding it."
    )
    assert shard_bytes(out) == before


def test_checking_a_finished_shard_reads_it_only_when_its_time_changed(
    tmp_path, tokenizer_config, monkeypatch
):
    write_corpus(tmp_path / "h.txt", lines=300)
    out = tmp_path / "out"
    build([tmp_path / "h.txt"], out, tokenizer_config, num_shards=1)
    (name,) = shard_bytes(out)
    sidecar_path = out / (name + ".json")
    reads = []
    original = shard_verification.file_crc32
    monkeypatch.setattr(
        shard_verification, "file_crc32", lambda path: reads.append(path) or original(path)
    )
    assert build([tmp_path / "h.txt"], out, tokenizer_config, num_shards=1)["reused_shards"] == 1
    assert reads == []  # size and time as recorded: one stat
    # Touched but unchanged (copied, restored from a backup): read once, its new time recorded.
    os.utime(out / name, ns=(1_000_000_000, 2_000_000_000))
    assert build([tmp_path / "h.txt"], out, tokenizer_config, num_shards=1)["reused_shards"] == 1
    assert reads == [str(out / name)]
    assert json.loads(sidecar_path.read_text())["mtime_ns"] == 2_000_000_000
    build([tmp_path / "h.txt"], out, tokenizer_config, num_shards=1)
    assert len(reads) == 1
    # A sidecar written before checksums: the records are checked once and the checksum added.
    old = json.loads(sidecar_path.read_text())
    del old["crc32"], old["mtime_ns"]
    sidecar_path.write_text(json.dumps(old))
    assert build([tmp_path / "h.txt"], out, tokenizer_config, num_shards=1)["reused_shards"] == 1
    upgraded = json.loads(sidecar_path.read_text())
    assert upgraded["crc32"] == zlib.crc32((out / name).read_bytes())


def test_a_shard_damaged_without_a_trace_is_found_by_reading_it(tmp_path, tokenizer_config):
    write_corpus(tmp_path / "h.txt", lines=600)
    out = tmp_path / "out"
    build([tmp_path / "h.txt"], out, tokenizer_config, num_shards=2)
    names = sorted(shard_bytes(out))
    assert shard_verification.find_damaged_shard(str(out)) is None
    data = (out / names[0]).read_bytes()
    stat = os.stat(out / names[0])
    _flip(out / names[0], 40)
    os.utime(out / names[0], ns=(stat.st_atime_ns, stat.st_mtime_ns))  # bit rot keeps the time
    damaged = shard_verification.find_damaged_shard(str(out))
    assert damaged.path == str(out / names[0])
    assert damaged.problem == f"corrupted record at byte {_record_start(data, 40)}"


def test_invalid_utf8_error_names_file_line_and_offset(tmp_path, tokenizer_config):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"w1 w2\nw3 w4\nw5 \xff w6\nw7\n\nw8 \xc3\n")
    with pytest.raises(ShardError) as err:
        build([bad], tmp_path / "out", tokenizer_config)
    message = str(err.value)
    assert str(bad) in message and "line 3" in message and "byte offset 15" in message
    assert "0xff" in message

    messages = []
    meta = build(
        [bad], tmp_path / "out", tokenizer_config, invalid_utf8="replace", progress=messages.append
    )
    assert meta["replaced_lines"] == 2 and meta["num_examples"] >= 1
    assert any("2 line(s)" in m for m in messages)
    content = [
        t
        for e in read_examples(tmp_path / "out", 16)
        for t in e["input_ids"][: int(e["input_mask"].sum())]
    ]
    # The tokenizer drops U+FFFD (BERT's text cleaning): no [UNK] from the bad
    # bytes, and the words around them survive.
    assert content.count(UNK) == 0
    words = sorted(t for t in content if t not in (CLS, SEP))
    assert words == sorted(WORD_ID[f"w{i}"] for i in range(1, 9))


def test_missing_and_empty_inputs(tmp_path, tokenizer_config):
    missing = str(tmp_path / "nope.txt")
    with pytest.raises(ShardError, match="nope.txt"):
        build([missing], tmp_path / "out", tokenizer_config)
    pattern = str(tmp_path / "none" / "*.txt")
    with pytest.raises(ShardError, match="matches no files") as err:
        build([pattern], tmp_path / "out", tokenizer_config)
    assert pattern in str(err.value)
    (tmp_path / "empty.txt").write_bytes(b"")
    with pytest.raises(ShardError, match="empty.txt"):
        build([tmp_path / "empty.txt"], tmp_path / "out", tokenizer_config)
    (tmp_path / "blank.txt").write_text("\n  \n\t\n", encoding="utf-8")
    with pytest.raises(ShardError, match="blank.txt"):
        build([tmp_path / "blank.txt"], tmp_path / "out2", tokenizer_config)
    with pytest.raises(ShardError, match="max_seq_length"):
        build([tmp_path / "blank.txt"], tmp_path / "out3", tokenizer_config, max_seq_length=4)
    with pytest.raises(ShardError, match="metadata.json"):
        shard_layout.read_metadata(tmp_path)


def test_text_range_splits_at_a_document_boundary_into_disjoint_parts(tmp_path, tokenizer_config):
    # 20 documents; document d is three lines of the one word w<d>.
    text = "\n\n".join("\n".join([WORDS[d]] * 3) for d in range(20)) + "\n"
    (tmp_path / "docs.txt").write_text(text, encoding="utf-8")

    def words(output_dir):
        return {
            t
            for e in read_examples(output_dir, 16)
            for t in e["input_ids"].tolist()
            if t not in (PAD, CLS, SEP)
        }

    whole = build([tmp_path / "docs.txt"], tmp_path / "whole", tokenizer_config)
    train = build(
        [tmp_path / "docs.txt"],
        tmp_path / "train",
        tokenizer_config,
        text_range=(0.0, 0.9),
        num_shards=2,
    )
    held_out = build(
        [tmp_path / "docs.txt"], tmp_path / "eval", tokenizer_config, text_range=(0.9, 1.0)
    )
    train_words, eval_words = words(tmp_path / "train"), words(tmp_path / "eval")
    assert not train_words & eval_words
    assert train_words | eval_words == words(tmp_path / "whole") == set(ids_of(WORDS[:20]))
    # 229 bytes; 90% (byte 206) falls inside document 18 (bytes 204-216), so the
    # cut moves forward to that document's end: only document 19 is held out.
    assert eval_words == set(ids_of(WORDS[19:20]))
    assert train["build"]["fingerprint"] != whole["build"]["fingerprint"]
    assert held_out["text_bytes"] + train["text_bytes"] == whole["text_bytes"]
    # A range inside one line selects nothing, with its own error type.
    with pytest.raises(text_input.EmptyTextRange):
        build(
            [tmp_path / "docs.txt"], tmp_path / "none", tokenizer_config, text_range=(0.9999, 1.0)
        )


def test_normalization_is_recorded_and_earlier_builds_keep_their_fingerprint(
    tmp_path, tokenizer_config
):
    text = tmp_path / "corpus.txt"
    text.write_text(" ".join(WORDS[:6]) + "\n" + " ".join(WORDS[3:9]) + "\n", encoding="utf-8")
    folded = build([text], tmp_path / "casefold", tokenizer_config, num_shards=1)
    bert = build(
        [text], tmp_path / "bert", {**tokenizer_config, "normalization": "bert"}, num_shards=1
    )
    assert folded["normalization"] == "casefold" and bert["normalization"] == "bert"
    # A casefold build's fingerprint is computed as before the option existed (no key),
    # so its cached shards are reused; a bert build is another build.
    assert "normalization" not in folded["build"]
    assert bert["build"]["normalization"] == "bert"
    assert bert["build"]["fingerprint"] != folded["build"]["fingerprint"]


def test_last_document_fraction_read_backwards_across_blocks(tmp_path, monkeypatch):
    """The share of the corpus from its last blank line followed by text, in whole percent;
    a file's end ends a document; one document: None. Blocks of 7 bytes make the backward
    read cross block boundaries inside lines."""
    from electra_tf.data import text_input

    monkeypatch.setattr(text_input, "READ_BLOCK_BYTES", 7)

    def fraction(*texts):
        paths = []
        for i, text in enumerate(texts):
            path = tmp_path / f"c{i}.txt"
            path.write_bytes(text.encode())
            paths.append(str(path))
        return text_input.last_document_fraction(text_input.resolve_sources(paths))

    # 100 bytes: the blank line (byte 60) before the last document, trailing blanks after it.
    text = "a" * 59 + "\n" + "\n" + "b" * 34 + "\n\n  \n"
    assert len(text) == 100
    assert fraction(text) == 0.4
    assert fraction("x" * 49 + "\n" + "  \n" + "y" * 46 + "\n") == 0.5  # whitespace is blank
    assert fraction("one document\nof two lines\n") is None
    assert fraction("\n\nonly text after blank lines\n") is None
    # Two files: the last file is one document, 25 of the 100 bytes.
    assert fraction("a" * 74 + "\n", "b" * 24 + "\n") == 0.25
    assert fraction("a" * 98 + "\n", "b\n") == 0.02  # rounded up to a whole percent
