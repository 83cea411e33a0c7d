"""Asynchronous build of the ``record_index`` partition while writers keep committing (Hudi's async indexer).

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

An indexer that died leaves the indexing instant pending: the next build removes its partial partition and
starts over. Metadata compaction waits while an indexing instant is pending.
"""

from __future__ import annotations

import posixpath
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from pyhudi import config as C
from pyhudi.errors import ConfigError, PyHudiError
from pyhudi.metadata.reader import RECORD_INDEX, metadata_base_path
from pyhudi.metadata.writer import DRIVER_TOKEN, INIT_PREFIX, RLI_INIT_OFFSET, MetadataWriter
from pyhudi.table import filenames
from pyhudi.table.properties import (
    METADATA_PARTITIONS_INFLIGHT,
    METAFOLDER,
    read_table_config,
    update_table_config,
)
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

    from pyhudi.table.table import Table

FILE_GROUP_COUNT_KEY = "recordIndexFileGroupCount"  # extraMetadata of the plan's HoodieIndexPartitionInfo
INIT_INSTANT = f"{INIT_PREFIX}{RLI_INIT_OFFSET:03d}"
_WRITE_ACTIONS = (COMMIT, DELTA_COMMIT, REPLACE_COMMIT)

#: test and progress hook: called with the name of each phase as it starts (schedule, snapshot, build, catch_up,
#: complete)
PhaseHook = Callable[[str], None]


@dataclass(frozen=True)
class IndexingPlan:
    instant: str  # the indexing instant on the data timeline
    up_to: str | None  # indexUptoInstant: latest completed instant at scheduling
    file_groups: int


def pending_indexing(timeline: ActiveTimeline) -> IndexingPlan | None:
    """The record-index build in progress on a data timeline (a pending ``indexing`` instant), if any."""
    for inst in timeline.by_action(INDEXING).pending():
        plan = timeline.read_plan(INDEXING, inst.requested_time)
        for info in plan.get("indexPartitionInfos") or []:
            if info.get("metadataPartitionPath") == RECORD_INDEX:
                extra = info.get("extraMetadata") or {}
                return IndexingPlan(inst.requested_time, info.get("indexUptoInstant"), int(extra[FILE_GROUP_COUNT_KEY]))
    return None


def _check_timeout(options: Mapping[str, str]) -> float:
    return C.float_option(options, C.INDEX_CHECK_TIMEOUT, 0.0)


class AsyncRecordIndexBuilder:
    """Builds the record index of ``table`` while other writers commit (see the module docstring)."""

    def __init__(
        self,
        table: Table,
        options: Mapping[str, str] | None = None,
        *,
        spark: SparkSession | None = None,
        hook: PhaseHook | None = None,
    ) -> None:
        self.table = table
        self.options = {k: str(v) for k, v in (options or {}).items()}
        self.spark = spark
        self.hook = hook or (lambda _phase: None)
        self.storage = table.storage
        self.base_path = table.base_path
        self.meta = posixpath.join(self.base_path, METAFOLDER)
        self.gen = InstantTimeGenerator(lock_key=self.base_path)
        self.timeout_s = _check_timeout(self.options)
        self.caught_up: list[str] = []  # commits whose key changes the catch-up applied

    # -- public -------------------------------------------------------------------------------------------
    def build(self, num_file_groups: int | None = None) -> int:
        """Schedule and run the build; returns the file group count N."""
        plan = self.schedule(num_file_groups)
        self.run(plan)
        return plan.file_groups

    def schedule(self, num_file_groups: int | None = None) -> IndexingPlan:
        from pyhudi.metadata.record_index import estimate_file_groups

        self.hook("schedule")
        t = self.table
        t.config = read_table_config(self.storage, self.meta)
        t.check_writable("building the record index (async indexer)")
        tl = t.timeline()
        if RECORD_INDEX in t.config.metadata_partitions:
            raise PyHudiError(f"{self.base_path} already has a record index")
        if pending_indexing(tl) is not None or RECORD_INDEX in t.config.metadata_partitions_inflight:
            self.abort(tl)
            tl = tl.reload()
        writer = t._prepare_metadata({**self.options, C.RECORD_INDEX_ENABLE: "false"}, tl)
        if writer is None:
            raise ConfigError("the record index lives in the metadata table: hoodie.metadata.enable must be true")
        if num_file_groups is not None and num_file_groups < 1:
            raise ConfigError(f"--file-groups must be >= 1, got {num_file_groups}")
        n = num_file_groups or estimate_file_groups(sum(t._record_counts(tl).values()), self.options)
        latest = tl.completed().last()
        instant = self.gen.next(floor=tl.latest_time())
        info = {
            "version": 1,
            "metadataPartitionPath": RECORD_INDEX,
            "indexUptoInstant": latest.requested_time if latest else None,
            "extraMetadata": {FILE_GROUP_COUNT_KEY: str(n)},
        }
        req = tl.create_requested(INDEXING, instant, {"version": 1, "indexPartitionInfos": [info]})
        filenames.write_partition_metadata(self.storage, metadata_base_path(self.base_path), RECORD_INDEX, INIT_INSTANT)
        t.config = update_table_config(self.storage, self.meta, {METADATA_PARTITIONS_INFLIGHT: self._inflight_with()})
        tl.transition_to_inflight(req, None)
        return IndexingPlan(instant, latest.requested_time if latest else None, n)

    def run(self, plan: IndexingPlan) -> None:
        from pyhudi.metadata.record_index import build_base_files
        from pyhudi.spark.errors import task_errors
        from pyhudi.spark.session import get_spark

        t = self.table
        t.check_writable("building the record index (async indexer)")
        self.hook("snapshot")
        snapshot = self._wait_for_pending(t.timeline())
        writer = MetadataWriter(self.storage, self.base_path, t.config)
        from pyhudi.read import plan as read_plan

        scan = read_plan.snapshot(t, timeline=snapshot) if snapshot.completed_commits() else None
        spark = self.spark or get_spark()
        par = max(2, spark.sparkContext.defaultParallelism)
        done_at_snapshot = {i.requested_time for i in snapshot.completed()}

        def write_files() -> dict[str, list[dict[str, Any]]]:
            self.hook("build")
            with task_errors():
                built = build_base_files(spark, scan, writer.mdt_path, INIT_INSTANT, plan.file_groups, par)
            self.hook("catch_up")
            return {RECORD_INDEX: built + self._catch_up(plan, done_at_snapshot)}

        writer.create_record_index(INIT_INSTANT, write_files, plan.file_groups)
        self.hook("complete")
        cfg = read_table_config(self.storage, self.meta)
        t.config = update_table_config(self.storage, self.meta, {
            METADATA_PARTITIONS_INFLIGHT: ",".join(p for p in cfg.metadata_partitions_inflight if p != RECORD_INDEX)
        })
        tl = t.timeline()
        inflight = next(i for i in tl.by_action(INDEXING).pending() if i.requested_time == plan.instant)
        info = tl.read_plan(INDEXING, plan.instant)["indexPartitionInfos"]
        tl.complete(inflight, {"version": 1, "operationType": "BUILD", "indexPartitionInfos": info},
                    self.gen.next(floor=tl.latest_time()))

    def abort(self, timeline: ActiveTimeline) -> None:
        """Remove what an indexer that died left: its partial partition, initialisation deltacommit, inflight
        mark and indexing instant."""
        t = self.table
        writer = MetadataWriter(self.storage, self.base_path, t.config)
        if writer.exists:
            writer.rollback(INIT_INSTANT)
            writer.drop_partition(RECORD_INDEX)
        cfg = read_table_config(self.storage, self.meta)
        t.config = update_table_config(self.storage, self.meta, {
            METADATA_PARTITIONS_INFLIGHT: ",".join(p for p in cfg.metadata_partitions_inflight if p != RECORD_INDEX)
        })
        for inst in sorted(timeline.all_instant_files, key=lambda i: -int(i.state)):
            if inst.action == INDEXING and not inst.is_completed:
                self.storage.delete(timeline.path_of(inst))

    # -- steps --------------------------------------------------------------------------------------------
    def _inflight_with(self) -> str:
        cur = read_table_config(self.storage, self.meta).metadata_partitions_inflight
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
                    f"({C.INDEX_CHECK_TIMEOUT}); a writer that died leaves its instant pending until the next write rolls it "
                    "back: write again, then rerun the index build"
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

        tl = self.table.timeline()
        mdt_tl = MetadataWriter(self.storage, self.base_path, self.table.config).timeline()
        mdt = metadata_base_path(self.base_path)
        stats: list[dict[str, Any]] = []
        for inst in tl.completed().by_action(*_WRITE_ACTIONS):
            t = inst.requested_time
            if t in done_at_snapshot or self._has_record_index_changes(mdt_tl, t):
                continue
            inserted, deleted = commit_key_changes(self.table, tl, inst)
            self.caught_up.append(t)
            ins_fg = file_groups_of(inserted.column("key"), plan.file_groups)
            del_fg = file_groups_of(pa.array(deleted, pa.string()), plan.file_groups)
            t_ms = parse_instant_time(t)
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


def commit_key_changes(table: Table, tl: ActiveTimeline, inst: Instant) -> tuple[pa.Table, list[str]]:
    """What a completed data commit did to the key -> location mapping, from the files it wrote: keys new to a
    file group (key, partition, file_id), and keys that left the table (in a file group's previous version or
    a replaced file group, and in none of the commit's new files). Copy-on-write commits only (the base files
    a commit writes hold all of a file group's keys)."""
    from pyhudi.table import base_file
    from pyhudi.table.schema import RECORD_KEY_COL

    if table.config.is_mor:  # the indexer refuses merge-on-read tables before it gets here
        from pyhudi.errors import UnsupportedTableError

        raise UnsupportedTableError(f"{table.base_path}: key changes of merge-on-read commits are not derived")
    meta = tl.read_commit_metadata(inst)
    view = table.view(tl)
    by_fg: dict[tuple[str, str], list[str]] = {}  # (partition, file id) -> base file rel paths, oldest first
    for fg in view.file_groups():
        by_fg[(fg.partition, fg.file_id)] = [s.base_file.relative_path for s in fg.slices if s.base_file is not None]

    def keys_of(rel: str) -> set[str]:
        t = base_file.read_base_file(table.storage, posixpath.join(table.base_path, rel), columns=[RECORD_KEY_COL])
        return set(t.column(RECORD_KEY_COL).to_pylist())

    def previous(part: str, fid: str, before: str) -> str | None:
        older = [r for r in by_fg.get((part, fid), []) if filenames.parse_data_file_name(posixpath.basename(r))
                 and filenames.parse_data_file_name(posixpath.basename(r)).instant < before]  # type: ignore[union-attr]
        return older[-1] if older else None

    ins_rows: dict[str, tuple[str, str]] = {}
    left: set[str] = set()
    now_in: set[str] = set()
    for part, stats in (meta.get("partitionToWriteStats") or {}).items():
        for st in stats:
            if not st.get("path"):
                continue
            fid = st["fileId"]
            new = keys_of(st["path"])
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
