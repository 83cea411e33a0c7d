"""Rollback of failed (pending) writes, as Hudi 1.x does it for table version 8+.

Flow (apache/hudi ``BaseRollbackPlanActionExecutor``, ``BaseRollbackActionExecutor``, ``MarkerBasedRollbackStrategy``,
checked against the real rollback in the ``mor_v9_nonpartitioned_rollback`` fixture):

1. ``<r>.rollback.requested`` holds a HoodieRollbackPlan: ``instantToRollback`` {commitTime, action} and one
   ``RollbackRequests`` entry per marker: ``partitionPath``, ``fileId`` = ``""``, ``latestBaseInstant`` = ``""``,
   ``filesToBeDeleted`` = [full path of the data file], ``logBlocksToBeDeleted`` = {}; ``version`` 1. Table
   version 8+ deletes log files of the failed instant too (no rollback command blocks).
2. ``<r>.rollback.inflight`` (empty file).
3. The files are deleted; a file already gone counts as deleted (a re-run after a crash).
4. The failed instant's own timeline files (``.inflight`` then ``.requested``) are deleted.
5. ``<r>_<completion>.rollback`` holds HoodieRollbackMetadata: ``startRollbackTime`` = r, ``timeTakenInMillis``,
   ``totalFilesDeleted``, ``commitsRollback`` = [t], ``partitionMetadata`` {partition: {partitionPath,
   successDeleteFiles, failedDeleteFiles, rollbackLogFiles {}, logFilesFromFailedCommit {}}}, ``version`` 1,
   ``instantsRollback`` [{commitTime, action}].
6. The marker directory ``.hoodie/.temp/<t>`` is deleted.

Without markers (e.g. a writer that died before creating any, or markers already deleted) the plan falls back to
listing every partition for base files ``*_<t>.<ext>`` and log files ``.<fileId>_<t>.log.*`` of the failed instant.

A crash at any step leaves a pending rollback; :func:`rollback_failed_writes` first completes pending rollbacks by
re-running their plans (every step is idempotent). A data table's rollback whose target completed after it was
planned is dropped, never carried out: a completed commit's records were reported written (a writer commits only
when no rollback targets its instant, so only a writer that does not check comes here). Works on any Hudi table
base path, including a metadata table (``<base>/.hoodie/metadata``), whose completed deltacommits of failed data
writes are rolled back. Pyhudi's writers clean failed writes EAGERLY: call :func:`rollback_failed_writes`
before starting a new write.
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from pyhudi import faults
from pyhudi.errors import CorruptFileError, PyHudiError, UnsafePathError
from pyhudi.io.storage import Storage
from pyhudi.metadata.partitions import METADATA_FOLDER, metadata_base_path
from pyhudi.table import markers
from pyhudi.table.filenames import parse_data_file_name
from pyhudi.table.fsview import StorageListing
from pyhudi.table.lsm_timeline import ArchivedCompletionTimes
from pyhudi.table.properties import METAFOLDER
from pyhudi.table.recorded_paths import rollback_targets, write_stat_path
from pyhudi.table.timeline import (
    COMMIT,
    DELTA_COMMIT,
    REPLACE_COMMIT,
    ROLLBACK,
    SAVEPOINT,
    ActiveTimeline,
    Instant,
    InstantTimeGenerator,
    State,
)

log = logging.getLogger(__name__)

#: Pending actions rolled back as failed writes (pending compaction/clustering are re-attempted instead).
ROLLBACK_ACTIONS = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT})
ROLLBACK_PLAN_VERSION = 1
ROLLBACK_METADATA_VERSION = 1

#: Something that hands out new instant times: a generator or a no-argument callable.
TimeSource = InstantTimeGenerator | Callable[[], str]
#: Fault points (:mod:`pyhudi.faults`), reached after each step: ``rollback.planned``, ``rollback.inflight``,
#: ``rollback.files_deleted``, ``rollback.instant_deleted``, ``rollback.completed``.


@dataclass(frozen=True)
class RollbackResult:
    """One completed rollback."""

    instant: Instant  #: the completed rollback instant
    rolled_back: str  #: requested time of the rolled-back instant
    rolled_back_action: str
    deleted: tuple[str, ...] = field(default=())
    failed: tuple[str, ...] = field(default=())


def next_time(source: TimeSource, floor: str | None) -> str:
    """A new instant time greater than ``floor`` from ``source``."""
    if isinstance(source, InstantTimeGenerator):
        return source.next(floor)
    t = source()
    if floor is not None and t <= floor:
        raise PyHudiError(f"new instant time {t} is not after {floor}")
    return t


# -- planning ---------------------------------------------------------------------------------------------------
def _request(partition: str, path: str) -> dict[str, Any]:
    return {
        "partitionPath": partition,
        "fileId": "",
        "latestBaseInstant": "",
        "filesToBeDeleted": [path],
        "logBlocksToBeDeleted": {},
    }


def plan_rollback(storage: Storage, base_path: str, instant_time: str, action: str) -> dict[str, Any]:
    """The HoodieRollbackPlan of a pending instant: from its markers, else from a listing of all partitions."""
    storage = storage.rooted(base_path)
    requests: list[dict[str, Any]] = []
    marked = markers.list_marked_files(storage, base_path, instant_time)
    if marked:
        seen: set[tuple[str, str]] = set()
        for partition, name, _io in marked:
            if (partition, name) in seen:
                continue
            seen.add((partition, name))
            folder = posixpath.join(base_path, partition) if partition else base_path
            requests.append(_request(partition, storage.uri(posixpath.join(folder, name))))
    else:
        for partition, entries in StorageListing(storage, base_path).list_partition_files().items():
            folder = posixpath.join(base_path, partition) if partition else base_path
            for e in entries:
                parsed = parse_data_file_name(e.name)
                if parsed is not None and parsed.instant == instant_time:
                    requests.append(_request(partition, storage.uri(posixpath.join(folder, e.name))))
    return {
        "instantToRollback": {"commitTime": instant_time, "action": action},
        "RollbackRequests": requests,
        "version": ROLLBACK_PLAN_VERSION,
    }


def checked_targets(storage: Storage, base_path: str, plan: Mapping[str, Any], source: str
                    ) -> list[tuple[str, list[str]]]:
    """(partition, [file names]) a rollback plan deletes, every one checked (:func:`rollback_targets`: names that
    stay in the table, files of the instant rolled back) and its path accepted by the table's storage (no symbolic
    link leading out of the table). A plan is checked so before it is written and again before it is carried out:
    one refused is never left on the timeline. ``source``: the file that carried the names."""
    storage = storage.rooted(base_path)
    targets = rollback_targets(plan, source)
    for partition, names in targets:
        for name in names:
            storage.check_path(_local_path(base_path, partition, name), "delete")
    return targets


# -- execution --------------------------------------------------------------------------------------------------
def _local_path(base_path: str, partition: str, recorded: str) -> str:
    """The storage path of a file a plan recorded (Java writes full URIs; keep only partition + name)."""
    name = posixpath.basename(recorded)
    return posixpath.join(base_path, partition, name) if partition else posixpath.join(base_path, name)


def _instant_files(timeline: ActiveTimeline, instant_time: str) -> list[Instant]:
    """Every timeline file of ``instant_time`` now on storage, most advanced state first; not a savepoint's (which
    has the time of the commit it saves)."""
    files = [Instant.parse(st.name) for st in timeline.storage.list(timeline.timeline_dir) if not st.is_dir]
    mine = [i for i in files if i is not None and i.requested_time == instant_time and i.action != SAVEPOINT]
    return sorted(mine, key=lambda i: -int(i.state))


def _delete_instant_files(timeline: ActiveTimeline, instant_time: str, *, completed: bool = False) -> None:
    """Delete ``<t>.inflight``/``<t>.<action>.inflight`` then ``<t>.<action>.requested`` (and, with
    ``completed``, the completed file first: a metadata-table deltacommit of a data write that did not complete)."""
    for inst in _instant_files(timeline, instant_time):  # completed, inflight, requested: as Hudi does
        if completed or not inst.is_completed:
            timeline.storage.delete(timeline.path_of(inst), missing_ok=True)


def metadata_table_of(storage: Storage, base_path: str) -> str | None:
    """The metadata table's base path of the data table at ``base_path``, if it has one."""
    if is_metadata_table(base_path):
        return None  # a metadata table has none
    mdt = metadata_base_path(base_path)
    return mdt if storage.exists(posixpath.join(mdt, METAFOLDER, "hoodie.properties")) else None


def is_metadata_table(base_path: str) -> bool:
    return base_path.rstrip("/").endswith(f"/{METAFOLDER}/{METADATA_FOLDER}")


def pending_rollback_of(timeline: ActiveTimeline, instant_time: str) -> Instant | None:
    """The pending rollback (requested or inflight) whose plan targets ``instant_time``, if there is one."""
    for pending in timeline.by_action(ROLLBACK).pending():
        target = read_rollback_plan(timeline, pending.requested_time).get("instantToRollback") or {}
        if target.get("commitTime") == instant_time:
            return pending
    return None


def _is_stale(rollback: Instant, target: Instant | None, base_path: str) -> bool:
    """Whether a data table's pending rollback was planned before its target completed: its writer, taken for
    dead, went on and committed (a writer that does not check for a pending rollback of its instant). A rollback
    planned after its target completed (Apache Hudi's rollback of a completed commit, a restore) is not."""
    if target is None or is_metadata_table(base_path):
        return False
    return (target.completion_time or target.requested_time) > rollback.requested_time


def _drop_stale_rollback(storage: Storage, base_path: str, timeline: ActiveTimeline, rollback: Instant,
                         target: Instant) -> None:
    """A stale rollback (:func:`_is_stale`) is dropped, never carried out: the completed commit's records were
    reported written. Its plan files are deleted; files of the commit it deleted before it stopped are named in a
    warning (``pyhudi validate`` reports them too)."""
    md = timeline.read_commit_metadata(target)
    source = timeline.path_of(target)
    paths = [write_stat_path(str(part), st, source) for part, sts in (md.get("partitionToWriteStats") or {}).items()
             for st in sts or () if st.get("path")]
    missing = [p for p in paths if not storage.exists(posixpath.join(base_path, p))]
    if missing:
        log.warning("%s: rollback %s was planned for write %s, which completed after it; the rollback is dropped, but "
                    "it had deleted %d file(s) of that commit (%s): their records are lost", base_path,
                    rollback.requested_time, target.requested_time, len(missing), ", ".join(missing[:3]))
    for inst in _instant_files(timeline, rollback.requested_time):
        if not inst.is_completed:
            timeline.storage.delete(timeline.path_of(inst), missing_ok=True)


def _refuse_past_metadata_compaction(storage: Storage, base_path: str, timeline: ActiveTimeline, rollback: Instant,
                                     target: str) -> None:
    """PyHudiError, before anything changes, for a rollback of the completed commit ``target`` whose metadata
    deltacommit completed before the metadata table's latest compaction (as Hudi's ``validateRollback``): the
    compacted base files hold its files and record-index entries, which rolling back its deltacommit's log files
    cannot take out, so the listing would keep the files the rollback deletes. A restore is the way back."""
    mdt = metadata_table_of(storage, base_path)
    if mdt is None:
        return
    tl = ActiveTimeline.load(storage, mdt)
    delta = next((i for i in _instant_files(tl, target) if i.is_completed), None)
    compactions = [i for i in tl.completed() if i.action == COMMIT]
    if delta is None or not compactions:
        return
    latest = max(compactions, key=lambda i: i.requested_time)
    done = delta.completion_time or delta.requested_time
    if len(done) == len(latest.requested_time) and done <= latest.requested_time:
        raise PyHudiError(
            f"{base_path}: rollback {rollback.requested_time} ({timeline.path_of(rollback)}) of the completed commit "
            f"{target} is refused: the metadata table was compacted after it ({latest.requested_time}), so its files "
            "and record-index entries are in the compacted base files; restore to a savepoint before it instead")


def _roll_back_metadata(storage: Storage, base_path: str, target: str, rollback_time: str, source: TimeSource) -> None:
    """Roll back the metadata table's deltacommit of the data instant ``target`` (completed or not), as a
    rollback instant with the data rollback's time, before the data rollback completes: readers treat the
    instants a completed data rollback names as valid metadata instants."""
    mdt = metadata_table_of(storage, base_path)
    if mdt is None:
        return
    tl = ActiveTimeline.load(storage, mdt)
    if not _instant_files(tl, target) and not any(True for _ in tl.by_action(ROLLBACK).pending()):
        return
    rollback_instant(storage, mdt, target, source, tl, allow_completed=True, rollback_time=rollback_time,
                     missing_ok=True)


def _execute(
    storage: Storage,
    base_path: str,
    timeline: ActiveTimeline,
    rollback_instant: Instant,
    plan: Mapping[str, Any],
    time_source: TimeSource,
) -> RollbackResult | None:
    """Carry out a rollback plan; None when it was dropped, its target being a data table's completed commit
    (:func:`_drop_stale_rollback`)."""
    start = time.monotonic()
    storage = storage.rooted(base_path)
    target = plan.get("instantToRollback")
    if not target:
        raise CorruptFileError(timeline.path_of(rollback_instant), "rollback plan has no instantToRollback")
    t, action = str(target["commitTime"]), str(target["action"])
    # every name the plan gives is checked before anything changes (a crafted plan is refused whole)
    targets = checked_targets(storage, base_path, plan,
                              timeline.path_of(Instant(rollback_instant.requested_time, ROLLBACK, State.REQUESTED)))
    done_target = next((i for i in _instant_files(timeline, t) if i.is_completed), None)
    if _is_stale(rollback_instant, done_target, base_path):
        assert done_target is not None
        _drop_stale_rollback(storage, base_path, timeline, rollback_instant, done_target)
        return None

    if done_target is not None and not is_metadata_table(base_path):
        _refuse_past_metadata_compaction(storage, base_path, timeline, rollback_instant, t)

    inflight = rollback_instant
    if rollback_instant.state == State.REQUESTED:
        inflight_path = timeline.path_of(Instant(rollback_instant.requested_time, ROLLBACK, State.INFLIGHT))
        if storage.exists(inflight_path):
            inflight = Instant(rollback_instant.requested_time, ROLLBACK, State.INFLIGHT)
        else:
            inflight = timeline.transition_to_inflight(rollback_instant, None)
    faults.at("rollback.inflight")

    _roll_back_metadata(storage, base_path, t, rollback_instant.requested_time, time_source)
    if done_target is not None:  # a rollback of a completed instant: the instant goes before its files
        _delete_instant_files(timeline, t, completed=True)

    per_partition: dict[str, tuple[list[str], list[str]]] = {}
    deleted: list[str] = []
    failed: list[str] = []
    for partition, names in targets:
        ok, bad = per_partition.setdefault(partition, ([], []))
        for name in names:
            path = _local_path(base_path, partition, name)
            try:
                storage.delete(path, missing_ok=True, dirs=False)
            except UnsafePathError:
                raise
            except (OSError, PyHudiError):
                bad.append(path)
                failed.append(path)
                continue
            ok.append(path)
            deleted.append(path)
    faults.at("rollback.files_deleted")

    _delete_instant_files(timeline, t)
    faults.at("rollback.instant_deleted")

    metadata = {
        "startRollbackTime": rollback_instant.requested_time,
        "timeTakenInMillis": int((time.monotonic() - start) * 1000),
        "totalFilesDeleted": len(deleted),
        "commitsRollback": [t],
        "partitionMetadata": {
            p: {
                "partitionPath": p,
                "successDeleteFiles": ok,
                "failedDeleteFiles": bad,
                "rollbackLogFiles": {},
                "logFilesFromFailedCommit": {},
            }
            for p, (ok, bad) in per_partition.items()
        },
        "version": ROLLBACK_METADATA_VERSION,
        "instantsRollback": [{"commitTime": t, "action": action}],
    }
    completion = next_time(time_source, timeline.reload().latest_time())
    done = timeline.complete(inflight, metadata, completion)
    faults.at("rollback.completed")

    # files a stalled writer's tasks wrote while this ran (their markers came after the plan): the folder goes,
    # and with it the only record of them
    delete_rolled_back_files(storage, base_path, t)
    markers.delete_markers(storage, base_path, t)
    return RollbackResult(done, t, action, tuple(deleted), tuple(failed))


def read_rollback_plan(timeline: ActiveTimeline, rollback_time: str) -> dict[str, Any]:
    return timeline.read_plan(ROLLBACK, rollback_time)


def read_rollback_metadata(timeline: ActiveTimeline, instant: Instant) -> dict[str, Any]:
    """The HoodieRollbackMetadata of a completed rollback instant."""
    return timeline.read_completed(instant, ROLLBACK)


def complete_pending_rollbacks(
    storage: Storage,
    base_path: str,
    time_source: TimeSource,
    timeline: ActiveTimeline | None = None,
) -> list[RollbackResult]:
    """Finish every pending rollback (requested/inflight) by re-running its plan."""
    tl = (timeline or ActiveTimeline.load(storage, base_path)).reload()
    results = []
    for inst in tl.by_action(ROLLBACK).pending():
        plan = read_rollback_plan(tl, inst.requested_time)
        done = _execute(storage, base_path, tl, inst, plan, time_source)
        if done is not None:
            results.append(done)
        tl = tl.reload()
    return results


@overload
def rollback_instant(
    storage: Storage, base_path: str, instant: Instant | str, time_source: TimeSource,
    timeline: ActiveTimeline | None = None, *, allow_completed: bool = False, rollback_time: str | None = None,
    missing_ok: Literal[False] = False,
) -> RollbackResult: ...


@overload
def rollback_instant(
    storage: Storage, base_path: str, instant: Instant | str, time_source: TimeSource,
    timeline: ActiveTimeline | None = None, *, allow_completed: bool = False, rollback_time: str | None = None,
    missing_ok: bool,
) -> RollbackResult | None: ...


def rollback_instant(
    storage: Storage,
    base_path: str,
    instant: Instant | str,
    time_source: TimeSource,
    timeline: ActiveTimeline | None = None,
    *,
    allow_completed: bool = False,
    rollback_time: str | None = None,
    missing_ok: bool = False,
) -> RollbackResult | None:
    """Roll back one pending write instant of the table at ``base_path`` (data or metadata table), and its
    metadata-table deltacommit first (a data table's).

    If a pending rollback of that instant exists, it is completed instead of planning a new one.
    ``allow_completed``: a completed instant may be rolled back too (a metadata table's deltacommit of a data
    write that failed). ``rollback_time``: the rollback's instant time (a metadata table's rollback takes its data
    rollback's), if it is after every time on the timeline. ``missing_ok``: None instead of an error when the
    instant is not on the timeline.
    """
    tl = (timeline or ActiveTimeline.load(storage, base_path)).reload()
    t = instant.requested_time if isinstance(instant, Instant) else instant
    pending = pending_rollback_of(tl, t)
    if pending is not None:
        done = _execute(storage, base_path, tl, pending, read_rollback_plan(tl, pending.requested_time), time_source)
        if done is not None:
            return done
        tl = tl.reload()  # dropped: its target completed
    current = tl.get(t)
    if current is None:
        if missing_ok:
            return None
        raise PyHudiError(f"no instant {t} on the timeline of {base_path}")
    if current.is_completed and not allow_completed:
        raise PyHudiError(f"instant {current} is completed; only pending writes can be rolled back")
    plan = plan_rollback(storage, base_path, t, current.action)
    # refused before it is written: the markers it comes from may name files the write did not make
    checked_targets(storage, base_path, plan, markers.marker_dir(base_path, t))
    latest = tl.latest_time()
    if rollback_time is not None and (latest is None or rollback_time > latest):
        r = rollback_time
    else:
        r = next_time(time_source, latest)
    requested = tl.create_requested(ROLLBACK, r, plan)
    faults.at("rollback.planned")
    done = _execute(storage, base_path, tl, requested, plan, time_source)
    assert done is not None  # its target is pending, or a metadata table's
    return done


def rollback_failed_writes(
    storage: Storage,
    base_path: str,
    timeline: ActiveTimeline | None,
    time_source: TimeSource,
    is_failed: Callable[[Instant], bool] | None = None,
) -> list[RollbackResult]:
    """Failed-writes cleaning: finish pending rollbacks, then roll back the pending commit/deltacommit/
    replacecommit instants that ``is_failed`` says have failed (default: every one), latest first. Returns the
    rollbacks completed by this call."""
    results = complete_pending_rollbacks(storage, base_path, time_source, timeline)
    tl = (timeline or ActiveTimeline.load(storage, base_path)).reload()
    failed = [i for i in tl.pending() if i.action in ROLLBACK_ACTIONS and (is_failed is None or is_failed(i))]
    for inst in sorted(failed, key=lambda i: i.requested_time, reverse=True):
        results.append(rollback_instant(storage, base_path, inst, time_source, tl))
        tl = tl.reload()
    delete_orphan_markers(storage, base_path, tl)
    return results


def delete_orphan_markers(storage: Storage, base_path: str, timeline: ActiveTimeline) -> list[str]:
    """Delete marker directories of instants that are not pending any more (completed, or gone from the
    timeline after a rollback). ``timeline`` is read again after the listing, so a write that began meanwhile
    keeps its markers; a writer that completed deletes its own folder too, and either delete may find it gone.

    An instant gone from the active timeline, and, when older than its first commit, within what the archived
    timeline covers but not held by it, was rolled back: the files its markers name were written after its
    rollback, by a writer that stalled past its heartbeat and went on (:func:`delete_rolled_back_files`), and are
    deleted with them; nothing else would, and once archival passed their instant a listing would take them for
    committed files. The archived timeline is read only for a folder older than the active timeline's first
    commit; an instant older than all it covers keeps its files (nothing shows it was not a completed write)."""
    storage = storage.rooted(base_path)
    # the folders are listed before the timeline is read again: a writer puts its requested instant on the
    # timeline before its first marker, so every marker folder listed here belongs to an instant the timeline
    # read after it shows (pending, completed) or to one that is gone
    found = [st for st in storage.list(posixpath.join(base_path, ".hoodie", markers.TEMP_FOLDER))
             if st.is_dir and st.name.isdigit()]
    if not found:
        return []
    tl = timeline.reload()
    pending = {i.requested_time for i in tl.pending()}
    known = {i.requested_time for i in tl}
    first = tl.commits().first()  # not a pending clean or rollback: archival goes past those
    archived = ArchivedCompletionTimes(storage, base_path)  # reads nothing until asked
    removed = []
    for st in found:
        if st.name in pending:
            continue
        # gone from the active timeline: rolled back, unless older than it and not shown never archived (a
        # completed write whose writer died before deleting its markers, archived since; or one older than what
        # the archived timeline covers)
        if st.name not in known and (
            (first is not None and st.name >= first.requested_time) or archived.never_archived(st.name)
        ):
            delete_rolled_back_files(storage, base_path, st.name)
        markers.delete_markers(storage, base_path, st.name)
        removed.append(st.name)
    return removed


def delete_rolled_back_files(storage: Storage, base_path: str, instant_time: str) -> list[str]:
    """Delete the data files the markers of ``instant_time`` name, an instant rolled back (gone from the
    timeline) whose writer wrote them afterwards: only files named with that instant, in the table."""
    storage = storage.rooted(base_path)
    deleted = []
    for partition, name, _io in markers.list_marked_files(storage, base_path, instant_time):
        parsed = parse_data_file_name(name)
        if parsed is None or parsed.instant != instant_time:
            continue
        path = posixpath.join(base_path, partition, name) if partition else posixpath.join(base_path, name)
        storage.delete(path, missing_ok=True)
        deleted.append(path)
    return deleted
