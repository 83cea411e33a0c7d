"""``Table``: the Python API of a pyhudi (Apache Hudi) table."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from pyhudi import config as C
from pyhudi.errors import ConfigError, InvalidInputError, PyHudiError
from pyhudi.io.storage import Storage
from pyhudi.metadata.indexer import pending_indexing
from pyhudi.metadata.reader import (
    FILES,
    RECORD_INDEX,
    MetadataListing,
    MetadataTableReader,
    metadata_base_path,
)
from pyhudi.metadata.writer import (
    INIT_PREFIX,
    RLI_INIT_OFFSET,
    MetadataWriter,
    mdt_enabled,
    mdt_max_delta_commits,
    rli_enabled,
)
from pyhudi.spark.errors import task_errors
from pyhudi.spark.progress import Progress
from pyhudi.table import markers
from pyhudi.table.capabilities import check_new_table_type, check_writable
from pyhudi.table.clean import clean as run_clean
from pyhudi.table.fsview import FileSystemView
from pyhudi.table.properties import (
    METADATA_PARTITIONS,
    METADATA_PARTITIONS_INFLIGHT,
    METAFOLDER,
    TableConfig,
    create_table_config,
    read_table_config,
    update_table_config,
)
from pyhudi.table.rollback import rollback_failed_writes
from pyhudi.table.schema import avro_schema_json, avro_to_arrow, check_compatible, with_meta
from pyhudi.table.timeline import ActiveTimeline, Instant, InstantTimeGenerator
from pyhudi.write.context import WriteJob
from pyhudi.write.producer import PRODUCERS, WriteResult

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class Table:
    """An Apache Hudi table at ``base_path`` (table version 9)."""

    def __init__(self, storage: Storage, base_path: str, config: TableConfig) -> None:
        self.storage = storage
        self.base_path = base_path.rstrip("/")
        self.config = config

    # -- opening and creating -----------------------------------------------------------------------
    @staticmethod
    def exists(uri: str) -> bool:
        storage, path = Storage.from_uri(uri)
        meta = posixpath.join(path, METAFOLDER)
        return storage.exists(posixpath.join(meta, "hoodie.properties")) or storage.exists(
            posixpath.join(meta, "hoodie.properties.backup")
        )

    @classmethod
    def open(cls, uri: str) -> Table:
        storage, path = Storage.from_uri(uri)
        if not cls.exists(uri):
            raise PyHudiError(f"no Hudi table at {uri} (missing {METAFOLDER}/hoodie.properties)")
        return cls(storage, path, read_table_config(storage, posixpath.join(path, METAFOLDER)))

    @classmethod
    def create(cls, uri: str, schema: pa.Schema, options: Mapping[str, str]) -> Table:
        """Create an empty COPY_ON_WRITE table with the given data schema and write options."""
        given = next((k for k in (C.TABLE_TYPE, *C.TABLE_TYPE.aliases) if options.get(k) is not None), C.TABLE_TYPE)
        check_new_table_type(uri, str(C.TABLE_TYPE.get(options)), given)
        wc = C.WriteConfig.from_options(options)
        name = options.get(C.TABLE_NAME) or posixpath.basename(uri.rstrip("/")) or "table"
        storage, path = Storage.from_uri(uri)
        cfg = TableConfig.create(
            name,
            table_type="COPY_ON_WRITE",
            record_key_fields=list(wc.record_key_fields),
            partition_fields=list(wc.partition_fields),
            ordering_fields=list(wc.ordering_fields),
            key_generator_type=wc.keygen_type,
            extra={
                "hoodie.table.create.schema": avro_schema_json(schema, name),
                "hoodie.datasource.write.hive_style_partitioning": str(wc.hive_style).lower(),
                "hoodie.datasource.write.partitionpath.urlencode": str(wc.url_encode).lower(),
                "hoodie.record.merge.mode": wc.merge_mode,
                "hoodie.table.base.file.format": "PARQUET",
            },
        )
        create_table_config(storage, posixpath.join(path, METAFOLDER), cfg)
        storage.makedirs(ActiveTimeline.timeline_dir_for(path, cfg))
        return cls(storage, path, cfg)

    @classmethod
    def for_dataframe(cls, uri: str, df: DataFrame, options: Mapping[str, str]) -> Table:
        """The table at ``uri``, created from ``df``'s schema and ``options`` if the path holds none."""
        if cls.exists(uri):
            return cls.open(uri)
        from pyhudi.spark.session import arrow_schema

        return cls.create(uri, arrow_schema(df), options)

    # -- metadata -----------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.config.table_name

    def timeline(self) -> ActiveTimeline:
        return ActiveTimeline.load(self.storage, self.base_path, self.config)

    def schema(self) -> pa.Schema:
        """The data schema (without meta columns): the latest commit's writer schema, else the create schema."""
        tl = self.timeline()
        for inst in reversed(list(tl.completed_commits())):
            md = tl.read_commit_metadata(inst)
            s = (md.get("extraMetadata") or {}).get("schema")
            if s:
                return avro_to_arrow(s)
        if self.config.create_schema:
            return avro_to_arrow(self.config.create_schema)
        raise PyHudiError(f"{self.base_path}: table has no schema yet")

    @property
    def has_metadata_table(self) -> bool:
        """True when readers list this table through its metadata table's ``files`` partition."""
        return FILES in self.config.metadata_partitions and self.storage.exists(
            posixpath.join(metadata_base_path(self.base_path), METAFOLDER, "hoodie.properties")
        )

    def view(self, timeline: ActiveTimeline | None = None, *, use_metadata: bool | None = None) -> FileSystemView:
        """Latest file slices: from the metadata table when the table has one, else from a storage listing."""
        tl = timeline or self.timeline()
        if use_metadata is None:
            use_metadata = self.has_metadata_table
        if use_metadata:
            listing = MetadataListing(
                MetadataTableReader(self.storage, self.base_path, data_timeline=tl, data_config=self.config)
            )
            return FileSystemView.load(self.storage, self.base_path, timeline=tl, config=self.config, listing=listing)
        return FileSystemView.from_listing(self.storage, self.base_path, tl)

    def check_writable(self, what: str) -> None:
        """Refuse (:class:`~pyhudi.errors.UnsupportedTableError`) a write pyhudi cannot make exactly into this
        table -- a merge-on-read table, a table version other than 9 -- before anything is written."""
        check_writable(self.base_path, self.config, what)

    def _prepare_metadata(self, options: Mapping[str, str], timeline: ActiveTimeline) -> MetadataWriter | None:
        """Bring the metadata table in line with ``hoodie.metadata.enable`` before a write: create it (files
        partition bootstrapped from a listing, once), drop partitions pyhudi does not maintain (a stale index
        would mislead readers), or remove it when disabled."""
        meta = posixpath.join(self.base_path, METAFOLDER)
        writer = MetadataWriter(self.storage, self.base_path, self.config)
        if not mdt_enabled(options):
            if self.config.metadata_partitions or writer.exists:
                self.config = update_table_config(
                    self.storage, meta, deletes=[METADATA_PARTITIONS, METADATA_PARTITIONS_INFLIGHT]
                )
                writer.delete()
            return None
        keep_rli = rli_enabled(options) or RECORD_INDEX in self.config.metadata_partitions or (
            RECORD_INDEX in self.config.metadata_partitions_inflight and pending_indexing(timeline) is not None
        )  # an index being built by the async indexer stays
        maintained = {FILES, RECORD_INDEX} if keep_rli else {FILES}
        stale = [p for p in self.config.metadata_partitions if p not in maintained]
        stale += [p for p in self.config.metadata_partitions_inflight if p not in maintained]
        if stale:
            keep = [p for p in self.config.metadata_partitions if p in maintained]
            self.config = update_table_config(
                self.storage, meta, {METADATA_PARTITIONS: ",".join(keep), METADATA_PARTITIONS_INFLIGHT: ""}
            )
            for p in stale:
                writer.drop_partition(p)
        writer.data_config = self.config
        if not self.has_metadata_table:
            writer.create(timeline)
            self.config = read_table_config(self.storage, meta)
            writer.data_config = self.config
        building = RECORD_INDEX in self.config.metadata_partitions_inflight  # by the async indexer
        if rli_enabled(options) and RECORD_INDEX not in self.config.metadata_partitions and not building:
            self.build_record_index(timeline=timeline, options=options, writer=writer)
        return writer

    def build_record_index(
        self,
        num_file_groups: int | None = None,
        *,
        timeline: ActiveTimeline | None = None,
        options: Mapping[str, str] | None = None,
        writer: MetadataWriter | None = None,
        spark: SparkSession | None = None,
        concurrent: bool = False,
    ) -> int:
        """Initialise the record index from the latest base files listed by the files partition (no storage
        listing): keys read in parallel, N file groups (estimated from the record count with Hudi's formula
        unless given), each written as one sorted base HFile by one Spark task. Returns N.

        ``concurrent=True`` runs the async indexer protocol (:mod:`pyhudi.metadata.indexer`): other writers may
        keep committing during the build; their changes are caught up before the partition becomes available.
        """
        from pyhudi.metadata.record_index import build_base_files, estimate_file_groups
        from pyhudi.spark.session import get_spark

        self.check_writable("building the record index")
        if concurrent:
            from pyhudi.metadata.indexer import AsyncRecordIndexBuilder

            return AsyncRecordIndexBuilder(self, options, spark=spark).build(num_file_groups)
        tl = timeline or self.timeline()
        if writer is None:
            writer = self._prepare_metadata({**(options or {}), C.RECORD_INDEX_ENABLE: "false"}, tl)
            if writer is None:
                raise ConfigError("the record index lives in the metadata table: hoodie.metadata.enable must be true")
        from pyhudi.read import plan as read_plan

        scan = read_plan.snapshot(self, timeline=tl) if tl.completed_commits() else None
        rows_by_file = self._record_counts(tl)
        latest = [s.base_file for s in scan.slices if s.base_file is not None] if scan is not None else []
        n = num_file_groups or estimate_file_groups(
            sum(rows_by_file.get(posixpath.basename(f), 0) for f in latest), options)
        instant = f"{INIT_PREFIX}{RLI_INIT_OFFSET:03d}"
        spark_ = spark or get_spark()
        par = max(2, spark_.sparkContext.defaultParallelism)

        def write_files() -> dict[str, list[dict[str, Any]]]:
            with task_errors():
                return {RECORD_INDEX: build_base_files(spark_, scan, writer.mdt_path, instant, n, par)}

        writer.create_record_index(instant, write_files, n)
        self.config = read_table_config(self.storage, posixpath.join(self.base_path, METAFOLDER))
        return n

    def _record_index_updates(self, producer: Any, instant: str) -> Any:
        """The metadata deltacommit's record-index part: new mappings and delete markers from the WriteStatus
        key lists, written by Spark tasks (one log file per touched file group)."""
        if getattr(producer, "status_df", None) is None:
            return None
        from pyhudi.index.record import record_index_lookup
        from pyhudi.metadata.record_index import write_updates

        def run() -> dict[str, list[dict[str, Any]]]:
            # decided now, at commit time: an async indexer may have started building the partition meanwhile
            cfg = read_table_config(self.storage, posixpath.join(self.base_path, METAFOLDER))
            n: int | None = None
            if RECORD_INDEX in cfg.metadata_partitions:
                lk = record_index_lookup(self.storage, self.base_path, producer.job.timeline, cfg)
                n = lk.num_file_groups if lk is not None else None
            elif RECORD_INDEX in cfg.metadata_partitions_inflight:
                plan = pending_indexing(producer.job.timeline.reload())
                n = plan.file_groups if plan is not None else None
            if n is None:
                return {}
            with task_errors():
                return {RECORD_INDEX: write_updates(
                    producer.job.spark, producer.status_df, self.storage, metadata_base_path(self.base_path),
                    instant, n, producer.job.parallelism,
                )}

        return run

    def _record_counts(self, tl: ActiveTimeline) -> dict[str, int]:
        """Records per base file name, from the write stats of the completed commits."""
        out: dict[str, int] = {}
        for inst in tl.completed_commits():
            for stats in (tl.read_commit_metadata(inst).get("partitionToWriteStats") or {}).values():
                for st in stats:
                    if st.get("path"):
                        out[posixpath.basename(st["path"])] = int(st.get("numWrites") or 0)
        return out

    def lookup(self, keys: Sequence[str]) -> pa.Table:
        """Where the record index says each key lives: (key, found, partition, file_id, instant) in the order
        given; absent keys have found=false and nulls."""
        from pyhudi.index.record import record_index_lookup

        tl = self.timeline()
        lk = record_index_lookup(self.storage, self.base_path, tl, self.config)
        if lk is None:
            raise PyHudiError(
                f"{self.base_path} has no record index (build one with 'pyhudi index build {self.base_path}')"
            )
        arr = pa.array(list(keys), pa.string())
        found = lk.lookup(arr)
        idx = pc.index_in(arr, value_set=found.column("key").combine_chunks()) if found.num_rows else pa.nulls(len(arr), pa.int32())
        instants = found.column("instant_ms").combine_chunks() if found.num_rows else pa.array([], pa.int64())
        return pa.table({
            "key": arr,
            "found": pc.is_valid(idx),
            "partition": found.column("partition").combine_chunks().take(idx) if found.num_rows else pa.nulls(len(arr), pa.string()),
            "file_id": found.column("file_id").combine_chunks().take(idx) if found.num_rows else pa.nulls(len(arr), pa.string()),
            "instant_ms": instants.take(idx) if found.num_rows else pa.nulls(len(arr), pa.int64()),
        })

    def _write_options(self, options: Mapping[str, str] | None) -> dict[str, str]:
        """Table properties first (they win for table-defining keys), then the caller's options."""
        o = {k: str(v) for k, v in (options or {}).items()}
        cfg = self.config
        fixed = {
            C.RECORDKEY_FIELD: ",".join(cfg.record_key_fields),
            C.PARTITIONPATH_FIELD: ",".join(cfg.partition_fields),
            C.HIVE_STYLE_PARTITIONING: str(cfg.hive_style_partitioning).lower(),
            C.URL_ENCODE_PARTITIONING: str(cfg.url_encode_partitioning).lower(),
        }
        if cfg.ordering_fields:
            fixed[C.ORDERING_FIELDS] = ",".join(cfg.ordering_fields)
        if cfg.key_generator_type:
            fixed[C.KEYGENERATOR_TYPE] = cfg.key_generator_type
        if cfg.record_merge_mode:
            fixed[C.RECORD_MERGE_MODE] = cfg.record_merge_mode
        for k, v in fixed.items():
            given = o.get(k)
            if given is not None and given.strip() and k in (C.RECORDKEY_FIELD, C.PARTITIONPATH_FIELD) and (
                [x.strip() for x in given.split(",")] != [x.strip() for x in v.split(",") if x.strip()]
            ):
                raise ConfigError(f"option {k}={given!r} does not match the table's {v!r}")
            o[k] = v
        if not (o.get(C.INDEX_TYPE) or "").strip():
            o[C.INDEX_TYPE] = self.default_index_type(o)
        return o

    def default_index_type(self, options: Mapping[str, str]) -> str:
        """The index used when ``hoodie.index.type`` is not given: RECORD_INDEX for a table that has (or is
        building) a record index, and for a new table with the metadata table on (unless
        ``hoodie.metadata.record.index.enable=false``); Hudi's default, SIMPLE, for other existing tables."""
        cfg = self.config
        if RECORD_INDEX in cfg.metadata_partitions or RECORD_INDEX in cfg.metadata_partitions_inflight:
            return "RECORD_INDEX"
        rli_off = str(options.get(C.RECORD_INDEX_ENABLE, "")).strip().lower() == "false"
        if not self.timeline().completed_commits() and mdt_enabled(options) and not rli_off:
            return "RECORD_INDEX"
        return str(C.DEFAULTS[C.INDEX_TYPE])

    # -- writing ------------------------------------------------------------------------------------
    def write(
        self,
        df: DataFrame,
        operation: str = "upsert",
        options: Mapping[str, str] | None = None,
        *,
        progress: bool = False,
    ) -> WriteResult:
        """Write a Spark DataFrame with ``operation`` (insert, upsert, delete, bulk_insert, insert_overwrite,
        insert_overwrite_table).

        ``progress`` shows the stage and the share of its Spark tasks done on a terminal (stderr).
        """
        import time

        t0 = time.perf_counter()
        self.check_writable(f"a write ({operation})")
        given_type = C.TABLE_TYPE.get(options or {})
        if given_type is not None and given_type.strip().upper() != self.config.table_type:
            raise ConfigError(
                f"option {C.TABLE_TYPE}={given_type!r} does not match {self.base_path}, a {self.config.table_type} "
                "table (a table's type cannot change)"
            )
        opts = self._write_options(options)
        given_op = opts.get(C.OPERATION)
        if given_op is not None and given_op.strip().lower() not in C.OPERATIONS:
            raise ConfigError(
                f"option {C.OPERATION} has unknown value {given_op!r}; expected one of {', '.join(C.OPERATIONS)}"
            )
        opts[C.OPERATION] = operation
        wc = C.WriteConfig.from_options(opts)
        from pyhudi.spark.session import arrow_schema

        incoming = arrow_schema(df)
        timeline = self.timeline()
        has_commits = bool(timeline.completed_commits())
        if wc.operation == "delete":
            data_schema = self.schema() if has_commits else incoming
        else:
            data_schema = self.schema() if has_commits else avro_to_arrow(self.config.create_schema) \
                if self.config.create_schema else incoming
            check_compatible(data_schema, incoming, f"write to {self.base_path}")
        mdt_enabled(opts)  # reject a bad hoodie.metadata.enable before touching anything
        gen = InstantTimeGenerator(lock_key=self.base_path)
        MetadataWriter(self.storage, self.base_path, self.config).recover(timeline)  # before the data rollback
        rollback_failed_writes(self.storage, self.base_path, timeline, gen)
        timeline = timeline.reload()
        writer: MetadataWriter | None = None
        instant = gen.next(floor=timeline.latest_time())
        spark = df.sparkSession
        job = WriteJob(
            spark=spark,
            storage=self.storage,
            base_path=self.base_path,
            table_name=self.name,
            config=wc,
            instant=instant,
            timeline=timeline,
            view=self.view(timeline),
            data_schema=data_schema,
        )
        producer = PRODUCERS[wc.operation](job)
        producer.validate_columns(df.columns)
        pending: list[Instant] = []

        def start_instant() -> None:
            # The instant appears on the timeline only now, with the input validated (columns, null keys) and
            # the write planned, so bad input leaves no trace. Markers and data files come after this.
            nonlocal writer
            # metadata table set-up (creation, record-index build) also waits for validated input
            writer = self._prepare_metadata(opts, timeline)
            requested = timeline.create_requested(producer.action, instant, producer.requested_metadata())
            pending.append(timeline.transition_to_inflight(requested, producer.inflight_metadata()))

        job.progress = Progress(spark, enabled=progress)
        with job.progress:
            try:
                result = producer.run(df, before_write=start_instant)
                with job.timed("commit"):
                    metadata = producer.commit_metadata(result.stats)
                    if writer is not None:
                        writer.apply_commit(instant, metadata, extra=self._record_index_updates(producer, instant))
                    producer.fault("before_data_commit")
                    timeline.complete(pending[0], metadata, gen.next(floor=instant))
                    markers.delete_markers(self.storage, self.base_path, instant)
            finally:
                producer.unpersist()
            if wc.auto_clean:
                with job.timed("clean"):
                    tl = self.timeline()
                    run_clean(
                        self.storage,
                        self.base_path,
                        tl,
                        wc.cleaner_commits_retained,
                        gen.next(floor=tl.latest_time()),
                        on_delete=writer.apply_clean if writer is not None else None,
                    )
            if writer is not None:
                with job.timed("metadata_compaction"):
                    tl = self.timeline()
                    writer.maybe_compact(tl, mdt_max_delta_commits(opts), gen.next(floor=tl.latest_time()))
        job.timings["total"] = time.perf_counter() - t0
        result.timings = job.timings
        return result

    # -- reading (pyhudi.read: scan planning, the file-slice reader, Spark) -----------------------------------
    def read(
        self,
        spark: SparkSession | None = None,
        as_of: str | None = None,
        keys: Sequence[str] | None = None,
        *,
        read_optimized: bool = False,
    ) -> DataFrame:
        """Snapshot of the table (or as of a point in time) as a Spark DataFrame: every file slice merged (base
        file and log files), one Spark task per slice or group of small slices. With ``keys``: a point read of
        the current records of those keys, reading only the file groups the record index names.
        ``read_optimized``: the latest base files only (Hudi's read-optimized query; log files are not read)."""
        from pyhudi.read import plan as read_plan

        if keys is not None:
            if as_of is not None or read_optimized:
                raise InvalidInputError("a point read by keys reads the latest snapshot; it cannot take as_of "
                                        "or read_optimized")
            return self._dataframe(spark, read_plan.for_keys(self, keys))
        return self._dataframe(
            spark, read_plan.snapshot(self, as_of=self._check_as_of(as_of), read_optimized=read_optimized)
        )

    def read_incremental(self, start: str, end: str | None = None, spark: SparkSession | None = None) -> DataFrame:
        """Records changed by the commits that completed after ``start`` and up to ``end`` (inclusive), latest
        version of each as of ``end`` (log records included). As in Hudi 1.x (table version 8+), ``start`` and
        ``end`` are completion times."""
        from pyhudi.read import plan as read_plan

        return self._dataframe(spark, read_plan.incremental(self, start, end))

    def incremental_arrow(self, start: str, end: str | None = None) -> pa.Table:
        """:meth:`read_incremental` without Spark (driver-local)."""
        from pyhudi.read import plan as read_plan

        if not self.timeline().completed_commits():
            return pa.table({})
        return read_plan.incremental(self, start, end).to_arrow()

    def _files_for_keys(self, keys: Sequence[str]) -> list[str]:
        """Relative paths of the files (base and log) of the latest file slices the record index names for
        ``keys``."""
        from pyhudi.read import plan as read_plan

        return [p for s in read_plan.for_keys(self, keys).slices for p in ((s.base_file,) if s.base_file else ())
                + s.log_files]

    def read_keys(self, keys: Sequence[str]) -> pa.Table:
        """Point read without Spark: the current records of ``keys``, reading only the file groups the record
        index names (base file and log files merged)."""
        from pyhudi.read import plan as read_plan

        if not self.timeline().completed_commits():
            return with_meta(self.schema()).empty_table()
        return read_plan.for_keys(self, keys).to_arrow()

    def record_index_stats(self) -> dict[str, Any]:
        """{file_groups, entries (live mappings), bytes (latest record-index file slices), bytes_per_entry}."""
        from pyhudi.index.record import record_index_lookup

        lk = record_index_lookup(self.storage, self.base_path, self.timeline(), self.config)
        if lk is None:
            raise PyHudiError(f"{self.base_path} has no record index")
        entries = sum(len(lk.live_keys(i)) for i in range(lk.num_file_groups))
        nbytes = lk.file_bytes
        return {
            "file_groups": lk.num_file_groups,
            "entries": entries,
            "bytes": nbytes,
            "bytes_per_entry": round(nbytes / entries, 2) if entries else None,
        }

    def _dataframe(self, spark: SparkSession | None, plan: Any) -> DataFrame:
        from pyhudi.read.spark import read_dataframe
        from pyhudi.spark.session import get_spark

        split = C.int_option({}, C.READ_SPLIT_BYTES, 1)
        return read_dataframe(spark or get_spark(), plan, split)

    def _check_as_of(self, as_of: str | None) -> str | None:
        """``as_of`` as an instant time: an instant (``yyyyMMddHHmmss[SSS]``) or ``yyyy-MM-dd[ HH:mm:ss[.SSS]]``
        (as Hudi's ``as.of.instant``); the read sees the commits at or before it."""
        if as_of is None:
            return None
        import re

        raw = as_of.strip()
        m = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?)?", raw)
        if m:
            y, mo, d, h, mi, sec, ms = m.groups()
            raw = f"{y}{mo}{d}{h or '00'}{mi or '00'}{sec or '00'}{(ms or '0').ljust(3, '0') if h else '000'}"
        if not re.fullmatch(r"\d{14}(\d{3})?", raw):
            raise InvalidInputError(
                f"{self.base_path}: cannot read as of {as_of!r}: expected an instant (yyyyMMddHHmmssSSS) or a "
                "time yyyy-MM-dd[ HH:mm:ss[.SSS]]"
            )
        return raw if len(raw) == 17 else raw + "999"

    def to_arrow(self, as_of: str | None = None, *, read_optimized: bool = False) -> pa.Table:
        """Snapshot read without Spark (driver-local; for small tables and tools): every file slice merged, or
        base files only with ``read_optimized``."""
        from pyhudi.read import plan as read_plan

        tl = self.timeline()
        if not tl.completed_commits():
            return pa.table({})
        as_of = self._check_as_of(as_of)
        return read_plan.snapshot(self, as_of=as_of, read_optimized=read_optimized, timeline=tl).to_arrow()

    def describe(self) -> dict[str, Any]:
        return {"path": self.base_path, "name": self.name, "type": self.config.table_type,
                "version": self.config.table_version}
