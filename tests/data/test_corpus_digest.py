"""Content digests of corpus files and their stat-keyed cache."""

import hashlib
import json
import os

from electra_tf.data import corpus_digest
from electra_tf.data.corpus_digest import corpus_digests, file_digest


def _sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_digests_are_the_sha256_of_each_file(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus_digest, "_BLOCK_BYTES", 7)  # many blocks per file
    a, b, empty = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "empty.txt"
    a.write_text("첫 문장입니다.\nThe second line.\n", encoding="utf-8")
    b.write_bytes(bytes(range(256)) * 3)
    empty.write_bytes(b"")
    assert corpus_digests([str(a), str(b), str(empty)]) == [_sha256(a), _sha256(b), _sha256(empty)]
    assert file_digest(str(empty)) == (
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )


def test_an_unchanged_file_is_not_read_again(tmp_path):
    text, cache = tmp_path / "corpus.txt", tmp_path / "cache" / "digests.json"
    text.write_text("one line\n", encoding="utf-8")
    first = corpus_digests([str(text)], str(cache))
    entry = json.loads(cache.read_text())["files"][str(text)]
    assert entry == {
        "bytes": 9,
        "mtime_ns": os.stat(text).st_mtime_ns,
        "sha256": _sha256(text),
    }
    # Same size and modification time: the cached digest stands, the file is not read.
    stat = os.stat(text)
    text.write_text("one lime\n", encoding="utf-8")
    os.utime(text, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert corpus_digests([str(text)], str(cache)) == first


def test_a_touched_file_is_read_again_and_keeps_its_digest(tmp_path):
    text, cache = tmp_path / "corpus.txt", tmp_path / "digests.json"
    text.write_text("one line\n", encoding="utf-8")
    first = corpus_digests([str(text)], str(cache))
    os.utime(text, ns=(1, 10**18))
    assert corpus_digests([str(text)], str(cache)) == first
    assert json.loads(cache.read_text())["files"][str(text)]["mtime_ns"] == 10**18
    # An edit of the same size changes the digest.
    text.write_text("one lime\n", encoding="utf-8")
    os.utime(text, ns=(1, 2 * 10**18))
    assert corpus_digests([str(text)], str(cache)) == [_sha256(text)] != first


def test_an_unreadable_cache_is_ignored_and_replaced(tmp_path):
    text, cache = tmp_path / "corpus.txt", tmp_path / "digests.json"
    text.write_text("one line\n", encoding="utf-8")
    stat = os.stat(text)
    bad_digest = {str(text): {"bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": ""}}
    for garbage in (
        "{not json",
        "[1, 2]",
        '{"files": 3}',
        '{"files": {"x": 1}}',
        json.dumps({"files": bad_digest}),
    ):
        cache.write_text(garbage)
        assert corpus_digests([str(text)], str(cache)) == [_sha256(text)]
    assert json.loads(cache.read_text())["files"][str(text)]["sha256"] == _sha256(text)


def test_a_cache_that_cannot_be_written_is_skipped(tmp_path):
    text = tmp_path / "corpus.txt"
    text.write_text("one line\n", encoding="utf-8")
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a directory")
    assert corpus_digests([str(text)], str(blocker / "digests.json")) == [_sha256(text)]


def test_large_reads_report_progress(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus_digest, "_REPORT_BYTES", 10)
    small, large = tmp_path / "small.txt", tmp_path / "large.txt"
    small.write_text("tiny\n")
    large.write_text("x" * 2000 + "\n")
    messages = []
    corpus_digests([str(small)], progress=messages.append)
    assert messages == []
    corpus_digests([str(small), str(large)], progress=messages.append)
    assert messages == ["Reading 0 MB of corpus text to fingerprint its content..."]


def test_files_behind_urls_are_not_read(tmp_path):
    import tensorflow as tf

    local, remote = tmp_path / "local.txt", "ram://corpus-digest-test/remote.txt"
    local.write_text("here\n")
    with tf.io.gfile.GFile(remote, "w") as f:
        f.write("there\n")
    cache = tmp_path / "digests.json"
    assert corpus_digests([remote, str(local)], str(cache)) == [None, _sha256(local)]
    assert list(json.loads(cache.read_text())["files"]) == [str(local)]
