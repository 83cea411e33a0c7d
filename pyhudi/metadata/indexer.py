"""Building the ``record_index`` partition: inline (the first write that asks for it, or ``pyhudi index build``)
or asynchronously while writers keep committing (Hudi's async indexer).

Both read the keys of the latest file slices listed by the files partition in Spark tasks and write each of the N
file groups (N from Hudi's estimate unless given) as one sorted base HFile, in the metadata deltacommit
``00000000000000002``.

The asynchronous protocol, on the data table's timeline and ``hoodie.properties``:

Protocol, on the data table's timeline and ``hoodie.properties``:

1. **Schedule**: ``<t>.indexing.requested`` holds a ``HoodieIndexPlan`` for ``record_index`` (``indexUptoInstant``:
   the latest completed instant; the file group count N in ``extraMetadata``), then the partition is listed in
   ``hoodie.table.metadata.partitions.inflight`` and the instant moves to inflight. From here on every writer
   appends its record-index changes (new mappings, delete markers) to the inflight partition in its metadata
   deltacommit, as for an available partition (it decides when it commits, reading the table config then).
2. **Snapshot**: the indexer waits until every write that was pending when the partition went inflight has
   finished (those may have applied their metadata changes before they could see it), then takes the completed
   timeline as its consistent snapshot.
3. **Build**: the keys of the snapshot's latest base files (listed by the files partition) are read in Spark
   tasks and each of the N file groups is written as one sorted base HFile, in the metadata deltacommit
   ``00000000000000002`` (the partition's initialisation instant, ahead of every writer's log file).
4. **Catch-up**: every data commit completed after the snapshot must have record-index changes in its metadata
   deltacommit. A commit without them (a writer that did not see the inflight partition) is caught up here: its
   key changes are derived from the files it wrote and replaced, and written as log files named and stamped
   with that commit's instant (so they merge in commit order with the other writers' log files), accounted
   for in the initialisation deltacommit.
5. **Available**: the initialisation deltacommit completes, ``record_index`` moves from
   ``...partitions.inflight`` to ``hoodie.table.metadata.partitions``, and ``<t>_<c>.indexing`` completes with a
   ``HoodieIndexCommitMetadata``. Readers and taggers use the partition only from here on.

A build keeps a heartbeat of its indexing instant (``.hoodie/.heartbeat/<t>``, as a write does) from before it
schedules until it completes. An indexer that died (its heartbeat expired, its process gone, or none) leaves the
indexing instant pending: the next build removes its partial partition and starts over. A build that is still
running is never taken for dead: another build refuses to start, naming it. A build that stalled past its
heartbeat and was taken for dead finds its indexing instant gone and stops before it writes the partition's files
or completes. Metadata compaction waits while an indexing instant is pending.
"""

from __future__ import annotations

import contextlib
import functools
import posixpath
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from pyhudi import config as C
from pyhudi import faults
from pyhudi.errors import ConcurrentWriterError, ConfigError, PyHudiError
from pyhudi.io.storage import Storage
from pyhudi.metadata.partitions import (
    DRIVER_TOKEN,
    FILE_GROUP_COUNT_KEY,
    RECORD_INDEX,
    RLI_INIT_INSTANT,
    IndexingPlan,
    metadata_base_path,
    pending_indexing,
)
from pyhudi.metadata.reader import table_view
from pyhudi.metadata.writer import MetadataWriter
from pyhudi.table import filenames
from pyhudi.table.capabilities import check_writable
from pyhudi.table.fsview import FileSystemView
from pyhudi.table.lsm_timeline import ArchivedTimeline, LsmHistory
from pyhudi.table.properties import (
    METADATA_PARTITIONS_INFLIGHT,
    METAFOLDER,
    TableConfig,
    read_table_config,
    update_table_config,
)
from pyhudi.table.recorded_paths import write_stat_path
from pyhudi.table.timeline import (
    COMMIT,
    DELTA_COMMIT,
    INDEXING,
    REPLACE_COMMIT,
    ActiveTimeline,
    Instant,
    InstantTimeGenerator,
    parse_instant_time,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pyhudi.txn.heartbeat import Heartbeat

#: the fault points (:mod:`pyhudi.faults`) reached as each phase of an async build starts
PHASES = ("index.schedule", "index.snapshot", "index.build", "index.catch_up", "index.complete")
_WRITE_ACTIONS = (COMMIT, DELTA_COMMIT, REPLACE_COMMIT)

__all__ = ["AsyncRecordIndexBuilder", "IndexingPlan", "build_record_index", "pending_indexing"]


def record_counts(
    tl: ActiveTimeline, wanted: set[str] | None = None, archived: ArchivedTimeline | None = None
) -> dict[str, int]:
    """Records per base file name, from the write stats of the completed commits (of ``archived`` commits too,
    newest first, while a file of ``wanted`` was not found in the active ones)."""
    out: dict[str, int] = {}

    def add(source: ActiveTimeline | ArchivedTimeline, inst: Instant) -> None:
        for stats in (source.read_commit_metadata(inst).get("partitionToWriteStats") or {}).values():
            for st in stats:
                if st.get("path"):
                    out[posixpath.basename(st["path"])] = int(st.get("numWrites") or 0)

    for inst in tl.completed_commits():
        add(tl, inst)
    if archived is not None and wanted is not None:
        for inst in reversed(list(archived.completed_commits())):
            if wanted <= out.keys():
                break
            add(archived, inst)
    return out


def _archived(storage: Storage, base_path: str, config: TableConfig) -> ArchivedTimeline | None:
    if LsmHistory.for_table(storage, base_path, config).latest_version() > 0:
        return ArchivedTimeline.load(storage, base_path, config)
    return None


def _write_base_files(
    spark: SparkSession, storage: Storage, base_path: str, config: TableConfig, timeline: ActiveTimeline,
    view: FileSystemView, n: int,
) -> list[dict[str, Any]]:
    """Spark: the N base HFiles of the record index from the keys of ``view``'s latest file slices (base and log
    files merged, as a snapshot read has them)."""
    from pyhudi.metadata.record_index import build_base_files
    from pyhudi.read import plan as read_plan
    from pyhudi.spark.errors import task_errors

    if not timeline.completed_commits():
        return []
    scan = read_plan.snapshot(read_plan.TableFiles(storage, base_path, config), timeline=timeline, view=view)
    par = max(2, spark.sparkContext.defaultParallelism)
    with task_errors():
        return build_base_files(spark, scan, metadata_base_path(base_path), RLI_INIT_INSTANT, n, par,
                                zone=config.timeline_zone)


def build_record_index(
    writer: MetadataWriter,
    timeline: ActiveTimeline,
    options: Mapping[str, str] | None = None,
    *,
    num_file_groups: int | None = None,
    spark: SparkSession | None = None,
) -> int:
    """Initialise the record index inline (no writer may commit meanwhile) from the latest file slices listed by
    the files partition: N file groups (estimated from the record count with Hudi's formula unless given).
    Returns N."""
    from pyhudi.metadata.record_index import estimate_file_groups
    from pyhudi.spark.session import get_spark

    storage, base_path = writer.storage, writer.base_path
    view = table_view(storage, base_path, writer.data_config, timeline)
    latest = view.latest_base_files()
    counts = record_counts(timeline, {f.file_name for f in latest}, _archived(storage, base_path, writer.data_config))
    n = num_file_groups or estimate_file_groups(sum(counts.get(f.file_name, 0) for f in latest), options)
    spark_ = spark or get_spark()
    writer.create_record_index(
        RLI_INIT_INSTANT, lambda: {RECORD_INDEX: _write_base_files(spark_, storage, base_path, writer.data_config, timeline, view, n)}, n
    )
    writer.data_config = read_table_config(storage, posixpath.join(base_path, METAFOLDER))
    return n


def _check_timeout(options: Mapping[str, str]) -> float:
    return C.float_option(options, C.INDEX_CHECK_TIMEOUT, 0.0)


class AsyncRecordIndexBuilder:
    """Builds the record index of the table at ``base_path`` while other writers commit (see the module
    docstring)."""

    def __init__(
        self,
        storage: Storage,
        base_path: str,
        options: Mapping[str, str] | None = None,
        *,
        spark: SparkSession | None = None,
        lock: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> None:
        self.options = {k: str(v) for k, v in (options or {}).items()}
        #: the table lock (optimistic concurrency): held while the build is scheduled and while it completes
        self.lock = lock or contextlib.nullcontext
        self.spark = spark
        self.storage = storage
        self.base_path = base_path.rstrip("/")
        self.meta = posixpath.join(self.base_path, METAFOLDER)
        self.timeout_s = _check_timeout(self.options)
        self.caught_up: list[str] = []  # commits whose key changes the catch-up applied
        self.heartbeat: Heartbeat | None = None  #: the heartbeat of this build's indexing instant, once scheduled

    def _config(self) -> TableConfig:
        return read_table_config(self.storage, self.meta)

    @functools.cached_property
    def gen(self) -> InstantTimeGenerator:
        """The build's instant times, in the table's timeline zone."""
        return InstantTimeGenerator.for_table(self._config())

    def _timeline(self) -> ActiveTimeline:
        return ActiveTimeline.load(self.storage, self.base_path, self._config())

    # -- public -------------------------------------------------------------------------------------------
    def build(self, num_file_groups: int | None = None) -> int:
        """Schedule and run the build; returns the file group count N."""
        with self.lock():
            plan = self.schedule(num_file_groups)
        self.run(plan)
        return plan.file_groups

    def schedule(self, num_file_groups: int | None = None) -> IndexingPlan:
        from pyhudi.metadata.record_index import estimate_file_groups

        faults.at("index.schedule")
        tl = self._timeline()
        cfg = self._config()
        check_writable(self.base_path, cfg, "building the record index (async indexer)", storage=self.storage)
        if RECORD_INDEX in cfg.metadata_partitions:
            raise PyHudiError(f"{self.base_path} already has a record index")
        if pending_indexing(tl) is not None or RECORD_INDEX in cfg.metadata_partitions_inflight:
            self._refuse_live_build(tl)
            self.abort(tl)
            tl = tl.reload()
            cfg = self._config()
        writer = MetadataWriter(self.storage, self.base_path, cfg)
        if writer.reconcile({**self.options, C.RECORD_INDEX_ENABLE: "false"}, tl) is None:
            raise ConfigError("the record index lives in the metadata table: hoodie.metadata.enable must be true")
        if num_file_groups is not None and num_file_groups < 1:
            raise ConfigError(f"--file-groups must be >= 1, got {num_file_groups}")
        names = {f.file_name for f in table_view(self.storage, self.base_path, cfg, tl).latest_base_files()}
        counts = record_counts(tl, names, _archived(self.storage, self.base_path, cfg))
        n = num_file_groups or estimate_file_groups(sum(counts.get(f, 0) for f in names), self.options)
        latest = tl.completed().last()
        instant = self._reserve(tl)
        try:
            return self._schedule_at(instant, tl, latest, n)
        except BaseException:
            assert self.heartbeat is not None
            self.heartbeat.abort()
            raise

    def _schedule_at(self, instant: str, tl: ActiveTimeline, latest: Instant | None, n: int) -> IndexingPlan:
        info = {
            "version": 1,
            "metadataPartitionPath": RECORD_INDEX,
            "indexUptoInstant": latest.requested_time if latest else None,
            "extraMetadata": {FILE_GROUP_COUNT_KEY: str(n)},
        }
        req = tl.create_requested(INDEXING, instant, {"version": 1, "indexPartitionInfos": [info]})
        filenames.write_partition_metadata(
            self.storage, metadata_base_path(self.base_path), RECORD_INDEX, RLI_INIT_INSTANT
        )
        update_table_config(self.storage, self.meta, {METADATA_PARTITIONS_INFLIGHT: self._inflight_with()})
        tl.transition_to_inflight(req, None)
        return IndexingPlan(instant, latest.requested_time if latest else None, n)

    def run(self, plan: IndexingPlan) -> None:
        try:
            self._run(plan)
        except BaseException:
            if self.heartbeat is not None:  # the build failed in this living process: the next one may take over
                self.heartbeat.abort()
            raise
        if self.heartbeat is not None:
            self.heartbeat.stop()

    def _run(self, plan: IndexingPlan) -> None:
        from pyhudi.spark.session import get_spark

        faults.at("index.snapshot")
        snapshot = self._wait_for_pending(self._timeline())
        cfg = self._config()
        check_writable(self.base_path, cfg, "building the record index (async indexer)", storage=self.storage)
        writer = MetadataWriter(self.storage, self.base_path, cfg)
        view = table_view(self.storage, self.base_path, cfg, snapshot)
        spark = self.spark or get_spark()
        done_at_snapshot = {i.requested_time for i in snapshot.completed()}

        def write_files() -> dict[str, list[dict[str, Any]]]:
            faults.at("index.build")
            self._check_still_ours(plan)
            built = _write_base_files(spark, self.storage, self.base_path, cfg, snapshot, view, plan.file_groups)
            faults.at("index.catch_up")
            return {RECORD_INDEX: built + self._catch_up(plan, done_at_snapshot)}

        self._check_still_ours(plan)
        writer.create_record_index(RLI_INIT_INSTANT, write_files, plan.file_groups)
        faults.at("index.complete")
        with self.lock():
            self._check_still_ours(plan)
            self._complete(plan)

    def _check_still_ours(self, plan: IndexingPlan) -> None:
        """PyHudiError if this build's indexing instant is no longer pending, or its heartbeat expired (it stalled,
        and another build may have taken it for dead and started over): it stops before it writes the partition's
        files or completes, where it would overwrite the other build's index."""
        if not any(i.requested_time == plan.instant for i in self._timeline().by_action(INDEXING).pending()):
            raise ConcurrentWriterError(
                f"{self.base_path}: the indexing instant {plan.instant} of this build is gone (another build took "
                "this one for dead, having seen its heartbeat expire, and started over); this build is abandoned")
        if self.heartbeat is not None:
            self.heartbeat.check()

    def _complete(self, plan: IndexingPlan) -> None:
        """The partition becomes available and the indexing instant completes."""
        cfg = self._config()
        update_table_config(self.storage, self.meta, {
            METADATA_PARTITIONS_INFLIGHT: ",".join(p for p in cfg.metadata_partitions_inflight if p != RECORD_INDEX)
        })
        tl = self._timeline()
        inflight = next(i for i in tl.by_action(INDEXING).pending() if i.requested_time == plan.instant)
        info = tl.read_plan(INDEXING, plan.instant)["indexPartitionInfos"]
        tl.complete(inflight, {"version": 1, "operationType": "BUILD", "indexPartitionInfos": info},
                    self.gen.next(floor=tl.latest_time()))

    def abort(self, timeline: ActiveTimeline) -> None:
        """Remove what an indexer that died left: its partial partition, initialisation deltacommit, inflight
        mark and indexing instant."""
        writer = MetadataWriter(self.storage, self.base_path, self._config())
        if writer.exists:
            writer.rollback(RLI_INIT_INSTANT, completed=True)
            writer.drop_partition(RECORD_INDEX)
        cfg = self._config()
        update_table_config(self.storage, self.meta, {
            METADATA_PARTITIONS_INFLIGHT: ",".join(p for p in cfg.metadata_partitions_inflight if p != RECORD_INDEX)
        })
        for inst in sorted(timeline.all_instant_files, key=lambda i: -int(i.state)):
            if inst.action == INDEXING and not inst.is_completed:
                self.storage.delete(timeline.path_of(inst))

    # -- steps --------------------------------------------------------------------------------------------
    def _reserve(self, tl: ActiveTimeline) -> str:
        """The build's instant time, held by its heartbeat (started here, kept until the build ends) before the
        instant appears on the timeline."""
        from pyhudi.txn.heartbeat import Heartbeat, HeartbeatConfig

        config = HeartbeatConfig.from_options(self.options)
        self.heartbeat = Heartbeat.reserve_next(self.storage, self.base_path, self.gen, tl.latest_time(), config).start()
        return self.heartbeat.instant

    def _refuse_live_build(self, tl: ActiveTimeline) -> None:
        """PyHudiError if a pending indexing instant belongs to a build that is still running (its heartbeat fresh
        and its process, on this host, alive). A pending build without a heartbeat died (every build keeps one
        from before its instant appears)."""
        from pyhudi.txn.heartbeat import HeartbeatConfig, heartbeat_path, writer_status

        config = HeartbeatConfig.from_options(self.options)
        for inst in tl.by_action(INDEXING).pending():
            if not self.storage.exists(heartbeat_path(self.base_path, inst.requested_time)):
                continue
            status = writer_status(self.storage, self.base_path, inst.requested_time, config, zone=self.gen.zone)
            if not status.is_dead:
                raise ConcurrentWriterError(
                    f"{self.base_path}: the record index is being built by another indexer (indexing instant "
                    f"{inst.requested_time}, {status.reason}); wait for it to finish")

    def _inflight_with(self) -> str:
        cur = self._config().metadata_partitions_inflight
        return ",".join([*(p for p in cur if p != RECORD_INDEX), RECORD_INDEX])

    def _wait_for_pending(self, tl: ActiveTimeline) -> ActiveTimeline:
        """Wait until the writes pending now have completed or gone (rolled back); return the timeline then."""
        waiting = {i.requested_time for i in tl.pending() if i.action in _WRITE_ACTIONS}
        deadline = time.monotonic() + self.timeout_s
        while waiting:
            tl = tl.reload()
            still = {i.requested_time for i in tl.pending() if i.requested_time in waiting}
            if not still:
                break
            if time.monotonic() > deadline:
                raise PyHudiError(
                    f"{self.base_path}: write(s) {', '.join(sorted(still))} still pending after {self.timeout_s:.0f} s "
                    f"({C.INDEX_CHECK_TIMEOUT}); a writer that died leaves its instant pending until the next write "
                    "rolls it back: write again, then rerun the index build"
                )
            waiting = still
            time.sleep(0.2)
        return tl.reload()

    def _catch_up(self, plan: IndexingPlan, done_at_snapshot: set[str]) -> list[dict[str, Any]]:
        """Log files for the data commits completed after the snapshot whose metadata deltacommit carries no
        record-index changes: one per touched file group, named and stamped with the commit's own instant so
        that they merge in commit order with the log files of the writers that did see the partition."""
        from pyhudi.metadata.record_index import (
            encode_locations,
            file_group_id,
            file_groups_of,
            log_block_bytes,
        )

        tl = self._timeline()
        cfg = self._config()
        mdt_tl = MetadataWriter(self.storage, self.base_path, cfg).timeline()
        view = table_view(self.storage, self.base_path, cfg, tl)
        mdt = metadata_base_path(self.base_path)
        stats: list[dict[str, Any]] = []
        for inst in tl.completed().by_action(*_WRITE_ACTIONS):
            t = inst.requested_time
            if t in done_at_snapshot or self._has_record_index_changes(mdt_tl, t):
                continue
            inserted, deleted = commit_key_changes(self.storage, self.base_path, view, tl, inst)
            self.caught_up.append(t)
            ins_fg = file_groups_of(inserted.column("key"), plan.file_groups)
            del_fg = file_groups_of(pa.array(deleted, pa.string()), plan.file_groups)
            t_ms = parse_instant_time(t, self.gen.zone)
            for g in sorted(set(ins_fg.tolist()) | set(del_fg.tolist())):
                sub = inserted.filter(pa.array(ins_fg == g))
                gone = [k for k, gg in zip(deleted, del_fg, strict=True) if gg == g]
                values = encode_locations(sub.column("partition").combine_chunks(), sub.column("file_id").combine_chunks(),
                                          pa.array(np.full(sub.num_rows, t_ms), pa.int64()))
                data = log_block_bytes(t, sub.column("key").combine_chunks(), values, gone)
                fid = file_group_id(int(g))
                rel = posixpath.join(RECORD_INDEX, filenames.make_log_file_name(fid, t, 1, DRIVER_TOKEN))
                self.storage.write_bytes(posixpath.join(mdt, rel), data)
                stats.append({"rel": rel, "file_id": fid, "size": len(data), "n": sub.num_rows + len(gone)})
        return stats

    @staticmethod
    def _has_record_index_changes(mdt_tl: ActiveTimeline, instant: str) -> bool:
        inst = mdt_tl.completed().get(instant)
        if inst is None:
            return False
        stats = (mdt_tl.read_commit_metadata(inst).get("partitionToWriteStats") or {})
        return RECORD_INDEX in stats


def commit_key_changes(
    storage: Storage, base_path: str, view: FileSystemView, tl: ActiveTimeline, inst: Instant
) -> tuple[pa.Table, list[str]]:
    """What a completed data commit did to the key -> location mapping, from the files it wrote: keys new to a
    file group (key, partition, file_id), and keys that left the table (in a file group's previous version or
    a replaced file group, and in none of the commit's new files). Copy-on-write commits only (the base files
    a commit writes hold all of a file group's keys)."""
    from pyhudi.table import base_file
    from pyhudi.table.schema import RECORD_KEY_COL

    if inst.action == DELTA_COMMIT:  # the indexer refuses merge-on-read tables before it gets here
        from pyhudi.errors import UnsupportedTableError

        raise UnsupportedTableError(
            f"{base_path}: key changes of merge-on-read commits ({inst.requested_time}) are not derived")
    meta = tl.read_commit_metadata(inst)
    by_fg: dict[tuple[str, str], list[str]] = {}  # (partition, file id) -> base file rel paths, oldest first
    for fg in view.file_groups():
        by_fg[(fg.partition, fg.file_id)] = [s.base_file.relative_path for s in fg.slices if s.base_file is not None]

    def keys_of(rel: str) -> set[str]:
        t = base_file.read_base_file(storage, posixpath.join(base_path, rel), columns=[RECORD_KEY_COL])
        return set(t.column(RECORD_KEY_COL).to_pylist())

    def previous(part: str, fid: str, before: str) -> str | None:
        older = [r for r in by_fg.get((part, fid), []) if filenames.parse_data_file_name(posixpath.basename(r))
                 and filenames.parse_data_file_name(posixpath.basename(r)).instant < before]  # type: ignore[union-attr]
        return older[-1] if older else None

    ins_rows: dict[str, tuple[str, str]] = {}
    left: set[str] = set()
    now_in: set[str] = set()
    source = tl.path_of(inst)
    for part, stats in (meta.get("partitionToWriteStats") or {}).items():
        for st in stats:
            if not st.get("path"):
                continue
            fid = st["fileId"]
            new = keys_of(write_stat_path(part, st, source))
            prev = previous(part, fid, inst.requested_time)
            old = keys_of(prev) if prev else set()
            now_in |= new
            for k in new - old:
                ins_rows[k] = (part, fid)
            left |= old - new
    for part, fids in (meta.get("partitionToReplaceFileIds") or {}).items():
        for fid in fids:
            prev = previous(part, fid, inst.requested_time)
            if prev:
                left |= keys_of(prev)
    inserted = pa.table({
        "key": pa.array(list(ins_rows), pa.string()),
        "partition": pa.array([p for p, _ in ins_rows.values()], pa.string()),
        "file_id": pa.array([f for _, f in ins_rows.values()], pa.string()),
    })
    return inserted, sorted(left - now_in)
