"""Crash recovery: a write that fails (in a Spark task after writing its file, on the driver before the commit,
or killed with SIGKILL) leaves the table as it was, with the failed instant pending; the next write rolls it back
(completed rollback instant, the instant's data files and marker folder gone) and the table equals the model."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from pyhudi.metadata.validate import validate_table
from pyhudi.services.rollback import read_rollback_metadata
from pyhudi.table import markers
from pyhudi.table.table import Table
from pyhudi.table.timeline import ActiveTimeline, Instant
from pyhudi.write.producer import FAULT_OPTION
from tests.support.robust import (
    CLI_KEYS,
    OPTS,
    PYHUDI,
    SCHEMA,
    apply,
    cli_env,
    data_files_with_instant,
    expected,
    files_with_instant,
    full_rows,
    hudi_rs_read,
    rows,
    run_cli,
    table_rows,
    to_arrow,
)
from tests.support.storage import LOCAL

pytest.importorskip("hudi")
pytestmark = [pytest.mark.spark, pytest.mark.slow]  # Spark-heavy: make test runs it, make test-quick does not


def _table_with_two_commits(spark, base: str) -> tuple[Table, dict]:  # type: ignore[no-untyped-def]
    model: dict = {}
    t = Table.create(base, SCHEMA, OPTS)
    first = rows(range(10))
    t.write(spark.createDataFrame(to_arrow(first)), "insert", OPTS)
    apply(model, "insert", first)
    second = rows(range(5, 15), ts=2, v=0.5)  # updates k005..k009, inserts k010..k014
    t.write(spark.createDataFrame(to_arrow(second)), "upsert", OPTS)
    apply(model, "upsert", second)
    return Table.open(base), model


def _pending_instants(base: str) -> list[str]:
    return [i.requested_time for i in Table.open(base).timeline() if not i.is_completed]


def _assert_rolled_back(base: str, failed: str) -> None:
    t = Table.open(base)
    tl = t.timeline()
    assert tl.get(failed) is None, f"failed instant {failed} still on the timeline"
    rolled = []
    for inst in tl.completed():
        if inst.action == "rollback":
            rolled += read_rollback_metadata(tl, inst)["commitsRollback"]
    assert failed in rolled, f"no completed rollback of {failed}"
    assert files_with_instant(base, failed) == []
    assert not Path(markers.marker_dir(base, failed)).exists()


@pytest.mark.parametrize("fault", ["after_write", "before_commit"])
def test_failed_write_is_invisible_then_rolled_back(spark, tmp_path: Path, fault: str) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    t, model = _table_with_two_commits(spark, base)
    before_rs, before_arrow = full_rows(hudi_rs_read(base)), full_rows(t.to_arrow())
    assert table_rows(hudi_rs_read(base)) == expected(model)
    completed_before = [i.requested_time for i in t.timeline().completed()]

    failing = rows(range(0, 20, 2), ts=3, v=0.25)  # updates in both partitions, new keys
    with pytest.raises(Exception, match="injected fault"):
        t.write(spark.createDataFrame(to_arrow(failing)), "upsert", {**OPTS, FAULT_OPTION: fault})

    pending = _pending_instants(base)
    assert len(pending) == 1, pending
    failed = pending[0]
    assert Table.open(base).timeline().get(failed).action == "commit"
    assert [i.requested_time for i in Table.open(base).timeline().completed()] == completed_before
    if fault == "before_commit":  # every file was written, none became visible
        assert files_with_instant(base, failed)
    assert full_rows(hudi_rs_read(base)) == before_rs
    assert full_rows(Table.open(base).to_arrow()) == before_arrow

    nxt = rows(range(1, 25, 3), ts=4, v=0.75)
    res = Table.open(base).write(spark.createDataFrame(to_arrow(nxt)), "upsert", OPTS)
    apply(model, "upsert", nxt)
    assert res.instant > failed
    _assert_rolled_back(base, failed)
    assert _pending_instants(base) == []
    assert table_rows(hudi_rs_read(base)) == expected(model)
    assert table_rows(Table.open(base).to_arrow()) == expected(model)


def _wait_for_files(base: str, known: set[str], proc: subprocess.Popen, timeout: float) -> str:
    """The new instant once its inflight file and a data file of it are on disk."""
    tl_dir = Path(base) / ".hoodie" / "timeline"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"writer exited early with {proc.returncode}"
        for f in tl_dir.glob("*.inflight"):  # a commit's inflight file is <instant>.inflight
            inst = f.name.split(".", 1)[0]
            if f.name == f"{inst}.inflight" and inst not in known and files_with_instant(base, inst):
                return inst
        time.sleep(0.5)
    raise AssertionError("the writer wrote no data file in time")


def _group_gone(pgid: int, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def test_kill9_during_cli_write_then_next_cli_write(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    t, model = _table_with_two_commits(spark, base)
    before = full_rows(hudi_rs_read(base))
    known = {i.requested_time for i in t.timeline()}
    killed_input, next_input = tmp_path / "killed.parquet", tmp_path / "next.parquet"
    import pyarrow.parquet as pq

    pq.write_table(to_arrow(rows(range(0, 30, 2), ts=5, v=0.1)), killed_input)
    nxt = rows(range(3, 40, 4), ts=6, v=0.2)
    pq.write_table(to_arrow(nxt), next_input)

    log = (tmp_path / "killed.log").open("w")
    proc = subprocess.Popen(
        [PYHUDI, "write", base, "--input", str(killed_input), "--operation", "upsert", *CLI_KEYS,
         "--option", f"{FAULT_OPTION}=hang_before_commit", "--json"],
        stdout=log, stderr=subprocess.STDOUT, env=cli_env(), start_new_session=True,
    )
    try:
        killed = _wait_for_files(base, known, proc, timeout=300)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole group: the Python driver, the Spark JVM, its workers
        proc.wait(timeout=60)
        log.close()
    assert proc.returncode == -signal.SIGKILL
    assert _group_gone(proc.pid), "processes of the killed writer survive"

    assert _pending_instants(base) == [killed]
    assert full_rows(hudi_rs_read(base)) == before
    assert table_rows(Table.open(base).to_arrow()) == expected(model)

    r = run_cli("write", base, "--input", str(next_input), "--operation", "upsert", *CLI_KEYS, "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    apply(model, "upsert", nxt)
    _assert_rolled_back(base, killed)
    assert _pending_instants(base) == []
    assert table_rows(hudi_rs_read(base)) == expected(model)


def _lookups_agree(base: str, model: dict) -> None:
    """Every live key is where the record index says (hudi-rs's partition), and no other key is indexed."""
    rs = hudi_rs_read(base)
    where = dict(zip(rs.column("_hoodie_record_key").to_pylist(), rs.column("_hoodie_partition_path").to_pylist(),
                     strict=True))
    probe = sorted(set(model) | {f"k{i:03d}" for i in range(60)})
    got = {r["key"]: r for r in Table.open(base).lookup(probe).to_pylist()}
    for k in probe:
        assert got[k]["found"] == (k in model), k
        if k in model:
            assert got[k]["partition"] == where[k], k


@pytest.mark.parametrize(
    "point", ["before_commit", "before_data_commit", "metadata.compaction.before_complete", "rollback.files_deleted"]
)
def test_kill9_at_each_commit_step_then_next_write(spark, tmp_path: Path, point: str) -> None:  # type: ignore[no-untyped-def]
    """A real SIGKILL of the writing process at a step of the commit (after the data files, after the metadata
    deltacommit, inside a metadata compaction, inside the rollback of an earlier failed write): hudi-rs reads the
    committed rows, validate is ok, every lookup agrees, and the next write succeeds."""
    import pyarrow.parquet as pq

    from pyhudi.faults import ENV

    base = str(tmp_path / "t")
    t, model = _table_with_two_commits(spark, base)
    opts: list[str] = []
    if point == "metadata.compaction.before_complete":
        opts = ["--option", "hoodie.metadata.compact.max.delta.commits=1"]
    if point == "rollback.files_deleted":  # an earlier failed write for the killed writer to roll back
        with pytest.raises(Exception, match="injected fault"):
            t.write(spark.createDataFrame(to_arrow(rows(range(30, 40), ts=7))), "upsert", {**OPTS, FAULT_OPTION: "before_commit"})
    killed = rows(range(0, 50, 3), ts=5, v=0.1)
    inp = tmp_path / "killed.parquet"
    pq.write_table(to_arrow(killed), inp)
    r = run_cli("write", base, "--input", str(inp), "--operation", "upsert", *CLI_KEYS, *opts, **{ENV: f"kill_{point}"})
    assert r.returncode == -signal.SIGKILL, (r.returncode, r.stderr[-3000:])
    if point == "metadata.compaction.before_complete":
        apply(model, "upsert", killed)  # the data commit completed before the metadata compaction began
    assert table_rows(hudi_rs_read(base)) == expected(model)
    rep = validate_table(Table.open(base))
    assert rep.ok, rep.to_dict()
    _lookups_agree(base, model)

    # the next write, in this process (the CLI's own recovery is test_kill9_during_cli_write_then_next_cli_write's)
    nxt = rows(range(1, 50, 4), ts=6, v=0.2)
    next_opts = dict(o.split("=", 1) for o in opts[1::2])
    Table.open(base).write(spark.createDataFrame(to_arrow(nxt)), "upsert", {**OPTS, **next_opts})
    apply(model, "upsert", nxt)
    assert _pending_instants(base) == []
    assert table_rows(hudi_rs_read(base)) == expected(model)
    rep = validate_table(Table.open(base))
    assert rep.ok, rep.to_dict()
    _lookups_agree(base, model)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_files_of_failed_task_attempts_are_deleted_at_commit(spark, tmp_path: Path, table_type: str) -> None:  # type: ignore[no-untyped-def]
    """A Spark task that failed after writing its file and was retried (or a speculative duplicate) leaves a data
    file with another write token, and its marker: the commit deletes it before completing, so the table holds
    exactly the files the commit names (what hudi-rs, listing the partitions, reads)."""
    from pyhudi import faults
    from pyhudi.table.filenames import BaseFileName, LogFileName, parse_data_file_name

    base = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.table.type": table_type}
    model: dict = {}
    t = Table.create(base, SCHEMA, opts)
    for op, batch in [("insert", rows(range(10))), ("upsert", rows(range(5, 15), ts=2, v=0.5))]:
        t.write(spark.createDataFrame(to_arrow(batch)), op, opts)
        apply(model, op, batch)
    strays: list[str] = []

    def earlier_attempts(point: str) -> None:  # what a failed first attempt of every write task left
        pending = _pending_instants(base)
        assert len(pending) == 1
        instant = pending[0]
        for part, name, io_type in markers.list_marked_files(LOCAL, base, instant):
            parsed = parse_data_file_name(name)
            if isinstance(parsed, BaseFileName):
                other = BaseFileName(parsed.file_id, "9-9-999", parsed.instant, parsed.extension).name
            else:
                assert isinstance(parsed, LogFileName)
                other = LogFileName(parsed.file_id, parsed.instant, parsed.version, "9-9-999", parsed.extension,
                                    parsed.cdc).name
            src = Path(base, part, name)
            Path(base, part, other).write_bytes(src.read_bytes()[: max(1, src.stat().st_size // 2)])  # torn
            markers.create_marker(LOCAL, base, instant, part, other, io_type)
            strays.append(str(Path(part, other)))

    batch = rows(range(0, 20, 2), ts=3, v=0.25)  # updates in both partitions and new keys
    with faults.inject("before_commit", earlier_attempts):
        res = t.write(spark.createDataFrame(to_arrow(batch)), "upsert", opts)
    apply(model, "upsert", batch)
    assert strays
    assert data_files_with_instant(base, res.instant) == {s.path for s in res.stats}
    assert not any(Path(base, s).exists() for s in strays)
    assert not Path(markers.marker_dir(base, res.instant)).exists()
    assert table_rows(hudi_rs_read(base)) == expected(model)
    assert table_rows(Table.open(base).to_arrow()) == expected(model)
    rep = validate_table(Table.open(base))
    assert rep.ok, rep.to_dict()



def test_a_committed_write_whose_tidying_up_fails_reports_success(spark, tmp_path: Path, monkeypatch,  # type: ignore[no-untyped-def]
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    """Once the instant completed, deleting its markers and heartbeat (or releasing the lock) is housekeeping: a
    storage error there (a full disk) is a warning, not an error that would make the caller write the records
    again; so is an error from the completion itself when the completed instant is on the timeline (an object
    store's reply lost). The next write deletes the leftover markers."""
    from pyhudi.txn import heartbeat as hb_mod
    from pyhudi.txn import transaction as tx_mod

    base = str(tmp_path / "t")
    t, model = _table_with_two_commits(spark, base)

    def full_disk(*a: object, **kw: object) -> None:
        raise OSError(28, "No space left on device")

    def heartbeat_file_stays(self: hb_mod.Heartbeat) -> None:
        self._halt()  # the beating stops; deleting its file fails
        full_disk()

    batch = rows(range(12, 18), ts=3, v=0.25)
    complete = ActiveTimeline.complete

    def reply_lost(self: ActiveTimeline, *a: Any, **kw: Any) -> Instant:
        done = complete(self, *a, **kw)
        if done.action in ("commit", "deltacommit") and "metadata" not in self.timeline_dir:
            raise OSError(104, "Connection reset by peer")  # the completed file is there, its reply lost
        return done

    with monkeypatch.context() as m:
        m.setattr(tx_mod.markers, "delete_markers", full_disk)
        m.setattr(hb_mod.Heartbeat, "stop", heartbeat_file_stays)
        m.setattr(ActiveTimeline, "complete", reply_lost)
        with caplog.at_level("WARNING", logger="pyhudi.txn.transaction"):
            t.write(spark.createDataFrame(to_arrow(batch)), "upsert", OPTS)
    apply(model, "upsert", batch)
    done = Table.open(base).timeline().completed_commits().last()
    assert done is not None and not _pending_instants(base)
    assert f"write {done.requested_time} committed; deleting its markers failed" in caplog.text
    assert f"write {done.requested_time} committed; deleting its heartbeat failed" in caplog.text
    assert f"completing write {done.requested_time} reported an error" in caplog.text
    assert markers.markers_exist(LOCAL, base, done.requested_time)
    assert table_rows(hudi_rs_read(base)) == expected(model) == table_rows(Table.open(base).to_arrow())
    more = rows(range(18, 20), ts=4)
    Table.open(base).write(spark.createDataFrame(to_arrow(more)), "upsert", OPTS)
    apply(model, "upsert", more)
    assert not markers.markers_exist(LOCAL, base, done.requested_time)
    assert table_rows(hudi_rs_read(base)) == expected(model)
