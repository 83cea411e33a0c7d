from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pyhudi.errors import PyHudiError, StorageError
from pyhudi.io.storage import Storage
from pyhudi.table.timeline import (
    ActiveTimeline,
    Instant,
    InstantTimeGenerator,
    State,
    format_instant_time,
    parse_instant_time,
)

LOCAL = Storage.from_uri("/")[0]


def test_file_names() -> None:
    cases = {
        "20260307162434124.commit.requested": Instant("20260307162434124", "commit", State.REQUESTED),
        "20260307162434124.inflight": Instant("20260307162434124", "commit", State.INFLIGHT),
        "20260307162434124_20260307162438653.commit": Instant(
            "20260307162434124", "commit", State.COMPLETED, "20260307162438653"
        ),
        "20260307162557587.deltacommit.inflight": Instant("20260307162557587", "deltacommit", State.INFLIGHT),
        "20260307162454799.clustering.requested": Instant("20260307162454799", "clustering", State.REQUESTED),
        "20260307162618152.compaction.inflight": Instant("20260307162618152", "compaction", State.INFLIGHT),
        "20260403184259077_20260403184300219.rollback": Instant(
            "20260403184259077", "rollback", State.COMPLETED, "20260403184300219"
        ),
        "20260307162457540.indexing.requested": Instant("20260307162457540", "indexing", State.REQUESTED),
        "00000000000000000.deltacommit.requested": Instant(
            "00000000000000000", "deltacommit", State.REQUESTED
        ),
    }
    for name, inst in cases.items():
        assert Instant.parse(name) == inst
        assert inst.file_name == name
    for junk in (
        "history",
        "hoodie.properties",
        ".aux",
        "20260307162434124.commit.requested.crc",
        "x.commit",
    ):
        assert Instant.parse(junk) is None


def test_fixture_timelines(fixture_tables: dict[str, Path]) -> None:
    for zip_name, base in fixture_tables.items():
        for table in (base, base / ".hoodie" / "metadata"):
            tl = ActiveTimeline.load(LOCAL, str(table))
            names = {p.name for p in (table / ".hoodie" / "timeline").iterdir() if p.is_file()}
            assert {i.file_name for i in tl.all_instant_files} == names, zip_name
            assert len(tl) > 0 and len(tl.completed()) == len(tl)  # every fixture instant completed
            for inst in tl.all_instant_files:
                content = tl.read_content(inst)
                size = (table / ".hoodie" / "timeline" / inst.file_name).stat().st_size
                assert (content is None) == (size == 0)
            for inst in tl.completed_commits():
                meta = tl.read_commit_metadata(inst)
                assert "partitionToWriteStats" in meta and meta["operationType"]
                for stats in (meta["partitionToWriteStats"] or {}).values():
                    for ws in stats:
                        assert ws["fileId"] and ws["path"]
                assert inst.completion_time is not None and inst.completion_time > inst.requested_time
            if table == base and zip_name.startswith("cow_v9_txns_simple_meta"):
                acts = [i.action for i in tl]
                assert acts.count("replacecommit") == 2 and acts.count("indexing") == 2
                # the clustering instant: clustering.requested/inflight, completed as replacecommit
                pend = [i for i in tl.all_instant_files if i.action == "clustering"]
                assert {i.state for i in pend} == {State.REQUESTED, State.INFLIGHT}
                assert tl.get(pend[0].requested_time).action == "replacecommit"  # type: ignore[union-attr]
            if table == base and zip_name.startswith("mor_v8"):
                comp = [i for i in tl.all_instant_files if i.action == "compaction"]
                assert len(comp) == 2
                assert tl.get(comp[0].requested_time).action == "commit"  # type: ignore[union-attr]
                plan = tl.read_content(next(i for i in comp if i.is_requested))
                assert plan is not None and plan["operations"]
            if table == base and "rollback" in zip_name:
                rb = tl.by_action("rollback").completed().first()
                assert rb is not None
                rbm = tl.read_content(rb)
                assert rbm is not None and rbm["commitsRollback"] == ["20260403184242950"]
                assert not tl.contains("20260403184242950")  # rolled-back instant files are deleted


def test_transitions_round_trip(tmp_path: Path) -> None:
    base = str(tmp_path / "t")
    tl = ActiveTimeline.load_dir(LOCAL, f"{base}/.hoodie/timeline")
    assert len(tl) == 0
    gen = InstantTimeGenerator()
    t = gen.next()
    req = tl.create_requested("commit", t)
    with pytest.raises(StorageError):
        tl.reload().create_requested("commit", t)
    stat = {"fileId": "f-0", "path": "p/f-0_0-1-2_" + t + ".parquet", "numWrites": 3, "numInserts": 3}
    meta = {
        "partitionToWriteStats": {"p": [stat]},
        "extraMetadata": {"schema": "{}"},
        "operationType": "INSERT",
    }
    infl = tl.transition_to_inflight(req, meta)
    assert infl.file_name == f"{t}.inflight"
    done = tl.complete(infl, {**meta, "compacted": False}, gen.next())
    tl2 = tl.reload()
    assert [i.file_name for i in tl2.all_instant_files] == [req.file_name, infl.file_name, done.file_name]
    assert tl2.instants == (done,)
    got = tl2.read_commit_metadata(done)
    assert got["partitionToWriteStats"]["p"][0]["numInserts"] == 3
    assert got["partitionToWriteStats"]["p"][0]["prevCommit"] is None
    assert got["version"] == 1 and got["operationType"] == "INSERT"
    assert (tmp_path / "t" / ".hoodie" / "timeline" / req.file_name).stat().st_size == 0
    with pytest.raises(StorageError):
        tl2.complete(infl, meta, gen.next())  # already completed

    # a clustering instant completes as replacecommit
    t2 = gen.next()
    plan: dict[str, Any] = {
        "clusteringPlan": None,
        "operationType": "CLUSTER",
        "extraMetadata": {},
        "version": 1,
    }
    creq = tl2.create_requested("clustering", t2, plan)
    cinf = tl2.transition_to_inflight(creq)
    rc = {
        "partitionToWriteStats": {},
        "operationType": "CLUSTER",
        "partitionToReplaceFileIds": {"p": ["f-0"]},
    }
    cdone = tl2.complete(cinf, rc, gen.next())
    assert cdone.action == "replacecommit" and cdone.file_name.endswith(".replacecommit")
    tl3 = tl2.reload()
    assert tl3.read_content(creq) == {**plan, "extraMetadata": {}}
    assert tl3.read_content(cdone)["partitionToReplaceFileIds"] == {"p": ["f-0"]}  # type: ignore[index]
    assert [i.requested_time for i in tl3.completed_commits()] == [t, t2]

    # a clean with its plan and metadata
    t3 = gen.next()
    cplan = {"earliestInstantToRetain": None, "policy": "KEEP_LATEST_COMMITS", "version": 2}
    clreq = tl3.create_requested("clean", t3, cplan)
    clinf = tl3.transition_to_inflight(clreq, cplan)
    cmeta = {
        "startCleanTime": t3,
        "timeTakenInMillis": 5,
        "totalFilesDeleted": 0,
        "earliestCommitToRetain": t,
        "partitionMetadata": {},
        "version": 2,
    }
    cldone = tl3.complete(clinf, cmeta, gen.next())
    assert tl3.reload().read_content(cldone)["startCleanTime"] == t3  # type: ignore[index]
    with pytest.raises(PyHudiError):
        tl3.complete(clinf, cmeta, t3)  # completion must follow the requested time


def test_instant_time_format() -> None:
    assert format_instant_time(0) == "19700101000000000"
    t = "20260307162434124"
    assert format_instant_time(parse_instant_time(t)) == t
    assert parse_instant_time("20260307162434") == parse_instant_time("20260307162434000")


def test_instant_times_strictly_increase_rapid_calls() -> None:
    gen = InstantTimeGenerator()
    times = [gen.next() for _ in range(300)]
    assert all(len(t) == 17 for t in times)
    assert times == sorted(set(times))


def test_instant_times_threads_and_floor() -> None:
    gen = InstantTimeGenerator()
    out: list[str] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(50):
            t = gen.next()
            with lock:
                out.append(t)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(set(out)) == 200
    floor = format_instant_time(parse_instant_time(gen.next()) + 30)
    assert gen.next(floor=floor) > floor
    with pytest.raises(PyHudiError):
        InstantTimeGenerator(max_wait_ms=100).next(
            floor=format_instant_time(parse_instant_time(floor) + 60_000)
        )


def test_instant_time_frozen_clock_waits() -> None:
    ticks = iter([1000.0, 1000.0, 1000.0, 1000.001, 1000.001, 1000.002])
    gen = InstantTimeGenerator(clock=lambda: next(ticks))
    assert gen.next() == format_instant_time(1_000_000)
    assert gen.next() == format_instant_time(1_000_001)


@pytest.fixture
def east_of_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local time zone is UTC+8 (no daylight saving) for the test."""
    monkeypatch.setenv("TZ", "Etc/GMT-8")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_instant_times_in_the_local_zone(east_of_utc: None) -> None:
    t_utc = "20260307162434124"
    ms = parse_instant_time(t_utc)
    assert format_instant_time(ms, None) == "20260308002434124"  # Hudi's LOCAL: eight hours ahead here
    assert parse_instant_time("20260308002434124", None) == ms
    assert format_instant_time(ms, UTC) == t_utc
    local = InstantTimeGenerator(None).next()
    assert abs(parse_instant_time(local, None) - time.time() * 1000) < 60_000
    assert local[:10] == datetime.now().strftime("%Y%m%d%H")  # the local wall clock, not UTC's
    # a timeline in UTC is eight hours behind this one: no wait; a UTC generator refuses a local floor
    assert InstantTimeGenerator(None).next(floor=InstantTimeGenerator(UTC).next()) >= local
    with pytest.raises(PyHudiError, match="ahead of the clock"):
        InstantTimeGenerator(UTC, max_wait_ms=100).next(floor=InstantTimeGenerator(None).next())


@pytest.mark.parametrize("order", [1, -1])
def test_a_savepoint_at_its_commits_time_is_a_second_instant(tmp_path: Path, order: int) -> None:
    """A savepoint has the requested time of the commit it saves (``<t>.savepoint.inflight``,
    ``<t>_<c>.savepoint``): both are on the timeline, whatever order the storage lists them in; the commit is the
    instant of that time, and the commits timeline holds it."""
    t, done, later = "20260101000000000", "20260101000001000", "20260101000002000"
    files = [
        Instant(t, "commit", State.REQUESTED),
        Instant(t, "commit", State.INFLIGHT),
        Instant(t, "commit", State.COMPLETED, done),
        Instant(t, "savepoint", State.INFLIGHT),
        Instant(t, "savepoint", State.COMPLETED, later),
    ][::order]
    tl = ActiveTimeline(LOCAL, str(tmp_path), files)
    assert [(i.action, i.state) for i in tl] == [("commit", State.COMPLETED), ("savepoint", State.COMPLETED)]
    assert tl.get(t) == Instant(t, "commit", State.COMPLETED, done)
    assert list(tl.completed_commits()) == [Instant(t, "commit", State.COMPLETED, done)]
    assert [i.action for i in tl.all_instant_files] == ["commit"] * 3 + ["savepoint"] * 2
