"""Instant times are unique across processes: a write reserves its time by creating its heartbeat file only if
absent, after every time on the timeline and every other reservation."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

from pyhudi.io.storage import Storage
from pyhudi.table.timeline import ActiveTimeline
from pyhudi.txn.transaction import WriteTransaction
from tests.support.fabricate import make_table


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
