"""A copy-on-write table with a metadata table, written without Spark, for archival tests.

Every commit writes whole file-group versions (real parquet base files with Hudi's meta columns, see
:mod:`tests.support.fabricate`), records them in the metadata table as a deltacommit of the same instant, then
completes. After each commit the table is cleaned (KEEP_LATEST_COMMITS, the metadata table recording the
deletions first) and the metadata table is compacted every ``max_delta`` deltacommits, as ``Table.write`` does.
The model keeps every version of every file group and every replace, so snapshots, time travel and incremental
reads have exact expected rows.

:class:`Fab` fabricates bare timelines for archival planning: instants on a real (empty) table, contents only
where planning reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from pyhudi.metadata.writer import MetadataWriter
from pyhudi.services.clean import clean
from pyhudi.table.properties import meta_path, read_table_config
from pyhudi.table.table import Table
from pyhudi.table.timeline import CLEAN, COMMIT, ActiveTimeline, InstantTimeGenerator
from tests.support.fabricate import Clock, commit, make_table
from tests.support.storage import LOCAL

Row = tuple[str, int, str]  # (id, v, region)


@dataclass
class Version:
    instant: str
    rows: list[tuple[str, int]]


@dataclass
class FabTable:
    """The table and its model."""

    base: str
    retained: int = 3
    max_delta: int = 4
    mdt: bool = True
    gen: InstantTimeGenerator = field(default_factory=InstantTimeGenerator)
    groups: dict[tuple[str, str], list[Version]] = field(default_factory=dict)
    replaces: list[tuple[str, dict[str, list[str]]]] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)
    writer: MetadataWriter | None = None

    @staticmethod
    def create(path: Path, **kw: int | bool) -> FabTable:
        base = make_table(path)
        t = FabTable(base, **kw)  # type: ignore[arg-type]
        if t.mdt:
            cfg = read_table_config(LOCAL, meta_path(base))
            w = MetadataWriter(LOCAL, base, cfg)
            w.create(ActiveTimeline.load(LOCAL, base))
            w.data_config = read_table_config(LOCAL, meta_path(base))
            t.writer = w
        return t

    def clock(self) -> str:
        return self.gen.next()

    def write(
        self,
        changes: Mapping[tuple[str, str], list[tuple[str, int]]],
        replaced: Mapping[str, list[str]] | None = None,
        *,
        services: bool = True,
    ) -> str:
        """Commit new versions of file groups ``(partition, file id) -> rows`` (a replacecommit with ``replaced``);
        then clean and compact the metadata table (``services``)."""
        files: dict[str, list[tuple[str, list[tuple[str, int]]]]] = {}
        for (p, fid), rows in changes.items():
            files.setdefault(p, []).append((fid, list(rows)))

        def to_mdt(t: str, meta: dict[str, object]) -> None:
            if self.writer is not None:
                self.writer.apply_commit(t, meta)

        t = commit(
            self.base, self.clock, files, replaced={k: list(v) for k, v in replaced.items()} if replaced else None,
            before_complete=to_mdt,
        )
        for key, rows in changes.items():
            self.groups.setdefault(key, []).append(Version(t, list(rows)))
        if replaced:
            self.replaces.append((t, {k: list(v) for k, v in replaced.items()}))
        self.commits.append(t)
        if services:
            self.services()
        return t

    def services(self) -> None:
        tl = ActiveTimeline.load(LOCAL, self.base)
        clean(LOCAL, self.base, tl, self.retained, self.gen,
              on_delete=self.writer.apply_clean if self.writer is not None else None)
        if self.writer is not None:
            tl = tl.reload()
            self.writer.maybe_compact(tl, self.max_delta, self.gen.next(floor=tl.latest_time()))

    # -- the model --------------------------------------------------------------------------------------------
    def snapshot(self, as_of: str | None = None) -> list[Row]:
        gone: set[tuple[str, str]] = set()
        for t, parts in self.replaces:
            if as_of is None or t <= as_of:
                gone.update((p, f) for p, fids in parts.items() for f in fids)
        out: list[Row] = []
        for (p, fid), versions in self.groups.items():
            if (p, fid) in gone:
                continue
            live = [v for v in versions if as_of is None or v.instant <= as_of]
            if live:
                region = p.split("=", 1)[1]
                out.extend((k, v, region) for k, v in live[-1].rows)
        return sorted(out)

    def changed_by(self, commits: set[str], as_of: str | None) -> list[Row]:
        """What an incremental read of ``commits`` returns: rows of the snapshot as of the last of them written
        by one of them (the model's rows carry their version's instant)."""
        out: list[Row] = []
        gone: set[tuple[str, str]] = set()
        for t, parts in self.replaces:
            if as_of is None or t <= as_of:
                gone.update((p, f) for p, fids in parts.items() for f in fids)
        for (p, fid), versions in self.groups.items():
            if (p, fid) in gone:
                continue
            live = [v for v in versions if as_of is None or v.instant <= as_of]
            if live and live[-1].instant in commits:
                region = p.split("=", 1)[1]
                out.extend((k, v, region) for k, v in live[-1].rows)
        return sorted(out)


def rows_of(t: pa.Table) -> list[Row]:
    if not t.num_rows:
        return []
    return sorted(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), t.column("region").to_pylist(), strict=True))


def hudi_rs_rows(base: str, as_of: str | None = None) -> list[Row]:
    import hudi

    opts = hudi.HudiReadOptions() if as_of is None else hudi.HudiReadOptions().with_as_of_timestamp(as_of)
    batches = list(hudi.HudiTableBuilder.from_base_uri(base).build().read(opts))
    return rows_of(pa.Table.from_batches(batches)) if batches else []


def pyhudi_rows(base: str, as_of: str | None = None) -> list[Row]:
    return rows_of(Table.open(base).to_arrow(as_of=as_of))


def incremental_rows(base: str, start: str, end: str | None = None) -> list[Row]:
    """``Table.read_incremental`` without Spark."""
    return rows_of(Table.open(base).incremental_arrow(start, end))


# -- fabricated timelines ---------------------------------------------------------------------------------------
def _clean_plan(ectr: str, extra: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "earliestInstantToRetain": {"timestamp": ectr, "action": COMMIT, "state": "COMPLETED"},
        "lastCompletedCommitTimestamp": "",
        "policy": "KEEP_LATEST_COMMITS",
        "filesToBeDeletedPerPartition": {},
        "version": 2,
        "filePathsToBeDeletedPerPartition": {},
        "partitionsToBeDeleted": [],
        "extraMetadata": extra or {},
    }


def _clean_metadata(t: str, ectr: str) -> dict[str, Any]:
    return {
        "startCleanTime": t, "timeTakenInMillis": 1, "totalFilesDeleted": 0, "earliestCommitToRetain": ectr,
        "lastCompletedCommitTimestamp": "", "partitionMetadata": {}, "version": 2, "bootstrapPartitionMetadata": {},
        "extraMetadata": {},
    }


class Fab:
    """Instants on a real (empty) table's timeline, contents only where planning reads them."""

    def __init__(self, tmp_path: Path, name: str = "t") -> None:
        self.base = make_table(tmp_path / name)
        self.clock = Clock()

    @property
    def tl(self) -> ActiveTimeline:
        return ActiveTimeline.load(LOCAL, self.base)

    def done(self, action: str = COMMIT, n: int = 1) -> list[str]:
        out = []
        for _ in range(n):
            tl, t = self.tl, self.clock()
            req = tl.create_requested(action, t, b"")
            tl.complete(tl.transition_to_inflight(req, b""), b"", self.clock())
            out.append(t)
        return out

    def pending(self, action: str, inflight: bool = True) -> str:
        tl, t = self.tl, self.clock()
        req = tl.create_requested(action, t, b"")
        if inflight:
            tl.transition_to_inflight(req, b"")
        return t

    def clean(self, ectr: str, extra: dict[str, str] | None = None) -> str:
        tl, t = self.tl, self.clock()
        req = tl.create_requested(CLEAN, t, _clean_plan(ectr, extra))
        tl.complete(tl.transition_to_inflight(req, None), _clean_metadata(t, ectr), self.clock())
        return t
