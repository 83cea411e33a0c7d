"""Hudi log files: every fixture metadata log parses; torn tails; write -> read; byte layout vs fixtures."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

import pytest

from pyhudi.hfile import HFileReader
from pyhudi.io.logfile import (
    MAGIC,
    BlockType,
    DeleteRecord,
    HeaderKey,
    LogFileReader,
    append_blocks,
    delete_block,
    encode_delete_content,
    hfile_data_block,
    read_log_blocks,
    rollback_block,
)
from pyhudi.io.storage import Storage
from pyhudi.metadata.records import writer_schema_json
from tests.paths import TABLE_ZIPS_DIR

ZIPS = sorted(TABLE_ZIPS_DIR.glob("*.zip")) if TABLE_ZIPS_DIR.is_dir() else []


def _fixture_logs() -> list[tuple[str, str, bytes]]:
    out = []
    for z in ZIPS:
        with zipfile.ZipFile(z) as zf:
            for n in zf.namelist():
                if "__MACOSX" in n or "/.hoodie/metadata/" not in n:
                    continue
                base = n.rsplit("/", 1)[-1]
                if base.startswith(".") and ".log." in base and "/.hoodie/metadata/.hoodie/" not in n:
                    out.append((z.name, n, zf.read(n)))
    return out


LOGS = _fixture_logs()


@pytest.fixture(scope="module")
def local() -> Storage:
    return Storage.from_uri("/")[0]


def _blocks(data: bytes) -> list:
    with LogFileReader.from_bytes(data, load_content=True) as r:
        return list(r.blocks())


@pytest.mark.skipif(not LOGS, reason="fixtures not available")
def test_every_fixture_log_parses() -> None:
    kinds: dict[BlockType, int] = {}
    for _zip, name, data in LOGS:
        blocks = _blocks(data)
        assert blocks, name
        assert sum(b.size for b in blocks) == len(data)
        for b in blocks:
            kinds[b.block_type] = kinds.get(b.block_type, 0) + 1
            assert not b.is_corrupt, name
            assert b.instant_time and b.instant_time.isdigit(), name
            assert b.footer == {}
            # the trailing long = whole block minus itself
            assert struct.unpack(">q", data[b.offset + b.size - 8 : b.offset + b.size])[0] == b.size - 8
            if b.block_type == BlockType.HFILE_DATA:
                assert set(b.header) == {HeaderKey.INSTANT_TIME, HeaderKey.SCHEMA}
                h = b.hfile()
                assert h.entry_count == len(b.hfile_records()) > 0
                assert h.file_info["schema"].decode() == b.schema
            else:
                assert b.block_type == BlockType.DELETE
                recs = b.delete_records()
                assert all(r.record_key for r in recs)
    assert kinds[BlockType.HFILE_DATA] > 300 and kinds[BlockType.DELETE] > 100


@pytest.mark.skipif(not LOGS, reason="fixtures not available")
def test_schema_header_equals_our_writer_schema_for_v9() -> None:
    v9 = [b.schema for z, _, d in LOGS if "_v9_" in z for b in _blocks(d) if b.block_type == BlockType.HFILE_DATA]
    assert v9 and all(s == writer_schema_json() for s in v9)


@pytest.mark.skipif(not LOGS, reason="fixtures not available")
def test_initial_empty_delete_block_bytes() -> None:
    # every metadata file group starts with a log holding one empty delete block at its init instant
    inits = [(n, d) for _, n, d in LOGS if len(d) == 80]
    assert inits
    for name, data in inits:
        (b,) = _blocks(data)
        assert b.block_type == BlockType.DELETE and b.delete_records() == []
        assert delete_block([], b.instant_time or "") == data, name


@pytest.mark.skipif(not LOGS, reason="fixtures not available")
def test_delete_blocks_reencode_exactly() -> None:
    n = 0
    for _, _name, data in LOGS:
        for b in _blocks(data):
            if b.block_type == BlockType.DELETE:
                assert encode_delete_content(b.delete_records()) == b.content
                if HeaderKey.SCHEMA not in b.header:
                    assert delete_block(b.delete_records(), b.instant_time or "") == data[b.offset : b.offset + b.size]
                n += 1
    assert n > 100


@pytest.mark.skipif(not LOGS, reason="fixtures not available")
def test_hfile_block_rewrite_matches_fixture_layout() -> None:
    """Same records -> same block framing and header bytes; the HFile inside holds the same cells and file info.

    The HFile bytes themselves differ only in deflate output (Java's zlib vs ours) and the informational trailer
    field 3, so they are compared decoded."""
    checked = 0
    for _, _name, data in LOGS[:40]:
        for b in _blocks(data):
            if b.block_type != BlockType.HFILE_DATA:
                continue
            h = b.hfile()
            created = struct.unpack(">q", h.file_info["hfile.CREATE_TIME_TS"])[0]
            ours = hfile_data_block(
                b.hfile_records(), b.instant_time or "", b.schema or "",
                creation_time_ms=created, schema_first=b.header_order[0] == HeaderKey.SCHEMA,
            )
            orig = data[b.offset : b.offset + b.size]
            head = b.content_offset - b.offset
            # magic, (length), version, type, header, content length
            assert ours[:6] == orig[:6] and ours[14 : head - 8] == orig[14 : head - 8]
            (ob,) = _blocks(ours)
            assert ob.header == b.header and ob.header_order == b.header_order
            assert ours[-12:-8] == orig[-12:-8] == b"\0\0\0\0"  # empty footer
            oh = ob.hfile()
            assert oh.read_all().equals(h.read_all())
            assert oh.file_info == h.file_info
            assert oh.codec_name == h.codec_name == "gz"
            checked += 1
    assert checked > 10


def test_write_read_round_trip(tmp_path: Path, local: Storage) -> None:
    path = str(tmp_path / ".files-0000-0_20260101000000000.log.1_0-1-2")
    b1 = hfile_data_block({"b": b"2", "a": b"1"}, "20260101000000000", writer_schema_json())
    b2 = delete_block([DeleteRecord("a", "record_index", 0)], "20260101000000001")
    b3 = rollback_block("20260101000000002", "20260101000000001")
    assert append_blocks(local, path, [b1]) == path
    assert append_blocks(local, path, [b2, b3]) == path
    blocks = read_log_blocks(local, path)
    assert [b.block_type for b in blocks] == [BlockType.HFILE_DATA, BlockType.DELETE, BlockType.COMMAND]
    assert blocks[0].hfile_records() == [(b"a", b"1"), (b"b", b"2")]
    assert blocks[0].instant_time == "20260101000000000" and blocks[0].schema == writer_schema_json()
    assert blocks[1].delete_records() == [DeleteRecord("a", "record_index", 0)]
    assert blocks[2].is_rollback and blocks[2].target_instant_time == "20260101000000001"
    assert isinstance(blocks[0].hfile(), HFileReader)


def test_duplicate_keys_rejected() -> None:
    with pytest.raises(Exception, match="duplicate"):
        hfile_data_block([("a", b"1"), ("a", b"2")], "1", "{}")


def _three_blocks() -> tuple[bytes, list[int]]:
    bs = [
        hfile_data_block({f"k{i}": b"v" * i for i in range(1, 50)}, "20260101000000000", writer_schema_json()),
        delete_block([DeleteRecord("k1", "p", 0)], "20260101000000001"),
        hfile_data_block({"z": b"1"}, "20260101000000002", writer_schema_json()),
    ]
    ends = []
    pos = 0
    for b in bs:
        pos += len(b)
        ends.append(pos)
    return b"".join(bs), ends


def test_torn_last_block_is_skipped_as_corrupt() -> None:
    data, ends = _three_blocks()
    start_last = ends[1]
    for cut in [start_last + 1, start_last + 6, start_last + 10, start_last + 14, start_last + 40,
                (start_last + ends[2]) // 2, ends[2] - 8, ends[2] - 1]:
        blocks = _blocks(data[:cut])
        good = [b for b in blocks if not b.is_corrupt]
        assert [b.block_type for b in good] == [BlockType.HFILE_DATA, BlockType.DELETE], cut
        corrupt = [b for b in blocks if b.is_corrupt]
        if cut - start_last >= len(MAGIC):
            assert len(corrupt) == 1 and corrupt[0].offset == start_last and corrupt[0].size == cut - start_last
        else:
            assert corrupt == []  # an incomplete magic at EOF ends the file


def test_corrupt_block_in_the_middle_resyncs_on_next_magic() -> None:
    data, ends = _three_blocks()
    # tear block 2 (cut 10 bytes out of it), keep block 3
    bad = data[: ends[1] - 10] + data[ends[1] :]
    blocks = _blocks(bad)
    assert [b.block_type for b in blocks] == [BlockType.HFILE_DATA, BlockType.CORRUPT, BlockType.HFILE_DATA]
    assert blocks[2].hfile_records() == [(b"z", b"1")]


def test_bad_length_field_makes_corrupt_block() -> None:
    data, ends = _three_blocks()
    bad = bytearray(data)
    bad[ends[0] + 6 : ends[0] + 14] = struct.pack(">q", 12345)
    kinds = [b.block_type for b in _blocks(bytes(bad))]
    assert kinds == [BlockType.HFILE_DATA, BlockType.CORRUPT, BlockType.HFILE_DATA]


@pytest.mark.skipif(not LOGS, reason="fixtures not available")
def test_fixture_logs_truncated_at_several_points() -> None:
    name, data = next((n, d) for _, n, d in LOGS if len(d) > 5000)
    full = _blocks(data)
    last = full[-1]
    for cut in (last.offset + 3, last.offset + 20, last.offset + last.size // 2, len(data) - 1):
        blocks = _blocks(data[:cut])
        assert [b.offset for b in blocks if not b.is_corrupt] == [b.offset for b in full[:-1]], (name, cut)


# -- delete blocks: Java's wrapper-record union for the ordering value -------------------------------------------
def _every_ordering() -> list[tuple]:
    import datetime as dt
    import decimal

    from pyhudi.io.logfile import OrderingType as T
    from pyhudi.io.logfile import OrderingValue

    return [
        (None, T.NULL), (True, T.BOOLEAN), (0, T.INT), (-7, T.INT), (1 << 40, T.LONG), (5, T.LONG),
        (1.5, T.FLOAT), (2.25, T.DOUBLE), (b"\x00\xff", T.BYTES), ("zé", T.STRING),
        (dt.date(2024, 2, 29), T.DATE), (decimal.Decimal("-12.5"), T.DECIMAL), (86_399_000_000, T.TIME_MICROS),
        (1_700_000_000_123_456, T.TIMESTAMP_MICROS),
        ((OrderingValue(T.LONG, 3), OrderingValue(T.STRING, "b"), OrderingValue(T.NULL, None)), T.ARRAY),
        (None, T.ARRAY),
    ]


def test_delete_block_ordering_values_use_javas_wrapper_union() -> None:
    """Every branch round-trips; the branch indices are Java's (IntWrapper 2, LongWrapper 3, ...), checked with
    fastavro on HoodieDeleteRecordList.avsc (the Java schema)."""
    import io

    import fastavro

    from pyhudi.io import avro
    from pyhudi.io.logfile import OrderingType, decode_delete_content

    recs = [DeleteRecord(f"k{i}", "p", v, t) for i, (v, t) in enumerate(_every_ordering())]
    content = encode_delete_content(recs)
    assert decode_delete_content(content) == recs
    parsed = fastavro.parse_schema(avro.schema_dict("HoodieDeleteRecordList"))
    decoded = fastavro.schemaless_reader(io.BytesIO(content[8:]), parsed, None, return_record_name=True)
    names = [r["orderingVal"][0].rsplit(".", 1)[-1] if r["orderingVal"] else None
             for r in decoded["deleteRecordList"]]
    assert names == [None, "BooleanWrapper", "IntWrapper", "IntWrapper", "LongWrapper", "LongWrapper",
                     "FloatWrapper", "DoubleWrapper", "BytesWrapper", "StringWrapper", "DateWrapper",
                     "DecimalWrapper", "TimeMicrosWrapper", "TimestampMicrosWrapper", "ArrayWrapper", "ArrayWrapper"]
    assert decoded["deleteRecordList"][4]["orderingVal"][1] == {"value": 1 << 40}
    # Hudi's default ordering value Integer 0: union index 2, value 0 -> bytes 04 00 (as in every fixture)
    assert encode_delete_content([DeleteRecord("a", "p", 0)]).endswith(b"\x04\x00\x00")
    assert DeleteRecord("a", "p", 0).is_default_ordering and DeleteRecord("a", "p", None).is_default_ordering
    assert not DeleteRecord("a", "p", 0, OrderingType.LONG).is_default_ordering
    assert not DeleteRecord("a", "p", 3).is_default_ordering


def test_fixture_data_table_delete_blocks_decode() -> None:
    """The delete blocks of the MOR fixtures' data tables carry IntWrapper 0 and re-encode byte for byte."""
    from pyhudi.io.logfile import OrderingType

    seen = 0
    for z in ZIPS:
        if not z.name.startswith("mor_"):
            continue
        with zipfile.ZipFile(z) as zf:
            for n in zf.namelist():
                base = n.rsplit("/", 1)[-1]
                if "/.hoodie/" in n or "__MACOSX" in n or not (base.startswith(".") and ".log." in base):
                    continue
                for b in _blocks(zf.read(n)):
                    if b.block_type == BlockType.DELETE:
                        recs = b.delete_records()
                        assert recs and all(r.ordering_type == OrderingType.INT and r.ordering_value == 0
                                            for r in recs)
                        assert encode_delete_content(recs) == b.content
                        seen += 1
    assert seen == 4


def test_delete_columns_compiled_decoder_matches_records() -> None:
    """Every branch but ARRAY goes through the compiled decoder (ARRAY blocks through the general one)."""
    from pyhudi.io.logfile import OrderingType, decode_delete_columns

    recs = [DeleteRecord(f"k{i}", "p" if i % 2 else None, v, t) for i, (v, t) in enumerate(_every_ordering())
            if t != OrderingType.ARRAY]
    recs.append(DeleteRecord(None, None, 0))
    cols = decode_delete_columns(encode_delete_content(recs))
    assert not cols.arrays and cols.records() == recs
    assert cols.is_default_ordering.tolist() == [r.is_default_ordering for r in recs]


def test_a_map_holding_a_key_twice_is_named_by_column_and_record_key() -> None:
    """An Avro map cannot hold a key twice: refused naming the column and the record, at the top level and inside
    a struct (where pyarrow raises another error for it)."""
    import pyarrow as pa

    from pyhudi.errors import InvalidInputError
    from pyhudi.io.logfile import _avro_rows

    m = pa.map_(pa.string(), pa.int32())
    top = pa.table({"_hoodie_record_key": ["k0", "k1"], "m": pa.array([[("a", 1)], [("a", 1), ("a", 2)]], m)})
    nested = pa.table({"_hoodie_record_key": ["k0", "k1"],
                       "s": pa.array([{"m": [("b", 1)]}, {"m": [("a", 1), ("a", 2)]}], pa.struct([("m", m)]))})
    for t, col in ((top, "m"), (nested, "s")):
        with pytest.raises(InvalidInputError, match=rf"column '{col}' of record key 'k1': a map value holds a key twice"):
            _avro_rows(t)
    assert _avro_rows(top.slice(0, 1)) == [{"_hoodie_record_key": "k0", "m": {"a": 1}}]
