"""Scan planning: which file slices a query reads, and what every slice read must know.

- **snapshot** (latest, or time travel ``as_of``): the latest slice of every file group not replaced, with the
  files and log blocks of the commits requested at or before ``as_of`` (and completed);
- **read-optimized**: the same slices' base files only (a log-only file group contributes nothing; under a
  pending compaction the previous base file);
- **incremental** (``start``, ``end``]: Hudi 1.x (table version 8+) compares *completion* times: the commits
  completed after ``start`` and at or before ``end`` are in range; the slices touched by them are read as of
  ``end`` (files, replaces and log blocks of instants completed by ``end``) and only records whose
  ``_hoodie_commit_time`` is one of those commits are returned;
- **point read** by keys: the file groups the record index names (all file groups when the table has none),
  their slices read for those keys only.

A :class:`ScanPlan` is what Spark ships to its tasks: the :class:`~pyhudi.read.slice_reader.ReadSpec` (storage,
base path, output schema, merge mode and ordering fields, the instants whose log blocks count, filters) and one
:class:`~pyhudi.read.slice_reader.SliceSpec` per slice (relative paths).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol, TypeVar

import pyarrow as pa

from pyhudi import faults
from pyhudi.errors import (
    InvalidInputError,
    PyHudiError,
    StorageError,
    TableChangedError,
    UnsupportedFormatError,
)
from pyhudi.read.logscan import CommittedInstants
from pyhudi.read.merge import MergeConfig
from pyhudi.read.slice_reader import FileSliceReader, ReadSpec, SliceSpec
from pyhudi.table.capabilities import check_readable
from pyhudi.table.commit_metadata import touched_file_groups
from pyhudi.table.internal_schema import with_archived
from pyhudi.table.properties import METAFOLDER, read_table_config
from pyhudi.table.schema import resolve_schema, table_schema, with_meta
from pyhudi.table.timeline import CLEAN, RESTORE, ROLLBACK, ActiveTimeline, Instant

if TYPE_CHECKING:
    from pyhudi.io.storage import Storage
    from pyhudi.table.fsview import FileSlice, FileSystemView
    from pyhudi.table.lsm_timeline import FullTimeline
    from pyhudi.table.properties import TableConfig


class TableLike(Protocol):
    """What a scan plan needs of a table (:class:`pyhudi.table.table.Table` is one, :class:`TableFiles` another)."""

    storage: Storage
    base_path: str
    config: TableConfig

    def timeline(self) -> ActiveTimeline: ...

    def schema(self) -> pa.Schema: ...

    def view(self, timeline: ActiveTimeline | None = None) -> FileSystemView: ...


@dataclass
class TableFiles:
    """A table as storage, base path and properties (for services that work below the ``Table`` facade)."""

    storage: Storage
    base_path: str
    config: TableConfig

    def timeline(self) -> ActiveTimeline:
        return ActiveTimeline.load(self.storage, self.base_path, self.config)

    def schema(self) -> pa.Schema:
        return table_schema(self.storage, self.base_path, self.config, self.timeline())

    def view(self, timeline: ActiveTimeline | None = None) -> FileSystemView:
        from pyhudi.metadata.reader import table_view

        return table_view(self.storage, self.base_path, self.config, timeline or self.timeline())


def open_table(uri: str) -> TableFiles:
    """The table at ``uri`` (a path or URI) as :class:`TableFiles`, its storage rooted at the base path."""
    from pyhudi.io.storage import Storage

    storage, path = Storage.from_uri(uri)
    meta = posixpath.join(path, METAFOLDER)
    if not (storage.exists(posixpath.join(meta, "hoodie.properties"))
            or storage.exists(posixpath.join(meta, "hoodie.properties.backup"))):
        raise PyHudiError(f"no Hudi table at {uri} (missing {METAFOLDER}/hoodie.properties)")
    path = path.rstrip("/") or "/"
    storage = storage.rooted(path)
    return TableFiles(storage, path, read_table_config(storage, meta))


T = TypeVar("T")

#: how many times a read is planned before it gives up on a table whose timeline changes every time
PLAN_ATTEMPTS = 8


def planned(table: TableLike, plan_with: Callable[[ActiveTimeline], T]) -> T:
    """``plan_with(timeline)`` on a timeline that did not change, in a way that matters, while it ran.

    A plan loads the timeline, then reads the file listing (the metadata table or storage) and the record index:
    both are the table's latest state, not its state as of that timeline. A clean completing in between deletes
    file versions the timeline still names (a file group whose only version it sees would be left out, silently),
    and a metadata compaction folds commits the timeline does not see yet into the base files the listing and the
    record index are read from (a key deleted by a later commit would be missing, a moved key located in its new
    file group). So the timeline is listed again after planning, and the read planned again on the new one when an
    instant completed or went, or a clean, rollback or restore appeared or moved on (:func:`_changed`); so is a
    plan that found a file gone or, for a split scan, other file slices than the other half, when the timeline
    changed meanwhile. A write that only began is not a change: nothing it writes is listed or indexed before it
    completes. A clean, compaction or archival that began before the first listing cannot bite: it was planned on
    a state that timeline holds (a clean only deletes versions that state had superseded; a time travel older
    than what a pending clean keeps is refused by :func:`check_retained`)."""
    tl = table.timeline()
    for attempt in range(PLAN_ATTEMPTS):
        if attempt:  # the table's properties may have changed too (a metadata partition dropped, say)
            table.config = read_table_config(table.storage, posixpath.join(table.base_path, METAFOLDER))
        faults.at("read.after_timeline")
        failure: PyHudiError | None = None
        try:
            result = plan_with(tl)
        except (StorageError, TableChangedError) as e:  # a file gone, or a split scan's halves differ: a change?
            failure = e
        after = tl.reload()
        if not _changed(tl, after):
            if failure is not None:
                raise failure
            return result
        tl = after
    raise TableChangedError(
        f"{table.base_path}: the table's timeline changed while the read was planned, {PLAN_ATTEMPTS} times in a "
        "row (commits or table services completing faster than the read is planned); nothing was read: run it "
        "again")


def _changed(before: ActiveTimeline, after: ActiveTimeline) -> bool:
    """Whether ``after`` differs from ``before`` in what a plan reads: an instant completed or a file went (a
    rollback, an archival), or a clean, rollback or restore appeared or moved on (it may be deleting files)."""
    old, new = set(before.all_instant_files), set(after.all_instant_files)
    if old - new:
        return True
    return any(i.is_completed or i.action in (CLEAN, ROLLBACK, RESTORE) for i in new - old)


def rollback_pending(tl: ActiveTimeline) -> bool:
    """Whether a rollback or restore is pending: one of a completed commit (a Java writer's) deletes that commit's
    files after reverting it to inflight, while the record index may still locate keys where it wrote them, so
    reads then find keys without the record index."""
    return bool(tl.pending().by_action(ROLLBACK, RESTORE))


def as_of_instant(base_path: str, as_of: str | None) -> str | None:
    """``as_of`` as an instant time: an instant (``yyyyMMddHHmmss[SSS]``) or ``yyyy-MM-dd[ HH:mm:ss[.SSS]]``
    (as Hudi's ``as.of.instant``); the read sees the commits at or before it."""
    if as_of is None:
        return None
    return _instant_time(base_path, as_of, f"cannot read as of {as_of!r}")


def _instant_time(base_path: str, value: str, what: str) -> str:
    """``value`` (an instant ``yyyyMMddHHmmss[SSS]`` or a time ``yyyy-MM-dd[ HH:mm:ss[.SSS]]``, a real date and
    time) as an instant time the timeline's times compare with as strings. A time becomes the 17-digit instant of
    its first millisecond; an instant is taken as it is, as Hudi's ``formatQueryInstant`` takes it: one of
    seconds (14 digits) sorts before every 17-digit instant of its second, so a read as of it, or a range
    beginning or ending at it, stops before that second, as in Hudi and hudi-rs."""
    import datetime as dt
    import re

    raw = str(value).strip()
    m = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?)?", raw)
    if m:
        y, mo, d, h, mi, sec, ms = m.groups()
        raw = f"{y}{mo}{d}{h or '00'}{mi or '00'}{sec or '00'}{(ms or '0').ljust(3, '0') if h else '000'}"
    ok = re.fullmatch(r"\d{14}(\d{3})?", raw) is not None
    if ok:
        try:
            dt.datetime.strptime(raw[:14], "%Y%m%d%H%M%S")
        except ValueError:
            ok = False
    if not ok:
        raise InvalidInputError(
            f"{base_path}: {what}: expected an instant (yyyyMMddHHmmss[SSS]) or a time yyyy-MM-dd[ HH:mm:ss[.SSS]]"
        )
    return raw


def incremental_bound(base_path: str, value: str, option: str) -> str:
    """An incremental query's begin or end (``option`` names it in errors) as a time its commits' completion
    times compare with: an instant or a time as :func:`as_of_instant` takes them, or ``0`` (any run of zeros) or
    ``earliest`` for the table's beginning."""
    raw = str(value).strip()
    if raw.lower() == "earliest" or (raw and set(raw) == {"0"}):
        return "0"
    return _instant_time(base_path, raw, f"{option}={value!r}")


def history(table: TableLike, active: ActiveTimeline) -> ActiveTimeline | FullTimeline:
    """``active``, or the archived instants and the active ones when instants were archived."""
    from pyhudi.table.lsm_timeline import FullTimeline, LsmHistory

    if LsmHistory.for_table(table.storage, table.base_path, table.config).latest_version() > 0:
        return FullTimeline.load(table.storage, table.base_path, table.config, active)
    return active


def check_retained(table: TableLike, as_of: str | None, tl: ActiveTimeline, what: str | None = None,
                   cleaned: tuple[Instant | None, str] | None = None) -> None:
    """Refuse a read as of a time cleaning may have removed file versions of (Hudi's
    ``validateTimestampAsOf``): before the earliest commit to retain of the latest completed clean. ``what``:
    the read, in the message (a time travel's by default). A time travel (no ``what``) is refused too at or after
    the first incomplete write: its result could change once that write completes. ``cleaned``: what
    :func:`_cleaned_before` returns, when the caller has it."""
    if as_of is None:
        return
    from pyhudi.table.timeline import COMMIT, DELTA_COMMIT, REPLACE_COMMIT

    pending = tl.pending().by_action(COMMIT, DELTA_COMMIT, REPLACE_COMMIT).first() if what is None else None
    if pending is not None and as_of >= pending.requested_time:
        # it may still complete: the same time travel would then read other rows (Hudi refuses it too)
        raise InvalidInputError(
            f"{table.base_path}: cannot read as of {as_of}: the {pending.action} {pending.requested_time} is not "
            "complete, and a time travel must be earlier than the first incomplete commit (it may still complete "
            f"and change what the read returns); read as of a time before {pending.requested_time}")
    last, retained = cleaned if cleaned is not None else _cleaned_before(table, tl)
    if last is not None and retained and as_of < retained:
        if what is not None:
            raise InvalidInputError(
                f"{table.base_path}: {what} was requested before {retained}, and cleaning ({last.requested_time}) "
                f"removed the file versions older than that commit (hoodie.cleaner.commits.retained); a range "
                f"read must hold a commit requested at or after {retained}")
        raise InvalidInputError(
            f"{table.base_path}: cannot read as of {as_of}: cleaning ({last.requested_time}) removed the file "
            f"versions older than {retained} (hoodie.cleaner.commits.retained); read as of {retained} or later"
        )


def _cleaned_before(table: TableLike, tl: ActiveTimeline,
                    full: ActiveTimeline | FullTimeline | None = None) -> tuple[Instant | None, str]:
    """(the latest clean, its earliest commit to retain): cleaning removed the file versions that commits
    requested before that one replaced. A pending clean counts once it is newer than the latest completed one: it
    may be deleting those versions now (its plan names the commit it keeps). (None, "") when the table was never
    cleaned. ``full``: the history, when the caller has it."""
    source: ActiveTimeline | FullTimeline = tl
    last = tl.completed().by_action(CLEAN).last()
    if last is None:  # the latest clean may have been archived
        source = full if full is not None else history(table, tl)
        last = source.completed().by_action(CLEAN).last() if source is not tl else None
    retained = "" if last is None else str(source.read_completed(last, CLEAN).get("earliestCommitToRetain") or "")
    for pending in tl.pending().by_action(CLEAN):
        plan = tl.read_plan(CLEAN, pending.requested_time).get("earliestInstantToRetain") or {}
        keeps = str(plan.get("timestamp") or "") if isinstance(plan, dict) else ""
        if keeps > retained:
            last, retained = pending, keeps
    if last is None:
        return None, ""
    return last, retained


def check_versions_kept(table: TableLike, tl: ActiveTimeline, as_of: str, slices: Sequence[FileSlice], *,
                        what: str | None = None, groups: set[tuple[str, str]] | None = None,
                        completion: Mapping[str, str] | None = None) -> None:
    """Refuse a time travel to ``as_of`` that needs a file version a clean keeping the latest versions of each
    file group (``KEEP_LATEST_FILE_VERSIONS``, a Java writer's) deleted. Such a clean records no commit to retain
    for :func:`check_retained` to compare with, and the listing no longer holds the version: the file group would
    be left out of the read, or read at an older version, silently. A deleted file of a commit at or before
    ``as_of`` was needed unless the read's slice of its file group is newer, or the group was replaced by then.
    The cleans of the active timeline are read (an archived one is not).

    An incremental range, read as the table was at its end (``as_of``, a completion time): ``what`` names it in
    the message, only its file groups (``groups``) count, and a file counts when its commit had completed by then
    (``completion``: requested time -> completion time)."""
    from pyhudi.table.filenames import parse_data_file_name
    from pyhudi.table.fsview import replaced_file_groups

    cleans = list(tl.completed().by_action(CLEAN))
    if not cleans:
        return
    kept = {(s.partition, s.file_id): s.base_instant for s in slices}
    replaced: dict[str, frozenset[str]] | None = None
    for clean_instant in cleans:
        md = tl.read_completed(clean_instant, CLEAN)
        for part, pm in (md.get("partitionMetadata") or {}).items():
            if not isinstance(pm, dict) or str(pm.get("policy") or "") != "KEEP_LATEST_FILE_VERSIONS":
                continue
            for path in pm.get("successDeleteFiles") or ():
                f = parse_data_file_name(posixpath.basename(str(path)))
                if f is None or (groups is not None and (part, f.file_id) not in groups):
                    continue
                done = f.instant if completion is None else completion.get(f.instant, f.instant)
                if done > as_of:
                    continue
                newer = kept.get((part, f.file_id))
                if newer is not None and newer > f.instant:
                    continue
                if replaced is None:  # by the time the read is as of: a range's end is a completion time
                    replaced = (replaced_file_groups(tl, as_of) if completion is None
                                else replaced_file_groups(tl, completed_by=as_of))
                if f.file_id in replaced.get(part, frozenset()):
                    continue
                deleted = posixpath.join(part, posixpath.basename(str(path)))
                if what is not None:
                    raise InvalidInputError(
                        f"{table.base_path}: {what}: the clean {clean_instant.requested_time} "
                        f"(KEEP_LATEST_FILE_VERSIONS) deleted {deleted}, a file version the range reads; end the "
                        f"range at {clean_instant.completion_time or clean_instant.requested_time} or later")
                raise InvalidInputError(
                    f"{table.base_path}: cannot read as of {as_of}: the clean {clean_instant.requested_time} "
                    f"(KEEP_LATEST_FILE_VERSIONS) deleted {deleted}, "
                    f"a file version the table had then; read as of {clean_instant.requested_time} or later")


def incremental_checked(table: TableLike, start: str, end: str | None,
                        timeline: ActiveTimeline | None = None) -> ScanPlan:
    """:func:`incremental` over the full history, between ``start`` and ``end`` as :func:`incremental_bound`
    reads them. Refused when cleaning may have removed file versions it reads: when its commits all precede what
    cleaning kept, or when a commit requested before that completed only after ``end`` and wrote or replaced a
    file group the range's commits wrote (the range is read as the table was at ``end``, from the file versions
    that commit superseded and cleaning then removed)."""
    import pyhudi.config as C

    start = incremental_bound(table.base_path, start, C.READ_BEGIN_INSTANT)
    end = None if end is None else incremental_bound(table.base_path, end, C.READ_END_INSTANT)
    if timeline is None:
        return planned(table, lambda tl: _incremental_checked(table, start, end, tl))
    return _incremental_checked(table, start, end, timeline)


def _incremental_checked(table: TableLike, start: str, end: str | None, tl: ActiveTimeline) -> ScanPlan:
    """:func:`incremental_checked` on the timeline ``tl``, its bounds read."""
    full = history(table, tl)
    done, touched = _commits_in_range(full, start, end)
    what = f"cannot read the incremental range ({start}, {end or 'now'}]"
    plan = _incremental_plan(table, tl, end, done, touched, checked=(what, full))
    if not done:  # nothing in range: nothing is read
        return plan
    cleaned = _cleaned_before(table, tl, full)
    latest = max(i.requested_time for i in done)
    check_retained(table, latest, tl, what=f"{what}: its latest commit, {latest},", cleaned=cleaned)
    last, retained = cleaned
    if end is None or last is None or not retained:
        return plan
    late = [i for i in full.completed_commits()
            if i.requested_time < retained and i.completion_time is not None and i.completion_time > end
            and not touched.isdisjoint(touched_file_groups(full.read_commit_metadata(i)))]
    if late:
        first = min(late, key=lambda i: i.completion_time or "")
        latest_end = max(i.completion_time or "" for i in late)
        raise InvalidInputError(
            f"{table.base_path}: {what}: it is read as the table was at its end, before the {first.action} "
            f"{first.requested_time} completed ({first.completion_time}) and wrote or replaced file groups the "
            f"range's commits wrote; that commit was requested before {retained}, so cleaning ({last.requested_time}) "
            f"removed the file versions the range needs (hoodie.cleaner.commits.retained); end the range at "
            f"{latest_end} or later")
    return plan


def _written_file_groups(meta: dict) -> set[tuple[str, str]]:
    """(partition, file id) of every file group a commit's write stats name."""
    return {(st.get("partitionPath") or part, st["fileId"])
            for part, stats in (meta.get("partitionToWriteStats") or {}).items() for st in stats or ()
            if st.get("fileId")}


@dataclass(frozen=True)
class ScanPlan:
    read: ReadSpec
    slices: tuple[SliceSpec, ...]

    def batches(self) -> Iterator[pa.RecordBatch]:
        """Every slice read here, one after another (driver-local)."""
        for sl in self.slices:
            yield from FileSliceReader(self.read, sl).batches()

    def to_arrow(self) -> pa.Table:
        return pa.Table.from_batches(list(self.batches()), schema=self.read.schema)

    def project(self, columns: Sequence[str]) -> ScanPlan:
        """The same read returning only ``columns`` (plus what the merge needs: the ordering fields)."""
        keep = set(columns) | set(self.read.merge.ordering_fields)
        schema = pa.schema([f for f in self.read.schema if f.name in keep])
        return ScanPlan(replace(self.read, schema=schema), self.slices)


def _spec(table: TableLike, timeline: ActiveTimeline, as_of: str | None = None, **kw: object) -> ReadSpec:
    """The read's description; its schema is the table's latest (``as_of``: the schema of that instant, as time
    travel reads), through which every file is read (:func:`pyhudi.read.slice_reader.conform`)."""
    cfg = table.config
    check_readable(table.base_path, cfg)
    if not cfg.populate_meta_fields:
        raise UnsupportedFormatError(
            f"{table.base_path}: hoodie.populate.meta.fields=false (records without Hudi's meta columns) is not "
            "supported by pyhudi's reader"
        )
    if cfg.base_file_format.strip().upper() != "PARQUET":
        raise UnsupportedFormatError(
            f"{table.base_path}: hoodie.table.base.file.format={cfg.base_file_format}; pyhudi reads parquet base "
            "files only"
        )
    data, sor = resolve_schema(table.storage, table.base_path, cfg, timeline, as_of=as_of)
    schema = with_meta(data)
    merge = MergeConfig.of_table(table.config, schema, table.base_path)
    instants = kw.pop("instants", None) or CommittedInstants.of(timeline.commits())
    return ReadSpec(table.storage, table.base_path, schema, merge, instants,  # type: ignore[arg-type]
                    schema_on_read=sor, **kw)  # type: ignore[arg-type]


def _for_slices(table: TableLike, spec: ReadSpec, slices: Sequence[FileSlice]) -> ReadSpec:
    """A schema-on-read read's description, able to map the files of ``slices``: the schemas of their archived
    commits are read here, on the driver (:func:`pyhudi.table.internal_schema.with_archived`)."""
    sor = spec.schema_on_read
    if sor is None:
        return spec
    return replace(spec, schema_on_read=with_archived(sor, table.storage, table.config,
                                                      {s.base_instant for s in slices}))


def snapshot(
    table: TableLike,
    *,
    as_of: str | None = None,
    read_optimized: bool = False,
    timeline: ActiveTimeline | None = None,
    view: FileSystemView | None = None,
    completed_by: str | None = None,
) -> ScanPlan:
    """The latest (or ``as_of``) snapshot; ``as_of`` is an instant time (see ``Table._check_as_of``);
    ``completed_by``: without the instants completed after that time (the table as a query planned earlier saw
    it)."""
    tl = timeline or table.timeline()
    v = view or table.view(tl)
    if completed_by is None:
        slices = v.latest_file_slices(as_of=as_of)
    else:
        slices = v.at(as_of, completed_by=completed_by).latest_file_slices()
    if as_of is not None:
        check_versions_kept(table, tl, as_of, slices)
    if read_optimized:
        slices = [s for s in slices if s.base_file is not None]
    instants = CommittedInstants.of(tl.commits(), as_of=as_of, completed_by=completed_by)
    spec = _spec(table, tl, as_of, instants=instants, read_optimized=read_optimized)
    return ScanPlan(_for_slices(table, spec, slices), tuple(SliceSpec.of(s) for s in slices))


def incremental(
    table: TableLike,
    start: str,
    end: str | None = None,
    *,
    timeline: ActiveTimeline | None = None,
    history: ActiveTimeline | FullTimeline | None = None,
) -> ScanPlan:
    """Records written by the commits completed in (``start``, ``end``], as of ``end`` (completion times).
    ``history``: the timeline the commits in range are taken from when it is longer than the active one (the
    archived instants and the active ones)."""
    tl = timeline or table.timeline()
    done, touched = _commits_in_range(history if history is not None else tl, start, end)
    return _incremental_plan(table, tl, end, done, touched)


def _commits_in_range(source: ActiveTimeline | FullTimeline, start: str,
                      end: str | None) -> tuple[list[Instant], set[tuple[str, str]]]:
    """The commits completed in (``start``, ``end``], and the (partition, file id) of the file groups they wrote."""
    done = [
        i for i in source.completed_commits()
        if i.completion_time is not None and i.completion_time > start and (end is None or i.completion_time <= end)
    ]
    touched: set[tuple[str, str]] = set()
    for inst in done:
        touched |= _written_file_groups(source.read_commit_metadata(inst))
    return done, touched


def _incremental_plan(table: TableLike, tl: ActiveTimeline, end: str | None, done: list[Instant],
                      touched: set[tuple[str, str]],
                      checked: tuple[str, ActiveTimeline | FullTimeline] | None = None) -> ScanPlan:
    """``checked``: (the range in words, its history): a range with an end is read as the table was then, and is
    refused when a clean deleted a file version it reads (:func:`check_versions_kept`; the latest are kept)."""
    view = table.view(tl).at(None, completed_by=end)
    slices = [s for s in view.latest_file_slices() if (s.partition, s.file_id) in touched]
    if checked is not None and end is not None and done:
        what, full = checked
        completion = {i.requested_time: i.completion_time or i.requested_time for i in full.completed_commits()}
        check_versions_kept(table, tl, end, slices, what=what, groups=touched, completion=completion)
    commits = frozenset(i.requested_time for i in done)
    spec = _spec(table, tl, instants=CommittedInstants.of(tl.commits(), completed_by=end), commit_times=commits)
    return ScanPlan(_for_slices(table, spec, slices), tuple(SliceSpec.of(s) for s in slices))


def for_keys(table: TableLike, keys: Sequence[str], *, timeline: ActiveTimeline | None = None) -> ScanPlan:
    """The latest slices that may hold ``keys`` (those the record index names; every slice without one), read for
    those keys only."""
    if timeline is None:
        return planned(table, lambda tl: for_keys(table, keys, timeline=tl))
    tl = timeline
    plan = snapshot(table, timeline=tl)
    wanted = tuple(dict.fromkeys(keys))
    from pyhudi.metadata.record_index import record_index_lookup

    lk = None if rollback_pending(tl) else record_index_lookup(table.storage, table.base_path, tl, table.config)
    slices = plan.slices
    if lk is not None:
        found = lk.lookup(pa.array(list(wanted), pa.string()))
        named = set(zip(found.column("partition").to_pylist(), found.column("file_id").to_pylist(), strict=True))
        slices = tuple(s for s in slices if (s.partition, s.file_id) in named)
    return ScanPlan(replace(plan.read, keys=wanted), slices)
