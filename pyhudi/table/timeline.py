"""The active timeline (layout version 2): instants, their file names, loading, reading and transitions.

File naming in ``.hoodie/timeline/`` (checked against Hudi 1.0/1.1 tables):

- requested: ``<t>.<action>.requested``  (empty for commit/deltacommit; a plan for clustering, compaction,
  clean, rollback, indexing, replacecommit)
- inflight:  ``<t>.inflight`` for ``commit``, ``<t>.<action>.inflight`` for every other action
- completed: ``<t>_<completionTime>.<action>``; pending ``compaction`` completes as ``commit``, pending
  ``clustering`` as ``replacecommit``, pending ``logcompaction`` as ``deltacommit``.

Hudi keeps the requested and inflight files after completion (archival removes them later).
"""

from __future__ import annotations

import enum
import posixpath
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any

from pyhudi.errors import CorruptFileError, PyHudiError, StorageError
from pyhudi.io import avro
from pyhudi.io.storage import Storage
from pyhudi.table.properties import METAFOLDER, TableConfig, read_table_config

# -- actions --------------------------------------------------------------------------------------------------
COMMIT = "commit"
DELTA_COMMIT = "deltacommit"
REPLACE_COMMIT = "replacecommit"
CLUSTERING = "clustering"
COMPACTION = "compaction"
LOG_COMPACTION = "logcompaction"
CLEAN = "clean"
ROLLBACK = "rollback"
SAVEPOINT = "savepoint"
RESTORE = "restore"
INDEXING = "indexing"
SCHEMA_COMMIT = "schemacommit"

#: The action a pending instant's completed file carries.
COMPLETED_ACTION = {COMPACTION: COMMIT, CLUSTERING: REPLACE_COMMIT, LOG_COMPACTION: DELTA_COMMIT}

#: Actions of the commits timeline (instants that write data files).
COMMIT_ACTIONS = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT, CLUSTERING, COMPACTION, LOG_COMPACTION})

#: Avro schema of each instant file's content, by (action, state). ``None``: no content.
_CONTENT_SCHEMA: dict[tuple[str, str], str] = {
    (COMMIT, "INFLIGHT"): "HoodieCommitMetadata",
    (COMMIT, "COMPLETED"): "HoodieCommitMetadata",
    (DELTA_COMMIT, "INFLIGHT"): "HoodieCommitMetadata",
    (DELTA_COMMIT, "COMPLETED"): "HoodieCommitMetadata",
    (REPLACE_COMMIT, "REQUESTED"): "HoodieRequestedReplaceMetadata",
    (REPLACE_COMMIT, "INFLIGHT"): "HoodieCommitMetadata",
    (REPLACE_COMMIT, "COMPLETED"): "HoodieReplaceCommitMetadata",
    (CLUSTERING, "REQUESTED"): "HoodieRequestedReplaceMetadata",
    (COMPACTION, "REQUESTED"): "HoodieCompactionPlan",
    (LOG_COMPACTION, "REQUESTED"): "HoodieCompactionPlan",
    (CLEAN, "REQUESTED"): "HoodieCleanerPlan",
    (CLEAN, "INFLIGHT"): "HoodieCleanerPlan",
    (CLEAN, "COMPLETED"): "HoodieCleanMetadata",
    (ROLLBACK, "REQUESTED"): "HoodieRollbackPlan",
    (ROLLBACK, "COMPLETED"): "HoodieRollbackMetadata",
    (INDEXING, "REQUESTED"): "HoodieIndexPlan",
    (INDEXING, "COMPLETED"): "HoodieIndexCommitMetadata",
    (SAVEPOINT, "COMPLETED"): "HoodieSavepointMetadata",
}


class State(enum.IntEnum):
    REQUESTED = 0
    INFLIGHT = 1
    COMPLETED = 2


_COMPLETED_RE = re.compile(r"^(\d+)_(\d+)\.([a-z_]+)$")
_PENDING_RE = re.compile(r"^(\d+)\.([a-z_]+)\.(requested|inflight)$")
_COMMIT_INFLIGHT_RE = re.compile(r"^(\d+)\.inflight$")


@dataclass(frozen=True, order=False)
class Instant:
    """One instant of the timeline, in one state."""

    requested_time: str
    action: str
    state: State
    completion_time: str | None = None

    def __post_init__(self) -> None:
        if not self.requested_time.isdigit():
            raise ValueError(f"instant time must be digits, not {self.requested_time!r}")
        if (self.state == State.COMPLETED) != (self.completion_time is not None):
            raise ValueError("a completed instant needs a completion time, and only a completed one")

    @property
    def is_completed(self) -> bool:
        return self.state == State.COMPLETED

    @property
    def is_requested(self) -> bool:
        return self.state == State.REQUESTED

    @property
    def is_inflight(self) -> bool:
        return self.state == State.INFLIGHT

    @property
    def file_name(self) -> str:
        t, a = self.requested_time, self.action
        if self.state == State.REQUESTED:
            return f"{t}.{a}.requested"
        if self.state == State.INFLIGHT:
            return f"{t}.inflight" if a == COMMIT else f"{t}.{a}.inflight"
        return f"{t}_{self.completion_time}.{a}"

    @property
    def sort_key(self) -> tuple[str, bool, int]:
        # a savepoint (a Java writer's) has its commit's requested time: it sorts after the commit's files
        return (self.requested_time, self.action == SAVEPOINT, int(self.state))

    def content_schema(self) -> str | None:
        return _CONTENT_SCHEMA.get((self.action, self.state.name))

    def __str__(self) -> str:
        done = f"__{self.completion_time}" if self.completion_time else ""
        return f"[{self.requested_time}{done}__{self.action}__{self.state.name}]"

    @staticmethod
    def parse(file_name: str) -> Instant | None:
        """The instant a timeline file name stands for, or None if it is not an instant file."""
        m = _COMPLETED_RE.match(file_name)
        if m:
            return Instant(m.group(1), m.group(3), State.COMPLETED, m.group(2))
        m = _PENDING_RE.match(file_name)
        if m:
            state = State.REQUESTED if m.group(3) == "requested" else State.INFLIGHT
            return Instant(m.group(1), m.group(2), state)
        m = _COMMIT_INFLIGHT_RE.match(file_name)
        if m:
            return Instant(m.group(1), COMMIT, State.INFLIGHT)
        return None


# -- instant times --------------------------------------------------------------------------------------------
INSTANT_TIME_FORMAT = "%Y%m%d%H%M%S"


def format_instant_time(epoch_ms: int, zone: tzinfo | None = UTC) -> str:
    """``yyyyMMddHHmmssSSS`` in ``zone`` (None: the machine's local zone; a table's is
    :attr:`TableConfig.timeline_zone <pyhudi.table.properties.TableConfig.timeline_zone>`)."""
    dt = datetime.fromtimestamp(epoch_ms / 1000, tz=zone)
    return dt.strftime(INSTANT_TIME_FORMAT) + f"{epoch_ms % 1000:03d}"


def parse_instant_time(t: str, zone: tzinfo | None = UTC) -> int:
    """Epoch milliseconds of a 17-digit (or 14-digit, second precision) instant time in ``zone`` (None: the
    machine's local zone)."""
    if not t.isdigit() or len(t) not in (14, 17):
        raise ValueError(f"not an instant time: {t!r}")
    dt = datetime.strptime(t[:14], INSTANT_TIME_FORMAT).replace(tzinfo=zone)
    ms = int(t[14:]) if len(t) == 17 else 0
    return int(dt.timestamp()) * 1000 + ms


class InstantTimeGenerator:
    """Strictly increasing ``yyyyMMddHHmmssSSS`` times in ``zone`` (a table's
    :attr:`~pyhudi.table.properties.TableConfig.timeline_zone`: UTC, or None for the machine's local zone, as
    Hudi's ``hoodie.table.timeline.timezone``), unique across the threads of a process.

    Like Hudi, it never hands out a time ahead of the clock: it waits until the clock passes the last time it
    issued and any ``floor`` the caller passes (e.g. the latest time on the timeline). A floor more than
    ``max_wait_ms`` ahead of the clock raises instead of sleeping. Uniqueness across processes and machines is
    the transaction's (:mod:`pyhudi.txn.transaction`: a write's time is reserved by creating its heartbeat file
    only if absent).
    """

    def __init__(
        self, zone: tzinfo | None = UTC, *, clock: Callable[[], float] = time.time, max_wait_ms: int = 10_000
    ) -> None:
        self.zone = zone
        self._clock = clock
        self._last_ms = 0
        self._lock = threading.Lock()
        self._max_wait_ms = max_wait_ms

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _wait_past(self, floor_ms: int) -> int:
        now = self._now_ms()
        if floor_ms - now > self._max_wait_ms:
            raise PyHudiError(
                f"latest instant time {format_instant_time(floor_ms, self.zone)} is {floor_ms - now} ms ahead of the "
                f"clock (instant times in {_zone_name(self.zone)})"
            )
        while now <= floor_ms:
            time.sleep(max(0.0002, (floor_ms - now + 1) / 1000))
            now = self._now_ms()
        return now

    def next(self, floor: str | None = None) -> str:
        """A new instant time, greater than every time issued before and than ``floor``."""
        floor_ms = parse_instant_time(floor, self.zone) if floor else 0
        with self._lock:
            now = self._wait_past(max(self._last_ms, floor_ms))
            self._last_ms = now
            return format_instant_time(now, self.zone)

    @classmethod
    def for_table(cls, config: TableConfig) -> InstantTimeGenerator:
        """A generator of the table's instant times (in its timeline's zone)."""
        return cls(config.timeline_zone)


def _zone_name(zone: tzinfo | None) -> str:
    return "UTC" if zone is UTC else "the local time zone (hoodie.table.timeline.timezone=LOCAL)"


# -- timelines ------------------------------------------------------------------------------------------------
class Timeline:
    """An immutable, ordered view of instants (one entry per requested time: its most advanced state; a savepoint
    is a second one at the time of the commit it saves)."""

    def __init__(self, instants: Iterable[Instant]) -> None:
        self._instants: tuple[Instant, ...] = tuple(sorted(instants, key=lambda i: i.sort_key))

    @property
    def instants(self) -> tuple[Instant, ...]:
        return self._instants

    def __iter__(self) -> Iterator[Instant]:
        return iter(self._instants)

    def __len__(self) -> int:
        return len(self._instants)

    def __bool__(self) -> bool:
        return bool(self._instants)

    def __repr__(self) -> str:
        return f"Timeline({len(self)} instants)"

    def filter(self, pred: Callable[[Instant], bool]) -> Timeline:
        return Timeline(i for i in self._instants if pred(i))

    def completed(self) -> Timeline:
        return self.filter(lambda i: i.is_completed)

    def pending(self) -> Timeline:
        return self.filter(lambda i: not i.is_completed)

    def by_action(self, *actions: str) -> Timeline:
        wanted = set(actions)
        return self.filter(lambda i: i.action in wanted)

    def commits(self) -> Timeline:
        """The commits timeline: commit, deltacommit, replacecommit and pending clustering/compaction."""
        return self.filter(lambda i: i.action in COMMIT_ACTIONS)

    def completed_commits(self) -> Timeline:
        return self.commits().completed()

    def first(self) -> Instant | None:
        return self._instants[0] if self._instants else None

    def last(self) -> Instant | None:
        return self._instants[-1] if self._instants else None

    def get(self, requested_time: str) -> Instant | None:
        """The instant requested at ``requested_time``; a savepoint only if no other instant has that time (a
        savepoint's time is the time of the commit it saves)."""
        for i in self._instants:
            if i.requested_time == requested_time:
                return i
        return None

    def contains(self, requested_time: str) -> bool:
        return self.get(requested_time) is not None

    def is_completed(self, requested_time: str) -> bool:
        i = self.get(requested_time)
        return i is not None and i.is_completed

    def requested_times(self) -> list[str]:
        return [i.requested_time for i in self._instants]

    def latest_time(self) -> str | None:
        """The greatest requested or completion time on the timeline."""
        times = [i.requested_time for i in self._instants] + [
            i.completion_time for i in self._instants if i.completion_time
        ]
        return max(times) if times else None

    def latest_completion_time(self) -> str | None:
        """The greatest completion time on the timeline (None: nothing completed)."""
        return max((i.completion_time for i in self._instants if i.completion_time), default=None)

    def by_completion_time(self) -> list[Instant]:
        """Completed instants in completion order (the order Hudi 1.x applies them)."""
        done = [i for i in self._instants if i.completion_time]
        return sorted(done, key=lambda i: (i.completion_time or "", i.requested_time))


def _latest_states(instants: Iterable[Instant]) -> list[Instant]:
    """Each instant in its most advanced state: the files of one requested time are one instant (a compaction
    completes as a commit), except a savepoint's, which has the requested time of the commit it saves."""
    best: dict[tuple[str, bool], Instant] = {}
    for i in instants:
        key = (i.requested_time, i.action == SAVEPOINT)
        cur = best.get(key)
        if cur is None or i.state > cur.state:
            best[key] = i
    return list(best.values())


class ActiveTimeline(Timeline):
    """The active timeline of a table, loaded from ``<base>/.hoodie/<hoodie.timeline.path>/``."""

    def __init__(self, storage: Storage, timeline_dir: str, files: Sequence[Instant]) -> None:
        super().__init__(_latest_states(files))
        self.storage = storage
        self.timeline_dir = timeline_dir
        self._all = tuple(sorted(files, key=lambda i: i.sort_key))

    @classmethod
    def timeline_dir_for(cls, base_path: str, config: TableConfig | None = None) -> str:
        sub = config.timeline_path if config is not None and config.table_version >= 8 else "timeline"
        if config is not None and config.table_version < 8:
            return posixpath.join(base_path, METAFOLDER)
        return posixpath.join(base_path, METAFOLDER, sub)

    @classmethod
    def load(cls, storage: Storage, base_path: str, config: TableConfig | None = None) -> ActiveTimeline:
        storage = storage.rooted(base_path)  # the timeline's writes and deletes stay inside the table
        if config is None:
            config = read_table_config(storage, posixpath.join(base_path, METAFOLDER))
        if config.timeline_layout_version != 2:
            raise PyHudiError(
                f"{base_path}: timeline layout version {config.timeline_layout_version} is not supported (need 2)"
            )
        return cls.load_dir(storage, cls.timeline_dir_for(base_path, config))

    @classmethod
    def load_dir(cls, storage: Storage, timeline_dir: str) -> ActiveTimeline:
        files = []
        for st in storage.list(timeline_dir):
            if st.is_dir:
                continue
            inst = Instant.parse(st.name)
            if inst is not None:
                files.append(inst)
        return cls(storage, timeline_dir, files)

    def reload(self) -> ActiveTimeline:
        return ActiveTimeline.load_dir(self.storage, self.timeline_dir)

    @property
    def all_instant_files(self) -> tuple[Instant, ...]:
        """Every instant file present (all states), sorted."""
        return self._all

    def path_of(self, instant: Instant) -> str:
        return posixpath.join(self.timeline_dir, instant.file_name)

    # -- reading
    def read_bytes(self, instant: Instant) -> bytes:
        return self.storage.read_bytes(self.path_of(instant))

    def read_content(self, instant: Instant) -> dict[str, Any] | None:
        """The instant file's Avro record as a dict, or None for an empty file."""
        path = self.path_of(instant)
        data = self.storage.read_bytes(path)
        if not data:
            return None
        return avro.read_single(data, path)

    def read_commit_metadata(self, instant: Instant) -> dict[str, Any]:
        """The commit metadata of a completed write instant (commit/deltacommit/replacecommit)."""
        return self.read_completed(instant)

    def read_completed(self, instant: Instant, action: str | None = None) -> dict[str, Any]:
        """The content of a completed instant (of ``action``, if given); an error if it is empty."""
        if not instant.is_completed or (action is not None and instant.action != action):
            raise PyHudiError(f"instant {instant} is not a completed {action or 'instant'}")
        content = self.read_content(instant)
        if content is None:
            raise CorruptFileError(self.path_of(instant), f"completed {instant.action} file is empty")
        return content

    def read_plan(self, action: str, requested_time: str) -> dict[str, Any]:
        """The plan stored in ``<requested_time>.<action>.requested`` (clean, rollback, compaction, ...)."""
        inst = Instant(requested_time, action, State.REQUESTED)
        content = self.read_content(inst)
        if content is None:
            raise CorruptFileError(self.path_of(inst), f"{action} plan is empty")
        return content

    # -- transitions
    def _write(self, instant: Instant, content: Mapping[str, Any] | bytes | None, schema: str | None) -> None:
        if content is None:
            data = b""
        elif isinstance(content, bytes):
            data = content
        else:
            name = schema or instant.content_schema()
            if name is None:
                raise PyHudiError(f"no Avro schema known for the content of {instant}; pass schema=")
            data = avro.write_container(content, name)
        self.storage.write_bytes(self.path_of(instant), data, overwrite=False)

    def create_requested(
        self,
        action: str,
        requested_time: str,
        content: Mapping[str, Any] | bytes | None = None,
        schema: str | None = None,
    ) -> Instant:
        """Write ``<t>.<action>.requested`` (empty unless ``content``). Fails if the instant exists."""
        if any(i.requested_time == requested_time for i in self._all):
            raise StorageError(f"instant {requested_time} already exists in {self.timeline_dir}")
        inst = Instant(requested_time, action, State.REQUESTED)
        self._write(inst, content, schema)
        return inst

    def transition_to_inflight(
        self, instant: Instant, content: Mapping[str, Any] | bytes | None = None, schema: str | None = None
    ) -> Instant:
        """requested -> inflight: write the inflight file (e.g. commit metadata of the planned writes)."""
        if instant.state != State.REQUESTED:
            raise PyHudiError(f"cannot move {instant} to inflight: not requested")
        if not self.storage.exists(self.path_of(instant)):
            raise StorageError(f"requested file of {instant} not found in {self.timeline_dir}")
        inflight = Instant(instant.requested_time, instant.action, State.INFLIGHT)
        self._write(inflight, content, schema)
        return inflight

    def complete(
        self,
        instant: Instant,
        content: Mapping[str, Any] | bytes | None,
        completion_time: str,
        schema: str | None = None,
    ) -> Instant:
        """inflight -> completed: atomically write ``<t>_<completion>.<action>`` with ``content``.

        ``compaction``/``clustering``/``logcompaction`` complete as ``commit``/``replacecommit``/``deltacommit``.
        """
        if instant.state != State.INFLIGHT:
            raise PyHudiError(f"cannot complete {instant}: not inflight")
        if completion_time <= instant.requested_time:
            raise PyHudiError(
                f"completion time {completion_time} must follow requested time {instant.requested_time}"
            )
        if not self.storage.exists(self.path_of(instant)):
            raise StorageError(f"inflight file of {instant} not found in {self.timeline_dir}")
        prefix = f"{instant.requested_time}_"
        if any(st.name.startswith(prefix) for st in self.storage.list(self.timeline_dir)):
            raise StorageError(
                f"instant {instant.requested_time} is already completed in {self.timeline_dir}"
            )
        action = COMPLETED_ACTION.get(instant.action, instant.action)
        done = Instant(instant.requested_time, action, State.COMPLETED, completion_time)
        self._write(done, content, schema)
        return done
