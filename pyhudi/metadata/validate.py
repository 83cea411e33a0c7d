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

import pickle
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.metadata.partitions import COLUMN_STATS, PARTITION_STATS
from pyhudi.metadata.reader import RECORD_INDEX, MetadataTableReader
from pyhudi.metadata.record_index import (
    RecordIndexLookup,
    decode_locations,
    file_group_id,
    file_groups_of,
    merged_parts,
)
from pyhudi.spark.frames import local_frame
from pyhudi.table.filenames import parse_data_file_name
from pyhudi.table.fsview import StorageListing
from pyhudi.table.schema import RECORD_KEY_COL
from pyhudi.table.table import Table
from pyhudi.table.timeline import CLEAN, Timeline


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


def validate_table(table: Table, spark: Any = None) -> ValidationReport:
    """Check ``table``'s metadata table (see the module docstring); with ``spark``, the record index is checked in
    Spark tasks (nothing proportional to the table's rows on the driver)."""
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
    pending_cleans = [i.requested_time for i in tl.pending().by_action(CLEAN)] if rep.extra else []
    if pending_cleans:  # a clean that stopped after deleting files: the files partition lists them until it completes
        rep.problems.append(
            f"the clean {', '.join(pending_cleans)} is not complete: the metadata table lists the files it deleted "
            "(extra_in_metadata) until it completes; the next write, or `pyhudi clean`, completes it")
    a = {(s.partition, s.file_id): s.relative_paths for s in table.view(tl, use_metadata=True).latest_file_slices()}
    b = {(s.partition, s.file_id): s.relative_paths for s in table.view(tl, use_metadata=False).latest_file_slices()}
    rep.slices_differ = [f"{p}/{f}" for (p, f) in sorted(set(a) | set(b)) if a.get((p, f)) != b.get((p, f))]
    if RECORD_INDEX in table.config.metadata_partitions:
        rep.record_index = _check_record_index(table, tl, reader, spark=spark)
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


#: ``pyhudi validate`` checks the record index in Spark tasks (never holding the table's keys on the driver) when
#: its files take at least this many bytes (about 3M keys), on the driver otherwise (no Spark session to start)
SPARK_CHECK_MIN_INDEX_BYTES = 64 << 20

_SAMPLE_KINDS = ("missing", "extra", "wrong", "duplicate_keys")


def _unique_sorted(arr: pa.Array | pa.ChunkedArray, limit: int) -> list[str]:
    return sorted(pc.unique(arr).to_pylist())[:limit]


def check_file_group(lk: RecordIndexLookup, fg: int, data: pa.Table, limit: int) -> dict[str, Any]:
    """Compare record-index file group ``fg`` with the data's keys routed to it (``data``: key, partition,
    file_id; one row per key and file slice holding it): keys it lacks (missing), keys no file slice holds
    (extra), keys mapped to a file group that does not hold them (wrong), and keys held by two file groups
    (inserted twice: Hudi allows it; the index names one of them). Counts, and the first ``limit`` of each in key
    order."""
    base, logs = lk.slices[fg]
    parts = merged_parts(lk.storage, base, logs, lk.block_filter)
    keys = pa.chunked_array([k for k, _ in parts], pa.binary())
    locs = decode_locations(pa.chunked_array([v for _, v in parts], pa.binary()))
    idx = pa.table({"key": keys.cast(pa.string()), "ipart": locs.column("partition"),
                    "ifid": locs.column("file_id")})
    data = data.select(["key", "partition", "file_id"])
    data = data.filter(pc.is_valid(data.column("key"))).group_by(["key", "partition", "file_id"]).aggregate([])
    per_key = data.group_by("key").aggregate([("file_id", "count")])
    dup_keys = per_key.filter(pc.greater(per_key.column("file_id_count"), 1)).column("key")
    j = data.join(idx, "key", join_type="full outer")
    in_data, in_index = pc.is_valid(j.column("partition")), pc.is_valid(j.column("ipart"))
    missing = pc.unique(j.filter(pc.and_(in_data, pc.invert(in_index))).column("key"))
    extra = j.filter(pc.invert(in_data)).column("key")
    both = j.filter(pc.and_(in_data, in_index))
    both = both.append_column("hit", pc.and_(pc.equal(both.column("partition"), both.column("ipart")),
                                             pc.equal(both.column("file_id"), both.column("ifid"))))
    hits = both.group_by("key").aggregate([("hit", "any")])
    wrong = hits.filter(pc.invert(hits.column("hit_any"))).column("key")

    def held(sample: list[str]) -> dict[str, list[tuple[str, str]]]:
        """The (partition, file id) of the file slices holding each of the ``sample`` keys."""
        rows = data.filter(pc.is_in(data.column("key"), pa.array(sample, pa.string())))
        out: dict[str, list[tuple[str, str]]] = {}
        for k, p, f in zip(*(rows.column(c).to_pylist() for c in ("key", "partition", "file_id")), strict=True):
            out.setdefault(k, []).append((p, f))
        return out

    wrong_keys = _unique_sorted(wrong, limit)
    ilocs = dict(zip(wrong_keys, idx.filter(pc.is_in(idx.column("key"), pa.array(wrong_keys, pa.string())))
                     .sort_by("key").select(["ipart", "ifid"]).to_pylist(), strict=True)) if wrong_keys else {}
    wrong_held = held(wrong_keys)
    dup_sample = _unique_sorted(dup_keys, limit)
    dup_locs = held(dup_sample)
    return {
        "fg": fg,
        "entries": len(idx),
        "missing_count": len(missing),
        "extra_count": len(extra),
        "wrong_count": len(wrong),
        "duplicate_keys_count": len(dup_keys),
        "missing": _unique_sorted(missing, limit),
        "extra": _unique_sorted(extra, limit),
        "wrong": [f"{k}: index says {(ilocs[k]['ipart'], ilocs[k]['ifid'])}, data in {sorted(wrong_held[k])[0]}"
                  for k in wrong_keys],
        "duplicate_keys": [f"{k}: in {', '.join(map(str, sorted(dup_locs[k])))}" for k in dup_sample],
        # the keys of the samples above, in the same order: groups' samples are merged by key
        "sample_keys": {"missing": None, "extra": None, "wrong": wrong_keys, "duplicate_keys": dup_sample},
    }


def _merge_checks(groups: list[dict[str, Any]], num_file_groups: int, limit: int) -> dict[str, Any]:
    out: dict[str, Any] = {"file_groups": num_file_groups,
                           "entries": sum(g["entries"] for g in groups)}
    for kind in _SAMPLE_KINDS:
        out[f"{kind}_count"] = sum(g[f"{kind}_count"] for g in groups)
        keyed = [(k, x) for g in groups
                 for k, x in zip(g["sample_keys"][kind] or g[kind], g[kind], strict=True)]
        out[kind] = [x for _, x in sorted(keyed)[:limit]]  # in key order, as the Spark check takes them
    return out


def _keys_plan(table: Table, tl: Any) -> Any:
    from pyhudi.read import plan as read_plan

    return read_plan.snapshot(table, timeline=tl).project([RECORD_KEY_COL]) if tl.completed_commits() else None


def _check_groups_here(table: Table, tl: Any, lk: RecordIndexLookup, limit: int) -> list[dict[str, Any]]:
    """The data's keys read on the driver (Arrow arrays: about 50 bytes a key), then each file group checked."""
    from pyhudi.read.slice_reader import FileSliceReader

    scan = _keys_plan(table, tl)
    slices = scan.slices if scan is not None else []
    key_chunks: list[pa.Array] = []
    owner: list[np.ndarray] = []
    for i, sl in enumerate(slices):  # whole file slices: keys of log files count too
        keys = FileSliceReader(scan.read, sl).read().column(RECORD_KEY_COL).combine_chunks().cast(pa.string())
        key_chunks.append(keys)
        owner.append(np.full(len(keys), i, np.int32))
    keys = pa.chunked_array(key_chunks, pa.string())  # chunked: the keys may pass 2 GiB of string data
    of = np.concatenate(owner) if owner else np.zeros(0, np.int32)
    parts = pa.array([sl.partition for sl in slices], pa.string())
    fids = pa.array([sl.file_id for sl in slices], pa.string())
    fgs = file_groups_of(keys, lk.num_file_groups)
    order = np.argsort(fgs, kind="stable")
    bounds = np.searchsorted(fgs[order], np.arange(lk.num_file_groups + 1))
    out = []
    for g in range(lk.num_file_groups):
        rows = order[bounds[g]:bounds[g + 1]]
        data = pa.table({"key": keys.take(rows), "partition": parts.take(of[rows]), "file_id": fids.take(of[rows])})
        out.append(check_file_group(lk, g, data, limit))
    return out


def _check_in_spark(spark: Any, table: Table, tl: Any, lk: RecordIndexLookup, limit: int) -> dict[str, Any]:
    """The check as Spark jobs: tasks read the data's keys (one file slice at a time) and the index's live keys
    (one file group at a time), each key with a number for its location; Spark joins them on the key and counts
    (its shuffles and sorts spill to disk). Only the counts, and the first ``limit`` keys of each kind of
    problem, come back to the driver."""
    from pyspark.sql import functions as F

    from pyhudi.metadata.record_index import slices_frame
    from pyhudi.read.slice_reader import FileSliceReader

    scan = _keys_plan(table, tl)
    slices = sorted(scan.slices if scan is not None else [], key=lambda s: (s.partition, s.file_id))
    locs = [(s.partition, s.file_id) for s in slices]  # location numbers in order: the smallest is the first
    loc_ids = {loc: i for i, loc in enumerate(locs)}
    spec = scan.read if scan is not None else None
    n = lk.num_file_groups
    parallelism = spark.sparkContext.defaultParallelism
    batch_rows = 100_000

    def data_keys(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for raw in b.column(0).to_pylist():
                i, sl = pickle.loads(raw)
                assert spec is not None
                keys = FileSliceReader(spec, sl).read().column(RECORD_KEY_COL).combine_chunks().cast(pa.string())
                keys = keys.filter(pc.is_valid(keys))
                yield pa.record_batch([keys, pa.array(file_groups_of(keys, n).astype(np.int32)),
                                       pa.array(np.full(len(keys), i, np.int32))], names=["key", "fg", "loc"])

    def index_keys(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for g in b.column(0).to_pylist():
                base, logs = lk.slices[g]
                for keys, values in merged_parts(lk.storage, base, logs, lk.block_filter):
                    enc = pc.dictionary_encode(values)
                    dec = decode_locations(enc.dictionary)
                    ids = [loc_ids.get(loc, -1) for loc in zip(dec.column("partition").to_pylist(),
                                                              dec.column("file_id").to_pylist(), strict=True)]
                    iloc = pa.array(ids, pa.int32()).take(enc.indices)
                    fg = pa.array(np.full(len(keys), g, np.int32))
                    for off in range(0, len(keys), batch_rows):
                        yield pa.record_batch([keys.slice(off, batch_rows).cast(pa.string()), fg.slice(off, batch_rows),
                                               iloc.slice(off, batch_rows)], names=["key", "fg", "iloc"])

    data_schema = "key string, fg int, loc int"
    data = (slices_frame(spark, list(enumerate(slices)), parallelism).mapInArrow(data_keys, data_schema)
            if slices else local_frame(spark, [], data_schema))
    index = local_frame(spark, [(g,) for g in range(n)], "fg int").repartition(max(1, min(n, parallelism)))
    index = index.mapInArrow(index_keys, "key string, fg int, iloc int")
    # joined on the key and its file group: an entry in a file group other than the one its key hashes to is
    # one lookups never read (missing there, extra where it is), as the check on the driver finds it
    per_key = data.join(index, ["key", "fg"], "full_outer").groupBy("key", "fg").agg(
        F.min("loc").alias("loc0"), F.max("loc").alias("loc1"), F.max("iloc").alias("iloc"),
        F.max((F.col("loc") == F.col("iloc")).cast("int")).alias("hit"))
    in_data, in_index = F.col("loc0").isNotNull(), F.col("iloc").isNotNull()
    kinds = {
        "missing": in_data & ~in_index,
        "extra": ~in_data,
        "wrong": in_data & in_index & (F.col("hit") == 0),
        "duplicate_keys": F.col("loc0") != F.col("loc1"),
    }
    counts = per_key.select(F.count(F.when(in_index, 1)).alias("entries"),
                            *[F.count(F.when(c, 1)).alias(k) for k, c in kinds.items()]).first()
    assert counts is not None
    out: dict[str, Any] = {"file_groups": n, "entries": int(counts["entries"])}
    for kind, cond in kinds.items():
        out[f"{kind}_count"] = int(counts[kind])
        out[kind] = []
        if not counts[kind] or limit <= 0:
            continue
        rows = per_key.where(cond).select("key", "loc0", "iloc").orderBy("key").limit(limit).collect()
        keys = [r["key"] for r in rows]
        if kind == "wrong":
            unknown = [r["key"] for r in rows if r["iloc"] < 0]
            found = lk.lookup(unknown) if unknown else None
            named = ({} if found is None else
                     {k: (p, f) for k, p, f in zip(*(found.column(c).to_pylist()
                                                    for c in ("key", "partition", "file_id")), strict=True)})
            out[kind] = [f"{r['key']}: index says {locs[r['iloc']] if r['iloc'] >= 0 else named.get(r['key'])}, "
                         f"data in {locs[r['loc0']]}" for r in rows]
        elif kind == "duplicate_keys":
            held: dict[str, set[int]] = {}
            for r in data.where(F.col("key").isin(keys)).select("key", "loc").distinct().collect():
                held.setdefault(r["key"], set()).add(r["loc"])
            out[kind] = [f"{k}: in {', '.join(str(locs[i]) for i in sorted(held[k]))}" for k in keys]
        else:
            out[kind] = keys
    return out


def record_index_bytes(table: Table) -> int:
    """Bytes of the latest file slices of ``table``'s record index (0 without one)."""
    if RECORD_INDEX not in table.config.metadata_partitions or not table.has_metadata_table:
        return 0
    reader = MetadataTableReader(table.storage, table.base_path, data_timeline=table.timeline(),
                                 data_config=table.config)
    if RECORD_INDEX not in reader.partitions():
        return 0
    return RecordIndexLookup.from_reader(reader).file_bytes


def _check_record_index(table: Table, tl: Any, reader: MetadataTableReader, limit: int = 20,
                        spark: Any = None) -> dict[str, Any]:
    """Every live key mapped to the file group that holds it, and nothing else (in Spark tasks with ``spark``)."""
    problem = _visible_file_groups_problem(reader)
    if problem is not None:
        return {"missing": [], "extra": [], "wrong": [], "problem": problem}
    lk = RecordIndexLookup.from_reader(reader)
    if spark is not None:
        return _check_in_spark(spark, table, tl, lk, limit)
    return _merge_checks(_check_groups_here(table, tl, lk, limit), lk.num_file_groups, limit)
