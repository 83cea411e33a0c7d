"""Cleaning with Hudi's KEEP_LATEST_COMMITS policy (``hoodie.cleaner.policy``), as Hudi 1.x plans and runs it.

Configs: ``hoodie.clean.automatic`` (default true: the writer cleans after each commit),
``hoodie.cleaner.policy`` = KEEP_LATEST_COMMITS, ``hoodie.cleaner.commits.retained`` (default 10).

Planning (apache/hudi ``CleanerUtils.getEarliestCommitToRetain``, ``CleanPlanner``, ``CleanPlanActionExecutor``):

- Commits timeline = commit, deltacommit, replacecommit, clustering, compaction, logcompaction instants. With more
  than ``retained`` completed ones, the earliest commit to retain is the ``(n - retained)``-th completed one
  (0-based), but never later than the earliest pending commit (then: the last completed one before it).
- Per file group (excluding replaced ones): keep the latest file slice, the latest slice *before* the earliest
  retained commit (what a query as of that commit reads) and every later slice; delete the base and log files of
  every other slice older than the earliest retained commit.
- File groups replaced by a completed replacecommit (insert overwrite, clustering) older than the earliest
  retained commit lose all their files.
- Savepoints: a file slice holding a file that a completed savepoint names (``HoodieSavepointMetadata``
  ``partitionMetadata[p].savepointDataFile``, a base or log file name; a Java writer's savepoint) is never cleaned,
  replaced or not: a restore to the savepoint reads it. The plan's ``extraMetadata`` records the savepoints it
  honoured as ``savepointed_timestamps`` (comma-separated; Hudi records them for partitioned tables only, pyhudi
  on every table), which archival reads.
- Only files of completed instants (or of instants older than the active timeline) are considered.
- No plan, no instant, when there is nothing to delete.

Timeline files: ``<t>.clean.requested`` = HoodieCleanerPlan (``earliestInstantToRetain`` {timestamp, action,
state "COMPLETED"}, ``lastCompletedCommitTimestamp`` = requested time of the last completed commit, ``policy``,
``filesToBeDeletedPerPartition`` = {} (deprecated), ``version`` 2, ``filePathsToBeDeletedPerPartition`` = {partition:
[{filePath: full path, isBootstrapBaseFile: false}]}, ``partitionsToBeDeleted`` = [], ``extraMetadata`` = {});
``<t>.clean.inflight`` empty (Hudi 1.1 no longer copies the plan); ``<t>_<c>.clean`` = HoodieCleanMetadata
version 2 (per partition: ``deletePathPatterns``, ``successDeleteFiles``, ``failedDeleteFiles`` as *file names*; a
file already gone counts as failed, as in Hudi; ``bootstrapPartitionMetadata`` = {}, ``extraMetadata`` from the plan).

A pending clean (crash mid-way, or a delete the storage refused: the clean then fails, as Hudi's does, and
stays pending) is completed by the next :func:`clean` call before a new one is planned.

File groups and slices come from :class:`~pyhudi.table.fsview.FileSystemView` (a storage listing, every file
group including replaced ones), so a log file belongs to the slice its completion time puts it in (an archived
deltacommit's read from the LSM timeline).
"""

from __future__ import annotations

import posixpath
import time
from collections.abc import Callable, Mapping
from typing import Any

from pyhudi import faults
from pyhudi.errors import PyHudiError, StorageError, UnsafePathError
from pyhudi.io.storage import Storage
from pyhudi.services.rollback import TimeSource, next_time
from pyhudi.table.fsview import FileSystemView, StorageListing
from pyhudi.table.lsm_timeline import ArchivedCompletionTimes
from pyhudi.table.properties import METAFOLDER, read_table_config
from pyhudi.table.recorded_paths import clean_targets
from pyhudi.table.timeline import (
    CLEAN,
    CLUSTERING,
    REPLACE_COMMIT,
    SAVEPOINT,
    ActiveTimeline,
    Instant,
    InstantTimeGenerator,
    State,
    Timeline,
)

#: called with (clean instant time, {partition: [file names]}) before the files are deleted
OnDelete = Callable[[str, Mapping[str, list[str]]], None]

KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
DEFAULT_COMMITS_RETAINED = 10
CLEAN_PLAN_VERSION = 2
CLEAN_METADATA_VERSION = 2
#: a clean plan's ``extraMetadata`` key: the savepoints it honoured, comma-separated (``CleanPlanner``)
SAVEPOINTED_TIMESTAMPS = "savepointed_timestamps"


# -- planning ---------------------------------------------------------------------------------------------------
def earliest_commit_to_retain(timeline: Timeline, retained: int) -> Instant | None:
    commits = timeline.commits()
    completed = list(commits.completed())
    if retained < 1:
        raise PyHudiError(f"hoodie.cleaner.commits.retained must be >= 1, not {retained}")
    if len(completed) <= retained:
        return None
    nth = completed[len(completed) - retained]
    pending = commits.pending().first()
    if pending is not None and nth.requested_time > pending.requested_time:
        before = [i for i in completed if i.requested_time < pending.requested_time]
        return before[-1] if before else None
    return nth


def _replaced_file_ids(timeline: ActiveTimeline, before: str) -> dict[str, set[str]]:
    """partition -> file ids replaced by completed replacecommits requested before ``before``."""
    out: dict[str, set[str]] = {}
    for inst in timeline.completed().by_action(REPLACE_COMMIT, CLUSTERING):
        if inst.requested_time >= before:
            continue
        meta = timeline.read_content(inst) or {}
        for p, ids in (meta.get("partitionToReplaceFileIds") or {}).items():
            out.setdefault(p, set()).update(ids)
    return out


def _all_replaced_file_ids(timeline: ActiveTimeline) -> dict[str, set[str]]:
    return _replaced_file_ids(timeline, "9" * 20)


def savepointed_files(timeline: ActiveTimeline) -> tuple[list[str], frozenset[str]]:
    """The completed savepoints' times and every file name they name (``CleanPlanner.getSavepointedDataFiles``)."""
    times: list[str] = []
    names: set[str] = set()
    for inst in timeline.completed().by_action(SAVEPOINT):
        meta = timeline.read_completed(inst, SAVEPOINT)
        times.append(inst.requested_time)
        for part in (meta.get("partitionMetadata") or {}).values():
            names.update(part.get("savepointDataFile") or ())
    return times, frozenset(names)


def plan_clean(
    storage: Storage, base_path: str, timeline: ActiveTimeline, retained: int = DEFAULT_COMMITS_RETAINED
) -> dict[str, Any] | None:
    """The HoodieCleanerPlan for the table now, or None when there is nothing to delete."""
    storage = storage.rooted(base_path)
    earliest = earliest_commit_to_retain(timeline, retained)
    if earliest is None:
        return None
    e = earliest.requested_time
    replaced_old = _replaced_file_ids(timeline, e)
    replaced_any = _all_replaced_file_ids(timeline)
    savepoints, kept = savepointed_files(timeline)
    to_delete: dict[str, list[dict[str, Any]]] = {}
    files = StorageListing(storage, base_path).list_partition_files()
    # every file group, replaced ones included; a log file of an archived deltacommit is placed by its archived
    # completion time (a wrong slice would delete a log file a retained slice still reads); a file named with an
    # instant older than the active timeline that the archived timeline does not hold is no file version (a
    # rolled-back writer's leftover; unless older than all the archived timeline covers): taken for the latest,
    # it would doom the committed version before it
    archived = ArchivedCompletionTimes(storage, base_path)
    view = FileSystemView.build(files, timeline.commits(), archived=archived, table=base_path,
                                verify_archived=archived)
    for partition in view.partitions():
        doomed: list[str] = []
        for fg in view.file_groups(partition):
            slices = list(reversed(fg.slices))  # latest first
            # a slice holding a savepointed file stays whole
            unsaved = [s for s in slices if not kept.intersection(map(posixpath.basename, s.relative_paths))]
            if fg.file_id in replaced_old.get(partition, set()):
                doomed.extend(rel for s in unsaved for rel in s.relative_paths)
                continue
            if fg.file_id in replaced_any.get(partition, set()) or not slices:
                continue
            last_version = slices[0].base_instant
            before = next((s.base_instant for s in slices if s.base_instant < e), None)
            for s in unsaved:
                if s.base_instant in (last_version, before):
                    continue
                if s.base_instant < e:
                    doomed.extend(s.relative_paths)
        if doomed:
            to_delete[partition] = [
                {"filePath": storage.uri(posixpath.join(base_path, rel)), "isBootstrapBaseFile": False}
                for rel in sorted(doomed, key=posixpath.basename)
            ]
    if not to_delete:
        return None
    last = timeline.commits().completed().last()
    return {
        "earliestInstantToRetain": {"timestamp": e, "action": earliest.action, "state": "COMPLETED"},
        "lastCompletedCommitTimestamp": last.requested_time if last else "",
        "policy": KEEP_LATEST_COMMITS,
        "filesToBeDeletedPerPartition": {},
        "version": CLEAN_PLAN_VERSION,
        "filePathsToBeDeletedPerPartition": to_delete,
        "partitionsToBeDeleted": [],
        # as CleanPlanActionExecutor records them, for archival and later cleans; Hudi records them for partitioned
        # tables only, but archival needs them on every table: a savepoint deleted after this clean kept a replaced
        # file group's files, and without them archival took the replacecommit away while those files stayed,
        # and every reader read the replaced records again (Hudi's own readers read the entry on any table)
        "extraMetadata": {SAVEPOINTED_TIMESTAMPS: ",".join(savepoints)} if savepoints else {},
    }


# -- execution --------------------------------------------------------------------------------------------------
def _run(
    storage: Storage,
    base_path: str,
    timeline: ActiveTimeline,
    instant: Instant,
    plan: Mapping[str, Any],
    time_source: TimeSource,
    on_delete: OnDelete | None = None,
) -> Instant:
    start = time.monotonic()
    storage = storage.rooted(base_path)
    # every name the plan gives is checked before anything changes (a crafted plan is refused whole)
    targets = clean_targets(plan, timeline.path_of(Instant(instant.requested_time, CLEAN, State.REQUESTED)))
    inflight = instant
    if instant.state == State.REQUESTED:
        candidate = Instant(instant.requested_time, CLEAN, State.INFLIGHT)
        if storage.exists(timeline.path_of(candidate)):
            inflight = candidate
        else:
            inflight = timeline.transition_to_inflight(instant, None)
    faults.at("clean.inflight")
    if on_delete is not None:
        # e.g. the metadata table records the deletions (same instant) before the files go
        on_delete(instant.requested_time, {part: list(names) for part, names in targets.items()})

    partition_meta: dict[str, dict[str, Any]] = {}
    total = 0
    for partition, names in targets.items():
        patterns: list[str] = []
        ok: list[str] = []
        bad: list[str] = []
        for name in names:
            path = (
                posixpath.join(base_path, partition, name) if partition else posixpath.join(base_path, name)
            )
            patterns.append(name)
            try:
                existed = storage.exists(path)
                storage.delete(path, missing_ok=True, dirs=False)
            except UnsafePathError:
                raise
            except (OSError, PyHudiError) as e:
                # as Hudi's clean, which fails on an I/O error: completed, the clean would let archival pass the
                # instants whose files it kept (a replaced file group's files would be read again once its
                # replacecommit is archived)
                raise StorageError(
                    f"{base_path}: clean {instant.requested_time} could not delete {path}: {e}; the clean stays "
                    "pending, and the next clean (after the next commit with hoodie.clean.automatic, or "
                    "`pyhudi clean`) deletes the rest and completes it") from e
            (ok if existed else bad).append(name)
        total += len(ok)
        partition_meta[partition] = {
            "partitionPath": partition,
            "policy": str(plan.get("policy") or KEEP_LATEST_COMMITS),
            "deletePathPatterns": patterns,
            "successDeleteFiles": ok,
            "failedDeleteFiles": bad,
            "isPartitionDeleted": False,
        }
    faults.at("clean.files_deleted")

    earliest = plan.get("earliestInstantToRetain") or {}
    metadata = {
        "startCleanTime": instant.requested_time,
        "timeTakenInMillis": int((time.monotonic() - start) * 1000),
        "totalFilesDeleted": total,
        "earliestCommitToRetain": str(earliest.get("timestamp") or ""),
        "lastCompletedCommitTimestamp": str(plan.get("lastCompletedCommitTimestamp") or ""),
        "partitionMetadata": partition_meta,
        "version": CLEAN_METADATA_VERSION,
        "bootstrapPartitionMetadata": {},
        "extraMetadata": dict(plan.get("extraMetadata") or {}),
    }
    completion = next_time(time_source, timeline.reload().latest_time())
    done = timeline.complete(inflight, metadata, completion)
    faults.at("clean.completed")
    return done


def read_clean_plan(timeline: ActiveTimeline, clean_time: str) -> dict[str, Any]:
    return timeline.read_plan(CLEAN, clean_time)


def read_clean_metadata(timeline: ActiveTimeline, instant: Instant) -> dict[str, Any]:
    """The HoodieCleanMetadata of a completed clean instant."""
    return timeline.read_completed(instant, CLEAN)


def complete_pending_cleans(
    storage: Storage,
    base_path: str,
    time_source: TimeSource,
    timeline: ActiveTimeline | None = None,
    *,
    on_delete: OnDelete | None = None,
) -> list[Instant]:
    tl = (timeline or ActiveTimeline.load(storage, base_path)).reload()
    done = []
    for inst in tl.by_action(CLEAN).pending():
        plan = read_clean_plan(tl, inst.requested_time)
        done.append(_run(storage, base_path, tl, inst, plan, time_source, on_delete))
        tl = tl.reload()
    return done


def clean(
    storage: Storage,
    base_path: str,
    timeline: ActiveTimeline | None,
    retained: int = DEFAULT_COMMITS_RETAINED,
    new_instant_time: str | TimeSource | None = None,
    *,
    on_delete: OnDelete | None = None,
    before_plan: Callable[[], None] | None = None,
) -> Instant | None:
    """Finish pending cleans, then plan and run a KEEP_LATEST_COMMITS clean.

    ``on_delete(clean_time, {partition: [file names]})`` runs before any file is deleted; ``before_plan()``
    before a new clean reaches the timeline (it may refuse it by raising).
    ``new_instant_time``: the clean's instant time, or a generator/callable of new times (also used for
    completion times; with a fixed string or none, from a fresh :class:`InstantTimeGenerator` of the table's).
    Returns the completed clean instant of this call (the last finished pending one if nothing new was
    planned), or None when nothing needed deleting.
    """
    source: TimeSource
    fixed: str | None = None
    if isinstance(new_instant_time, str) or new_instant_time is None:
        fixed = new_instant_time
        source = InstantTimeGenerator.for_table(read_table_config(storage, posixpath.join(base_path, METAFOLDER)))
    else:
        source = new_instant_time
    finished = complete_pending_cleans(storage, base_path, source, timeline, on_delete=on_delete)
    tl = (timeline or ActiveTimeline.load(storage, base_path)).reload()
    plan = plan_clean(storage, base_path, tl, retained)
    if plan is None:
        return finished[-1] if finished else None
    latest = tl.latest_time()
    if fixed is not None:
        if latest is not None and fixed <= latest:
            raise PyHudiError(f"clean instant time {fixed} is not after the latest instant {latest}")
        t = fixed
    else:
        t = next_time(source, latest)
    if before_plan is not None:
        before_plan()
    requested = tl.create_requested(CLEAN, t, plan)
    faults.at("clean.planned")
    return _run(storage, base_path, tl, requested, plan, source, on_delete)
