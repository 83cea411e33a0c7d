"""Counting (or collecting) a persisted DataFrame in the job that fills its cache.

A write persists its tagged records and counts them per file group, for planning, and persists its WriteStatus
rows and collects their counts. With adaptive query execution on, Spark runs such a count as three jobs: one that fills the cache
(a table-cache query stage), one that scans it and aggregates partially, one for the final aggregate. Planned
without adaptive execution and with one shuffle partition, the same count is two stages: the first fills the
cache and aggregates as it goes, the second adds up a few rows. The count is planned in a child session of the
DataFrame's own (:meth:`SparkSession.newSession`: its own SQL settings, the same SparkContext and cache), so the
caller's session settings are never touched, and reaches the cached plan through a global temporary view with a
unique name. Spark uncaches a view's plan when the view is dropped, so the view lives as long as the cache:
:func:`release` unpersists the DataFrame, then drops it.

Measured on 100k tagged records of a 2M-row table, 2 cores: the whole tag stage of an upsert (tag, cache, count
per file group) 0.56 s against 0.61 s with RECORD_INDEX, 0.26 s against 0.31 s with no index lookup.
"""

from __future__ import annotations

import threading
import uuid
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Row, SparkSession

# a session -> its child sessions by their SQL settings
_CHILDREN: weakref.WeakKeyDictionary[SparkSession, dict[tuple[tuple[str, str], ...], SparkSession]] = (
    weakref.WeakKeyDictionary())
_VIEWS: weakref.WeakKeyDictionary[DataFrame, str] = weakref.WeakKeyDictionary()  # persisted frame -> its view
_LOCK = threading.RLock()
_COUNTING = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "1"}
#: Spark's byte limit of the Arrow batches it sends to Python workers (a SQL setting, for :func:`with_settings`)
ARROW_BATCH_BYTES_CONF = "spark.sql.execution.arrow.maxBytesPerBatch"


def _child_session(spark: SparkSession, settings: dict[str, str]) -> SparkSession:
    key = tuple(sorted(settings.items()))
    with _LOCK:
        children = _CHILDREN.setdefault(spark, {})
        child = children.get(key)
        if child is None:
            child = spark.newSession()
            for k, v in key:
                child.conf.set(k, v)
            children[key] = child
        return child


def _counting_session(spark: SparkSession) -> SparkSession:
    return _child_session(spark, _COUNTING)


def with_settings(df: DataFrame, settings: dict[str, str]) -> DataFrame:
    """A persisted ``df`` in a child session of its own session with the SQL ``settings`` (the same
    SparkContext and cache; the caller's session is never touched), for queries built on it that need them.
    Release ``df`` with :func:`release`."""
    name = _view_name(df)
    return _child_session(df.sparkSession, settings).table(f"{_global_temp_database(df.sparkSession)}.{name}")


def grouped_counts(df: DataFrame, by: list[str]) -> list[Row]:
    """``df.groupBy(*by).count().collect()`` for a persisted ``df``, filling its cache in the same pass.
    Release ``df`` with :func:`release`."""
    return _cached_view(df).groupBy(*by).count().collect()


def collect(df: DataFrame, cols: list[Column]) -> list[Row]:
    """``df.select(*cols).collect()`` for a persisted ``df``, filling its cache in the same job (with adaptive
    execution, a query of a cache not filled yet is one job to fill it and one to read it). Release ``df`` with
    :func:`release`."""
    return _cached_view(df).select(*cols).collect()


def _view_name(df: DataFrame) -> str:
    """The name of ``df``'s global temporary view (made once)."""
    with _LOCK:
        name = _VIEWS.get(df)
        if name is None:
            name = f"pyhudi_cached_{uuid.uuid4().hex}"
            df.createGlobalTempView(name)
            _VIEWS[df] = name
        return name


def _cached_view(df: DataFrame) -> DataFrame:
    """``df`` in the counting session, through its global temporary view."""
    return with_settings(df, _COUNTING)


def count(df: DataFrame) -> int:
    """``df.count()`` for a persisted ``df``, filling its cache in the same pass. Release ``df`` with
    :func:`release`."""
    return int(grouped_counts(df, [])[0][0])


def release(df: DataFrame) -> None:
    """Unpersist ``df``, then drop the view its counts were planned through (in that order: dropping a view
    uncaches its plan). Releasing again does nothing."""
    df.unpersist()
    with _LOCK:
        name = _VIEWS.pop(df, None)
    if name is not None:
        _counting_session(df.sparkSession).catalog.dropGlobalTempView(name)


def _global_temp_database(spark: SparkSession) -> str:
    return spark.conf.get("spark.sql.globalTempDatabase") or "global_temp"
