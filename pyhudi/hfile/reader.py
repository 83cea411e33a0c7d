"""Reading HFile v3 files written by Apache Hudi (native writer) or HBase 2.4, through ranged reads.

Opening reads only the trailer and the load-on-open section (root index, meta index, file info) plus, for
HBase's multi-level indexes, the intermediate and leaf index blocks. A lookup reads only the data blocks that
can hold its keys, coalescing adjacent blocks into one ranged read; each block is read and decoded once per call.
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.errors import CorruptFileError, UnsupportedFormatError
from pyhudi.hfile import _kernels as K
from pyhudi.hfile.block import BlockHeader, decode_block, read_nonroot_index, read_root_index
from pyhudi.hfile.format import (
    BLOCK_HEADER_SIZE,
    FI_KEY_VALUE_VERSION,
    FI_LAST_KEY,
    FI_MAX_TAGS_LEN,
    KEY_VALUE_VERSION_WITH_MVCC,
    MAGIC_DATA,
    MAGIC_ENCODED_DATA,
    MAGIC_FILE_INFO,
    MAGIC_INTERMEDIATE_INDEX,
    MAGIC_LEAF_INDEX,
    MAGIC_META,
    MAGIC_ROOT_INDEX,
    TRAILER_SIZE,
    IndexEntry,
    Trailer,
    decode_file_info,
    row_of_key,
)
from pyhudi.io.arrow import binary_array, binary_buffers, to_binary_array
from pyhudi.io.compression import CODEC_NAMES
from pyhudi.io.pools import shared_pool
from pyhudi.io.storage import Storage

KV_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary())])
_MAX_RUN_BYTES = 32 << 20  # coalesce adjacent blocks into ranged reads of at most this size
_MAX_RUN_GAP = 64 << 10  # ... bridging gaps (HBase inline index blocks) up to this size

_T = TypeVar("_T")


def _pool() -> ThreadPoolExecutor:
    """The process's HFile block pool: readers in several threads (record-index file groups looked up at once)
    share it."""
    return shared_pool("pyhudi-hfile", max(2, os.cpu_count() or 2))


class HFileReader:
    """A reader over one HFile. Use :meth:`open`, :meth:`from_uri` or :meth:`from_bytes`."""

    def __init__(self, source: pa.NativeFile, path: str, *, verify_checksums: bool = True) -> None:
        self.path = path
        self._src = source
        self.verify_checksums = verify_checksums
        self.file_size = source.size()
        if self.file_size < TRAILER_SIZE:
            raise CorruptFileError(
                path, f"file is {self.file_size} bytes, too short for the {TRAILER_SIZE}-byte HFile trailer (truncated?)"
            )
        trailer_off = self.file_size - TRAILER_SIZE
        try:
            self.trailer = Trailer.decode(self._read(trailer_off, TRAILER_SIZE))
        except ValueError as e:
            raise CorruptFileError(path, f"no valid HFile trailer at the end of the file (truncated?): {e}", trailer_off) from None
        t = self.trailer
        self.codec = t.compression_codec
        if self.codec not in CODEC_NAMES:
            raise CorruptFileError(path, f"unknown compression codec id {self.codec} in trailer", trailer_off)
        los = t.load_on_open_data_offset
        if not (0 <= los < trailer_off) or not (los <= t.file_info_offset < trailer_off):
            raise CorruptFileError(
                path, f"trailer offsets out of range (load-on-open {los}, file info {t.file_info_offset})", trailer_off
            )
        section = self._read(los, trailer_off - los)
        # root data index, meta index, file info: back to back
        h_root, root = self._decode(section, 0, los, MAGIC_ROOT_INDEX)
        meta_pos = h_root.on_disk_size
        _, meta = self._decode(section, meta_pos, los + meta_pos, MAGIC_ROOT_INDEX)
        fi_pos = t.file_info_offset - los
        _, fi = self._decode(section, fi_pos, t.file_info_offset, MAGIC_FILE_INFO)
        try:
            self.file_info: dict[str, bytes] = decode_file_info(fi)
        except ValueError as e:
            raise CorruptFileError(path, f"file info block: {e}", t.file_info_offset) from None
        self.meta_index = [
            IndexEntry(o, s, k) for o, s, k in read_root_index(meta, t.meta_index_count, path, los + meta_pos)
        ]
        root_entries = read_root_index(root, t.data_index_count, path, los)
        self.index_levels = max(1, t.num_data_index_levels)
        self.index_level_sizes = [len(root_entries)]
        entries = root_entries
        for level in range(1, self.index_levels):
            entries = self._read_child_index(entries, last=level == self.index_levels - 1)
            self.index_level_sizes.append(len(entries))
        try:
            self.block_index = [IndexEntry(o, s, row_of_key(k)) for o, s, k in entries]
        except ValueError as e:
            raise CorruptFileError(path, f"malformed key in the data block index: {e}", los) from None
        self._block_offsets = np.array([e.offset for e in self.block_index], np.int64)
        self._block_sizes = np.array([e.size for e in self.block_index], np.int64)
        # data blocks all lie before the load-on-open section
        bad = (
            (self._block_offsets < 0)
            | (self._block_sizes < BLOCK_HEADER_SIZE)
            | (self._block_offsets > los - self._block_sizes)
        )
        if bad.any():
            bad_entry = self.block_index[int(np.argmax(bad))]
            raise CorruptFileError(
                path,
                f"data block index entry (offset {bad_entry.offset}, size {bad_entry.size}) "
                "lies outside the data section",
                los,
            )
        self._first_rows = [e.key for e in self.block_index]
        packed = to_binary_array(self._first_rows) if self._first_rows else pa.array([], pa.binary())
        self._first_rows_buf = binary_buffers(packed)
        self._mvcc = _int(self.file_info.get(FI_KEY_VALUE_VERSION)) == KEY_VALUE_VERSION_WITH_MVCC
        self._tags = FI_MAX_TAGS_LEN in self.file_info
        last = self.file_info.get(FI_LAST_KEY, b"")
        try:
            self.last_key: bytes | None = row_of_key(last) if last else None
        except ValueError as e:
            raise CorruptFileError(
                path, f"malformed {FI_LAST_KEY} in file info: {e}", t.file_info_offset
            ) from None

    # -- constructors -------------------------------------------------------------------------------
    @classmethod
    def open(cls, storage: Storage, path: str, **kw: Any) -> HFileReader:
        return cls(storage.open_input(path), path, **kw)

    @classmethod
    def from_uri(cls, uri: str, **kw: Any) -> HFileReader:
        storage, path = Storage.from_uri(uri)
        return cls.open(storage, path, **kw)

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "<memory>", **kw: Any) -> HFileReader:
        """An HFile held in memory, e.g. the content of a metadata-table log block."""
        return cls(pa.BufferReader(data), name, **kw)

    def close(self) -> None:
        self._src.close()

    def __enter__(self) -> HFileReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- metadata -----------------------------------------------------------------------------------
    @property
    def entry_count(self) -> int:
        return self.trailer.entry_count

    @property
    def num_blocks(self) -> int:
        return len(self.block_index)

    @property
    def codec_name(self) -> str:
        return CODEC_NAMES[self.codec]

    def meta_block_names(self) -> list[str]:
        return [e.key.decode("utf-8", "replace") for e in self.meta_index]

    def meta_block(self, name: str) -> bytes | None:
        """The payload of the meta block called ``name`` (e.g. Hudi's ``bloomFilter``), or None."""
        want = name.encode()
        for e in self.meta_index:
            if e.key == want:
                buf = self._read(e.offset, e.size)
                return self._decode(buf, 0, e.offset, MAGIC_META)[1]
        return None

    # -- point and batch lookups ------------------------------------------------------------------
    def get(self, key: str | bytes) -> bytes | None:
        """The value of the first cell whose row equals ``key``, or None."""
        v = self.lookup([key]).column("value")[0].as_py()
        return v

    def lookup(self, keys: Iterable[str | bytes] | pa.Array | pa.ChunkedArray) -> pa.Table:
        """Look many keys up at once. Returns a table (key, value) in the order given; value is null if absent.

        The keys are sorted internally, routed to the data blocks that can hold them, and every needed block
        is read and decoded once; blocks are decoded in parallel threads.
        """
        arr = to_binary_array(keys)
        n = len(arr)
        if n == 0 or not self.block_index:
            return pa.table([arr, pa.nulls(n, pa.binary())], schema=KV_SCHEMA)
        order = np.asarray(pc.sort_indices(arr))
        sorted_keys = arr.take(pa.array(order))
        qdata, qoff = binary_buffers(sorted_keys)
        last = np.frombuffer(self.last_key, np.uint8) if self.last_key is not None else np.empty(0, np.uint8)
        blk = K.floor_blocks(qdata, qoff, *self._first_rows_buf, last, len(last) if self.last_key is not None else -1)
        out_start = np.zeros(n, np.int64)
        out_len = np.full(n, -1, np.int64)
        present = blk >= 0
        bids, first = np.unique(blk[present], return_index=True)
        idx = np.flatnonzero(present)
        starts = idx[first]
        # no ranges at all when every key falls before the first block or after the last key
        ends = np.append(starts[1:], idx[-1] + 1) if len(idx) else starts
        ranges = dict(zip(bids.tolist(), zip(starts.tolist(), ends.tolist(), strict=True), strict=True))

        def probe(bid: int, payload: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
            lo, hi = ranges[bid]
            bad = K.lookup_block(payload, self._mvcc, self._tags, qdata, qoff, lo, hi, out_start, out_len)
            if bad >= 0:
                self._corrupt_cell(bid, bad)
            data, _ = K.gather(payload, out_start[lo:hi], out_len[lo:hi])
            return lo, data, out_len[lo:hi]

        chunks = list(self._map_blocks(bids.tolist(), probe))
        data = np.concatenate([c[1] for c in chunks]) if chunks else np.empty(0, np.uint8)
        lens = np.maximum(out_len, 0)
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        values_sorted = binary_array(data, offsets, valid=out_len >= 0)
        inverse = np.empty(n, np.int64)
        inverse[order] = np.arange(n)
        return pa.table([arr, values_sorted.take(pa.array(inverse))], schema=KV_SCHEMA)

    # -- scans --------------------------------------------------------------------------------------
    def scan(
        self, start: str | bytes | None = None, stop: str | bytes | None = None, *, prefix: str | bytes | None = None
    ) -> Iterator[pa.RecordBatch]:
        """Cells with start <= row < stop (either bound optional) or with the given row prefix, in order.

        Yields one Arrow record batch (key, value) per data block touched.
        """
        if prefix is not None:
            if start is not None or stop is not None:
                raise ValueError("give either a prefix or start/stop bounds, not both")
            start = _bytes(prefix)
            stop = _prefix_successor(start)
        lo = _bytes(start) if start is not None else None
        hi = _bytes(stop) if stop is not None else None
        if not self.block_index:
            return
        first = 0 if lo is None else max(0, bisect.bisect_right(self._first_rows, lo) - 1)
        last = len(self.block_index) if hi is None else bisect.bisect_left(self._first_rows, hi)
        if first >= last:
            return
        lo_np = np.frombuffer(lo, np.uint8) if lo is not None else None
        hi_np = np.frombuffer(hi, np.uint8) if hi is not None else None

        def decode(bid: int, payload: np.ndarray) -> pa.RecordBatch:
            cnt, rs, rl, vs, vl, bad = K.parse_cells(payload, self._mvcc, self._tags)
            if bad >= 0:
                self._corrupt_cell(bid, bad)
            i0 = K.lower_bound(payload, rs, rl, lo_np, False) if lo_np is not None else 0
            i1 = K.lower_bound(payload, rs, rl, hi_np, False) if hi_np is not None else cnt
            kd, ko = K.gather(payload, rs[i0:i1], rl[i0:i1])
            vd, vo = K.gather(payload, vs[i0:i1], vl[i0:i1])
            return pa.RecordBatch.from_arrays([binary_array(kd, ko), binary_array(vd, vo)], schema=KV_SCHEMA)

        for batch in self._map_blocks(list(range(first, last)), decode):
            if batch.num_rows:
                yield batch

    def read_all(self) -> pa.Table:
        """Every cell of the file as one table (key, value)."""
        return pa.Table.from_batches(list(self.scan()), schema=KV_SCHEMA)

    # -- internals ----------------------------------------------------------------------------------
    def _read(self, offset: int, size: int) -> bytes:
        if offset < 0 or size < 0 or offset + size > self.file_size:
            raise CorruptFileError(
                self.path, f"read of {size} bytes runs past the end of the {self.file_size}-byte file", offset
            )
        buf = self._src.read_at(size, offset)
        if len(buf) != size:
            raise CorruptFileError(self.path, f"short read: wanted {size} bytes, got {len(buf)}", offset)
        return buf

    def _decode(
        self, buf: bytes | memoryview, pos: int, file_offset: int, magic: bytes | tuple[bytes, ...]
    ) -> tuple[BlockHeader, bytes]:
        return decode_block(buf, pos, self.codec, self.path, file_offset, magic, self.verify_checksums)

    def _read_child_index(self, entries: list[tuple[int, int, bytes]], last: bool) -> list[tuple[int, int, bytes]]:
        magic = MAGIC_LEAF_INDEX if last else (MAGIC_INTERMEDIATE_INDEX, MAGIC_LEAF_INDEX)
        out: list[tuple[int, int, bytes]] = []
        for off, size, _ in entries:
            _, payload = self._decode(self._read(off, size), 0, off, magic)
            out.extend(read_nonroot_index(payload, self.path, off))
        return out

    def _corrupt_cell(self, bid: int, pos: int) -> None:
        raise CorruptFileError(
            self.path,
            f"malformed cell at payload offset {pos} of the data block at offset {self.block_index[bid].offset}",
            int(self._block_offsets[bid]),
        )

    def _runs(self, bids: list[int]) -> list[list[int]]:
        runs: list[list[int]] = []
        for b in bids:
            if runs:
                prev = runs[-1]
                start = self._block_offsets[prev[0]]
                gap = self._block_offsets[b] - (self._block_offsets[prev[-1]] + self._block_sizes[prev[-1]])
                if 0 <= gap <= _MAX_RUN_GAP and self._block_offsets[b] + self._block_sizes[b] - start <= _MAX_RUN_BYTES:
                    prev.append(b)
                    continue
            runs.append([b])
        return runs

    def _map_blocks(self, bids: list[int], fn: Callable[[int, np.ndarray], _T]) -> Iterator[_T]:
        """Read data blocks ``bids`` (ascending) with coalesced ranged reads and apply ``fn`` to each decoded
        payload in a thread pool; results come back in block order."""

        def work(bid: int, buf: bytes, pos: int) -> _T:
            off = int(self._block_offsets[bid])
            h, payload = self._decode(buf, pos, off, (MAGIC_DATA, MAGIC_ENCODED_DATA))
            if h.magic == MAGIC_ENCODED_DATA:
                raise UnsupportedFormatError(
                    f"{self.path}: data block at offset {off} uses HBase data block encoding, which Hudi does not read"
                )
            if h.on_disk_size != self._block_sizes[bid]:
                raise CorruptFileError(
                    self.path,
                    f"data block is {h.on_disk_size} bytes on disk but the index says {self._block_sizes[bid]}",
                    off,
                )
            return fn(bid, np.frombuffer(payload, np.uint8))

        runs = self._runs(bids)
        if len(bids) == 1:
            b = bids[0]
            yield work(b, self._read(int(self._block_offsets[b]), int(self._block_sizes[b])), 0)
            return
        pool = _pool()
        pending: list[Any] = []
        window = 2 * (pool._max_workers or 2)
        for run in runs:
            start = int(self._block_offsets[run[0]])
            end = int(self._block_offsets[run[-1]] + self._block_sizes[run[-1]])
            buf = self._read(start, end - start)
            for b in run:
                pending.append(pool.submit(work, b, buf, int(self._block_offsets[b]) - start))
                while len(pending) > window:
                    yield pending.pop(0).result()
        for f in pending:
            yield f.result()


def _int(v: bytes | None) -> int | None:
    if v is None:
        return None
    if len(v) == 4:
        return int(struct.unpack(">i", v)[0])
    if len(v) == 8:
        return int(struct.unpack(">q", v)[0])
    return None


def _bytes(k: str | bytes) -> bytes:
    return k.encode() if isinstance(k, str) else bytes(k)


def _prefix_successor(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string starting with ``prefix`` (None: no upper bound)."""
    p = bytearray(prefix)
    while p and p[-1] == 0xFF:
        p.pop()
    if not p:
        return None
    p[-1] += 1
    return bytes(p)


__all__ = ["KV_SCHEMA", "HFileReader"]
