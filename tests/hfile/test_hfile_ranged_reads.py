"""The reader touches only what it needs: the trailer and load-on-open section at open, one block per point lookup."""

from __future__ import annotations

import bisect
from pathlib import Path

import pyarrow as pa
import pytest
from hfile_vectors import GZ_20000, VECTORS, require_vectors

from pyhudi.hfile import HFileReader, hfile_bytes
from pyhudi.io.compression import CODEC_GZ


class CountingFile:
    """The part of a pyarrow NativeFile the reader uses (size, read_at, close), recording every ranged read."""

    def __init__(self, data: bytes) -> None:
        self._f = pa.BufferReader(data)
        self.reads: list[tuple[int, int]] = []  # (offset, size)

    def size(self) -> int:
        return self._f.size()

    def read_at(self, nbytes: int, offset: int) -> bytes:
        self.reads.append((offset, nbytes))
        return self._f.read_at(nbytes, offset)

    def read(self, *a: object) -> bytes:
        raise AssertionError("the reader must use ranged reads only")

    def close(self) -> None:
        self._f.close()

    @property
    def bytes_read(self) -> int:
        return sum(n for _, n in self.reads)


def _open(path: str, data: bytes | None = None) -> tuple[HFileReader, CountingFile, bytes]:
    if data is None:
        data = Path(path).read_bytes()
    src = CountingFile(data)
    return HFileReader(src, str(path)), src, data  # type: ignore[arg-type]


@pytest.fixture
def gz20000() -> tuple[HFileReader, CountingFile, bytes]:
    require_vectors()
    return _open(str(GZ_20000))


def test_open_reads_only_trailer_and_load_on_open(gz20000: tuple[HFileReader, CountingFile, bytes]) -> None:
    r, src, data = gz20000
    n = len(data)
    los = r.trailer.load_on_open_data_offset
    assert src.reads == [(n - 4096, 4096), (los, n - 4096 - los)]
    assert src.bytes_read < n // 10


def test_point_lookup_reads_one_block(gz20000: tuple[HFileReader, CountingFile, bytes]) -> None:
    r, src, _ = gz20000
    for i in (0, 5000, 12345, 19999):
        src.reads.clear()
        key = b"hudi-key-%09d" % i
        assert r.get(key) == b"hudi-value-%09d" % i
        [(off, size)] = src.reads
        e = next(e for e in r.block_index if e.offset == off)
        assert size == e.size  # exactly one data block, header and checksums included
        assert e.key <= key


def test_lookups_touch_no_block_when_keys_cannot_be_there(
    gz20000: tuple[HFileReader, CountingFile, bytes],
) -> None:
    r, src, _ = gz20000
    src.reads.clear()
    assert r.lookup([b"", b"a", b"hudi-key-999999999", b"zzz"]).column("value").null_count == 4
    assert src.reads == []


def test_batch_lookup_reads_each_needed_block_once(gz20000: tuple[HFileReader, CountingFile, bytes]) -> None:
    r, src, _ = gz20000
    idx = r.block_index
    keys = [b"hudi-key-%09d" % i for i in (1, 2, 3, 300, 301, 10000, 10001, 19999)]
    needed = sorted({max(j for j, e in enumerate(idx) if e.key <= k) for k in keys})
    assert len(needed) == 4
    src.reads.clear()
    t = r.lookup(keys)
    assert t.column("value").to_pylist() == [b"hudi-value-" + k[9:] for k in keys]
    # every read starts at a needed block and ends at one; each needed block is read exactly once
    starts = {idx[j].offset: j for j in needed}
    ends = {idx[j].offset + idx[j].size for j in needed}
    covered = []
    for off, size in src.reads:
        assert off in starts and off + size in ends, (off, size)
        covered += [j for j in needed if off <= idx[j].offset < off + size]
    assert sorted(covered) == needed
    assert len(src.reads) <= len(needed)
    # the reader coalesces needed blocks separated by gaps of at most 64 KiB into one read (fewer requests to
    # object stores); it never reads more than that
    assert src.bytes_read <= sum(idx[j].size for j in needed) + (len(needed) - 1) * (64 << 10)


def test_meta_block_read_is_ranged(gz20000: tuple[HFileReader, CountingFile, bytes]) -> None:
    r, src, _ = gz20000
    src.reads.clear()
    assert r.meta_block("bloomFilter")
    [(off, size)] = src.reads
    assert (off, size) == (r.meta_index[0].offset, r.meta_index[0].size)


def test_deep_index_open_reads_only_index_blocks() -> None:
    require_vectors()
    r, src, data = _open(str(VECTORS / "hudi_1_0_hbase_2_4_13_1KB_GZ_10000_large_keys_deep_index.hfile"))
    n = len(data)
    los = r.trailer.load_on_open_data_offset
    assert src.reads[:2] == [(n - 4096, 4096), (los, n - 4096 - los)]
    rest = src.reads[2:]
    assert len(rest) == 7 + 103  # intermediate blocks, then leaf blocks
    for off, _ in rest:
        assert data[off : off + 8] in (b"IDXINTE2", b"IDXLEAF2")
    # index keys here are shortened: the block's real first row is the first stored row >= its index key
    rows = [b"hudi-key-" + b"a" * 100 + b"-%09d" % i for i in range(10000)]
    key = rows[bisect.bisect_left(rows, r.block_index[700].key)]
    src.reads.clear()
    assert r.get(key) == b"hudi-value-" + key[-9:]
    assert src.reads == [(r.block_index[700].offset, r.block_index[700].size)]


def test_scan_reads_only_the_blocks_in_range() -> None:
    keys = [b"k%06d" % i for i in range(20000)]
    data, _ = hfile_bytes(keys, [b"v" * 20] * len(keys), codec=CODEC_GZ, block_size=4096)
    r, src, _ = _open("<mem>", data)
    idx = r.block_index
    assert len(idx) > 50
    src.reads.clear()
    got = [k for b in r.scan(idx[10].key, idx[13].key) for k in b.column("key").to_pylist()]
    assert got[0] == idx[10].key and len(got) == keys.index(idx[13].key) - keys.index(idx[10].key)
    assert src.bytes_read == sum(idx[j].size for j in (10, 11, 12))
