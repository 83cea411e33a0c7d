"""Concurrent writers as separate processes (a ``pyhudi write`` process held at wait points, and the test's own
process), interleaved exactly:

- single-writer mode (the default): a second writer that finds a live writer's instant fails at once with a clear
  error, and one that began before the other had an instant fails at commit and rolls itself back; nothing lost;
- optimistic concurrency: writers on disjoint file groups both commit; on a shared file group the later one fails
  with ConcurrentWriteConflict naming the file group and the other instant, and its files are rolled back;
- a writer killed mid-write (on "another host": its process cannot be checked) is rolled back only once its
  heartbeat expired, and its files never become visible.

Every step is checked with hudi-rs against a model and with ``pyhudi validate``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pyhudi.errors import ConcurrentWriterError
from pyhudi.faults import ENV as FAULT_ENV
from pyhudi.faults import RELEASE_ENV
from pyhudi.metadata.validate import validate_table
from pyhudi.table.table import Table
from pyhudi.txn.heartbeat import heartbeat_path
from tests.support.robust import (
    CLI_KEYS,
    OPTS,
    PYHUDI,
    apply,
    cli_env,
    expected,
    files_with_instant,
    hudi_rs_read,
    rows,
    table_rows,
    to_arrow,
)

pytest.importorskip("hudi")
pytestmark = [pytest.mark.spark, pytest.mark.slow]

OCC_OPTS = {"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"}
OCC = [a for k, v in OCC_OPTS.items() for a in ("--option", f"{k}={v}")]


def _seed(spark, base: str) -> dict:  # type: ignore[no-untyped-def]
    """k000..k019, partitions a (even) and b (odd): one file group each."""
    model: dict = {}
    first = rows(range(20))
    Table.create(base, to_arrow(first).schema, OPTS).write(spark.createDataFrame(to_arrow(first)), "bulk_insert", OPTS)
    apply(model, "insert", first)
    return model


def _write(spark, base: str, batch: list, extra: dict | None = None) -> str:  # type: ignore[no-untyped-def]
    """The second writer: this test's own process (the first is a ``pyhudi write`` process held at a fault point),
    so two processes write, without a second Spark start."""
    return Table.open(base).write(spark.createDataFrame(to_arrow(batch)), "upsert", {**OPTS, **(extra or {})}).instant


def _input(tmp: Path, name: str, batch: list) -> str:
    path = tmp / f"{name}.parquet"
    pq.write_table(to_arrow(batch), path)
    return str(path)


def _start(tmp: Path, base: str, name: str, batch: list, *extra: str, fault: str,
           operation: str = "upsert") -> tuple[subprocess.Popen, Path]:
    """A ``pyhudi write`` (an upsert) that stops at a fault point until released (returns the process, the release
    file)."""
    release = tmp / f"{name}.release"
    log = (tmp / f"{name}.log").open("w")
    proc = subprocess.Popen(
        [PYHUDI, "write", base, "--input", _input(tmp, name, batch), "--operation", operation, *CLI_KEYS, *extra,
         "--json"],
        stdout=log, stderr=subprocess.STDOUT, env=cli_env(**{FAULT_ENV: fault, RELEASE_ENV: str(release)}),
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while not Path(f"{release}.waiting").exists():
        assert proc.poll() is None, (tmp / f"{name}.log").read_text()[-3000:]
        assert time.monotonic() < deadline, "the writer did not reach its wait point"
        time.sleep(0.2)
    return proc, release


def _finish(proc: subprocess.Popen, release: Path, tmp: Path, name: str) -> tuple[int, str]:
    release.touch()
    proc.wait(timeout=600)
    return proc.returncode, (tmp / f"{name}.log").read_text()


def _a_loses_to_b(spark, tmp: Path, base: str, model: dict, a_batch: list, b_batch: list,  # type: ignore[no-untyped-def]
                  extra: dict | None = None) -> tuple[str, str]:
    """Optimistic writers: a ``pyhudi write`` upsert of ``a_batch`` held before its commit while this process upserts
    ``b_batch`` (applied to ``model``), both with ``extra`` options; A fails naming B's instant and leaves no file.
    Returns A's instant and output."""
    extra = extra or {}
    a, release = _start(tmp, base, "a", a_batch, *OCC, *(arg for k, v in extra.items() for arg in ("--option", f"{k}={v}")),
                        fault="wait_before_commit")
    try:
        (a_instant,) = _pending(base)
        b_instant = _write(spark, base, b_batch, {**OCC_OPTS, **extra})
        apply(model, "upsert", b_batch)
    finally:
        code, out = _finish(a, release, tmp, "a")
    assert code != 0, out[-3000:]
    assert f"write {a_instant} conflicts with {b_instant}" in out, out[-3000:]
    assert files_with_instant(base, a_instant) == []
    return a_instant, out


def _check(base: str, model: dict) -> None:
    assert table_rows(hudi_rs_read(base)) == expected(model)
    rep = validate_table(Table.open(base))
    assert rep.ok, rep.to_dict()


def _pending(base: str) -> list[str]:
    return [i.requested_time for i in Table.open(base).timeline().pending() if i.action != "rollback"]


def test_single_writer_second_writer_fails_at_once_on_a_live_one(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    model = _seed(spark, base)
    a_batch, b_batch = rows(range(0, 20, 4), ts=2, v=0.5), rows(range(1, 20, 4), ts=2, v=0.25)
    a, release = _start(tmp_path, base, "a", a_batch, fault="wait_before_commit")
    try:
        (a_instant,) = _pending(base)
        with pytest.raises(ConcurrentWriterError, match=f"another writer holds instant {a_instant}") as err:
            _write(spark, base, b_batch)
        assert "hoodie.write.concurrency.mode=OPTIMISTIC_CONCURRENCY_CONTROL" in str(err.value)
        assert _pending(base) == [a_instant]  # the live writer's instant was left alone
        _check(base, model)
    finally:
        code, out = _finish(a, release, tmp_path, "a")
    assert code == 0, out[-3000:]
    apply(model, "upsert", a_batch)
    _check(base, model)


def test_single_writer_that_began_first_but_committed_second_rolls_itself_back(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    model = _seed(spark, base)
    a_batch, b_batch = rows(range(0, 20, 4), ts=2, v=0.5), rows(range(1, 20, 4), ts=2, v=0.25)
    a, release = _start(tmp_path, base, "a", a_batch, fault="wait_before_start")  # no instant on the timeline yet
    try:
        assert _pending(base) == []
        _write(spark, base, b_batch)
        apply(model, "upsert", b_batch)
    finally:
        code, out = _finish(a, release, tmp_path, "a")
    assert code != 0 and "another writer committed" in out, out[-3000:]
    assert _pending(base) == []
    _check(base, model)


def test_optimistic_writers_on_disjoint_file_groups_both_commit(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    model = _seed(spark, base)
    a_batch, b_batch = rows(range(0, 20, 2), ts=2, v=0.5), rows(range(1, 20, 2), ts=2, v=0.25)  # a | b partitions
    a, release = _start(tmp_path, base, "a", a_batch, *OCC, fault="wait_before_commit")
    try:
        _write(spark, base, b_batch, OCC_OPTS)
        apply(model, "upsert", b_batch)
    finally:
        code, out = _finish(a, release, tmp_path, "a")
    assert code == 0, out[-3000:]
    apply(model, "upsert", a_batch)
    _check(base, model)


def test_optimistic_writers_on_one_file_group_the_later_fails(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    model = _seed(spark, base)
    a_batch, b_batch = rows(range(0, 10, 2), ts=2, v=0.5), rows(range(10, 20, 2), ts=2, v=0.25)  # both partition a
    a_instant, out = _a_loses_to_b(spark, tmp_path, base, model, a_batch, b_batch)
    assert "a/" in out, out[-3000:]
    tl = Table.open(base).timeline()
    assert tl.get(a_instant) is None and any(i.action == "rollback" for i in tl.completed())
    _check(base, model)
    # the table is as if the loser never ran: the next write succeeds
    nxt = rows(range(0, 20, 3), ts=3, v=0.75)
    _write(spark, base, nxt, OCC_OPTS)
    apply(model, "upsert", nxt)
    _check(base, model)


def test_a_conflicting_commit_archived_while_the_write_ran_is_still_a_conflict(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A writer that began (tagged, planned) before another's commit on the same file group completed, and
    commits after that commit was archived, fails: the conflict check reads the archived instants completed
    since the write began. (It committed, and the other commit's updates were lost.)"""
    from pyhudi.table.lsm_timeline import LsmHistory

    base = str(tmp_path / "t")
    model = _seed(spark, base)
    keep = {**OCC_OPTS, "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
            "hoodie.cleaner.commits.retained": "1", "hoodie.clean.automatic": "false",
            "hoodie.metadata.compact.max.delta.commits": "2"}
    cli = [a for k, v in keep.items() for a in ("--option", f"{k}={v}")]
    a_batch = rows(range(0, 10, 2), ts=5, v=0.5)  # partition a
    a, release = _start(tmp_path, base, "a", a_batch, *cli, fault="wait_before_start")
    try:
        b_batch = rows(range(10, 20, 2), ts=3, v=0.25)  # partition a too: its one file group
        b_instant = _write(spark, base, b_batch, keep)
        apply(model, "upsert", b_batch)
        for j in range(5):  # partition b only: no conflict with a; enough commits to archive b_instant
            batch = rows(range(1, 20, 2), ts=6 + j, v=float(j))
            _write(spark, base, batch, keep)
            apply(model, "upsert", batch)
        assert Table.open(base).timeline().get(b_instant) is None, "the other commit was archived"
        t = Table.open(base)
        assert LsmHistory.for_table(t.storage, t.base_path).latest_version() > 0
    finally:
        code, out = _finish(a, release, tmp_path, "a")
    assert code != 0 and f"conflicts with {b_instant}" in out, out[-3000:]
    assert _pending(base) == []
    _check(base, model)


@pytest.mark.parametrize("mode", ["single", "occ"])
def test_killed_writer_elsewhere_is_rolled_back_only_after_its_heartbeat_expired(spark, tmp_path: Path, mode: str) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    model = _seed(spark, base)
    hb = {"hoodie.client.heartbeat.interval_in_ms": "3000", "hoodie.client.heartbeat.tolerable.misses": "2"}
    cc = {"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"} if mode == "occ" else {}
    cli = [a for k, v in {**hb, **cc}.items() for a in ("--option", f"{k}={v}")]
    a, _ = _start(tmp_path, base, "a", rows(range(0, 20, 4), ts=9, v=9.0), *cli, fault="wait_before_commit")
    (a_instant,) = _pending(base)
    assert files_with_instant(base, a_instant)
    os.killpg(a.pid, signal.SIGKILL)
    a.wait(timeout=60)
    # as if it had run on another machine: its process cannot be checked, only its heartbeat's age
    path = Path(heartbeat_path(base, a_instant))
    info = json.loads(path.read_text())
    info["host"] = "elsewhere"
    beat = path.stat().st_mtime
    path.write_text(json.dumps(info))
    os.utime(path, (beat, beat))
    _check(base, model)
    opts = {**OPTS, **hb, **cc}

    def write(batch: list) -> None:
        Table.open(base).write(spark.createDataFrame(to_arrow(batch)), "upsert", opts)
        apply(model, "upsert", batch)

    b_batch = rows(range(1, 20, 4), ts=2, v=0.25)
    if mode == "single":
        with pytest.raises(ConcurrentWriterError, match=f"another writer holds instant {a_instant}"):
            write(b_batch)
        assert time.time() - beat < 6, "the refusal must have come within the heartbeat's tolerance"
    else:
        write(b_batch)  # optimistic writers go on; the cleaner leaves the live-looking write alone
        if time.time() - beat < 6:
            assert a_instant in _pending(base)
    _check(base, model)
    time.sleep(max(0.0, 6.5 - (time.time() - beat)))  # now it has expired
    write(rows(range(2, 20, 4), ts=3, v=0.125))
    assert a_instant not in _pending(base)  # rolled back: EAGER at begin, LAZY by the cleaner after the commit
    assert files_with_instant(base, a_instant) == []
    _check(base, model)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_stalled_writer_rolled_back_leaves_no_files_when_it_goes_on(spark, tmp_path: Path, table_type: str) -> None:  # type: ignore[no-untyped-def]
    """A writer whose driver stalls past its heartbeat's tolerance (its Spark tasks do not) is rolled back by the
    cleaner; when it goes on, its remaining tasks write files named with the rolled-back instant. Its commit
    fails, and it deletes them: nothing names them on the timeline, and once archival passed the instant a
    listing took them for committed files (the cleaner then deleted the real base files)."""
    from tests.support.robust import data_files_with_instant

    base = str(tmp_path / "t")
    opts = {**OPTS, **OCC_OPTS, "hoodie.datasource.write.table.type": table_type,
            "hoodie.client.heartbeat.interval_in_ms": "2000", "hoodie.client.heartbeat.tolerable.misses": "2"}
    seed = [{"id": f"k{i:03d}", "p": "abcdef"[i % 6], "ts": 1, "v": float(i)} for i in range(60)]
    Table.create(base, to_arrow(seed).schema, opts).write(spark.createDataFrame(to_arrow(seed)), "bulk_insert", opts)
    model: dict = {}
    apply(model, "insert", seed)
    cli = [a for k, v in opts.items() if k not in OPTS for a in ("--option", f"{k}={v}")]
    stalled = [{**r, "ts": 9, "v": -1.0} for r in seed]
    a, release = _start(tmp_path, base, "a", stalled, *cli, fault="wait_after_write")
    try:
        (a_instant,) = _pending(base)
        os.kill(a.pid, signal.SIGSTOP)  # the driver only: its heartbeat stops, its tasks do not
        time.sleep(6)
        Table.open(base).clean(options=opts)  # rolls the write back: its heartbeat expired
        assert _pending(base) == []
    finally:
        os.kill(a.pid, signal.SIGCONT)
        code, out = _finish(a, release, tmp_path, "a")
    assert code != 0 and "left the timeline" in out, out[-3000:]
    assert data_files_with_instant(base, a_instant) == set()
    _check(base, model)


def test_a_stalled_writer_whose_rollback_stopped_part_way_does_not_commit(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A writer stalled past its heartbeat's tolerance is taken for dead, and the cleaner's rollback of it stops
    part way (after deleting its files), leaving the rollback pending and the instant inflight. When the writer
    goes on, its heartbeat beats again: its commit still fails, the rollback being under way (it reported
    success, and the pending rollback then deleted its completed commit). The next rollback pass finishes the
    rollback. (The check does not depend on where the rollback stopped; ``test_rollback.py`` stops it before
    its deletes too.)"""
    point = "rollback.files_deleted"
    from pyhudi import faults

    base = str(tmp_path / "t")
    model = _seed(spark, base)
    hb = {"hoodie.client.heartbeat.interval_in_ms": "1000", "hoodie.client.heartbeat.tolerable.misses": "2"}
    opts = {**OPTS, **OCC_OPTS, **hb}
    cli = [a for k, v in {**OCC_OPTS, **hb}.items() for a in ("--option", f"{k}={v}")]
    a, release = _start(tmp_path, base, "a", rows(range(0, 20, 2), ts=5, v=0.5), *cli, fault="wait_before_commit")
    try:
        (a_instant,) = _pending(base)
        os.killpg(a.pid, signal.SIGSTOP)
        time.sleep(4)  # its heartbeat expires
        with faults.inject(point), pytest.raises(faults.InjectedFault):
            Table.open(base).clean(options=opts)
        assert _pending(base) == [a_instant]
    finally:
        os.killpg(a.pid, signal.SIGCONT)
        time.sleep(1.5)  # its heartbeat thread beats again before the commit
        code, out = _finish(a, release, tmp_path, "a")
    assert code != 0 and f"of instant {a_instant} is pending" in out, out[-3000:]
    Table.open(base).clean(options=opts)
    assert _pending(base) == [] and files_with_instant(base, a_instant) == []
    tl = Table.open(base).timeline()
    assert [i.action for i in tl.completed()] == ["commit", "rollback"]
    _check(base, model)


@pytest.mark.parametrize("same_partition", [False, True])
def test_optimistic_writers_inserting_one_new_key_the_later_fails(spark, tmp_path: Path, same_partition: bool) -> None:  # type: ignore[no-untyped-def]
    """Two writers that both insert the same new key (into other partitions, or other file groups of one) touch no
    common file group; with the global record index the key must still end up in one place: the later writer
    fails at commit, naming the key and the other instant (Apache Hudi's file-group check lets both commit, and
    the table holds the key twice)."""
    base = str(tmp_path / "t")
    model = _seed(spark, base)
    a_batch = rows([100], p="a", ts=2, v=0.5)
    b_batch = rows([100], p="a" if same_partition else "b", ts=3, v=0.25)
    extra = {"hoodie.parquet.small.file.limit": "0"}  # inserts into new file groups: no file group in common
    _, out = _a_loses_to_b(spark, tmp_path, base, model, a_batch, b_batch, extra)
    assert "k100" in out, out[-3000:]
    _check(base, model)


@pytest.mark.parametrize("same_partition", [True, False])
def test_an_overwrite_and_a_write_of_a_new_key_meanwhile_the_overwrite_fails(spark, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                              same_partition: bool) -> None:
    """An ``insert_overwrite`` of partition a (with the new key k100) is held before its commit while another
    writer upserts k100 into a new file group of partition a, or of partition b. The overwrite planned which file
    groups it replaces when it began, so the other writer's survives it, and both would commit (Apache Hudi's
    file-group check lets them): k100 would be held twice. The overwrite fails: a write into a partition it
    overwrites conflicts with it, and with the global record index the keys it inserts are looked up again."""
    base = str(tmp_path / "t")
    model = _seed(spark, base)
    extra = {"hoodie.parquet.small.file.limit": "0"}  # the upsert's insert goes to a new file group
    cli = [a for k, v in {**OCC_OPTS, **extra}.items() for a in ("--option", f"{k}={v}")]
    overwrite = rows([100, 102], p="a", ts=5, v=0.5)
    a, release = _start(tmp_path, base, "a", overwrite, *cli, fault="wait_before_commit", operation="insert_overwrite")
    try:
        (a_instant,) = _pending(base)
        b_batch = rows([100], p="a" if same_partition else "b", ts=3, v=0.25)
        b_instant = _write(spark, base, b_batch, {**OCC_OPTS, **extra})
        apply(model, "upsert", b_batch)
    finally:
        code, out = _finish(a, release, tmp_path, "a")
    assert code != 0 and f"write {a_instant} conflicts with {b_instant}" in out, out[-3000:]
    if not same_partition:
        assert "k100" in out, out[-3000:]
    assert files_with_instant(base, a_instant) == []
    _check(base, model)
