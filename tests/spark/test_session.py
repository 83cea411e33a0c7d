"""The default session: bound to loopback, and configured for many short, differently shaped jobs."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.spark


def test_default_session_settings(spark) -> None:  # type: ignore[no-untyped-def]
    conf = spark.sparkContext.getConf()
    if spark.sparkContext.master.startswith("local"):
        assert conf.get("spark.driver.host") == "127.0.0.1"
        assert conf.get("spark.driver.bindAddress") == "127.0.0.1"
    # a write's few dozen query shapes keep their generated classes (and the JIT's work on them)
    assert spark.conf.get("spark.sql.codegen.cache.maxEntries") == "1000"
    assert spark.conf.get("spark.sql.inMemoryColumnarStorage.compressed") == "false"
