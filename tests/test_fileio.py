"""Local paths and URLs (electra_tf/fileio.py), and shard builds on URLs.

TensorFlow's in-memory `ram://` file system stands in for `gs://`: both go
through `tf.io.gfile`.
"""

import os
import random

import tensorflow as tf

from electra_tf import fileio
from electra_tf.data.shard_build import write_shards
from electra_tf.data.shard_layout import DIGEST_CACHE_FILE, read_metadata, shard_paths

WORDS = [f"w{i}" for i in range(100)]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS


def test_urls_and_local_paths_behave_alike(tmp_path):
    for root in (str(tmp_path / "local"), f"ram://{tmp_path.name}/files"):
        fileio.makedirs(os.path.join(root, "sub"))
        fileio.makedirs(os.path.join(root, "sub"))  # exists already: no error
        for name, data in (("a.txt", b"one\ntwo\n"), ("b.txt", b"three\n")):
            with fileio.open_file(os.path.join(root, name), "wb") as f:
                f.write(data)
        with fileio.open_file(os.path.join(root, "c.json"), "w") as f:
            f.write('{"\u00e9": 1}')
        a, sub = os.path.join(root, "a.txt"), os.path.join(root, "sub")
        assert fileio.isfile(a) and not fileio.isdir(a)
        assert fileio.isdir(sub) and not fileio.isfile(sub)
        assert sorted(fileio.listdir(root)) == ["a.txt", "b.txt", "c.json", "sub"]
        assert sorted(fileio.glob(os.path.join(root, "*.txt"))) == [a, os.path.join(root, "b.txt")]
        assert fileio.getsize(a) == 8
        with fileio.open_file(a, "rb") as f:
            f.seek(4)
            assert f.read(3) == b"two"
        with fileio.open_file(os.path.join(root, "c.json"), "r") as f:
            assert f.read() == '{"\u00e9": 1}'
        fileio.replace(os.path.join(root, "b.txt"), a)
        with fileio.open_file(a, "rb") as f:
            assert f.read() == b"three\n"
        fileio.remove(a)
        assert not fileio.exists(a)
        assert fileio.abspath(root) == root
    assert fileio.abspath("x") == os.path.abspath("x")
    # Local files keep nanosecond modification times (build fingerprints use them).
    path = str(tmp_path / "local" / "c.json")
    assert fileio.stat(path).mtime_ns == os.stat(path).st_mtime_ns


def write_corpus(write, rng):
    for name, lines in (("a.txt", 700), ("b.txt", 300)):
        text = "\n".join(
            ""
            if rng.random() < 0.08
            else " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 9)))
            for _ in range(lines)
        )
        write(name, text.encode("utf-8"))
    write("vocab.txt", ("\n".join(VOCAB) + "\n").encode("utf-8"))


def test_shards_read_and_written_through_urls_equal_local_ones(tmp_path):
    root = f"ram://{tmp_path.name}"
    tf.io.gfile.makedirs(f"{root}/text")

    def write_both(name, data):
        (tmp_path / name).write_bytes(data)
        with tf.io.gfile.GFile(f"{root}/text/{name}", "wb") as f:
            f.write(data)

    write_corpus(write_both, random.Random(0))
    kwargs = dict(max_seq_length=24, num_shards=3, seed=5, text_range=(0.1, 1.0))
    local = write_shards(
        [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")],
        str(tmp_path / "out"),
        {"vocab_file": str(tmp_path / "vocab.txt")},
        **kwargs,
    )
    remote = write_shards(
        [f"{root}/text/[ab].txt"], f"{root}/out", {"vocab_file": f"{root}/text/vocab.txt"}, **kwargs
    )
    assert remote["shards"] == local["shards"] and remote["num_examples"] > 0
    assert remote["sources"][0]["path"] == f"{root}/text/a.txt"
    assert remote["vocab_file"] == f"{root}/text/vocab.txt"
    assert remote == read_metadata(f"{root}/out")
    remote_paths = shard_paths(f"{root}/out")
    for local_path, remote_path in zip(shard_paths(str(tmp_path / "out")), remote_paths):
        with open(local_path, "rb") as f, tf.io.gfile.GFile(remote_path, "rb") as g:
            assert f.read() == g.read()
    # Only local inputs are read for their SHA-256, so only the local build caches digests.
    local_names = set(os.listdir(tmp_path / "out"))
    assert sorted(tf.io.gfile.listdir(f"{root}/out")) == sorted(local_names - {DIGEST_CACHE_FILE})
    assert DIGEST_CACHE_FILE in local_names

    # A re-run reuses the finished shards; a lost one is rebuilt.
    tf.io.gfile.remove(remote_paths[1])
    again = write_shards(
        [f"{root}/text/[ab].txt"], f"{root}/out", {"vocab_file": f"{root}/text/vocab.txt"}, **kwargs
    )
    assert again["reused_shards"] == 2 and again["shards"] == local["shards"]
