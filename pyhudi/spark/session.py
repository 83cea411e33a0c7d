"""The Spark session pyhudi uses.

Local Spark is the embedded default. Python workers run the interpreter that runs pyhudi (``PYSPARK_PYTHON``),
and a local session binds to loopback only. An existing session (a cluster's) is used as it is.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pyhudi.spark.cached import ARROW_BATCH_BYTES_CONF
from pyhudi.spark.java import check_java, java_version, local_driver_java_options

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

LOOPBACK = "127.0.0.1"
ENV_MASTER = "PYHUDI_SPARK_MASTER"
DEFAULT_MASTER = "local[2]"
ENV_DRIVER_MEMORY = "PYHUDI_SPARK_DRIVER_MEMORY"
#: heap of a local session's driver JVM (which runs the tasks)
DEFAULT_DRIVER_MEMORY = "1g"
#: the value of Spark's byte limit of Arrow batches for Python (:data:`~pyhudi.spark.cached.ARROW_BATCH_BYTES_CONF`)
#: that turns off the per-row check of it (Int.MaxValue)
ARROW_MAX_BYTES_PER_BATCH = 2**31 - 1
#: Hadoop's setting of parquet's vectored reads (Spark's parquet reader), off in local sessions
PARQUET_VECTORED_IO_CONF = "spark.hadoop.parquet.hadoop.vectored.io.enabled"
# "1": the session does not log failed tasks itself (the pyhudi command sets it: it reports the error once)
ENV_QUIET_TASK_FAILURES = "PYHUDI_SPARK_QUIET_TASK_FAILURES"
# the driver-side loggers that print a failed task's Python and JVM stack traces (local mode runs the executor
# in the driver JVM)
TASK_FAILURE_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.scheduler.TaskSchedulerImpl",
)


# sessions this module made without registering the data source (get_spark(data_source=False))
_WITHOUT_SOURCE: weakref.WeakSet[SparkSession] = weakref.WeakSet()


def get_spark(
    master: str | None = None, app_name: str = "pyhudi", data_source: bool = True, short_job: bool = False
) -> SparkSession:
    """The active Spark session, or a new local one bound to loopback.

    ``master`` (or ``PYHUDI_SPARK_MASTER``) picks the master of a new session: ``local[N]`` by default,
    ``local-cluster[2,1,1024]`` for a local multi-process cluster. ``short_job``: the process runs one short
    write (a small input), and a new local driver JVM compiles with the client compiler only
    (:data:`~pyhudi.spark.java.SHORT_JOB_JAVA_OPTIONS`), unless ``PYHUDI_SPARK_DRIVER_JAVA_OPTIONS`` sets its
    options. A new session has pyhudi's data source
    registered (``spark.read.format("hudi")``), unless ``data_source`` is False: for a process that only writes
    (the ``pyhudi write`` command), as registering the first Python data source of a JVM makes Spark look for
    installed ones in a Python process of its own (about 1.1 s). Asked for again with ``data_source`` True, the
    session pyhudi made without it gets it then.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        if data_source and active in _WITHOUT_SOURCE:
            _register_source(active)
        return active
    java = check_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = master or os.environ.get(ENV_MASTER) or DEFAULT_MASTER
    if master.startswith("local"):
        os.environ["SPARK_LOCAL_IP"] = LOOPBACK
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master)
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "8")
        # Arrow batches sent to Python workers are cut at maxRecordsPerBatch (10,000) rows; Spark's byte limit
        # on them (64 MiB by default) is checked by sizing every Arrow vector after every row, 14% of the driver
        # JVM's CPU in a bulk load (JFR); Int.MaxValue turns the check off (a 5M-row bulk_insert 26.1-27.4 s
        # against 28.4-29.9 s). The write tasks hold a whole file group's records in any case
        .config(ARROW_BATCH_BYTES_CONF, str(ARROW_MAX_BYTES_PER_BATCH))
        # writes cache their prepared and tagged records for a moment: uncompressed caching is about a quarter
        # faster to build (0.47 s against 0.62 s for 100k records of ~150 bytes, 2 cores)
        .config("spark.sql.inMemoryColumnarStorage.compressed", "false")
        # a write runs a few dozen query shapes (prepare, tag, write, commit, metadata table); with Spark's
        # default of 100 generated classes, alternating writes evict each other's, and every evicted class is
        # compiled again and then JIT-compiled from scratch: in a 2M-row table's 100k-row upserts alternating
        # RECORD_INDEX and GLOBAL_SIMPLE, the JIT took 0.4-0.7 CPU-s of each ~1 s tag (0.1 s with 1000)
        .config("spark.sql.codegen.cache.maxEntries", "1000")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
    )
    if master.startswith("local"):
        builder = (
            # Python workers fork from a daemon that has loaded pyhudi's compiled kernels (pyhudi/spark/daemon.py);
            # local masters only: a cluster's executors may get pyhudi only as shipped files, which PySpark adds
            # to the workers' path after the fork, so the daemon itself could not be imported there
            builder.config("spark.python.daemon.module", "pyhudi.spark.daemon")
            .config("spark.driver.host", LOOPBACK)
            .config("spark.driver.bindAddress", LOOPBACK)
            .config("spark.executorEnv.SPARK_LOCAL_IP", LOOPBACK)
        )
    java_options = ""
    if master.startswith("local-cluster"):
        builder = builder.config("spark.executor.memory", "1g")
        # a local cluster's executors are JVMs of this machine that run the tasks, as a local driver does: they
        # start with its options (the parallel collector; the client compiler only for a short job) and map the
        # same class-data archive (their class path is the driver's). Two executors and a driver running four
        # small merge-on-read upserts, 2 cores: 56-61 CPU-seconds against 101 with Java's defaults
        java_options = local_driver_java_options(short_job)
    elif master.startswith("local"):
        # local mode runs the tasks in the driver JVM, with Spark's own 1g heap unless PYHUDI_SPARK_DRIVER_MEMORY
        # says otherwise: 20M-row bulk loads, upserts and validations fit in it (write tasks are sized to the
        # records, docs/performance.md#memory), and a larger heap mostly fills with garbage the parallel
        # collector keeps (a 4g heap took a 20M-row bulk load's driver JVM to 4.2 GB)
        builder = builder.config("spark.driver.memory", os.environ.get(ENV_DRIVER_MEMORY, DEFAULT_DRIVER_MEMORY))
        # Spark's parquet reader reads a row group's column chunks with Hadoop's vectored reads into direct
        # buffers, a whole row group per task (the two tasks of a 20M-row bulk load whose input has 1M-row row
        # groups of ~150-byte rows: 17 buffers, 249 MB of the JVM's native memory from its input on); read
        # without them, the same 20M rows scan in the same time (8.0-9.1 s against 8.3-8.9 s) and the JVM
        # peaks 0.2 GB lower
        builder = builder.config(PARQUET_VECTORED_IO_CONF, "false")
        java_options = local_driver_java_options(short_job)
    if master.startswith("local"):
        # the driver JVM this process starts maps its classes from the class-data archive built at install time
        from pyhudi.spark.cds import driver_java_options

        java_options = f"{java_options} {driver_java_options(java, java_version(java))}".strip()
    submit_args = os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    if data_source and not any(a in submit_args for a in ("--jars", "spark.jars", "spark.sql.extensions")):
        # the rule that hands Spark's parquet reader the scans it reads exactly (pyhudi/spark/native.py); loaded
        # by Spark's class loader, not the JVM's class path, which the class-data archive is built for. Jars or
        # extensions given in PYSPARK_SUBMIT_ARGS are the user's: pyhudi does not replace them
        from pyhudi.spark.native import EXTENSIONS_CLASS, jar_path

        jar = jar_path()
        if jar:
            # the rule runs before Spark pushes filters into scans: a scan it hands over never asks the Python
            # source to push them (a Python worker's round trip, 0.1 s of a pruned query)
            builder = builder.config("spark.jars", jar).config("spark.sql.extensions", EXTENSIONS_CLASS)
    if java_options:  # PYSPARK_SUBMIT_ARGS' --driver-java-options, if given, replaces them
        builder = builder.config("spark.driver.extraJavaOptions", java_options)
        if master.startswith("local-cluster"):
            builder = builder.config("spark.executor.extraJavaOptions", java_options)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if master.startswith("local"):
        start_python_daemon(spark)
    if data_source:
        _register_source(spark)
    else:
        _WITHOUT_SOURCE.add(spark)
    if os.environ.get(ENV_QUIET_TASK_FAILURES) == "1":
        quiet_task_failure_logs(spark)
    return spark


def start_python_daemon(spark: SparkSession) -> threading.Thread:
    """Start the session's Python daemon (:mod:`pyhudi.spark.daemon`, which loads pyarrow and pyhudi's kernels:
    about 1.2 s on 2 cores) with a one-row Arrow job in a background thread, while the caller goes on planning
    its first job on the driver (reading the input's schema, the timeline, the metadata table), instead of when
    that job's first Python task asks for a worker. A failure here only means the first job starts it."""

    def run() -> None:
        with contextlib.suppress(Exception):  # an optimisation only: the session may be stopping already
            spark.range(1, numPartitions=1).mapInArrow(_identity_batches, "id long").collect()

    t = threading.Thread(target=run, name="pyhudi-python-daemon", daemon=True)
    t.start()
    return t


def _identity_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield from batches


def _register_source(spark: SparkSession) -> None:
    from pyhudi.spark import register

    register(spark)  # spark.read.format("hudi") / "pyhudi"
    _WITHOUT_SOURCE.discard(spark)


def quiet_task_failure_logs(spark: SparkSession) -> None:
    """Turn off Spark's own logging of failed tasks (:data:`TASK_FAILURE_LOGGERS`), for a caller that reports
    the error itself, as the ``pyhudi`` command does through :func:`pyhudi.spark.errors.task_errors`."""
    _logs_off(spark, TASK_FAILURE_LOGGERS)


def quiet_jvm(spark: SparkSession | None) -> None:
    """Turn off all logging of ``spark``'s JVM (None: nothing), for a process about to report an error and exit:
    a job still running then (the Python daemon's start, the other tasks of a failed stage) would log its
    cancellation, stack traces included, after the message."""
    if spark is not None:
        _logs_off(spark, None)


def _logs_off(spark: SparkSession, loggers: tuple[str, ...] | None) -> None:
    """Turn off the log4j ``loggers`` of ``spark``'s JVM (None: the root logger, so all of them)."""
    try:
        jvm = spark.sparkContext._jvm
        if jvm is None:
            return
        off = jvm.org.apache.logging.log4j.Level.OFF
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        if loggers is None:
            configurator.setRootLevel(off)
        for name in loggers or ():
            configurator.setLevel(name, off)
    except Exception:  # a JVM logging through something else than log4j 2: the logs stay as they are
        return


def arrow_schema(df: DataFrame, where: str = "the input") -> pa.Schema:
    """The Arrow schema of a Spark DataFrame to write (timestamps in the session time zone, as Arrow batches carry
    them); InvalidInputError for a column of a Spark type a Hudi table of version 9 cannot store, or a name a record
    holds twice (:func:`~pyhudi.table.evolution.check_unique_names`)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from pyhudi.table.evolution import check_unique_names

    _check_storable(df.schema, "", where)
    tz = df.sparkSession.conf.get("spark.sql.session.timeZone") or "UTC"
    schema = to_arrow_schema(df.schema, timezone=tz)
    check_unique_names(schema, where)
    return schema


def _check_storable(t: object, path: str, where: str) -> None:
    """Refuses ``VARIANT`` at any depth: Hudi 1.1's tables have no variant type (Arrow would carry it as a struct of
    two binaries, so it would be stored, and read back, as that struct)."""
    from pyspark.sql import types as T

    if isinstance(t, T.StructType):
        for f in t.fields:
            _check_storable(f.dataType, f"{path}.{f.name}" if path else f.name, where)
    elif isinstance(t, T.ArrayType):
        _check_storable(t.elementType, f"{path}.element", where)
    elif isinstance(t, T.MapType):
        _check_storable(t.keyType, f"{path}.key", where)
        _check_storable(t.valueType, f"{path}.value", where)
    elif isinstance(t, T.VariantType):
        from pyhudi.errors import InvalidInputError

        raise InvalidInputError(
            f"{where}: column {path!r} is of Spark type VARIANT, which Hudi tables of version 9 cannot store: write it as "
            "a JSON string (to_json) instead; nothing was written")

