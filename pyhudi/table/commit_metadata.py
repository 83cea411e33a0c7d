"""The records of a commit's metadata as Hudi 1.1 writes them: ``HoodieWriteStat`` (one per file written, or a
workload-profile entry) and ``HoodieCommitMetadata``. Every writer (data files, log files, the metadata table,
compaction) builds them here."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyhudi.table.timeline import ActiveTimeline, Instant

NULL_COMMIT = "null"  # prevCommit of a newly created file group, as Hudi writes it
#: extraMetadata key of Hudi's streaming sink: JSON ``{"<identifier>": "<batch id>"}``
STREAMING_CHECKPOINT_KEY = "_hudi_streaming_sink_checkpoint"
FileGroupKey = tuple[str, str]  # (partition path, file id)


def write_stat(
    *,
    file_id: str,
    path: str | None,
    partition: str | None,
    prev_commit: str = NULL_COMMIT,
    num_writes: int = 0,
    num_inserts: int = 0,
    num_update_writes: int = 0,
    num_deletes: int = 0,
    size: int = 0,
    prev_base_file: str | None = None,
    log_version: int | None = None,
    log_offset: int | None = None,
    base_file: str | None = None,
    log_files: Sequence[str] | None = None,
    runtime: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """One ``HoodieWriteStat`` record (every field of Hudi 1.1's schema, in its order)."""
    return {
        "fileId": file_id,
        "path": path,
        "prevCommit": prev_commit,
        "numWrites": num_writes,
        "numDeletes": num_deletes,
        "numUpdateWrites": num_update_writes,
        "totalWriteBytes": size,
        "totalWriteErrors": 0,
        "partitionPath": partition,
        "totalLogRecords": 0,
        "totalLogFiles": None,
        "totalUpdatedRecordsCompacted": 0,
        "numInserts": num_inserts,
        "totalLogBlocks": 0,
        "totalCorruptLogBlock": 0,
        "totalRollbackBlocks": 0,
        "fileSizeInBytes": size,
        "logVersion": log_version,
        "logOffset": log_offset,
        "baseFile": base_file,
        "logFiles": list(log_files) if log_files is not None else None,
        "cdcStats": None,
        "prevBaseFile": prev_base_file,
        "minEventTime": None,
        "maxEventTime": None,
        "runtimeStats": dict(runtime) if runtime is not None else None,
        "totalLogFilesCompacted": 0,
        "totalLogReadTimeMs": 0,
        "totalLogSizeCompacted": 0,
        "tempPath": None,
        "numUpdates": 0,
    }


def log_write_stat(
    *, file_id: str, path: str, partition: str, instant: str, num_writes: int, num_inserts: int = 0,
    num_update_writes: int | None = None, num_deletes: int = 0, size: int, log_version: int = 1, log_offset: int = 0,
) -> dict[str, Any]:
    """The stat of a log file written by a deltacommit (table version 8+: ``prevCommit`` is the deltacommit
    itself, ``baseFile`` empty, ``logFiles`` this file)."""
    return write_stat(
        file_id=file_id, path=path, partition=partition, prev_commit=instant, num_writes=num_writes,
        num_inserts=num_inserts, num_update_writes=num_writes if num_update_writes is None else num_update_writes,
        num_deletes=num_deletes, size=size, log_version=log_version, log_offset=log_offset, base_file="",
        log_files=[posixpath.basename(path)], runtime={"totalScanTime": 0, "totalCreateTime": 0, "totalUpsertTime": 0},
    )


def commit_metadata(
    stats: Mapping[str, Sequence[Mapping[str, Any]]],
    operation: str | None,
    *,
    schema: str | None = None,
    compacted: bool = False,
    extra: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A ``HoodieCommitMetadata`` record: write stats by partition, the operation, the writer schema in
    ``extraMetadata``."""
    md: dict[str, str] = {}
    if schema is not None:
        md["schema"] = schema
    md.update(extra or {})
    return {
        "partitionToWriteStats": {p: list(s) for p, s in stats.items()},
        "compacted": compacted,
        "extraMetadata": md,
        "version": None,
        "operationType": operation,
    }


def streaming_checkpoint(extra_metadata: Mapping[str, Any] | None, identifier: str) -> int | None:
    """The batch id a commit's extra metadata records for the stream ``identifier`` (None: none). A record that
    cannot be read raises ValueError: taken for none, an older commit's batch would be taken for the stream's
    last, and a replayed batch written twice."""
    import json

    raw = (extra_metadata or {}).get(STREAMING_CHECKPOINT_KEY)
    if not raw:
        return None
    try:
        value = json.loads(raw).get(identifier)
        if value is None:
            return None
        batch = int(str(value).strip())
    except (ValueError, AttributeError, TypeError) as e:
        raise ValueError(f"{STREAMING_CHECKPOINT_KEY} {raw!r} holds no batch id of stream {identifier!r}") from e
    if batch < 0:
        raise ValueError(f"{STREAMING_CHECKPOINT_KEY} {raw!r} holds batch id {batch} for stream {identifier!r}")
    return batch


def touched_file_groups(metadata: Mapping[str, Any]) -> set[FileGroupKey]:
    """The file groups a commit (or an inflight workload profile, or a replace) wrote or replaced."""
    out: set[FileGroupKey] = set()
    for part, stats in (metadata.get("partitionToWriteStats") or {}).items():
        for st in stats or ():
            fid = st.get("fileId")
            if fid:
                out.add((str(part), str(fid)))
    for part, ids in (metadata.get("partitionToReplaceFileIds") or {}).items():
        out.update((str(part), str(f)) for f in ids or ())
    return out


def plan_file_groups(plan: Mapping[str, Any] | None) -> set[FileGroupKey]:
    """The file groups of a compaction plan (operations) or a clustering plan (input groups)."""
    out: set[FileGroupKey] = set()
    if not plan:
        return out
    for op in plan.get("operations") or ():
        out.add((str(op.get("partitionPath") or ""), str(op.get("fileId"))))
    clustering = plan.get("clusteringPlan") or {}
    for group in clustering.get("inputGroups") or ():
        for sl in group.get("slices") or ():
            out.add((str(sl.get("partitionPath") or ""), str(sl.get("fileId"))))
    return out


def pending_plan(timeline: ActiveTimeline, instant: Instant) -> dict[str, Any] | None:
    """The plan of a pending compaction or clustering (or a replacecommit's requested metadata): its requested
    file, which stays while the instant is inflight (Apache Hudi 1.x leaves the inflight file empty)."""
    from pyhudi.table.timeline import Instant, State

    return timeline.read_content(Instant(instant.requested_time, instant.action, State.REQUESTED))


def clustering_file_groups(timeline: ActiveTimeline) -> dict[FileGroupKey, str]:
    """The file groups that a pending clustering (a Java writer's) will replace: its plan's input groups -> the
    clustering's instant time. Hudi's writers refuse to update them (``SparkRejectUpdateStrategy``, the default)
    and leave them out of the small files inserts go to: the clustering rewrites the slices its plan names, so a
    later slice would be replaced with it, and its records lost."""
    from pyhudi.table.timeline import CLUSTERING, REPLACE_COMMIT

    out: dict[FileGroupKey, str] = {}
    for inst in timeline.pending().by_action(CLUSTERING, REPLACE_COMMIT):
        plan = pending_plan(timeline, inst)
        if plan is None or not plan.get("clusteringPlan"):
            continue  # a replacecommit of an overwrite (a write, which conflict detection compares)
        for group in sorted(plan_file_groups(plan)):
            out.setdefault(group, inst.requested_time)
    return out
