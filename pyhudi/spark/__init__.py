"""Spark integration: the session pyhudi runs on, the Arrow task functions it ships to executors, and the
``hudi`` data source (:mod:`pyhudi.spark.source`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> list[str]:
    """Register pyhudi's Spark data source in ``spark`` (``spark.read.format("hudi")``, ``"pyhudi"``); see
    :func:`pyhudi.spark.source.register`."""
    from pyhudi.spark.source import register as _register

    return _register(spark)
