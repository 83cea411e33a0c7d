"""Seeded random workloads on a table indexed by the record index, with crashes in every phase of a commit.

Two layouts (``hoodie.record.index.update.partition.path`` true and false), each a sequence of inserts, upserts
(updates, lower-ordering updates, in-batch duplicates, new keys, partition moves), deletes of stored and unknown
keys, insert_overwrite (re-inserted, moved and new keys; once a key stored in a kept partition, which must be
rejected) and insert_overwrite_table, on a metadata table compacted every 3 deltacommits and cleaned as it goes.
Every few steps the write crashes: in a Spark task after writing its file (``after_write``), on the driver before
the commit (``before_commit``), between the metadata deltacommit and the data commit (``before_data_commit``), or
inside the metadata compaction after its base files are written; the same batch is then retried (for a compaction
crash the data commit had completed: the next write cleans the compaction up).

After every step and every crash, against :class:`tests.support.model.Model`:

- ``pyhudi validate`` is ok: files partition and record index (no missing, extra or wrong mapping);
- hudi-rs reads exactly the model's rows;
- ``Table.lookup`` of every live key names the partition and file id of the base file hudi-rs reads its row from,
  and finds none of the keys that were written once and are gone (deleted, replaced, moved away and back).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pyhudi.config import UPSERT_PARALLELISM
from pyhudi.errors import InvalidInputError, PostCommitError
from pyhudi.metadata.validate import validate_table
from pyhudi.metadata.writer import MetadataWriter
from pyhudi.table.table import Table
from pyhudi.table.timeline import COMMIT, COMPACTION, ActiveTimeline
from pyhudi.write.producer import FAULT_OPTION
from tests.support.faults import crash_next_metadata_compactions
from tests.support.model import Model, Rejected, Spec, table_rows

hudi = pytest.importorskip("hudi")

pytestmark = [pytest.mark.spark, pytest.mark.slow]  # ~85 s per layout on local[2]: not in make test-quick

SCHEMA = pa.schema(
    [("id", pa.string()), ("ts", pa.int64()), ("dt", pa.string()), ("v", pa.float64()), ("s", pa.string())]
)
COLS = tuple(SCHEMA.names)
PARTITIONS = ["2026/11/21", "2026/11/22", "2026/12/01"]
FAULTS = ["after_write", "before_commit", "before_data_commit", "compaction"]
COMPACTION_FAULT = "compaction"


@dataclass(frozen=True)
class Layout:
    name: str
    update_partition_path: bool
    seed: int
    steps: int = 18
    crash_every: int = 3  # steps 2, 5, 8, ... crash first (cycling through FAULTS), then retry


LAYOUTS = [Layout("moves", True, 21), Layout("in_place", False, 22)]


def options(layout: Layout) -> dict[str, str]:
    spec = Spec(("id",), ("dt",), global_index=True, update_partition_path=layout.update_partition_path)
    return {
        **spec.options(layout.name),
        "hoodie.index.type": "RECORD_INDEX",
        "hoodie.metadata.record.index.enable": "true",
        "hoodie.record.index.update.partition.path": str(layout.update_partition_path).lower(),
        "hoodie.metadata.record.index.min.filegroup.count": "4",
        "hoodie.metadata.record.index.max.filegroup.count": "4",
        "hoodie.metadata.compact.max.delta.commits": "3",
        "hoodie.cleaner.commits.retained": "3",
    }


class Workload:
    """Batches for the next step, drawn from the model's state with a seeded generator."""

    def __init__(self, layout: Layout, model: Model) -> None:
        self.model = model
        self.rng = random.Random(layout.seed)
        self.next_id = 0
        self.step = 0
        self.rejection_done = False
        self.seen: set[str] = set()  # every key written once

    def gone(self, n: int) -> list[str]:
        """Up to ``n`` keys written once and not stored any more (deleted, replaced)."""
        live = {r["id"] for r in self.model.stored_rows()}
        keys = sorted(self.seen - live)
        return self.rng.sample(keys, min(n, len(keys)))

    def row(self, key: str | None = None, dt: str | None = None, ts: int | None = None) -> dict[str, Any]:
        rng = self.rng
        if key is None:
            self.next_id += 1
            key = f"k{self.next_id:05d}"
        return {
            "id": key,
            "ts": ts if ts is not None else self.step * 1000 + rng.randrange(900),
            "dt": dt or rng.choice(PARTITIONS),
            "v": None if rng.random() < 0.1 else round(rng.uniform(-1e3, 1e3), 3),
            "s": f"s{self.step}-{rng.randrange(10**6)}",
        }

    def stored(self) -> list[dict[str, Any]]:
        """The stored records, each with its partition path as ``pp`` (an update in place under
        update.partition.path=false keeps the path while the ``dt`` column takes the incoming value)."""
        return sorted(({**r, "pp": pp} for (pp, _), (r, _) in self.model.rows.items()), key=lambda r: r["id"])

    def next_batch(self) -> tuple[str, list[dict[str, Any]], bool]:
        """(operation, records, combine before insert)."""
        rng = self.rng
        self.step += 1
        stored = self.stored()
        if len(stored) < 20:
            return "insert", [self.row() for _ in range(rng.randint(60, 120))], False
        op = rng.choices(
            ["upsert", "delete", "insert", "insert_overwrite", "insert_overwrite_table"], weights=[5, 3, 1, 2, 1]
        )[0]
        if op == "insert":  # new keys and keys that are gone
            return op, [self.row() for _ in range(rng.randint(20, 60))] + [self.row(k) for k in self.gone(5)], False
        if op == "delete":  # the partition a delete names does not matter under a global index
            victims = [
                self.row(r["id"], r["pp"] if rng.random() < 0.8 else rng.choice(PARTITIONS), 0)
                for r in rng.sample(stored, rng.randint(3, min(25, len(stored))))
            ]
            return op, [*victims, *(self.row() for _ in range(3))], False  # plus unknown keys
        if op == "upsert":
            batch = []
            for r in rng.sample(stored, rng.randint(10, min(60, len(stored)))):
                kind = rng.random()
                if kind < 0.15:  # lower ordering value (maybe in another partition): the stored record stays
                    dt = r["pp"] if kind < 0.08 else rng.choice(PARTITIONS)
                    batch.append(self.row(r["id"], dt, r["ts"] - 1 - rng.randrange(5)))
                elif kind < 0.4:  # another partition: a move, or an update where the key is
                    batch.append(self.row(r["id"], rng.choice([p for p in PARTITIONS if p != r["pp"]])))
                else:
                    batch.append(self.row(r["id"], r["pp"]))
                if kind > 0.92:  # an in-batch duplicate: the greater ordering value wins, ties the last
                    batch.append(self.row(r["id"], batch[-1]["dt"], batch[-1]["ts"] + rng.choice([-1, 0, 1])))
            batch += [self.row() for _ in range(rng.randint(5, 30))] + [self.row(k) for k in self.gone(5)]
            rng.shuffle(batch)
            return op, batch, False
        if op == "insert_overwrite_table":
            keep = rng.sample(stored, min(len(stored), rng.randint(5, 20)))
            batch = [self.row(r["id"]) for r in keep] + [self.row() for _ in range(rng.randint(20, 50))]
            return op, batch, False
        # insert_overwrite of one or two partitions: keys of those partitions kept, moved among them, or
        # dropped; new keys; an in-batch duplicate (combined before insert)
        over = rng.sample(PARTITIONS, rng.randint(1, 2))
        batch = [
            self.row(r["id"], rng.choice(over))
            for r in stored
            if r["pp"] in over and rng.random() < 0.5
        ]
        batch += [self.row(dt=rng.choice(over)) for _ in range(rng.randint(10, 40))]
        dup = rng.choice(batch)
        batch.append(self.row(dup["id"], dup["dt"], dup["ts"] + 1))
        rng.shuffle(batch)
        return op, batch, True

    def rejected_variant(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """The batch plus a key stored in a partition it does not overwrite (None: no such key)."""
        over = {r["dt"] for r in batch}
        kept = [r for r in self.stored() if r["pp"] not in over]
        if not kept:
            return None
        r = self.rng.choice(kept)
        return [*batch, self.row(r["id"], sorted(over)[0])]


def hudi_rs_read(base: str) -> pa.Table:
    batches = list(hudi.HudiTableBuilder.from_base_uri(base).build().read(hudi.HudiReadOptions()))
    return pa.Table.from_batches(batches) if batches else pa.table({})


def check(base: str, model: Model, seen: set[str], what: str) -> None:
    table = Table.open(base)
    rep = validate_table(table)
    assert rep.ok, (what, rep.to_dict())
    assert rep.record_index is not None, what
    rs = hudi_rs_read(base)
    got = table_rows(rs, COLS) if rs.num_rows else []
    want = model.snapshot()
    if got != want:
        g, w = set(got), set(want)
        pytest.fail(f"{what}: hudi-rs {len(got)} rows, model {len(want)}; extra {sorted(g - w, key=str)[:3]}, "
                    f"missing {sorted(w - g, key=str)[:3]}")
    where: dict[str, tuple[str, str]] = {}
    if rs.num_rows:
        for k, p, f in zip(rs.column("_hoodie_record_key").to_pylist(), rs.column("_hoodie_partition_path").to_pylist(),
                           rs.column("_hoodie_file_name").to_pylist(), strict=True):
            assert k not in where, f"{what}: hudi-rs reads key {k} twice"
            where[k] = (p, f.split("_")[0])
    gone = sorted(seen - set(where))
    found = table.lookup([*sorted(where), *gone])
    bad = [
        r for r in found.to_pylist()
        if (r["key"] in where and (not r["found"] or (r["partition"], r["file_id"]) != where[r["key"]]))
        or (r["key"] not in where and r["found"])
    ]
    assert not bad, (what, bad[:5], len(bad))
    assert rep.record_index["entries"] == len(where), (what, rep.record_index)


def mdt_timeline(base: str) -> ActiveTimeline:
    t = Table.open(base)
    return MetadataWriter(t.storage, t.base_path, t.config).timeline()


class CompactionCrash:
    """Makes the next metadata compaction die after writing its base files (before it completes)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch

    def __enter__(self) -> CompactionCrash:
        crash_next_metadata_compactions(
            self.monkeypatch, "injected fault: metadata compaction died after writing its base files"
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self.monkeypatch.undo()


@pytest.mark.parametrize("layout", LAYOUTS, ids=[lay.name for lay in LAYOUTS])
def test_record_index_workload_with_crashes(  # type: ignore[no-untyped-def]
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: Layout
) -> None:
    base = str(tmp_path / layout.name)
    opts = options(layout)
    Table.create(base, SCHEMA, opts)
    spec = Spec(("id",), ("dt",), global_index=True, update_partition_path=layout.update_partition_path)
    model = Model(spec, COLS)
    work = Workload(layout, model)
    seen: set[str] = set()
    faults = iter(FAULTS * layout.steps)
    log: list[str] = []
    t0 = time.perf_counter()

    def write(op: str, batch: list[dict[str, Any]], combine: bool, **extra: str) -> str:
        o = {**opts, **extra, **({"hoodie.combine.before.insert": "true"} if combine else {})}
        if step % 2:  # odd steps route every record-index file group to one tag task, even ones spread them
            o[UPSERT_PARALLELISM] = "1"
        df = spark.createDataFrame(pa.Table.from_pylist(batch, schema=SCHEMA))
        return Table.open(base).write(df, op, o).instant

    for step in range(layout.steps):
        op, batch, combine = work.next_batch()
        what = f"{layout.name} step {step} ({op}, {len(batch)} records)"
        if op == "insert_overwrite" and not work.rejection_done:
            bad = work.rejected_variant(batch)
            if bad is not None:
                work.rejection_done = True
                with pytest.raises(Rejected):
                    model.check_overwrite(op, bad)
                n_instants = len(Table.open(base).timeline().all_instant_files)
                with pytest.raises(InvalidInputError, match="a partition this write does not overwrite"):
                    write(op, bad, combine)
                assert len(Table.open(base).timeline().all_instant_files) == n_instants, what
                check(base, model, seen, f"{what}: rejected")
                log.append("rejected")
        seen.update(r["id"] for r in batch)
        work.seen.update(r["id"] for r in batch)
        if step % layout.crash_every == layout.crash_every - 1:
            fault = next(faults)
            if fault == COMPACTION_FAULT:
                with CompactionCrash(monkeypatch), pytest.raises(PostCommitError, match="metadata compaction died"):
                    write(op, batch, combine, **{"hoodie.metadata.compact.max.delta.commits": "1"})
                pending = [i for i in mdt_timeline(base).pending() if i.action == COMPACTION]
                assert len(pending) == 1, what
                instant = max(i.requested_time for i in Table.open(base).timeline().completed_commits())
                model.apply(op, batch, instant, combine=combine)  # the data commit completed first
                check(base, model, seen, f"{what}: compaction crashed")
                log.append(f"{op}+{fault}")
                continue  # the next write cleans the compaction up
            with pytest.raises(Exception, match="injected fault"):
                write(op, batch, combine, **{FAULT_OPTION: fault})
            actions = [i.action for i in Table.open(base).timeline().pending()]
            assert len(actions) == 1, (what, fault, actions)
            check(base, model, seen, f"{what}: crashed at {fault}")
            log.append(f"{op}+{fault}")
        instant = write(op, batch, combine)
        model.apply(op, batch, instant, combine=combine)
        assert not Table.open(base).timeline().pending(), what
        check(base, model, seen, what)
        log.append(op)

    mdt = mdt_timeline(base)
    compactions = [i for i in mdt.completed() if i.action == COMMIT]
    assert len(compactions) >= 3, [str(i) for i in mdt]
    assert not mdt.pending()
    assert {"insert_overwrite", "upsert", "delete"} <= {e.split("+")[0] for e in log}, log
    assert {f for e in log if "+" in e for f in [e.split("+")[1]]} == set(FAULTS), log
    assert "rejected" in log, log
    print(f"{layout.name}: {log} in {time.perf_counter() - t0:.0f}s, {len(compactions)} metadata compactions")
