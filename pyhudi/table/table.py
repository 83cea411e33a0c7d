"""``Table``: the Python API of a pyhudi (Apache Hudi) table."""

from __future__ import annotations

import contextlib
import logging
import posixpath
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from pyhudi import config as C
from pyhudi.errors import ConfigError, InvalidInputError, PyHudiError
from pyhudi.io.storage import Storage
from pyhudi.metadata.indexer import AsyncRecordIndexBuilder, build_record_index
from pyhudi.metadata.partitions import RECORD_INDEX
from pyhudi.metadata.reader import has_metadata_table, table_view
from pyhudi.metadata.record_index import record_index_lookup
from pyhudi.metadata.writer import MetadataWriter
from pyhudi.read import plan as read_plan
from pyhudi.services.archive import ArchiveResult
from pyhudi.services.rollback import RollbackResult
from pyhudi.table.capabilities import check_new_table_type, check_readable, check_writable
from pyhudi.table.evolution import check_schema_names
from pyhudi.table.fsview import FileSystemView
from pyhudi.table.lsm_timeline import FullTimeline, LsmHistory
from pyhudi.table.properties import (
    CURRENT_TABLE_VERSION,
    METAFOLDER,
    TableConfig,
    create_table_config,
    read_table_config,
    table_config_exists,
)
from pyhudi.table.schema import avro_schema_json, table_schema, with_meta
from pyhudi.table.timeline import ActiveTimeline, Instant
from pyhudi.txn.heartbeat import HeartbeatConfig, heartbeat_instants, writer_status
from pyhudi.txn.lock import lock_provider
from pyhudi.txn.transaction import (
    Concurrency,
    WriteTransaction,
    archive_table,
    clean_table,
    compact_table,
    resolve_options,
    rollback_write,
)
from pyhudi.write.producer import WriteResult

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


class Table:
    """An Apache Hudi table at ``base_path`` (table version 9)."""

    def __init__(self, storage: Storage, base_path: str, config: TableConfig) -> None:
        self.base_path = base_path.rstrip("/") or "/"
        # every path the table writes, moves, deletes or reads must lie under its base path (also in Spark tasks)
        self.storage = storage.rooted(self.base_path)
        self.config = config
        # set by for_dataframe when it created the table (whether the table's folder was there before): the first
        # write undoes the creation if it fails with nothing on the timeline
        self._created_for_write: bool | None = None

    # -- opening and creating -----------------------------------------------------------------------
    @staticmethod
    def exists(uri: str) -> bool:
        storage, path = Storage.from_uri(uri)
        return _holds_table(storage, path)

    @staticmethod
    def folder_exists(uri: str, sub: str = "") -> bool:
        """Whether ``uri`` (or its folder ``sub``, e.g. ``.hoodie``) exists, a table or not."""
        storage, path = Storage.from_uri(uri)
        return storage.exists(posixpath.join(path, sub) if sub else path)

    def _drop_new_table(self, opts: Mapping[str, str], *, remove_folder: bool) -> bool:
        """Undo :meth:`create` when nothing was written since: no instant of any state on the timeline, no file
        outside ``.hoodie`` and no other writer at work on the table (a heartbeat that is not dead: its instant
        may not be on the timeline yet). Deletes the table's ``.hoodie`` (and its folder, ``remove_folder``, once
        empty); returns whether it did."""
        hb = HeartbeatConfig.from_options(opts)
        if any(not writer_status(self.storage, self.base_path, i, hb, zone=self.config.timeline_zone).is_dead
               for i in heartbeat_instants(self.storage, self.base_path)):
            return False
        if list(self.timeline()):
            return False
        meta = posixpath.join(self.base_path, METAFOLDER)
        others = [st for st in self.storage.list(self.base_path) if st.path.rstrip("/") != meta]
        if others:
            return False
        self.storage.delete(meta)
        if remove_folder and not self.storage.list(self.base_path):
            # the table's rooted storage refuses its own folder: the empty folder goes through the file system
            self.storage.fs.delete_dir(self.base_path)
        return True

    @classmethod
    def open(cls, uri: str) -> Table:
        storage, path = Storage.from_uri(uri)
        if not cls.exists(uri):
            raise PyHudiError(f"no Hudi table at {uri} (missing {METAFOLDER}/hoodie.properties)")
        storage = storage.rooted(path)
        return cls(storage, path, read_table_config(storage, posixpath.join(path, METAFOLDER)))

    @classmethod
    def create(cls, uri: str, schema: pa.Schema, options: Mapping[str, str]) -> Table:
        """Create an empty table (COPY_ON_WRITE, or MERGE_ON_READ with ``hoodie.datasource.write.table.type`` or
        ``hoodie.table.type``) with the given data schema and write options."""
        given = next((k for k in (C.TABLE_TYPE, *C.TABLE_TYPE.aliases) if options.get(k) is not None), C.TABLE_TYPE)
        table_type = check_new_table_type(uri, str(C.TABLE_TYPE.get(options)), given)
        wc = C.WriteConfig.from_options(options)
        version = str(options.get(C.WRITE_TABLE_VERSION) or "").strip()
        if version and version != str(CURRENT_TABLE_VERSION):
            raise ConfigError(f"option {C.WRITE_TABLE_VERSION}={version!r}: pyhudi creates tables of version "
                              f"{CURRENT_TABLE_VERSION} only")
        check_schema_names(schema, f"create {uri}")
        storage, path = Storage.from_uri(uri)
        _refuse_inside_a_table(storage, path, uri)
        # the folder's name, never the URI's tail (an s3:// URI ends with its options: ?endpoint_override=...)
        name = options.get(C.TABLE_NAME) or posixpath.basename(path.rstrip("/")) or "table"
        storage = storage.rooted(path)
        cfg = TableConfig.create(
            name,
            table_type=table_type,
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
        """The table at ``uri``, created from ``df``'s schema and ``options`` if the path holds none. A table created
        here is removed again if the first :meth:`write` through this object fails before anything reached the
        timeline (bad input, a typo'd key field): the corrected write then creates it anew."""
        if cls.exists(uri):
            return cls.open(uri)
        from pyhudi.spark.session import arrow_schema

        schema = arrow_schema(df, f"create {uri}")
        # not even a .hoodie folder before: a .hoodie that was there is not pyhudi's to remove
        new = not cls.folder_exists(uri, METAFOLDER)
        folder_existed = cls.folder_exists(uri)
        table = cls.create(uri, schema, options)
        if new:
            table._created_for_write = folder_existed
        return table

    # -- metadata -----------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.config.table_name

    def timeline(self) -> ActiveTimeline:
        return ActiveTimeline.load(self.storage, self.base_path, self.config)

    def has_archived_instants(self) -> bool:
        """Whether instants were archived into the LSM timeline (``.hoodie/timeline/history``)."""
        return LsmHistory.for_table(self.storage, self.base_path, self.config).latest_version() > 0

    def full_timeline(self, active: ActiveTimeline | None = None) -> FullTimeline:
        """The archived instants and the active timeline together (reads the LSM timeline)."""
        return FullTimeline.load(self.storage, self.base_path, self.config, active or self.timeline())

    def schema(self) -> pa.Schema:
        """The data schema (without meta columns): the latest commit's writer schema (a schema-on-read table's
        latest InternalSchema), else the create schema."""
        return table_schema(self.storage, self.base_path, self.config, self.timeline())

    def refresh(self) -> Table:
        """Reload the table's properties (after a write or an index build changed them); returns self."""
        self.config = read_table_config(self.storage, posixpath.join(self.base_path, METAFOLDER))
        return self

    @property
    def has_metadata_table(self) -> bool:
        """True when readers list this table through its metadata table's ``files`` partition."""
        return has_metadata_table(self.storage, self.base_path, self.config)

    def view(self, timeline: ActiveTimeline | None = None, *, use_metadata: bool | None = None) -> FileSystemView:
        """Latest file slices: from the metadata table when the table has one, else from a storage listing."""
        return table_view(self.storage, self.base_path, self.config, timeline or self.timeline(),
                          use_metadata=use_metadata)

    def check_writable(self, what: str, *, mor_supported: bool = False) -> None:
        """Refuse (:class:`~pyhudi.errors.UnsupportedTableError`) a write pyhudi cannot make exactly into this
        table -- a table version other than 9, an operation pyhudi does not make on merge-on-read tables (unless
        ``mor_supported``), a table that uses schema-on-read evolution -- before anything is written."""
        check_writable(self.base_path, self.config, what, mor_supported=mor_supported, storage=self.storage)

    def build_record_index(
        self,
        num_file_groups: int | None = None,
        *,
        options: Mapping[str, str] | None = None,
        spark: SparkSession | None = None,
        concurrent: bool = False,
    ) -> int:
        """Initialise the record index (N file groups, estimated from the record count with Hudi's formula unless
        given); returns N. ``concurrent=True`` runs the async indexer protocol (:mod:`pyhudi.metadata.indexer`):
        other writers may keep committing during the build."""
        opts = {k: str(v) for k, v in (options or {}).items()}
        self.check_writable("building the record index")
        try:
            if concurrent:
                lock = lock_provider(self.storage, self.base_path, opts,
                                     needed=Concurrency.from_options(opts).optimistic)
                return AsyncRecordIndexBuilder(self.storage, self.base_path, opts, spark=spark,
                                               lock=lock.held).build(num_file_groups)
            tl = self.timeline()
            writer = MetadataWriter(self.storage, self.base_path, self.config)
            if writer.reconcile({**opts, C.RECORD_INDEX_ENABLE: "false"}, tl) is None:
                raise ConfigError("the record index lives in the metadata table: hoodie.metadata.enable must be true")
            if RECORD_INDEX in writer.data_config.metadata_partitions:
                raise PyHudiError(f"{self.base_path} already has a record index")
            return build_record_index(writer, tl, opts, num_file_groups=num_file_groups, spark=spark)
        finally:
            self.refresh()

    def lookup(self, keys: Sequence[str]) -> pa.Table:
        """Where the record index says each key lives: (key, found, partition, file_id, instant) in the order
        given; absent keys have found=false and nulls."""
        check_readable(self.base_path, self.config)
        arr = pa.array(list(keys), pa.string())

        def look(tl: ActiveTimeline) -> pa.Table:
            lk = record_index_lookup(self.storage, self.base_path, tl, self.config)
            if lk is None:
                raise PyHudiError(
                    f"{self.base_path} has no record index (build one with 'pyhudi index build {self.base_path}')"
                )
            return lk.lookup(arr)

        found = read_plan.planned(self, look)
        idx = pc.index_in(arr, value_set=found.column("key").combine_chunks()) if found.num_rows else pa.nulls(len(arr), pa.int32())
        instants = found.column("instant_ms").combine_chunks() if found.num_rows else pa.array([], pa.int64())
        return pa.table({
            "key": arr,
            "found": pc.is_valid(idx),
            "partition": found.column("partition").combine_chunks().take(idx) if found.num_rows else pa.nulls(len(arr), pa.string()),
            "file_id": found.column("file_id").combine_chunks().take(idx) if found.num_rows else pa.nulls(len(arr), pa.string()),
            "instant_ms": instants.take(idx) if found.num_rows else pa.nulls(len(arr), pa.int64()),
        })

    # -- writing ------------------------------------------------------------------------------------
    def write(
        self,
        df: DataFrame,
        operation: str = "upsert",
        options: Mapping[str, str] | None = None,
        *,
        progress: bool = False,
        batch_id: int | None = None,
    ) -> WriteResult:
        """Write a Spark DataFrame with ``operation`` (insert, upsert, delete, bulk_insert, insert_overwrite,
        insert_overwrite_table), as one transaction (:class:`~pyhudi.txn.transaction.WriteTransaction`).

        ``progress`` shows the stage and the share of its Spark tasks done on a terminal (stderr).
        ``batch_id``: the micro-batch this write is, in a stream (as Hudi's streaming sink: recorded in the commit;
        a batch committed before is skipped, ``WriteResult.skipped`` says so; see
        :func:`pyhudi.spark.streaming.foreach_batch`).
        """
        folder_existed, self._created_for_write = self._created_for_write, None
        opts: dict[str, str] = dict(options or {})
        try:
            opts = resolve_options(self.config, options, self.timeline())
            result = WriteTransaction(self.storage, self.base_path, opts, progress=progress).write(
                df, operation, batch_id=batch_id
            )
        except BaseException:
            dropped = False
            if folder_existed is not None:
                with contextlib.suppress(Exception):  # never in place of the write's own error
                    dropped = self._drop_new_table(opts, remove_folder=not folder_existed)
            if not dropped:
                with contextlib.suppress(Exception):  # never in place of the write's own error
                    self.refresh()
            raise
        try:
            self.refresh()
        except Exception:  # the write committed: its result stands (Table.refresh() reads the properties again)
            log.warning("%s: the write committed; reading the table's properties again failed", self.base_path,
                        exc_info=True)
        return result

    # -- table services -----------------------------------------------------------------------------
    def clean(self, options: Mapping[str, str] | None = None) -> Instant | None:
        """Roll back failed writes, then remove file versions no longer needed (KEEP_LATEST_COMMITS with
        ``hoodie.cleaner.commits.retained``). Returns the clean instant, None when nothing needed deleting."""
        try:
            return clean_table(self.storage, self.base_path, options)
        finally:
            self.refresh()

    def compact(self, options: Mapping[str, str] | None = None, spark: SparkSession | None = None) -> list[Instant]:
        """Merge-on-read tables: run again compactions that died, then compact every latest file slice with log
        files into a new base file (a ``compaction`` completed as ``commit``). Returns the completed compaction
        instants (empty: no slice had log files)."""
        if spark is None:
            from pyhudi.spark.session import get_spark

            spark = get_spark()
        try:
            return compact_table(self.storage, self.base_path, spark, options)
        finally:
            self.refresh()

    def archive(self, options: Mapping[str, str] | None = None) -> ArchiveResult:
        """Move old completed instants of the table and of its metadata table into their LSM timelines, with the
        rules every commit applies (``hoodie.keep.min.commits``, ``hoodie.keep.max.commits``, ...; see
        :mod:`pyhudi.services.archive`). Returns what each table's run archived."""
        try:
            return archive_table(self.storage, self.base_path, options)
        finally:
            self.refresh()

    def rollback(self, instant: str, options: Mapping[str, str] | None = None) -> RollbackResult:
        """Roll back the pending write ``instant``; a write that is still live is refused."""
        try:
            return rollback_write(self.storage, self.base_path, instant, options)
        finally:
            self.refresh()

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
        if keys is not None:
            if as_of is not None or read_optimized:
                raise InvalidInputError("a point read by keys reads the latest snapshot; it cannot take as_of "
                                        "or read_optimized")
            return self._dataframe(spark, read_plan.for_keys(self, keys))
        return self._dataframe(spark, self._snapshot_plan(as_of, read_optimized))

    def _snapshot_plan(self, as_of: str | None, read_optimized: bool) -> read_plan.ScanPlan:
        as_of = self._check_as_of(as_of)

        def plan(tl: ActiveTimeline) -> read_plan.ScanPlan:
            self._check_retained(as_of, tl)
            return read_plan.snapshot(self, as_of=as_of, read_optimized=read_optimized, timeline=tl)

        return read_plan.planned(self, plan)

    def read_incremental(self, start: str, end: str | None = None, spark: SparkSession | None = None) -> DataFrame:
        """Records changed by the commits that completed after ``start`` and up to ``end`` (inclusive), latest
        version of each as of ``end`` (log records included). As in Hudi 1.x (table version 8+), ``start`` and
        ``end`` are completion times. Archived commits count too; a range ending before what cleaning kept is
        refused."""
        return self._dataframe(spark, self._incremental_plan(start, end))

    def incremental_arrow(self, start: str, end: str | None = None) -> pa.Table:
        """:meth:`read_incremental` without Spark (driver-local)."""
        if not self.timeline().completed_commits():
            return pa.table({})
        return self._incremental_plan(start, end).to_arrow()

    def _incremental_plan(self, start: str, end: str | None) -> read_plan.ScanPlan:
        return read_plan.incremental_checked(self, start, end)

    def _files_for_keys(self, keys: Sequence[str]) -> list[str]:
        """Relative paths of the files (base and log) of the latest file slices the record index names for
        ``keys``."""
        return [p for s in read_plan.for_keys(self, keys).slices for p in ((s.base_file,) if s.base_file else ())
                + s.log_files]

    def read_keys(self, keys: Sequence[str]) -> pa.Table:
        """Point read without Spark: the current records of ``keys``, reading only the file groups the record
        index names (base file and log files merged)."""
        if not self.timeline().completed_commits():
            return with_meta(self.schema()).empty_table()
        return read_plan.for_keys(self, keys).to_arrow()

    def record_index_stats(self) -> dict[str, Any]:
        """{file_groups, entries (live mappings), bytes (latest record-index file slices), bytes_per_entry}."""
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

    def _dataframe(self, spark: SparkSession | None, plan: read_plan.ScanPlan) -> DataFrame:
        from pyhudi.read.spark import read_dataframe
        from pyhudi.spark.session import get_spark

        split = C.int_option({}, C.READ_SPLIT_BYTES, 1)
        return read_dataframe(spark or get_spark(), plan, split)

    def _check_as_of(self, as_of: str | None) -> str | None:
        """``as_of`` as an instant time (see :func:`pyhudi.read.plan.as_of_instant`)."""
        return read_plan.as_of_instant(self.base_path, as_of)

    def _check_retained(self, as_of: str | None, tl: ActiveTimeline) -> None:
        """Refuse a read as of a time cleaning may have removed file versions of (see
        :func:`pyhudi.read.plan.check_retained`)."""
        read_plan.check_retained(self, as_of, tl)

    def to_arrow(self, as_of: str | None = None, *, read_optimized: bool = False) -> pa.Table:
        """Snapshot read without Spark (driver-local; for small tables and tools): every file slice merged, or
        base files only with ``read_optimized``."""
        if not self.timeline().completed_commits():
            return pa.table({})
        return self._snapshot_plan(as_of, read_optimized).to_arrow()

    def describe(self) -> dict[str, Any]:
        return {"path": self.base_path, "name": self.name, "type": self.config.table_type,
                "version": self.config.table_version}


def _holds_table(storage: Storage, folder: str) -> bool:
    """Whether ``folder`` holds a Hudi table (its properties file, or the backup a properties update leaves)."""
    return table_config_exists(storage, posixpath.join(folder, METAFOLDER))


def _refuse_inside_a_table(storage: Storage, path: str, uri: str) -> None:
    """ConfigError when a folder above ``path`` holds a Hudi table: the outer table would list the new table's
    partition folders as partitions of its own (Hudi's listing does), and its services would meet its ``.hoodie``."""
    parent = posixpath.dirname(path.rstrip("/"))
    while parent and parent not in ("/", "."):
        try:
            inside = _holds_table(storage, parent)
        except (OSError, PyHudiError):  # a folder the caller may not read (an object store's prefix permissions)
            inside = False
        if inside:
            raise ConfigError(f"cannot create a table at {uri}: it lies inside the Hudi table at {parent}, whose "
                              "partitions it would become; nothing was written")
        up = posixpath.dirname(parent)
        if up == parent:
            break
        parent = up
