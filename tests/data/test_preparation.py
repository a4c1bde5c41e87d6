"""A run's vocabulary and shards, prepared and reused (electra_tf/data/preparation.py)."""

import hashlib
import os
import random
import shutil

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.config import ConfigError, preset
from electra_tf.data import shard_writer
from electra_tf.data.example_packing import ExampleBuilder
from electra_tf.data.preparation import PreparationError, prepare_pretraining_data
from electra_tf.tokenization import load_vocab
from electra_tf.vocab_learning import VocabOptions

LENGTH = 32
SEED = 3
SYLLABLES = ["ka", "to", "ri", "mu", "sen", "do", "la", "pi", "ne", "bor", "ex", "qua"]


def write_corpus(path, lines, seed):
    """`lines` lines of generated words; about one in eight is blank (a document end)."""
    rng = random.Random(seed)
    words = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(300)]
    text = "\n".join(
        ""
        if rng.random() < 0.12
        else " ".join(rng.choice(words) for _ in range(rng.randint(2, 12)))
        for _ in range(lines)
    )
    path.write_text(text + "\n", encoding="utf-8")
    return str(path)


def read_examples(paths):
    """{feature: int64 [n, L]} of every record of the shards."""
    features = {
        name: tf.io.FixedLenFeature([LENGTH], tf.int64)
        for name in ("input_ids", "input_mask", "segment_ids")
    }
    rows = {name: [] for name in features}
    for record in tf.data.TFRecordDataset(paths):
        example = tf.io.parse_single_example(record, features)
        for name in features:
            rows[name].append(example[name].numpy())
    return {name: np.stack(value) for name, value in rows.items()}


def expected_count(path, tokenizer):
    """Examples that packing the file's lines into one shard (shard 0) gives."""
    builder = ExampleBuilder(LENGTH, shard_writer._shard_rng(SEED, 0, "examples"))
    count = 0
    with open(path, encoding="utf-8") as f:
        lines = [line.strip() for line in f.read().split("\n")] + [""]  # the file end ends a doc
    for line in lines:
        if line:
            example = builder.add_sentence(tokenizer.tokenize([line]).flat_values.numpy())
        else:
            example = builder.end_document()
        count += example is not None
    return count


def test_prepares_the_vocabulary_and_shards_then_reuses_them(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.txt", lines=400, seed=0)
    held_out = write_corpus(tmp_path / "held_out.txt", lines=120, seed=1)
    config = preset("tiny", max_seq_length=LENGTH, seed=SEED)
    checked = []

    def check_config(config):
        # Called once the vocabulary is known, before any shard is built.
        checked.append(config.model.vocab_size)
        assert not any(name.startswith(("shards-", "eval-")) for name in os.listdir(data_dir))

    data_dir = str(tmp_path / "data")
    messages = []
    data = prepare_pretraining_data(
        config,
        [corpus],
        data_dir,
        vocab_options=VocabOptions(vocab_size=120),
        eval_corpus=[held_out],
        num_shards=1,
        check_config=check_config,
        progress=messages.append,
    )

    # The vocabulary has the size asked for (WordPiece learning may fall a few tokens short,
    # never over), and the config follows the file.
    size = len(load_vocab(data.vocab_file))
    assert 108 <= size <= 120 and "-120-" in os.path.basename(data.vocab_file)
    assert data.tokenizer.vocab_size == config.model.vocab_size == size and checked == [size]
    assert os.path.dirname(data.vocab_file) == data_dir
    # Shards exist, and hold exactly the examples packing the text implies.
    assert len(data.shard_paths) == 1 and all(os.path.isfile(p) for p in data.shard_paths)
    assert data.eval_shard_dir is not None and not data.nothing_held_out
    assert len(data.eval_shard_paths) == 1 and os.path.isfile(data.eval_shard_paths[0])
    train = read_examples(data.shard_paths)
    assert len(train["input_ids"]) == data.num_examples == expected_count(corpus, data.tokenizer)
    evaluation = read_examples(data.eval_shard_paths)
    assert (
        len(evaluation["input_ids"])
        == data.num_eval_examples
        == expected_count(held_out, data.tokenizer)
        > 0
    )
    assert (train["input_ids"][:, 0] == data.tokenizer.cls_id).all()
    assert (train["input_ids"] < size).all() and (train["input_mask"].sum(axis=1) > 2).all()
    assert any(m.startswith("Learning a 120-token WordPiece vocabulary") for m in messages)
    assert (
        f"Training shards: {data.num_examples:,} examples of {LENGTH} tokens in 1 file(s)."
        in messages
    )

    # A second call finds everything: no vocabulary learned, no shard rewritten.
    times = {p: os.stat(p).st_mtime_ns for p in data.shard_paths + data.eval_shard_paths}
    messages.clear()
    again = prepare_pretraining_data(
        preset("tiny", max_seq_length=LENGTH, seed=SEED),
        [corpus],
        data_dir,
        vocab_options=VocabOptions(vocab_size=120),
        eval_corpus=[held_out],
        num_shards=1,
        progress=messages.append,
    )
    assert f"Vocabulary: {data.vocab_file} (cached)" in messages
    assert not any(m.startswith("Learning") or " done: " in m for m in messages)
    assert sum("reusing 1 finished shard(s)" in m for m in messages) == 2
    assert {p: os.stat(p).st_mtime_ns for p in again.shard_paths + again.eval_shard_paths} == times
    assert (
        again.vocab_file,
        again.shard_dir,
        again.eval_shard_dir,
        again.num_examples,
        again.num_eval_examples,
    ) == (
        data.vocab_file,
        data.shard_dir,
        data.eval_shard_dir,
        data.num_examples,
        data.num_eval_examples,
    )


def test_held_out_fraction_and_errors(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(
        "\n".join(
            [
                "[PAD]",
                "[UNK]",
                "[CLS]",
                "[SEP]",
                "[MASK]",
                *SYLLABLES,
                *(f"##{s}" for s in SYLLABLES),
            ]
        )
        + "\n"
    )
    corpus = write_corpus(tmp_path / "corpus.txt", lines=300, seed=2)
    config = preset("tiny", max_seq_length=LENGTH, seed=SEED)
    data = prepare_pretraining_data(
        config, [corpus], str(tmp_path / "data"), vocab_file=str(vocab), eval_fraction=0.2
    )
    assert data.vocab_file == str(vocab) and config.model.vocab_size == len(load_vocab(str(vocab)))
    assert data.shard_dir.endswith("-holdout0.2") and data.num_eval_examples > 0
    assert data.num_examples > 2 * data.num_eval_examples
    # One document: the held-out part falls inside it, so nothing is held out.
    one = tmp_path / "one.txt"
    one.write_text("\n".join(" ".join(SYLLABLES[i:] + SYLLABLES[:i]) for i in range(12)) + "\n")
    data = prepare_pretraining_data(
        config, [str(one)], str(tmp_path / "one"), vocab_file=str(vocab), eval_fraction=0.2
    )
    assert data.nothing_held_out and data.eval_shard_dir is None and data.num_examples > 0
    assert data.eval_fraction_needed is None  # one document: no fraction holds one out
    # Two documents, the last one long: the fraction the run's note suggests holds it out.
    two = tmp_path / "two.txt"
    first = " ".join(SYLLABLES[:6]) + "\n"
    two.write_text(first + "\n" + one.read_text())
    data = prepare_pretraining_data(
        config, [str(two)], str(tmp_path / "two"), vocab_file=str(vocab), eval_fraction=0.2
    )
    size = two.stat().st_size
    blank = len(first)  # the blank line that ends the first document starts here
    expected = np.ceil(100 * (size - blank) / size) / 100
    assert data.nothing_held_out and data.eval_fraction_needed == pytest.approx(expected)
    data = prepare_pretraining_data(
        config,
        [str(two)],
        str(tmp_path / "two"),
        vocab_file=str(vocab),
        eval_fraction=data.eval_fraction_needed,
    )
    assert not data.nothing_held_out and data.num_eval_examples > 0 and data.num_examples > 0
    # A failed build names its part and keeps the shard builder's message.
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(PreparationError, match="all files are empty") as error:
        prepare_pretraining_data(
            config, [str(tmp_path / "empty.txt")], str(tmp_path / "e"), vocab_file=str(vocab)
        )
    assert error.value.part == "training"
    with pytest.raises(ConfigError, match="--max_seq_length"):
        prepare_pretraining_data(
            preset("tiny", max_seq_length=4096),
            [corpus],
            str(tmp_path / "x"),
            vocab_file=str(vocab),
        )


def test_corpus_folders_are_named_by_content(tmp_path):
    from electra_tf.data.preparation import corpus_key, corpus_path

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    original, copy = tmp_path / "a" / "wiki.txt", tmp_path / "b" / "wiki.txt"
    original.write_text("첫 문서의 문장.\n\n둘째 문서.\n", encoding="utf-8")
    copy.write_bytes(original.read_bytes())
    os.utime(copy, ns=(1, 10**18))
    cache = str(tmp_path / "digests.json")
    key = corpus_key([str(original)], cache)
    assert key.startswith("wiki-") and len(key) == len("wiki-") + 8
    assert corpus_key([str(copy)], cache) == key
    copy.write_text("첫 문서의 문장!\n\n둘째 문서.\n", encoding="utf-8")  # same size
    assert corpus_key([str(copy)], cache) != key

    runs = tmp_path / "runs"
    assert corpus_path(str(runs), [str(original)], "small-{key}", cache) == str(
        runs / f"small-{key}"
    )
    # A run that an earlier release named by path, size and mtime is found and resumed.
    listing = f"{original}\t{os.path.getsize(original)}\t{os.path.getmtime(original)}"
    earlier = runs / f"small-wiki-{hashlib.sha256(listing.encode()).hexdigest()[:8]}"
    earlier.mkdir(parents=True)
    (earlier / "config.json").write_text("{}")
    found = corpus_path(str(runs), [str(original)], "small-{key}", cache)
    assert found == str(runs / f"small-{key}") and os.path.islink(found)
    assert os.path.realpath(found) == os.path.realpath(earlier)
    # The link keeps finding it once the corpus is touched (its path key changes).
    os.utime(original, ns=(1, 10**18))
    found = corpus_path(str(runs), [str(original)], "small-{key}", cache)
    assert os.path.isfile(os.path.join(found, "config.json"))
    # Another corpus of the same name gets its own folder.
    assert corpus_path(str(runs), [str(copy)], "small-{key}", cache) != found
    # The same text renamed finds the folder too, and keeps finding it.
    renamed = tmp_path / "a" / "wiki_ko.txt"
    original.rename(renamed)
    found = corpus_path(str(runs), [str(renamed)], "small-{key}", cache)
    assert os.path.basename(found) == f"small-wiki_ko-{key.split('-')[1]}"
    assert os.path.realpath(found) == os.path.realpath(earlier)
    assert corpus_path(str(runs), [str(renamed)], "small-{key}", cache) == found
    # Another model size, or two candidate folders, do not count.
    assert not os.path.exists(corpus_path(str(runs), [str(renamed)], "base-{key}", cache))
    (runs / f"small-news-{key.split('-')[1]}").mkdir()
    again = tmp_path / "a" / "wiki_ko2.txt"
    renamed.rename(again)
    assert not os.path.exists(corpus_path(str(runs), [str(again)], "small-{key}", cache))


def test_links_point_at_the_folder_and_a_dangling_one_is_replaced(tmp_path):
    from electra_tf.data.preparation import corpus_key, corpus_path

    corpus = tmp_path / "wiki.txt"
    corpus.write_text("한 문서.\n", encoding="utf-8")
    cache = str(tmp_path / "digests.json")
    runs = tmp_path / "runs"
    folder = corpus_path(str(runs), [str(corpus)], "small-{key}", cache)
    os.makedirs(folder)
    # Renamed twice: both new names link to the folder itself, not one to the other.
    for name in ("wiki_ko.txt", "wiki_ko_v2.txt"):
        corpus = corpus.rename(tmp_path / name)
        found = corpus_path(str(runs), [str(corpus)], "small-{key}", cache)
        assert os.readlink(found) == os.path.basename(folder)
    # Its folder removed, a link is replaced by a new folder at the next run.
    shutil.rmtree(folder)
    os.remove(os.path.join(runs, f"small-wiki_ko-{corpus_key([str(corpus)], cache)[-8:]}"))
    fresh = corpus_path(str(runs), [str(corpus)], "small-{key}", cache)
    assert fresh == found and not os.path.lexists(fresh)
    os.makedirs(fresh)
    assert os.path.isdir(fresh) and not os.path.islink(fresh)
