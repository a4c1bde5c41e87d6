"""Hugging Face weights as the hub ships them: PyTorch `.bin` (both layouts), `tf_model.h5`, shards.

The real files in `fixtures/hf_checkpoints/` were written by transformers and torch themselves
(`fixtures/make_hf_checkpoints.py`); the hostile and hand-made ones below are assembled opcode
by opcode, so no test needs torch.
"""

import importlib.util
import json
import os
import pickle
import shutil
import struct
import subprocess
import sys
import tracemalloc
import zipfile

import numpy as np
import pytest
from transformers_support import needs_transformers, transformers_outputs

from electra_tf.commands.convert import run as convert
from electra_tf.interop import checkpoints, huggingface, tf_h5, torch_pickle
from electra_tf.interop.torch_pickle import TorchPickleError, read_state_dict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "hf_checkpoints")
EXPECTED = np.load(os.path.join(FIXTURES, "expected.npz"))
REFUSED = "only tensors and the containers of a state dict are read"


def _inputs():
    return {
        "input_ids": EXPECTED["input_ids"].astype(np.int32),
        "input_mask": EXPECTED["input_mask"].astype(np.int32),
        "segment_ids": EXPECTED["segment_ids"].astype(np.int32),
    }


def _logits(directory):
    """Our discriminator's and generator's logits for the fixture inputs, from `directory`."""
    loaded = checkpoints.load_checkpoint(directory)
    generator, discriminator = checkpoints.build_models(loaded)
    disc = discriminator(_inputs(), training=False)["logits"].numpy()
    positions = EXPECTED["masked_lm_positions"].astype(np.int32)
    gen = generator({**_inputs(), "masked_lm_positions": positions}, training=False).numpy()
    return loaded, disc, gen


# --- transformers' own files -----------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, layout",
    [
        ("zip", "PyTorch, zip layout"),
        ("legacy", "PyTorch, legacy layout"),
        ("h5", "transformers' TensorFlow weights"),
    ],
)
def test_each_format_gives_the_logits_transformers_computed(kind, layout):
    directory = os.path.join(FIXTURES, kind)
    loaded, disc, gen = _logits(directory)
    weights = "tf_model.h5" if kind == "h5" else "pytorch_model.bin"
    assert loaded.notes[:2] == [
        f"weights from {directory}/{weights} ({layout})",
        f"generator weights from {directory}/generator/{weights} ({layout})",
    ]
    assert loaded.has_generator and loaded.model.embedding_size == 16
    # PyTorch's logits; for tf_model.h5 also the TensorFlow model's, read back from that file.
    references = ["", "h5_"] if kind == "h5" else [""]
    for prefix in references:
        np.testing.assert_allclose(disc, EXPECTED[f"{prefix}disc_logits"], atol=1e-5, rtol=0)
        np.testing.assert_allclose(gen, EXPECTED[f"{prefix}gen_logits"], atol=1e-5, rtol=0)


def test_the_formats_hold_the_same_weights_and_shards_join_up():
    for sub in ("", "generator"):
        zipped = huggingface.read_hf_dir(os.path.join(FIXTURES, "zip", sub))[1]
        for kind in ("legacy", "h5"):
            other = huggingface.read_hf_dir(os.path.join(FIXTURES, kind, sub))[1]
            # transformers' TF generator ties its output layer to the embeddings instead.
            assert set(zipped) - set(other) <= {"generator_lm_head.weight"}
            assert set(other) <= set(zipped)
            for key, value in other.items():
                np.testing.assert_array_equal(value, zipped[key], err_msg=f"{kind}/{sub}: {key}")
    generator = huggingface.read_hf_model(os.path.join(FIXTURES, "sharded_generator"))
    assert generator.weights_note.endswith("(PyTorch, zip layout, 3 shards)")
    zipped = huggingface.read_hf_dir(os.path.join(FIXTURES, "zip", "generator"))[1]
    assert set(generator.state) == set(zipped)
    for key, value in zipped.items():
        np.testing.assert_array_equal(generator.state[key], value, err_msg=key)


def _copy_model(tmp_path, kind, name="model"):
    directory = tmp_path / name
    directory.mkdir()
    for file in os.listdir(os.path.join(FIXTURES, kind)):
        if os.path.isfile(os.path.join(FIXTURES, kind, file)):
            shutil.copy(os.path.join(FIXTURES, kind, file), directory / file)
    return directory


def test_safetensors_then_bin_then_h5_and_the_note_says_which(tmp_path):
    from safetensors.numpy import save_file

    directory = _copy_model(tmp_path, "zip")
    shutil.copy(os.path.join(FIXTURES, "h5", "tf_model.h5"), directory / "tf_model.h5")
    state = huggingface.read_hf_dir(str(directory))[1]
    # Distinct values in each file show which one was read.
    marked = {k: v + 1.0 for k, v in state.items()}
    save_file(marked, str(directory / "model.safetensors"))
    read = huggingface.read_hf_model(str(directory))
    assert read.weights_note == (
        f"weights from {directory}/model.safetensors (safetensors); pytorch_model.bin, "
        "tf_model.h5 there too, not read"
    )
    word = "electra.embeddings.word_embeddings.weight"
    np.testing.assert_array_equal(read.state[word], marked[word])
    os.remove(directory / "model.safetensors")
    read = huggingface.read_hf_model(str(directory))
    assert read.weights_file == str(directory / "pytorch_model.bin")
    assert read.weights_note.endswith("(PyTorch, zip layout); tf_model.h5 there too, not read")
    os.remove(directory / "pytorch_model.bin")
    read = huggingface.read_hf_model(str(directory))
    assert read.weights_file == str(directory / "tf_model.h5")
    for key, value in read.state.items():
        np.testing.assert_array_equal(value, state[key], err_msg=key)


def test_sharded_checkpoints_are_read_or_refused_in_one_line(tmp_path):
    from safetensors.numpy import save_file

    state = huggingface.read_hf_dir(os.path.join(FIXTURES, "zip"))[1]
    directory = _copy_model(tmp_path, "zip", "safetensors")
    os.remove(directory / "pytorch_model.bin")
    keys = sorted(state)
    halves = {"a.safetensors": keys[::2], "b.safetensors": keys[1::2]}
    for file, names in halves.items():
        save_file({k: state[k] for k in names}, str(directory / file))
    index = {"weight_map": {k: file for file, names in halves.items() for k in names}}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))
    read = huggingface.read_hf_model(str(directory))
    assert read.weights_note.endswith("(safetensors, 2 shards)")
    assert set(read.state) == set(state)

    def refused(index_body, match):
        (directory / "model.safetensors.index.json").write_text(json.dumps(index_body))
        with pytest.raises(huggingface.HFFormatError, match=match) as error:
            huggingface.read_hf_model(str(directory))
        assert "\n" not in str(error.value)

    refused(
        {"weight_map": {**index["weight_map"], "x": "c.safetensors"}}, "c.safetensors is missing"
    )
    refused({"weight_map": {"x": "../a.safetensors"}}, "is not a file name in")
    refused({"weight_map": {**index["weight_map"], "extra": "a.safetensors"}}, "lists extra")
    refused({"files": []}, "no weight_map")
    sharded_tf = _copy_model(tmp_path, "h5", "sharded_tf")
    os.remove(sharded_tf / "tf_model.h5")
    (sharded_tf / "tf_model.h5.index.json").write_text(json.dumps({"weight_map": {}}))
    with pytest.raises(huggingface.HFFormatError, match="sharded TensorFlow weights are not read"):
        huggingface.read_hf_model(str(sharded_tf))


def test_a_directory_without_weights_names_what_is_read(tmp_path):
    directory = _copy_model(tmp_path, "zip")
    os.remove(directory / "pytorch_model.bin")
    (directory / "flax_model.msgpack").write_bytes(b"\x80")
    with pytest.raises(checkpoints.CheckpointError) as error:
        checkpoints.load_checkpoint(str(directory))
    assert str(error.value) == (
        f"{directory}: no model.safetensors, pytorch_model.bin or tf_model.h5 (nor a sharded "
        "*.index.json of the first two); flax_model.msgpack is not read."
    )


@pytest.mark.slow
def test_import_hf_and_finetune_take_a_bin_directory(tmp_path):
    import keras

    run_dir = tmp_path / "run"
    assert convert(["import-hf", os.path.join(FIXTURES, "legacy"), str(run_dir)]) == 0
    disc = keras.saving.load_model(str(run_dir / "export" / "discriminator.keras"))
    np.testing.assert_allclose(
        disc(_inputs())["logits"].numpy(), EXPECTED["disc_logits"], atol=1e-5, rtol=0
    )
    train = tmp_path / "train.tsv"
    train.write_text("text\tlabel\n" + "".join(f"w{i} w{i + 1}\t{i % 2}\n" for i in range(5, 37)))
    out = tmp_path / "ft"
    result = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "finetune.py"),
            f"--init_checkpoint={FIXTURES}/h5",
            f"--train_file={train}",
            f"--dev_file={train}",
            f"--output_dir={out}",
            "--num_train_epochs=1",
            "--max_seq_length=16",
            "--save_models=false",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"weights from {FIXTURES}/h5/tf_model.h5" in result.stdout
    assert (out / "imported_checkpoint" / "export" / "discriminator.keras").exists()


@pytest.mark.slow  # about 20 s each: transformers starts in a fresh interpreter
@needs_transformers
@pytest.mark.parametrize("kind", ["zip", "legacy"])
def test_the_installed_transformers_reads_the_fixtures_as_we_do(kind, tmp_path):
    names = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
    inputs = {name: EXPECTED[name] for name in names}
    reference = transformers_outputs(os.path.join(FIXTURES, kind), inputs, tmp_path)
    _, disc, gen = _logits(os.path.join(FIXTURES, kind))
    np.testing.assert_allclose(disc, reference["disc_logits"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(gen, reference["gen_logits"], atol=1e-5, rtol=0)


# --- torch.save's layouts, assembled by hand -----------------------------------------------------


def _str(text: str) -> bytes:
    data = text.encode()
    return pickle.BINUNICODE + struct.pack("<I", len(data)) + data


def _int(value: int) -> bytes:
    if -(2**31) <= value < 2**31:
        return pickle.BININT + struct.pack("<i", value)
    data = pickle.encode_long(value)
    return pickle.LONG1 + bytes([len(data)]) + data


def _global(module: str, name: str) -> bytes:
    return pickle.GLOBAL + f"{module}\n{name}\n".encode()


def _tuple(*items: bytes) -> bytes:
    return pickle.MARK + b"".join(items) + pickle.TUPLE


def _call(function: bytes, *args: bytes) -> bytes:
    return function + _tuple(*args) + pickle.REDUCE


def _tensor(key, numel, size, stride, offset=0, storage="FloatStorage", legacy=False) -> bytes:
    """Opcodes of torch._utils._rebuild_tensor_v2 on a persistent storage, as torch.save writes."""
    pid = _tuple(
        _str("storage"),
        _global("torch", storage),
        _str(key),
        _str("cpu"),
        _int(numel),
        *([pickle.NONE] if legacy else []),
    )
    return _call(
        _global("torch._utils", "_rebuild_tensor_v2"),
        pid + pickle.BINPERSID,
        _int(offset),
        _tuple(*map(_int, size)),
        _tuple(*map(_int, stride)),
        pickle.NEWFALSE,
        _call(_global("collections", "OrderedDict")),
    )


def _state_pickle(entries: dict) -> bytes:
    """A pickled dict of name -> the opcodes of its value (an OrderedDict, as torch saves)."""
    items = b"".join(_str(name) + value for name, value in entries.items())
    body = _call(_global("collections", "OrderedDict")) + pickle.MARK + items + pickle.SETITEMS
    return pickle.PROTO + b"\x02" + body + pickle.STOP


def _write_zip(path, data_pickle: bytes, storages: dict, byteorder="little", prefix="archive"):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(f"{prefix}/data.pkl", data_pickle)
        if byteorder is not None:
            archive.writestr(f"{prefix}/byteorder", byteorder)
        for key, raw in storages.items():
            archive.writestr(f"{prefix}/data/{key}", raw)
        archive.writestr(f"{prefix}/version", "3\n")
    return str(path)


def _write_legacy(path, data_pickle: bytes, storages: dict, little=True, counts=None):
    """torch's legacy layout: magic, protocol, system info, data, keys, then each storage."""
    order = "<" if little else ">"
    info = {"protocol_version": 1001, "little_endian": little, "type_sizes": {"int": 4}}
    parts = [pickle.dumps(v, protocol=2) for v in (0x1950A86A20F9469CFC6C, 1001, info)]
    parts += [data_pickle, pickle.dumps(list(storages), protocol=2)]
    for key, (numel, raw) in storages.items():
        parts.append(struct.pack(order + "q", (counts or {}).get(key, numel)) + raw)
    with open(path, "wb") as f:
        f.write(b"".join(parts))
    return str(path)


VALUES = np.arange(12, dtype=np.float32) * 0.5 - 2.0


def _hand_made_entries(legacy=False):
    return {
        "w": _tensor("0", 12, (3, 4), (4, 1), legacy=legacy),
        # A transposed view 1 element in: [[v1, v5], [v2, v6], [v3, v7]] (strides (1, 4)).
        "t": _tensor("0", 12, (3, 2), (1, 4), offset=1, legacy=legacy),
        "b": _tensor("1", 4, (4,), (1,), storage="BFloat16Storage", legacy=legacy),
    }


# bfloat16 is the top half of a float32: these four are exact in it.
BF16 = np.array([1.0, -2.5, 0.15625, 2.0**100], np.float32)


def _bf16_bytes(order="<"):
    return (BF16.view(np.uint32) >> 16).astype(order + "u2").tobytes()


def _check_hand_made(state):
    assert list(state) == ["w", "t", "b"]
    np.testing.assert_array_equal(state["w"], VALUES.reshape(3, 4))
    np.testing.assert_array_equal(
        state["t"],
        np.array([[VALUES[1], VALUES[5]], [VALUES[2], VALUES[6]], [VALUES[3], VALUES[7]]]),
    )
    assert state["b"].dtype == np.float32
    np.testing.assert_array_equal(state["b"], BF16)


@pytest.mark.parametrize("byteorder", ["little", "big", None])
def test_zip_layout_read_by_hand(tmp_path, byteorder):
    order = ">" if byteorder == "big" else "<"
    raw = {"0": VALUES.astype(order + "f4").tobytes(), "1": _bf16_bytes(order)}
    path = _write_zip(tmp_path / "w.bin", _state_pickle(_hand_made_entries()), raw, byteorder)
    _check_hand_made(read_state_dict(path))


@pytest.mark.parametrize("little", [True, False])
def test_legacy_layout_read_by_hand(tmp_path, little):
    order = "<" if little else ">"
    storages = {"0": (12, VALUES.astype(order + "f4").tobytes()), "1": (4, _bf16_bytes(order))}
    data = _state_pickle(_hand_made_entries(legacy=True))
    _check_hand_made(read_state_dict(_write_legacy(tmp_path / "w.bin", data, storages, little)))


# --- hostile files ---------------------------------------------------------------------------------


def _payloads(marker: str) -> dict:
    """Pickled calls that create `marker` when unpickled by `pickle`, and the global each names."""
    return {
        "os.system": _call(_global("os", "system"), _str(f"touch {marker}")),
        "builtins.eval": _call(_global("builtins", "eval"), _str(f"open({marker!r}, 'w')")),
        "builtins.open": _call(_global("builtins", "open"), _str(marker), _str("w")),
        "subprocess.Popen": _call(
            _global("subprocess", "Popen"),
            pickle.MARK + _str("touch") + _str(marker) + pickle.LIST,
        ),
    }


def test_the_payloads_are_live_under_pickle(tmp_path):
    """The control: each payload, given to `pickle` itself, does create its marker."""
    for name, payload in _payloads(str(tmp_path / "marker")).items():
        data = pickle.PROTO + b"\x02" + payload + pickle.STOP
        # (Popen returns before `touch` does: the sleep lets it finish.)
        code = "import pickle, sys, time; pickle.loads(sys.stdin.buffer.read()); time.sleep(0.5)"
        subprocess.run([sys.executable, "-c", code], input=data, check=True, timeout=60)
        assert (tmp_path / "marker").exists(), name
        os.remove(tmp_path / "marker")


@pytest.mark.parametrize("layout", ["zip", "legacy"])
@pytest.mark.parametrize("place", ["top", "value", "inside_a_tensor", "stack_global"])
def test_a_global_outside_a_state_dict_is_refused_by_name_and_never_runs(tmp_path, layout, place):
    marker = str(tmp_path / "marker")
    for name, payload in _payloads(marker).items():
        if place == "stack_global":  # protocol 4's form: the names on the stack
            module, attribute = name.split(".")
            payload = payload.replace(
                _global(module, attribute), _str(module) + _str(attribute) + pickle.STACK_GLOBAL
            )
        if place == "top":
            data = pickle.PROTO + b"\x02" + payload + pickle.STOP
        elif place == "value":
            tensor = _tensor("0", 12, (12,), (1,), legacy=layout == "legacy")
            data = _state_pickle({"w": tensor, "x": payload})
        else:  # as a tensor's backward hooks, the argument torch ignores
            tensor = _tensor("0", 12, (12,), (1,), legacy=layout == "legacy")
            data = _state_pickle(
                {"w": tensor.replace(_call(_global("collections", "OrderedDict")), payload)}
            )
        raw = VALUES.tobytes()
        path = (
            _write_zip(tmp_path / "w.bin", data, {"0": raw})
            if layout == "zip"
            else _write_legacy(tmp_path / "w.bin", data, {"0": (12, raw)})
        )
        with pytest.raises(TorchPickleError) as error:
            read_state_dict(path)
        assert str(error.value) == f"{path}: the pickle asks for {name}; {REFUSED}", name
        assert not os.path.exists(marker), name


def test_hostile_pickles_of_other_kinds_are_refused_in_one_line(tmp_path):
    marker = str(tmp_path / "marker")
    cases = {
        # numpy's array rebuilder: a global that state dicts of tensors never need.
        "numpy.core.multiarray._reconstruct": _call(
            _global("numpy.core.multiarray", "_reconstruct"), _global("numpy", "ndarray")
        ),
        # protocol 0's INST names and calls in one opcode.
        "os.system": pickle.MARK + _str(f"touch {marker}") + b"ios\nsystem\n",
        # a stand-in called as what it is not (REDUCE on a storage class).
        "calls a _StorageType": _call(_global("torch", "FloatStorage"), _int(3)),
        # copyreg's extension registry: refused as an opcode, never looked up.
        "uses EXT1": pickle.EXT1 + b"\x01",
        # OBJ builds an instance of any class, even an allowed one.
        "uses OBJ": pickle.MARK + _global("collections", "OrderedDict") + pickle.OBJ,
    }
    for expected, payload in cases.items():
        path = _write_zip(tmp_path / "w.bin", pickle.PROTO + b"\x02" + payload + pickle.STOP, {})
        with pytest.raises(TorchPickleError) as error:
            read_state_dict(path)
        message = str(error.value)
        assert message.startswith(f"{path}: ") and "\n" not in message
        assert expected in message, message
        assert not os.path.exists(marker)


def test_unknown_dtypes_and_non_state_dicts_are_refused(tmp_path):
    def refused(data, storages, match):
        path = _write_zip(tmp_path / "w.bin", data, storages)
        with pytest.raises(TorchPickleError, match=match) as error:
            read_state_dict(path)
        assert "\n" not in str(error.value)

    raw = {"0": VALUES.tobytes()}
    refused(
        _state_pickle({"c": _tensor("0", 6, (6,), (1,), storage="ComplexFloatStorage")}),
        raw,
        r"torch\.ComplexFloatStorage is a dtype this reader does not convert",
    )
    untyped = _global("torch", "UntypedStorage")
    pid = _tuple(_str("storage"), untyped, _str("0"), _str("cpu"), _int(48)) + pickle.BINPERSID
    v3 = _call(
        _global("torch._utils", "_rebuild_tensor_v3"),
        pid,
        _int(0),
        _tuple(_int(48)),
        _tuple(_int(1)),
        pickle.NEWFALSE,
        _call(_global("collections", "OrderedDict")),
        _global("torch", "float8_e4m3fn"),
    )
    refused(_state_pickle({"f8": v3}), raw, r"torch\.float8_e4m3fn is a dtype")
    refused(
        pickle.PROTO + b"\x02" + pickle.EMPTY_LIST + pickle.STOP,
        raw,
        "holds a list, not a state dict",
    )
    refused(_state_pickle({"s": _str("text")}), raw, "entry s holds a str; a state dict maps")
    refused(pickle.PROTO + b"\x02" + pickle.EMPTY_DICT, raw, "exhausted before seeing STOP")
    refused(
        pickle.PROTO + b"\x02" + pickle.BINGET + b"\x07" + pickle.STOP, raw, "not a readable pickle"
    )


@pytest.mark.parametrize(
    "size, stride, offset, match",
    [
        ((4, 4), (4, 1), 0, "reach beyond its storage of 12"),
        ((3, 4), (4, 1), 1, "reach beyond its storage of 12"),
        ((2, 2), (-4, 1), 0, "negative or non-integer"),
        ((12,), (1,), -1, "offset -1 is not a non-negative integer"),
        ((2, 6), (2**70, 1), 0, "reach beyond its storage"),  # a stride no int64 holds
        ((2**40, 2**40), (0, 0), 0, "elements .* reach beyond"),  # broadcast to 2**80
        ((12,), (1, 1), 0, "differ in length"),
    ],
)
def test_tensors_outside_their_storage_are_refused(tmp_path, size, stride, offset, match):
    data = _state_pickle({"w": _tensor("0", 12, size, stride, offset)})
    path = _write_zip(tmp_path / "w.bin", data, {"0": VALUES.tobytes()})
    with pytest.raises(TorchPickleError, match=f"tensor w: .*{match}"):
        read_state_dict(path)


def test_huge_declared_sizes_are_refused_without_allocating_them(tmp_path):
    # 8 GiB: less than this machine's memory, so that a reader that allocated what is
    # declared before checking it would succeed, and show in the peak below.
    huge = 2**31  # float32 elements
    raw = VALUES.tobytes()

    def legacy(name, numel, header):
        data = _state_pickle({"w": _tensor("0", numel, (12,), (1,), legacy=True)})
        return _write_legacy(tmp_path / name, data, {"0": (numel, raw)}, counts={"0": header})

    def declared_length(name, opcode, layout=_write_zip):  # bytes or text said to be 8 GiB
        data = pickle.PROTO + b"\x04" + opcode + struct.pack("<Q", 2**33) + b"xx" + pickle.STOP
        return layout(tmp_path / name, data, {})

    zip_storage = _state_pickle({"w": _tensor("0", huge, (12,), (1,))})
    cases = {
        # a zip storage that claims more than its entry holds
        _write_zip(tmp_path / "a.bin", zip_storage, {"0": raw}): f"claims {huge * 4} bytes, "
        "its entry holds 48",
        # a legacy storage that claims more than the file holds (header and pickle agree)
        legacy("b.bin", huge, huge): f"storage 0 claims {huge} elements",
        # a legacy storage whose header disagrees with the pickle
        legacy("c.bin", 12, huge): f"the file holds {huge} at byte",
        declared_length("d.bin", pickle.BINBYTES8): "not a readable pickle",
        declared_length("e.bin", pickle.BINUNICODE8): "not a readable pickle",
        declared_length("f.bin", pickle.BINBYTES8, _write_legacy): "not a readable pickle",
    }
    for path, expected in cases.items():
        tracemalloc.start()
        try:
            with pytest.raises(TorchPickleError) as error:
                read_state_dict(path)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert expected in str(error.value), str(error.value)
        assert peak < 8 << 20, (str(error.value), peak)


def test_archives_that_are_not_torch_save_s_are_refused(tmp_path):
    deflated = tmp_path / "deflated.bin"
    with zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("archive/data.pkl", _state_pickle({}))
    with pytest.raises(TorchPickleError, match="is compressed; torch.save stores"):
        read_state_dict(str(deflated))
    path = _write_zip(tmp_path / "no_pickle.bin", b"", {})
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x/other.pkl", b"")
    with pytest.raises(TorchPickleError, match="without exactly one <name>/data.pkl"):
        read_state_dict(path)
    data = _state_pickle({"w": _tensor("0", 12, (12,), (1,))})
    missing = _write_zip(tmp_path / "missing.bin", data, {})
    with pytest.raises(TorchPickleError, match="no entry archive/data/0"):
        read_state_dict(missing)
    good = _write_zip(tmp_path / "flipped.bin", data, {"0": VALUES.tobytes()})
    content = bytearray(open(good, "rb").read())
    content[content.index(VALUES.tobytes()) + 5] ^= 1  # one bit of a storage
    open(good, "wb").write(content)
    with pytest.raises(TorchPickleError, match="entry archive/data/0 fails its checksum"):
        read_state_dict(good)
    (tmp_path / "text.bin").write_text("hello")
    with pytest.raises(TorchPickleError, match="not a file torch.save writes"):
        read_state_dict(str(tmp_path / "text.bin"))


def test_import_hf_of_a_hostile_bin_prints_one_line_and_runs_nothing(tmp_path, capsys):
    directory = _copy_model(tmp_path, "zip")
    marker = tmp_path / "marker"
    payload = _payloads(str(marker))["os.system"]
    bin_file = directory / "pytorch_model.bin"
    _write_zip(bin_file, _state_pickle({"w": payload}), {})
    assert convert(["import-hf", str(directory), str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err == (
        f"error: {bin_file}: the pickle asks for os.system; {REFUSED}\n"
    )
    assert not marker.exists() and not (tmp_path / "run").exists()


def test_torch_pickle_imports_neither_torch_nor_tensorflow():
    """The reader is plain Python and NumPy: loaded on its own, it pulls in no framework."""
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('tp', {torch_pickle.__file__!r})\n"
        "module = sys.modules['tp'] = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        f"state = module.read_state_dict({os.path.join(FIXTURES, 'legacy', 'pytorch_model.bin')!r})\n"
        "assert len(state) == 43, len(state)\n"
        "print(sorted(m for m in ('torch', 'tensorflow', 'keras') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    assert importlib.util.find_spec("electra_tf.interop.torch_pickle") is not None


# --- hostile tf_model.h5 -----------------------------------------------------------------------


def _write_h5(path, build):
    import h5py

    with h5py.File(path, "w") as f:
        f.attrs["layer_names"] = np.array([b"electra"], dtype=object)
        group = f.create_group("electra/tf_electra_model/electra/embeddings/LayerNorm")
        build(f, group)
    return str(path)


def test_tf_weights_map_to_pytorch_keys():
    assert tf_h5.pytorch_key(
        "tf_electra_for_pre_training/electra/encoder/layer_._11/attention/self/query/kernel:0"
    ) == ("electra.encoder.layer.11.attention.self.query.weight", True)
    assert tf_h5.pytorch_key(
        "tf_electra_model/electra/embeddings/position_embeddings/embeddings:0"
    ) == ("electra.embeddings.position_embeddings.weight", False)
    assert tf_h5.pytorch_key("tf_electra_for_masked_lm/generator_predictions/LayerNorm/beta:0") == (
        "generator_predictions.LayerNorm.bias",
        False,
    )
    assert tf_h5.pytorch_key("tf_electra_for_masked_lm/generator_lm_head/bias:0") == (
        "generator_lm_head.bias",
        False,
    )


def test_h5_datasets_that_are_not_plain_weights_are_refused(tmp_path):
    secret = tmp_path / "secret.raw"
    np.arange(4, dtype=np.float32).tofile(secret)
    cases = {
        "keeps its values in another file": lambda f, g: g.create_dataset(
            "gamma:0", shape=(4,), dtype="f4", external=[(str(secret), 0, 16)]
        ),
        "is compressed or filtered": lambda f, g: g.create_dataset(
            "gamma:0", data=np.ones(64, np.float32), compression="gzip"
        ),
        "not floating-point weights": lambda f, g: g.create_dataset(
            "gamma:0", data=np.ones(4, np.int32)
        ),
        # a terabyte declared, nothing stored
        "claims 4398046511104 bytes": lambda f, g: g.create_dataset(
            "gamma:0", shape=(2**20, 2**20), dtype="f4"
        ),
    }
    for expected, build in cases.items():
        path = _write_h5(tmp_path / "w.h5", build)
        with pytest.raises(tf_h5.TFWeightsError) as error:
            tf_h5.read_tf_weights(path)
        assert str(error.value).startswith(f"{path}: ") and "\n" not in str(error.value)
        assert expected in str(error.value), str(error.value)

    def soft_layer(f, g):
        del f["electra"]
        f.create_group("elsewhere").create_dataset("x:0", data=np.ones(2, np.float32))
        f["electra"] = __import__("h5py").SoftLink("/elsewhere")

    with pytest.raises(tf_h5.TFWeightsError, match="layer electra is not a group of this file"):
        tf_h5.read_tf_weights(_write_h5(tmp_path / "soft.h5", soft_layer))
    import h5py

    with h5py.File(tmp_path / "keras3.h5", "w") as f:
        f.create_group("layers")
    with pytest.raises(tf_h5.TFWeightsError, match="no `layer_names` attribute"):
        tf_h5.read_tf_weights(str(tmp_path / "keras3.h5"))


@pytest.mark.parametrize("heads", [2.5, 0, "4", True])
def test_import_hf_refuses_a_head_count_that_is_not_a_positive_integer(tmp_path, capsys, heads):
    directory = _copy_model(tmp_path, "zip")
    config = json.loads((directory / "config.json").read_text())
    config["num_attention_heads"] = heads
    (directory / "config.json").write_text(json.dumps(config))
    assert convert(["import-hf", str(directory), str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err == (
        f"error: {directory}: config.json: num_attention_heads={heads!r} must be a positive "
        "integer; put back the model's own config.json.\n"
    )
    assert not (tmp_path / "run").exists()


def test_import_hf_names_a_config_json_that_is_not_json(tmp_path, capsys):
    directory = _copy_model(tmp_path, "zip")
    (directory / "config.json").write_text('{"model_type": "electra",\n "hidden_size": 32,,}')
    assert convert(["import-hf", str(directory), str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err == (
        f"error: {directory}/config.json is not valid JSON (Expecting property name enclosed "
        "in double quotes: line 2 column 20 (char 45)); download the model's config.json "
        "again.\n"
    )
    assert not (tmp_path / "run").exists()
