"""Feature rows -> serialized `tf.train.Example` records, encoded with NumPy.

Building `tf.train.Example` protos in Python would cost more than the
tokenization itself (about 7.5k examples/s of length 128 on one core), so
records are encoded directly with NumPy (about 58k examples/s), byte-identical
to `tf.train.Example.SerializeToString(deterministic=True)`. WordPiece
tokenization is then about three quarters of a shard build's time.
"""

from __future__ import annotations

import numpy as np


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _length_delimited(tag: bytes, payload: bytes) -> bytes:
    return tag + _varint(len(payload)) + payload


def _packed_varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Varint-encodes each row of a non-negative int array.

    Args:
        values: int64 [n, L], all >= 0.

    Returns:
        `(flat_bytes, row_offsets)`: uint8 [total] and int64 [n + 1]; row r's
        encoding is `flat_bytes[row_offsets[r]:row_offsets[r + 1]]`.
    """
    v = values.astype(np.uint64)
    num_bytes = np.ones(v.shape, np.int64)
    for k in range(1, 10):
        num_bytes += v >= np.uint64(1 << (7 * k))
    width = int(num_bytes.max()) if v.size else 1
    groups = np.empty(v.shape + (width,), np.uint8)
    for k in range(width):
        low7 = (v >> np.uint64(7 * k)) & np.uint64(0x7F)
        more = (num_bytes > k + 1).astype(np.uint64) << np.uint64(7)
        groups[..., k] = (low7 | more).astype(np.uint8)
    valid = np.arange(width)[None, None, :] < num_bytes[..., None]
    flat = groups[valid]  # C order: row, position, byte.
    offsets = np.concatenate([[0], np.cumsum(num_bytes.sum(axis=1))])
    return flat, offsets


def serialize_examples(
    input_ids: np.ndarray, input_mask: np.ndarray, segment_ids: np.ndarray
) -> list[bytes]:
    """Encodes feature rows as serialized `tf.train.Example` protos.

    The bytes equal `tf.train.Example(...).SerializeToString(deterministic=True)`
    (map entries in key order, packed int64 lists) but are produced with a
    few vectorised NumPy ops plus a handful of byte concatenations per row,
    several times faster than building proto objects.

    Args:
        input_ids: int [n, L], values >= 0.
        input_mask: int [n, L], values 0/1.
        segment_ids: int [n, L], values 0/1.

    Returns:
        n serialized examples.
    """
    n, length = input_ids.shape
    if n == 0:
        return []
    if input_ids.min() < 0:
        raise ValueError("token ids must be non-negative")
    for name, arr in (("input_mask", input_mask), ("segment_ids", segment_ids)):
        if arr.min() < 0 or arr.max() > 1:
            raise ValueError(f"{name} must hold only 0 and 1")

    def entry_prefix(key: bytes, payload_len: int) -> bytes:
        # Features.feature map entry {key: Feature{int64_list: Int64List{value (packed)}}},
        # everything before the packed payload.
        int64_list_header = b"\x0a" + _varint(payload_len)
        feature_len = len(int64_list_header) + payload_len
        feature_header = b"\x1a" + _varint(feature_len)
        value_len = len(feature_header) + feature_len
        key_field = _length_delimited(b"\x0a", key)
        entry_len = len(key_field) + 1 + len(_varint(value_len)) + value_len
        return (
            b"\x0a"
            + _varint(entry_len)
            + key_field
            + b"\x12"
            + _varint(value_len)
            + feature_header
            + int64_list_header
        )

    # 0/1 values are one varint byte each, so these entries have fixed framing.
    mask_prefix = entry_prefix(b"input_mask", length)
    seg_prefix = entry_prefix(b"segment_ids", length)
    mask_bytes = input_mask.astype(np.uint8).tobytes()
    seg_bytes = segment_ids.astype(np.uint8).tobytes()
    id_flat, id_offsets = _packed_varints(input_ids)
    id_bytes = id_flat.tobytes()
    id_prefixes: dict[int, bytes] = {}

    records = []
    for r in range(n):
        start, end = int(id_offsets[r]), int(id_offsets[r + 1])
        prefix = id_prefixes.get(end - start)
        if prefix is None:
            prefix = id_prefixes[end - start] = entry_prefix(b"input_ids", end - start)
        features = b"".join(
            (
                prefix,
                id_bytes[start:end],
                mask_prefix,
                mask_bytes[r * length : (r + 1) * length],
                seg_prefix,
                seg_bytes[r * length : (r + 1) * length],
            )
        )
        records.append(b"\x0a" + _varint(len(features)) + features)
    return records
