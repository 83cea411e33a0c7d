"""A read planned while another process commits, cleans or compacts the metadata table returns one state of the
table, never a mix: its plan loads the timeline, then the file listing and the record index (the table's latest
state); the timeline is listed again afterwards and the read planned anew when it changed
(:func:`pyhudi.read.plan.planned`). Each race is staged exactly: the concurrent work runs at the fault point
``read.after_timeline`` (in this process, or in the test while a reader process waits there)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pyhudi import faults
from pyhudi.errors import InvalidInputError, TableChangedError
from pyhudi.read import plan as read_plan
from pyhudi.read.filters import IN, Pred
from pyhudi.services.clean import clean
from pyhudi.spark.source import plan_query
from pyhudi.table.table import Table
from pyhudi.table.timeline import COMMIT, ROLLBACK, ActiveTimeline, Instant, InstantTimeGenerator
from tests.support.fabricate import Clock, commit, make_table
from tests.support.storage import LOCAL

A, B = "region=a", "region=b"


@contextmanager
def once_at_plan(work: Callable[[], None]) -> Iterator[list[int]]:
    """Run ``work`` the first time a read reaches ``read.after_timeline`` (after loading its timeline, before
    listing); yields the list of times the point was reached."""
    reached: list[int] = []

    def handler(point: str) -> None:
        reached.append(1)
        if len(reached) == 1:
            work()

    with faults.inject("read.after_timeline", handler):
        yield reached


def keys_of(t: pa.Table) -> dict[str, int]:
    return {r["_hoodie_record_key"]: r["v"] for r in t.select(["_hoodie_record_key", "v"]).to_pylist()}


def two_groups(base: str, clock: Clock) -> None:
    """C0: one file group per partition (k0, k1 in a; k2, k3 in b)."""
    commit(base, clock, {A: [("fa", [("k0", 0), ("k1", 1)])], B: [("fb", [("k2", 2), ("k3", 3)])]})


def rewrite_b_and_clean(base: str, clock: Clock, v: int) -> Callable[[], None]:
    """Two new versions of b's file group, then a clean keeping one commit: b's version of C0 is deleted."""

    def work() -> None:
        commit(base, clock, {B: [("fb", [("k2", v), ("k3", 3)])]})
        commit(base, clock, {B: [("fb", [("k2", v + 1), ("k3", 3)])]})
        assert clean(LOCAL, base, None, retained=1, new_instant_time=clock) is not None

    return work


def test_a_clean_during_the_listing_does_not_drop_a_file_group(tmp_path: Path) -> None:
    """The storage listing is taken after the clean deleted the only version of b's file group the first timeline
    sees: planned on that timeline, b would be left out (2 rows, no error); planned again, all four rows."""
    base = make_table(tmp_path / "t")
    clock = Clock()
    two_groups(base, clock)
    with once_at_plan(rewrite_b_and_clean(base, clock, 20)) as reached:
        got = keys_of(Table.open(base).to_arrow())
    assert got == {"k0": 0, "k1": 1, "k2": 21, "k3": 3}
    assert len(reached) == 2  # planned twice: the timeline changed during the first plan


def test_a_time_travel_older_than_a_pending_clean_keeps_is_refused(tmp_path: Path) -> None:
    """A clean that planned and began deleting (its instant pending) counts for time travel as a completed one:
    a read as of a commit before what it keeps is refused (it may be reading files being deleted)."""
    base = make_table(tmp_path / "t")
    clock = Clock()
    two_groups(base, clock)
    first = ActiveTimeline.load(LOCAL, base).completed_commits().first()
    assert first is not None
    commit(base, clock, {B: [("fb", [("k2", 20), ("k3", 3)])]})
    commit(base, clock, {B: [("fb", [("k2", 21), ("k3", 3)])]})

    def die(clean_time: str, files: Mapping[str, list[str]]) -> None:
        raise RuntimeError("clean dies before deleting")

    with pytest.raises(RuntimeError, match="clean dies"):
        clean(LOCAL, base, None, retained=1, new_instant_time=clock, on_delete=die)
    tl = ActiveTimeline.load(LOCAL, base)
    assert tl.by_action("clean").pending() and not tl.by_action("clean").completed()
    t = Table.open(base)
    with pytest.raises(InvalidInputError, match=f"cannot read as of {first.requested_time}: cleaning"):
        t.to_arrow(as_of=first.requested_time)
    assert keys_of(t.to_arrow()) == {"k0": 0, "k1": 1, "k2": 21, "k3": 3}  # the latest snapshot is read


def test_writes_that_only_begin_while_a_read_is_planned_do_not_make_it_plan_again(tmp_path: Path) -> None:
    """A write that only began (requested, inflight) is not a change a plan has to follow: nothing it writes is
    listed before it completes. A table with writers starting all the time is read at the first plan."""
    base = make_table(tmp_path / "t")
    clock = Clock()
    two_groups(base, clock)

    def begin_a_write(point: str) -> None:
        commit(base, clock, {A: [(f"new{clock()}", [("n", 0)])]}, complete=False)

    with faults.inject("read.after_timeline", begin_a_write):
        assert keys_of(Table.open(base).to_arrow()) == {"k0": 0, "k1": 1, "k2": 2, "k3": 3}
    assert len([i for i in ActiveTimeline.load(LOCAL, base) if not i.is_completed]) == 1


def test_a_table_that_changes_at_every_plan_is_refused_after_some_attempts(tmp_path: Path) -> None:
    base = make_table(tmp_path / "t")
    clock = Clock()
    two_groups(base, clock)
    n = [0]

    def handler(point: str) -> None:
        n[0] += 1
        commit(base, clock, {A: [(f"new{n[0]}", [(f"n{n[0]}", 0)])]})

    with faults.inject("read.after_timeline", handler), pytest.raises(TableChangedError, match="times in a row"):
        Table.open(base).to_arrow()
    assert n[0] == read_plan.PLAN_ATTEMPTS


READER = """
import json, sys
from pyhudi.table.table import Table
t = Table.open(sys.argv[1]).to_arrow()
print(json.dumps({r["_hoodie_record_key"]: r["v"] for r in t.select(["_hoodie_record_key", "v"]).to_pylist()}))
"""


def test_a_reader_process_racing_a_clean_reads_one_state(tmp_path: Path) -> None:
    """The same race with a reader in its own process, paused at the fault point while this process commits and
    cleans."""
    base = make_table(tmp_path / "t")
    clock = Clock()
    two_groups(base, clock)
    release = str(tmp_path / "release")
    env = {**os.environ, faults.ENV: "wait_read.after_timeline", faults.RELEASE_ENV: release}
    reader = subprocess.Popen([sys.executable, "-c", READER, base], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env)
    try:
        waiting = Path(release + ".waiting")
        for _ in range(1200):
            if waiting.exists() or reader.poll() is not None:
                break
            time.sleep(0.05)
        assert waiting.exists(), reader.communicate()
        rewrite_b_and_clean(base, clock, 20)()
        Path(release).touch()
        out, err = reader.communicate(timeout=120)
    finally:
        if reader.poll() is None:
            reader.kill()
    assert reader.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1]) == {"k0": 0, "k1": 1, "k2": 21, "k3": 3}


# -- the metadata table compacted, the record index --------------------------------------------------------------
OPTS = {
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.table.ordering.fields": "ts",
    "hoodie.metadata.record.index.enable": "true",
    "hoodie.metadata.compact.max.delta.commits": "1",  # every commit compacts the metadata table
    "hoodie.cleaner.commits.retained": "1",
}
SCHEMA = pa.schema([("id", pa.string()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])


def rows(ids: list[int], ts: int = 1, v: int = 0) -> pa.Table:
    return pa.Table.from_pylist([{"id": f"k{i:03d}", "p": "a" if i % 2 == 0 else "b", "ts": ts, "v": i + v}
                                 for i in ids], schema=SCHEMA)


def test_reads_racing_commits_that_compact_the_metadata_table(spark: Any, tmp_path: Path) -> None:
    """Every commit compacts the metadata table and cleans: a read that lists files or looks keys up after the
    compaction would see, in its base files, commits its timeline does not (a key deleted, a file group's only
    visible version cleaned). Each read returns the rows of one commit: the latest."""
    base = str(tmp_path / "t")
    Table.create(base, SCHEMA, OPTS).write(spark.createDataFrame(rows(list(range(8)))), "bulk_insert", OPTS)
    model = {f"k{i:03d}": i for i in range(8)}

    def upsert(ids: list[int], v: int) -> None:
        Table.open(base).write(spark.createDataFrame(rows(ids, ts=2, v=v)), "upsert", OPTS)
        model.update({f"k{i:03d}": i + v for i in ids})

    def delete(ids: list[int]) -> None:
        Table.open(base).write(spark.createDataFrame(rows(ids, ts=3)), "delete", OPTS)
        for i in ids:
            model.pop(f"k{i:03d}")

    def then(*steps: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            for step in steps:
                step()

        return run

    with once_at_plan(then(lambda: upsert([1], 100), lambda: delete([2]))) as reached:
        assert keys_of(Table.open(base).to_arrow()) == model
    assert len(reached) == 2
    with once_at_plan(then(lambda: upsert([1], 200), lambda: delete([4]))):
        assert keys_of(Table.open(base).read_keys(["k001", "k004"])) == {"k001": 201}
    assert Table.open(base).lookup(["k001", "k004"]).column("found").to_pylist() == [True, False]
    # the Spark data source's planning: a key query pruned by the record index
    with once_at_plan(then(lambda: upsert([1], 400), lambda: delete([0]))):
        plan, rep = plan_query({"path": base}, (Pred("id", IN, ("k000", "k001")),))
    assert rep.keys == 2 and "record_index" in rep.steps
    got = plan.to_arrow()
    assert keys_of(got.filter(pc.is_in(got["id"], pa.array(["k000", "k001"])))) == {"k001": 401}
    # while a rollback is pending (a Java writer's, of a completed commit: its files go after it is reverted to
    # inflight, while the record index may still place keys where it wrote them), keys are found without the index
    last = Table.open(base).timeline().completed_commits().last()
    assert last is not None
    tl = Table.open(base).timeline()
    tl.create_requested(ROLLBACK, InstantTimeGenerator.for_table(Table.open(base).config).next(floor=tl.latest_time()),
                        {"instantToRollback": {"commitTime": last.requested_time, "action": COMMIT},
                         "rollbackRequests": [], "extraMetadata": {}, "version": 1})
    plan, rep = plan_query({"path": base}, (Pred("id", IN, ("k000", "k001")),))
    assert "record_index" not in rep.steps and rep.slices_after_keys == rep.slices_total
    got = plan.to_arrow()
    assert keys_of(got.filter(pc.is_in(got["id"], pa.array(["k000", "k001"])))) == {"k001": 401}
    assert keys_of(Table.open(base).read_keys(["k000", "k001"])) == {"k001": 401}


def file_versions_clean(base: str, tl: ActiveTimeline, clock: Clock, last: str, partition: str, name: str) -> Instant:
    """A Java writer's KEEP_LATEST_FILE_VERSIONS clean deleting ``partition/name``: it names no commit to retain."""
    from pyhudi.services.clean import _run

    plan = {"earliestInstantToRetain": None, "lastCompletedCommitTimestamp": last,
            "policy": "KEEP_LATEST_FILE_VERSIONS", "filesToBeDeletedPerPartition": {}, "version": 2,
            "partitionsToBeDeleted": [], "extraMetadata": {},
            "filePathsToBeDeletedPerPartition": {partition: [{"filePath": str(Path(base) / partition / name),
                                                              "isBootstrapBaseFile": False}]}}
    req = tl.create_requested("clean", clock(), plan)
    _run(LOCAL, base, tl, req, plan, clock)
    return req


def test_a_time_travel_to_versions_a_file_versions_clean_deleted_is_refused(tmp_path: Path) -> None:
    """A Java writer's clean keeping the latest version of each file group (KEEP_LATEST_FILE_VERSIONS) records no
    commit to retain: a time travel to before it would list b's file group without the version it needs and leave
    it out, silently. Refused, naming the clean and the file; a time travel it did not bite is read. An
    incremental range ending before it likewise."""
    base = make_table(tmp_path / "t")
    clock = Clock()
    two_groups(base, clock)
    tl = ActiveTimeline.load(LOCAL, base)
    c0 = tl.completed_commits().last()
    assert c0 is not None
    commit(base, clock, {B: [("fb", [("k2", 20), ("k3", 3)])]})
    c2 = commit(base, clock, {A: [("fa2", [("k5", 5)])]})
    tl = tl.reload()
    old_b = next(p.name for p in (Path(base) / B).glob(f"fb_*_{c0.requested_time}.parquet"))
    req = file_versions_clean(base, tl, clock, c2, B, old_b)
    t = Table.open(base)
    with pytest.raises(InvalidInputError, match=rf"cannot read as of {c0.requested_time}: the clean "
                                                rf"{req.requested_time} \(KEEP_LATEST_FILE_VERSIONS\) deleted "
                                                rf"{B}/{old_b}"):
        t.to_arrow(as_of=c0.requested_time)
    assert keys_of(t.to_arrow(as_of=c2)) == {"k0": 0, "k1": 1, "k2": 20, "k3": 3, "k5": 5}
    # an incremental range is read as the table was at its end: one ending before the clean deleted the version
    # it reads is refused the same way (it returned no rows); one ending at the latest versions is read
    tl = t.timeline()
    done = {i.requested_time: i.completion_time for i in tl.completed_commits()}
    with pytest.raises(InvalidInputError, match=rf"cannot read the incremental range \(0, {done[c0.requested_time]}\]"
                                                rf": the clean {req.requested_time} \(KEEP_LATEST_FILE_VERSIONS\) "
                                                rf"deleted {B}/{old_b}"):
        t.incremental_arrow("0", done[c0.requested_time])
    assert keys_of(t.incremental_arrow(done[c0.requested_time], done[c2])) == {"k2": 20, "k3": 3, "k5": 5}


def test_an_incremental_range_before_a_replace_completed_needs_the_replaced_versions(tmp_path: Path) -> None:
    """A replace (a Java clustering of b's file group) requested before a range's end but completed after it: the
    range reads b's group as not yet replaced, so a KEEP_LATEST_FILE_VERSIONS clean that then deleted the group's
    files (a replaced group goes whole) leaves it without the version it reads. Refused (it was taken for replaced
    by the requested time, and b's rows were missing)."""
    from tests.support.fabricate import write_base_file

    base = make_table(tmp_path / "t")
    clock = Clock()
    two_groups(base, clock)
    tl = ActiveTimeline.load(LOCAL, base)
    rc = clock()
    requested = tl.create_requested("replacecommit", rc, {"operationType": "CLUSTER", "clusteringPlan": None,
                                                          "extraMetadata": {}, "version": 1})
    x = commit(base, clock, {A: [("fa", [("k0", 10), ("k1", 1)])]})
    name, size = write_base_file(base, B, "fb2", rc, [("k2", 2), ("k3", 3)])
    tl = tl.reload()
    tl.complete(tl.transition_to_inflight(requested, None), {
        "partitionToWriteStats": {B: [{"fileId": "fb2", "path": f"{B}/{name}", "prevCommit": "null", "numWrites": 2,
                                       "numDeletes": 0, "numUpdateWrites": 0, "numInserts": 2, "totalWriteBytes": size,
                                       "totalWriteErrors": 0, "partitionPath": B, "fileSizeInBytes": size}]},
        "partitionToReplaceFileIds": {B: ["fb"]}, "compacted": False, "extraMetadata": {}, "version": 1,
        "operationType": "CLUSTER"}, clock(), schema="HoodieReplaceCommitMetadata")
    tl = tl.reload()
    old_b = next(p.name for p in (Path(base) / B).glob("fb_*.parquet"))
    req = file_versions_clean(base, tl, clock, rc, B, old_b)
    t = Table.open(base)
    end = {i.requested_time: i.completion_time for i in t.timeline().completed_commits()}[x]
    assert end is not None
    with pytest.raises(InvalidInputError, match=rf"cannot read the incremental range \(0, {end}\]: the clean "
                                                rf"{req.requested_time} \(KEEP_LATEST_FILE_VERSIONS\) deleted "
                                                rf"{B}/{old_b}"):
        t.incremental_arrow("0", end)
    assert keys_of(t.to_arrow()) == {"k0": 10, "k1": 1, "k2": 2, "k3": 3}
