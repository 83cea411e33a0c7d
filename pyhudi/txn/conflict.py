"""Conflict detection at commit, as Hudi's ``SimpleConcurrentFileWritesConflictResolutionStrategy``.

Under the table lock, a committing write is compared with every instant that completed since its view of the table
was taken (and with compactions and clustering planned meanwhile): two writes conflict when they touched a file
group in common (files written, file groups replaced, file groups a plan operates on). The later writer fails
with :class:`ConcurrentWriteConflict` naming the file groups and the other instant; a compaction that completed
with an instant before the writer's is tolerated (the writer's log files went to the new file slice), as in Hudi.

An overwrite (``insert_overwrite``, ``delete_partition``: the partitions it writes or names are replaced whole;
``insert_overwrite_table``: the whole table) decides which file groups it replaces when it begins, so a file group
another write adds meanwhile to a partition it overwrites would survive it, and a key written by both would be
held twice: an overwrite also conflicts with any write that touched a file group in a partition it overwrites
(Apache Hudi's file-group check lets both commit).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyhudi.errors import ConcurrentWriteConflict
from pyhudi.table.commit_metadata import FileGroupKey, pending_plan, plan_file_groups, touched_file_groups
from pyhudi.table.timeline import (
    CLUSTERING,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    ActiveTimeline,
    Instant,
    Timeline,
)

if TYPE_CHECKING:
    from pyhudi.table.lsm_timeline import FullTimeline

__all__ = ["ConcurrentWriteConflict", "Footprint", "completed_writes_since", "find_conflict", "touched_file_groups"]
WRITE_ACTIONS = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT})
#: operation types (commit metadata ``operationType``) that replace the partitions they write or name, whole
PARTITION_OVERWRITES = frozenset({"INSERT_OVERWRITE", "DELETE_PARTITION"})
TABLE_OVERWRITE = "INSERT_OVERWRITE_TABLE"


@dataclass(frozen=True)
class Footprint:
    """What a write touched, for conflict detection: its file groups, and the partitions it replaced whole."""

    file_groups: frozenset[FileGroupKey]
    overwritten: frozenset[str] = field(default=frozenset())  #: partitions replaced whole
    whole_table: bool = False  #: every partition replaced (``insert_overwrite_table``)

    @classmethod
    def of(cls, metadata: Mapping[str, Any]) -> Footprint:
        """The footprint of a commit's (or a committing write's) metadata."""
        groups = frozenset(touched_file_groups(metadata))
        op = metadata.get("operationType")
        if op == TABLE_OVERWRITE:
            return cls(groups, whole_table=True)
        if op in PARTITION_OVERWRITES:
            parts = {str(p) for p in (metadata.get("partitionToReplaceFileIds") or {})}
            parts |= {str(p) for p in (metadata.get("partitionToWriteStats") or {})}
            return cls(groups, frozenset(parts))
        return cls(groups)

    def replaces(self, partition: str) -> bool:
        return self.whole_table or partition in self.overwritten

    def shared_with(self, other: Footprint) -> set[FileGroupKey]:
        """The file groups that make the two conflict: touched by both, or touched by one in a partition the other
        overwrote."""
        out = set(self.file_groups & other.file_groups)
        out.update(g for g in other.file_groups if self.replaces(g[0]))
        out.update(g for g in self.file_groups if other.replaces(g[0]))
        return out


def _archived_since(start: Timeline, history: FullTimeline | None, instant: str) -> list[Instant]:
    """Commits of ``history`` (the archived instants and the active ones) archived after completing while the
    write ran: completed after the latest completion ``start`` saw."""
    if history is None:
        return []
    done_before = {i.requested_time for i in start.completed()}
    floor = start.latest_completion_time() or ""
    return [i for i in history.completed().commits()
            if history.is_archived(i) and i.requested_time not in done_before and i.requested_time != instant
            and (i.completion_time or i.requested_time) > floor]


def _candidates(start: Timeline, now: ActiveTimeline, instant: str,
                history: FullTimeline | None = None) -> list[Instant]:
    done_before = {i.requested_time for i in start.completed()}
    out = [i for i in now.completed().commits() if i.requested_time not in done_before and i.requested_time != instant]
    out += _archived_since(start, history, instant)
    # plans made meanwhile: pending compactions and clustering requested after this write started
    known = {i.requested_time for i in start}
    out += [i for i in now.pending().by_action(COMPACTION, LOG_COMPACTION, CLUSTERING) if i.requested_time not in known]
    return out


def find_conflict(
    start: Timeline, now: ActiveTimeline, instant: str, touched: Footprint | set[FileGroupKey],
    history: FullTimeline | None = None,
) -> tuple[str, set[FileGroupKey]] | None:
    """The first instant that completed (or was planned) since ``start`` and conflicts with ``touched`` (this
    write's footprint, or its file groups): (its time and action, the file groups that conflict); None when there
    is none. ``history``: the archived and active instants, when archival ran since ``start`` (an instant may have
    completed and been archived meanwhile)."""
    mine = touched if isinstance(touched, Footprint) else Footprint(frozenset(touched))
    source: Timeline = history if history is not None else now
    for other in sorted(_candidates(start, now, instant, history), key=lambda i: i.requested_time):
        if other.is_completed:
            md = source.read_commit_metadata(other)  # type: ignore[attr-defined]
            if md.get("operationType") in ("COMPACT", "LOG_COMPACT") and other.requested_time < instant:
                continue  # tolerated, as in Hudi: the writer's files went to the compacted slice
            theirs = Footprint.of(md)
        else:
            theirs = Footprint(frozenset(plan_file_groups(pending_plan(now, other))))
        shared = mine.shared_with(theirs)
        if shared:
            return f"{other.requested_time} ({other.action})", shared
    return None


def completed_writes_since(start: Timeline, now: ActiveTimeline, instant: str,
                           history: FullTimeline | None = None) -> list[Instant]:
    """Write instants (not table services) that completed since ``start`` (``history``: as for
    :func:`find_conflict`)."""
    done_before = {i.requested_time for i in start.completed()}
    source: Timeline = history if history is not None else now
    out = []
    for i in [*now.completed().by_action(*WRITE_ACTIONS),
              *(a for a in _archived_since(start, history, instant) if a.action in WRITE_ACTIONS)]:
        if i.requested_time in done_before or i.requested_time == instant:
            continue
        if i.action == COMMIT and (source.read_commit_metadata(i)  # type: ignore[attr-defined]
                                   .get("operationType") in ("COMPACT", "LOG_COMPACT")):
            continue
        out.append(i)
    return out
