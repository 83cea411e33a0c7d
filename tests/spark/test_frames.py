"""Driver-side rows as DataFrames."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.spark


def test_local_frame_is_a_local_relation_of_the_rows(spark) -> None:  # type: ignore[no-untyped-def]
    """Driver-side rows become a local relation made from Arrow: no Python worker of another kind to start."""
    from pyhudi.spark.frames import local_frame

    df = local_frame(spark, [("a", None, 1, 0.5, b"\x00"), ("b", "x", 2, 1.5, None)],
                     "p string, f string, n int, h double, s binary")
    assert df.schema.simpleString() == "struct<p:string,f:string,n:int,h:double,s:binary>"
    assert [tuple(r) for r in df.collect()] == [("a", None, 1, 0.5, bytearray(b"\x00")), ("b", "x", 2, 1.5, None)]
    assert "LocalRelation" in df._jdf.queryExecution().analyzed().toString()
    empty = local_frame(spark, [], "p string")
    assert empty.collect() == [] and empty.schema.simpleString() == "struct<p:string>"



def test_local_frame_with_timestamps(spark) -> None:  # type: ignore[no-untyped-def]
    """A table's schema may hold timestamps (an empty read's frame): they take the session's time zone."""
    import datetime as dt

    from pyhudi.spark.frames import local_frame

    empty = local_frame(spark, [], "k string, t timestamp, s struct<u: timestamp>")
    assert empty.collect() == [] and empty.schema.simpleString() == "struct<k:string,t:timestamp,s:struct<u:timestamp>>"
    when = dt.datetime(2026, 11, 26, 8, 30, tzinfo=dt.UTC)
    rows = local_frame(spark, [("a", when, None)], "k string, t timestamp, s struct<u: timestamp>").collect()
    assert rows[0].t.replace(tzinfo=dt.UTC) == when and rows[0].s is None


def test_held_rows(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The rows a plan holds itself: local relations under any projection, none once cached or read from files."""
    import pyarrow as pa

    from pyhudi.spark.frames import held_rows

    df = spark.createDataFrame(pa.table({"k": [str(i) for i in range(1000)], "v": list(range(1000))}))
    assert held_rows(df) == 1000
    assert held_rows(df.withColumn("w", df.v + 1).where("v > 3")) == 1000
    assert held_rows(df.unionByName(df)) == 2000
    df.write.parquet(str(tmp_path / "p"))
    assert held_rows(spark.read.parquet(str(tmp_path / "p"))) == 0
    kept = df.persist()
    try:
        assert held_rows(kept) == 0  # cached: Spark reads it from the cache, not from the plan
    finally:
        kept.unpersist()


def test_a_write_of_held_rows_caches_them_and_releases_them(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """An input of many rows held in its plan is cached for the write (Spark would otherwise evaluate each query's
    projections over them on the driver), written exactly, and released after the write."""
    import pyarrow as pa

    from pyhudi.table.table import Table
    from pyhudi.write.producer import LOCAL_INPUT_CACHE_MIN_ROWS

    n = LOCAL_INPUT_CACHE_MIN_ROWS + 5
    rows = pa.table({"id": [f"k{i:06d}" for i in range(n)], "p": [f"p{i % 3}" for i in range(n)],
                     "ts": list(range(n))})
    opts = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "p", "hoodie.table.ordering.fields": "ts"}
    table = Table.create(str(tmp_path / "t"), rows.schema, opts)
    before = spark.sparkContext._jsc.getPersistentRDDs().size()
    res = table.write(spark.createDataFrame(rows), "bulk_insert", opts)
    assert res.inserted == n
    # the write's caches, the input's among them, are released
    assert spark.sparkContext._jsc.getPersistentRDDs().size() == before
    got = Table.open(str(tmp_path / "t")).to_arrow()
    assert sorted(zip(got.column("id").to_pylist(), got.column("ts").to_pylist(), strict=True)) == list(
        zip(rows.column("id").to_pylist(), rows.column("ts").to_pylist(), strict=True))


def test_arrow_frame_keeps_the_rows_after_an_empty_batch(spark) -> None:  # type: ignore[no-untyped-def]
    """An Arrow table whose batches hold 2, 0 and 3 rows (a join's or a reader's output) is 5 rows in Spark:
    PySpark 4.3's ``createDataFrame`` alone stops at the empty batch."""
    import pyarrow as pa

    from pyhudi.spark.frames import arrow_frame

    s = pa.schema([("a", pa.int64())])
    t = pa.Table.from_batches([pa.record_batch([pa.array(v, pa.int64())], schema=s) for v in ([1, 2], [], [3, 4, 5])])
    assert [b.num_rows for b in t.to_batches()] == [2, 0, 3]
    assert sorted(r.a for r in arrow_frame(spark, t).collect()) == [1, 2, 3, 4, 5]
    assert arrow_frame(spark, t.slice(0, 0)).collect() == []
