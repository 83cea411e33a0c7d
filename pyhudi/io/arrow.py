"""Zero-copy bridges between Arrow binary arrays and numpy buffers, for compiled loops."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.errors import InvalidInputError


def to_binary_array(values: Iterable[str | bytes] | pa.Array | pa.ChunkedArray, what: str = "key") -> pa.Array:
    """An Arrow binary (or large_binary) array from strings, bytes or an Arrow string/binary array; no nulls."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if not isinstance(values, pa.Array):
        items = list(values)
        if any(isinstance(v, str) for v in items):
            arr = pa.array(items, pa.string())
        else:
            arr = pa.array(items, pa.binary())
    else:
        arr = values
    t = arr.type
    if pa.types.is_string(t):
        arr = arr.cast(pa.binary())
    elif pa.types.is_large_string(t):
        arr = arr.cast(pa.large_binary())
    elif not (pa.types.is_binary(t) or pa.types.is_large_binary(t)):
        raise InvalidInputError(f"{what}s must be strings or bytes, got Arrow type {t}")
    if arr.null_count:
        raise InvalidInputError(f"null {what} at position {arr.is_null().index(True).as_py()}")
    return arr


def binary_buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(data uint8, offsets int64 of length n+1) of a null-free binary/large_binary array, without copying data."""
    odt = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    bufs = arr.buffers()
    offs = np.frombuffer(bufs[1], dtype=odt)[arr.offset : arr.offset + len(arr) + 1] if len(arr) else np.zeros(1, odt)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None and bufs[2].size else np.empty(0, np.uint8)
    return data, offs.astype(np.int64, copy=False)


def binary_array(data: np.ndarray, offsets: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """A binary array over numpy buffers (int32 offsets); ``valid`` is an optional boolean mask."""
    n = len(offsets) - 1
    validity = None
    null_count = 0
    if valid is not None and not valid.all():
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
        null_count = int(n - np.count_nonzero(valid))
    return pa.Array.from_buffers(
        pa.binary(),
        n,
        [validity, pa.py_buffer(offsets.astype(np.int32, copy=False)), pa.py_buffer(data)],
        null_count=null_count,
    )


def pack_strings(values: pa.Array | pa.ChunkedArray) -> bytes:
    """A string array as one binary value (an Arrow IPC stream of one column): how a Spark row carries many
    strings that only Python reads, without the JVM converting each one (:func:`unpack_strings` reverses it)."""
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if not pa.types.is_string(arr.type):
        arr = arr.cast(pa.string())
    batch = pa.record_batch([arr], names=["v"])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    return sink.getvalue().to_pybytes()


def unpack_strings(packed: bytes | pa.Buffer | pa.Scalar | None) -> pa.Array:
    """The string array :func:`pack_strings` packed (empty for a null value)."""
    if isinstance(packed, pa.Scalar):
        packed = packed.as_buffer() if packed.is_valid else None
    if packed is None:
        return pa.array([], pa.string())
    return pa.ipc.open_stream(packed).read_next_batch().column(0)  # one batch: what pack_strings writes


def constant_strings(value: str, n: int) -> pa.Array | pa.ChunkedArray:
    """A string array of ``n`` copies of ``value``, built from buffers (no Python list of ``n`` objects); chunked
    when the copies exceed one string array's 2 GiB of data."""
    raw = value.encode("utf-8")
    per_chunk = n if not raw else min(n, _MAX_STRING_BYTES // len(raw))
    if per_chunk >= n:
        return _repeated(raw, n)
    sizes = [per_chunk] * (n // per_chunk) + ([n % per_chunk] if n % per_chunk else [])
    return pa.chunked_array([_repeated(raw, m) for m in sizes], pa.string())


#: the data bytes one (32-bit offset) string array holds at most
_MAX_STRING_BYTES = int(np.iinfo(np.int32).max)


def _repeated(raw: bytes, n: int) -> pa.Array:
    offsets = (np.arange(n + 1, dtype=np.int64) * len(raw)).astype(np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


def numbered_strings(prefix: str, start: int, n: int) -> pa.Array:
    """``prefix + str(i)`` for i in ``start, start + 1, ..., start + n - 1`` as a string array."""
    numbers = pa.array(np.arange(start, start + n, dtype=np.int64)).cast(pa.string())
    return pc.binary_join_element_wise(pa.scalar(prefix), numbers, "")
