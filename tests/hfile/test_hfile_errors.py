"""Bad input to the writer and damaged files for the reader: clear errors naming the key, file and offset."""

from __future__ import annotations

import io
import os
import random
import struct
from pathlib import Path

import pytest
from hfile_vectors import GZ_20000, NONE_5000, require_vectors

from pyhudi.errors import CorruptFileError, InvalidInputError, PyHudiError
from pyhudi.hfile import HFileReader, HFileWriter, hfile_bytes
from pyhudi.io.compression import CODEC_GZ, CODEC_NONE


# -- writer input ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "keys",
    [
        [b"key2", b"key1"],
        [b"a", b"c", b"b"],
        [b"b", b""],
        [b"\xff", b"\x00"],
        [b"ab", b"a"],
    ],
)
def test_unsorted_keys_rejected(keys: list[bytes]) -> None:
    with pytest.raises(InvalidInputError, match="out of order") as ei:
        hfile_bytes(keys, [b"v"] * len(keys))
    bad = next(k for i, k in enumerate(keys) if i and k < keys[i - 1])
    assert repr(bad) in str(ei.value)


def test_duplicate_keys_rejected() -> None:
    with pytest.raises(InvalidInputError, match="duplicate") as ei:
        hfile_bytes([b"a", b"dupkey", b"dupkey"], [b"1", b"2", b"3"])
    assert repr(b"dupkey") in str(ei.value)


def test_order_checked_across_batches_and_appends() -> None:
    w = HFileWriter(io.BytesIO())
    w.append_batch([b"b", b"c"], [b"", b""])
    with pytest.raises(InvalidInputError, match="duplicate") as ei:
        w.append_batch([b"c"], [b""])
    assert repr(b"c") in str(ei.value)
    w2 = HFileWriter(io.BytesIO())
    w2.append("k2", b"")
    w2.append("k1", b"")
    with pytest.raises(InvalidInputError, match="out of order") as ei:
        w2.close()
    assert repr(b"k1") in str(ei.value)


def test_key_length_limit() -> None:
    ok, _ = hfile_bytes([b"k" * 32767], [b"v"], codec=CODEC_NONE)
    assert HFileReader.from_bytes(ok).get(b"k" * 32767) == b"v"
    with pytest.raises(InvalidInputError, match="32767"):
        hfile_bytes([b"a", b"k" * 32768], [b"v", b"w"])
    w = HFileWriter(io.BytesIO())
    with pytest.raises(InvalidInputError, match="40000 bytes"):
        w.append_batch([b"x" * 40000], [b""])


def test_mismatched_lengths_nulls_and_bad_options() -> None:
    with pytest.raises(InvalidInputError):
        hfile_bytes([b"a", b"b"], [b"1"])
    with pytest.raises(InvalidInputError):
        hfile_bytes([b"a", None], [b"1", b"2"])
    with pytest.raises(InvalidInputError):
        hfile_bytes([b"a"], [b"1"], block_size=0)
    with pytest.raises(InvalidInputError):
        hfile_bytes([b"a"], [b"1"], codec=6)
    w = HFileWriter(io.BytesIO())
    w.close()
    with pytest.raises(InvalidInputError):
        w.close()
    with pytest.raises(InvalidInputError):
        w.append_batch([b"z"], [b""])


# -- corrupted data block of an HBase (CRC32C) vector ---------------------------------------------------------
@pytest.fixture
def corrupted_gz(tmp_path: Path) -> tuple[Path, HFileReader]:
    require_vectors()
    data = bytearray(GZ_20000.read_bytes())
    r = HFileReader.from_bytes(bytes(data))
    b1 = r.block_index[1]
    assert data[b1.offset + 24] == 2  # CRC32C
    data[b1.offset + 33 + 100] ^= 0x55  # inside the compressed payload of the 2nd data block
    path = tmp_path / "corrupt.hfile"
    path.write_bytes(bytes(data))
    return path, r


def _check(e: CorruptFileError, path: Path, offset: int) -> None:
    assert e.path == str(path)
    assert e.offset == offset
    assert str(path) in str(e) and f"offset {offset}" in str(e)


def test_corrupt_block_detected_only_when_touched(corrupted_gz: tuple[Path, HFileReader]) -> None:
    path, clean = corrupted_gz
    idx = clean.block_index
    off1 = idx[1].offset
    first_row_2 = idx[2].key
    in_block_1 = b"hudi-key-%09d" % 300
    assert idx[1].key <= in_block_1 < first_row_2
    r = HFileReader.from_uri(str(path))  # opening does not touch data blocks
    # lookups and scans that avoid block 1 work, even when the ranged read spans it (blocks 0 and 2)
    assert r.get(b"hudi-key-000000005") == b"hudi-value-000000005"
    vals = r.lookup([b"hudi-key-000000005", first_row_2, b"hudi-key-000019999"]).column("value").to_pylist()
    assert vals == [b"hudi-value-000000005", b"hudi-value-%s" % first_row_2[9:], b"hudi-value-000019999"]
    assert sum(b.num_rows for b in r.scan(None, idx[1].key)) == 278
    assert sum(b.num_rows for b in r.scan(first_row_2, idx[4].key)) > 0
    # anything touching block 1 fails, naming file and block offset
    with pytest.raises(CorruptFileError, match="checksum") as ei:
        r.get(in_block_1)
    _check(ei.value, path, off1)
    with pytest.raises(CorruptFileError) as ei:
        r.lookup([b"hudi-key-000000005", in_block_1])
    _check(ei.value, path, off1)
    with pytest.raises(CorruptFileError) as ei:
        r.read_all()
    _check(ei.value, path, off1)
    with pytest.raises(CorruptFileError) as ei:
        list(r.scan(prefix=b"hudi-key-0000003"))
    _check(ei.value, path, off1)
    with pytest.raises(CorruptFileError) as ei:
        list(r.scan(b"hudi-key-000000100", b"hudi-key-000000900"))
    _check(ei.value, path, off1)


def test_corrupt_block_without_checksum_verification(corrupted_gz: tuple[Path, HFileReader]) -> None:
    path, _ = corrupted_gz
    r = HFileReader.from_uri(str(path), verify_checksums=False)
    # the damaged deflate stream either fails to inflate or to parse; it must never pass silently as an OSError etc.
    try:
        t = r.read_all()
    except CorruptFileError as e:
        assert e.path == str(path)
    else:
        assert t.num_rows <= 20000


# -- damaged native files (NULL checksums: only structure checks protect the reader) --------------------------
def _native(codec: int) -> tuple[bytes, HFileReader]:
    keys = [b"key%05d" % i for i in range(500)]
    data, _ = hfile_bytes(keys, [b"value%05d" % i for i in range(500)], codec=codec, block_size=1024)
    return data, HFileReader.from_bytes(data)


def test_corrupt_cell_length_in_native_file(tmp_path: Path) -> None:
    data, r = _native(CODEC_NONE)
    b = r.block_index[3]
    bad = bytearray(data)
    struct.pack_into(">i", bad, b.offset + 33, 0x7FFFFFF0)  # klen of the block's first cell
    path = tmp_path / "badcell.hfile"
    path.write_bytes(bytes(bad))
    r2 = HFileReader.from_uri(str(path))
    assert r2.get(b"key00000") == b"value00000"
    for op in (lambda: r2.read_all(), lambda: r2.get(b.key), lambda: list(r2.scan(prefix=b.key))):
        with pytest.raises(CorruptFileError, match="malformed cell") as ei:
            op()
        _check(ei.value, path, b.offset)


def test_block_size_mismatch_with_index(tmp_path: Path) -> None:
    data, r = _native(CODEC_NONE)
    b = r.block_index[2]
    bad = bytearray(data)
    (on_disk,) = struct.unpack_from(">i", bad, b.offset + 8)
    struct.pack_into(">i", bad, b.offset + 8, on_disk - 4)
    path = tmp_path / "size.hfile"
    path.write_bytes(bytes(bad))
    with pytest.raises(CorruptFileError) as ei:
        HFileReader.from_uri(str(path)).get(b.key)
    _check(ei.value, path, b.offset)


def _cells(raw: bytes, name: str, probe: list[bytes]) -> tuple[list, list, list]:
    r = HFileReader.from_bytes(raw, name)
    every = r.read_all()
    found = r.lookup(probe)
    return (
        list(zip(every.column("key").to_pylist(), every.column("value").to_pylist(), strict=True)),
        list(zip(found.column("key").to_pylist(), found.column("value").to_pylist(), strict=True)),
        list(r.scan(prefix=probe[0][:5])),
    )


def _flip_every_byte(data: bytes, positions: list[int], probe: list[bytes], *, silent_ok: bool) -> int:
    """Flip each byte at ``positions`` (two ways): any failure must be a PyHudiError; unless ``silent_ok`` (a
    file without integrity checks), a read that succeeds must return exactly the original cells. Returns how
    many flips were detected."""
    want = _cells(data, "original", probe)
    failed = 0
    for pos, flip in ((p, f) for p in positions for f in (0xFF, 0x01)):
        bad = bytearray(data)
        bad[pos] ^= flip
        try:
            got = _cells(bytes(bad), f"flip@{pos}", probe)
        except PyHudiError:
            failed += 1
            continue
        if not silent_ok:
            assert got == want, f"byte {pos} flipped by {flip:#x}: the reader returned other data without an error"
    return failed


def test_single_byte_flips_in_a_compressed_file_are_detected() -> None:
    """pyhudi's (as Hudi's) HFiles carry NULL checksums; with gzip blocks every flip in a block is still caught
    (the deflate stream's CRC and sizes), and a flip anywhere never yields other data silently."""
    keys = [b"key%03d" % i for i in range(20)]
    data, _ = hfile_bytes(keys, [b"v%03d" % i for i in range(20)], codec=CODEC_GZ, block_size=200, creation_time_ms=0)
    positions = list(range(len(data) - 4096 + 80)) + list(range(len(data) - 4, len(data)))
    assert _flip_every_byte(data, positions, [keys[0], keys[17], keys[-1], b"zz"], silent_ok=False) > 0


def test_single_byte_flips_in_a_checksummed_file_are_detected() -> None:
    """HBase's HFiles carry CRC32C block checksums, which the reader verifies: a flip in a block never yields
    other data silently (uncompressed blocks, so only the checksums can catch it)."""
    require_vectors()
    data = NONE_5000.read_bytes()
    r = HFileReader.from_bytes(data, "vector")
    first = r.block_index[0]
    positions = list(range(first.offset, first.offset + min(first.size, 3000)))
    n = _flip_every_byte(data, positions, [b"hudi-key-000000000", b"hudi-key-000000007", b"zz"], silent_ok=False)
    assert n > 0


def test_single_byte_flips_never_crash_without_checksums() -> None:
    """Uncompressed blocks with NULL checksums (Hudi's own uncompressed HFiles) have no integrity check: a flip in
    a cell's bytes changes the cell. The reader must still never fail with anything but a PyHudiError."""
    keys = [b"key%03d" % i for i in range(20)]
    data, _ = hfile_bytes(keys, [b"v%03d" % i for i in range(20)], codec=CODEC_NONE, block_size=200, creation_time_ms=0)
    positions = list(range(len(data) - 4096 + 80)) + list(range(len(data) - 4, len(data)))
    assert _flip_every_byte(data, positions, [keys[0], keys[17], keys[-1], b"zz"], silent_ok=True) > 0


# -- truncated, garbage and tiny files -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "cut",
    [
        lambda n: n - 1,  # mid-trailer (last byte gone)
        lambda n: n - 100,  # mid-trailer
        lambda n: n - 4096 - 10,  # mid file info block
        lambda n: n // 2,  # mid-data
        lambda n: 4096 + 33,  # a little over one trailer's worth
        lambda n: 4096,  # exactly a trailer's size, but not a trailer
    ],
    ids=["n-1", "n-100", "load-on-open", "half", "4129", "4096"],
)
def test_truncated_vector(tmp_path: Path, cut) -> None:  # type: ignore[no-untyped-def]
    require_vectors()
    data = GZ_20000.read_bytes()
    path = tmp_path / "truncated.hfile"
    path.write_bytes(data[: cut(len(data))])
    with pytest.raises(CorruptFileError) as ei:
        r = HFileReader.from_uri(str(path))
        r.read_all()
    assert ei.value.path == str(path) and str(path) in str(ei.value)


@pytest.mark.parametrize("codec", [CODEC_NONE, CODEC_GZ])
@pytest.mark.parametrize("cut", [(0, 40), (50, 51), (100, 300)])
def test_bytes_removed_from_the_middle(tmp_path: Path, codec: int, cut: tuple[int, int]) -> None:
    data, _ = _native(codec)
    path = tmp_path / "hole.hfile"
    path.write_bytes(data[: cut[0]] + data[cut[1] :])
    with pytest.raises(CorruptFileError) as ei:
        r = HFileReader.from_uri(str(path))
        r.read_all()
    assert ei.value.path == str(path)


@pytest.mark.parametrize("size", [0, 1, 100, 4095])
def test_shorter_than_a_trailer(tmp_path: Path, size: int) -> None:
    path = tmp_path / "short.hfile"
    path.write_bytes(b"\x00" * size)
    with pytest.raises(CorruptFileError, match="too short") as ei:
        HFileReader.from_uri(str(path))
    assert ei.value.path == str(path) and str(path) in str(ei.value)


@pytest.mark.parametrize("seed", range(5))
def test_garbage_file(tmp_path: Path, seed: int) -> None:
    rnd = random.Random(seed)
    path = tmp_path / "garbage.hfile"
    path.write_bytes(bytes(rnd.getrandbits(8) for _ in range(5000 + 3000 * seed)))
    with pytest.raises(CorruptFileError) as ei:
        HFileReader.from_uri(str(path))
    assert ei.value.path == str(path)


def test_garbage_behind_a_valid_trailer(tmp_path: Path) -> None:
    """A real trailer whose offsets point at garbage."""
    data, _ = _native(CODEC_GZ)
    path = tmp_path / "g.hfile"
    path.write_bytes(os.urandom(len(data) - 4096) + data[-4096:])
    with pytest.raises(CorruptFileError) as ei:
        HFileReader.from_uri(str(path)).read_all()
    assert ei.value.path == str(path)


def test_wrong_major_version(tmp_path: Path) -> None:
    data, _ = _native(CODEC_NONE)
    path = tmp_path / "v2.hfile"
    path.write_bytes(data[:-4] + b"\x00\x00\x00\x02")
    with pytest.raises(CorruptFileError, match="version"):
        HFileReader.from_uri(str(path))
