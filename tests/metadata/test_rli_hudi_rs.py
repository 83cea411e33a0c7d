"""hudi-rs as an independent decoder of the record index pyhudi writes.

What hudi-rs 0.5.0 can read of a metadata table, and therefore what these tests check against it:

- ``HudiFileGroupReader("<table>/.hoodie/metadata").read_file_slice_from_paths("record_index/<base>.hfile", [])``
  decodes a record-index **base HFile** into Arrow rows (``key``, ``type``, ``recordIndexMetadata``). Every base
  file is compared, key by key, with our lookups: pyhudi's record-index writer for the inline build
  (:func:`pyhudi.metadata.record_index.base_hfile`, via ``Table.build_record_index``) and the metadata
  compaction's.
- It cannot merge a record-index file slice that has **log files**: ``read_file_slice_from_paths(base, logs)``
  fails with ``LogBlockError: Unexpected HFile records in regular table log file`` (hudi-rs
  ``crates/core/src/file_group/reader.rs``, ``FileGroupReader::read_file_slice_from_paths``: the log scanner
  returns ``ScanResult::HFileRecords`` for HFile data blocks and only ``RecordBatches`` are merged). It fails the
  same way on the Java-written fixture ``cow_v9_txns_simple_meta`` (see the test below), so the limitation is
  hudi-rs's. HFile log records are merged only for the ``files`` partition, by the crate-private
  ``read_metadata_table_files_partition`` that hudi-rs's data-table file listing uses; nothing public exposes it.
- ``HudiTableBuilder.from_base_uri("<table>/.hoodie/metadata").build().get_file_slices()`` panics
  (``not yet implemented: Add support for AvroSchema::Ref``, ``crates/core/src/avro_to_arrow/schema.rs``) while
  resolving the metadata table's schema, so hudi-rs cannot list the record-index file slices either; the slices
  come from our metadata reader.

So the log blocks are checked through two independent routes instead: the data table as hudi-rs reads it
(where every live key is, through its files-partition listing), and a metadata compaction that folds the log
blocks into new base HFiles, which hudi-rs then decodes and which must equal our log-merged lookups from
before the compaction.
"""

from __future__ import annotations

import posixpath
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hudi import HudiFileGroupReader, HudiTableBuilder

from pyhudi import Table
from pyhudi.hfile import HFileReader
from pyhudi.metadata.partitions import RECORD_INDEX, metadata_base_path
from pyhudi.metadata.reader import MetadataTableReader
from pyhudi.metadata.record_index import RecordIndexLookup
from pyhudi.metadata.writer import MetadataWriter
from pyhudi.table.timeline import InstantTimeGenerator

OPTS = {
    "hoodie.table.name": "rli_rs",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "dt",
    "hoodie.table.ordering.fields": "ts",
    "hoodie.index.type": "RECORD_INDEX",
    "hoodie.metadata.record.index.enable": "true",
    "hoodie.metadata.compact.max.delta.commits": "100",
}
DAYS = ["2026/01/05", "2026/02/14", "2026/03/30"]
LOG_MERGE_ERROR = "Unexpected HFile records in regular table log file"
Mapping = dict[str, tuple[str, str, int]]  # key -> (partition, file id, instant ms)


def _rows(ids: list[str], ts: int) -> pa.Table:
    return pa.table({
        "id": ids,
        "ts": pa.array([ts] * len(ids), pa.int64()),
        "dt": [DAYS[int(uuid.UUID(i[-36:]).int % 3)] if len(i) >= 36 else DAYS[len(i) % 3] for i in ids],
        "v": pa.array([float(ts)] * len(ids)),
    })


def _keys(prefix: str, n: int) -> list[str]:
    return [f"{prefix}-{uuid.uuid4()}" for _ in range(n)]


# -- hudi-rs side (independent of pyhudi's decoding) -----------------------------------------------------------
def _java_hash_group(key: str, n: int) -> int:
    """Java ``String.hashCode`` of ``key`` then ``abs(abs(h) % n)`` (keys here are ASCII)."""
    h = 0
    for ch in key:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    a = abs(h) if h != -(1 << 31) else h
    r = abs(a) % n if a >= 0 else -((-a) % n)
    return abs(r)


def _file_id(info: dict[str, Any]) -> str:
    """The file id a ``HoodieRecordIndexInfo`` names, as Hudi derives it (encoding 0: UUID from two longs)."""
    if info["fileIdEncoding"] == 1:
        return str(info["fileId"])
    mask = (1 << 64) - 1
    u = str(uuid.UUID(int=((info["fileIdHighBits"] & mask) << 64) | (info["fileIdLowBits"] & mask)))
    return u if info["fileIndex"] == -1 else f"{u}-{info['fileIndex']}"


def _rs_base_mappings(mdt: str, base_rel: str) -> Mapping:
    """Every mapping of one record-index base HFile, decoded by hudi-rs."""
    batch = HudiFileGroupReader(mdt).read_file_slice_from_paths(base_rel, [])
    t = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else pa.Table.from_batches(batch)
    out: Mapping = {}
    for key, typ, info in zip(t.column("key").to_pylist(), t.column("type").to_pylist(),
                              t.column("recordIndexMetadata").to_pylist(), strict=True):
        assert typ == 5, (base_rel, key, typ)
        assert key not in out, (base_rel, key)
        out[key] = (info["partitionName"], _file_id(info), int(info["instantTime"]))
    return out


def _rs_data_locations(base: str) -> dict[str, tuple[str, str, str]]:
    """key -> (partition, file id, commit time) of every live record, as hudi-rs reads the data table."""
    t = pa.Table.from_batches(HudiTableBuilder.from_base_uri(base).build().read())
    return {
        k: (p, f.split("_")[0], c)
        for k, p, f, c in zip(t.column("_hoodie_record_key").to_pylist(), t.column("_hoodie_partition_path").to_pylist(),
                              t.column("_hoodie_file_name").to_pylist(), t.column("_hoodie_commit_time").to_pylist(),
                              strict=True)
    }


def _rs_commit_ms(base: str) -> dict[str, int]:
    tl = HudiTableBuilder.from_base_uri(base).build().get_timeline()
    return {i.timestamp: i.epoch_mills for i in tl.get_completed_commits()}


# -- pyhudi side -----------------------------------------------------------------------------------------------
def _reader(table: Table) -> MetadataTableReader:
    return MetadataTableReader(table.storage, table.base_path, data_timeline=table.timeline(), data_config=table.config)


def _slices(table: Table) -> list[tuple[str | None, list[str]]]:
    """(base file, log files) of every record-index file group, relative to the metadata table, in index order."""
    return [
        (fs.base_file.relative_path if fs.base_file else None, [lf.relative_path for lf in fs.log_files])
        for fs in _reader(table).file_slices(RECORD_INDEX)
    ]


def _ours(table: Table, keys: list[str]) -> Mapping:
    t = Table.open(table.base_path).lookup(keys)
    return {
        r["key"]: (r["partition"], r["file_id"], r["instant_ms"]) for r in t.to_pylist() if r["found"]
    }


def _ours_base_only(table: Table, fg: int, keys: list[str]) -> Mapping:
    """Our lookup of ``keys`` in file group ``fg`` reading its base HFile only (log files left out)."""
    lk = RecordIndexLookup.from_reader(_reader(table))
    base, _ = lk.slices[fg]
    only_base = RecordIndexLookup(lk.storage, lk.mdt_path, tuple((b, ()) for b, _ in lk.slices), lk.block_filter,
                                  lk.file_bytes)
    assert only_base.slices[fg][0] == base
    found = only_base.lookup_group(fg, pa.array(keys, pa.string()))
    return {k: (p, f, t) for k, p, f, t in zip(*(found.column(c).to_pylist() for c in found.column_names), strict=True)}


def _check_base_files(table: Table, probe: list[str]) -> tuple[Mapping, int]:
    """Each record-index base HFile decoded by hudi-rs equals our base-only lookups of every probed key and
    holds only keys routed to its file group. Returns the union of hudi-rs's mappings and the entry count."""
    mdt = metadata_base_path(table.base_path)
    slices = _slices(table)
    n = len(slices)
    union: Mapping = {}
    for fg, (base, _logs) in enumerate(slices):
        assert base is not None, f"file group {fg} has no base file"
        theirs = _rs_base_mappings(mdt, base)
        assert all(_java_hash_group(k, n) == fg for k in theirs), base
        routed = [k for k in probe if _java_hash_group(k, n) == fg]
        ours = _ours_base_only(table, fg, sorted(set(routed) | set(theirs)))
        assert ours == theirs, (base, len(ours), len(theirs))
        union.update(theirs)
    return union, len(union)


def _delete(spark, table: Table, ids: list[str], ts: int, extra: dict[str, str] | None = None) -> str:  # type: ignore[no-untyped-def]
    return _upsert(spark, table, ids, ts, "delete", extra)


def _upsert(spark, table: Table, ids: list[str], ts: int, op: str = "upsert", extra: dict[str, str] | None = None) -> str:  # type: ignore[no-untyped-def]
    """Write and return the commit's instant time."""
    table.write(spark.createDataFrame(_rows(ids, ts)), op, {**OPTS, **(extra or {})})
    last = table.timeline().completed_commits().last()
    assert last is not None
    return last.requested_time


@pytest.mark.spark
def test_record_index_with_log_blocks_matches_hudi_rs(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    first = _keys("a", 240)
    table = Table.create(base, _rows(first[:1], 0).schema, OPTS)
    # the index is initialised empty by the first write: every mapping so far lives in log blocks
    commits = [_upsert(spark, table, first, 1, op="insert")]
    upd, new = first[:40], _keys("b", 40)
    commits.append(_upsert(spark, table, upd + new, 2))
    gone1 = first[200:230]
    commits.append(_delete(spark, table, gone1, 3, {"hoodie.metadata.compact.max.delta.commits": "3"}))  # compacts
    table = Table.open(base)
    slices = _slices(table)
    assert all(b is not None for b, _ in slices)
    assert any(HFileReader.open(table.storage, posixpath.join(metadata_base_path(base), b)).entry_count
               for b, _ in slices if b), "the compaction should have filled the base files"
    # then more log blocks on top of non-empty base files: new mappings and delete blocks
    more = _keys("c", 30)
    commits.append(_upsert(spark, table, first[40:60] + more, 4))
    gone2 = first[60:75] + more[:5] + new[:5]
    commits.append(_delete(spark, table, gone2, 5))

    table = Table.open(base)
    all_keys = sorted(set(first) | set(new) | set(more)) + _keys("absent", 10)
    deleted = set(gone1) | set(gone2)
    ours = _ours(table, all_keys)

    # 1. against the data table as hudi-rs reads it (listed through the metadata table's files partition)
    data = _rs_data_locations(base)
    assert set(data) == set(all_keys[:-10]) - deleted
    assert set(ours) == set(data)
    assert {k: (p, f) for k, (p, f, _t) in ours.items()} == {k: (p, f) for k, (p, f, _c) in data.items()}
    # instants: the commit that inserted the key into its file group (an update in place keeps it)
    ms = _rs_commit_ms(base)
    assert set(commits) <= set(ms)
    inserted_at = {k: commits[0] if k in first else commits[1] if k in new else commits[3] for k in data}
    assert {k: t for k, (_p, _f, t) in ours.items()} == {k: ms[c] for k, c in inserted_at.items()}

    # 2. every base HFile (written by the metadata compaction) decoded by hudi-rs equals our base-only lookups;
    # the log blocks on top of them matter: new keys only there, base keys deleted by delete blocks
    in_base, _ = _check_base_files(table, all_keys)
    assert set(in_base) == set(first) - set(gone1) | set(new)
    assert set(more[5:]) <= set(ours) and not set(more) & set(in_base)
    assert set(gone2) - set(more) <= set(in_base) and not set(gone2) & set(ours)

    # 3. hudi-rs cannot merge a record-index slice with HFile log blocks
    mdt = metadata_base_path(base)
    from pyhudi.io.logfile import BlockType, read_log_blocks

    def has_hfile_block(logs: list[str]) -> bool:  # a slice may hold only a delete block (random keys)
        return any(blk.block_type == BlockType.HFILE_DATA
                   for lf in logs for blk in read_log_blocks(table.storage, posixpath.join(mdt, lf), load_content=False))

    with_logs = [(b, logs) for b, logs in _slices(table) if logs and has_hfile_block(logs)]
    assert with_logs
    b, logs = with_logs[0]
    with pytest.raises(Exception, match=LOG_MERGE_ERROR):
        HudiFileGroupReader(mdt).read_file_slice_from_paths(b, logs)

    # 4. fold the log blocks into base files: hudi-rs's decoding of them equals our log-merged lookups
    tl = table.timeline()
    writer = MetadataWriter(table.storage, base, table.config)
    floor = max(t for t in (tl.latest_time(), writer.timeline().latest_time()) if t)
    writer.compact(tl, InstantTimeGenerator().next(floor=floor))
    table = Table.open(base)
    assert all(not logs for _b, logs in _slices(table))
    union, _ = _check_base_files(table, all_keys)
    assert union == ours
    assert _ours(table, all_keys) == ours


@pytest.mark.spark
def test_built_record_index_base_files_match_hudi_rs(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``Table.build_record_index`` on an existing table: two file groups of many keys, several HFile data
    blocks each, written by the build's Spark tasks; hudi-rs decodes both into exactly our mappings."""
    base = str(tmp_path / "t")
    keys = [str(uuid.uuid4()) for _ in range(60_000)]
    opts = {**OPTS, "hoodie.index.type": "SIMPLE", "hoodie.metadata.record.index.enable": "false"}
    table = Table.create(base, _rows(keys[:1], 0).schema, opts)
    table.write(spark.createDataFrame(_rows(keys, 1)), "bulk_insert", opts)
    upd = keys[:500]
    table.write(spark.createDataFrame(_rows(upd, 2)), "upsert", {**opts, "hoodie.index.type": "GLOBAL_SIMPLE"})
    table = Table.open(base)
    assert RECORD_INDEX not in table.config.metadata_partitions
    assert table.build_record_index(num_file_groups=2) == 2
    table = Table.open(base)
    slices = _slices(table)
    assert len(slices) == 2 and all(b is not None and not logs for b, logs in slices)
    mdt = metadata_base_path(base)
    for b, _ in slices:
        with HFileReader.open(table.storage, posixpath.join(mdt, str(b))) as h:
            assert h.num_blocks > 1, (b, h.num_blocks)

    absent = [str(uuid.uuid4()) for _ in range(1000)]
    union, entries = _check_base_files(table, keys + absent)
    assert entries == len(keys)
    ours = _ours(table, keys + absent)
    assert union == ours and set(ours) == set(keys)
    # locations and instants against the data table as hudi-rs reads it: the build takes each record's
    # location from its latest base file and the instant from its _hoodie_commit_time
    data = _rs_data_locations(base)
    ms = _rs_commit_ms(base)
    assert ours == {k: (p, f, ms[c]) for k, (p, f, c) in data.items()}
    assert {c for _p, _f, c in data.values()} == set(ms)
    # bulk_insert numbers its new file groups under one prefix (as Hudi's bulk insert writers do): the entries
    # differ in the file index of the UUID encoding, which hudi-rs decodes back to the same file ids
    ids = {f for _p, f, _c in data.values()}
    assert len({f.rsplit("-", 1)[0] for f in ids}) == 1
    assert sorted(int(f.rsplit("-", 1)[1]) for f in ids) == list(range(len(DAYS)))


def test_hudi_rs_cannot_merge_record_index_logs_of_java_tables(unzipped_table) -> None:  # type: ignore[no-untyped-def]
    """The log-merge limitation is hudi-rs's own: a Java-written (Hudi 1.1) record index fails the same way,
    while its base HFiles decode into the mappings our reader finds there."""
    root = unzipped_table("cow_v9_txns_simple_meta.zip")
    base = next(p.parent.parent for p in root.glob("*/.hoodie/hoodie.properties"))
    table = Table.open(str(base))
    mdt = metadata_base_path(table.base_path)
    slices = _slices(table)
    with_logs = [(b, logs) for b, logs in slices if b and logs]
    assert with_logs
    for b, logs in with_logs:
        with pytest.raises(Exception, match=LOG_MERGE_ERROR):
            HudiFileGroupReader(mdt).read_file_slice_from_paths(b, logs)
    found = 0
    for fg, (b, _logs) in enumerate(slices):
        assert b is not None
        theirs = _rs_base_mappings(mdt, b)
        found += len(theirs)
        assert _ours_base_only(table, fg, sorted(theirs)) == theirs
    assert found
