"""Counting a persisted DataFrame in the pass that fills its cache (pyhudi.spark.cached)."""

from __future__ import annotations

import pytest

from pyhudi.spark import cached

pytestmark = pytest.mark.spark


def _cached_partitions(spark) -> int:  # type: ignore[no-untyped-def]
    return sum(i.numCachedPartitions() for i in spark.sparkContext._jsc.sc().getRDDStorageInfo())


def _nothing_cached(spark) -> None:  # type: ignore[no-untyped-def]
    """Drop what earlier tests in this session left cached, waiting for it (``clearCache`` alone returns before
    the blocks are gone), so the counts below see this test's partitions only."""
    spark.catalog.clearCache()
    for rdd in spark.sparkContext._jsc.getPersistentRDDs().values():
        rdd.unpersist(True)
    assert _cached_partitions(spark) == 0


def test_grouped_counts_fill_the_cache_and_match_a_plain_count(spark) -> None:  # type: ignore[no-untyped-def]
    _nothing_cached(spark)
    rows = [(f"p{i % 3}", None if i % 4 == 0 else f"f{i % 5}") for i in range(1000)]
    df = spark.createDataFrame(rows, "part string, fid string").repartition(4).persist()
    aqe_before = spark.conf.get("spark.sql.adaptive.enabled")
    partitions_before = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        got = sorted((r[0], r[1] or "", r[2]) for r in cached.grouped_counts(df, ["part", "fid"]))
        assert _cached_partitions(spark) == 4  # filled by the count itself
        want = sorted((r[0], r[1] or "", r[2]) for r in df.groupBy("part", "fid").count().collect())
        assert got == want and sum(n for _p, _f, n in got) == 1000
        assert cached.count(df) == 1000
        assert _cached_partitions(spark) == 4  # still cached: the counts keep their one view
        assert len(spark.catalog.listTables(spark.conf.get("spark.sql.globalTempDatabase"))) == 1
        # the caller's session keeps its settings
        assert spark.conf.get("spark.sql.adaptive.enabled") == aqe_before
        assert spark.conf.get("spark.sql.shuffle.partitions") == partitions_before
    finally:
        cached.release(df)
    cached.release(df)  # again: nothing left to do
    assert _cached_partitions(spark) == 0
    assert spark.catalog.listTables(spark.conf.get("spark.sql.globalTempDatabase")) == []


def test_grouped_counts_of_an_empty_frame(spark) -> None:  # type: ignore[no-untyped-def]
    df = spark.createDataFrame([], "part string, fid string").persist()
    try:
        assert cached.grouped_counts(df, ["part", "fid"]) == []
        assert cached.count(df) == 0
    finally:
        cached.release(df)


def test_a_frame_with_settings_reads_the_same_cache_in_a_session_of_its_own(spark) -> None:  # type: ignore[no-untyped-def]
    _nothing_cached(spark)
    conf = "spark.sql.execution.arrow.maxBytesPerBatch"
    before = spark.conf.get(conf)
    df = spark.range(100).repartition(2).persist()
    try:
        assert cached.count(df) == 100
        other = cached.with_settings(df, {conf: "1024"})
        assert other.sparkSession.conf.get(conf) == "1024"
        assert spark.conf.get(conf) == before  # the caller's session keeps its settings
        assert sorted(r[0] for r in other.collect()) == list(range(100))
        assert _cached_partitions(spark) == 2  # read from the same cache, not recomputed into another
        assert cached.with_settings(df, {conf: "1024"}).sparkSession is other.sparkSession  # one child per settings
        assert len(spark.catalog.listTables(spark.conf.get("spark.sql.globalTempDatabase"))) == 1
    finally:
        cached.release(df)
    assert spark.catalog.listTables(spark.conf.get("spark.sql.globalTempDatabase")) == []
