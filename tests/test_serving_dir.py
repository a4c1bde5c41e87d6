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
