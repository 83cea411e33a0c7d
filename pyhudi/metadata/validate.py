"""``pyhudi validate``: does the metadata table tell the truth about the table's files?

Compares the ``files`` partition (merged, valid blocks only) with the committed data files found on storage
(files whose instant is completed on the data timeline), and the latest file slices built from each source; and,
when the table has a record index, every key of the latest file slices (base and log files merged) with the file
group the index names for it. A record index listed in ``hoodie.table.metadata.partitions`` whose file groups
readers do not see (no ``record_index`` partition, none of its file groups, or not all of them) is a problem:
lookups and upserts would find nothing, or hash keys over the wrong number of file groups. When the table keeps
``column_stats``, every file of the latest file slices must have statistics, equal to what the file holds (its
footer, or its log records), and each partition's ``partition_stats`` must admit every value of its latest files.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from pyhudi.metadata.partitions import COLUMN_STATS, PARTITION_STATS
from pyhudi.metadata.reader import RECORD_INDEX, MetadataTableReader
from pyhudi.metadata.record_index import RecordIndexLookup, file_group_id
from pyhudi.table.filenames import parse_data_file_name
from pyhudi.table.fsview import StorageListing
from pyhudi.table.schema import RECORD_KEY_COL
from pyhudi.table.table import Table
from pyhudi.table.timeline import Timeline


@dataclass
class ValidationReport:
    table: str
    metadata_table: bool
    partitions: int = 0
    files: int = 0
    missing: list[str] = field(default_factory=list)  # committed on storage, not in the metadata table
    extra: list[str] = field(default_factory=list)  # in the metadata table, not on storage
    size_mismatch: list[str] = field(default_factory=list)
    slices_differ: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    record_index: dict[str, Any] | None = None  # checked when the table has one
    column_stats: dict[str, Any] | None = None  # checked when the table has them

    @property
    def record_index_ok(self) -> bool:
        ri = self.record_index
        return ri is None or not (ri["missing"] or ri["extra"] or ri["wrong"] or ri.get("problem"))

    @property
    def ok(self) -> bool:
        cs = self.column_stats
        if cs is not None and (cs["missing"] or cs["wrong"] or cs["partitions_wrong"]):
            return False
        return self.record_index_ok and not (
            self.missing or self.extra or self.size_mismatch or self.slices_differ or self.problems
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "table": self.table,
            "metadata_table": self.metadata_table,
            "partitions": self.partitions,
            "files": self.files,
            "missing_in_metadata": self.missing,
            "extra_in_metadata": self.extra,
            "size_mismatch": self.size_mismatch,
            "file_slices_differ": self.slices_differ,
            "problems": self.problems,
            "column_stats": self.column_stats,
            "record_index": self.record_index,
        }


def _committed_on_storage(table: Table, tl: Timeline) -> dict[str, dict[str, int]]:
    """Data files of completed instants: completed on the timeline, or archived (older than the first instant
    of its commits timeline and not on it)."""
    completed = {i.requested_time for i in tl.completed()}
    known = {i.requested_time for i in tl}
    first = tl.commits().first()

    def committed(t: str) -> bool:
        return t in completed or (first is not None and t < first.requested_time and t not in known)

    out: dict[str, dict[str, int]] = {}
    for part, entries in StorageListing(table.storage, table.base_path).list_partition_files().items():
        files = {}
        for e in entries:
            parsed = parse_data_file_name(e.name)
            if parsed is not None and committed(parsed.instant):
                files[e.name] = e.size
        out[part] = files
    return out


def validate_table(table: Table) -> ValidationReport:
    rep = ValidationReport(table.base_path, table.has_metadata_table)
    tl = table.timeline()
    if not rep.metadata_table:
        rep.problems.append("the table has no metadata table (hoodie.table.metadata.partitions lacks 'files')")
        return rep
    on_storage = _committed_on_storage(table, tl)
    reader = MetadataTableReader(table.storage, table.base_path, data_timeline=tl, data_config=table.config)
    in_mdt = reader.all_files()
    listed = set(reader.list_partitions())
    parts = set(on_storage) | set(in_mdt)
    rep.partitions = len(parts)
    for p in sorted(parts):
        if p not in listed and on_storage.get(p):
            rep.problems.append(f"partition {p!r} is missing from __all_partitions__")
        disk, meta = on_storage.get(p, {}), in_mdt.get(p, {})
        rep.files += len(disk)
        rep.missing += [f"{p}/{n}" if p else n for n in sorted(set(disk) - set(meta))]
        rep.extra += [f"{p}/{n}" if p else n for n in sorted(set(meta) - set(disk))]
        rep.size_mismatch += [
            f"{p}/{n}: {meta[n]} in metadata, {disk[n]} on storage"
            for n in sorted(set(disk) & set(meta))
            if meta[n] != disk[n]
        ]
    a = {(s.partition, s.file_id): s.relative_paths for s in table.view(tl, use_metadata=True).latest_file_slices()}
    b = {(s.partition, s.file_id): s.relative_paths for s in table.view(tl, use_metadata=False).latest_file_slices()}
    rep.slices_differ = [f"{p}/{f}" for (p, f) in sorted(set(a) | set(b)) if a.get((p, f)) != b.get((p, f))]
    if RECORD_INDEX in table.config.metadata_partitions:
        rep.record_index = _check_record_index(table, tl, reader)
        if rep.record_index.get("problem"):
            rep.problems.append(rep.record_index["problem"])
    if COLUMN_STATS in table.config.metadata_partitions:
        rep.column_stats = _check_column_stats(table, tl, reader)
    return rep


def _check_column_stats(table: Table, tl: Any, reader: MetadataTableReader, limit: int = 20) -> dict[str, Any]:
    """Statistics of every latest file versus the file; partition statistics versus their latest files."""
    import posixpath

    from pyhudi.metadata.column_stats import (
        ColumnRange,
        column_stats_key,
        file_ranges,
        indexed_columns,
        merge_ranges,
        partition_stats_key,
    )
    from pyhudi.metadata.records import stats_sort_key
    from pyhudi.table.schema import with_meta

    schema = with_meta(table.schema())
    cols = indexed_columns(schema, max_columns=len(schema))
    slices = table.view(tl, use_metadata=True).latest_file_slices()
    names = [(s.partition, posixpath.basename(r), r) for s in slices for r in s.relative_paths]
    stored = reader.lookup(COLUMN_STATS, [column_stats_key(c, p, n) for p, n, _ in names for c in cols])
    if not stored and names:
        indexed_none = [rel for _, _, rel in names]
        return {"files": len(names), "missing": indexed_none[:limit], "wrong": [], "partitions_wrong": []}
    # the indexed columns: those any file has statistics of (a writer may have indexed fewer than all)
    indexed = {str(r.fields["ColumnStatsMetadata"]["columnName"]) for r in stored.values()}
    missing, wrong = [], []
    per_part: dict[str, dict[str, list[ColumnRange]]] = {}
    for part, name, rel in names:
        actual = {r.column: r for r in file_ranges(table.storage, posixpath.join(table.base_path, rel), schema, cols)}
        have = {c: stored[k] for c in cols if (k := column_stats_key(c, part, name)) in stored}
        missing += [f"{rel}: {c}" for c in cols if c in indexed and c in actual and c not in have]
        for c, rec in have.items():
            cs = rec.fields["ColumnStatsMetadata"]
            got = ColumnRange.from_fields(cs)
            want = actual.get(c)
            if want is not None and cs.get("valueType") is None:  # table version 8: records carry no value type
                want = replace(want, ordinal=got.ordinal, info=got.info)
            if got != want:
                wrong.append(f"{rel}: {c}")
        for c, r in actual.items():
            if c in indexed:
                per_part.setdefault(part, {}).setdefault(c, []).append(r)
    partitions_wrong = []
    if PARTITION_STATS in table.config.metadata_partitions:
        ps = reader.lookup(PARTITION_STATS, [partition_stats_key(c, p) for p in per_part for c in per_part[p]])
        for part, by_col in sorted(per_part.items()):
            for c, ranges in sorted(by_col.items()):
                prec = ps.get(partition_stats_key(c, part))
                inner = merge_ranges(ranges)
                if prec is None or inner is None or inner.min is None:
                    continue  # no statistics for the column here: readers keep the partition
                outer = ColumnRange.from_fields(prec.fields["ColumnStatsMetadata"])
                o = inner.ordinal
                if (outer.min is None or outer.max is None
                        or stats_sort_key(outer.min, o) > stats_sort_key(inner.min, o)
                        or stats_sort_key(outer.max, o) < stats_sort_key(inner.max, o)):
                    partitions_wrong.append(f"{part or '.'}: {c}")
    return {"files": len(names), "missing": missing[:limit], "wrong": wrong[:limit],
            "partitions_wrong": partitions_wrong[:limit]}


def _visible_file_groups_problem(reader: MetadataTableReader) -> str | None:
    """Why readers cannot use the listed record index as it is: no ``record_index`` partition in the metadata
    table's view, no file group in it, or file groups other than ``record-index-0000-0`` ... ``-(N-1)-0``."""
    listed = "record_index is listed in hoodie.table.metadata.partitions, but"
    if RECORD_INDEX not in reader.partitions():
        return f"{listed} the metadata table has no record_index partition (no partition metafile)"
    ids = [s.file_id for s in reader.file_slices(RECORD_INDEX)]
    if not ids:
        return f"{listed} no file group of its partition is visible in the metadata table"
    expected = [file_group_id(i) for i in range(len(ids))]
    if ids != expected:
        return (f"{listed} its visible file groups are {', '.join(ids)}, not {expected[0]} to {expected[-1]}: keys "
                "would be hashed over the wrong file groups")
    return None


def _check_record_index(table: Table, tl: Any, reader: MetadataTableReader, limit: int = 20) -> dict[str, Any]:
    """Every live key mapped to the file group that holds it, and nothing else."""
    problem = _visible_file_groups_problem(reader)
    if problem is not None:
        return {"missing": [], "extra": [], "wrong": [], "problem": problem}
    lk = RecordIndexLookup.from_reader(reader)
    from pyhudi.read import plan as read_plan
    from pyhudi.read.slice_reader import FileSliceReader

    data: dict[str, set[tuple[str, str]]] = {}
    scan = read_plan.snapshot(table, timeline=tl).project([RECORD_KEY_COL]) if tl.completed_commits() else None
    for sl in scan.slices if scan is not None else ():  # whole file slices: keys of log files count too
        keys = FileSliceReader(scan.read, sl).read().column(RECORD_KEY_COL)  # type: ignore[union-attr]
        for k in keys.to_pylist():
            data.setdefault(k, set()).add((sl.partition, sl.file_id))
    found = lk.lookup(pa.array(list(data), pa.string()))
    got = dict(zip(found.column("key").to_pylist(),
                   zip(found.column("partition").to_pylist(), found.column("file_id").to_pylist(), strict=True),
                   strict=True))
    missing = sorted(k for k in data if k not in got)
    wrong = sorted(f"{k}: index says {got[k]}, data in {sorted(data[k])[0]}"
                   for k in data if k in got and got[k] not in data[k])
    # a key inserted twice (operation insert does not look stored keys up) lives in two file groups: Hudi allows
    # it; the index names one of them
    dup = sorted(f"{k}: in {', '.join(map(str, sorted(locs)))}" for k, locs in data.items() if len(locs) > 1)
    live = set()
    for i in range(lk.num_file_groups):
        live.update(lk.live_keys(i).to_pylist())
    extra = sorted(live - set(data))
    return {
        "file_groups": lk.num_file_groups,
        "entries": len(live),
        "missing_count": len(missing),
        "extra_count": len(extra),
        "wrong_count": len(wrong),
        "missing": missing[:limit],
        "extra": extra[:limit],
        "wrong": wrong[:limit],
        "duplicate_keys_count": len(dup),
        "duplicate_keys": dup[:limit],
    }
