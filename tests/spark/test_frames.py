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
