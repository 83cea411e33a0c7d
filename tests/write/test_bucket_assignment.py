"""The write assigns records to buckets in the plan, with literal maps, when there are few buckets and records, and
through broadcast joins otherwise (``pyhudi.write.producer.LITERAL_ASSIGNMENT_MAX_ENTRIES``): both assign every
record to the same bucket, and the same writes give the same file groups with the same records either way."""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path

import pytest

from pyhudi.index.base import LOC_FILE_ID_COL
from pyhudi.table.table import Table
from pyhudi.write import producer
from pyhudi.write.executor import OP_COL, OP_DELETE, OP_UPSERT
from tests.support.robust import OPTS, hudi_rs_read, rows, to_arrow

pytestmark = pytest.mark.spark

KEY, PART = "_hoodie_record_key", "_hoodie_partition_path"


def test_literal_maps_assign_as_the_joins(spark) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    rng = random.Random(7)
    parts = [f"2026/01/{d:02d}" for d in range(1, 6)]
    fids = {p: [f"{rng.getrandbits(64):016x}-{i}_0" for i in range(3)] for p in parts}
    records = []
    for i in range(5000):
        p = rng.choice([*parts, "dt=2026-02-01"])
        if rng.random() < 0.5:  # stored, in a group the plan may or may not name
            records.append((f"id{i}", p, rng.choice([*fids.get(p, []), "other-0"]), OP_UPSERT))
        else:
            records.append((f"id{i}", p, None, rng.choice([OP_UPSERT, OP_UPSERT, OP_DELETE])))
    df = spark.createDataFrame(records, f"{KEY} string, {PART} string, {LOC_FILE_ID_COL} string, {OP_COL} string")
    upd = [(p, f, b) for b, (p, f) in enumerate((p, f) for p in parts[:4] for f in fids[p][:2])]
    ranges, b = [], 100
    for p in parts[1:]:
        lo = 0.0
        for hi in [*sorted(rng.random() for _ in range(rng.randint(0, 4))), 1.0]:
            ranges.append((p, lo, hi, b))
            lo, b = hi, b + 1
    assert producer._literal_assignment(upd, ranges, df.count())

    h = F.pmod(F.xxhash64(F.col(KEY)), F.lit(producer._HASH_RANGE)) / F.lit(float(producer._HASH_RANGE))
    stored = df.filter(F.col(LOC_FILE_ID_COL).isNotNull())
    ins = df.filter(F.col(LOC_FILE_ID_COL).isNull() & (F.col(OP_COL) == OP_UPSERT)).withColumn("__h", h)
    u = spark.createDataFrame(upd, "__p string, __f string, __b int")
    r = spark.createDataFrame(ranges, "__p string, __lo double, __hi double, __b int")
    joined = stored.join(F.broadcast(u), (F.col(PART) == F.col("__p")) & (F.col(LOC_FILE_ID_COL) == F.col("__f"))).drop(
        "__p", "__f"
    ).unionByName(ins.join(
        F.broadcast(r), (F.col(PART) == F.col("__p")) & (F.col("__h") >= F.col("__lo")) & (F.col("__h") < F.col("__hi"))
    ).drop("__p", "__lo", "__hi", "__h"))
    literal = stored.withColumn("__b", F.expr(producer._update_bucket_sql(upd))).filter(
        F.col("__b").isNotNull()
    ).unionByName(
        ins.withColumn("__b", F.expr(producer._insert_bucket_sql(ranges))).filter(F.col("__b").isNotNull()).drop("__h")
    )
    want = sorted(map(tuple, joined.collect()))
    assert len(want) > 1000
    assert sorted(map(tuple, literal.collect())) == want
    assert literal.columns == joined.columns


def test_literal_maps_only_for_plain_names_and_small_plans() -> None:
    upd = [("2026/01/01", "abc-0_0", 0)]
    ranges = [("dt=2026-01-01", 0.0, 1.0, 1)]
    assert producer._literal_assignment(upd, ranges, 1000)
    assert not producer._literal_assignment([("it's", "abc-0_0", 0)], ranges, 1000)
    assert not producer._literal_assignment(upd, [("a b", 0.0, 1.0, 1)], 1000)
    assert not producer._literal_assignment(upd, ranges, producer.LITERAL_ASSIGNMENT_MAX_WORK)
    many = [("p", f"f{i}", i) for i in range(producer.LITERAL_ASSIGNMENT_MAX_ENTRIES + 1)]
    assert not producer._literal_assignment(many, [], 1)


def _groups(base: str) -> dict[str, list[list[str]]]:
    """Per partition, the record keys of each file group (sorted), as read by hudi-rs."""
    t = hudi_rs_read(base)
    by_group: dict[tuple[str, str], list[str]] = defaultdict(list)
    for k, p, name in zip(*(t.column(c).to_pylist() for c in (KEY, PART, "_hoodie_file_name")), strict=True):
        by_group[(p, name.split("_")[0])].append(k)
    out: dict[str, list[list[str]]] = defaultdict(list)
    for (p, _), keys in by_group.items():
        out[p].append(sorted(keys))
    return {p: sorted(gs) for p, gs in out.items()}


def _run(spark, base: str) -> tuple[dict[str, list[list[str]]], list[tuple[int, int, int, int]]]:  # type: ignore[no-untyped-def]
    first = rows(range(40))
    t = Table.create(base, to_arrow(first).schema, OPTS)
    done = [t.write(spark.createDataFrame(to_arrow(first)), "insert", OPTS)]
    # updates, inserts into the small files of a and b, and a new partition
    batch = rows(range(0, 20), ts=2) + rows(range(40, 70)) + rows(range(70, 80), p="c")
    done.append(Table.open(base).write(spark.createDataFrame(to_arrow(batch)), "upsert", OPTS))
    # no small files: the inserts of a partition are spread over new file groups by key hash ranges
    split = {**OPTS, "hoodie.parquet.small.file.limit": "0", "hoodie.copyonwrite.insert.auto.split": "false",
             "hoodie.copyonwrite.insert.split.size": "7"}
    batch = rows(range(10, 30), ts=3) + rows(range(100, 160)) + rows(range(200, 230), p="d")
    done.append(Table.open(base).write(spark.createDataFrame(to_arrow(batch)), "upsert", split))
    gone = rows([1, 2, 41, 101, 500], ts=9)
    done.append(Table.open(base).write(spark.createDataFrame(to_arrow(gone)), "delete", OPTS))
    return _groups(base), [(r.inserted, r.updated, r.deleted, r.files_written) for r in done]


def test_literal_maps_and_joins_write_the_same_file_groups(spark, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    literal = _run(spark, str(tmp_path / "literal"))
    monkeypatch.setattr(producer, "LITERAL_ASSIGNMENT_MAX_ENTRIES", -1)
    joined = _run(spark, str(tmp_path / "joined"))
    assert literal == joined
    assert len(literal[0]["d"]) > 2  # the inserts of d went to several new file groups


def test_by_bucket_gathers_each_bucket_in_input_order() -> None:
    """A write task's batches, interleaving buckets (and one batch of a single bucket), reach the bucket writer one
    bucket at a time, buckets ascending, each bucket's rows in the order they arrived."""
    import pyarrow as pa

    from pyhudi.write.executor import BUCKET_COL

    rng = random.Random(7)
    batches, expected = [], defaultdict(list)
    n = 0
    for size in (50, 1, 0, 80, 30):
        ids = [rng.choice([4, 0, 9, 2]) for _ in range(size)]
        batches.append(pa.record_batch({"v": list(range(n, n + size)), BUCKET_COL: pa.array(ids, pa.int32())}))
        for i, b in enumerate(ids):
            expected[b].append(n + i)
        n += size
    batches.append(pa.record_batch({"v": [n, n + 1], BUCKET_COL: pa.array([2, 2], pa.int32())}))
    expected[2] += [n, n + 1]
    seen: list[tuple[int, list[int]]] = []

    def write(t: pa.Table) -> pa.Table:
        ids = set(t.column(BUCKET_COL).to_pylist())
        assert len(ids) == 1
        seen.append((ids.pop(), t.column("v").to_pylist()))
        return pa.table({"n": [t.num_rows]})

    out = list(producer.by_bucket(write)(iter(batches)))
    assert [b for b, _ in seen] == sorted(expected)
    assert dict(seen) == dict(expected)
    assert sum(b.column(0)[0].as_py() for b in out) == n + 2
