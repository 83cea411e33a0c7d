"""Spark integration: the session pyhudi runs on, the Arrow task functions it ships to executors, and the
``hudi`` data source (:mod:`pyhudi.spark.source`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> list[str]:
    """Register pyhudi's Spark data source in ``spark`` (``spark.read.format("hudi")``, ``"pyhudi"``; see
    :func:`pyhudi.spark.source.register`) and, when the session's JVM has pyhudi's jar, the rule that hands Spark's
    parquet reader the scans it reads exactly (:func:`pyhudi.spark.native.install`). Returns the names
    registered."""
    from pyhudi.spark.native import install, own_token
    from pyhudi.spark.source import register as _register
    from pyhudi.spark.source import source_names

    names = source_names(spark)
    planner = install(spark, names)
    return _register(spark, names, own_token=own_token(spark) if planner is not None else None)
