"""The default session: bound to loopback, and configured for many short, differently shaped jobs."""

from __future__ import annotations

import os

import pytest

from pyhudi.spark.java import DEFAULT_DRIVER_JAVA_OPTIONS, ENV_DRIVER_JAVA_OPTIONS

pytestmark = pytest.mark.spark


def test_default_session_settings(spark) -> None:  # type: ignore[no-untyped-def]
    conf = spark.sparkContext.getConf()
    if spark.sparkContext.master.startswith("local"):
        assert conf.get("spark.driver.host") == "127.0.0.1"
        assert conf.get("spark.driver.bindAddress") == "127.0.0.1"
    # a write's few dozen query shapes keep their generated classes (and the JIT's work on them)
    assert spark.conf.get("spark.sql.codegen.cache.maxEntries") == "1000"
    assert spark.conf.get("spark.sql.inMemoryColumnarStorage.compressed") == "false"
    # Arrow batches for Python cut by rows only: no per-row sizing of the Arrow vectors
    assert spark.conf.get("spark.sql.execution.arrow.maxBytesPerBatch").rstrip("b") == str(2**31 - 1)


def test_local_driver_runs_the_parallel_collector(spark) -> None:  # type: ignore[no-untyped-def]
    if not spark.sparkContext.master.startswith("local["):
        pytest.skip("set for local masters only (their driver JVM runs the tasks)")
    # the suite's own options (tests/conftest.py) keep the default ones and add the short jobs' compiler
    if DEFAULT_DRIVER_JAVA_OPTIONS not in os.environ.get(ENV_DRIVER_JAVA_OPTIONS, DEFAULT_DRIVER_JAVA_OPTIONS):
        pytest.skip(f"{ENV_DRIVER_JAVA_OPTIONS} replaces the default options")
    jvm = spark.sparkContext._jvm
    beans = jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    names = {beans.get(i).getName() for i in range(beans.size())}
    assert names == {"PS Scavenge", "PS MarkSweep"}


def test_a_session_made_without_the_data_source_gets_it_when_asked(spark) -> None:  # type: ignore[no-untyped-def]
    from pyhudi.spark import session

    session._WITHOUT_SOURCE.add(spark)
    try:
        assert session.get_spark(data_source=False) is spark and spark in session._WITHOUT_SOURCE
        assert session.get_spark() is spark and spark not in session._WITHOUT_SOURCE
    finally:
        session._WITHOUT_SOURCE.discard(spark)
    assert spark._jsparkSession.sessionState().dataSourceManager().dataSourceExists("pyhudi")


def test_driver_java_options_of_short_jobs(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from pyhudi.spark.java import SHORT_JOB_JAVA_OPTIONS, local_driver_java_options

    monkeypatch.delenv(ENV_DRIVER_JAVA_OPTIONS, raising=False)
    assert local_driver_java_options() == DEFAULT_DRIVER_JAVA_OPTIONS
    assert local_driver_java_options(short_job=True) == f"{DEFAULT_DRIVER_JAVA_OPTIONS} {SHORT_JOB_JAVA_OPTIONS}"
    # the user's options win, even none at all
    monkeypatch.setenv(ENV_DRIVER_JAVA_OPTIONS, "-Xss4m")
    assert local_driver_java_options(short_job=True) == "-Xss4m"
    monkeypatch.setenv(ENV_DRIVER_JAVA_OPTIONS, "")
    assert local_driver_java_options(short_job=True) == ""


def test_local_session_reads_parquet_without_direct_buffers(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Spark's parquet reader with Hadoop's vectored reads holds a row group's column chunks in direct buffers,
    outside the heap; a local session, whose driver JVM runs the tasks, reads without them."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pyhudi.spark.session import PARQUET_VECTORED_IO_CONF

    if not spark.sparkContext.master.startswith("local["):
        pytest.skip("set for local masters only (their driver JVM runs the tasks)")
    assert spark.sparkContext.getConf().get(PARQUET_VECTORED_IO_CONF) == "false"
    rng = np.random.default_rng(5)
    values = pa.array([bytes(v).hex() for v in rng.integers(0, 256, (100_000, 48), dtype=np.uint8)])
    pq.write_table(pa.table({"v": values}), tmp_path / "one_row_group.parquet", compression="none")  # ~10 MB
    jvm = spark.sparkContext._jvm
    pools = jvm.java.lang.management.ManagementFactory.getPlatformMXBeans(
        jvm.java.lang.Class.forName("java.lang.management.BufferPoolMXBean"))
    direct = next(pools.get(i) for i in range(pools.size()) if pools.get(i).getName() == "direct")
    before = direct.getMemoryUsed()
    spark.read.parquet(str(tmp_path)).write.format("noop").mode("overwrite").save()
    assert direct.getMemoryUsed() - before < 4 << 20
