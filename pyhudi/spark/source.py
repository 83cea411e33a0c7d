"""``spark.read.format("hudi")``: Hudi tables as a Spark data source (PySpark's Python Data Source API).

:func:`register` registers the source in a session under ``pyhudi`` and, unless a JVM data source called ``hudi``
is on the classpath (Apache Hudi's own bundle wins), under ``hudi``; pyhudi's default session does it when it
starts. Then::

    spark.read.format("hudi").load(path)                                          # latest snapshot
    spark.read.format("hudi").option("as.of.instant", "20261121093000000").load(path)
    spark.read.format("hudi").option("hoodie.datasource.query.type", "read_optimized").load(path)
    (spark.read.format("hudi").option("hoodie.datasource.query.type", "incremental")
        .option("hoodie.datasource.read.begin.instanttime", t0).load(path))
    spark.sql(f"CREATE TABLE trips USING hudi LOCATION '{path}'")

How a query runs (PySpark plans a Python source in Python workers the driver's JVM starts, then reads in tasks):

- ``schema()``: the table's columns, meta columns first (time travel: as of its instant; a user schema,
  ``.schema("a string, b long")``, reads only its columns: PySpark hands a Python source no column pruning of its
  own);
- ``pushFilters()``: the filters become predicates (:mod:`pyhudi.read.filters`) where they may prune: in a scan
  pyhudi's rule gave a source object of its own (:data:`OWN_OPTION`); every filter is handed back, so Spark
  evaluates them all on the rows read and the result never depends on pruning;
- ``partitions()``: the scan plan of the query type (:mod:`pyhudi.read.plan`), pruned by partition, record key
  and column statistics from the metadata table (:mod:`pyhudi.read.pruning`), its file slices packed into tasks
  by size (:func:`pyhudi.read.spark.pack_tasks`); each task carries the read's description and its slices;
- ``read()``: in a task, each slice merged by the file-slice reader through the table's storage, as Arrow
  batches (row groups ruled out by their statistics are skipped where no log record merges).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from pyhudi import config as C
from pyhudi.errors import ConfigError, InvalidInputError, TableChangedError
from pyhudi.read.filters import Pred, from_spark
from pyhudi.read.plan import ScanPlan
from pyhudi.read.pruning import PruneReport, prune
from pyhudi.read.slice_reader import FileSliceReader, ReadSpec, SliceSpec, conform
from pyhudi.table.schema import COMMIT_TIME_COL, IS_DELETED_COL, META_COLUMNS, RECORD_KEY_COL

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    from pyhudi.read.plan import TableFiles
    from pyhudi.table.timeline import ActiveTimeline

NAME = "hudi"
ALIAS = "pyhudi"
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
SNAPSHOT, READ_OPTIMIZED, INCREMENTAL = "snapshot", "read_optimized", "incremental"
_PYTHON_SOURCE_CLASS = "org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2"

#: set by pyhudi's rule on a scan it gave a source object of its own, before the push-down, to the JVM's token
#: (:attr:`HudiDataSource.own_token`): only such a scan's pushed filters prune. PySpark keeps the partitions a
#: Python source planned on the source object every scan of one DataFrame shares, and a scan reads the last ones
#: planned, maybe for another scan's filters; a scan without it (no rule, the rule after the push-down, a
#: DataFrame planned after ``uninstall``) is planned whole, and Spark filters its rows.
OWN_OPTION = "pyhudi.internal.read.own"

# A merge-on-read snapshot split between Spark's parquet reader and this source
# (:func:`pyhudi.spark.native.refusal`): the read options pyhudi's rule gives each half. Both halves plan the table
# as it was when the rule planned it (the instants completed by then) and check they planned the same file slices.
#: which slices this half reads: ``base`` (those without log files) or ``logs`` (the others)
SLICES_OPTION = "pyhudi.internal.read.slices"
BASE_SLICES, LOG_SLICES = "base", "logs"
#: the latest completion time on the timeline the rule planned with
COMPLETED_BY_OPTION = "pyhudi.internal.read.completed.by"
#: the digest of the file slices the rule planned (:func:`slices_digest`)
DIGEST_OPTION = "pyhudi.internal.read.slices.digest"


def _path(options: Mapping[str, str]) -> str:
    path = options.get("path")
    if not path:
        raise InvalidInputError(
            "spark.read.format('hudi'): no table path (use .load(path) or the 'path' option; in SQL, "
            "CREATE TEMPORARY VIEW t USING hudi OPTIONS (path '...'): PySpark passes a catalog table's LOCATION "
            "to a Python data source when the table is created, not when it is read)")
    path = str(path)
    if path.startswith("file:"):  # Spark's form of a local path (a SQL table's LOCATION): file:/x or file:///x
        rest = path[len("file:"):]
        path = "/" + rest.lstrip("/") if rest.startswith("/") else rest
    return path


def query_type(options: Mapping[str, str]) -> str:
    C.check_honoured(options)  # read options that would change the rows, not supported: refused by name
    qt = str(C.QUERY_TYPE.get(options) or SNAPSHOT).strip().lower()
    if qt not in (SNAPSHOT, READ_OPTIMIZED, INCREMENTAL):
        raise ConfigError(f"{C.QUERY_TYPE}: expected snapshot, read_optimized or incremental, got {qt!r}")
    fmt = str(C.INCREMENTAL_FORMAT.get(options) or "latest_state").strip().lower()
    if fmt != "latest_state":
        raise ConfigError(f"{C.INCREMENTAL_FORMAT}={fmt}: pyhudi's incremental queries return the latest state "
                          "of the changed records only (change data capture is not supported)")
    if qt == INCREMENTAL:
        if not C.READ_BEGIN_INSTANT.get(options):
            raise ConfigError(f"an incremental query needs {C.READ_BEGIN_INSTANT}")
        if C.AS_OF_INSTANT.get(options):
            raise ConfigError(f"{C.AS_OF_INSTANT} cannot be combined with an incremental query")
    elif C.READ_BEGIN_INSTANT.get(options) or C.READ_END_INSTANT.get(options):
        raise ConfigError(f"{C.READ_BEGIN_INSTANT} / {C.READ_END_INSTANT} are for incremental queries "
                          f"({C.QUERY_TYPE}=incremental)")
    return qt


def plan_query(options: Mapping[str, str], preds: tuple[Pred, ...] = (),
               columns: tuple[str, ...] | None = None) -> tuple[ScanPlan, PruneReport]:
    """The pruned scan plan of a query on the table at ``options['path']`` with Hudi's read options, reading
    ``columns`` (all when None) plus what merging needs. Runs on the driver (a planning worker)."""
    from pyhudi.read import plan as read_plan

    qt = query_type(options)
    table = read_plan.open_table(_path(options))
    return read_plan.planned(table, lambda tl: _plan_query(table, tl, qt, options, preds, columns))


def _plan_query(table: TableFiles, tl: ActiveTimeline, qt: str, options: Mapping[str, str], preds: tuple[Pred, ...],
                columns: tuple[str, ...] | None) -> tuple[ScanPlan, PruneReport]:
    """:func:`plan_query` on the timeline ``tl``."""
    from pyhudi.read import plan as read_plan

    if qt == INCREMENTAL:
        plan = read_plan.incremental_checked(table, str(C.READ_BEGIN_INSTANT.get(options)),
                                             C.READ_END_INSTANT.get(options), timeline=tl)
        use_ri = False
    else:
        as_of = read_plan.as_of_instant(table.base_path, C.AS_OF_INSTANT.get(options))
        read_plan.check_retained(table, as_of, tl)
        ro = qt == READ_OPTIMIZED
        # one half of a split scan: the table without what completed after the rule planned (nothing to leave
        # out when nothing did)
        bound = options.get(COMPLETED_BY_OPTION) or None
        if bound is not None and bound >= (tl.latest_completion_time() or ""):
            bound = None
        plan = read_plan.snapshot(table, as_of=as_of, read_optimized=ro, timeline=tl, completed_by=bound)
        half = options.get(SLICES_OPTION)
        if half:
            plan = _half(plan, str(half), str(options.get(DIGEST_OPTION) or ""))
        # the record index locates keys in the latest snapshot (a read-optimized read of a merge-on-read table
        # may see a record's older copy elsewhere)
        use_ri = as_of is None and bound is None and (not ro or table.config.is_cow)
    skipping = C.bool_option(options, C.READ_DATA_SKIPPING)
    use_ri = use_ri and skipping and not read_plan.rollback_pending(tl)
    plan, report = prune(table, plan, preds, timeline=tl, use_record_index=use_ri, column_stats=skipping)
    if not skipping:
        plan = ScanPlan(replace(plan.read, predicates=()), plan.slices)
    if columns is not None:
        plan = ScanPlan(replace(plan.read, schema=read_schema(plan.read, columns)), plan.slices)
    return plan, report


def slices_digest(slices: tuple[SliceSpec, ...]) -> str:
    """A digest of the file slices of a plan: their files, in a fixed order."""
    import hashlib

    h = hashlib.sha256()
    for sl in sorted(slices, key=lambda s: (s.partition, s.file_id)):
        h.update(json.dumps([sl.partition, sl.file_id, sl.base_file, list(sl.log_files)]).encode())
    return h.hexdigest()


def _half(plan: ScanPlan, half: str, digest: str) -> ScanPlan:
    """The slices of one half of a split scan (``base``: without log files; ``logs``: with), after checking the
    plan has the slices the rule planned: a slice read by both halves or by neither would duplicate or lose rows."""
    if half not in (BASE_SLICES, LOG_SLICES):
        raise ConfigError(f"{SLICES_OPTION}={half!r}: expected {BASE_SLICES!r} or {LOG_SLICES!r}")
    if slices_digest(plan.slices) != digest:
        raise TableChangedError(
            f"{plan.read.base_path}: the table's file slices changed while the query was planned (a commit "
            "completed before an earlier one, or files were cleaned or archived in between); run the query again")
    keep = tuple(s for s in plan.slices if bool(s.log_files) == (half == LOG_SLICES))
    return ScanPlan(plan.read, keep)


def read_schema(spec: ReadSpec, columns: tuple[str, ...]) -> pa.Schema:
    """``columns`` and what merging and filtering need (meta columns, ordering and delete fields), in table
    order."""
    need = set(columns) | set(META_COLUMNS) | {RECORD_KEY_COL, COMMIT_TIME_COL, IS_DELETED_COL}
    need |= set(spec.merge.ordering_fields)
    if spec.merge.delete_field:
        need.add(spec.merge.delete_field)
    missing = [c for c in columns if c not in spec.schema.names]
    if missing:
        raise InvalidInputError(f"{spec.base_path}: the schema given to the read names column(s) {missing}, which "
                                f"the table does not have (its columns: {spec.schema.names})")
    return pa.schema([f for f in spec.schema if f.name in need])


@dataclass(frozen=True)
class SliceGroup:
    """What one task reads: the read's description and its file slices."""

    spec: ReadSpec
    slices: tuple[SliceSpec, ...]


class HudiPartition(InputPartition):
    def __init__(self, group: SliceGroup) -> None:
        super().__init__(group)


def read_group(group: SliceGroup, target: pa.Schema) -> Iterator[pa.RecordBatch]:
    """A task's rows: each slice merged, as batches of ``target`` (the columns Spark expects, its types)."""
    names = target.names
    for sl in group.slices:
        for b in FileSliceReader(group.spec, sl).batches():
            yield from conform(b.select(names), target, group.spec.base_path).to_batches()


class HudiDataSource(DataSource):
    """The data source (see the module docstring); :func:`register` registers it under its names."""

    #: the session's default parallelism (set by :func:`register`): a query gets at least this many tasks when
    #: it has that many file slices
    parallelism = 2
    #: the value of :data:`OWN_OPTION` pyhudi's rule gives the scans it marks in this session's JVM (set by
    #: :func:`register`; None: no rule, pushed filters never prune)
    own_token: str | None = None

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        from pyspark.sql.pandas.types import from_arrow_schema

        from pyhudi.read.plan import as_of_instant, open_table
        from pyhudi.table.schema import table_schema, with_meta

        qt = query_type(self.options)
        table = open_table(_path(self.options))
        # time travel reads with the schema of its instant (as the plan does), other queries with the latest
        as_of = None if qt == INCREMENTAL else as_of_instant(table.base_path, C.AS_OF_INSTANT.get(self.options))
        return from_arrow_schema(with_meta(table_schema(table.storage, table.base_path, table.config,
                                                        table.timeline(), as_of=as_of)))

    def reader(self, schema: StructType) -> DataSourceReader:
        return HudiReader(dict(self.options), schema, self.parallelism, self.own_token)


class HudiReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType, parallelism: int,
                 own_token: str | None = None) -> None:
        self.options = options
        self.schema = schema
        self.parallelism = parallelism
        self.own_token = own_token
        self.preds: tuple[Pred, ...] = ()

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:
        if self.own_token and self.options.get(OWN_OPTION) == self.own_token:
            pairs = from_spark(filters)
            self.preds = tuple(p for _, p in pairs if p is not None)
        # Spark evaluates every filter on the rows read: pruning only skips data that cannot match
        yield from filters

    def partitions(self) -> list[InputPartition]:
        from pyhudi.read.spark import pack_tasks

        plan, _ = plan_query(self.options, self.preds, tuple(self.schema.fieldNames()))
        if not plan.slices:
            return []
        split = C.int_option(self.options, C.READ_SPLIT_BYTES, 1)
        task_of = pack_tasks([s.size for s in plan.slices], split, self.parallelism)
        groups: list[list[SliceSpec]] = [[] for _ in range(max(task_of) + 1)]
        for t, sl in zip(task_of, plan.slices, strict=True):
            groups[t].append(sl)
        return [HudiPartition(SliceGroup(plan.read, tuple(g))) for g in groups if g]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.pandas.types import to_arrow_schema

        group = partition.value
        if not isinstance(group, SliceGroup):
            return iter(())
        return read_group(group, to_arrow_schema(self.schema, timezone="UTC"))


def _source_class(name: str, parallelism: int, own_token: str | None = None) -> type[HudiDataSource]:
    """A subclass named ``name`` carrying the session's parallelism and the token of the scans the rule marks
    (defined here, it pickles by value)."""

    class Source(HudiDataSource):
        @classmethod
        def name(cls) -> str:
            return name

    Source.parallelism = max(1, parallelism)
    Source.own_token = own_token
    return Source


def jvm_source(spark: SparkSession, name: str) -> str | None:
    """The class of the JVM data source ``name`` (None when there is none, or only a Python one)."""
    try:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        cls = jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            name, spark._jsparkSession.sessionState().conf())
        found = str(cls.getName())
    except Exception:
        return None
    return None if found == _PYTHON_SOURCE_CLASS else found


def source_names(spark: SparkSession) -> list[str]:
    """The names the source takes in ``spark``: ``pyhudi``, and ``hudi`` when no JVM source answers to it."""
    names = [ALIAS]
    if jvm_source(spark, NAME) is None:
        names.insert(0, NAME)
    return names


def register(spark: SparkSession, names: list[str] | None = None, *, own_token: str | None = None) -> list[str]:
    """Register the data source in ``spark`` under ``names`` (:func:`source_names`); turns on PySpark's filter
    pushdown for Python sources. ``own_token``: the value of :data:`OWN_OPTION` on the scans pyhudi's rule gives
    a source object of its own (:func:`pyhudi.spark.native.own_token`). Returns the names registered."""
    try:
        parallelism = int(spark.sparkContext.defaultParallelism)
    except Exception:  # Spark Connect: no SparkContext here
        parallelism = 2
    spark.conf.set(PUSHDOWN_CONF, "true")
    names = names if names is not None else source_names(spark)
    for n in names:
        spark.dataSource.register(_source_class(n, parallelism, own_token))
    return names
