"""The async record-index builder: writers commit during each phase of the build (one of them unaware of the
inflight partition, so the catch-up must derive its changes), in a writer thread running concurrently, and an
indexer that dies midway; every run ends with a record index that agrees with the data and with hudi-rs."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hudi import HudiTableBuilder

from pyhudi import Table, faults
from pyhudi.io.storage import Storage
from pyhudi.metadata.indexer import AsyncRecordIndexBuilder
from pyhudi.metadata.partitions import RECORD_INDEX, pending_indexing
from pyhudi.metadata.validate import validate_table
from pyhudi.table.timeline import INDEXING

LOCAL = Storage.from_uri("/")[0]

pytestmark = pytest.mark.spark

OPTS = {
    "hoodie.table.name": "idx",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "dt",
    "hoodie.table.ordering.fields": "ts",
    "hoodie.index.type": "GLOBAL_SIMPLE",
    "hoodie.simple.index.update.partition.path": "true",
    "hoodie.metadata.compact.max.delta.commits": "2",
}
DAYS = ["2026/11/20", "2026/11/21", "2026/11/22"]


def _rows(ids: list[str], ts: int, days: list[str] | None = None) -> pa.Table:
    days = days or [DAYS[hash(i) % 3] for i in ids]
    return pa.table({"id": ids, "ts": pa.array([ts] * len(ids), pa.int64()), "dt": days,
                     "v": pa.array([float(ts)] * len(ids))})


class Model:
    def __init__(self) -> None:
        self.rows: dict[str, tuple[str, float]] = {}

    def upsert(self, t: pa.Table) -> None:
        for r in t.to_pylist():
            self.rows[r["id"]] = (r["dt"], r["v"])

    def delete(self, ids: list[str]) -> None:
        for i in ids:
            self.rows.pop(i, None)


def _write(spark, base: str, model: Model, step: int, extra: dict[str, str] | None = None) -> None:  # type: ignore[no-untyped-def]
    """One upsert (updates of live keys, a partition move, new keys) and one delete, through a fresh Table."""
    live = sorted(model.rows)
    table = Table.open(base)
    new = [f"s{step}-{uuid.uuid4()}" for _ in range(5)]
    moved = live[:1]
    up = _rows(live[1:4] + new, 100 + step)
    mv = _rows(moved, 100 + step, [DAYS[(DAYS.index(model.rows[moved[0]][0]) + 1) % 3]]) if moved else None
    batch = pa.concat_tables([up, mv]) if mv is not None else up
    table.write(spark.createDataFrame(batch), "upsert", {**OPTS, **(extra or {})})
    model.upsert(batch)
    gone = live[4:6]
    if gone:
        Table.open(base).write(spark.createDataFrame(_rows(gone, 0, [model.rows[g][0] for g in gone])), "delete",
                               {**OPTS, **(extra or {})})
        model.delete(gone)


def _check(base: str, model: Model) -> None:
    table = Table.open(base)
    assert RECORD_INDEX in table.config.metadata_partitions
    assert RECORD_INDEX not in table.config.metadata_partitions_inflight
    assert pending_indexing(table.timeline()) is None
    rep = validate_table(table)
    assert rep.ok, rep.to_dict()
    theirs = pa.Table.from_batches(HudiTableBuilder.from_base_uri(base).build().read())
    got = {r["id"]: (r["dt"], r["v"]) for r in theirs.select(["id", "dt", "v"]).to_pylist()}
    assert got == model.rows
    where = {r["id"]: (r["_hoodie_partition_path"], r["_hoodie_file_name"].split("_")[0])
             for r in theirs.select(["id", "_hoodie_partition_path", "_hoodie_file_name"]).to_pylist()}
    gone_probe = ["never-written"]
    for row in table.lookup([*model.rows, *gone_probe]).to_pylist():
        if row["key"] in model.rows:
            assert row["found"] and (row["partition"], row["file_id"]) == where[row["key"]], row
        else:
            assert not row["found"], row
    assert rep.record_index is not None and rep.record_index["entries"] == len(model.rows)


def _seed(spark, base: str) -> Model:  # type: ignore[no-untyped-def]
    model = Model()
    first = _rows([f"k{i:03d}" for i in range(60)], 1)
    table = Table.create(base, first.schema, OPTS)
    table.write(spark.createDataFrame(first), "bulk_insert", OPTS)
    model.upsert(first)
    return model


def test_writers_during_each_phase_and_a_catch_up(spark, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    model = _seed(spark, base)
    step = [0]

    def hook(point: str) -> None:
        phase = point.removeprefix("index.")
        if phase in ("snapshot", "build", "catch_up"):
            step[0] += 1
            _write(spark, base, model, step[0])
        if phase == "build":
            # a writer that does not know about the inflight partition: its commit must be caught up
            with monkeypatch.context() as m:
                m.setattr("pyhudi.txn.transaction.record_index_updates", lambda *a, **k: None)
                step[0] += 1
                _write(spark, base, model, step[0])

    builder = AsyncRecordIndexBuilder(LOCAL, base, OPTS, spark=spark)
    with faults.inject("index.*", hook):
        n = builder.build(num_file_groups=3)
    assert n == 3
    assert len(builder.caught_up) == 2  # the unaware writer's upsert and delete
    tl = Table.open(base).timeline()
    done = tl.by_action(INDEXING).completed()
    assert len(done) == 1
    plan = tl.read_completed(done.last())
    assert plan["indexPartitionInfos"][0]["metadataPartitionPath"] == RECORD_INDEX
    _check(base, model)
    # the index is used from now on and kept up to date
    _write(spark, base, model, 99, {"hoodie.index.type": "RECORD_INDEX"})
    _check(base, model)


@pytest.mark.parametrize("mode", ["single_writer", "optimistic"])
def test_concurrent_writer_thread(spark, tmp_path: Path, mode: str) -> None:  # type: ignore[no-untyped-def]
    """A writer keeps committing while the index is built; with optimistic concurrency both take the table lock
    (schedule and completion of the build, every commit)."""
    from pyhudi.txn.lock import lock_provider

    occ = {"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"} if mode == "optimistic" else {}
    base = str(tmp_path / "t")
    model = _seed(spark, base)
    stop = threading.Event()
    errors: list[BaseException] = []
    commits_during: list[int] = [0]
    started = threading.Event()

    def writer() -> None:
        step = 0
        try:
            while not stop.is_set():
                step += 1
                _write(spark, base, model, 1000 + step, occ)
                commits_during[0] += 1
                started.set()
        except BaseException as e:  # surfaced below
            errors.append(e)
            started.set()

    th = threading.Thread(target=writer, daemon=True)
    th.start()
    started.wait(timeout=300)
    try:
        lock = lock_provider(LOCAL, base, {**OPTS, **occ}, needed=bool(occ))

        def overlap(point: str) -> None:
            """The build goes on once the writer committed after the build's snapshot (however fast it is)."""
            seen = commits_during[0]
            deadline = time.monotonic() + 300
            while commits_during[0] < seen + 1 and not errors and time.monotonic() < deadline:
                time.sleep(0.1)

        with faults.inject("index.build", overlap):
            AsyncRecordIndexBuilder(LOCAL, base, {**OPTS, **occ}, spark=spark, lock=lock.held).build(
                num_file_groups=2)
        before = commits_during[0]
        deadline_steps = before + 1
        while commits_during[0] < deadline_steps and not errors:  # one more write after the build
            threading.Event().wait(0.2)
    finally:
        stop.set()
        th.join(timeout=600)
    assert not errors, errors
    tl = Table.open(base).timeline()
    idx = tl.by_action(INDEXING).completed().last()
    assert idx is not None and idx.completion_time is not None
    during = [i for i in tl.completed_commits() if idx.requested_time < i.requested_time < idx.completion_time]
    assert during, "no write committed while the index was being built"
    _check(base, model)


def test_indexer_that_dies_is_restarted(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    model = _seed(spark, base)

    with faults.inject("index.catch_up"), pytest.raises(faults.InjectedFault):
        AsyncRecordIndexBuilder(LOCAL, base, OPTS, spark=spark).build(num_file_groups=2)
    t = Table.open(base)
    assert RECORD_INDEX in t.config.metadata_partitions_inflight and pending_indexing(t.timeline()) is not None
    # writers keep going (and keep the inflight partition), record-index lookups are not offered yet
    _write(spark, base, model, 1)
    _write(spark, base, model, 2)
    t = Table.open(base)
    assert RECORD_INDEX in t.config.metadata_partitions_inflight
    with pytest.raises(Exception, match="no record index"):
        t.lookup(["k001"])
    seen: list[Any] = []
    with faults.inject("index.*", seen.append):
        AsyncRecordIndexBuilder(t.storage, t.base_path, OPTS, spark=spark).build(num_file_groups=4)
    assert seen == ["index.schedule", "index.snapshot", "index.build", "index.catch_up", "index.complete"]
    _check(base, model)


@contextlib.contextmanager
def _held_build(spark, base: str, num_file_groups: int) -> Iterator[list[BaseException]]:  # type: ignore[no-untyped-def]
    """A build in a thread of its own, held at ``index.build`` while the block runs, then released and joined;
    yields the list its error goes to."""
    building, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def hold(point: str) -> None:
        if threading.current_thread().name == "held build":
            building.set()
            assert release.wait(300)

    def run() -> None:
        try:
            AsyncRecordIndexBuilder(LOCAL, base, OPTS, spark=spark).build(num_file_groups=num_file_groups)
        except BaseException as e:  # reported to the caller
            errors.append(e)

    with faults.inject("index.build", hold):
        runner = threading.Thread(target=run, name="held build")
        runner.start()
        try:
            assert building.wait(300)
            yield errors
        finally:
            release.set()
            runner.join(600)


def test_a_running_build_is_not_taken_for_dead(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A second build while one runs refuses, naming the running one (its heartbeat is fresh), and changes nothing;
    the running build completes. The second used to take any pending build for a dead one and remove it: the
    first then completed an index missing the keys written meanwhile."""
    from pyhudi.errors import ConcurrentWriterError

    base = str(tmp_path / "t")
    model = _seed(spark, base)
    with _held_build(spark, base, 2) as errors:
        (inst,) = Table.open(base).timeline().by_action(INDEXING).pending()
        with pytest.raises(ConcurrentWriterError, match=rf"indexing instant {inst.requested_time}"):
            AsyncRecordIndexBuilder(LOCAL, base, OPTS, spark=spark).build(num_file_groups=1)
        assert list(Table.open(base).timeline().by_action(INDEXING).pending()) == [inst]
    assert not errors, errors
    _check(base, model)


def test_a_build_taken_for_dead_stops_before_it_writes(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A build that stalled past its heartbeat was taken for dead: another build removed it, wrote the keys written
    meanwhile into its index and completed. The stalled one, resuming, stops before it writes anything (its
    indexing instant is gone); it used to write its older snapshot's base files over the other's index, which then
    lacked the keys written meanwhile."""
    from pyhudi.errors import ConcurrentWriterError

    base = str(tmp_path / "t")
    model = _seed(spark, base)
    with _held_build(spark, base, 1) as errors:
        _write(spark, base, model, 1)  # keys the stalled build's snapshot lacks
        taker = AsyncRecordIndexBuilder(LOCAL, base, OPTS, spark=spark)
        taker.abort(Table.open(base).timeline())  # as a build that found its heartbeat expired does
        taker.build(num_file_groups=1)
    assert len(errors) == 1 and isinstance(errors[0], ConcurrentWriterError), errors
    assert "is gone" in str(errors[0])
    _check(base, model)


@pytest.mark.parametrize("mode", ["single_writer", "optimistic"])
def test_writer_begun_before_the_build_was_scheduled(spark, tmp_path: Path, mode: str) -> None:  # type: ignore[no-untyped-def]
    """A write reads its timeline when it begins and prepares the metadata table when it starts. An index build
    scheduled in between, and past writing its partition's metafile when the write starts, is kept: the write
    neither drops the inflight partition (its metafile, so readers would never see the index) nor clears its
    inflight mark, and it appends its own record-index changes to it."""
    from pyhudi.metadata.partitions import metadata_base_path
    from pyhudi.table.filenames import PARTITION_METAFILE
    from pyhudi.txn.lock import lock_provider

    occ = {"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"} if mode == "optimistic" else {}
    opts = {**OPTS, **occ}
    base = str(tmp_path / "t")
    model = _seed(spark, base)
    part = Path(metadata_base_path(base), RECORD_INDEX)
    lock = lock_provider(LOCAL, base, opts, needed=bool(occ))
    builder = AsyncRecordIndexBuilder(LOCAL, base, opts, spark=spark, lock=lock.held)
    at_build, written = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    threads: list[threading.Thread] = []
    at_start: list[list[str]] = []  # the partition's files when the write started

    def indexer(plan: Any) -> None:
        try:
            builder.run(plan)
        except BaseException as e:  # surfaced below
            errors.append(e)
            at_build.set()

    def schedule_then_let_the_write_start(point: str) -> None:
        """The write has begun (its timeline read) and not started: the build is scheduled and runs up to its
        base files, where it waits for the write to commit."""
        if threads:
            return
        with lock.held():
            plan = builder.schedule(num_file_groups=2)
        threads.append(threading.Thread(target=indexer, args=(plan,), daemon=True))
        threads[0].start()
        assert at_build.wait(300)
        at_start.append(sorted(p.name for p in part.iterdir()))

    def hold(point: str) -> None:
        at_build.set()
        assert written.wait(300)

    try:
        with faults.inject("before_start", schedule_then_let_the_write_start), faults.inject("index.build", hold):
            _write(spark, base, model, 1, occ)
            after_write = Table.open(base).config.metadata_partitions_inflight
    finally:
        written.set()
        for th in threads:
            th.join(timeout=600)
    assert not errors, errors
    _check(base, model)
    assert at_start == [[PARTITION_METAFILE]]  # the build was past writing the partition's metafile
    assert RECORD_INDEX in after_write
    assert builder.caught_up == []  # the write appended its own record-index changes to the inflight partition
    _write(spark, base, model, 2, {**occ, "hoodie.index.type": "RECORD_INDEX"})
    _check(base, model)


def test_reconcile_keeps_a_build_a_stale_timeline_or_config_misses(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``MetadataWriter.reconcile`` given a timeline from before the build was scheduled, or a config from before
    it completed, keeps the record index; an inflight mark no indexing instant backs is still dropped."""
    from pyhudi.metadata.partitions import metadata_base_path
    from pyhudi.metadata.writer import MetadataWriter
    from pyhudi.table.filenames import write_partition_metadata
    from pyhudi.table.properties import METADATA_PARTITIONS_INFLIGHT, update_table_config

    base = str(tmp_path / "t")
    model = _seed(spark, base)
    stale = Table.open(base).timeline()
    builder = AsyncRecordIndexBuilder(LOCAL, base, OPTS, spark=spark)
    plan = builder.schedule(num_file_groups=2)
    before_build = Table.open(base).config
    writer = MetadataWriter(LOCAL, base, before_build)
    writer.reconcile(OPTS, stale)
    assert writer.dropped == []
    assert RECORD_INDEX in Table.open(base).config.metadata_partitions_inflight
    assert Path(metadata_base_path(base), RECORD_INDEX).is_dir()
    builder.run(plan)
    writer = MetadataWriter(LOCAL, base, before_build)  # inflight only; the build completed since
    writer.reconcile(OPTS, stale)
    assert writer.dropped == []
    assert RECORD_INDEX in writer.data_config.metadata_partitions
    _check(base, model)

    other = str(tmp_path / "u")
    _seed(spark, other)
    meta = str(Path(other, ".hoodie"))
    update_table_config(LOCAL, meta, {METADATA_PARTITIONS_INFLIGHT: RECORD_INDEX})  # no indexing instant
    write_partition_metadata(LOCAL, metadata_base_path(other), RECORD_INDEX, "00000000000000002")
    writer = MetadataWriter(LOCAL, other, Table.open(other).config)
    writer.reconcile(OPTS, Table.open(other).timeline())
    assert writer.dropped == [RECORD_INDEX]
    assert RECORD_INDEX not in Table.open(other).config.metadata_partitions_inflight
    assert not Path(metadata_base_path(other), RECORD_INDEX).exists()


def test_validate_flags_a_listed_record_index_readers_do_not_see(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from pyhudi.metadata.partitions import metadata_base_path
    from pyhudi.table.filenames import PARTITION_METAFILE

    base = str(tmp_path / "t")
    _seed(spark, base)
    AsyncRecordIndexBuilder(LOCAL, base, OPTS, spark=spark).build(num_file_groups=3)
    assert validate_table(Table.open(base)).ok
    part = Path(metadata_base_path(base), RECORD_INDEX)
    one = sorted(part.glob("record-index-0001-0_*"))
    assert one
    hidden = [(p, p.read_bytes()) for p in one]
    for p, _ in hidden:
        p.unlink()  # one file group of three gone: keys would hash over two
    rep = validate_table(Table.open(base))
    assert not rep.ok and any("record-index-0000-0, record-index-0002-0" in p for p in rep.problems), rep.problems
    for p, data in hidden:
        p.write_bytes(data)
    assert validate_table(Table.open(base)).ok
    (part / PARTITION_METAFILE).unlink()  # the partition is not a partition to readers any more
    rep = validate_table(Table.open(base))
    assert not rep.ok and any("no record_index partition" in p for p in rep.problems), rep.problems
    assert rep.record_index is not None and not rep.record_index_ok


@pytest.mark.parametrize("partition", [RECORD_INDEX, "column_stats"])
def test_an_index_another_indexer_builds_is_refused(tmp_path: Path, partition: str) -> None:
    """Apache Hudi's async indexer writes its plan without pyhudi's ``recordIndexFileGroupCount``
    (``ScheduleIndexActionExecutor``: an empty ``extraMetadata``), and runs the build in its own process: a write
    is refused with an error naming the indexing instant, and leaves the partition being built alone (for the
    record index it failed with a bare KeyError; a column_stats build lost its partition)."""
    from pyhudi.errors import UnsupportedTableError
    from pyhudi.metadata.writer import MetadataWriter
    from pyhudi.table.properties import METADATA_PARTITIONS_INFLIGHT, read_table_config, update_table_config
    from pyhudi.table.timeline import ActiveTimeline
    from tests.support.fabricate import Clock, commit, make_table
    from tests.support.storage import LOCAL

    base = make_table(tmp_path / "t")
    clock = Clock()
    c1 = commit(base, clock, {"region=eu": [("f1", [("a", 1), ("b", 2)])]})
    meta, opts = f"{base}/.hoodie", {"hoodie.metadata.enable": "true"}
    MetadataWriter(LOCAL, base, read_table_config(LOCAL, meta)).reconcile(opts, ActiveTimeline.load(LOCAL, base))
    tl = ActiveTimeline.load(LOCAL, base)
    t = clock()
    plan = {"version": 1, "indexPartitionInfos": [
        {"version": 1, "metadataPartitionPath": partition, "indexUptoInstant": c1, "extraMetadata": {}}]}
    tl.transition_to_inflight(tl.create_requested(INDEXING, t, plan), None)
    update_table_config(LOCAL, meta, {METADATA_PARTITIONS_INFLIGHT: partition})
    building = Path(meta, "metadata", partition)
    building.mkdir()
    (building / ".hoodie_partition_metadata").write_text("")
    with pytest.raises(UnsupportedTableError, match=rf"{base}: the metadata partition '{partition}' is being built "
                                                    rf"by another indexer \(indexing {t}, "):
        pending_indexing(ActiveTimeline.load(LOCAL, base))
    with pytest.raises(UnsupportedTableError, match=rf"indexing {t}"):
        MetadataWriter(LOCAL, base, read_table_config(LOCAL, meta)).reconcile(opts, ActiveTimeline.load(LOCAL, base))
    assert read_table_config(LOCAL, meta).metadata_partitions_inflight == [partition] and building.exists()
