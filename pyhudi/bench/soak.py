"""A long-running pipeline in miniature: many small commits into one table, driven by a plain dict model.

Shared by ``benchmarks/bench_soak.py`` (thousands of commits, outside CI) and
``tests/services/test_long_pipeline.py`` (200 commits): the workload (:class:`SoakWorkload`), what the active
timelines of the data table and its metadata table hold (:func:`timeline_sizes`) and the LSM history's files
(:func:`history_files`).

Every commit is an upsert of a few rows (new keys and updates of live ones) into a couple of partitions, or every
``delete_every``-th commit a delete of a few live keys; the model is ``id -> (dt, ts, v)``.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pyhudi.io.storage import Storage
from pyhudi.metadata.partitions import metadata_base_path
from pyhudi.table.lsm_timeline import LsmHistory
from pyhudi.table.timeline import ActiveTimeline

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("dt", pa.string()), ("v", pa.int64())])
#: write options: everything else (archival, cleaning, metadata table compaction) on its defaults
OPTIONS = {
    "hoodie.table.name": "soak",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "dt",
    "hoodie.table.ordering.fields": "ts",
}
Row = tuple[str, str, int, int]  # (id, dt, ts, v)


@dataclass
class SoakWorkload:
    """Batches of ``inserts`` new keys and ``updates`` updates (a delete of ``deletes`` keys every
    ``delete_every``-th commit) over ``partitions`` partitions, and the model of the table they make."""

    seed: int = 7
    partitions: int = 2
    inserts: int = 2
    updates: int = 2
    deletes: int = 2
    delete_every: int = 10
    live: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # id -> (dt, ts, v)
    n: int = 0  # commits planned so far
    next_key: int = 0

    def __post_init__(self) -> None:
        self.rnd = random.Random(self.seed)

    def dt(self, key: int) -> str:
        return f"2026-01-{key % self.partitions + 1:02d}"

    def batch(self) -> tuple[str, list[dict[str, Any]]]:
        """The next commit: ``(operation, rows)``; :meth:`applied` records it in the model once committed."""
        i = self.n
        self.n += 1
        if i % self.delete_every == self.delete_every - 1 and len(self.live) > self.deletes:
            ids = self.rnd.sample(sorted(self.live), self.deletes)
            return "delete", [{"id": k, "ts": i, "dt": self.live[k][0], "v": 0} for k in sorted(ids)]
        ids = self.rnd.sample(sorted(self.live), min(self.updates, len(self.live)))
        for _ in range(self.inserts):
            ids.append(f"k{self.next_key:07d}")
            self.next_key += 1
        return "upsert", [{"id": k, "ts": i, "dt": self.dt(int(k[1:])), "v": i * 1000 + j} for j, k in enumerate(ids)]

    def table(self, rows: list[dict[str, Any]]) -> pa.Table:
        return pa.Table.from_pylist(rows, schema=SCHEMA)

    def applied(self, op: str, rows: list[dict[str, Any]]) -> None:
        for r in rows:
            if op == "delete":
                self.live.pop(r["id"], None)
            else:
                self.live[r["id"]] = (r["dt"], r["ts"], r["v"])

    def snapshot(self) -> list[Row]:
        return sorted((k, dt, ts, v) for k, (dt, ts, v) in self.live.items())


def rows_of(t: pa.Table) -> list[Row]:
    """``(id, dt, ts, v)`` rows of a read, sorted."""
    if not t.num_rows:
        return []
    return sorted(zip(*(t.column(c).to_pylist() for c in ("id", "dt", "ts", "v")), strict=True))


def hudi_rs_rows(base: str, as_of: str | None = None) -> list[Row]:
    """The table as hudi-rs (PyPI ``hudi``) reads it."""
    import hudi

    opts = hudi.HudiReadOptions() if as_of is None else hudi.HudiReadOptions().with_as_of_timestamp(as_of)
    batches = list(hudi.HudiTableBuilder.from_base_uri(base).build().read(opts))
    return rows_of(pa.Table.from_batches(batches)) if batches else []


def _sizes(tl: ActiveTimeline) -> dict[str, int]:
    return {
        "instants": len(tl),
        "completed_commits": len(tl.completed_commits()),
        "completed": len(tl.completed()),
        "pending": len(tl.pending()),
    }


def timeline_sizes(storage: Storage, base: str) -> dict[str, dict[str, int]]:
    """``{"data": ..., "metadata": ...}``: instants on each active timeline (every action, the latest state of
    each), completed commits (commit, deltacommit, replacecommit), completed instants and pending ones."""
    out = {"data": _sizes(ActiveTimeline.load(storage, base))}
    mdt = metadata_base_path(base)
    if storage.exists(mdt):
        out["metadata"] = _sizes(ActiveTimeline.load(storage, mdt))
    return out


def history_files(storage: Storage, base: str) -> dict[str, dict[str, int]]:
    """Per table: parquet files the LSM history's latest manifest lists, parquet files present, manifests."""
    out = {}
    for name, path in (("data", base), ("metadata", metadata_base_path(base))):
        h = LsmHistory.for_table(storage, path)
        names = h.listing()
        out[name] = {
            "listed": len(h.latest()[1].file_names),
            "parquet": len(h.parquet_files(names)),
            "manifests": len(h.manifest_versions(names)),
        }
    return out


def tree_cpu_seconds(pid: int | None = None) -> float | None:
    """CPU seconds (user + system, with reaped children's) of ``pid`` (default: this process) and every
    descendant: for a local Spark session the driver's Python, the JVM and the Python workers. What a commit
    costs whatever else the machine runs; None where there is no Linux ``/proc``."""
    root = pid or os.getpid()
    try:
        tick = os.sysconf("SC_CLK_TCK")
        names = [n for n in os.listdir("/proc") if n.isdigit()]
    except (OSError, ValueError, AttributeError):
        return None
    stats: dict[int, tuple[int, float]] = {}  # pid -> (parent, cpu seconds)
    for n in names:
        try:
            with open(f"/proc/{n}/stat") as f:
                raw = f.read()
        except OSError:
            continue  # gone meanwhile
        fields = raw[raw.rindex(")") + 2:].split()  # after "pid (comm) ": state, ppid, ... utime is field 14
        stats[int(n)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / tick)
    if root not in stats:
        return None
    children: dict[int, list[int]] = {}
    for p, (parent, _) in stats.items():
        children.setdefault(parent, []).append(p)
    total, todo = 0.0, [root]
    while todo:
        p = todo.pop()
        total += stats[p][1]
        todo.extend(children.get(p, ()))
    return total
