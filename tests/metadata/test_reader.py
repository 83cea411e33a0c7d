"""Reading fixture metadata tables: files partition vs storage + timeline, file slices vs hudi-rs, record index."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hudi import HudiReadOptions, HudiTableBuilder

from pyhudi.io.storage import Storage
from pyhudi.metadata.partitions import RECORD_INDEX
from pyhudi.metadata.reader import MetadataListing, MetadataTableReader
from pyhudi.metadata.records import record_index_file_group
from pyhudi.table.filenames import parse_data_file_name
from pyhudi.table.fsview import FileSystemView, StorageListing
from tests.support.fixtures import MDT_ZIPS


def _reader(base: Path) -> MetadataTableReader:
    st, p = Storage.from_uri(str(base))
    return MetadataTableReader(st, p)


@pytest.mark.parametrize("zip_name", MDT_ZIPS)
def test_files_partition_equals_storage_listing(mdt_tables: dict[str, Path], zip_name: str) -> None:
    base = mdt_tables[zip_name]
    st, p = Storage.from_uri(str(base))
    r = _reader(base)
    storage = {
        part: {e.name: e.size for e in es if parse_data_file_name(e.name) is not None}
        for part, es in StorageListing(st, p).list_partition_files().items()
    }
    assert r.list_partitions() == sorted(storage)
    for part, files in storage.items():
        assert r.list_files(part) == files, part
    # and the views built from either listing agree
    mdt_view = FileSystemView.load(st, p, listing=MetadataListing(r))
    sto_view = FileSystemView.load(st, p)
    assert [s.relative_paths for s in mdt_view.latest_file_slices()] == [
        s.relative_paths for s in sto_view.latest_file_slices()
    ]


@pytest.mark.parametrize("zip_name", MDT_ZIPS)
def test_view_from_metadata_listing_equals_hudi_rs(mdt_tables: dict[str, Path], zip_name: str) -> None:
    base = mdt_tables[zip_name]
    st, p = Storage.from_uri(str(base))
    view = FileSystemView.load(st, p, listing=MetadataListing(_reader(base)))
    ours = sorted(
        (s.partition, s.file_id, s.base_file.file_name if s.base_file else "", tuple(lf.file_name for lf in s.log_files))
        for s in view.latest_file_slices()
    )
    theirs = sorted(
        (fs.partition_path, fs.file_id, fs.base_file_name or "", tuple(fs.log_file_names))
        for fs in HudiTableBuilder.from_base_uri(str(base)).build().get_file_slices()
    )
    assert ours == theirs


def _snapshot(base: Path, as_of: str | None = None) -> pa.Table:
    t = HudiTableBuilder.from_base_uri(str(base)).build()
    opts = HudiReadOptions() if as_of is None else HudiReadOptions().with_as_of_timestamp(as_of)
    return pa.Table.from_batches(t.read(opts))


@pytest.mark.parametrize("zip_name", MDT_ZIPS)
def test_record_index_maps_every_live_key(mdt_tables: dict[str, Path], zip_name: str) -> None:
    base = mdt_tables[zip_name]
    r = _reader(base)
    if RECORD_INDEX not in r.partitions():
        pytest.skip("no record index")
    snap = _snapshot(base)
    keys = snap.column("_hoodie_record_key").to_pylist()
    parts = snap.column("_hoodie_partition_path").to_pylist()
    fids = []
    for name in snap.column("_hoodie_file_name").to_pylist():
        parsed = parse_data_file_name(name)
        fids.append(parsed.file_id if parsed is not None else name)  # MOR log records carry the bare file id
    found = r.lookup(RECORD_INDEX, keys)
    n = len(r.file_slices(RECORD_INDEX))
    # mor_v9_nonpartitioned_rollback holds one key (TXN-002) twice: re-inserted into a new file group after the
    # rollback. The record index keeps the later location, so expect the row with the latest commit time.
    commits = snap.column("_hoodie_commit_time").to_pylist()
    expected: dict[str, tuple[str, str, str]] = {}
    for k, part, fid, c in zip(keys, parts, fids, commits, strict=True):
        if k not in expected or c > expected[k][0]:
            expected[k] = (c, part, fid)
    for k, (_c, part, fid) in expected.items():
        rec = found.get(k)
        assert rec is not None, k
        ri = rec.record_index
        assert ri is not None and (ri.partition, ri.file_id) == (part, fid), k
    # routing by hash is what Hudi does: every key sits in the file group its hash names
    everything = {}
    for i, fs in enumerate(r.file_slices(RECORD_INDEX)):
        for k in r.merge_slice(fs):
            assert record_index_file_group(k, n) == i
            everything[k] = i
    # the full partition read agrees with the lookups
    live = r.read_partition(RECORD_INDEX)
    assert set(live) == set(keys)


@pytest.mark.parametrize("zip_name", MDT_ZIPS)
def test_deleted_keys_are_not_found(mdt_tables: dict[str, Path], zip_name: str) -> None:
    base = mdt_tables[zip_name]
    r = _reader(base)
    if RECORD_INDEX not in r.partitions():
        pytest.skip("no record index")
    live = set(_snapshot(base).column("_hoodie_record_key").to_pylist())
    ever: set[str] = set()
    for inst in r.data_timeline.completed_commits():
        ever |= set(_snapshot(base, inst.requested_time).column("_hoodie_record_key").to_pylist())
    gone = ever - live
    assert r.lookup(RECORD_INDEX, gone) == {}
    if "8i3u1d" in zip_name or "txns" in zip_name:
        assert gone, "the fixture deletes keys"


def test_some_record_index_entries_live_only_in_logs(mdt_tables: dict[str, Path]) -> None:
    only_logs = 0
    for base in mdt_tables.values():
        r = _reader(base)
        if RECORD_INDEX not in r.partitions():
            continue
        for fs in r.file_slices(RECORD_INDEX):
            in_base: set[str] = set()
            if fs.base_file is not None:
                from pyhudi.hfile import HFileReader

                with HFileReader.open(r.storage, f"{r.mdt_path}/{fs.base_file.relative_path}") as h:
                    in_base = {k.decode() for k in h.read_all().column("key").to_pylist()}
            only_logs += len(set(r.merge_slice(fs)) - in_base)
    assert only_logs > 0


def test_uncommitted_block_is_ignored(mdt_tables: dict[str, Path], tmp_path: Path) -> None:
    """A log block whose instant is not completed on the data timeline does not count."""
    import shutil

    from pyhudi.io.logfile import append_blocks, hfile_data_block
    from pyhudi.metadata.records import encode_value, files_record, writer_schema_json
    from pyhudi.table.filenames import make_log_file_name

    src = mdt_tables["cow_v9_txns_simple_meta.zip"]
    base = tmp_path / "t"
    shutil.copytree(src, base)
    r0 = _reader(base)
    part = r0.list_partitions()[0]
    fs = r0.file_slices("files")[0]
    last_log = fs.log_files[-1]
    rec = files_record(part, {"zzz-fake.parquet": 1})
    block = hfile_data_block({rec.key: encode_value(rec)}, "29990101000000000", writer_schema_json())
    st = Storage.from_uri("/")[0]
    append_blocks(st, f"{r0.mdt_path}/files/{last_log.file_name}", [block])
    assert "zzz-fake.parquet" not in _reader(base).list_files(part)
    # a new log file at an instant unknown to both timelines is invisible too
    name = make_log_file_name(fs.file_id, "29990101000000000", 1, "0-0-0")
    append_blocks(st, f"{r0.mdt_path}/files/{name}", [block])
    assert "zzz-fake.parquet" not in _reader(base).list_files(part)


@pytest.mark.parametrize("zip_name", MDT_ZIPS)
def test_vectorised_record_index_merge_equals_record_merge(mdt_tables: dict[str, Path], zip_name: str) -> None:
    """The compaction's vectorised merge of a record-index slice (raw cells, values re-encoded when written
    with another schema) gives the same live mappings as the record-by-record merge, on Hudi-written slices
    with entries in base files, log blocks and delete blocks."""
    import posixpath

    from pyhudi.metadata.record_index import decode_locations, merged_cells

    base = mdt_tables[zip_name]
    r = _reader(base)
    if RECORD_INDEX not in r.partitions():
        pytest.skip("no record index")
    for fs in r.file_slices(RECORD_INDEX):
        want = {}
        for k, rec in r.merge_slice(fs).items():
            if not rec.is_absent:
                ri = rec.record_index
                assert ri is not None
                want[k] = (ri.partition, ri.file_id, ri.instant_time_ms)
        keys, values = merged_cells(
            r.storage,
            posixpath.join(r.mdt_path, fs.base_file.relative_path) if fs.base_file else None,
            [posixpath.join(r.mdt_path, lf.relative_path) for lf in fs.log_files],
            r.block_filter,
        )
        assert keys.to_pylist() == sorted(k.encode() for k in want)
        locs = decode_locations(values)
        got = {
            k.decode(): (p, f, t)
            for k, p, f, t in zip(keys.to_pylist(), locs.column("partition").to_pylist(),
                                  locs.column("file_id").to_pylist(), locs.column("instant_ms").to_pylist(), strict=True)
        }
        assert got == want, fs.file_id
