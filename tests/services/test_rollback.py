from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pyhudi import faults
from pyhudi.io import avro
from pyhudi.services.rollback import (
    read_rollback_metadata,
    read_rollback_plan,
    rollback_failed_writes,
    rollback_instant,
)
from pyhudi.table import markers
from pyhudi.table.timeline import ActiveTimeline, State
from tests.support.fabricate import Clock, commit, make_table, timeline_names
from tests.support.storage import LOCAL

ROLLBACK_ZIP = "mor_v9_nonpartitioned_rollback.zip"



def _failed_table(tmp_path: Path, with_markers: bool = True) -> tuple[str, Clock, str, str]:
    base = make_table(tmp_path / "t")
    clock = Clock()
    good = commit(base, clock, {"region=eu": [("aaaa-0", [("k1", 1), ("k2", 2)])]})
    bad = commit(
        base,
        clock,
        {
            "region=eu": [("aaaa-0", [("k1", 10)]), ("bbbb-0", [("k3", 3)])],
            "region=us": [("cccc-0", [("k4", 4)])],
        },
        complete=False,
        with_markers=with_markers,
    )
    # a stray log file of the failed instant (MOR-style), found by listing
    if not with_markers:
        (Path(base) / "region=us" / f".cccc-0_{bad}.log.1_0-1-0").write_bytes(b"#HUDI#")
    return base, clock, good, bad


def _data_files(base: str) -> list[str]:
    return sorted(
        str(p.relative_to(base))
        for p in Path(base).rglob("*")
        if p.is_file() and ".hoodie" not in p.parts and not p.name.startswith(".hoodie_")
    )


@pytest.mark.parametrize("with_markers", [True, False])
def test_rollback_failed_commit(tmp_path: Path, with_markers: bool) -> None:
    base, clock, good, bad = _failed_table(tmp_path, with_markers)
    assert markers.markers_exist(LOCAL, base, bad) == with_markers
    results = rollback_failed_writes(LOCAL, base, None, clock)
    assert len(results) == 1
    r = results[0]
    assert r.rolled_back == bad and r.rolled_back_action == "commit" and not r.failed
    assert _data_files(base) == [f"region=eu/aaaa-0_0-1-0_{good}.parquet"]
    assert not markers.markers_exist(LOCAL, base, bad)
    names = timeline_names(base)
    assert not [n for n in names if n.startswith(bad)]  # the failed instant's files are gone
    rt = r.instant.requested_time
    assert f"{rt}.rollback.requested" in names and f"{rt}.rollback.inflight" in names
    tl = ActiveTimeline.load(LOCAL, base)
    assert (Path(base) / ".hoodie/timeline" / f"{rt}.rollback.inflight").read_bytes() == b""
    meta = read_rollback_metadata(tl, tl.get(rt))  # type: ignore[arg-type]
    assert meta["startRollbackTime"] == rt
    assert meta["commitsRollback"] == [bad]
    assert meta["instantsRollback"] == [{"commitTime": bad, "action": "commit"}]
    assert meta["totalFilesDeleted"] == (3 if with_markers else 4)
    assert set(meta["partitionMetadata"]) == {"region=eu", "region=us"}
    us = meta["partitionMetadata"]["region=us"]
    assert (
        us["failedDeleteFiles"] == []
        and us["rollbackLogFiles"] == {}
        and us["logFilesFromFailedCommit"] == {}
    )
    assert all(p.startswith(base + "/region=") for p in us["successDeleteFiles"])
    plan = read_rollback_plan(tl, rt)
    assert plan["instantToRollback"] == {"commitTime": bad, "action": "commit"}
    assert plan["version"] == 1
    assert all(
        r["fileId"] == "" and r["latestBaseInstant"] == "" and r["logBlocksToBeDeleted"] == {}
        for r in plan["RollbackRequests"]
    )
    # writer schema in the container is the compiled-class schema, as Hudi writes it
    data = (Path(base) / ".hoodie/timeline" / r.instant.file_name).read_bytes()
    assert avro.container_schema_name(data) == "HoodieRollbackMetadata"
    # idempotent: nothing left to roll back
    assert rollback_failed_writes(LOCAL, base, tl, clock) == []


@pytest.mark.parametrize("step", ["planned", "inflight", "files_deleted", "instant_deleted", "completed"])
def test_crash_mid_rollback_is_completed_by_next_call(tmp_path: Path, step: str) -> None:
    base, clock, good, bad = _failed_table(tmp_path)

    with faults.inject(f"rollback.{step}"), pytest.raises(faults.InjectedFault):
        rollback_failed_writes(LOCAL, base, None, clock)
    results = rollback_failed_writes(LOCAL, base, None, clock)
    tl = ActiveTimeline.load(LOCAL, base)
    rollbacks = list(tl.by_action("rollback"))
    assert len(rollbacks) == 1 and rollbacks[0].is_completed  # one rollback, completed
    if step != "completed":
        assert [r.instant for r in results] == rollbacks
    assert _data_files(base) == [f"region=eu/aaaa-0_0-1-0_{good}.parquet"]
    assert tl.get(bad) is None
    assert not markers.markers_exist(LOCAL, base, bad)
    meta = read_rollback_metadata(tl, rollbacks[0])
    assert meta["commitsRollback"] == [bad]


def test_rollback_instant_on_metadata_table_path(tmp_path: Path) -> None:
    # a pending deltacommit in a (fabricated) metadata table at <base>/.hoodie/metadata
    base = make_table(tmp_path / "t")
    mdt = make_table(Path(base) / ".hoodie" / "metadata", name="t_metadata", partitioned=False)
    clock = Clock()
    tl = ActiveTimeline.load(LOCAL, mdt)
    t = clock()
    inst = tl.transition_to_inflight(tl.create_requested("deltacommit", t), None)
    files = Path(mdt) / "files"
    files.mkdir()
    (files / ".hoodie_partition_metadata").write_text("commitTime=0\npartitionDepth=1\n")
    keep = files / ".files-0000-0_00000000000000000.log.1_0-0-0"
    keep.write_bytes(b"x")
    doomed = files / f".files-0000-0_{t}.log.1_2-39-107"
    doomed.write_bytes(b"x")
    markers.create_marker(LOCAL, mdt, t, "files", doomed.name, "APPEND")
    r = rollback_instant(LOCAL, mdt, inst, clock)
    assert not doomed.exists() and keep.exists()
    tl = ActiveTimeline.load(LOCAL, mdt)
    assert tl.get(t) is None
    assert read_rollback_metadata(tl, r.instant)["partitionMetadata"]["files"]["successDeleteFiles"] == [
        str(doomed)
    ]
    # the data table is untouched
    assert ActiveTimeline.load(LOCAL, base).instants == ()


def test_read_real_rollback_fixture(fixture_tables: dict[str, Path]) -> None:
    base = str(fixture_tables[ROLLBACK_ZIP])
    for b in (base, base + "/.hoodie/metadata"):
        tl = ActiveTimeline.load(LOCAL, b)
        rb = [i for i in tl.by_action("rollback") if i.state == State.COMPLETED]
        assert len(rb) == 1
        meta = read_rollback_metadata(tl, rb[0])
        assert meta["commitsRollback"] == ["20260403184242950"]
        assert meta["instantsRollback"] == [{"commitTime": "20260403184242950", "action": "deltacommit"}]
        plan = read_rollback_plan(tl, rb[0].requested_time)
        assert plan["instantToRollback"]["commitTime"] == "20260403184242950"
        assert tl.get("20260403184242950") is None  # Hudi deleted the rolled-back instant's files
        # our schema equals the writer schema Hudi stored, so our files have the same shape
        raw = (Path(b) / ".hoodie/timeline" / rb[0].file_name).read_bytes()
        assert avro.container_schema_json(raw) == avro.java_schema_json(
            avro.schema_json("HoodieRollbackMetadata")
        )
        raw = (Path(b) / ".hoodie/timeline" / f"{rb[0].requested_time}.rollback.requested").read_bytes()
        assert avro.container_schema_json(raw) == avro.java_schema_json(
            avro.schema_json("HoodieRollbackPlan")
        )
        # re-encoding Hudi's record with our schema gives Hudi's bytes (past the header/sync marker)
        rec = avro.read_single((Path(b) / ".hoodie/timeline" / rb[0].file_name).read_bytes())
        theirs = (Path(b) / ".hoodie/timeline" / rb[0].file_name).read_bytes()
        ours = avro.write_container(rec, "HoodieRollbackMetadata", sync_marker=theirs[-16:])
        assert ours == theirs


def test_hudi_rs_reads_table_after_rollback(tmp_path: Path) -> None:
    hudi = pytest.importorskip("hudi")
    base, clock, good, _bad = _failed_table(tmp_path)
    rollback_failed_writes(LOCAL, base, None, clock)
    import pyarrow as pa

    batches = hudi.HudiTableBuilder.from_base_uri(base).build().read()
    t = pa.Table.from_batches(batches)
    assert sorted(t.column("id").to_pylist()) == ["k1", "k2"]
    assert set(t.column("_hoodie_commit_time").to_pylist()) == {good}
    shutil.rmtree(base)


def test_orphan_markers_of_a_write_that_began_after_the_timeline_was_read_are_kept(tmp_path: Path) -> None:
    """Another writer puts its requested instant, then its markers, on the table after this writer read the
    timeline: its markers stay (they are how its own rollback finds its files); a completed write's go."""
    from pyhudi.services.rollback import delete_orphan_markers

    base = make_table(tmp_path / "t")
    clock = Clock()
    done = commit(base, clock, {"region=eu": [("aaaa-0", [("k1", 1)])]}, with_markers=True)
    # its writer died between completing the instant and deleting its markers
    markers.create_marker(LOCAL, base, done, "region=eu", f"aaaa-0_0-1-0_{done}.parquet", "CREATE")
    seen = ActiveTimeline.load(LOCAL, base)
    live = commit(base, clock, {"region=eu": [("bbbb-0", [("k2", 2)])]}, complete=False, with_markers=True)
    assert markers.markers_exist(LOCAL, base, done) and markers.markers_exist(LOCAL, base, live)
    assert delete_orphan_markers(LOCAL, base, seen) == [done]
    assert markers.markers_exist(LOCAL, base, live) and not markers.markers_exist(LOCAL, base, done)


def test_files_a_rolled_back_writer_wrote_afterwards_are_deleted(tmp_path: Path) -> None:
    """A writer that stalled past its heartbeat was rolled back, then went on: its tasks wrote files (and their
    markers) named with its instant, gone from the timeline. The next rollback pass deletes them, by their
    markers, also once archival passed their instant; a completed write's files named by leftover markers stay,
    also once it was archived (the archived timeline holds it)."""
    from pyhudi.services.archive import archive

    base, clock, good, bad = _failed_table(tmp_path)
    rollback_failed_writes(LOCAL, base, None, clock)
    assert _data_files(base) == [f"region=eu/aaaa-0_0-1-0_{good}.parquet"]
    # the stalled writer resumes: one more file and its marker, after its rollback
    late = Path(base) / "region=us" / f"dddd-0_0-2-0_{bad}.parquet"
    late.write_bytes(b"PAR1")
    markers.create_marker(LOCAL, base, bad, "region=us", late.name, "CREATE")
    # a completed write's leftover marker
    markers.create_marker(LOCAL, base, good, "region=eu", f"aaaa-0_0-1-0_{good}.parquet", "CREATE")
    assert rollback_failed_writes(LOCAL, base, None, clock) == []
    assert not late.exists()
    assert _data_files(base) == [f"region=eu/aaaa-0_0-1-0_{good}.parquet"]
    assert not any(markers.markers_exist(LOCAL, base, t) for t in (bad, good))

    # the same once archival passed both instants: a rolled-back one's file goes, an archived write's stays
    later = [commit(base, clock, {"region=eu": [("bbbb-0", [("k5", i)])]}) for i in range(6)]
    archive(LOCAL, base, None, {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3"})
    first = min(i.requested_time for i in ActiveTimeline.load(LOCAL, base).commits())
    assert good < bad < first
    late.write_bytes(b"PAR1")
    markers.create_marker(LOCAL, base, bad, "region=us", late.name, "CREATE")
    markers.create_marker(LOCAL, base, good, "region=eu", f"aaaa-0_0-1-0_{good}.parquet", "CREATE")
    # older than all the archived timeline covers (history from before it): nothing shows it was not committed
    ancient = "19990101000000000"
    kept = Path(base) / "region=eu" / f"eeee-0_0-1-0_{ancient}.parquet"
    kept.write_bytes(b"PAR1")
    markers.create_marker(LOCAL, base, ancient, "region=eu", kept.name, "CREATE")
    assert rollback_failed_writes(LOCAL, base, None, clock) == []
    assert not late.exists() and kept.exists()
    assert f"region=eu/aaaa-0_0-1-0_{good}.parquet" in _data_files(base)
    assert not any(markers.markers_exist(LOCAL, base, t) for t in (bad, good, ancient, *later))


def test_files_a_writer_wrote_while_its_rollback_ran_are_deleted(tmp_path: Path) -> None:
    """A stalled writer's task writes a file (and its marker) while its instant's rollback runs, after the
    rollback planned from the markers: the rollback deletes it with the marker folder, the folder being the only
    record of it."""
    base, clock, good, bad = _failed_table(tmp_path)
    late = Path(base) / "region=us" / f"ffff-0_0-3-0_{bad}.parquet"

    def task_writes(point: str) -> None:
        late.write_bytes(b"PAR1")
        markers.create_marker(LOCAL, base, bad, "region=us", late.name, "CREATE")

    with faults.inject("rollback.completed", task_writes):
        rollback_failed_writes(LOCAL, base, None, clock)
    assert not late.exists() and not markers.markers_exist(LOCAL, base, bad)
    assert _data_files(base) == [f"region=eu/aaaa-0_0-1-0_{good}.parquet"]



@pytest.mark.parametrize("step", ["inflight", "files_deleted"])
def test_a_rollback_whose_target_completed_meanwhile_never_deletes_the_commit(tmp_path: Path, step: str,
                                                                              caplog: pytest.LogCaptureFixture) -> None:
    """A rollback of a pending write stopped part way; the write then completed (a writer that does not check for
    a pending rollback of its instant). Finishing the rollback would delete a completed commit, whose records were
    reported written: it is dropped, never carried out (also once archival could pass the commit), with a warning
    naming the files it had deleted already."""
    base = make_table(tmp_path / "t")
    clock = Clock()
    commit(base, clock, {"region=eu": [("aaaa-0", [("k1", 1)])]})

    def rolled_back_part_way(t: str, md: dict[str, object]) -> None:
        with faults.inject(f"rollback.{step}"), pytest.raises(faults.InjectedFault):
            rollback_instant(LOCAL, base, t, clock)

    late = commit(base, clock, {"region=eu": [("bbbb-0", [("k3", 3)])]}, before_complete=rolled_back_part_way)
    tl = ActiveTimeline.load(LOCAL, base)
    assert tl.get(late).is_completed and len(list(tl.by_action("rollback").pending())) == 1
    with caplog.at_level("WARNING", logger="pyhudi.services.rollback"):
        assert rollback_failed_writes(LOCAL, base, None, clock) == []
    tl = tl.reload()
    assert not list(tl.by_action("rollback")) and tl.get(late).is_completed
    kept = f"region=eu/bbbb-0_0-1-0_{late}.parquet" in _data_files(base)
    assert kept == (step == "inflight")
    assert ("completed after it" in caplog.text) == (not kept)


def test_a_rollback_of_a_completed_commit_stopped_part_way_is_finished(tmp_path: Path) -> None:
    """A rollback planned after its target completed (Apache Hudi's rollback of a completed commit, a restore)
    that stopped part way is carried out by the next pass, as any pending rollback."""
    base = make_table(tmp_path / "t")
    clock = Clock()
    good = commit(base, clock, {"region=eu": [("aaaa-0", [("k1", 1)])]})
    bad = commit(base, clock, {"region=eu": [("bbbb-0", [("k3", 3)])]})
    with faults.inject("rollback.inflight"), pytest.raises(faults.InjectedFault):
        rollback_instant(LOCAL, base, bad, clock, allow_completed=True)
    assert [r.rolled_back for r in rollback_failed_writes(LOCAL, base, None, clock)] == [bad]
    tl = ActiveTimeline.load(LOCAL, base)
    assert tl.get(bad) is None and tl.get(good).is_completed
    assert _data_files(base) == [f"region=eu/aaaa-0_0-1-0_{good}.parquet"]


@pytest.mark.spark
def test_a_rollback_of_a_commit_the_metadata_table_compacted_is_refused(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A pending rollback of a completed commit (as Apache Hudi plans one) whose metadata deltacommit the metadata
    table has compacted since: refused by name before anything changes, as Hudi's ``validateRollback`` refuses it
    (a restore is the way back). Carried out, it deleted the commit's files while the compacted base files kept
    listing them and kept its keys in the record index."""
    from pyhudi.errors import PyHudiError
    from pyhudi.metadata.partitions import metadata_base_path
    from pyhudi.metadata.validate import validate_table
    from pyhudi.services.rollback import plan_rollback
    from pyhudi.table.table import Table
    from pyhudi.table.timeline import ROLLBACK, InstantTimeGenerator
    from tests.support.robust import OPTS, apply, expected, hudi_rs_read, rows, table_rows, to_arrow

    base, model = str(tmp_path / "t"), {}
    opts = {**OPTS, "hoodie.metadata.compact.max.delta.commits": "2"}
    for ts in range(1, 6):
        batch = rows(range(ts, ts + 6), ts=ts, v=float(ts))
        df = spark.createDataFrame(to_arrow(batch))
        target = Table.for_dataframe(base, df, opts).write(df, "upsert", opts).instant
        apply(model, "upsert", batch)
        mdt = ActiveTimeline.load(LOCAL, metadata_base_path(base))
        if any(i.action == "commit" and i.requested_time > target for i in mdt.completed()):
            break
    else:
        pytest.fail("the metadata table never compacted after a commit")
    t = Table.open(base)
    tl = t.timeline()
    r = InstantTimeGenerator.for_table(t.config).next(floor=tl.latest_time())
    tl.create_requested(ROLLBACK, r, plan_rollback(LOCAL, base, target, "commit"))
    with pytest.raises(PyHudiError, match=rf"rollback {r} .* of the completed commit {target} is refused"):
        rollback_failed_writes(LOCAL, base, None, InstantTimeGenerator.for_table(t.config))
    assert Table.open(base).timeline().get(target).is_completed
    assert validate_table(Table.open(base)).ok
    assert table_rows(hudi_rs_read(base)) == expected(model)
