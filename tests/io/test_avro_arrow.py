"""Avro datums -> Arrow: the compiled decoder agrees with fastavro on every type it handles, nested schemas fall
back to fastavro, malformed blocks are errors naming the record; Avro data blocks round-trip."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import random
import struct
import uuid

import fastavro
import pyarrow as pa
import pytest

from pyhudi.errors import CorruptFileError
from pyhudi.io.avro_arrow import AvroArrowDecoder
from pyhudi.io.logfile import LogFileReader, avro_block_content, avro_data_block

FLAT = {
    "type": "record", "name": "r", "namespace": "t",
    "fields": [
        {"name": "s", "type": ["null", "string"], "default": None},
        {"name": "s2", "type": ["string", "null"]},
        {"name": "s_req", "type": "string"},
        {"name": "b", "type": ["null", "bytes"], "default": None},
        {"name": "i", "type": ["null", "int"], "default": None},
        {"name": "l", "type": ["null", "long"], "default": None},
        {"name": "l_req", "type": "long"},
        {"name": "f", "type": ["null", "float"], "default": None},
        {"name": "d", "type": ["null", "double"], "default": None},
        {"name": "z", "type": ["null", "boolean"], "default": None},
        {"name": "dec_fixed", "type": ["null", {"type": "fixed", "name": "fx", "size": 7, "logicalType": "decimal",
                                                "precision": 15, "scale": 2}], "default": None},
        {"name": "dec_bytes", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 30,
                                                "scale": 15}], "default": None},
        {"name": "dt", "type": ["null", {"type": "int", "logicalType": "date"}], "default": None},
        {"name": "ts_us", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}], "default": None},
        {"name": "ts_ms", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None},
        {"name": "lts_us", "type": ["null", {"type": "long", "logicalType": "local-timestamp-micros"}],
         "default": None},
        {"name": "e", "type": ["null", {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}], "default": None},
        {"name": "u", "type": ["null", {"type": "string", "logicalType": "uuid"}], "default": None},
        {"name": "jstr", "type": ["null", {"type": "string", "avro.java.string": "String"}], "default": None},
    ],
}

NESTED = {
    "type": "record", "name": "n", "namespace": "t",
    "fields": [
        {"name": "k", "type": ["null", "string"], "default": None},
        {"name": "arr", "type": ["null", {"type": "array", "items": ["null", "long"]}], "default": None},
        {"name": "m", "type": ["null", {"type": "map", "values": ["null", "string"]}], "default": None},
        {"name": "rec", "type": ["null", {"type": "record", "name": "inner", "fields": [
            {"name": "x", "type": ["null", "int"], "default": None}]}], "default": None},
    ],
}


def _random_row(rng: random.Random, i: int) -> dict:
    def maybe(v):
        return None if rng.random() < 0.2 else v

    utc = dt.UTC
    return {
        "s": maybe("".join(rng.choice("abcé漢😀") for _ in range(rng.randint(0, 12)))),
        "s2": maybe(f"k{i}"),
        "s_req": f"req{i}",
        "b": maybe(bytes(rng.randrange(256) for _ in range(rng.randint(0, 9)))),
        "i": maybe(rng.randint(-(1 << 31), (1 << 31) - 1)),
        "l": maybe(rng.randint(-(1 << 63), (1 << 63) - 1)),
        "l_req": rng.randint(-(1 << 40), 1 << 40),
        "f": maybe(struct.unpack("<f", struct.pack("<f", rng.uniform(-1e6, 1e6)))[0]),
        "d": maybe(rng.choice([rng.uniform(-1e300, 1e300), 0.0, -0.0, float("inf")])),
        "z": maybe(rng.random() < 0.5),
        "dec_fixed": maybe(decimal.Decimal(rng.randint(-(10**15) + 1, 10**15 - 1)).scaleb(-2)),
        "dec_bytes": maybe(decimal.Decimal(rng.randint(-(10**30) + 1, 10**30 - 1)).scaleb(-15)),
        "dt": maybe(dt.date(1970, 1, 1) + dt.timedelta(days=rng.randint(-30000, 30000))),
        "ts_us": maybe(dt.datetime(1970, 1, 1, tzinfo=utc) + dt.timedelta(microseconds=rng.randint(-10**15, 10**15))),
        "ts_ms": maybe(dt.datetime(1970, 1, 1, tzinfo=utc) + dt.timedelta(milliseconds=rng.randint(-10**12, 10**12))),
        "lts_us": maybe(dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=rng.randint(-10**15, 10**15))),
        "e": maybe(rng.choice(["A", "B", "C"])),
        "u": maybe("0b6cbdc2-6d57-4b4c-8a5b-1a8e1e6a3b77"),
        "jstr": maybe("x" * rng.randint(0, 300)),
    }


def _fastavro_rows(content: bytes, schema: dict) -> list[dict]:
    parsed = fastavro.parse_schema(schema)
    n = struct.unpack(">i", content[4:8])[0]
    pos, out = 8, []
    for _ in range(n):
        ln = struct.unpack(">i", content[pos : pos + 4])[0]
        out.append(fastavro.schemaless_reader(io.BytesIO(content[pos + 4 : pos + 4 + ln]), parsed, None))
        pos += 4 + ln
    return out


def _norm(v):
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.UTC).replace(tzinfo=dt.UTC)
    return v


def test_compiled_decoder_matches_fastavro_on_every_flat_type() -> None:
    rng = random.Random(7)
    rows = [_random_row(rng, i) for i in range(3000)]
    content = avro_block_content(rows, json.dumps(FLAT))
    dec = AvroArrowDecoder(json.dumps(FLAT))
    assert dec.compiled
    got = dec.decode(content, 8, len(content), len(rows)).to_pylist()
    want = _fastavro_rows(content, FLAT)
    assert len(got) == len(want) == len(rows)
    for g, w in zip(got, want, strict=True):
        assert {k: _norm(v) for k, v in g.items()} == {k: _norm(v) for k, v in w.items()}
    t = dec.decode(content, 8, len(content), len(rows))
    assert t.schema.field("ts_us").type == pa.timestamp("us", tz="UTC")
    assert t.schema.field("dec_fixed").type == pa.decimal128(15, 2)
    assert t.schema.field("e").type == pa.string()


def test_nested_schema_falls_back_to_fastavro() -> None:
    rows = [
        {"k": "a", "arr": [1, None, 3], "m": {"x": "1", "y": None}, "rec": {"x": 5}},
        {"k": None, "arr": None, "m": None, "rec": None},
        {"k": "c", "arr": [], "m": {}, "rec": {"x": None}},
    ]
    content = avro_block_content(rows, json.dumps(NESTED))
    dec = AvroArrowDecoder(json.dumps(NESTED))
    assert not dec.compiled
    got = dec.decode(content, 8, len(content), 3).to_pylist()
    assert got[0]["arr"] == [1, None, 3] and sorted(got[0]["m"]) == [("x", "1"), ("y", None)]
    assert got[0]["rec"] == {"x": 5} and got[1] == {"k": None, "arr": None, "m": None, "rec": None}


@pytest.mark.parametrize("schema", [FLAT, NESTED], ids=["compiled", "generic"])
def test_malformed_records_are_errors_naming_the_record(schema: dict) -> None:
    rng = random.Random(1)
    rows = [_random_row(rng, i) for i in range(5)] if schema is FLAT else [{"k": "a", "arr": [1], "m": {},
                                                                            "rec": None}] * 5
    content = avro_block_content(rows, json.dumps(schema))
    dec = AvroArrowDecoder(json.dumps(schema))
    with pytest.raises(CorruptFileError, match="record 4"):
        dec.decode(content[:-3], 8, len(content) - 3, 5)
    # the second record's length prefix one byte short: its datum does not end where the prefix says
    pos = 8 + 4 + struct.unpack(">i", content[8:12])[0]
    ln = struct.unpack(">i", content[pos : pos + 4])[0]
    bad = content[:pos] + struct.pack(">i", ln - 1) + content[pos + 4 :]
    with pytest.raises(CorruptFileError, match="record 1"):
        dec.decode(bad, 8, len(bad), 5)
    with pytest.raises(CorruptFileError, match="left after"):
        dec.decode(content, 8, len(content), 4)


def test_avro_data_block_layout() -> None:
    """Block version 3, int32 record count, int32 record lengths, header INSTANT_TIME + SCHEMA, empty footer."""
    schema = json.dumps({"type": "record", "name": "r", "fields": [{"name": "a", "type": ["null", "long"]}]})
    data = avro_data_block([{"a": 1}, {"a": None}], "20260101000000001", schema)
    (b,) = list(LogFileReader.from_bytes(data, load_content=True).blocks())
    assert b.instant_time == "20260101000000001" and b.schema == schema and b.footer == {}
    assert b.content == b"\0\0\0\3" + b"\0\0\0\2" + b"\0\0\0\2" + b"\2\2" + b"\0\0\0\1" + b"\0"
    assert b.records().to_pylist() == [{"a": 1}, {"a": None}]


def test_compiled_encoder_writes_what_fastavro_writes() -> None:
    """Arrow -> Avro datums by the compiled encoder: byte for byte fastavro's encoding of the same records."""
    from pyhudi.io.avro_arrow import AvroArrowEncoder

    rng = random.Random(11)
    rows = [_random_row(rng, i) for i in range(2000)]
    schema = json.dumps(FLAT)
    slow = avro_block_content(rows, schema)  # dicts: fastavro
    table = AvroArrowDecoder(schema).decode(slow, 8, len(slow), len(rows))
    fast = avro_block_content(table, schema)  # Arrow: compiled
    assert fast == slow
    with pytest.raises(Exception, match="not nullable"):
        AvroArrowEncoder(schema).encode(table.drop_columns(["s_req"]))


@pytest.mark.parametrize("schema", [FLAT, "nested"])
def test_blocks_decoded_as_one_give_each_block_s_records_in_order(schema) -> None:  # type: ignore[no-untyped-def]
    from pyhudi.io.logfile import decode_avro_block_content, decode_avro_blocks_content

    if schema == "nested":
        schema = {"type": "record", "name": "n", "fields": [
            {"name": "k", "type": ["null", "string"], "default": None},
            {"name": "arr", "type": ["null", {"type": "array", "items": ["null", "long"]}], "default": None}]}
        blocks = [[{"k": f"b{j}-{i}", "arr": [i, None]} for i in range(j * 3)] for j in range(4)]
    else:
        rng = random.Random(11)
        blocks = [[_random_row(rng, 100 * j + i) for i in range(j * 7)] for j in range(5)]  # the first one empty
    text = json.dumps(schema)
    contents = [avro_block_content(rows, text) for rows in blocks]
    wheres = [f"f (block at offset {j})" for j in range(len(blocks))]
    one = decode_avro_blocks_content(contents, text, wheres)
    assert one.equals(pa.concat_tables([decode_avro_block_content(c, text) for c in contents]))
    # a damaged block is named as it would be alone
    bad = bytearray(contents[2])
    bad[8:12] = struct.pack(">i", 10_000)  # its first record's length runs past the block
    contents[2] = bytes(bad)
    with pytest.raises(CorruptFileError, match=r"block at offset 2"):
        decode_avro_blocks_content(contents, text, wheres)
