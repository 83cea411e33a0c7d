"""The file-system view: partitions, file groups and file slices of a table, as of an instant.

Two concerns, kept apart so that a metadata-table listing can replace the storage listing later:

1. *where file names come from*: a :class:`FileListing` yields ``partition -> [FileEntry(name, size)]``
   (:class:`StorageListing` lists storage; the metadata table's ``files`` partition can provide the same);
2. *how slices are built from names and the timeline*: :meth:`FileSystemView.build`.

Rules (Hudi 1.x, table versions 8 and 9; checked against the fixture tables and hudi-rs):

- a base or log file is visible only if the instant in its name is completed on the timeline (or older than the
  first instant of the active timeline, i.e. archived) and, for a time-travel view, not after ``as_of``
  (requested times); an incremental read's view also hides instants completed after ``completed_by``;
- file groups named in ``partitionToReplaceFileIds`` of a completed ``replacecommit`` (insert overwrite,
  clustering) at or before ``as_of`` (and completed by ``completed_by``) are excluded entirely;
- a file slice is keyed by the instant of its base file. From table version 8 on a log file names the delta
  commit that wrote it and joins the slice with the greatest base instant <= the log's **completion time** (so
  a log committed after a compaction was scheduled belongs to the compacted slice); with no such slice it starts
  a base-less slice at its own instant. Before version 8 the log file names its base instant directly.
- the completion time of an archived deltacommit (older than the active timeline) comes from the LSM timeline
  (:class:`~pyhudi.table.lsm_timeline.ArchivedCompletionTimes`), read only when it decides a slice: when the log's
  file group has a base file newer than the log's instant (otherwise every candidate slice is the same). A view
  built from a listing where that never happens reads nothing of the archive. An archived deltacommit whose
  completion time is needed but not in the LSM timeline is an error naming the log file, never a guess. A view
  ending at ``completed_by`` (an incremental read's end) also hides the files of archived instants that
  completed after it (their completion times read from the archive too).
- the latest file slice of a group is the one with the greatest base instant.
"""

from __future__ import annotations

import bisect
import posixpath
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from pyhudi.errors import PyHudiError
from pyhudi.io.storage import Storage
from pyhudi.table.filenames import (
    BaseFileName,
    LogFileName,
    is_partition_metafile,
    parse_data_file_name,
)
from pyhudi.table.lsm_timeline import ArchivedCompletionTimes
from pyhudi.table.partition_path import check_partition_path
from pyhudi.table.properties import METAFOLDER, TableConfig, read_table_config
from pyhudi.table.timeline import REPLACE_COMMIT, ActiveTimeline, Timeline


# -- listings -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FileEntry:
    """One file of a partition folder: its name and size in bytes."""

    name: str
    size: int = 0


class FileListing(Protocol):
    """Where file names come from: partition path ("" for the table root) -> the files in that folder."""

    def list_partition_files(self) -> Mapping[str, Sequence[FileEntry]]: ...


class StorageListing:
    """Lists a table's partitions (folders holding a partition metafile, nested allowed) from storage."""

    def __init__(self, storage: Storage, base_path: str) -> None:
        self.base_path = base_path.rstrip("/") or "/"
        self.storage = storage.rooted(self.base_path)

    def list_partition_files(self) -> dict[str, list[FileEntry]]:
        by_dir: dict[str, list[FileEntry]] = defaultdict(list)
        top = self.storage.list(self.base_path)
        for st in top:
            if st.is_dir:
                if st.name == METAFOLDER:
                    continue
                subs = [sub for sub in self.storage.list(st.path, recursive=True) if not sub.is_dir]
                # a ``.hoodie`` folder at any depth below the base path (not above it: a metadata table lives in its
                # data table's) is another table's: left out, and so is everything in that table's folder, unless
                # the folder is also one of this table's partitions (as Hudi's listing, which keeps those)
                cut = len(self.base_path)
                meta = f"/{METAFOLDER}/"
                roots = {p[: p.index(meta, cut) + 1] for p in (sub.path for sub in subs) if meta in p[cut:]}
                if roots:
                    roots -= {posixpath.dirname(sub.path) + "/" for sub in subs if is_partition_metafile(sub.name)}
                for sub in subs:
                    if meta in sub.path[cut:] or any(sub.path.startswith(r) for r in roots):
                        continue
                    by_dir[self._rel(posixpath.dirname(sub.path))].append(FileEntry(sub.name, sub.size))
            else:
                by_dir[""].append(FileEntry(st.name, st.size))
        return {
            part: sorted(files, key=lambda e: e.name)
            for part, files in sorted(by_dir.items())
            if any(is_partition_metafile(e.name) for e in files)
        }

    def _rel(self, path: str) -> str:
        rel = posixpath.relpath(path, self.base_path)
        return "" if rel == "." else rel


@dataclass(frozen=True)
class StaticListing:
    """A listing from a mapping (e.g. built from the metadata table's ``files`` partition)."""

    files: Mapping[str, Sequence[FileEntry]]

    def list_partition_files(self) -> Mapping[str, Sequence[FileEntry]]:
        return self.files


# -- model ----------------------------------------------------------------------------------------------------
def _rel_path(partition: str, name: str) -> str:
    return f"{partition}/{name}" if partition else name


@dataclass(frozen=True)
class BaseFile:
    partition: str
    name: BaseFileName
    size: int = 0

    @property
    def file_name(self) -> str:
        return self.name.name

    @property
    def file_id(self) -> str:
        return self.name.file_id

    @property
    def instant(self) -> str:
        return self.name.instant

    @property
    def relative_path(self) -> str:
        return _rel_path(self.partition, self.file_name)


@dataclass(frozen=True)
class LogFile:
    partition: str
    name: LogFileName
    size: int = 0
    # its deltacommit's completion time; for an archived deltacommit its requested time, unless the real one (read
    # from the LSM timeline) decided the slice: every completion time at or after it gives the same slice then
    completion_time: str | None = None

    @property
    def file_name(self) -> str:
        return self.name.name

    @property
    def file_id(self) -> str:
        return self.name.file_id

    @property
    def instant(self) -> str:
        return self.name.instant

    @property
    def relative_path(self) -> str:
        return _rel_path(self.partition, self.file_name)


@dataclass(frozen=True)
class FileSlice:
    partition: str
    file_id: str
    base_instant: str
    base_file: BaseFile | None
    log_files: tuple[LogFile, ...] = ()

    @property
    def has_log_files(self) -> bool:
        return bool(self.log_files)

    @property
    def total_size(self) -> int:
        return (self.base_file.size if self.base_file else 0) + sum(lf.size for lf in self.log_files)

    @property
    def base_file_path(self) -> str | None:
        """The base file's path relative to the table base path."""
        return self.base_file.relative_path if self.base_file else None

    @property
    def log_file_paths(self) -> tuple[str, ...]:
        return tuple(lf.relative_path for lf in self.log_files)

    @property
    def relative_paths(self) -> tuple[str, ...]:
        base = (self.base_file.relative_path,) if self.base_file else ()
        return base + tuple(lf.relative_path for lf in self.log_files)


@dataclass(frozen=True)
class FileGroup:
    partition: str
    file_id: str
    slices: tuple[FileSlice, ...] = field(default=())  # ascending base instant

    def latest_slice(self, as_of: str | None = None) -> FileSlice | None:
        """The slice with the greatest base instant (at or before ``as_of``)."""
        if as_of is None:
            return self.slices[-1] if self.slices else None
        keys = [s.base_instant for s in self.slices]
        i = bisect.bisect_right(keys, as_of)
        return self.slices[i - 1] if i else None


# -- the view -------------------------------------------------------------------------------------------------
ReplaceEvents = Sequence[tuple[str, Mapping[str, Sequence[str]]]]


def replace_events(timeline: ActiveTimeline) -> list[tuple[str, dict[str, list[str]]]]:
    """(requested time, partition -> replaced file ids) of every completed replacecommit."""
    out = []
    for inst in timeline.completed().by_action(REPLACE_COMMIT):
        meta = timeline.read_commit_metadata(inst)
        out.append((inst.requested_time, dict(meta.get("partitionToReplaceFileIds") or {})))
    return out


def _replaced_as_of(
    events: ReplaceEvents,
    as_of: str | None,
    completed_by: str | None = None,
    completion: Mapping[str, str] | None = None,
) -> dict[str, frozenset[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for t, parts in events:
        if as_of is not None and t > as_of:
            continue
        if completed_by is not None and (completion or {}).get(t, t) > completed_by:
            continue
        for part, ids in parts.items():
            out[part].update(ids or ())
    return {p: frozenset(ids) for p, ids in out.items()}


def replaced_file_groups(timeline: ActiveTimeline, as_of: str | None = None,
                         completed_by: str | None = None) -> dict[str, frozenset[str]]:
    """partition -> file ids replaced by completed replacecommits (requested at or before ``as_of``; completed by
    ``completed_by``, a completion time)."""
    completion = None
    if completed_by is not None:
        completion = {i.requested_time: i.completion_time or i.requested_time
                      for i in timeline.completed().by_action(REPLACE_COMMIT)}
    return _replaced_as_of(replace_events(timeline), as_of, completed_by, completion)


#: requested times -> completion times of the archived instants among them that it finds (the LSM timeline's:
#: :class:`~pyhudi.table.lsm_timeline.ArchivedCompletionTimes`)
ArchivedCompletions = Callable[[Iterable[str]], Mapping[str, str]]


class ArchiveCoverage(Protocol):
    """An archived timeline that also says the earliest instant it covers (``None``: none)."""

    def __call__(self, instants: Iterable[str]) -> Mapping[str, str]: ...

    def earliest(self) -> str | None: ...


@dataclass(frozen=True)
class _Source:
    partition_files: Mapping[str, Sequence[FileEntry]]
    timeline: Timeline
    events: ReplaceEvents
    table_version: int
    archived: ArchivedCompletions | None = None
    table: str = ""


class _Completion:
    """Completion times of the commits timeline; archived (pre-timeline) instants count as completed."""

    def __init__(self, timeline: Timeline, as_of: str | None, completed_by: str | None = None) -> None:
        self._done = {
            i.requested_time: i.completion_time or i.requested_time for i in timeline if i.is_completed
        }
        self._known = {i.requested_time for i in timeline}
        first = timeline.first()
        self._start = first.requested_time if first is not None else None
        self._as_of = as_of
        self._completed_by = completed_by
        self.answered_archived = False  # whether completion_time() answered for an archived instant
        #: when set, the pre-timeline instants the archived timeline holds: only those count as archived
        self.held_archived: frozenset[str] | None = None

    def is_archived(self, instant: str) -> bool:
        """Older than the active timeline and not on it: archived, hence completed (with
        :attr:`held_archived`, only if the archived timeline holds it)."""
        return (instant not in self._known and self._start is not None and instant < self._start
                and (self.held_archived is None or instant in self.held_archived))

    def verify_archived(self, partition_files: Mapping[str, Sequence[FileEntry]], archived: ArchiveCoverage) -> None:
        """Count as archived only the pre-timeline instants of ``partition_files`` that ``archived`` holds, or
        that are older than all it covers (nothing shows those were not completed)."""
        old = set()
        for entries in partition_files.values():
            for e in entries:
                parsed = parse_data_file_name(e.name)
                if parsed is not None and self.is_archived(parsed.instant):
                    old.add(parsed.instant)
        first = archived.earliest() if old else None
        covered = {t for t in old if first is not None and t >= first}
        held = set(archived(covered)) if covered else set()
        self.held_archived = frozenset(held | (old - covered))

    def completion_time(self, instant: str) -> str | None:
        """The completion time, or None if the instant is not completed (or after ``as_of``, or completed after
        ``completed_by``). An archived instant answers its requested time (its completion time is not before it;
        :meth:`FileSystemView.build` reads the real one where it decides a log file's slice)."""
        if self._as_of is not None and instant > self._as_of:
            return None
        done = self._done.get(instant)
        if done is not None:
            return done if self._completed_by is None or done <= self._completed_by else None
        if self.is_archived(instant):
            self.answered_archived = True
            return instant
        return None

    def visible_archived(self, completion: str) -> bool:
        """Whether an archived instant that completed at ``completion`` is within ``completed_by``."""
        return self._completed_by is None or completion <= self._completed_by


class FileSystemView:
    """An immutable view of a table's file groups, built from a listing and the timeline."""

    def __init__(
        self,
        groups: Mapping[str, Sequence[FileGroup]],
        as_of: str | None = None,
        source: _Source | None = None,
        completed_by: str | None = None,
    ) -> None:
        self._groups: dict[str, tuple[FileGroup, ...]] = {
            p: tuple(sorted(gs, key=lambda g: g.file_id)) for p, gs in sorted(groups.items())
        }
        self.as_of = as_of
        self.completed_by = completed_by
        self._source = source

    # -- construction -----------------------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        storage: Storage,
        base_path: str,
        *,
        timeline: ActiveTimeline | None = None,
        config: TableConfig | None = None,
        as_of: str | None = None,
        listing: FileListing | None = None,
    ) -> FileSystemView:
        """The view of the table at ``base_path``, listing storage unless ``listing`` is given."""
        storage = storage.rooted(base_path)
        if config is None:
            config = read_table_config(storage, posixpath.join(base_path, METAFOLDER))
        if timeline is None:
            timeline = ActiveTimeline.load(storage, base_path, config)
        if listing is None:
            listing = StorageListing(storage, base_path)
        files = {p: list(es) for p, es in listing.list_partition_files().items()}
        source = _Source(files, timeline.commits(), replace_events(timeline), config.table_version,
                         ArchivedCompletionTimes(storage, base_path, config), base_path)
        return cls._from_source(source, as_of)

    @classmethod
    def from_listing(
        cls,
        storage: Storage,
        base_path: str,
        timeline: ActiveTimeline | None = None,
        *,
        config: TableConfig | None = None,
        as_of: str | None = None,
    ) -> FileSystemView:
        """:meth:`load` with the storage listing (the timeline as third positional argument)."""
        return cls.load(storage, base_path, timeline=timeline, config=config, as_of=as_of)

    @classmethod
    def _from_source(cls, source: _Source, as_of: str | None, completed_by: str | None = None) -> FileSystemView:
        completion = {i.requested_time: i.completion_time or i.requested_time for i in source.timeline
                      if i.is_completed}
        view = cls.build(
            source.partition_files,
            source.timeline,
            replaced=_replaced_as_of(source.events, as_of, completed_by, completion),
            table_version=source.table_version,
            as_of=as_of,
            completed_by=completed_by,
            archived=source.archived,
            table=source.table,
        )
        view._source = source
        return view

    def at(self, as_of: str | None, *, completed_by: str | None = None) -> FileSystemView:
        """The same table as of another instant (files, replaces and logs after ``as_of`` invisible), and, with
        ``completed_by``, without the instants completed after that time (an incremental read's end)."""
        if as_of == self.as_of and completed_by == self.completed_by:
            return self
        if self._source is None:
            raise ValueError("this view was built without its listing and timeline; use build(as_of=...)")
        return FileSystemView._from_source(self._source, as_of, completed_by)

    @classmethod
    def build(
        cls,
        partition_files: Mapping[str, Iterable[FileEntry]],
        timeline: Timeline,
        *,
        replaced: Mapping[str, Iterable[str]] | None = None,
        table_version: int = 9,
        as_of: str | None = None,
        completed_by: str | None = None,
        archived: ArchivedCompletions | None = None,
        table: str = "",
        verify_archived: ArchiveCoverage | None = None,
    ) -> FileSystemView:
        """Build file groups from ``partition -> files`` and the (commits) timeline. ``archived``: where the
        completion times of archived deltacommits are looked up when one decides a log file's slice (without it
        such a log file is an error); ``table`` names the table in errors. ``verify_archived`` (the archived
        timeline): a file whose instant is older than the active timeline is visible only if that timeline holds
        its instant or does not cover it (a view that decides what to delete: a file a rolled-back writer left
        behind, once archival passed its instant, is not a committed file version)."""
        completion = _Completion(timeline, as_of, completed_by)
        if verify_archived is not None:
            listed = {p: list(es) for p, es in partition_files.items()}
            completion.verify_archived(listed, verify_archived)
            partition_files = listed
        replaced_sets = {p: frozenset(ids) for p, ids in (replaced or {}).items()}
        groups: dict[str, list[FileGroup]] = {}
        # partitions whose groups wait for archived completion times (all of them for a view ending at completed_by)
        deferred: dict[str, tuple[dict[str, list[BaseFile]], dict[str, list[LogFile]]]] = {}
        hide_late = completed_by is not None and archived is not None
        undecided: set[str] = set()  # archived deltacommits whose completion time decides a log file's slice
        for partition, entries in partition_files.items():
            # the listing may come from a metadata table someone else wrote: a partition leading out is refused
            check_partition_path(partition, "the table's file listing", "partition")
            bases: dict[str, list[BaseFile]] = defaultdict(list)
            logs: dict[str, list[LogFile]] = defaultdict(list)
            skip = replaced_sets.get(partition, frozenset())
            for e in entries:
                parsed = parse_data_file_name(e.name)
                if parsed is None or parsed.file_id in skip:
                    continue
                done = completion.completion_time(parsed.instant)
                if done is None:
                    continue
                if isinstance(parsed, BaseFileName):
                    bases[parsed.file_id].append(BaseFile(partition, parsed, e.size))
                else:
                    logs[parsed.file_id].append(LogFile(partition, parsed, e.size, done))
            if not hide_late and table_version >= 8 and completion.answered_archived:
                found = set(_undecided_logs(bases, logs, completion))
                if found:
                    undecided |= found
                    deferred[partition] = (bases, logs)
                    continue
            if hide_late:
                deferred[partition] = (bases, logs)
                continue
            groups[partition] = _build_groups(partition, bases, logs, table_version)
        if deferred:
            if hide_late:
                assert archived is not None
                _hide_archived_completed_after(deferred, completion, archived)
                if table_version >= 8:
                    for bases, logs in deferred.values():
                        undecided.update(_undecided_logs(bases, logs, completion))
            if undecided:
                _place_archived_logs(deferred, undecided, archived, table)
            for partition, (bases, logs) in deferred.items():
                groups[partition] = _build_groups(partition, bases, logs, table_version)
        return cls(groups, as_of, completed_by=completed_by)

    # -- queries ----------------------------------------------------------------------------------------------
    def partitions(self) -> list[str]:
        return list(self._groups)

    def file_groups(self, partition: str | None = None) -> list[FileGroup]:
        if partition is not None:
            return list(self._groups.get(partition, ()))
        return [g for gs in self._groups.values() for g in gs]

    def __iter__(self) -> Iterator[FileGroup]:
        return iter(self.file_groups())

    def latest_file_slices(self, partition: str | None = None, as_of: str | None = None) -> list[FileSlice]:
        """The latest slice of every file group (of ``partition``), of this view or as of ``as_of``."""
        if as_of is not None and as_of != self.as_of:
            return self.at(as_of).latest_file_slices(partition)
        out = []
        for g in self.file_groups(partition):
            s = g.latest_slice()
            if s is not None:
                out.append(s)
        return out

    def latest_base_files(self, partition: str | None = None, as_of: str | None = None) -> list[BaseFile]:
        return [s.base_file for s in self.latest_file_slices(partition, as_of) if s.base_file is not None]

    def file_group(self, partition: str, file_id: str) -> FileGroup | None:
        for g in self._groups.get(partition, ()):
            if g.file_id == file_id:
                return g
        return None


def _undecided_logs(
    bases: Mapping[str, list[BaseFile]], logs: Mapping[str, list[LogFile]], completion: _Completion
) -> Iterator[str]:
    """Instants of archived deltacommits whose completion time decides a log file's slice: the log's file group
    has a base file newer than the log's instant (with none, every completion time >= the instant gives the same
    slice). Logs already given their archived completion time are decided."""
    for fid, lfs in logs.items():
        newest = max((b.instant for b in bases.get(fid, ())), default=None)
        if newest is None:
            continue
        for lf in lfs:
            if lf.instant < newest and lf.completion_time == lf.instant and completion.is_archived(lf.instant):
                yield lf.instant


_Listed = Mapping[str, tuple[dict[str, list[BaseFile]], dict[str, list[LogFile]]]]


def _hide_archived_completed_after(listed: _Listed, completion: _Completion, archived: ArchivedCompletions) -> None:
    """A view ending at ``completed_by`` (an incremental read's end): the files of archived instants that
    completed after it are hidden, and log files get their archived completion times. An archived instant the
    LSM timeline does not hold stays visible (completed, as before the archive knew completion times)."""
    names: set[str] = set()
    for bases, logs in listed.values():
        names.update(b.instant for bs in bases.values() for b in bs if completion.is_archived(b.instant))
        names.update(lf.instant for lfs in logs.values() for lf in lfs if completion.is_archived(lf.instant))
    if not names:
        return
    found = archived(names)
    for bases, logs in listed.values():
        for fid, bs in bases.items():
            bases[fid] = [b for b in bs if b.instant not in found or completion.visible_archived(found[b.instant])]
        for fid, lfs in logs.items():
            logs[fid] = [lf if lf.instant not in found else replace(lf, completion_time=found[lf.instant])
                         for lf in lfs if lf.instant not in found or completion.visible_archived(found[lf.instant])]


def _place_archived_logs(
    listed: _Listed, undecided: set[str], archived: ArchivedCompletions | None, table: str
) -> None:
    """Give the log files of the ``undecided`` archived deltacommits their completion times from the archive;
    refuse one whose completion time is unknown."""
    found = dict(archived(undecided)) if archived is not None else {}
    for _, logs in listed.values():
        for fid, lfs in logs.items():
            placed: list[LogFile] = []
            for lf in lfs:
                if lf.instant in undecided:
                    done = found.get(lf.instant)
                    if done is None:
                        where = f"{table}: " if table else ""
                        raise PyHudiError(
                            f"{where}log file {lf.relative_path} was written by deltacommit {lf.instant}, which "
                            "is older than the active timeline and "
                            + ("not in the archived timeline (LSM timeline)" if archived is not None else "archived")
                            + ": its completion time, which decides its file slice, is unknown"
                        )
                    lf = replace(lf, completion_time=done)
                placed.append(lf)
            logs[fid] = placed


def _build_groups(
    partition: str, bases: Mapping[str, list[BaseFile]], logs: Mapping[str, list[LogFile]], table_version: int
) -> list[FileGroup]:
    fgs = [
        _build_group(partition, fid, bases.get(fid, []), logs.get(fid, []), table_version)
        for fid in sorted(set(bases) | set(logs))
    ]
    return [g for g in fgs if g.slices]


def _build_group(
    partition: str, file_id: str, bases: list[BaseFile], logs: list[LogFile], table_version: int
) -> FileGroup:
    base_by_instant: dict[str, BaseFile] = {}
    for b in sorted(bases, key=lambda b: (b.instant, b.name.write_token)):
        base_by_instant[b.instant] = b  # one base file per instant; a duplicate (retry) keeps the last token
    keys = sorted(base_by_instant)
    slice_logs: dict[str, list[LogFile]] = defaultdict(list)
    for lf in sorted(logs, key=lambda lf: lf.name.sort_key):
        if table_version >= 8:
            target = lf.completion_time or lf.instant
            i = bisect.bisect_right(keys, target)
            key = keys[i - 1] if i else lf.instant
        else:
            key = lf.instant
        if key not in base_by_instant and key not in slice_logs:
            bisect.insort(keys, key)
        slice_logs[key].append(lf)
    slices = tuple(
        FileSlice(
            partition,
            file_id,
            k,
            base_by_instant.get(k),
            tuple(sorted(slice_logs.get(k, ()), key=lambda lf: lf.name.sort_key)),
        )
        for k in sorted(set(base_by_instant) | set(slice_logs))
    )
    return FileGroup(partition, file_id, slices)
