"""Instant times are unique across processes: a write reserves its time by creating its heartbeat file only if
absent, after every time on the timeline and every other reservation."""

from __future__ import annotations

import multiprocessing as mp
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pyhudi.errors import PyHudiError
from pyhudi.io.storage import Storage
from pyhudi.table.properties import TIMELINE_TIMEZONE, update_table_config
from pyhudi.table.timeline import ActiveTimeline, InstantTimeGenerator
from pyhudi.txn.transaction import WriteTransaction
from tests.support.fabricate import make_table

LOCAL = Storage.from_uri("/")[0]


def _child(base: str, n: int, q: mp.Queue) -> None:
    storage = Storage.from_uri("/")[0]
    got = []
    for _ in range(n):
        tx = WriteTransaction(storage, base, {})
        tx._reserve(ActiveTimeline.load(storage, base))
        got.append(tx.instant)
    q.put(got)


def test_instant_times_unique_across_processes(tmp_path: Path) -> None:
    base = make_table(tmp_path)
    ctx = mp.get_context("spawn")
    q: mp.Queue = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(base, 40, q)) for _ in range(3)]
    for p in procs:
        p.start()
    results = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    flat = [t for r in results for t in r]
    assert len(set(flat)) == len(flat) == 120
    for r in results:
        assert r == sorted(r)
    assert sorted(p.name for p in (Path(base) / ".hoodie" / ".heartbeat").iterdir()) == sorted(flat)


@pytest.mark.parametrize("utc_says", [True, False], ids=["utc", "not-said"])
def test_a_table_in_local_time_gets_local_instant_times(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        utc_says: bool) -> None:
    """A table whose timeline is in local time (``hoodie.table.timeline.timezone=LOCAL``) gets instant times in
    the machine's zone, as Hudi's writers on that machine do; a table in UTC (said, or not said: the zone pyhudi
    always wrote) keeps UTC times; and a timeline ahead of the clock in the table's zone is refused."""
    utc_base, base = make_table(tmp_path / "utc"), make_table(tmp_path / "local")
    meta = str(Path(base) / ".hoodie")
    update_table_config(LOCAL, meta, {TIMELINE_TIMEZONE: "LOCAL"})
    if not utc_says:
        update_table_config(LOCAL, str(Path(utc_base) / ".hoodie"), deletes=[TIMELINE_TIMEZONE])
    monkeypatch.setenv("TZ", "Etc/GMT-8")  # UTC+8
    time.tzset()
    try:
        local = WriteTransaction(LOCAL, base, {})
        local._reserve(ActiveTimeline.load(LOCAL, base))
        assert local.instant is not None and local.instant[:10] == datetime.now().strftime("%Y%m%d%H")
        utc = WriteTransaction(LOCAL, utc_base, {})
        utc._reserve(ActiveTimeline.load(LOCAL, utc_base))
        assert utc.instant is not None and utc.instant[:10] == datetime.now(UTC).strftime("%Y%m%d%H")
        # the local table's latest time, read as UTC, lies eight hours ahead of the clock: a UTC writer refuses it
        wrong = WriteTransaction(LOCAL, base, {})
        wrong.gen = InstantTimeGenerator(UTC)
        with pytest.raises(PyHudiError, match="ahead of the clock"):
            wrong._reserve(ActiveTimeline.load(LOCAL, base))
    finally:
        monkeypatch.undo()
        time.tzset()
