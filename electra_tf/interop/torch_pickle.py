"""PyTorch `.bin` state dicts as NumPy arrays, without PyTorch and without running the pickle.

`torch.save(state_dict, f)` writes a pickle whose tensors point at raw storages,
in one of two layouts:

* zip (torch >= 1.6, the default): an archive of `<name>/data.pkl` (the pickle),
  `<name>/data/<key>` (one entry per storage, its raw bytes) and
  `<name>/byteorder` (`little` or `big`; absent in older files: little);
* legacy (`_use_new_zipfile_serialization=False`, and every file of torch < 1.6):
  five pickles in a row (the magic number, the protocol version 1001, the system
  information with the byte order, the data, the list of storage keys), then
  each storage in that order as an 8-byte element count and its bytes.

A `.bin` file from elsewhere is untrusted: `pickle.load` on it can run any
function it names. Here a pickle is never given to `pickle`. A small stack
machine walks its opcodes (`pickletools.genops` decodes them) and knows, by
name, only what a state dict is made of: torch's tensor and parameter rebuild
functions, the storage classes and dtypes, and `collections.OrderedDict`. Each
is replaced by a function of this module that records what it was given. Any
other global (`os.system`, `builtins.eval`, `numpy.core.multiarray._reconstruct`,
...) is refused by name the moment the pickle mentions it; nothing it names is
imported or called. Storages become NumPy arrays only after bounds checks:
every storage lies inside the file, every tensor inside its storage, sizes,
strides and offsets are non-negative, and no declared size is allocated before
the bytes it describes have been found in the file.

    state = read_state_dict("pytorch_model.bin")   # {name: np.ndarray}, bfloat16 -> float32
"""

from __future__ import annotations

import dataclasses
import io
import os
import pickletools
import struct
import zipfile
import zlib
from typing import Callable, Optional

import numpy as np

ZIP_MAGIC = b"PK\x03\x04"
LEGACY_MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL_VERSION = 1001
_MAX_LINE = 1 << 16  # the longest text-opcode line (a GLOBAL's names, a protocol-0 number)
_MAX_DIMS = 64


class TorchPickleError(ValueError):
    """A `.bin` file is refused; the message is one line naming the file and the reason."""


@dataclasses.dataclass(frozen=True)
class _Dtype:
    """A torch dtype: its name, NumPy type (bfloat16: its raw 16 bits) and size in bytes."""

    name: str
    numpy: str

    @property
    def itemsize(self) -> int:
        return np.dtype(self.numpy).itemsize


_DTYPES = {
    d.name: d
    for d in (
        _Dtype("float32", "f4"),
        _Dtype("float64", "f8"),
        _Dtype("float16", "f2"),
        _Dtype("bfloat16", "u2"),
        _Dtype("int64", "i8"),
        _Dtype("int32", "i4"),
        _Dtype("int16", "i2"),
        _Dtype("int8", "i1"),
        _Dtype("uint8", "u1"),
        _Dtype("uint16", "u2"),
        _Dtype("uint32", "u4"),
        _Dtype("uint64", "u8"),
        _Dtype("bool", "?"),
    )
}
# torch.<Name>Storage -> dtype (UntypedStorage holds bytes; a v3 tensor gives its dtype).
_STORAGE_TYPES = {
    "FloatStorage": "float32",
    "DoubleStorage": "float64",
    "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16",
    "LongStorage": "int64",
    "IntStorage": "int32",
    "ShortStorage": "int16",
    "CharStorage": "int8",
    "ByteStorage": "uint8",
    "BoolStorage": "bool",
    "UntypedStorage": "uint8",
}
# torch.<name> dtype objects (pickled by name), with their aliases.
_TORCH_DTYPES = {
    **{name: name for name in _DTYPES},
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "long": "int64",
    "int": "int32",
    "short": "int16",
}


# ---------------------------------------------------------------------------
# What the pickle builds: records, never torch objects.


@dataclasses.dataclass(frozen=True)
class _StorageType:
    """torch.<Name>Storage, as named in a persistent id."""

    name: str
    dtype: _Dtype


@dataclasses.dataclass(frozen=True)
class _Storage:
    """A storage a tensor points at: `numel` elements of `dtype`, `start` elements into `key`."""

    key: str
    dtype: _Dtype
    numel: int
    start: int = 0


@dataclasses.dataclass(frozen=True, eq=False)
class _Tensor:
    """A tensor as torch's rebuild functions receive it (offset and strides in elements)."""

    storage: _Storage
    offset: object
    size: object
    stride: object
    dtype: _Dtype


class _StateDict(dict):
    """What `collections.OrderedDict` becomes: a plain dict (its `_metadata` is dropped)."""


@dataclasses.dataclass(frozen=True)
class _Function:
    """A function the pickle may call (REDUCE): one of ours, standing in for torch's."""

    name: str
    call: Callable


def _tensor_v1(storage, offset, size, stride):
    if not isinstance(storage, _Storage):
        raise TorchPickleError("a tensor is rebuilt from something that is not a storage")
    return _Tensor(storage, offset, size, stride, storage.dtype)


def _tensor_v2(storage, offset, size, stride, requires_grad, hooks, metadata=None):
    if metadata:  # the conjugate / negative bits: values not stored as they read
        raise TorchPickleError(f"a tensor carries metadata {metadata!r}; plain tensors only")
    return _tensor_v1(storage, offset, size, stride)


def _tensor_v3(storage, offset, size, stride, requires_grad, hooks, dtype, metadata=None):
    tensor = _tensor_v2(storage, offset, size, stride, requires_grad, hooks, metadata)
    if not isinstance(dtype, _Dtype):
        raise TorchPickleError("a tensor's dtype is not a torch dtype")
    if tensor.storage.dtype.name != "uint8" or tensor.storage.numel % dtype.itemsize:
        raise TorchPickleError(f"a {dtype.name} tensor on a storage that is not whole bytes")
    storage = _Storage(tensor.storage.key, dtype, tensor.storage.numel // dtype.itemsize)
    return _Tensor(storage, offset, size, stride, dtype)


def _parameter(data, requires_grad, hooks, state=None):
    if not isinstance(data, _Tensor):
        raise TorchPickleError("a parameter wraps something that is not a tensor")
    return data


def _ordered_dict(*args):
    if args:
        raise TorchPickleError("collections.OrderedDict is called with arguments")
    return _StateDict()


_FUNCTIONS = {
    ("torch._utils", "_rebuild_tensor"): _tensor_v1,
    ("torch._utils", "_rebuild_tensor_v2"): _tensor_v2,
    ("torch._utils", "_rebuild_tensor_v3"): _tensor_v3,
    ("torch._utils", "_rebuild_parameter"): _parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _parameter,
    ("collections", "OrderedDict"): _ordered_dict,
}


def _shown(text: str) -> str:
    """A name from the file, safe to print on one line."""
    text = text if len(text) <= 100 else text[:100] + "..."
    return text if text.isprintable() else ascii(text)


def _resolve_global(where: str, module: str, name: str):
    """The stand-in for `module.name`, or a refusal naming it (nothing is imported)."""
    if (module, name) in _FUNCTIONS:
        return _Function(f"{module}.{name}", _FUNCTIONS[module, name])
    if module == "torch" and name in _STORAGE_TYPES:
        return _StorageType(name, _DTYPES[_STORAGE_TYPES[name]])
    if module == "torch" and name in _TORCH_DTYPES:
        return _DTYPES[_TORCH_DTYPES[name]]
    if module == "torch" and (name.endswith("Storage") or name.startswith(("float", "complex"))):
        raise TorchPickleError(
            f"{where}: torch.{_shown(name)} is a dtype this reader does not convert "
            "(float16/32/64, bfloat16, integers and bool are read)"
        )
    raise TorchPickleError(
        f"{where}: the pickle asks for {_shown(module)}.{_shown(name)}; only tensors and "
        "the containers of a state dict are read"
    )


# ---------------------------------------------------------------------------
# The stack machine.

_LITERALS = {
    "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4",
    "STRING", "BINSTRING", "SHORT_BINSTRING", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8",
    "UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "FLOAT", "BINFLOAT",
}  # fmt: skip
_CONSTANTS = {"NONE": None, "NEWTRUE": True, "NEWFALSE": False}


class _Reader:
    """A file's bytes up to `end`, read so that no declared length is allocated up front."""

    def __init__(self, file, end: int):
        self._file, self._end = file, end

    def tell(self) -> int:
        return self._file.tell()

    def read(self, n: int) -> bytes:
        return self._file.read(max(0, min(n, self._end - self._file.tell())))

    def readline(self) -> bytes:
        return self._file.readline(max(0, min(_MAX_LINE, self._end - self._file.tell())))


def _run_pickle(reader: _Reader, where: str, persistent_load=None):
    """Interprets one pickle (up to its STOP) and returns the object it describes."""
    stack: list = []
    marks: list = []
    memo: dict = {}
    position = reader.tell()

    def pop_mark() -> list:
        nonlocal stack
        items, stack = stack, marks.pop()
        return items

    def target(kind):
        if not isinstance(stack[-1], kind):
            raise TorchPickleError(
                f"{where}: {opcode.name} on a {type(stack[-1]).__name__}; "
                "the pickle is not a state dict"
            )
        return stack[-1]

    try:
        for opcode, arg, at in pickletools.genops(reader):
            position, name = at, opcode.name
            if name in _LITERALS:
                stack.append(arg)
            elif name in _CONSTANTS:
                stack.append(_CONSTANTS[name])
            elif name == "EMPTY_LIST":
                stack.append([])
            elif name == "EMPTY_DICT":
                stack.append({})
            elif name == "EMPTY_TUPLE":
                stack.append(())
            elif name == "MARK":
                marks.append(stack)
                stack = []
            elif name == "TUPLE":
                items = pop_mark()
                stack.append(tuple(items))
            elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
                count = int(name[-1])
                if len(stack) < count:
                    raise IndexError("tuple of more items than the stack holds")
                items = tuple(stack[-count:])
                del stack[-count:]
                stack.append(items)
            elif name == "LIST":
                stack.append(pop_mark())
            elif name == "DICT":
                items = pop_mark()
                stack.append(dict(zip(items[::2], items[1::2])))
            elif name == "APPEND":
                value = stack.pop()
                target(list).append(value)
            elif name == "APPENDS":
                items = pop_mark()
                target(list).extend(items)
            elif name == "SETITEM":
                value, key = stack.pop(), stack.pop()
                target(dict)[key] = value
            elif name == "SETITEMS":
                items = pop_mark()
                target(dict).update(zip(items[::2], items[1::2]))
            elif name == "POP":
                if stack:
                    stack.pop()
                else:
                    pop_mark()
            elif name == "POP_MARK":
                pop_mark()
            elif name == "DUP":
                stack.append(stack[-1])
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                stack.append(memo[arg])
            elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
                memo[arg] = stack[-1]
            elif name == "MEMOIZE":
                memo[len(memo)] = stack[-1]
            elif name == "GLOBAL":
                module, _, attribute = arg.partition(" ")
                stack.append(_resolve_global(where, module, attribute))
            elif name == "STACK_GLOBAL":
                attribute, module = stack.pop(), stack.pop()
                if not (isinstance(module, str) and isinstance(attribute, str)):
                    raise TypeError("STACK_GLOBAL of names that are not strings")
                stack.append(_resolve_global(where, module, attribute))
            elif name == "INST":  # protocol 0's call-by-name: refused by the name it gives
                module, _, attribute = arg.partition(" ")
                _resolve_global(where, module, attribute)
                raise TorchPickleError(f"{where}: INST {_shown(arg)} builds an object")
            elif name == "REDUCE":
                args, function = stack.pop(), stack.pop()
                if not isinstance(function, _Function) or not isinstance(args, tuple):
                    raise TorchPickleError(
                        f"{where}: the pickle calls a {type(function).__name__}; "
                        "only tensors and the containers of a state dict are read"
                    )
                stack.append(function.call(*args))
            elif name == "NEWOBJ":
                args, cls = stack.pop(), stack.pop()
                if not (isinstance(cls, _Function) and cls.call is _ordered_dict):
                    raise TorchPickleError(
                        f"{where}: NEWOBJ of a {type(cls).__name__}; only "
                        "collections.OrderedDict is built"
                    )
                stack.append(_ordered_dict(*args))
            elif name == "BUILD":
                state = stack.pop()
                target(_StateDict)  # an OrderedDict's attributes (`_metadata`): dropped
                if not isinstance(state, dict):
                    raise TypeError("BUILD of an OrderedDict with a state that is not a dict")
            elif name == "BINPERSID":
                if persistent_load is None:
                    raise TorchPickleError(f"{where}: a persistent id outside the data pickle")
                stack.append(persistent_load(stack.pop()))
            elif name == "PROTO":
                if not 0 <= arg <= 5:
                    raise ValueError(f"pickle protocol {arg}")
            elif name == "FRAME":
                pass  # framing only groups the opcodes that follow
            elif name == "STOP":
                if marks or len(stack) != 1:
                    raise ValueError("STOP with a stack that is not one object")
                return stack[0]
            else:  # PERSID, EXT*, OBJ, NEWOBJ_EX, sets, buffers: not in torch's state dicts
                raise TorchPickleError(
                    f"{where}: the pickle uses {name}, which no state dict of tensors needs"
                )
    except TorchPickleError as error:
        message = str(error)
        raise TorchPickleError(message if message.startswith(where) else f"{where}: {message}")
    except (ValueError, TypeError, IndexError, KeyError, RecursionError) as error:
        raise TorchPickleError(
            f"{where}: not a readable pickle at byte {position} ({_shown(str(error))})"
        )
    raise TorchPickleError(f"{where}: the pickle ends before its STOP")


def _persistent_loader(where: str, legacy: bool, storages: dict):
    """The function that turns a persistent id into a `_Storage` (recorded in `storages`).

    zip: ('storage', storage type, key, location, numel);
    legacy: the same and a view (None, or (view key, offset, size) in elements).
    """

    def load(pid):
        if not isinstance(pid, tuple) or len(pid) != (6 if legacy else 5):
            raise TorchPickleError(f"{where}: a persistent id that is not a storage's")
        kind, storage_type, key, _location, numel = pid[:5]
        kind = kind.decode("ascii", "replace") if isinstance(kind, bytes) else kind
        if kind != "storage" or not isinstance(storage_type, _StorageType):
            raise TorchPickleError(f"{where}: a persistent id that is not a storage's")
        if not isinstance(key, str) or type(numel) is not int or numel < 0:
            raise TorchPickleError(f"{where}: storage {_shown(str(key))}: a bad key or size")
        storage = _Storage(key, storage_type.dtype, numel)
        known = storages.setdefault(key, storage)
        if known != storage:
            raise TorchPickleError(
                f"{where}: storage {_shown(key)} is declared twice, as {known.numel} "
                f"{known.dtype.name} and as {numel} {storage.dtype.name}"
            )
        view = pid[5] if legacy else None
        if view is None:
            return storage
        if not (
            isinstance(view, tuple)
            and len(view) == 3
            and all(type(v) is int for v in view[1:])
            and view[1] >= 0
            and view[2] >= 0
            and view[1] + view[2] <= numel
        ):
            raise TorchPickleError(
                f"{where}: a view of storage {_shown(key)} outside its {numel} elements"
            )
        return _Storage(key, storage.dtype, view[2], view[1])

    return load


# ---------------------------------------------------------------------------
# Storages -> arrays, with bounds checks.


def _check_ints(values, what: str) -> tuple:
    if not isinstance(values, tuple) or len(values) > _MAX_DIMS:
        raise ValueError(f"its {what} is not a tuple of at most {_MAX_DIMS} integers")
    if any(type(v) is not int or v < 0 for v in values):
        raise ValueError(f"its {what} {values} has a negative or non-integer entry")
    return values


def _tensor_array(tensor: _Tensor, data: np.ndarray) -> np.ndarray:
    """The tensor's values, after checking that it lies inside its storage.

    Args:
        tensor: from the pickle.
        data: the storage's elements [storage.numel] (in the file's byte order).
    """
    size = _check_ints(tensor.size, "size")
    stride = _check_ints(tensor.stride, "stride")
    offset = tensor.offset
    if type(offset) is not int or offset < 0:
        raise ValueError(f"its storage offset {offset!r} is not a non-negative integer")
    if len(size) != len(stride):
        raise ValueError(f"its size {size} and stride {stride} differ in length")
    count = int(np.prod(size, dtype=object)) if size else 1
    available = tensor.storage.numel
    if count == 0:
        return np.zeros(size, data.dtype)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= available or count > available:
        raise ValueError(
            f"its {count} elements (size {size}, stride {stride}, offset {offset}) reach "
            f"beyond its storage of {available}"
        )
    itemsize = data.dtype.itemsize
    start = tensor.storage.start + offset
    view = np.lib.stride_tricks.as_strided(
        data[start:],
        shape=size,
        strides=[s * itemsize if n > 1 else 0 for n, s in zip(size, stride)],
    )
    # A contiguous tensor (every one torch.save writes from a state dict) stays a view of
    # the bytes read: no second copy of the weights.
    return view if view.flags.c_contiguous else np.ascontiguousarray(view)


def _native(array: np.ndarray, dtype: _Dtype) -> np.ndarray:
    """In native byte order; bfloat16's 16 bits widened to the float32 they are the top of."""
    array = array.astype(array.dtype.newbyteorder("="), copy=False)
    if dtype.name == "bfloat16":
        return (array.astype(np.uint32) << 16).view(np.float32)
    return array


def _state_arrays(where: str, result, load_storage) -> dict[str, np.ndarray]:
    """The state dict's tensors as arrays; `load_storage(storage)` gives a storage's elements."""
    if not isinstance(result, dict):
        raise TorchPickleError(
            f"{where}: holds a {type(result).__name__}, not a state dict (names -> tensors)"
        )
    state, cache = {}, {}
    for key, tensor in result.items():
        if not isinstance(key, str) or not isinstance(tensor, _Tensor):
            raise TorchPickleError(
                f"{where}: entry {_shown(str(key))} holds a {type(tensor).__name__}; a state "
                "dict maps names to tensors"
            )
        storage = tensor.storage
        root = (storage.key, storage.dtype)
        if root not in cache:
            cache[root] = load_storage(storage)
        try:
            state[key] = _native(_tensor_array(tensor, cache[root]), tensor.dtype)
        except ValueError as error:
            raise TorchPickleError(f"{where}: tensor {_shown(key)}: {error}")
    return state


# ---------------------------------------------------------------------------
# The two layouts.


# What zipfile raises on a damaged or hostile archive.
_ZIP_ERRORS = (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, struct.error)


def _read_bytes(f, where: str, offset: int, nbytes: int, size: int) -> bytearray:
    """`nbytes` of the file from `offset`, into a buffer allocated only once they are known to exist."""
    if offset < 0 or offset + nbytes > size:
        raise TorchPickleError(
            f"{where} claims {nbytes} bytes from byte {offset}; the file holds {size}"
        )
    buffer = bytearray(nbytes)
    f.seek(offset)
    if f.readinto(buffer) != nbytes:
        raise TorchPickleError(f"{where}: the file ends inside it")
    return buffer


def _read_zip(path: str, size: int) -> dict[str, np.ndarray]:
    try:
        f = open(path, "rb")
        archive = zipfile.ZipFile(f)
    except _ZIP_ERRORS as error:
        raise TorchPickleError(f"{path}: not a readable zip archive ({_shown(str(error))})")
    with f, archive:
        entries = {info.filename: info for info in archive.infolist()}
        pickles = [n for n in entries if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pickles) != 1:
            raise TorchPickleError(
                f"{path}: a zip archive without exactly one <name>/data.pkl; not torch.save's"
            )
        prefix = pickles[0][: -len("data.pkl")]

        def entry_bytes(name: str, at_least: int = 0) -> bytearray:
            info = entries.get(name)
            if info is None:
                raise TorchPickleError(f"{path}: no entry {_shown(name)} in the archive")
            if info.compress_type != zipfile.ZIP_STORED:
                raise TorchPickleError(
                    f"{path}: entry {_shown(name)} is compressed; torch.save stores entries as they are"
                )
            if info.file_size < at_least:
                raise TorchPickleError(
                    f"{path}: storage {_shown(name)} claims {at_least} bytes, its entry holds "
                    f"{info.file_size}"
                )
            # The entry's bytes follow its local header (30 bytes, its name, its extra field).
            header = _read_bytes(f, f"{path}: entry {_shown(name)}", info.header_offset, 30, size)
            if header[:4] != ZIP_MAGIC:
                raise TorchPickleError(f"{path}: entry {_shown(name)} has no local header")
            name_length, extra_length = struct.unpack("<HH", header[26:30])
            start = info.header_offset + 30 + name_length + extra_length
            data = _read_bytes(f, f"{path}: entry {_shown(name)}", start, info.file_size, size)
            if zlib.crc32(data) != info.CRC:
                raise TorchPickleError(f"{path}: entry {_shown(name)} fails its checksum")
            return data

        order = "<"
        if prefix + "byteorder" in entries:
            mark = entry_bytes(prefix + "byteorder", 0)
            if mark not in (b"little", b"big"):
                raise TorchPickleError(f"{path}: byteorder {_shown(repr(bytes(mark)))}")
            order = "<" if mark == b"little" else ">"
        storages: dict = {}
        pickle_bytes = bytes(entry_bytes(pickles[0]))
        result = _run_pickle(
            _Reader(io.BytesIO(pickle_bytes), len(pickle_bytes)),
            path,
            _persistent_loader(path, legacy=False, storages=storages),
        )

        def load_storage(storage: _Storage) -> np.ndarray:
            root = storages[storage.key]
            nbytes = root.numel * root.dtype.itemsize
            raw = entry_bytes(f"{prefix}data/{storage.key}", nbytes)
            return np.frombuffer(raw, order + storage.dtype.numpy, nbytes // storage.dtype.itemsize)

        return _state_arrays(path, result, load_storage)


def _read_legacy(path: str, size: int) -> dict[str, np.ndarray]:
    with open(path, "rb") as f:
        reader = _Reader(f, size)
        magic = _run_pickle(reader, path)
        protocol = _run_pickle(reader, path)
        if magic != LEGACY_MAGIC_NUMBER or protocol != LEGACY_PROTOCOL_VERSION:
            raise TorchPickleError(
                f"{path}: starts with a pickle but not torch.save's magic number and protocol"
            )
        info = _run_pickle(reader, path)
        little = info.get("little_endian") if isinstance(info, dict) else None
        if not isinstance(little, bool):
            raise TorchPickleError(f"{path}: the system information does not give the byte order")
        order = "<" if little else ">"
        storages: dict = {}
        result = _run_pickle(reader, path, _persistent_loader(path, legacy=True, storages=storages))
        keys = _run_pickle(reader, path)
        if (
            not isinstance(keys, list)
            or not all(isinstance(key, str) for key in keys)
            or sorted(keys) != sorted(storages)
        ):
            raise TorchPickleError(
                f"{path}: the list of storage keys does not match the storages the tensors use"
            )
        # Each storage: its element count (8 bytes), then its bytes; find them all first.
        offsets = {}
        for key in keys:
            storage = storages[key]
            header = f.read(8) if f.tell() + 8 <= size else b""
            if len(header) != 8:
                raise TorchPickleError(f"{path}: the file ends before storage {_shown(key)}")
            (numel,) = struct.unpack(order + "q", header)
            nbytes = storage.numel * storage.dtype.itemsize
            if numel != storage.numel or f.tell() + nbytes > size:
                raise TorchPickleError(
                    f"{path}: storage {_shown(key)} claims {storage.numel} elements "
                    f"({nbytes} bytes); the file holds {numel} at byte {f.tell()}, "
                    f"{size - f.tell()} bytes before its end"
                )
            offsets[key] = f.tell()
            f.seek(nbytes, os.SEEK_CUR)

        def load_storage(storage: _Storage) -> np.ndarray:
            root = storages[storage.key]
            nbytes = root.numel * root.dtype.itemsize
            raw = _read_bytes(
                f, f"{path}: storage {_shown(root.key)}", offsets[root.key], nbytes, size
            )
            return np.frombuffer(raw, order + storage.dtype.numpy)

        return _state_arrays(path, result, load_storage)


def file_layout(path: str) -> Optional[str]:
    """`zip` or `legacy` for a file torch.save wrote (by its first bytes), else None."""
    with open(path, "rb") as f:
        head = f.read(4)
    if head == ZIP_MAGIC:
        return "zip"
    if head[:1] == b"\x80":  # a pickle's PROTO opcode: the legacy layout's magic number
        return "legacy"
    return None


def read_state_dict(path: str) -> dict[str, np.ndarray]:
    """Reads a state dict saved by `torch.save` (zip or legacy layout) as NumPy arrays.

    Returns:
        name -> array in the tensor's dtype (native byte order; bfloat16 as float32).

    Raises:
        TorchPickleError: the file is not such a state dict, or asks for anything
            else (the message names the global, opcode or bound it broke).
        OSError: the file cannot be read.
    """
    size = os.path.getsize(path)
    layout = file_layout(path)
    if layout == "zip":
        return _read_zip(path, size)
    if layout == "legacy":
        return _read_legacy(path, size)
    raise TorchPickleError(
        f"{path}: not a file torch.save writes (neither its zip nor its legacy layout; "
        "files of torch < 0.4 are tar archives and are not read)"
    )
