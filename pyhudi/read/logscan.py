"""Which blocks of a file slice's log files count: one scan for data tables and the metadata table alike.

Hudi's log record reader (``BaseHoodieLogRecordReader#scanInternalV1``) reads the blocks of every log file of a
slice in log order and keeps a queue:

- a data or delete block is queued only if its INSTANT_TIME is accepted by the reader's :class:`InstantFilter`
  (completed on the timeline, within the snapshot or the incremental range; for the metadata table also valid on
  the data table's timeline);
- a ROLLBACK command block removes every queued block whose INSTANT_TIME equals its TARGET_INSTANT_TIME, and the
  queued corrupt blocks (command blocks are not filtered by instant: they act whatever wrote them);
- corrupt (torn) blocks are queued then ignored;
- the queue is applied oldest first.

Log compaction output (blocks carrying COMPACTED_BLOCK_TIMES) supersedes the blocks of the instants it lists: the
metadata table reads it so (``on_compacted="drop"``); a data-table reader refuses it (``"refuse"``), since where
Hudi places those blocks in the merge order (``scanInternalV2``) is not implemented here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from pyhudi.errors import UnsupportedFormatError
from pyhudi.io.logfile import BlockType, LogBlock, LogFileReader
from pyhudi.io.storage import Storage
from pyhudi.table.timeline import Timeline


class InstantFilter(Protocol):
    """Whether the data and delete blocks written by an instant are read."""

    def ok(self, instant: str | None) -> bool: ...


@dataclass(frozen=True)
class CommittedInstants:
    """The data table's instants whose log blocks a reader uses (picklable: Spark tasks apply it).

    ``visible``: completed instants of the commits timeline inside the snapshot (time travel: requested at or
    before ``as_of``; incremental: completed at or before the range's end). An instant older than the first
    instant of the active timeline and not on it was archived, hence completed, and counts unless it is after
    ``as_of``. Anything else -- inflight, requested, rolled back (gone from the timeline), after the snapshot --
    is not read.
    """

    visible: frozenset[str]
    known: frozenset[str]
    start: str | None
    as_of: str | None = None

    def ok(self, instant: str | None) -> bool:
        if instant is None:
            return False
        if instant in self.visible:
            return True
        if instant in self.known or self.start is None or instant >= self.start:
            return False
        return self.as_of is None or instant <= self.as_of

    @staticmethod
    def of(commits: Timeline, *, as_of: str | None = None, completed_by: str | None = None) -> CommittedInstants:
        """From the (commits) timeline: completed instants requested at or before ``as_of`` and completed at or
        before ``completed_by`` (either bound optional)."""
        visible = frozenset(
            i.requested_time for i in commits
            if i.is_completed
            and (as_of is None or i.requested_time <= as_of)
            and (completed_by is None or (i.completion_time or i.requested_time) <= completed_by)
        )
        first = commits.first()
        return CommittedInstants(
            visible, frozenset(i.requested_time for i in commits), first.requested_time if first else None, as_of
        )


def scan_log_blocks(
    storage: Storage,
    paths: Sequence[str],
    accept: InstantFilter,
    *,
    load_content: bool = True,
    on_compacted: Literal["drop", "refuse"] = "refuse",
) -> list[LogBlock]:
    """The data and delete blocks of the log files at ``paths`` (in log order) that count, oldest first.

    With ``load_content`` the blocks' contents are read while each file is open; otherwise the blocks are
    detached and their contents are read on demand (:meth:`LogBlock.fetch`), one block at a time.
    """
    queued: list[LogBlock] = []
    for path in paths:
        with LogFileReader.open(storage, path, load_content=False) as r:
            for b in r.blocks():
                if b.is_corrupt:
                    queued.append(b)
                    continue
                if b.block_type == BlockType.COMMAND:
                    if b.is_rollback:
                        target = b.target_instant_time
                        queued = [q for q in queued if not q.is_corrupt and q.instant_time != target]
                    elif b.command_type is None:
                        raise UnsupportedFormatError(
                            f"{path}: command block at offset {b.offset} of unknown type "
                            f"{b.header.get(3)!r} (only rollback blocks exist)"
                        )
                    continue
                if b.block_type != BlockType.DELETE and not b.is_data_block:
                    raise UnsupportedFormatError(f"{path}: block type {b.block_type} at offset {b.offset}")
                if not accept.ok(b.instant_time):
                    continue
                if load_content:
                    _ = b.content
                queued.append(b)
            for b in queued:  # the file closes: its blocks keep their loaded content, and read again by path
                if b.path == path:
                    b.detach()
    blocks = [b for b in queued if not b.is_corrupt]
    superseded = {t for b in blocks for t in b.compacted_block_times}
    if not superseded:
        return blocks
    if on_compacted == "refuse":
        b = next(b for b in blocks if b.compacted_block_times)
        raise UnsupportedFormatError(
            f"{b.path}: block at offset {b.offset} is log compaction output (COMPACTED_BLOCK_TIMES "
            f"{','.join(b.compacted_block_times)}); reading log-compacted file slices is not supported"
        )
    return [b for b in blocks if b.instant_time not in superseded or b.compacted_block_times]
