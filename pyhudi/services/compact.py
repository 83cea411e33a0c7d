"""Compaction of a merge-on-read data table, as Hudi 1.1 plans and runs it
(``../shared/reference/hudi-mor-and-services.md`` section 5; checked against the compaction in the
``mor_v9_txns_simple_meta`` fixture).

1. **Plan** (:func:`plan_compaction`): one ``HoodieCompactionOperation`` per latest file slice that has log files
   of completed deltacommits: ``baseInstantTime``, ``deltaFilePaths`` (log file names, in log order),
   ``dataFilePath`` (the base file name, or null for a log-only file group), ``fileId``, ``partitionPath``,
   ``metrics`` (``TOTAL_LOG_FILES``, ``TOTAL_LOG_FILES_SIZE``, ``TOTAL_IO_READ_MB``, ``TOTAL_IO_WRITE_MB``,
   ``TOTAL_IO_MB``). The plan (``version`` 2, ``preserveHoodieMetadata`` false, ``missingSchedulePartitions`` [])
   is ``<t>.compaction.requested``; no slice with log files, no plan.
2. **Execute** (:func:`execute_compaction`): ``<t>.compaction.inflight`` (empty), then one Spark task per operation
   reads the file slice merged (the same file-slice reader as every read, so the result is what readers saw) and
   writes ``<fileId>_<token>_<t>.parquet`` (its marker first). Records keep their commit time and sequence
   number; ``_hoodie_file_name`` names the new file.
3. **Complete**: the commit metadata (``operationType`` COMPACT, ``compacted`` true, one stat per new base file with
   ``prevCommit`` = the old base instant and ``prevBaseFile``) goes to the metadata table's ``files`` partition as
   its deltacommit ``t`` (no record-index change: keys stay in their file group), then ``<t>_<c>.commit``
   completes the compaction. Markers go.

The new base file starts a new file slice at ``t``: log files of deltacommits that complete after ``t`` join it
(file slices follow completion times), older slices stay readable for time travel until cleaning removes them.

A compaction that died is resumed (:func:`resume_pending_compactions`): the files its markers (or a listing) name
are deleted, its metadata-table deltacommit rolled back, and the plan runs again. Fault points:
``compaction.planned``, ``compaction.before_complete``.
"""

from __future__ import annotations

import json
import posixpath
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from pyhudi import faults
from pyhudi.io.storage import Storage
from pyhudi.spark.frames import local_frame
from pyhudi.table import markers
from pyhudi.table.commit_metadata import (
    clustering_file_groups,
    commit_metadata,
    pending_plan,
    plan_file_groups,
    write_stat,
)
from pyhudi.table.fsview import FileSystemView, StorageListing
from pyhudi.table.recorded_paths import compaction_operations
from pyhudi.table.schema import COMMIT_TIME_COL, RECORD_KEY_COL, avro_schema_json
from pyhudi.table.timeline import COMMIT, COMPACTION, DELTA_COMMIT, ActiveTimeline, Instant, State

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pyhudi.read.slice_reader import ReadSpec
    from pyhudi.table.properties import TableConfig

COMPACTION_PLAN_VERSION = 2
_MB = 1024.0 * 1024.0
STAT_SCHEMA = pa.schema([
    ("stat", pa.string()),
    # the new base file's column_stats cells (pyhudi.metadata.column_stats), when the table keeps them
    ("column_stats", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
])


def deltacommits_since_compaction(timeline: ActiveTimeline) -> int:
    """Completed deltacommits after the last completed compaction (Hudi's NUM_COMMITS trigger)."""
    done = list(timeline.completed())
    last = max((i.requested_time for i in done if i.action == COMMIT), default="")
    return sum(1 for i in done if i.action == DELTA_COMMIT and i.requested_time > last)


def plan_compaction(view: FileSystemView, instant: str,
                    busy: frozenset[tuple[str, str]] = frozenset()) -> dict[str, Any] | None:
    """The HoodieCompactionPlan of every latest file slice with log files completed before ``instant``, except
    the file groups in ``busy`` (those a pending compaction or clustering works on, as Hudi's planner leaves
    them out)."""
    ops = []
    for fs in sorted(view.latest_file_slices(), key=lambda s: (s.partition, s.file_id)):
        if (fs.partition, fs.file_id) in busy:
            continue
        logs = [lf for lf in fs.log_files if lf.completion_time is not None and lf.completion_time < instant]
        if not logs:
            continue
        log_size = float(sum(lf.size for lf in logs))
        base_size = float(fs.base_file.size) if fs.base_file is not None else 0.0
        read_mb = (base_size + log_size) / _MB
        write_mb = base_size / _MB if fs.base_file is not None else log_size / _MB
        ops.append({
            "baseInstantTime": fs.base_instant,
            "deltaFilePaths": [lf.file_name for lf in logs],
            "dataFilePath": fs.base_file.file_name if fs.base_file is not None else None,
            "fileId": fs.file_id,
            "partitionPath": fs.partition,
            "metrics": {
                "TOTAL_LOG_FILES": float(len(logs)),
                "TOTAL_IO_MB": read_mb + write_mb,
                "TOTAL_IO_READ_MB": read_mb,
                "TOTAL_LOG_FILES_SIZE": log_size,
                "TOTAL_IO_WRITE_MB": write_mb,
            },
            "bootstrapFilePath": None,
        })
    if not ops:
        return None
    return {"operations": ops, "extraMetadata": {}, "version": COMPACTION_PLAN_VERSION, "strategy": None,
            "preserveHoodieMetadata": False, "missingSchedulePartitions": []}


def schedule_compaction(timeline: ActiveTimeline, view: FileSystemView, instant: str) -> Instant | None:
    """Write ``<instant>.compaction.requested`` with the plan; None (nothing written) when no slice has logs."""
    busy = set(clustering_file_groups(timeline))
    for pending in timeline.pending().by_action(COMPACTION):
        busy |= plan_file_groups(pending_plan(timeline, pending))
    plan = plan_compaction(view, instant, frozenset(busy))
    if plan is None:
        return None
    inst = timeline.create_requested(COMPACTION, instant, plan)
    faults.at("compaction.planned")
    return inst


def _compact_task(spec: ReadSpec, instant: str, parquet_options: dict[str, str], fault: str | None,
                  stats_columns: tuple[str, ...] | None = None):
    """mapInArrow: one row per compaction operation (JSON) -> one row per new base file (its write stat, JSON)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyhudi.read.slice_reader import FileSliceReader, SliceSpec
        from pyhudi.spark.task import task_ids
        from pyhudi.table import base_file, filenames

        for b in batches:
            for raw in b.column(0).to_pylist():
                t0 = time.monotonic()
                op = json.loads(raw)
                part, fid = op["partitionPath"] or "", op["fileId"]

                def rel(name: str, part: str = part) -> str:
                    return posixpath.join(part, name) if part else name

                base = rel(op["dataFilePath"]) if op["dataFilePath"] else None
                logs = tuple(rel(n) for n in op["deltaFilePaths"])
                # the slice's size, as the plan gives it (0: unknown), chooses how it is read
                size = int(float((op.get("metrics") or {}).get("TOTAL_IO_READ_MB") or 0.0) * (1 << 20))
                merged = FileSliceReader(spec, SliceSpec(part, fid, base, logs, size)).read()
                part_id, token = task_ids()
                name = filenames.make_base_file_name(fid, token, instant)
                markers.create_marker(spec.storage, spec.base_path, instant, part, name,
                                      markers.IOType.MERGE if base else markers.IOType.CREATE)
                written = base_file.write_base_file(
                    spec.storage, posixpath.join(spec.base_path, rel(name)), merged, instant_time=instant,
                    partition_path=part, task_partition_id=part_id, options=parquet_options,
                )
                deletes = 0
                if base is not None:  # the base file's keys the new one does not have
                    stored = pc.unique(base_file.read_base_file(spec.storage, posixpath.join(spec.base_path, base),
                                                                columns=[RECORD_KEY_COL]).column(RECORD_KEY_COL))
                    kept = pc.is_in(stored, value_set=merged.column(RECORD_KEY_COL).combine_chunks())
                    deletes = len(stored) - int(pc.sum(kept).as_py() or 0)
                commit_times = merged.column(COMMIT_TIME_COL)
                from_logs = int(pc.sum(pc.greater(commit_times, pa.scalar(op["baseInstantTime"], commit_times.type)))
                                .as_py() or 0)
                log_size = int(op["metrics"].get("TOTAL_LOG_FILES_SIZE", 0))
                stat = write_stat(
                    file_id=fid, path=rel(name), partition=part,
                    prev_commit=op["baseInstantTime"] if base else "null",
                    num_writes=written.num_rows, num_deletes=deletes, num_update_writes=from_logs,
                    size=written.size_bytes, prev_base_file=op["dataFilePath"],
                    runtime={"totalScanTime": 0, "totalCreateTime": 0,
                             "totalUpsertTime": int((time.monotonic() - t0) * 1000)},
                )
                stat.update({"totalLogFilesCompacted": len(logs), "totalLogSizeCompacted": log_size,
                             "totalUpdatedRecordsCompacted": from_logs})
                faults.at("after_write", fault or "")
                from pyhudi.metadata.column_stats import written_file_cells

                cells = written_file_cells(part, written, stats_columns)
                yield pa.RecordBatch.from_pylist([{"stat": json.dumps(stat), "column_stats": cells}],
                                                 schema=STAT_SCHEMA)

    return run


def execute_compaction(
    spark: SparkSession,
    storage: Storage,
    base_path: str,
    config: TableConfig,
    timeline: ActiveTimeline,
    instant: str,
    *,
    parquet_options: dict[str, str],
    parallelism: int,
    on_commit: Any = None,
    completion_time: Any = None,
    fault: str | None = None,
    stats_columns: tuple[str, ...] | None = None,
) -> Instant:
    """Run the requested compaction ``instant`` and complete it (see the module docstring). ``config``: the data
    table's properties; ``on_commit(instant, metadata, column_stats)`` applies the metadata table's deltacommit
    before the instant completes (``column_stats``: the cells of the new base files' statistics of
    ``stats_columns``, computed in the tasks); ``completion_time(timeline)`` gives its completion time."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from pyhudi.read import plan as read_plan
    from pyhudi.spark.errors import task_errors

    plan = timeline.read_plan(COMPACTION, instant)
    requested = Instant(instant, COMPACTION, State.REQUESTED)
    ops = compaction_operations(plan, timeline.path_of(requested))  # checked before anything is written
    inflight_path = timeline.path_of(Instant(instant, COMPACTION, State.INFLIGHT))
    inflight = (Instant(instant, COMPACTION, State.INFLIGHT) if storage.exists(inflight_path)
                else timeline.transition_to_inflight(requested, None))
    # the log blocks of the deltacommits completed when the compaction was planned (all before it)
    table = read_plan.TableFiles(storage, base_path, config)
    spec = read_plan._spec(table, timeline)
    rows = [(json.dumps(op),) for op in ops]
    stats: list[dict[str, Any]] = []
    if rows:
        df = local_frame(spark, rows, "op string").repartition(max(1, min(len(rows), parallelism)))
        with task_errors():
            out = df.mapInArrow(_compact_task(spec, instant, parquet_options, fault, stats_columns),
                                from_arrow_schema(STAT_SCHEMA)).collect()
        stats = [json.loads(r[0]) for r in out]
        cells = [c.asDict() for r in out for c in (r[1] or ())]
    else:
        cells = []
    by_part: dict[str, list[dict[str, Any]]] = {}
    for s in sorted(stats, key=lambda s: (s["partitionPath"], s["fileId"])):
        by_part.setdefault(s["partitionPath"], []).append(s)
    metadata = commit_metadata(by_part, "COMPACT", schema=avro_schema_json(table.schema(), config.table_name),
                               compacted=True)
    if on_commit is not None:
        on_commit(instant, metadata, cells)
    markers.reconcile_against_markers(storage, base_path, instant, metadata)
    faults.at("compaction.before_complete", fault)
    now = timeline.reload()
    done = now.complete(inflight, metadata, completion_time(now))
    markers.delete_markers(storage, base_path, instant)
    return done


def delete_attempt_files(storage: Storage, base_path: str, instant: str) -> list[str]:
    """Delete the base files a died attempt of compaction ``instant`` wrote (named by its markers, else every
    ``*_<instant>.parquet`` of a listing) and its markers."""
    from pyhudi.table.filenames import BaseFileName, parse_data_file_name

    storage = storage.rooted(base_path)
    gone = []
    marked = markers.list_marked_files(storage, base_path, instant)
    names = [(p, n) for p, n, _ in marked]
    if not marked:
        for part, entries in StorageListing(storage, base_path).list_partition_files().items():
            for e in entries:
                parsed = parse_data_file_name(e.name)
                if isinstance(parsed, BaseFileName) and parsed.instant == instant:
                    names.append((part, e.name))
    for part, name in names:
        path = posixpath.join(base_path, part, name) if part else posixpath.join(base_path, name)
        storage.delete(path, missing_ok=True, dirs=False)
        gone.append(path)
    markers.delete_markers(storage, base_path, instant)
    return gone
