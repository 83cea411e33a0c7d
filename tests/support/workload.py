"""The seeded random write workloads of the model-based write tests (``tests/write/test_flows.py``, the bloom
index's ``tests/index/test_bloom_index.py``) and their checks.

A :class:`Config` names a record key / partition layout (a :class:`tests.support.model.Spec`), the partition
values to draw from, a number of steps and a seed. :class:`Workload` draws each step's operation and batch from
the rows :class:`tests.support.model.Model` holds: inserts and bulk inserts of new keys, upserts mixing updates
of stored keys, lower-ordering updates, in-batch duplicates, new keys and partition moves, deletes of stored and
unknown keys. The checks compare sorted ``(record key, partition path, *data columns)`` rows.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest

from tests.support.model import Model, Spec, table_rows


# -- configurations -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Config:
    name: str
    spec: Spec
    partition_values: dict[str, list[str]]
    steps: int
    seed: int


DATES = ["2026/11/21", "2026/11/22", "2026/12/01"]
CONFIGS = [
    Config("simple_nested", Spec(("id",), ("dt",)), {"dt": DATES}, steps=8, seed=11),
    Config(
        "complex_hive_2parts",
        Spec(("id", "sub"), ("region", "day"), hive_style=True),
        {"region": ["eu", "us"], "day": ["2026-11-21", "2026-11-22"]},
        steps=6,
        seed=12,
    ),
    Config("non_partitioned", Spec(("id",)), {}, steps=5, seed=13),
    Config(
        "url_encoded",
        Spec(("id",), ("dt",), url_encode=True),
        {"dt": ["2026/11/21", "a:b=c", "50% off", "x#y?"]},
        steps=5,
        seed=14,
    ),
    Config(
        "global_move",
        Spec(("id",), ("dt",), global_index=True, update_partition_path=True),
        {"dt": DATES},
        steps=5,
        seed=15,
    ),
    Config(
        "global_stay",
        Spec(("id",), ("dt",), global_index=True, update_partition_path=False),
        {"dt": DATES},
        steps=5,
        seed=16,
    ),
]


def arrow_schema(cfg: Config) -> pa.Schema:
    fields = [pa.field("id", pa.string())]
    if "sub" in cfg.spec.key_fields:
        fields.append(pa.field("sub", pa.int64()))
    fields.append(pa.field("ts", pa.int64()))
    fields += [pa.field(p, pa.string()) for p in cfg.spec.partition_fields]
    fields += [pa.field("v", pa.float64()), pa.field("s", pa.string())]
    return pa.schema(fields)


# -- workload -------------------------------------------------------------------------------------------------
class Workload:
    def __init__(self, cfg: Config, model: Model) -> None:
        self.cfg, self.model = cfg, model
        self.rng = random.Random(cfg.seed)
        self.next_id = 0
        self.step = 0

    def _row(self, base: dict[str, Any] | None = None, ts: int | None = None) -> dict[str, Any]:
        rng, cfg = self.rng, self.cfg
        if base is None:
            self.next_id += 1
            base = {"id": f"k{self.next_id:05d}"}
            if "sub" in cfg.spec.key_fields:
                base["sub"] = rng.randrange(3)
            for p, vals in cfg.partition_values.items():
                base[p] = rng.choice(vals)
        r = {k: base[k] for k in ("id", "sub") if k in base}
        r["ts"] = ts if ts is not None else self.step * 1000 + rng.randrange(900)
        for p in cfg.spec.partition_fields:
            r[p] = base[p]
        r["v"] = None if rng.random() < 0.1 else round(rng.uniform(-1e3, 1e3), 3)
        r["s"] = f"s{self.step}-{rng.randrange(10**6)}"
        return r

    def _new_rows(self, n: int) -> list[dict[str, Any]]:
        return [self._row() for _ in range(n)]

    def next_batch(self) -> tuple[str, list[dict[str, Any]]]:
        rng = self.rng
        self.step += 1
        stored = self.model.stored_rows()
        if not stored:
            return rng.choice(["insert", "bulk_insert"]), self._new_rows(rng.randint(50, 300))
        op = rng.choices(["upsert", "insert", "bulk_insert", "delete"], weights=[5, 1, 1, 2])[0]
        if op in ("insert", "bulk_insert"):
            return op, self._new_rows(rng.randint(50, 150))
        if op == "delete":
            victims = rng.sample(stored, min(len(stored), rng.randint(5, 40)))
            unknown = [self._row() for _ in range(3)]  # keys the table does not hold
            return op, [*victims, *unknown]
        batch: list[dict[str, Any]] = []
        upd = rng.sample(stored, min(len(stored), rng.randint(30, 150)))
        spec = self.cfg.spec
        for r in upd:
            kind = rng.random()
            if kind < 0.15:  # lower ordering value: the stored record must win
                batch.append(self._row(r, ts=r["ts"] - 1 - rng.randrange(5)))
                continue
            moved = dict(r)
            if self.cfg.partition_values and kind < 0.35:
                # another partition: a move (global, update.partition.path=true), an in-place update (global,
                # false) or a second record of the key (non-global index)
                p = rng.choice(spec.partition_fields)
                moved[p] = rng.choice([v for v in self.cfg.partition_values[p] if v != r[p]] or [r[p]])
            batch.append(self._row(moved))
            if (
                kind > 0.9
            ):  # an in-batch duplicate of the same key (+ partition): highest ordering wins, ties last
                dup_ts = batch[-1]["ts"] + rng.choice([-1, 0, 1])
                batch.append(self._row(moved, ts=dup_ts))
        batch += self._new_rows(rng.randint(10, 100))
        rng.shuffle(batch)
        return op, batch


# -- checks ---------------------------------------------------------------------------------------------------
def hudi_rs_read(path: str, **kw: str) -> pa.Table:
    from hudi import HudiQueryType, HudiReadOptions, HudiTableBuilder

    opts = HudiReadOptions()
    if "as_of" in kw:
        opts = opts.with_as_of_timestamp(kw["as_of"])
    if "start" in kw:
        opts = opts.with_query_type(HudiQueryType.Incremental).with_start_timestamp(kw["start"])
        if kw.get("end"):
            opts = opts.with_end_timestamp(kw["end"])
    ht = HudiTableBuilder.from_base_uri(path).build()
    batches = list(ht.read(opts))
    return pa.Table.from_batches(batches) if batches else pa.table({})


def rows_of(t: pa.Table, cols: tuple[str, ...]) -> list[tuple[Any, ...]]:
    return table_rows(t, cols) if t.num_columns else []


def assert_rows(what: str, got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]) -> None:
    if got != want:
        g, w = set(got), set(want)
        pytest.fail(
            f"{what}: {len(got)} rows, expected {len(want)}; extra {sorted(g - w, key=str)[:5]}, "
            f"missing {sorted(w - g, key=str)[:5]}, duplicates {len(got) - len(g)}"
        )
