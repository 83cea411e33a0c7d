"""MetadataWriter without Spark: commits fabricated the way ``Table.write`` makes them (parquet base files, data
timeline requested -> inflight, ``apply_commit`` before the data commit completes, clean with ``apply_clean``,
``maybe_compact`` after), checked against a storage listing, ``validate_table`` and hudi-rs."""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pyhudi.metadata.partitions import FILES, INIT_PREFIX
from pyhudi.metadata.reader import MetadataTableReader
from pyhudi.metadata.validate import validate_table
from pyhudi.metadata.writer import MetadataWriter
from pyhudi.services.clean import clean as run_clean
from pyhudi.services.rollback import rollback_failed_writes
from pyhudi.table.filenames import parse_data_file_name
from pyhudi.table.table import Table
from pyhudi.table.timeline import COMMIT, COMPACTION, DELTA_COMMIT, ActiveTimeline, InstantTimeGenerator
from tests.support.fabricate import AVRO_SCHEMA, make_table, write_base_file, write_partition_meta
from tests.support.faults import crash_next_metadata_compactions
from tests.support.storage import LOCAL

hudi = pytest.importorskip("hudi")

PARTS = ["region=a", "region=b"]


class Fab:
    """A fabricated partitioned table with a metadata table, written one commit at a time."""

    def __init__(self, base: Path) -> None:
        self.base = make_table(base)
        self.gen = InstantTimeGenerator()
        self.rows: dict[tuple[str, str], int] = {}  # (partition, key) -> v
        self.groups: dict[tuple[str, str], list[str]] = {}  # (partition, file id) -> keys
        self.commits: list[str] = []
        self.writer = MetadataWriter(LOCAL, self.base, self.table().config)
        self.writer.create(self.timeline())
        self.writer.data_config = self.table().config

    def table(self) -> Table:
        return Table.open(self.base)

    def timeline(self) -> ActiveTimeline:
        return ActiveTimeline.load(LOCAL, self.base)

    def commit(self, changes: dict[tuple[str, str], dict[str, int]], *, complete: bool = True) -> str:
        """One upsert: ``{(partition, file id): {key: v}}``; each touched file group gets a new slice holding its
        old keys (with the new values) and the new ones. The metadata deltacommit is applied before the data
        commit completes (or the data commit is left inflight when ``complete`` is false)."""
        tl = self.timeline()
        t = self.gen.next(floor=tl.latest_time())
        req = tl.create_requested(COMMIT, t)
        infl = tl.transition_to_inflight(req, None)
        stats: dict[str, list[dict[str, Any]]] = {}
        new_rows = dict(self.rows)
        for (part, fid), upd in sorted(changes.items()):
            write_partition_meta(self.base, part, t)
            keys = sorted(set(self.groups.get((part, fid), [])) | set(upd))
            for k, v in upd.items():
                new_rows[(part, k)] = v
            name, size = write_base_file(self.base, part, fid, t, [(k, new_rows[(part, k)]) for k in keys])
            prev = self._prev_instant(part, fid)
            stats.setdefault(part, []).append(
                {
                    "fileId": fid,
                    "path": posixpath.join(part, name),
                    "prevCommit": prev or "null",
                    "numWrites": len(keys),
                    "numDeletes": 0,
                    "numUpdateWrites": len(keys) - len(set(upd) - set(self.groups.get((part, fid), []))),
                    "numInserts": len(set(upd) - set(self.groups.get((part, fid), []))),
                    "totalWriteBytes": size,
                    "totalWriteErrors": 0,
                    "partitionPath": part,
                    "fileSizeInBytes": size,
                }
            )
        meta = {
            "partitionToWriteStats": stats,
            "compacted": False,
            "extraMetadata": {"schema": AVRO_SCHEMA},
            "version": None,
            "operationType": "UPSERT",
        }
        self.writer.apply_commit(t, meta)
        if not complete:
            return t
        tl.complete(infl, meta, self.gen.next(floor=t))
        self.rows = new_rows
        for (part, fid), upd in changes.items():
            self.groups[(part, fid)] = sorted(set(self.groups.get((part, fid), [])) | set(upd))
        self.commits.append(t)
        return t

    def _prev_instant(self, part: str, fid: str) -> str | None:
        for s in self.table().view(use_metadata=False).latest_file_slices(part):
            if s.file_id == fid and s.base_file is not None:
                return s.base_file.instant
        return None

    def clean(self, retained: int = 2) -> None:
        tl = self.timeline()
        run_clean(
            LOCAL,
            self.base,
            tl,
            retained,
            self.gen.next(floor=tl.latest_time()),
            on_delete=self.writer.apply_clean,
        )

    def maybe_compact(self, max_delta_commits: int = 10) -> None:
        tl = self.timeline()
        self.writer.maybe_compact(tl, max_delta_commits, self.gen.next(floor=tl.latest_time()))

    def model(self) -> list[tuple[str, str, int]]:
        return sorted((p, k, v) for (p, k), v in self.rows.items())


def fid(i: int) -> str:
    return f"{i:08d}-aaaa-bbbb-cccc-000000000000-0"


def hudi_rows(base: str) -> list[tuple[str, str, int]]:
    t = hudi.HudiTableBuilder.from_base_uri(base).build()
    batches = list(t.read(hudi.HudiReadOptions()))
    if not batches:
        return []
    tab = pa.Table.from_batches(batches)
    return sorted(
        zip(
            tab.column("_hoodie_partition_path").to_pylist(),
            tab.column("id").to_pylist(),
            tab.column("v").to_pylist(),
            strict=True,
        )
    )


def slices_of(view: Any) -> list[tuple[str, str, str]]:
    return sorted(
        (s.partition, s.file_id, s.base_file.file_name if s.base_file else "")
        for s in view.latest_file_slices()
    )


def hudi_slices(base: str) -> list[tuple[str, str, str]]:
    t = hudi.HudiTableBuilder.from_base_uri(base).build()
    return sorted((fs.partition_path, fs.file_id, fs.base_file_name or "") for fs in t.get_file_slices())


def mdt_files(base: str) -> list[str]:
    """Data/log files of the metadata table's files partition (names)."""
    d = Path(base, ".hoodie", "metadata", FILES)
    return sorted(p.name for p in d.iterdir() if parse_data_file_name(p.name) is not None)


def assert_consistent(fab: Fab, what: str) -> None:
    table = fab.table()
    rep = validate_table(table)
    assert rep.ok, (what, rep.to_dict())
    with_mdt = slices_of(table.view(use_metadata=True))
    assert with_mdt == slices_of(table.view(use_metadata=False)), what
    assert with_mdt == hudi_slices(fab.base), what
    assert hudi_rows(fab.base) == fab.model(), what


def test_create_bootstraps_files_partition_from_listing(tmp_path: Path) -> None:
    base = make_table(tmp_path / "t")
    gen = InstantTimeGenerator()
    # two committed files written before the metadata table exists, one uncommitted file
    tl = ActiveTimeline.load(LOCAL, base)
    t1 = gen.next()
    infl = tl.transition_to_inflight(tl.create_requested(COMMIT, t1), None)
    write_partition_meta(base, "region=a", t1)
    n1, s1 = write_base_file(base, "region=a", fid(1), t1, [("k1", 1)])
    n2, s2 = write_base_file(base, "region=a", fid(2), t1, [("k2", 2)])
    tl.complete(
        infl,
        {
            "partitionToWriteStats": {
                "region=a": [
                    {
                        "fileId": fid(1),
                        "path": f"region=a/{n1}",
                        "fileSizeInBytes": s1,
                        "prevCommit": "null",
                        "numWrites": 1,
                    },
                    {
                        "fileId": fid(2),
                        "path": f"region=a/{n2}",
                        "fileSizeInBytes": s2,
                        "prevCommit": "null",
                        "numWrites": 1,
                    },
                ]
            },
            "extraMetadata": {"schema": AVRO_SCHEMA},
            "operationType": "INSERT",
        },
        gen.next(floor=t1),
    )
    t2 = gen.next(floor=t1)
    tl = tl.reload()
    tl.transition_to_inflight(tl.create_requested(COMMIT, t2), None)
    write_base_file(base, "region=a", fid(3), t2, [("k3", 3)])  # inflight: not committed

    table = Table.open(base)
    w = MetadataWriter(LOCAL, base, table.config)
    w.create(table.timeline())
    table = Table.open(base)
    assert table.has_metadata_table and table.config.metadata_partitions == [FILES]
    reader = MetadataTableReader(LOCAL, base, data_timeline=table.timeline(), data_config=table.config)
    assert reader.list_partitions() == ["region=a"]
    assert reader.list_files("region=a") == {n1: s1, n2: s2}
    mdt_tl = w.timeline()
    assert [(i.action, i.requested_time) for i in mdt_tl.completed()] == [(DELTA_COMMIT, f"{INIT_PREFIX}000")]


def test_25_commits_compact_clean_and_agree_with_listing_and_hudi_rs(tmp_path: Path) -> None:
    fab = Fab(tmp_path / "t")
    n_groups = 3
    for i in range(25):
        part = PARTS[i % 2]
        g = (i // 2) % n_groups
        fab.commit({(part, fid(g + 10 * (i % 2))): {f"g{g}k{i % 3}": i, f"n{i}": i}})  # keys unique per group
        if i in (11, 19):
            fab.clean(retained=2)  # data-table clean, recorded through apply_clean
        fab.maybe_compact()  # default: every 10 deltacommits
        if i in (0, 12, 24):
            assert_consistent(fab, f"after commit {i}")
    mdt_tl = fab.writer.timeline()
    compactions = [i for i in mdt_tl.completed() if i.action == COMMIT]
    assert len(compactions) >= 2, [str(i) for i in mdt_tl]
    assert not mdt_tl.pending()
    # every data commit and clean has its deltacommit at the same instant
    data_tl = fab.timeline()
    deltas = {i.requested_time for i in mdt_tl.completed() if i.action == DELTA_COMMIT}
    assert {i.requested_time for i in data_tl.completed() if i.action in ("commit", "clean")} <= deltas
    # old metadata file slices were cleaned: nothing older than the second-to-last compaction remains
    keep_from = sorted(c.requested_time for c in compactions)[-2]
    files = mdt_files(fab.base)
    old = [f for f in files if (p := parse_data_file_name(f)) is not None and p.instant < keep_from]
    assert old == [], files
    assert f"{INIT_PREFIX}000" not in "".join(files)
    assert_consistent(fab, "end")


def test_failed_data_commit_deltacommit_is_ignored_then_rolled_back(tmp_path: Path) -> None:
    fab = Fab(tmp_path / "t")
    fab.commit({("region=a", fid(1)): {"k1": 1, "k2": 2}})
    failed = fab.commit({("region=a", fid(1)): {"k1": 100}, ("region=b", fid(2)): {"x": 5}}, complete=False)
    # the metadata deltacommit completed, the data commit did not: readers ignore its block
    assert any(failed in f for f in mdt_files(fab.base))
    table = fab.table()
    reader = MetadataTableReader(LOCAL, fab.base, data_timeline=table.timeline(), data_config=table.config)
    assert reader.list_partitions() == ["region=a"]
    assert hudi_rows(fab.base) == fab.model() == [("region=a", "k1", 1), ("region=a", "k2", 2)]
    assert validate_table(table).ok  # uncommitted files are not "committed on storage"
    rollback_failed_writes(LOCAL, fab.base, None, InstantTimeGenerator())  # the data rollback takes the metadata's
    assert not any(failed in f for f in mdt_files(fab.base))
    assert fab.writer.timeline().get(failed) is None


def test_crash_in_compaction_leaves_readers_unaffected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fab = Fab(tmp_path / "t")
    for i in range(4):
        fab.commit({(PARTS[i % 2], fid(i % 2)): {f"k{i}": i}})
    crash_next_metadata_compactions(monkeypatch, "injected: compaction died after writing its base files")
    with pytest.raises(RuntimeError, match="injected"):
        fab.maybe_compact(max_delta_commits=2)
    monkeypatch.undo()
    mdt_tl = fab.writer.timeline()
    pending = [i for i in mdt_tl.pending() if i.action == COMPACTION]
    assert len(pending) == 1
    ct = pending[0].requested_time
    assert any(f.endswith(".hfile") and ct in f for f in mdt_files(fab.base))  # base files written
    assert_consistent(fab, "with a pending metadata compaction")
    # the next write recovers: the pending compaction and its base files are gone, then it compacts again
    fab.writer.recover_compactions()
    assert not any(ct in f for f in mdt_files(fab.base))
    assert fab.writer.timeline().get(ct) is None
    fab.commit({("region=a", fid(0)): {"k0": 99}})
    fab.maybe_compact(max_delta_commits=2)
    assert [i.action for i in fab.writer.timeline().completed() if i.action == COMMIT] == [COMMIT]
    assert_consistent(fab, "after the recovered compaction")
