"""The partition pass-through: ints whose Spark hash partitioning lands each row where the task chose."""

from __future__ import annotations

import pytest

from pyhudi.spark.partitioning import group_runs, partition_keys, positions_by_group, spark_hash_int


@pytest.mark.spark
def test_hash_is_sparks(spark) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    values = [*range(-300, 300), 2**31 - 1, -(2**31), 123456789, -987654321]
    df = spark.createDataFrame([(v,) for v in values], "v int").select("v", F.hash("v").alias("h"))
    got = {r.v: r.h for r in df.collect()}
    assert {v: spark_hash_int(v) for v in values} == got


@pytest.mark.spark
@pytest.mark.parametrize("n", [1, 2, 3, 10, 37])
def test_rows_land_in_the_chosen_partition(spark, n: int) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    keys = partition_keys(n)
    rows = [(int(keys[p]), p) for p in range(n) for _ in range(3)]
    df = spark.createDataFrame(rows, "k int, want int").repartition(n, "k")
    got = df.select("want", F.spark_partition_id().alias("pid")).collect()
    assert len(got) == 3 * n
    assert all(r.want == r.pid for r in got)


def test_keys_are_distinct_and_small() -> None:
    keys = partition_keys(1000)
    assert len(set(keys.tolist())) == 1000 and keys.min() >= 0
    with pytest.raises(ValueError, match="positive"):
        partition_keys(0)


def test_positions_by_group() -> None:
    """Each id once, ascending, with its positions in their order; nothing for no rows."""
    import numpy as np

    got = [(g, list(p)) for g, p in positions_by_group(np.array([3, 1, 3, 0, 1, 3]))]
    assert got == [(0, [3]), (1, [1, 4]), (3, [0, 2, 5])]
    assert list(positions_by_group(np.array([], np.int64))) == []


def test_group_runs() -> None:
    import numpy as np

    ids = np.array([3, 1, 3, 0, 1, 3])
    order, runs = group_runs(ids)
    assert runs == [(0, 0, 1), (1, 1, 3), (3, 3, 6)]
    assert list(ids[order]) == [0, 1, 1, 3, 3, 3] and list(order) == [3, 1, 4, 0, 2, 5]  # stable
    order, runs = group_runs(np.array([], np.int64))
    assert len(order) == 0 and runs == []
