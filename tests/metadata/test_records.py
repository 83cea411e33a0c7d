"""HoodieMetadataRecord: decode every fixture cell and re-encode it to the same bytes; builders; merging."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from pyhudi.hfile import HFileReader
from pyhudi.io.logfile import BlockType, LogFileReader
from pyhudi.io.storage import Storage
from pyhudi.metadata.records import (
    ALL_PARTITIONS_KEY,
    TYPE_FILE_LIST,
    TYPE_RECORD_INDEX,
    combine,
    decode_value,
    delete_marker,
    encode_file_id,
    encode_value,
    files_record,
    partition_list_record,
    record_index_file_group,
    record_index_record,
    schema_for,
    writer_schema_json,
)


def _cells(base: Path) -> list[tuple[bytes, bytes, str | None]]:
    st = Storage.from_uri("/")[0]
    out = []
    mdt = base / ".hoodie" / "metadata"
    for f in sorted(mdt.glob("*/*.hfile")):
        with HFileReader.open(st, str(f)) as h:
            sj = h.file_info["schema"].decode()
            t = h.read_all()
            out += [(k, v, sj) for k, v in zip(t.column("key").to_pylist(), t.column("value").to_pylist(), strict=True)]
    for f in sorted(mdt.glob("*/.*.log.*")):
        with LogFileReader.open(st, str(f), load_content=True) as r:
            for b in r.blocks():
                if b.block_type == BlockType.HFILE_DATA:
                    out += [(k, v, b.schema) for k, v in b.hfile_records()]
    return out


def test_every_fixture_value_decodes_and_reencodes_exactly(mdt_tables: dict[str, Path]) -> None:
    total = 0
    for name, base in mdt_tables.items():
        for k, v, sj in _cells(base):
            rec = decode_value(k, v, sj)
            assert rec.key == k.decode() and not rec.deleted
            assert rec.fields["key"] == rec.key
            assert encode_value(rec, schema_for(sj)) == v, (name, k)
            total += 1
    assert total > 3000


def test_v9_values_reencode_with_our_schema(mdt_tables: dict[str, Path]) -> None:
    base = mdt_tables["cow_v9_txns_simple_meta.zip"]
    for k, v, sj in _cells(base):
        assert sj == writer_schema_json()
        assert encode_value(decode_value(k, v)) == v


def test_shipped_avsc_is_the_fixture_schema_without_meta_fields() -> None:
    from pyhudi.io.avro import schema_dict

    d = schema_dict("HoodieMetadata")
    assert d["name"] == "HoodieMetadataRecord" and d["namespace"] == "org.apache.hudi.avro.model"
    assert [f["name"] for f in d["fields"]] == [
        "key", "type", "filesystemMetadata", "BloomFilterMetadata", "ColumnStatsMetadata",
        "recordIndexMetadata", "SecondaryIndexMetadata",
    ]
    full = json.loads(writer_schema_json())
    assert [f["name"] for f in full["fields"]][:5] == [
        "_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
        "_hoodie_file_name",
    ]


def test_file_id_encoding() -> None:
    fid = "5a226868-2934-4f84-a16f-55124630c68d-0"
    enc = encode_file_id(fid)
    u = uuid.UUID(fid[:36])
    assert enc["fileIdEncoding"] == 0 and enc["fileIndex"] == 0 and enc["fileId"] == ""
    assert (enc["fileIdHighBits"] & (2**64 - 1)) == u.int >> 64
    rec = record_index_record("k1", "region=eu", fid, 1772922345400)
    back = decode_value("k1", encode_value(rec))
    ri = back.record_index
    assert ri is not None and ri.file_id == fid and ri.partition == "region=eu" and ri.instant_time_ms == 1772922345400
    bare = decode_value("k", encode_value(record_index_record("k", "", str(u), 1))).record_index
    assert bare is not None and bare.file_id == str(u)
    raw = decode_value("k", encode_value(record_index_record("k", "p", "my-file", 1))).record_index
    assert raw is not None and raw.file_id == "my-file" and raw.file_id_encoding == 1


@pytest.mark.parametrize("tail", ["-01", "-+1", "- 1", "-1_0", "--1", "-\u0663", "-2147483648", "-1 ", "-"])
def test_file_ids_the_uuid_encoding_would_change_are_kept_raw(tail: str) -> None:
    """Only a file id that UUID bits + index give back exactly is encoded so; any other is stored as it is (the
    index parsed leniently, or an upper-case UUID, named another file group; an index past an int failed the
    write)."""
    u = "6f3a2c1e-0000-4000-8000-000000000001"
    for fid in (u + tail, u.upper() + "-0", "{" + u + "}", "urn:uuid:" + u):
        ri = decode_value("k", encode_value(record_index_record("k", "p", fid, 1))).record_index
        assert ri is not None and ri.file_id == fid and ri.file_id_encoding == 1, fid
    for fid in (u, u + "-0", u + "-2147483647", u + "-10"):
        ri = decode_value("k", encode_value(record_index_record("k", "p", fid, 1))).record_index
        assert ri is not None and ri.file_id == fid and ri.file_id_encoding == 0, fid


def test_files_merge_rules() -> None:
    base = files_record("p", {"a": 10, "b": 20})
    upd = files_record("p", {"a": 5, "c": 7, "b": (0, True), "d": (0, True)})
    m = combine(base, upd)
    assert m.type == TYPE_FILE_LIST
    assert m.files == {"a": (10, False), "c": (7, False), "d": (0, True)}
    assert m.live_files == {"a": 10, "c": 7}
    parts = combine(partition_list_record(["x", "y"]), partition_list_record([], deleted=["y"]))
    assert parts.key == ALL_PARTITIONS_KEY and parts.live_files == {"x": 0}
    assert partition_list_record([""]).live_files == {".": 0}


def test_record_index_merge_later_wins_and_deletes() -> None:
    a = record_index_record("k", "p1", "5a226868-2934-4f84-a16f-55124630c68d-0", 1)
    b = record_index_record("k", "p2", "5a226868-2934-4f84-a16f-55124630c68d-1", 2)
    assert combine(a, b) is b and b.type == TYPE_RECORD_INDEX
    assert combine(b, delete_marker("k")).is_absent
    assert combine(delete_marker("k"), a) is a


def test_record_index_hash() -> None:
    # Java: "TXN-001".hashCode() == -166313938
    assert record_index_file_group("TXN-001", 10) == 166313938 % 10
    assert record_index_file_group("", 10) == 0
    assert record_index_file_group("polygenelubricants", 10) == (2**31) % 10  # hashCode == Integer.MIN_VALUE


@pytest.mark.parametrize("n", [1, 2, 7, 10, 64])
def test_vectorised_routing_matches_per_key_routing(n: int) -> None:
    import random

    import pyarrow as pa

    from pyhudi.metadata.record_index import file_groups_of

    rnd = random.Random(n)
    keys = [str(uuid.UUID(int=rnd.getrandbits(128))) for _ in range(2000)]
    keys += ["", "TXN-001", "polygenelubricants", "Aa", "BB", "é", "key-ü-1", "😀 outside the BMP", "x" * 300]
    want = [record_index_file_group(k, n) for k in keys]
    for arr in (
        pa.array(keys, pa.string()),
        pa.array([k.encode() for k in keys], pa.binary()),
        pa.chunked_array([keys[:7], keys[7:]], pa.string()),
        pa.array(keys, pa.string()).slice(3),
    ):
        expected = want[3:] if len(arr) == len(keys) - 3 else want
        assert file_groups_of(arr, n).tolist() == expected


def test_hudi_rs_decodes_same_base_file(mdt_tables: dict[str, Path]) -> None:
    from hudi import HudiFileGroupReader

    base = mdt_tables["cow_v9_txns_simple_meta.zip"]
    mdt = base / ".hoodie" / "metadata"
    f = sorted((mdt / "record_index").glob("*.hfile"))[0]
    rel = f"record_index/{f.name}"
    theirs = HudiFileGroupReader(str(mdt)).read_file_slice_from_paths(rel, [])
    import pyarrow as pa

    t = pa.Table.from_batches(theirs) if isinstance(theirs, list) else theirs
    keys = t.column("key").to_pylist()
    st = Storage.from_uri("/")[0]
    with HFileReader.open(st, str(f)) as h:
        sj = h.file_info["schema"].decode()
        ours = {decode_value(k, v, sj).key for k, v in zip(h.read_all().column("key").to_pylist(), h.read_all().column("value").to_pylist(), strict=True)}
    assert set(keys) == ours
