"""The writer reproduces Hudi's native ``HFileWriterImpl`` byte for byte (goldens of Hudi's TestHFileWriter)."""

from __future__ import annotations

import io
import struct
from pathlib import Path

from pyhudi.hfile import HFileReader, HFileWriter, hfile_bytes, write_hfile
from pyhudi.hfile.format import HUDI_COMPARATOR, decode_file_info
from pyhudi.io.compression import CODEC_GZ, CODEC_NONE
from pyhudi.io.storage import Storage

NONE = {"codec": CODEC_NONE, "creation_time_ms": 0}

GOLDEN_DATA = bytes.fromhex(
    "44415441424c4b2a000000610000005dffffffffffffffff00000040000000007e"
    "000000100000000600046b657931007fffffffffffffff0476616c75653100"
    "000000100000000600046b657932007fffffffffffffff0476616c75653200"
    "000000100000000600046b657933007fffffffffffffff0476616c75653300"
    "00000000"
)
GOLDEN_ROOT = bytes.fromhex(
    "494458524f4f5432000000210000001dffffffffffffffff00000040000000003e"
    "0000000000000000000000821000046b657931007fffffffffffffff04"
    "00000000"
)
TRAILER_HEAD = (
    bytes.fromhex("545241424c4b22244a08e90110820118002801300038034001480050005a32")
    + b"org.apache.hudi.io.storage.HoodieHBaseKVComparator"
    + bytes.fromhex("6002")
)
KV_SUFFIX = bytes.fromhex("007fffffffffffffff04")  # family length 0, LATEST_TIMESTAMP, Put


def header(magic: bytes, on_disk: int, uncompressed: int, prev: int, data_with_header: int) -> bytes:
    return magic + struct.pack(">iiqBii", on_disk, uncompressed, prev, 0, 16384, data_with_header)


def cell(row: bytes, value: bytes) -> bytes:
    return struct.pack(">iiH", len(row) + 12, len(value), len(row)) + row + KV_SUFFIX + value + b"\x00"


def three_records() -> bytes:
    data, trailer = hfile_bytes([b"key1", b"key2", b"key3"], [b"value1", b"value2", b"value3"], **NONE)
    assert trailer.entry_count == 3
    return data


def test_golden_sizes_and_blocks() -> None:
    data = three_records()
    assert len(data) == 4547
    assert len(GOLDEN_DATA) == 130 and len(GOLDEN_ROOT) == 66
    assert data[:130] == GOLDEN_DATA
    assert data[130:196] == GOLDEN_ROOT
    meta_index = data[196:233]
    assert meta_index == header(b"IDXROOT2", 4, 0, -1, 33) + b"\x00" * 4  # empty, checksum slot reserved
    file_info = data[233:451]
    assert len(file_info) == 218 and file_info[:8] == b"FILEINF2"
    trailer = data[451:]
    assert len(trailer) == 4096
    assert trailer.startswith(TRAILER_HEAD)
    assert trailer[len(TRAILER_HEAD) : -4] == b"\x00" * (4096 - 4 - len(TRAILER_HEAD))
    assert trailer[-4:] == bytes.fromhex("00000003")


def test_golden_file_info_and_trailer_decode() -> None:
    data = three_records()
    (on_disk, uncompressed) = struct.unpack_from(">ii", data, 233 + 8)
    assert on_disk == 218 - 33 and uncompressed == on_disk - 4
    info = decode_file_info(data[233 + 33 : 233 + 33 + uncompressed])
    assert info == {
        "hfile.LASTKEY": b"\x00\x04key3",
        "hfile.AVG_VALUE_LEN": struct.pack(">i", 6),
        "hfile.AVG_KEY_LEN": struct.pack(">i", 4),
        "KEY_VALUE_VERSION": struct.pack(">i", 1),
        "MAX_MEMSTORE_TS_KEY": struct.pack(">q", 0),
        "hfile.CREATE_TIME_TS": struct.pack(">q", 0),
    }
    r = HFileReader.from_bytes(data)
    t = r.trailer
    assert (t.file_info_offset, t.load_on_open_data_offset) == (233, 130)
    assert (t.data_index_count, t.meta_index_count, t.entry_count, t.num_data_index_levels) == (1, 0, 3, 1)
    assert (t.first_data_block_offset, t.last_data_block_offset) == (0, 0)
    assert t.comparator_class_name == HUDI_COMPARATOR
    assert (t.compression_codec, t.major_version, t.minor_version) == (CODEC_NONE, 3, 0)
    assert r.read_all().to_pydict() == {
        "key": [b"key1", b"key2", b"key3"],
        "value": [b"value1", b"value2", b"value3"],
    }


def test_golden_variable_length_keys() -> None:
    rows = [b"a" * 116, b"b" * 8, b"c" * 12]
    values = [b"v0", b"v1", b"v2"]
    data, _ = hfile_bytes(rows, values, **NONE)
    payload = b"".join(cell(k, v) for k, v in zip(rows, values, strict=True))
    assert len(payload) == 0xCD
    expected_data = header(b"DATABLK*", 0xD1, 0xCD, -1, 0xEE) + payload + b"\x00" * 4
    assert expected_data[:48].hex() == (
        "44415441424c4b2a000000d1000000cdffffffffffffffff0000004000000000ee000000800000000200746161616161"
    )
    assert data[: len(expected_data)] == expected_data
    root = data[len(expected_data) : len(expected_data) + 0x92 + 33]
    expected_root = (
        bytes.fromhex("494458524f4f5432000000920000008effffffffffffffff0000004000000000af")
        + bytes.fromhex("0000000000000000000000f28f800074")
        + b"a" * 116
        + bytes.fromhex("007fffffffffffffff04")
        + bytes.fromhex("00000000")
    )
    assert root == expected_root
    r = HFileReader.from_bytes(data)
    assert r.read_all().column("key").to_pylist() == rows
    assert r.lookup(rows).column("value").to_pylist() == values


def test_unique_key_location_block_splitting() -> None:
    keys = [b"key%02d" % i for i in range(50)]
    values = [b"value%02d" % i for i in range(50)]
    data, trailer = hfile_bytes(keys, values, block_size=100, **NONE)
    assert trailer.data_index_count == 17
    r = HFileReader.from_bytes(data)
    assert r.num_blocks == 17
    prev = -1
    for e in r.block_index:
        assert data[e.offset : e.offset + 8] == b"DATABLK*"
        (prev_off,) = struct.unpack_from(">q", data, e.offset + 16)
        assert prev_off == prev, e
        prev = e.offset
    assert trailer.last_data_block_offset == r.block_index[-1].offset
    # each block holds 3 cells (the last 2), and the index key is the block's first row
    sizes = [b.num_rows for b in r.scan()]
    assert sizes == [3] * 16 + [2]
    assert [e.key for e in r.block_index] == keys[::3]
    assert r.read_all().to_pydict() == {"key": keys, "value": values}
    assert r.lookup(keys).column("value").to_pylist() == values


def test_block_budget_counts_19_bytes_per_cell() -> None:
    # cell budget = len(row) + len(value) + 19; a block closes before the cell that would exceed block_size
    _, trailer = hfile_bytes([b"k1", b"k2"], [b"x" * 10, b"y" * 10], block_size=2 * (2 + 10 + 19), **NONE)
    assert trailer.data_index_count == 1
    _, trailer = hfile_bytes([b"k1", b"k2"], [b"x" * 10, b"y" * 10], block_size=2 * (2 + 10 + 19) - 1, **NONE)
    assert trailer.data_index_count == 2


def test_append_paths_give_identical_bytes() -> None:
    keys = [b"key%04d" % i for i in range(3000)]
    values = [b"v" * (i % 37) for i in range(3000)]
    for codec in (CODEC_NONE, CODEC_GZ):
        kw = {"codec": codec, "creation_time_ms": 1234, "block_size": 1024}
        ref, _ = hfile_bytes(keys, values, **kw)
        one = io.BytesIO()
        w = HFileWriter(one, **kw)
        for k, v in zip(keys, values, strict=True):
            w.append(k, v)
        w.close()
        assert one.getvalue() == ref
        chunked = io.BytesIO()
        w = HFileWriter(chunked, **kw)
        for lo, hi in [(0, 1), (1, 500), (500, 501), (501, 2999), (2999, 3000)]:
            w.append_batch(keys[lo:hi], values[lo:hi])
        w.close()
        assert chunked.getvalue() == ref


def test_gz_file_reads_and_compresses_every_block() -> None:
    keys = [b"key%05d" % i for i in range(2000)]
    values = [b"value%05d" % i for i in range(2000)]
    data, trailer = hfile_bytes(keys, values, codec=CODEC_GZ, block_size=4096, creation_time_ms=0)
    assert trailer.compression_codec == CODEC_GZ
    r = HFileReader.from_bytes(data)
    assert r.codec_name == "gz"
    for e in r.block_index:
        assert data[e.offset + 33 : e.offset + 35] == b"\x1f\x8b"  # gzip member per payload
    los = trailer.load_on_open_data_offset
    assert data[los + 33 : los + 35] == b"\x1f\x8b"  # root index payload is compressed too
    assert r.read_all().to_pydict() == {"key": keys, "value": values}


def test_file_info_meta_blocks_and_bloom() -> None:
    class Bloom:
        type_code = "DYNAMIC_V0"

        def serialize(self) -> str:
            return "AAAA"

    data, trailer = hfile_bytes(
        [b"a", b"b"],
        [b"1", b"2"],
        codec=CODEC_NONE,
        file_info={"schema": b"{}", "hfile.LASTKEY": b"ignored"},
        meta_blocks={"zeta": b"\x00\xff", "alpha": b""},
        bloom_filter=Bloom(),
    )
    r = HFileReader.from_bytes(data)
    assert r.meta_block_names() == ["alpha", "bloomFilter", "zeta"]  # sorted
    assert r.meta_block("zeta") == b"\x00\xff"
    assert r.meta_block("alpha") == b""
    assert r.meta_block("bloomFilter") == b"AAAA"
    assert r.file_info["schema"] == b"{}"
    assert r.file_info["hfile.LASTKEY"] == b"\x00\x01b"  # standard entries win over user entries
    assert r.file_info["bloomFilterTypeCode"] == b"DYNAMIC_V0"
    assert (r.file_info["minRecordKey"], r.file_info["maxRecordKey"]) == (b"a", b"b")
    assert trailer.meta_index_count == 3


def test_empty_file() -> None:
    data, trailer = hfile_bytes([], [], **NONE)
    assert trailer.entry_count == 0 and trailer.data_index_count == 0
    assert (trailer.first_data_block_offset, trailer.last_data_block_offset) == (-1, 0)
    r = HFileReader.from_bytes(data)
    assert r.entry_count == 0 and r.num_blocks == 0 and r.last_key is None
    assert r.file_info["hfile.LASTKEY"] == b""
    assert r.read_all().num_rows == 0
    assert r.lookup([b"", b"x"]).column("value").to_pylist() == [None, None]


def test_write_hfile_to_storage(tmp_path: Path) -> None:
    storage, base = Storage.from_uri(str(tmp_path))
    path = f"{base}/sub/dir/f.hfile"
    write_hfile(storage, path, ["key1", "key2", "key3"], [b"value1", b"value2", b"value3"], **NONE)
    assert storage.read_bytes(path) == three_records()
    with HFileReader.open(storage, path) as r:
        assert r.get("key2") == b"value2"
