"""Two writers as separate processes commit into one table with optimistic concurrency, many rounds each, while
one of them is killed with SIGKILL at random moments and restarted: afterwards hudi-rs reads exactly the rows of
the writes that reported success (an interrupted write either fully applied or not at all), ``pyhudi validate``
is ok (files partition, record index and, on merge-on-read, column statistics), every record-index lookup agrees,
and the next write succeeds. Copy-on-write and merge-on-read tables (inline compactions by either writer) on
``local[2]``; merge-on-read, whose writers also compact, on ``local-cluster[2,1,1024]`` too (a cluster's start
is most of that case's time; ``tests/write/test_cluster.py`` runs copy-on-write writes there)."""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pyhudi.metadata.validate import validate_table
from pyhudi.table.table import Table
from tests.support.robust import OPTS, apply, cli_env, expected, hudi_rs_read, table_rows, to_arrow

pytest.importorskip("hudi")
pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
W_OPTS = {
    **OPTS,
    "hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL",
    "hoodie.client.heartbeat.interval_in_ms": "2000",
    "hoodie.metadata.compact.max.delta.commits": "4",
    "hoodie.cleaner.commits.retained": "3",
}


def _row(i: int, part: str, ts: int) -> dict[str, Any]:
    return {"id": f"{part}{i:04d}", "p": part, "ts": ts, "v": float(i * 1000 + ts)}


SEEDED = 5  # keys <part>0000..<part>0004 are written before the writers start


def _plan(rng: random.Random, part: str, n_batches: int) -> list[dict[str, Any]]:
    """Batches of one writer, in its own partition: inserts, updates and deletes of its keys."""
    live: set[int] = set(range(SEEDED))
    nxt = SEEDED
    out = []
    for b in range(n_batches):
        ts = b + 2
        op = "upsert" if b == 0 or rng.random() < 0.8 else "delete"
        if op == "delete" and live:
            ids = rng.sample(sorted(live), min(len(live), rng.randint(1, 6)))
            live -= set(ids)
        else:
            op = "upsert"
            upd = rng.sample(sorted(live), min(len(live), rng.randint(0, 15)))
            new = list(range(nxt, nxt + rng.randint(5, 25)))
            nxt += len(new)
            ids = upd + new
            live |= set(new)
        out.append({"op": op, "rows": [_row(i, part, ts) for i in ids]})
    return out


def _spawn(base: str, name: str, plan: dict[str, Any], tmp: Path) -> subprocess.Popen:
    plan_path = tmp / f"{name}.plan.json"
    plan_path.write_text(json.dumps(plan))
    out = (tmp / f"{name}.out").open("a")
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.writer_loop", base, name, str(plan_path), str(tmp / f"{name}.log")],
        cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=cli_env(), start_new_session=True,
    )


def _log(tmp: Path, name: str) -> list[list[str]]:
    p = tmp / f"{name}.log"
    return [line.split(" ", 2) for line in p.read_text().splitlines()] if p.exists() else []


def _candidates(seed: list[dict[str, Any]], batches: list[dict[str, Any]], log: list[list[str]]) -> list[dict]:
    """The states one writer's partition may be in: the seed, then its DONE batches applied in order, each
    interrupted one (BEGIN without an outcome: killed) either applied or not."""
    done = {int(x[1]) for x in log if x[0] == "DONE"}
    failed = [x for x in log if x[0] == "FAIL"]
    assert not failed, failed
    begun = [int(x[1]) for x in log if x[0] == "BEGIN"]
    cut = [i for i in begun if i not in done]
    out = []
    for pick in itertools.product([False, True], repeat=len(cut)):
        chosen = {i for i, p in zip(cut, pick, strict=True) if p}
        model: dict = {}
        apply(model, "upsert", seed)
        for i in sorted(set(begun)):
            if i in done or i in chosen:
                apply(model, batches[i]["op"], batches[i]["rows"])
        out.append(model)
    return out


def _prefix_states(seed: list[dict[str, Any]], batches: list[dict[str, Any]], log: list[list[str]]) -> list[list]:
    """The partition's rows after each prefix of a writer's batches; a batch interrupted by a kill may or may not
    be in it."""
    done = {int(x[1]) for x in log if x[0] == "DONE"}
    begun = sorted({int(x[1]) for x in log if x[0] == "BEGIN"})
    states: list[dict] = [{}]
    apply(states[0], "upsert", seed)
    out = {json.dumps(expected(states[0])): expected(states[0])}
    for i in begun:
        nxt = []
        for m in states:
            m2 = dict(m)
            apply(m2, batches[i]["op"], batches[i]["rows"])
            nxt += [m2] if i in done else [m, m2]
        states = list({json.dumps(expected(m)): m for m in nxt}.values())
        out.update({json.dumps(expected(m)): expected(m) for m in states})
    return list(out.values())


#: merge-on-read: updates and deletes go to log files, compacted inline every third deltacommit (by whichever
#: writer makes it), with column statistics kept through appends, compactions, cleans and rollbacks
MOR_OPTS = {
    **W_OPTS,
    "hoodie.table.type": "MERGE_ON_READ",
    "hoodie.compact.inline.max.delta.commits": "3",
    "hoodie.metadata.index.column.stats.enable": "true",
}


@pytest.mark.parametrize(("master", "n", "max_kills", "table_type"), [
    ("local[2]", 4, 2, "COPY_ON_WRITE"),
    ("local[2]", 4, 2, "MERGE_ON_READ"),
    ("local-cluster[2,1,1024]", 3, 1, "MERGE_ON_READ"),
])
def test_two_writers_with_kills(spark, tmp_path: Path, master: str, n: int, max_kills: int,  # type: ignore[no-untyped-def]
                                table_type: str) -> None:
    opts = MOR_OPTS if table_type == "MERGE_ON_READ" else W_OPTS
    rng = random.Random(f"writers-{master}" if table_type == "COPY_ON_WRITE" else f"writers-{master}-mor")
    base = str(tmp_path / "t")
    seed = [_row(i, part, 1) for part in ("a", "b") for i in range(SEEDED)]
    t = Table.create(base, to_arrow(seed).schema, opts)
    t.write(spark.createDataFrame(to_arrow(seed)), "bulk_insert", opts)
    plans = {"a": _plan(rng, "a", n), "b": _plan(rng, "b", n)}
    seen: list[list] = []  # what readers saw while the writers ran
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader() -> None:
        while not stop.is_set():
            try:
                seen.append(table_rows(hudi_rs_read(base)))
                seen.append(table_rows(Table.open(base).to_arrow()))
            except Exception as e:  # a file cleaned under a long read would be a finding too
                errors.append(e)
            stop.wait(1.0)

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    b = _spawn(base, "b", {"options": opts, "batches": plans["b"], "master": master}, tmp_path)
    start = 0
    kills = 0
    try:
        while start < n:
            a = _spawn(base, "a", {"options": opts, "batches": plans["a"][start:], "master": master}, tmp_path)
            if kills < max_kills:  # once it has committed a batch, at a random moment of a later one
                deadline = time.monotonic() + 600
                while a.poll() is None and time.monotonic() < deadline and not any(
                    x[0] == "DONE" for x in _log(tmp_path, "a")
                ):
                    time.sleep(0.5)
                time.sleep(rng.uniform(0, 8))
            if a.poll() is None and kills < max_kills:
                os.killpg(a.pid, signal.SIGKILL)
                kills += 1
            a.wait(timeout=900)
            # the log counts batches from `start`: shift them back to the whole plan's numbering
            log = (tmp_path / "a.log").read_text().splitlines() if (tmp_path / "a.log").exists() else []
            (tmp_path / "a.log").write_text("")
            shifted = []
            for line in log:
                kind, i, *rest = line.split(" ", 2)
                shifted.append(" ".join([kind, str(int(i) + start), *rest]))
            with (tmp_path / "a.full.log").open("a") as f:
                f.writelines(s + "\n" for s in shifted)
            begun = [int(s.split(" ")[1]) for s in shifted if s.startswith("BEGIN")]
            start = max(begun) + 1 if begun else start
    finally:
        b.wait(timeout=1800)
        stop.set()
        th.join(timeout=120)
    assert b.returncode == 0, (tmp_path / "b.out").read_text()[-3000:]
    assert kills >= 1, "writer a finished before it could be killed"
    assert not errors, errors[:3]
    log_a = [line.split(" ", 2) for line in (tmp_path / "a.full.log").read_text().splitlines()]
    got = table_rows(hudi_rs_read(base))
    seed_of = {part: [r for r in seed if r["p"] == part] for part in ("a", "b")}
    options = [
        expected({**ma, **mb})
        for ma, mb in itertools.product(_candidates(seed_of["a"], plans["a"], log_a),
                                        _candidates(seed_of["b"], plans["b"], _log(tmp_path, "b")))
    ]
    assert got in options, f"{len(got)} rows, none of the {len(options)} states the reported writes allow"
    # every read during the run saw, per writer, the state after some prefix of its batches: never a partial commit
    logs = {"a": log_a, "b": _log(tmp_path, "b")}
    prefixes = {part: _prefix_states(seed_of[part], plans[part], logs[part]) for part in ("a", "b")}
    for snapshot in seen:
        for part in ("a", "b"):
            mine = [r for r in snapshot if r[1] == part]
            assert mine in prefixes[part], f"a reader saw a state of partition {part} no prefix of its writes gives"
    assert len(seen) >= 4
    rep = validate_table(Table.open(base))
    assert rep.ok, rep.to_dict()
    keys = [r[0] for r in got]
    found = Table.open(base).lookup(keys).to_pylist()
    assert all(r["found"] for r in found)
    where = {r[0]: r[1] for r in got}
    assert all(r["partition"] == where[r["key"]] for r in found)
    # the next write succeeds, and the killed writes are rolled back by now (LAZY: after the commit)
    last = [_row(0, "a", 99)]
    Table.open(base).write(spark.createDataFrame(to_arrow(last)), "upsert", opts)
    assert [i for i in Table.open(base).timeline().pending()] == []
    assert validate_table(Table.open(base)).ok
