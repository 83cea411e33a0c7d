"""GZ blocks that would end just below a checksum-chunk edge.

Hudi's readers count a block's checksum chunks over its on-disk size *with* the checksums. For a block whose header
and gzip member end within ``4 * chunks`` bytes below a multiple of 16384, that count is one chunk too many, and
hudi-rs cuts the last 4 bytes off the gzip member ("GZIP decompression failed: unexpected end of file"). The writer
lengthens such a member by a gzip FEXTRA field, so every reader gets the whole member and the same payload.
"""

from __future__ import annotations

import gzip
import os
import random
import shutil
import string
from pathlib import Path

import pyarrow as pa
import pytest

from pyhudi.hfile import HFileReader
from pyhudi.hfile import block as block_mod
from pyhudi.hfile.block import (
    decode_block,
    encode_block,
    num_checksum_bytes,
    parse_header,
    readers_checksum_bytes,
)
from pyhudi.hfile.format import BLOCK_HEADER_SIZE, BYTES_PER_CHECKSUM, MAGIC_DATA
from pyhudi.io.compression import CODEC_GZ, compress
from pyhudi.io.storage import Storage
from pyhudi.metadata.record_index import base_hfile, encode_locations

B = BYTES_PER_CHECKSUM


def _in_window(data_size_with_header: int) -> bool:
    return readers_checksum_bytes(data_size_with_header, B) != num_checksum_bytes(data_size_with_header, B)


def test_window_is_the_last_bytes_before_each_chunk_edge() -> None:
    for chunks in (1, 2, 3, 64):
        edge = chunks * B
        inside = [d for d in range(edge - 4 * chunks - 8, edge + 8) if _in_window(d)]
        assert inside == list(range(edge - 4 * chunks + 1, edge + 1)), chunks


@pytest.mark.parametrize("chunks", [1, 2, 3, 5])
def test_blocks_at_every_size_near_a_chunk_edge_read_whole(chunks: int) -> None:
    """Incompressible payloads give a gzip member one byte longer per payload byte: every block size around the
    edge is made, each keeps the header invariants, leaves the readers' count equal to its own, and decodes."""
    rnd = random.Random(chunks)
    noise = rnd.randbytes(chunks * B)
    seen_window = 0
    for n in range(chunks * B - BLOCK_HEADER_SIZE - 300, chunks * B - BLOCK_HEADER_SIZE + 50):
        payload = noise[:n]
        blk = encode_block(MAGIC_DATA, payload, CODEC_GZ)
        h = parse_header(blk, 0, "mem", 0)
        d = h.on_disk_data_size_with_header
        member = blk[BLOCK_HEADER_SIZE:d]
        assert len(blk) == d + num_checksum_bytes(d, B) == BLOCK_HEADER_SIZE + h.on_disk_size_without_header
        assert not _in_window(d), (n, d)
        # what hudi-rs hands its gzip decoder: 33 .. 33 + onDiskSizeWithoutHeader - the readers' count
        cut = blk[BLOCK_HEADER_SIZE : BLOCK_HEADER_SIZE + h.on_disk_size_without_header - readers_checksum_bytes(d, B)]
        assert cut == member
        assert gzip.decompress(member) == payload
        assert decode_block(blk, 0, CODEC_GZ, "mem", 0)[1] == payload
        plain = compress(CODEC_GZ, payload)
        if member[3] & 0x04:  # FEXTRA: lengthened, and only because the plain member was in the window
            seen_window += 1
            was = BLOCK_HEADER_SIZE + len(plain)
            assert _in_window(was)
            edge = num_checksum_bytes(was, B) // 4 * B
            assert d == max(edge + 1, was + 6)  # one byte past the edge, or the smallest FEXTRA field
        else:
            assert member == plain
    assert seen_window, "no size in the range fell in the window: the range misses the edge"


def _rli_file(keys: list[str]) -> bytes:
    n = len(keys)
    vals = encode_locations(pa.array(["2026/01/01"] * n), pa.array(["6f3a2c1e-0000-4000-8000-000000000001-0"] * n),
                            pa.array([1_700_000_000_000] * n, pa.int64()))
    return base_hfile(pa.array(keys), vals, "x.hfile")


def _first_block(data: bytes) -> tuple[int, bool]:
    h = parse_header(data, 0, "mem", 0)
    return h.on_disk_data_size_with_header, bool(data[BLOCK_HEADER_SIZE + 3] & 0x04)


def test_hudi_rs_reads_a_record_index_file_whose_block_was_at_the_edge(mdt_tables: dict[str, Path], tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A record-index base HFile whose one data block compresses to a size in the window: written padded,
    hudi-rs decodes every key of it; the same file unpadded is the one hudi-rs cannot read."""
    from hudi import HudiFileGroupReader

    rnd = random.Random(7)
    pool = ["".join(rnd.choice(string.ascii_letters + string.digits) for _ in range(40)) for _ in range(2000)]
    lo, hi = 1, len(pool)  # the fewest keys whose block reaches 40 bytes below the third chunk edge
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if _first_block(_rli_file(pool[:mid]))[0] <= 3 * B - 40 else (lo, mid)
    keys = pool[:lo]
    data = None
    for extra in range(600):  # then one more key of 2-61 characters, until the block lands in the window
        tail = "zz" + "".join(random.Random(extra).choice(string.ascii_letters) for _ in range(extra % 60))
        candidate = _rli_file([*keys, tail])
        if _first_block(candidate)[1]:
            data, keys = candidate, [*keys, tail]
            break
    assert data is not None, "no key set put the data block at the edge"
    assert _first_block(data)[0] == 3 * B + 1

    src = mdt_tables["cow_v9_txns_simple_meta.zip"]
    table = tmp_path / "t"
    shutil.copytree(src, table)
    mdt = table / ".hoodie" / "metadata"
    target = sorted((mdt / "record_index").glob("*.hfile"))[0]
    target.write_bytes(data)
    rel = f"record_index/{target.name}"
    with monkeypatch.context() as m:
        m.setattr(block_mod, "_gzip_clear_of_chunk_edge", lambda member: member)
        plain = _rli_file(keys)
    assert _in_window(_first_block(plain)[0])
    target.write_bytes(plain)
    with pytest.raises(Exception, match="unexpected end of file"):
        HudiFileGroupReader(str(mdt)).read_file_slice_from_paths(rel, [])
    target.write_bytes(data)
    got = HudiFileGroupReader(str(mdt)).read_file_slice_from_paths(rel, [])
    t = pa.Table.from_batches(got if isinstance(got, list) else [got])
    assert sorted(t.column("key").to_pylist()) == sorted(keys)
    with HFileReader.open(Storage.from_uri("/")[0], os.fspath(target)) as h:
        assert sorted(h.read_all().column("key").cast(pa.string()).to_pylist()) == sorted(keys)
