"""Timeline archival (Hudi 1.x, table version 8+): old completed instants move from the active timeline into
the LSM timeline (:mod:`pyhudi.table.lsm_timeline`), for a data table and for its metadata table.

The commit path calls :func:`archive` after the commit, its cleaning and the metadata table's compaction, when
``hoodie.archive.automatic`` is on (:func:`auto_archive_enabled`). It archives the data table, then the metadata
table (whose rules look at the data table's active timeline).

**What may be archived** (apache/hudi ``TimelineArchiverV2#getCommitInstantsToArchive``,
``ArchivalUtils.getMinAndMaxInstantsToKeep``, ``ClusteringUtils.getEarliestInstantToRetainForClustering``,
``CompactionUtils.getOldestInstantToRetainForCompaction``, ``TimelineUtils.getEarliestInstantForMetadataArchival``):

- nothing until the active timeline holds more than ``hoodie.keep.max.commits`` completed commits (commit,
  deltacommit, replacecommit); then the oldest, until ``hoodie.keep.min.commits`` remain. Both are raised when
  cleaning needs more: with the cleaner's earliest commit to retain E (``hoodie.cleaner.commits.retained``),
  min becomes (commits after E) + 2 if that is more, and max grows by as much;
- never the earliest pending write (commit, deltacommit, replacecommit, clustering, compaction, log compaction,
  and pyhudi's async ``indexing``) or anything after it: archival stops at the last completed commit before it;
  so nothing at or after a pending compaction of a merge-on-read table;
- merge-on-read data table (``TimelineArchiverV2`` with the NUM_COMMITS trigger, the only one pyhudi honours):
  the deltacommits the next compaction needs stay (``CompactionUtils.getEarliestInstantToRetainForCompaction``
  with ``hoodie.compact.inline.max.delta.commits`` = N): with fewer than N deltacommits (any state) requested
  after the latest completed compaction, nothing from that compaction on; else nothing from the N-th newest of
  them (the same rule keeps a metadata table's deltacommits, with ``hoodie.metadata.compact.max.delta.commits``);
- never a replacecommit or clustering whose replaced file groups may not be cleaned yet: those at or after the
  last completed clean's earliest instant to retain (all of them when no clean is on the active timeline), nor
  anything after them (without their ``partitionToReplaceFileIds`` readers would see the replaced files again);
- data table with a metadata table: nothing while the metadata table has never been compacted, and nothing
  from the first commit that completed after its latest compaction (the metadata blocks of archived commits
  must be in compacted base files: readers only use blocks of instants on the data timeline);
- metadata table (keep min/max one more than the data table's and cleaning retaining 1.2x its commits, as
  Hudi's metadata write config): nothing at or
  after the earliest commit (any state) or pending instant of the data table's active timeline, and enough
  deltacommits for its compaction (``hoodie.metadata.compact.max.delta.commits`` since its latest compaction);
- nothing from the first savepoint on;
- completed cleans and rollbacks older than the last archived commit go with it; every state file of an instant
  (requested, inflight, completed) goes together.

Readers of a merge-on-read table whose deltacommits were archived place each log file by its deltacommit's
completion time, read from the LSM timeline when it decides the file slice
(:class:`~pyhudi.table.lsm_timeline.ArchivedCompletionTimes`, used by :mod:`pyhudi.table.fsview`): a deltacommit
that completed after a compaction was requested writes to the compacted slice, whatever its requested time.

**How** (``LSMTimelineWriter``): the selected instants, sorted by requested time, become one layer-0 parquet file
``<first>_<last>_0.parquet``; the next manifest lists it (``manifest_<N+1>``), then ``_version_`` names N+1 (from
here on the instants are archived; it is replaced in one write, where Hudi deletes and recreates it); then their active-timeline files are deleted, pending states first, then
completed files in ascending order (readers never see an archived instant as pending, nor a hole in the middle).
Then every layer holding ``hoodie.timeline.compaction.batch.size`` files has its oldest files merged into one
file of the next layer (new manifest), and old snapshots are cleaned: the newest 3 manifests (plus one per
compaction just done) stay, older manifests and the parquet files none of the kept ones lists are deleted.

**Crash safety**: until ``_version_`` names the new manifest nothing is archived (an unlisted parquet file or
manifest is ignored by readers and overwritten or cleaned by the next run). Once it does, an instant both
archived and still active is read from the active timeline, and the next run first finishes the deletion of
every active file of an archived instant (then repairs a missing ``_version_``), so it completes what a crashed
run left. A crashed compaction or cleaning is redone by the next run.
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pyhudi import config as C
from pyhudi import faults
from pyhudi.errors import ConfigError, PyHudiError
from pyhudi.io.storage import Storage
from pyhudi.metadata.partitions import FILES, metadata_base_path
from pyhudi.services.clean import SAVEPOINTED_TIMESTAMPS, earliest_commit_to_retain
from pyhudi.table.base_file import ParquetOptions
from pyhudi.table.lsm_timeline import (
    LsmEntry,
    LsmFile,
    LsmHistory,
    Manifest,
    ManifestEntry,
    compacted_name,
    encode_file,
)
from pyhudi.table.properties import METAFOLDER, TableConfig, read_table_config
from pyhudi.table.timeline import (
    CLEAN,
    CLUSTERING,
    COMMIT,
    COMMIT_ACTIONS,
    COMPACTION,
    DELTA_COMMIT,
    INDEXING,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    ROLLBACK,
    SAVEPOINT,
    ActiveTimeline,
    Instant,
    State,
    Timeline,
)

#: Fault points (:mod:`pyhudi.faults`) ``archive.<table>.<step>`` (table ``data`` or ``metadata``), reached after
#: each step of an archival run: ``recovered``, ``planned``, ``file_written``, ``manifest_written``,
#: ``version_written``, ``pending_deleted``, ``instant_deleted`` (after each completed file),
#: ``compaction_written``, ``manifests_deleted``, ``files_cleaned``.

DATA = "data"
METADATA = "metadata"
MANIFESTS_RETAINED = 3  # LSMTimelineWriter#clean keeps the 3 newest snapshots (+1 per compaction just done)
COMPACTION_MAX_BYTES = 1000 * 1024 * 1024  # a layer compaction stops adding files past ~1000 MB

#: the pending actions that stop archival: Hudi's write timeline, and pyhudi's async record-index build
_WRITE_ACTIONS = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT, CLUSTERING, COMPACTION, LOG_COMPACTION, INDEXING})
#: actions of the completed commits timeline (a completed compaction is a commit, a clustering a replacecommit)
_COMMITS = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT})


def auto_archive_enabled(options: Mapping[str, str]) -> bool:
    """``hoodie.archive.automatic``: should the commit path call :func:`archive` after each commit."""
    return C.bool_option(options, C.ARCHIVE_AUTOMATIC)


# -- limits -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ArchiveLimits:
    """``hoodie.keep.min.commits`` / ``hoodie.keep.max.commits`` as configured (before the cleaner's raise)."""

    min_commits: int = 20
    max_commits: int = 30

    def __post_init__(self) -> None:
        if self.min_commits < 1:
            raise ConfigError(f"option {C.KEEP_MIN_COMMITS} must be >= 1, got {self.min_commits}")
        if self.max_commits <= self.min_commits:
            raise ConfigError(
                f"option {C.KEEP_MAX_COMMITS} ({self.max_commits}) must be greater than "
                f"{C.KEEP_MIN_COMMITS} ({self.min_commits})"
            )

    @staticmethod
    def from_options(options: Mapping[str, str]) -> ArchiveLimits:
        return ArchiveLimits(
            C.int_option(options, C.KEEP_MIN_COMMITS, 1), C.int_option(options, C.KEEP_MAX_COMMITS, 2)
        )

    def for_metadata_table(self) -> ArchiveLimits:
        """The metadata table keeps one more of each (Hudi's ``createMetadataWriteConfig``)."""
        return ArchiveLimits(self.min_commits + 1, self.max_commits + 1)


# -- planning -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ArchivePlan:
    """What one table's archival run archives, and why it stops where it does."""

    commits: tuple[Instant, ...] = ()  # completed commits, ascending
    others: tuple[Instant, ...] = ()  # completed cleans and rollbacks older than the last archived commit
    min_commits: int = 0  # effective limits (after the cleaner's raise)
    max_commits: int = 0
    retain_from: str | None = None  # requested time of the earliest instant the rules keep (None: no bound)
    reason: str = ""

    @property
    def instants(self) -> tuple[Instant, ...]:
        return tuple(sorted(self.commits + self.others, key=lambda i: i.requested_time))

    def __bool__(self) -> bool:
        return bool(self.commits)


def _completed_commits(timeline: Timeline) -> list[Instant]:
    return [i for i in timeline if i.is_completed and i.action in _COMMITS]


def _first(instants: Sequence[Instant]) -> Instant | None:
    return min(instants, key=lambda i: i.requested_time) if instants else None


def _retain_for_pending_writes(timeline: Timeline, commits: Sequence[Instant]) -> tuple[Instant | None, str]:
    pending = _first([i for i in timeline if not i.is_completed and i.action in _WRITE_ACTIONS])
    if pending is None:
        return None, ""
    before = [c for c in commits if c.requested_time < pending.requested_time]
    bound = before[-1] if before else pending
    return bound, f"pending {pending.action} {pending.requested_time}"


def _retain_for_compaction(timeline: Timeline, max_delta_commits: int) -> Instant | None:
    """``CompactionUtils.getOldestInstantToRetainForCompaction``: keep the latest compaction, or the deltacommits
    the next compaction needs to be scheduled."""
    compactions = [i for i in timeline if i.is_completed and i.action == COMMIT]
    deltas = sorted((i for i in timeline if i.action == DELTA_COMMIT), key=lambda i: i.requested_time)
    if compactions:
        anchor = max(compactions, key=lambda i: i.requested_time)
        after = [d for d in deltas if d.requested_time > anchor.requested_time]
    elif deltas:
        anchor, after = deltas[0], deltas
    else:
        return None
    if len(after) < max_delta_commits:
        return anchor
    return after[len(after) - max_delta_commits]


def _clean_retain_bound(timeline: ActiveTimeline, clean: Instant) -> tuple[str | None, dict[str, Any]]:
    """The earliest instant to retain recorded by a completed clean (its plan, else its metadata)."""
    try:
        plan = timeline.read_plan(CLEAN, clean.requested_time)
        t = (plan.get("earliestInstantToRetain") or {}).get("timestamp")
        return (str(t) if t else None), plan
    except PyHudiError:
        meta = timeline.read_completed(clean, CLEAN)
        t = meta.get("earliestCommitToRetain")
        return (str(t) if t else None), {"extraMetadata": meta.get("extraMetadata") or {}}


def _replaced_savepoint_bound(timeline: Timeline, ectr: str | None, plan: Mapping[str, Any]) -> str | None:
    """``ClusteringUtils.getEarliestReplacedSavepointInClean``: a savepoint the clean kept files for, when a
    completed replacecommit lies between it and the clean's earliest instant to retain."""
    raw = str((plan.get("extraMetadata") or {}).get(SAVEPOINTED_TIMESTAMPS) or "")
    savepoints = sorted(s for s in raw.split(",") if s)
    if not ectr or not savepoints or ectr <= savepoints[0]:
        return None
    sp = savepoints[0]
    replaced = [i for i in timeline if i.is_completed and i.action == REPLACE_COMMIT and sp <= i.requested_time <= ectr]
    return sp if replaced else None


def _retain_for_clustering(timeline: ActiveTimeline) -> Instant | None:
    replaces = sorted((i for i in timeline if i.action in (REPLACE_COMMIT, CLUSTERING)), key=lambda i: i.requested_time)
    if not replaces:
        return None
    cleans = [i for i in timeline if i.is_completed and i.action == CLEAN]
    if not cleans:
        return replaces[0]
    last = max(cleans, key=lambda i: i.requested_time)
    ectr, plan = _clean_retain_bound(timeline, last)
    lower = _replaced_savepoint_bound(timeline, ectr, plan) or ectr or last.requested_time
    return next((r for r in replaces if r.requested_time >= lower), None)


def _retain_for_metadata_compaction(commits: Sequence[Instant], compaction: str) -> Instant | None:
    after = [c for c in commits if (c.completion_time or "") > compaction and c.requested_time != compaction]
    return _first(after)


def _retain_for_data_timeline(data_timeline: Timeline) -> Instant | None:
    """``TimelineUtils.getEarliestInstantForMetadataArchival``: the data table's earliest commit (any state) or
    earliest pending instant, whichever is earlier."""
    earliest_commit = _first([i for i in data_timeline if i.action in COMMIT_ACTIONS - {COMPACTION, LOG_COMPACTION}])
    earliest_pending = _first([i for i in data_timeline if not i.is_completed])
    return _first([i for i in (earliest_commit, earliest_pending) if i is not None])


def plan_archival(
    timeline: ActiveTimeline,
    limits: ArchiveLimits,
    *,
    cleaner_commits_retained: int | None = None,
    metadata_table: bool = False,
    metadata_compaction: str | None = None,
    data_timeline: Timeline | None = None,
    max_delta_commits: int | None = None,
) -> ArchivePlan:
    """The instants one archival run moves out of ``timeline``.

    ``cleaner_commits_retained``: raise the limits for KEEP_LATEST_COMMITS cleaning (data tables).
    ``metadata_table``/``metadata_compaction``: the data table has a metadata table, whose latest completed
    compaction has this requested time (None: never compacted, nothing may be archived).
    ``data_timeline``: ``timeline`` is a metadata table's and this is its data table's active timeline.
    ``max_delta_commits``: merge-on-read compaction retention (a merge-on-read data table's
    ``hoodie.compact.inline.max.delta.commits``, a metadata table's ``hoodie.metadata.compact.max.delta.commits``).
    """
    commits = sorted(_completed_commits(timeline), key=lambda i: i.requested_time)
    lo, hi = limits.min_commits, limits.max_commits
    if cleaner_commits_retained is not None:
        ectr = earliest_commit_to_retain(timeline, cleaner_commits_retained)
        if ectr is not None:
            needed = sum(1 for c in commits if c.requested_time > ectr.requested_time) + 2
            if lo < needed:
                lo, hi = needed, needed + hi - lo

    def plan(reason: str, bound: str | None = None, chosen: Sequence[Instant] = ()) -> ArchivePlan:
        others: tuple[Instant, ...] = ()
        if chosen:
            last = chosen[-1].requested_time
            others = tuple(sorted(
                (i for i in timeline if i.is_completed and i.action in (CLEAN, ROLLBACK) and i.requested_time < last),
                key=lambda i: i.requested_time,
            ))
        return ArchivePlan(tuple(chosen), others, lo, hi, bound, reason)

    if len(commits) <= hi:
        return plan(f"{len(commits)} completed commits, at most {hi} kept")

    candidates: list[tuple[Instant, str]] = []
    pending, why = _retain_for_pending_writes(timeline, commits)
    if pending is not None:
        candidates.append((pending, why))
    if max_delta_commits is not None:
        c = _retain_for_compaction(timeline, max_delta_commits)
        if c is not None:
            candidates.append((c, f"compaction needs deltacommits from {c.requested_time}"))
    c = _retain_for_clustering(timeline)
    if c is not None:
        candidates.append((c, f"replaced file groups of {c.action} {c.requested_time} may not be cleaned yet"))
    if metadata_table:
        if metadata_compaction is None:
            return plan("the metadata table has not been compacted yet")
        c = _retain_for_metadata_compaction(commits, metadata_compaction)
        if c is not None:
            candidates.append((c, f"commit {c.requested_time} completed after metadata compaction {metadata_compaction}"))
    if data_timeline is not None:
        c = _retain_for_data_timeline(data_timeline)
        if c is not None:
            candidates.append((c, f"data table keeps {c.action} {c.requested_time} on its active timeline"))
        # beyond Hudi's bound: the deltacommit of every data instant still active stays too (a clean requested
        # before the earliest commit and completed late): hudi-rs reads no block whose deltacommit is archived,
        # and listed the files such a clean deleted
        first = _first(list(data_timeline))
        if first is not None:
            candidates.append((first, f"data table keeps {first.action} {first.requested_time} on its active timeline"))

    bound: Instant | None = None
    reason = f"keeping {lo} completed commits"
    if candidates:
        bound, why = min(candidates, key=lambda p: p[0].requested_time)
        reason = f"{reason}; nothing from {bound.requested_time}: {why}"
    savepoint = _first([i for i in timeline if i.is_completed and i.action == SAVEPOINT])
    eligible = [
        c for c in commits
        if (savepoint is None or c.requested_time < savepoint.requested_time)
        and (bound is None or c.requested_time < bound.requested_time)
    ]
    if savepoint is not None:
        reason += f"; nothing from savepoint {savepoint.requested_time}"
    chosen = eligible[: max(0, len(commits) - lo)]
    return plan(reason, bound.requested_time if bound is not None else None, chosen)


# -- results ------------------------------------------------------------------------------------------------------
@dataclass
class TableArchiveResult:
    """What one archival run did to one table."""

    table: str  # "data" or "metadata"
    base_path: str
    plan: ArchivePlan = field(default_factory=ArchivePlan)
    archived: tuple[Instant, ...] = ()  # every instant moved out of the active timeline (commits, cleans, ...)
    file: str | None = None  # the layer-0 file written
    compacted: tuple[str, ...] = ()  # files written by layer compactions
    cleaned: tuple[str, ...] = ()  # manifests and parquet files deleted
    recovered: tuple[str, ...] = ()  # instants whose active files a crashed run had left behind

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "archived": [i.requested_time for i in self.archived],
            "file": self.file,
            "compacted": list(self.compacted),
            "cleaned": len(self.cleaned),
            "recovered": list(self.recovered),
            "reason": self.plan.reason,
        }


@dataclass
class ArchiveResult:
    data: TableArchiveResult
    metadata: TableArchiveResult | None = None

    @property
    def tables(self) -> list[TableArchiveResult]:
        return [self.data] + ([self.metadata] if self.metadata is not None else [])

    def to_dict(self) -> dict[str, Any]:
        return {t.table: t.to_dict() for t in self.tables}


# -- writing ------------------------------------------------------------------------------------------------------
def _pending_action_plan(timeline: ActiveTimeline, files: Sequence[Instant]) -> bytes | None:
    """``MetadataConversionUtils.createLSMTimelineInstant``: the plan kept with an archived instant."""
    requested = next((f for f in files if f.state == State.REQUESTED), None)
    inflight = next((f for f in files if f.state == State.INFLIGHT), None)
    pending = requested or inflight
    if pending is None:
        return None
    action = pending.action
    if action in (CLEAN, COMPACTION, LOG_COMPACTION):
        return timeline.read_bytes(pending) or None
    if action in (REPLACE_COMMIT, CLUSTERING):
        plan = timeline.read_bytes(requested) if requested is not None else b""
        if inflight is not None:
            plan = timeline.read_bytes(inflight) or plan
        return plan or None
    return None


def lsm_entry(timeline: ActiveTimeline, files: Sequence[Instant]) -> LsmEntry:
    """The LSM timeline row of one instant, from all its active-timeline files."""
    done = [f for f in files if f.is_completed]
    if len(done) != 1:
        raise PyHudiError(f"cannot archive instant {files[0].requested_time}: it is not completed once")
    completed = done[0]
    return LsmEntry(
        completed.requested_time,
        completed.completion_time,
        completed.action,
        timeline.read_bytes(completed) or None,
        _pending_action_plan(timeline, files),
    )


def _candidate_files(files: Sequence[ManifestEntry], batch: int, max_bytes: int) -> list[str]:
    """``LSMTimelineWriter#getCandidateFiles``: the oldest consecutive files of a layer, at most ``batch`` of
    them, stopping once they pass ``max_bytes`` (a lone file past it is skipped)."""
    out: list[str] = []
    total = 0
    for f in files:
        total += f.file_len
        out.append(f.file_name)
        if len(out) >= batch:
            break
        if total > max_bytes:
            if len(out) < 2:
                total, out = 0, []
            else:
                break
    return out


class TableArchiver:
    """Archival of one table (a data table or a metadata table) into its LSM timeline."""

    def __init__(
        self,
        storage: Storage,
        base_path: str,
        config: TableConfig,
        kind: str,
        *,
        parquet: ParquetOptions | None = None,
        batch_size: int = 10,
    ) -> None:
        self.storage = storage
        self.base_path = base_path.rstrip("/")
        self.config = config
        self.kind = kind
        self.history = LsmHistory.for_table(storage, self.base_path, config)
        self.parquet = parquet or ParquetOptions()
        self.batch_size = batch_size

    def _hook(self, step: str) -> None:
        faults.at(f"archive.{self.kind}.{step}")

    def timeline(self) -> ActiveTimeline:
        return ActiveTimeline.load(self.storage, self.base_path, self.config)

    def _encode(self, rows: pa.Table | Sequence[LsmEntry]) -> bytes:
        p = self.parquet
        return encode_file(
            rows, compression=p.arrow_codec, compression_level=p.level, dictionary=p.dictionary, page_size=p.page_size
        )

    # -- snapshots
    def _commit(self, version: int, manifest: Manifest) -> int:
        """Write ``manifest`` as the next version, then point ``_version_`` at it (the commit point)."""
        new = version + 1
        self.storage.write_bytes(self.history.manifest_path(new), manifest.to_json().encode("utf-8"))
        self._hook("manifest_written")
        self.storage.write_bytes(self.history.version_path, str(new).encode("utf-8"))
        self._hook("version_written")
        return new

    # -- recovery
    def recover(self, timeline: ActiveTimeline) -> tuple[str, ...]:
        """Finish what a crashed run left: delete the active files of instants the LSM timeline holds, then
        write a missing ``_version_``. Returns the instants cleaned up."""
        archived = self._archived_times({f.requested_time for f in timeline.all_instant_files})
        leftovers = [f for f in timeline.all_instant_files if f.requested_time in archived]
        self._delete_active(timeline, leftovers)
        if self.history.read_version_file() is None:
            versions = self.history.manifest_versions()
            if versions:
                self.storage.write_bytes(self.history.version_path, str(versions[-1]).encode("utf-8"))
        done = tuple(sorted({f.requested_time for f in leftovers}))
        self._hook("recovered")
        return done

    def _archived_times(self, times: set[str]) -> set[str]:
        """Which of ``times`` the current snapshot of the LSM timeline holds (reading only the files whose
        instant range could hold one of them)."""
        _, manifest = self.history.latest()
        found: set[str] = set()
        for name in manifest.file_names:
            f = LsmFile.parse(name)
            if f is None or not any(f.min_instant <= t <= f.max_instant for t in times):
                continue
            rows = self.history.read_file(name, ["instantTime"]).column("instantTime").to_pylist()
            found.update(t for t in rows if t in times)
        return found

    def _delete_active(self, timeline: ActiveTimeline, files: Sequence[Instant], hook: bool = False) -> None:
        pending = [f for f in files if not f.is_completed]
        completed = sorted((f for f in files if f.is_completed), key=lambda f: f.requested_time)
        for f in sorted(pending, key=lambda f: (f.requested_time, -int(f.state))):
            self.storage.delete(timeline.path_of(f), missing_ok=True)
        if hook:
            self._hook("pending_deleted")
        for f in completed:
            self.storage.delete(timeline.path_of(f), missing_ok=True)
            if hook:
                self._hook("instant_deleted")

    # -- archiving
    def write(self, timeline: ActiveTimeline, plan: ArchivePlan) -> str | None:
        """Archive the plan's instants: layer-0 file, manifest, ``_version_``, then delete their active files."""
        instants = plan.instants
        if not instants:
            return None
        wanted = {i.requested_time for i in instants}
        by_time: dict[str, list[Instant]] = {}
        for f in timeline.all_instant_files:
            if f.requested_time in wanted:
                by_time.setdefault(f.requested_time, []).append(f)
        entries = [lsm_entry(timeline, by_time[i.requested_time]) for i in instants]
        name = LsmFile(entries[0].instant_time, entries[-1].instant_time, 0).name
        version, manifest = self.history.latest()
        if name in manifest:  # recover() removed what a committed run left, so this is another set of instants
            raise PyHudiError(f"{self.history.path(name)} is already in the LSM timeline; not archiving {name} again")
        data = self._encode(entries)
        self.storage.write_bytes(self.history.path(name), data)
        self._hook("file_written")
        self._commit(version, manifest.with_changes(add=ManifestEntry(name, len(data))))
        self._delete_active(timeline, [f for fs in by_time.values() for f in fs], hook=True)
        return name

    # -- compaction and cleaning
    def compact(self) -> tuple[str, ...]:
        """Merge the oldest files of every layer holding ``batch_size`` files into the next layer."""
        version, manifest = self.history.latest()
        written: list[str] = []
        layer = 0
        while True:
            files = sorted(
                (f for f in manifest.files if (LsmFile.parse(f.file_name) or LsmFile("0", "0", 0)).layer == layer),
                key=lambda f: f.file_name,
            )
            if len(files) < self.batch_size:
                break
            inputs = _candidate_files(files, self.batch_size, COMPACTION_MAX_BYTES)
            if len(inputs) < 2:
                break
            out = compacted_name(inputs)
            rows = pa.concat_tables([self.history.read_file(n) for n in inputs])
            data = self._encode(rows)
            self.storage.write_bytes(self.history.path(out), data)
            self._hook("compaction_written")
            manifest = manifest.with_changes(remove=inputs, add=ManifestEntry(out, len(data)))
            version = self._commit(version, manifest)
            written.append(out)
            layer += 1
        return tuple(written)

    def clean(self, compactions: int) -> tuple[str, ...]:
        """Keep the newest ``3 + compactions`` snapshots; delete older manifests, then the parquet files no kept
        manifest lists."""
        names = self.history.listing()
        versions = self.history.manifest_versions(names)
        keep_n = MANIFESTS_RETAINED + compactions
        if len(versions) <= keep_n:
            return ()
        keep = versions[-keep_n:]
        live: set[str] = set()
        for v in keep:
            live.update(self.history.read_manifest(v).file_names)
        removed: list[str] = []
        for v in versions[:-keep_n]:
            self.storage.delete(self.history.manifest_path(v), missing_ok=True)
            removed.append(f"manifest_{v}")
        self._hook("manifests_deleted")
        for n in self.history.parquet_files(names):
            if n not in live:
                self.storage.delete(self.history.path(n), missing_ok=True)
                removed.append(n)
        self._hook("files_cleaned")
        return tuple(removed)

    def run(self, plan_fn: Callable[[ActiveTimeline], ArchivePlan]) -> TableArchiveResult:
        timeline = self.timeline()
        recovered = self.recover(timeline)
        if recovered:
            timeline = timeline.reload()
        plan = plan_fn(timeline)
        self._hook("planned")
        name = self.write(timeline, plan)
        compacted = self.compact()
        cleaned = self.clean(len(compacted))
        return TableArchiveResult(
            self.kind, self.base_path, plan, plan.instants if name else (), name, compacted, cleaned, recovered
        )


# -- the service --------------------------------------------------------------------------------------------------
def _latest_compaction(timeline: Timeline) -> str | None:
    done = [i.requested_time for i in timeline if i.is_completed and i.action == COMMIT]
    return max(done) if done else None


def _metadata_config(storage: Storage, base_path: str, data_config: TableConfig) -> TableConfig | None:
    """The metadata table's config when the data table has one readers use (``files`` listed and present)."""
    if FILES not in data_config.metadata_partitions:
        return None
    meta = posixpath.join(metadata_base_path(base_path), METAFOLDER)
    if not storage.exists(posixpath.join(meta, "hoodie.properties")):
        return None
    return read_table_config(storage, meta)


@dataclass(frozen=True)
class ArchiveOptions:
    """The options an archival run reads, parsed: a bad value is a ConfigError naming the option. A write parses
    them before it starts (archival runs after its commit, too late to refuse anything)."""

    limits: ArchiveLimits
    cleaner_commits_retained: int
    batch_size: int
    parquet: ParquetOptions
    metadata_max_delta_commits: int
    #: merge-on-read data tables: the deltacommits the next compaction needs (NUM_COMMITS, the only trigger)
    compaction_max_delta_commits: int

    @staticmethod
    def from_options(options: Mapping[str, str]) -> ArchiveOptions:
        return ArchiveOptions(
            limits=ArchiveLimits.from_options(options),
            cleaner_commits_retained=C.int_option(options, C.CLEANER_COMMITS_RETAINED, 1),
            batch_size=C.int_option(options, C.TIMELINE_COMPACTION_BATCH_SIZE, 2),
            parquet=ParquetOptions.from_options(options),
            metadata_max_delta_commits=C.int_option(options, C.METADATA_COMPACT_MAX_DELTA_COMMITS, 1),
            compaction_max_delta_commits=C.int_option(options, C.COMPACT_INLINE_MAX_DELTA_COMMITS, 1),
        )


def archive(
    storage: Storage,
    base_path: str,
    config: TableConfig | None = None,
    options: Mapping[str, str] | None = None,
    *,
    mdt: bool = True,
) -> ArchiveResult:
    """Archive the data table at ``base_path`` and then (``mdt``) its metadata table, with Hudi's rules (see the
    module documentation). Call it after the commit, its cleaning and the metadata table's compaction, with the
    write's options (:class:`ArchiveOptions`: ``hoodie.keep.min.commits``, ``hoodie.keep.max.commits``,
    ``hoodie.cleaner.commits.retained``, ``hoodie.timeline.compaction.batch.size``,
    ``hoodie.compact.inline.max.delta.commits`` (merge-on-read tables), ``hoodie.metadata.compact.max.delta.commits``,
    ``hoodie.parquet.compression.codec``). A run that crashed is completed by the next call."""
    opts = {k: str(v) for k, v in (options or {}).items()}
    C.check_honoured(opts)
    base = base_path.rstrip("/")
    if config is None:
        config = read_table_config(storage, posixpath.join(base, METAFOLDER))
    parsed = ArchiveOptions.from_options(opts)
    limits, retained, batch = parsed.limits, parsed.cleaner_commits_retained, parsed.batch_size
    parquet, max_deltas = parsed.parquet, parsed.metadata_max_delta_commits
    data_deltas = parsed.compaction_max_delta_commits if config.is_mor else None
    mdt_config = _metadata_config(storage, base, config)
    mdt_path = metadata_base_path(base)

    def plan_data(tl: ActiveTimeline) -> ArchivePlan:
        compaction = None
        if mdt_config is not None:
            compaction = _latest_compaction(ActiveTimeline.load(storage, mdt_path, mdt_config))
        return plan_archival(
            tl, limits, cleaner_commits_retained=retained, metadata_table=mdt_config is not None,
            metadata_compaction=compaction, max_delta_commits=data_deltas,
        )

    data = TableArchiver(storage, base, config, DATA, parquet=parquet, batch_size=batch).run(plan_data)
    if not mdt or mdt_config is None:
        return ArchiveResult(data)

    def plan_metadata(tl: ActiveTimeline) -> ArchivePlan:
        # Hudi's metadata write config: keep min/max + 1, KEEP_LATEST_COMMITS retaining 1.2x the data table's
        return plan_archival(
            tl, limits.for_metadata_table(), cleaner_commits_retained=math.ceil(retained * 1.2),
            data_timeline=ActiveTimeline.load(storage, base, config), max_delta_commits=max_deltas,
        )

    md = TableArchiver(storage, mdt_path, mdt_config, METADATA, parquet=parquet, batch_size=batch)
    return ArchiveResult(data, md.run(plan_metadata))


__all__ = [
    "ArchiveLimits",
    "ArchiveOptions",
    "ArchivePlan",
    "ArchiveResult",
    "TableArchiveResult",
    "TableArchiver",
    "archive",
    "auto_archive_enabled",
    "plan_archival",
]
