"""Version directories under <export_base>/<model_name>/ and their atomic publication."""

import os

import pytest

from electra_tf.artifacts.serving_dir import (
    STAGING_PREFIX,
    ExportLayoutError,
    latest_version_dir,
    list_versions,
    next_version,
    publish_version,
)


def _write_marker(text):
    def write(staging):
        with open(os.path.join(staging, "saved_model.pb"), "w") as f:
            f.write(text)

    return write


def test_versions_increase_and_are_never_overwritten(tmp_path):
    base = str(tmp_path / "models" / "sst2")
    assert list_versions(base) == [] and next_version(base) == 1
    first = publish_version(base, _write_marker("one"))
    second = publish_version(base, _write_marker("two"))
    assert first == os.path.join(base, "1") and second == os.path.join(base, "2")
    os.makedirs(os.path.join(str(tmp_path), "plain"))
    plain_mode = os.stat(os.path.join(str(tmp_path), "plain")).st_mode & 0o777
    assert os.stat(first).st_mode & 0o777 == plain_mode  # not mkdtemp's private 0700
    os.makedirs(os.path.join(base, "10"))
    os.makedirs(os.path.join(base, "notes"))  # not a version: TF Serving ignores it
    assert list_versions(base) == [1, 2, 10]
    assert publish_version(base, _write_marker("three")) == os.path.join(base, "11")
    assert latest_version_dir(base) == os.path.join(base, "11")
    with open(os.path.join(first, "saved_model.pb")) as f:
        assert f.read() == "one"
    with pytest.raises(ExportLayoutError, match="already exists"):
        publish_version(base, _write_marker("again"), version=2)
    with pytest.raises(ExportLayoutError, match="positive"):
        publish_version(base, _write_marker("zero"), version=0)
    assert publish_version(base, _write_marker("five"), version=5) == os.path.join(base, "5")
    with open(os.path.join(base, "2", "saved_model.pb")) as f:
        assert f.read() == "two"
    assert not [n for n in os.listdir(base) if n.startswith(".")]


def test_half_written_version_is_invisible_and_cleaned_up(tmp_path):
    base = str(tmp_path / "m")
    publish_version(base, _write_marker("one"))
    seen = {}

    def failing_write(staging):
        _write_marker("partial")(staging)
        # What a server polling the directory sees while the version is written.
        seen["names"] = sorted(os.listdir(base))
        seen["versions"] = list_versions(base)
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        publish_version(base, failing_write)
    assert seen["versions"] == [1]
    staging = [n for n in seen["names"] if n != "1"]
    assert len(staging) == 1 and staging[0].startswith(STAGING_PREFIX)
    assert sorted(os.listdir(base)) == ["1"]  # nothing left behind, version 1 intact
    assert next_version(base) == 2


@pytest.mark.parametrize("writer", ["savedmodel", "python"])
def test_an_export_on_a_full_disk_stops_in_one_line_and_leaves_nothing(tmp_path, writer):
    """TensorFlow's SavedModel writer (ResourceExhaustedError) and Python's (OSError) on a
    4 MB tmpfs (or, without one, a write that raises ENOSPC): one line, no staging left,
    the earlier version intact; with room the same call publishes the next version."""
    import tensorflow as tf
    from disk_support import no_space, small_disk

    disk = tmp_path / "disk"
    with small_disk(disk, "4m") as mounted:
        base = str(disk / "model")
        assert publish_version(base, lambda staging: None) == os.path.join(base, "1")
        size = [8 << 20]

        def write(staging):
            if not mounted and size[0] > 1 << 20:
                raise no_space(os.path.join(staging, "variables"))
            if writer == "savedmodel":
                module = tf.Module()
                module.v = tf.Variable(tf.zeros([size[0] // 4]))
                tf.saved_model.save(module, staging)
            else:
                with open(os.path.join(staging, "weights.bin"), "wb") as f:
                    f.write(b"\0" * size[0])

        with pytest.raises(ExportLayoutError) as refused:
            publish_version(base, write)
        assert str(refused.value) == (
            f"Could not write the export in {base}: No space left on device. Nothing of it "
            "was left and earlier versions are intact; free some space and re-run the same "
            "command."
        )
        assert sorted(os.listdir(base)) == ["1"]
        size[0] = 1 << 16
        assert publish_version(base, write) == os.path.join(base, "2")
