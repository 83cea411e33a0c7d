"""Every option pyhudi reads, with Hudi's own names (``hoodie.*``), its default and what it does.

Options arrive as strings (as in Hudi's Spark datasource). Each is an :class:`Option`: a ``str`` (its key, so it
indexes option maps directly) carrying its default and documentation; defining one registers it in
:data:`OPTIONS`, from which the configuration reference (``docs/configuration.md``) is generated.
:class:`WriteConfig` parses a write's options once and rejects unknown values with an error naming the option.

Options Hudi defines that pyhudi knows but does not (yet) honour are listed in :data:`NOT_HONOURED`: passing one
with a value other than the one pyhudi implements is an error naming it (:func:`check_honoured`), never
silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyhudi.errors import ConfigError

#: every option, by key, in definition order
OPTIONS: dict[str, Option] = {}


class Option(str):
    """An option key with its default (a string, or None for "no default") and its documentation.

    ``section`` groups it in the reference; ``aliases`` are older keys Hudi still accepts for it. An Option
    pickles as its plain key (Spark closures carry option maps, not the registry).
    """

    default: str | None
    doc: str
    section: str
    aliases: tuple[str, ...]

    def __new__(
        cls, key: str, default: str | None, doc: str, *, section: str, aliases: tuple[str, ...] = ()
    ) -> Option:
        if key in OPTIONS:
            raise ValueError(f"option {key} is defined twice")
        o = super().__new__(cls, key)
        o.default, o.doc, o.section, o.aliases = default, " ".join(doc.split()), section, aliases
        OPTIONS[key] = o
        return o

    @property
    def key(self) -> str:
        return str(self)

    def __reduce__(self) -> tuple[type[str], tuple[str]]:
        return (str, (str(self),))

    def get(self, options: Mapping[str, Any]) -> str | None:
        """The value given under this key or one of its aliases, else the default."""
        for k in (self.key, *self.aliases):
            if k in options and options[k] is not None:
                return str(options[k])
        return self.default


_W, _IDX, _FILE, _SVC, _MDT, _PY = "write", "index", "storage", "table services", "metadata table", "pyhudi"
_R = "read"

# -- write: operation and keys ------------------------------------------------------------------------------------
OPERATION = Option(
    "hoodie.datasource.write.operation", "upsert",
    "The write operation: insert, upsert, delete, bulk_insert, insert_overwrite, insert_overwrite_table. "
    "`Table.write` and `pyhudi write --operation` set it.", section=_W)
TABLE_NAME = Option(
    "hoodie.table.name", None, "Name of a new table (default: the last folder of its path); a write into an existing "
    "table may repeat its name (in any case), not change it.", section=_W)
TABLE_TYPE = Option(
    "hoodie.datasource.write.table.type", "COPY_ON_WRITE",
    "Type of a new table: COPY_ON_WRITE or MERGE_ON_READ (`hoodie.table.type` is accepted too).",
    section=_W, aliases=("hoodie.table.type",))
RECORDKEY_FIELD = Option(
    "hoodie.datasource.write.recordkey.field", None,
    "Record key column(s), comma-separated (required when creating a table).", section=_W)
PARTITIONPATH_FIELD = Option(
    "hoodie.datasource.write.partitionpath.field", None,
    "Partition column(s), comma-separated; none for a non-partitioned table.", section=_W)
ORDERING_FIELDS = Option(
    "hoodie.table.ordering.fields", None,
    "Ordering column(s): of two records with one key, the one with the greater value wins (event-time "
    "ordering).", section=_W)
PRECOMBINE_FIELD = Option(
    "hoodie.datasource.write.precombine.field", None,
    "Older name of the ordering field (used when `hoodie.table.ordering.fields` is not given).", section=_W)
KEYGENERATOR_TYPE = Option(
    "hoodie.datasource.write.keygenerator.type", None,
    "Key generator: SIMPLE, COMPLEX or NON_PARTITION (inferred from the key and partition fields when not "
    "given).", section=_W)
KEYGENERATOR_CLASS = Option(
    "hoodie.datasource.write.keygenerator.class", None,
    "Hudi key generator class name: Simple/Complex/NonpartitionedKeyGenerator and their Avro variants set the "
    "key generator type (a type given beside it must agree); other classes (timestamp-based, custom) are "
    "refused. A non-partitioned key generator ignores a partition field, as Hudi's does.",
    section=_W)
HIVE_STYLE_PARTITIONING = Option(
    "hoodie.datasource.write.hive_style_partitioning", "false",
    "Partition folders named `field=value` instead of `value`.", section=_W)
URL_ENCODE_PARTITIONING = Option(
    "hoodie.datasource.write.partitionpath.urlencode", "false",
    "Escape partition values as Hive does (`%XX` for `/`, `\\`, `:`, `%`, control characters, ...), so a value "
    "holding separators makes one folder name. A table property, set when the table is created. `.` and `..` are "
    "not escaped: such values stay refused (pyhudi.table.partition_path lists the rules).", section=_W)
RECORD_MERGE_MODE = Option(
    "hoodie.record.merge.mode", None,
    "How records with the same key merge: EVENT_TIME_ORDERING (the greater ordering value wins; default when "
    "ordering fields are set) or COMMIT_TIME_ORDERING (the later write wins).",
    section=_W, aliases=("hoodie.write.record.merge.mode",))
COMBINE_BEFORE_INSERT = Option(
    "hoodie.combine.before.insert", "false",
    "Keep one record per key within an insert or bulk_insert batch.", section=_W)
MERGE_ALLOW_DUPLICATE_ON_INSERTS = Option(
    "hoodie.merge.allow.duplicate.on.inserts", "true",
    "An `insert` into a file group that holds records (a small file taking inserts) keeps the stored records of "
    "the keys it inserts again, so the key is held twice, as the insert asked and as it would be in a new file "
    "group (Hudi's concat handle). false: such a stored record is merged with the incoming one as an upsert "
    "merges it, within that file group only.", section=_W)
COMBINE_BEFORE_UPSERT = Option(
    "hoodie.combine.before.upsert", "true",
    "Keep one record per key within an upsert batch (the greatest ordering value, else the last).", section=_W)
COMPLEX_NEW_ENCODING = Option(
    "hoodie.write.complex.keygen.new.encoding", "false",
    "Table version 8: a COMPLEX key of one field is written as its bare value.", section=_W)
WRITE_TABLE_VERSION = Option(
    "hoodie.write.table.version", None,
    "Table version of the write (default: the table's; 9 for a new table): another value is refused, as it would "
    "change how record keys are encoded.", section=_W)
CONSISTENT_LOGICAL_TS = Option(
    "hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled", "false",
    "Not supported: timestamps in keys and partition paths are their epoch microseconds.", section=_W)
UPSERT_PARALLELISM = Option(
    "hoodie.upsert.shuffle.parallelism", "0",
    "Tasks of an upsert, insert or delete (0: the session's default parallelism).", section=_W)
BULKINSERT_PARALLELISM = Option(
    "hoodie.bulkinsert.shuffle.parallelism", "0",
    "Tasks of a bulk_insert (0: the session's default parallelism).", section=_W)
RECONCILE_SCHEMA = Option(
    "hoodie.datasource.write.reconcile.schema", "false",
    "An input that lacks some of the table's columns: false refuses it (naming the columns; nothing is written), "
    "true writes null in them (for updates too: the record is replaced, as Hudi injects nulls for missing "
    "columns) and keeps them in the table schema. New columns and type promotions are accepted either way "
    "(see docs/writing.md, schema evolution); with true and no missing column the input's column order is kept.",
    section=_W)
FAULT = Option(
    "pyhudi.test.fault", None,
    "Tests only: fail (or hang, with a `hang_` prefix) at a named point of a write.", section=_PY)

# -- index ----------------------------------------------------------------------------------------------------------
INDEX_TYPE = Option(
    "hoodie.index.type", "SIMPLE",
    "How upserts and deletes find stored records: SIMPLE, GLOBAL_SIMPLE, BLOOM, GLOBAL_BLOOM, RECORD_INDEX. "
    "Default: RECORD_INDEX for a table that has a record index and for new tables with the metadata table on; "
    "SIMPLE otherwise.", section=_IDX)
SIMPLE_INDEX_UPDATE_PARTITION_PATH = Option(
    "hoodie.simple.index.update.partition.path", "true",
    "GLOBAL_SIMPLE: a key arriving with a new partition moves there (else it is updated where it is).",
    section=_IDX)
BLOOM_INDEX_UPDATE_PARTITION_PATH = Option(
    "hoodie.bloom.index.update.partition.path", "true",
    "GLOBAL_BLOOM: a key arriving with a new partition moves there.", section=_IDX)
RECORD_INDEX_UPDATE_PARTITION_PATH = Option(
    "hoodie.record.index.update.partition.path", "false",
    "RECORD_INDEX: a key arriving with a new partition moves there.", section=_IDX)
BLOOM_INDEX_PRUNE_BY_RANGES = Option(
    "hoodie.bloom.index.prune.by.ranges", "true",
    "BLOOM: skip files whose min/max record keys exclude a key.", section=_IDX)
BLOOM_INDEX_PARALLELISM = Option(
    "hoodie.bloom.index.parallelism", "0", "BLOOM: lookup tasks (0: the write's parallelism).", section=_IDX)
BLOOM_NUM_ENTRIES = Option(
    "hoodie.index.bloom.num_entries", "60000",
    "Entries the footer bloom filter of each base file is sized for.", section=_IDX)
BLOOM_FPP = Option(
    "hoodie.index.bloom.fpp", "0.000000001", "False positive rate of the footer bloom filters.", section=_IDX)
BLOOM_DYNAMIC_MAX_ENTRIES = Option(
    "hoodie.bloom.index.filter.dynamic.max.entries", "100000",
    "Most entries a DYNAMIC_V0 footer bloom filter grows to.", section=_IDX)
BLOOM_FILTER_TYPE = Option(
    "hoodie.bloom.index.filter.type", "DYNAMIC_V0", "Footer bloom filter type: SIMPLE or DYNAMIC_V0.",
    section=_IDX)
#: the options of the footer bloom filter a base file writer needs
BLOOM_FILTER_OPTIONS = (BLOOM_NUM_ENTRIES, BLOOM_FPP, BLOOM_DYNAMIC_MAX_ENTRIES, BLOOM_FILTER_TYPE)

# -- file sizing and formats ----------------------------------------------------------------------------------------
PARQUET_MAX_FILE_SIZE = Option(
    "hoodie.parquet.max.file.size", str(120 * 1024 * 1024), "Target size of a base file, bytes.", section=_FILE)
PARQUET_SMALL_FILE_LIMIT = Option(
    "hoodie.parquet.small.file.limit", str(100 * 1024 * 1024),
    "Base files smaller than this receive inserts until they reach the target size (0: never).", section=_FILE)
SMALL_FILE_GROUP_CANDIDATES = Option(
    "hoodie.merge.small.file.group.candidates.limit", "1",
    "Merge-on-read tables: how many small file groups per partition (latest file slice without log files, base "
    "file below `hoodie.parquet.small.file.limit`, smallest first) receive inserts; their base file is rewritten "
    "with the inserts (and the updates routed to them) under the deltacommit.", section=_FILE)
RECORD_SIZE_ESTIMATE = Option(
    "hoodie.copyonwrite.record.size.estimate", "1024",
    "Bytes per record assumed before the table has a commit to measure.", section=_FILE)
INSERT_SPLIT_SIZE = Option(
    "hoodie.copyonwrite.insert.split.size", "500000",
    "Records per new file group when auto-split is off.", section=_FILE)
INSERT_AUTO_SPLIT = Option(
    "hoodie.copyonwrite.insert.auto.split", "true",
    "Size new file groups from the average record size and the target file size.", section=_FILE)
PARQUET_COMPRESSION = Option(
    "hoodie.parquet.compression.codec", "zstd",
    "Base file codec: zstd, gzip, snappy, lz4, brotli, uncompressed. zstd is Apache Hudi's default for Spark 3.5 "
    "and newer writers (gzip for older ones and Hudi 1.1); at level 1 it writes about 3x faster than gzip level 1 "
    "for files about 5% smaller.", section=_FILE)
PARQUET_BLOCK_SIZE = Option(
    "hoodie.parquet.block.size", str(120 * 1024 * 1024), "Parquet row group size, bytes.", section=_FILE)
PARQUET_PAGE_SIZE = Option(
    "hoodie.parquet.page.size", str(1024 * 1024), "Parquet page size, bytes.", section=_FILE)
PARQUET_DICTIONARY_ENABLED = Option(
    "hoodie.parquet.dictionary.enabled", "true",
    "Dictionary-encode parquet columns: each column chunk whose dictionary pays (the dictionary and its ids "
    "smaller than the plain values, estimated on its first values, as parquet-mr decides it); false: none.",
    section=_FILE)
PARQUET_COMPRESSION_LEVEL = Option(
    "pyhudi.parquet.compression.level", None,
    "Codec level of base files (default: 1 for gzip, which writes ~6x faster than level 6 for files ~4% "
    "larger; the codec's own default otherwise, 1 for zstd).", section=_PY)
#: the values of hoodie.parquet.compression.codec pyhudi writes (lz4_raw and lz4 both give Parquet's LZ4_RAW)
PARQUET_CODECS = ("gzip", "snappy", "zstd", "lz4", "lz4_raw", "brotli", "uncompressed", "none")
#: what a base file's writer reads (pyhudi.table.base_file.ParquetOptions and its bloom filter)
BASE_FILE_OPTIONS = (
    PARQUET_COMPRESSION, PARQUET_BLOCK_SIZE, PARQUET_PAGE_SIZE, PARQUET_DICTIONARY_ENABLED, PARQUET_COMPRESSION_LEVEL,
    *BLOOM_FILTER_OPTIONS,
)

# -- table services -------------------------------------------------------------------------------------------------
CLEANER_COMMITS_RETAINED = Option(
    "hoodie.cleaner.commits.retained", "10",
    "Cleaning keeps the file versions the last N commits need (KEEP_LATEST_COMMITS).",
    section=_SVC, aliases=("hoodie.clean.commits.retained",))
COMPACT_INLINE = Option(
    "hoodie.compact.inline", None,
    "Merge-on-read tables: compact after a write once `hoodie.compact.inline.max.delta.commits` deltacommits "
    "completed since the last compaction. Unset: true for merge-on-read tables (as Hudi's Spark writer sets it "
    "for batch writes).", section=_SVC)
COMPACT_INLINE_MAX_DELTA_COMMITS = Option(
    "hoodie.compact.inline.max.delta.commits", "5",
    "Deltacommits after the last compaction that trigger inline compaction (Hudi's NUM_COMMITS trigger). "
    "Archival of a merge-on-read table keeps them: this many deltacommits after the latest compaction (or that "
    "compaction, when fewer followed it) stay on the active timeline.", section=_SVC)
AUTO_CLEAN = Option(
    "hoodie.clean.automatic", "true", "Clean after every commit.", section=_SVC)
ARCHIVE_AUTOMATIC = Option(
    "hoodie.archive.automatic", "true",
    "Archive after every commit (after cleaning): move old completed instants from the active timeline into the "
    "LSM timeline (`.hoodie/timeline/history`), for the table (copy-on-write or merge-on-read) and its metadata "
    "table.", section=_SVC)
KEEP_MIN_COMMITS = Option(
    "hoodie.keep.min.commits", "20",
    "Archival leaves at least this many completed commits on the active timeline (raised to what cleaning "
    "still needs: the commits after the cleaner's earliest commit to retain, plus 2). The metadata table keeps "
    "one more.", section=_SVC)
KEEP_MAX_COMMITS = Option(
    "hoodie.keep.max.commits", "30",
    "Archival starts once the active timeline holds more than this many completed commits (must exceed "
    "`hoodie.keep.min.commits`; raised by as much as the minimum is). The metadata table keeps one more.",
    section=_SVC)
TIMELINE_COMPACTION_BATCH_SIZE = Option(
    "hoodie.timeline.compaction.batch.size", "10",
    "When a layer of the LSM timeline holds this many files, its oldest ones (up to this many, about 1000 MB "
    "at most) are merged into one file of the next layer.", section=_SVC)

# -- streaming ------------------------------------------------------------------------------------------------------
_ST = "streaming"
STREAMING_CHECKPOINT_IDENTIFIER = Option(
    "hoodie.datasource.write.streaming.checkpoint.identifier", "default_single_writer",
    "Names this stream's batch ids in the commits' `_hudi_streaming_sink_checkpoint` (several streams writing one "
    "table need one identifier each).", section=_ST)
STREAMING_RETRY_COUNT = Option(
    "hoodie.datasource.write.streaming.retry.count", "3",
    "`foreach_batch`: times a failed micro-batch write is retried.", section=_ST)
STREAMING_RETRY_INTERVAL_MS = Option(
    "hoodie.datasource.write.streaming.retry.interval.ms", "2000",
    "`foreach_batch`: pause before a retry (ms).", section=_ST)
STREAMING_IGNORE_FAILED_BATCH = Option(
    "hoodie.datasource.write.streaming.ignore.failed.batch", "false",
    "`foreach_batch`: a batch that still fails after its retries is skipped with a warning instead of failing the "
    "query.", section=_ST)
STREAMING_SKIP_OLDER_BATCHES = Option(
    "pyhudi.streaming.skip.older.batches", "false",
    "A micro-batch whose id is lower than the last batch its stream identifier committed is skipped with a warning, "
    "as Hudi's streaming sink skips it (for a query restarted from an older copy of its own checkpoint). False: "
    "the write fails with `StreamingCheckpointError`, as such a batch comes from a query whose checkpoint did not "
    "write the table (a new checkpoint location, another query with the same identifier), whose records skipping "
    "would drop.", section=_ST)
COMMITMETA_KEY_PREFIX = Option(
    "hoodie.datasource.write.commitmeta.key.prefix", "_",
    "Write options whose key starts with this prefix are copied into the commit's extra metadata.", section=_ST)

# -- concurrency ----------------------------------------------------------------------------------------------------
_CC = "concurrency"
WRITE_CONCURRENCY_MODE = Option(
    "hoodie.write.concurrency.mode", "SINGLE_WRITER",
    "SINGLE_WRITER: one writer at a time (a second writer that finds a live one fails at once); "
    "OPTIMISTIC_CONCURRENCY_CONTROL: writers commit concurrently under a lock and the later of two writers "
    "that touched the same file groups fails.", section=_CC)
FAILED_WRITES_CLEANER_POLICY = Option(
    "hoodie.clean.failed.writes.policy", None,
    "EAGER: a write first rolls back failed writes (the single-writer default); LAZY: the cleaner rolls them "
    "back (required, and the default, with optimistic concurrency). Only writes whose heartbeat expired (or "
    "whose process is known dead) count as failed.",
    section=_CC, aliases=("hoodie.cleaner.policy.failed.writes",))
HEARTBEAT_INTERVAL_MS = Option(
    "hoodie.client.heartbeat.interval_in_ms", "60000",
    "A writer refreshes `.hoodie/.heartbeat/<instant>` this often (ms, at least 1000 as in Hudi; pyhudi accepts "
    "less for tests).", section=_CC)
HEARTBEAT_TOLERABLE_MISSES = Option(
    "hoodie.client.heartbeat.tolerable.misses", "2",
    "A heartbeat older than interval x misses has expired: its write has failed.", section=_CC)
LOCK_PROVIDER = Option(
    "hoodie.write.lock.provider", None,
    "Lock provider class with optimistic concurrency: "
    "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider (default: a lock file under "
    "`.hoodie/`; local filesystem only) or org.apache.hudi.client.transaction.lock.InProcessLockProvider "
    "(writers in one process).", section=_CC)
LOCK_FILESYSTEM_PATH = Option(
    "hoodie.write.lock.filesystem.path", None,
    "Folder of the FileSystemBasedLockProvider's lock file (default: the table's `.hoodie`).", section=_CC)
LOCK_FILESYSTEM_EXPIRE = Option(
    "hoodie.write.lock.filesystem.expire", "0",
    "Minutes after which a lock file is taken over (0: never; a lock whose holder on this host is gone is "
    "taken over at once). A holder refreshes its lock file's modification time while it holds it.", section=_CC)
LOCK_WAIT_TIME_MS = Option(
    "hoodie.write.lock.wait_time_ms", "60000", "How long one lock acquisition may wait (ms).", section=_CC)
LOCK_NUM_RETRIES = Option(
    "hoodie.write.lock.num_retries", "15", "Lock acquisitions tried before a write gives up.", section=_CC)
LOCK_RETRY_WAIT_MS = Option(
    "hoodie.write.lock.wait_time_ms_between_retry", "1000", "Pause between lock acquisitions (ms).",
    section=_CC)
LOCK_CONFLICT_RESOLUTION_STRATEGY = Option(
    "hoodie.write.lock.conflict.resolution.strategy",
    "org.apache.hudi.client.transaction.SimpleConcurrentFileWritesConflictResolutionStrategy",
    "How concurrent writes are checked at commit: by the file groups they touched (the only strategy).",
    section=_CC)
FS_ATOMIC_CREATION_SUPPORT = Option(
    "hoodie.fs.atomic_creation.support", "",
    "Hudi's list of URI schemes whose storage creates files atomically. Accepted, but it cannot make pyhudi's "
    "file creation atomic: FileSystemBasedLockProvider runs only where pyhudi creates files only-if-absent "
    "atomically (the local filesystem), whatever this lists (docs/object-stores.md).", section=_CC)

# -- read -----------------------------------------------------------------------------------------------------------
READ_SPLIT_BYTES = Option(
    "pyhudi.read.split.bytes", str(128 * 1024 * 1024),
    "Spark reads: file slices are packed into tasks of about this many bytes (a slice is never split; at least "
    "the session's parallelism of tasks, at most one per slice).", section=_R)
READ_BATCH_ROWS = Option(
    "pyhudi.read.batch.rows", str(1 << 16),
    "Rows per Arrow batch a file-slice reader returns (base files are streamed in batches of this size).",
    section=_R)
READ_LOG_COMPACT_ROWS = Option(
    "pyhudi.read.log.compact.rows", "2000000",
    "A file-slice reader folds the log records it holds into one per key whenever this many have accumulated: "
    "memory follows the log's distinct keys, not its length.", section=_R)

QUERY_TYPE = Option(
    "hoodie.datasource.query.type", "snapshot",
    "`spark.read.format(\"hudi\")`: `snapshot` (the latest or `as.of.instant` snapshot, file slices merged), "
    "`read_optimized` (base files only) or `incremental` (the records changed by the commits completed in "
    "(`hoodie.datasource.read.begin.instanttime`, `hoodie.datasource.read.end.instanttime`]).", section=_R)
READ_BEGIN_INSTANT = Option(
    "hoodie.datasource.read.begin.instanttime", None,
    "Incremental query: commits completed after this time (a completion time, `yyyyMMddHHmmssSSS`; required).",
    section=_R)
READ_END_INSTANT = Option(
    "hoodie.datasource.read.end.instanttime", None,
    "Incremental query: commits completed at or before this time (default: the latest).", section=_R)
AS_OF_INSTANT = Option(
    "as.of.instant", None,
    "Snapshot or read-optimized query as of this instant (`yyyyMMddHHmmss[SSS]` or `yyyy-MM-dd[ HH:mm:ss[.SSS]]`): "
    "time travel.", section=_R)
INCREMENTAL_FORMAT = Option(
    "hoodie.datasource.query.incremental.format", "latest_state",
    "Incremental query output: `latest_state` (the latest version of each changed record) only; `cdc` (change "
    "data capture) is refused.", section=_R)
READ_SPARK_PARQUET = Option(
    "pyhudi.read.spark.parquet", "true",
    "`spark.read.format(\"hudi\")` in a session whose JVM has pyhudi's jar (pyhudi's default session): scans "
    "Spark's own parquet reader can do exactly -- copy-on-write snapshots and time travel, read-optimized "
    "queries, the file slices without log files of merge-on-read snapshots, on the local filesystem -- are read "
    "by it, with column pruning and its vectorized reader, from the base files pyhudi plans and prunes "
    "(docs/spark.md); false reads every scan through pyhudi's Python reader.",
    section=_R)
READ_DATA_SKIPPING = Option(
    "hoodie.enable.data.skipping", "true",
    "`spark.read.format(\"hudi\")`: skip files by the metadata table's `column_stats` and record index and row "
    "groups by their parquet statistics for the query's filters (partition pruning always runs). The record index "
    "assumes unique keys, as Hudi's does: a key `insert`/`bulk_insert` wrote twice (`pyhudi validate` names it) is "
    "read from the file group the index names; false reads every copy.",
    section=_R)

# -- metadata table -------------------------------------------------------------------------------------------------
METADATA_ENABLE = Option(
    "hoodie.metadata.enable", "true",
    "Keep the metadata table (file listings, record index); false removes it.", section=_MDT)
RECORD_INDEX_ENABLE = Option(
    "hoodie.metadata.record.index.enable", "false",
    "Build and keep the record index (also implied by `hoodie.index.type=RECORD_INDEX`).", section=_MDT)
RECORD_INDEX_MIN_FILE_GROUPS = Option(
    "hoodie.metadata.record.index.min.filegroup.count", "10",
    "Fewest file groups of a new record index.", section=_MDT)
RECORD_INDEX_MAX_FILE_GROUPS = Option(
    "hoodie.metadata.record.index.max.filegroup.count", "10000",
    "Most file groups of a new record index.", section=_MDT)
RECORD_INDEX_MAX_FILE_GROUP_SIZE = Option(
    "hoodie.metadata.record.index.max.filegroup.size", str(1 << 30),
    "Bytes a record-index file group is sized for (48 bytes assumed per entry).", section=_MDT)
RECORD_INDEX_GROWTH_FACTOR = Option(
    "hoodie.metadata.record.index.growth.factor", "2.0",
    "Growth the record index is sized for at initialisation.", section=_MDT)
INDEX_CHECK_TIMEOUT = Option(
    "hoodie.metadata.index.check.timeout.seconds", "900",
    "How long an async index build waits for writes that were pending when it started.", section=_MDT)
METADATA_COMPACT_MAX_DELTA_COMMITS = Option(
    "hoodie.metadata.compact.max.delta.commits", "10",
    "Compact the metadata table after this many deltacommits.", section=_MDT)
METADATA_MAX_DELTA_COMMITS_WHEN_PENDING = Option(
    "hoodie.metadata.max.deltacommits.when_pending", "1000",
    "Most metadata-table deltacommits since its last compaction while pending data-table instants that have a "
    "deltacommit there (a clean or write that died after it) hold the compaction back; a write past them fails "
    "after its commit, naming the pending instants (Hudi's version-6 writer has the same limit).", section=_MDT)

COLUMN_STATS_ENABLE = Option(
    "hoodie.metadata.index.column.stats.enable", "false",
    "Keep the metadata table's `column_stats` partition: per data file and indexed column its min, max, null and "
    "value counts, as Hudi 1.1 writes them; readers skip files by them. A table that has `column_stats` keeps "
    "them whatever this option says; `false` on such a table removes them. On a partitioned table it also "
    "keeps `partition_stats` (as Hudi 1.1 does).", section=_MDT)
COLUMN_STATS_COLUMNS = Option(
    "hoodie.metadata.index.column.stats.column.list", "",
    "Comma-separated columns to index in `column_stats` (besides `_hoodie_commit_time`, "
    "`_hoodie_partition_path` and `_hoodie_record_key`, always indexed); empty: the first "
    "`hoodie.metadata.index.column.stats.max.columns.to.index` top-level columns of a supported type.",
    section=_MDT)
COLUMN_STATS_MAX_COLUMNS = Option(
    "hoodie.metadata.index.column.stats.max.columns.to.index", "32",
    "Most data columns `column_stats` indexes when no column list is given.", section=_MDT)
COLUMN_STATS_FILE_GROUPS = Option(
    "hoodie.metadata.index.column.stats.file.group.count", "2",
    "File groups of a new `column_stats` partition.", section=_MDT)
PARTITION_STATS_ENABLE = Option(
    "hoodie.metadata.index.partition.stats.enable", "true",
    "Keep `partition_stats` (per data partition and indexed column, the statistics of its latest files) "
    "alongside `column_stats` on partitioned tables; false keeps `column_stats` alone.", section=_MDT)
PARTITION_STATS_FILE_GROUPS = Option(
    "hoodie.metadata.index.partition.stats.file.group.count", "1",
    "File groups of a new `partition_stats` partition.", section=_MDT)

#: ``{key: default}`` of every option with a default
DEFAULTS: dict[str, str] = {k: o.default for k, o in OPTIONS.items() if o.default is not None}

# -- options pyhudi knows but does not honour ---------------------------------------------------------------------------
#: key -> (the values pyhudi honours, lower-cased; why others are not). Another value is an error, or a warning
#: for the keys in :data:`WARN_ONLY` (what they ask for is an optimisation, not a different result).
NOT_HONOURED: dict[str, tuple[frozenset[str], str]] = {
    "hoodie.write.concurrency.mode": (
        frozenset({"single_writer", "optimistic_concurrency_control"}),
        "non-blocking concurrency control is not supported"),
    "hoodie.schema.on.read.enable": (
        frozenset({"false"}), "schema-on-read evolution (renames, drops, reorders through .hoodie/.schema) is not "
                              "written (tables that use it are read); new columns and type promotions need no "
                              "option"),
    "hoodie.cleaner.policy": (
        frozenset({"keep_latest_commits"}), "pyhudi cleans with KEEP_LATEST_COMMITS only"),
    "hoodie.populate.meta.fields": (
        frozenset({"true"}), "pyhudi always writes Hudi's meta columns"),
    "hoodie.table.base.file.format": (
        frozenset({"parquet"}), "pyhudi writes parquet base files only"),
    "hoodie.metadata.index.secondary.enable": (
        frozenset({"false"}), "secondary indexes are not maintained"),
    "hoodie.datasource.write.drop.partition.columns": (
        frozenset({"false"}), "partition columns are always kept in the data files"),
    "hoodie.archive.async": (
        frozenset({"false"}), "archival runs in the writer, after its commit"),
    "hoodie.archive.beyond.savepoint": (
        frozenset({"false"}), "archival stops at the first savepoint"),
    "hoodie.logfile.data.block.format": (
        frozenset({"avro"}), "merge-on-read log files are written with Avro data blocks only"),
    "hoodie.compact.schedule.inline": (
        frozenset({"false"}), "a compaction is scheduled and run together (inline, or `pyhudi compact`)"),
    "hoodie.compact.inline.trigger.strategy": (
        frozenset({"num_commits"}), "inline compaction is triggered by the number of deltacommits only"),
    "hoodie.compaction.strategy": (
        frozenset({"org.apache.hudi.table.action.compact.strategy.logfilesizebasedcompactionstrategy"}),
        "every file slice with log files is compacted"),
    LOCK_CONFLICT_RESOLUTION_STRATEGY: (
        frozenset({str(LOCK_CONFLICT_RESOLUTION_STRATEGY.default).lower()}),
        "concurrent writes are checked by the file groups they touched (Hudi's default strategy) only"),
    # read options (spark.read.format("hudi"))
    "hoodie.datasource.read.incr.path.glob": (
        frozenset({""}), "an incremental query reads every partition (filter the partition column instead)"),
    "hoodie.datasource.merge.type": (
        frozenset({"payload_combine"}), "a merge-on-read snapshot always merges log records with the base file"),
}


WARN_ONLY = frozenset({
    "hoodie.metadata.index.secondary.enable",
})


class OptionNotHonouredWarning(UserWarning):
    """An option asks for something pyhudi does not do, and the result is the same without it."""


def check_honoured(options: Mapping[str, Any]) -> None:
    """ConfigError (or a warning, see :data:`WARN_ONLY`) naming an option pyhudi knows but does not honour with
    the value given."""
    import warnings

    for key, (ok, why) in NOT_HONOURED.items():
        v = options.get(key)
        if v is None or str(v).strip().lower() in ok:
            continue
        if key in WARN_ONLY:
            warnings.warn(f"option {key}={v!r} is ignored: {why}", OptionNotHonouredWarning, stacklevel=2)
        else:
            raise ConfigError(f"option {key}={v!r} is not supported: {why}")

OPERATIONS = ("insert", "upsert", "delete", "bulk_insert", "insert_overwrite", "insert_overwrite_table")
INDEX_TYPES = ("SIMPLE", "GLOBAL_SIMPLE", "BLOOM", "GLOBAL_BLOOM", "RECORD_INDEX")
MERGE_MODES = ("EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING")
#: key generator type names Hudi accepts (``KeyGeneratorType`` and its Avro variants), each to the type pyhudi uses
KEYGEN_TYPE_NAMES = {
    "SIMPLE": "SIMPLE", "SIMPLE_AVRO": "SIMPLE", "COMPLEX": "COMPLEX", "COMPLEX_AVRO": "COMPLEX",
    "NON_PARTITION": "NON_PARTITION", "NON_PARTITION_AVRO": "NON_PARTITION", "NON_PARTITIONED": "NON_PARTITION",
}
KEYGEN_TYPES = tuple(KEYGEN_TYPE_NAMES)


def keygen_type_name(value: str | None) -> str | None:
    """The key generator type a type name stands for (``SIMPLE_AVRO`` is ``SIMPLE``), or None when unknown."""
    return KEYGEN_TYPE_NAMES.get((value or "").strip().upper())
#: the key generator classes pyhudi writes with (``hoodie.datasource.write.keygenerator.class``), by type
KEYGEN_CLASS_TYPES = {
    "org.apache.hudi.keygen.SimpleKeyGenerator": "SIMPLE",
    "org.apache.hudi.keygen.SimpleAvroKeyGenerator": "SIMPLE",
    "org.apache.hudi.keygen.ComplexKeyGenerator": "COMPLEX",
    "org.apache.hudi.keygen.ComplexAvroKeyGenerator": "COMPLEX",
    "org.apache.hudi.keygen.NonpartitionedKeyGenerator": "NON_PARTITION",
    "org.apache.hudi.keygen.NonpartitionedAvroKeyGenerator": "NON_PARTITION",
}


def keygen_class_type(cls: str, option: str) -> str:
    """The key generator type of a key generator class (``option`` names where it was given); ConfigError for a
    class pyhudi does not write with (timestamp-based, custom, ...)."""
    t = KEYGEN_CLASS_TYPES.get(cls.strip())
    if t is None:
        raise ConfigError(f"option {option}: unsupported key generator class {cls!r} (pyhudi writes with "
                          f"{', '.join(c.rsplit('.', 1)[1] for c in KEYGEN_CLASS_TYPES)})")
    return t


def check_partition_field_specs(fields: tuple[str, ...] | list[str], option: str) -> None:
    """ConfigError for a CustomKeyGenerator partition spec (``field:SIMPLE``, ``field:TIMESTAMP``)."""
    for f in fields:
        if ":" in f:
            raise ConfigError(f"option {option}: {f!r} is a CUSTOM key generator spec, which is not supported")


def infer_keygen_type(record_key_fields: tuple[str, ...] | list[str], partition_fields: tuple[str, ...] | list[str]) -> str:
    """Hudi's ``KeyGenUtils.inferKeyGeneratorType``: the key generator when none is named."""
    if not partition_fields:
        return "NON_PARTITION"
    if len(partition_fields) == 1 and len(record_key_fields) <= 1:
        return "SIMPLE"
    return "COMPLEX"


def _raw(options: Mapping[str, Any], key: str, fallback: str | None = None) -> str | None:
    """The value of ``key`` (or of one of its aliases) in ``options``, else its default, else ``fallback``."""
    o = OPTIONS.get(key)
    v = o.get(options) if o is not None else options.get(key)
    return fallback if v is None else str(v)


def bool_option(options: Mapping[str, Any], key: str) -> bool:
    """A true/false option (default from its definition); anything else is an error naming the option."""
    raw = _raw(options, key, "false")
    v = str(raw).strip().lower()
    if v not in ("true", "false"):
        raise ConfigError(f"option {key} must be true or false, got {raw!r}")
    return v == "true"


def int_option(options: Mapping[str, Any], key: str, minimum: int = 0) -> int:
    """An integer option of at least ``minimum`` (default from its definition); anything else is an error
    naming the option."""
    raw = _raw(options, key)
    try:
        v = int(str(raw))
    except ValueError:
        raise ConfigError(f"option {key} must be an integer, got {raw!r}") from None
    if v < minimum:
        raise ConfigError(f"option {key} must be >= {minimum}, got {v}")
    return v


def float_option(options: Mapping[str, Any], key: str, minimum: float | None = None) -> float:
    """A number option (default from its definition), above ``minimum`` if given; anything else is an error
    naming the option."""
    raw = _raw(options, key)
    try:
        v = float(str(raw))
    except ValueError:
        raise ConfigError(f"option {key} must be a number, got {raw!r}") from None
    if minimum is not None and v <= minimum:
        raise ConfigError(f"option {key} must be > {minimum}, got {raw!r}")
    return v


def _choice(options: Mapping[str, Any], key: str, choices: tuple[str, ...], upper: bool = True) -> str:
    raw = str(_raw(options, key, ""))
    v = raw.strip().upper() if upper else raw.strip().lower()
    if v not in choices:
        raise ConfigError(f"option {key} has unknown value {raw!r}; expected one of {', '.join(choices)}")
    return v


def check_table_decided_values(options: Mapping[str, Any]) -> None:
    """ConfigError naming an option whose value is unknown among those a write into an existing table takes from
    the table's properties (hive-style partitioning, url-encoded partition paths, the key generator type, the merge
    mode): the value given is checked as :class:`WriteConfig` checks it for a new table, never ignored."""
    o = {k: str(v) for k, v in options.items() if v is not None}

    def given(key: Option) -> bool:
        return any(k in o for k in (key.key, *key.aliases))

    for key in (HIVE_STYLE_PARTITIONING, URL_ENCODE_PARTITIONING):
        if given(key):
            bool_option(o, key)
    if given(KEYGENERATOR_TYPE):
        _choice(o, KEYGENERATOR_TYPE, KEYGEN_TYPES)
    if given(RECORD_MERGE_MODE):
        _choice(o, RECORD_MERGE_MODE, MERGE_MODES)


def split_fields(value: str | None) -> tuple[str, ...]:
    """The names of a comma-separated field list (``"a, b,"`` is ``("a", "b")``)."""
    return tuple(f.strip() for f in (value or "").split(",") if f.strip())


@dataclass(frozen=True)
class WriteConfig:
    """Parsed write options. Build with :meth:`from_options`."""

    operation: str
    index_type: str
    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...]
    ordering_fields: tuple[str, ...]
    keygen_type: str
    hive_style: bool
    url_encode: bool
    merge_mode: str
    combine_before_insert: bool
    combine_before_upsert: bool
    allow_duplicate_on_inserts: bool
    update_partition_path: bool
    max_file_size: int
    small_file_limit: int
    record_size_estimate: int
    insert_split_size: int
    insert_auto_split: bool
    parallelism: int
    parquet_compression: str
    cleaner_commits_retained: int
    auto_clean: bool
    reconcile_schema: bool = False
    bloom_prune_by_ranges: bool = True
    bloom_parallelism: int = 0  # 0: the write's parallelism
    options: Mapping[str, str] = field(default_factory=dict)

    @staticmethod
    def from_options(options: Mapping[str, str]) -> WriteConfig:
        o = {k: str(v) for k, v in options.items()}
        check_honoured(o)
        op = _choice(o, OPERATION, OPERATIONS, upper=False)
        index_type = _choice(o, INDEX_TYPE, INDEX_TYPES)
        rk = split_fields(o.get(RECORDKEY_FIELD))
        if not rk:
            raise ConfigError(f"option {RECORDKEY_FIELD} is required (the record key column or columns)")
        pf = split_fields(o.get(PARTITIONPATH_FIELD))
        check_partition_field_specs(pf, PARTITIONPATH_FIELD.key)
        ordering = split_fields(o.get(ORDERING_FIELDS) or o.get(PRECOMBINE_FIELD))
        cls = o.get(KEYGENERATOR_CLASS.key)
        if cls:  # a class names its type (a type given beside it must agree)
            by_class = keygen_class_type(cls, KEYGENERATOR_CLASS.key)
            given = _choice(o, KEYGENERATOR_TYPE, KEYGEN_TYPES) if o.get(KEYGENERATOR_TYPE.key) else by_class
            if KEYGEN_TYPE_NAMES[given] != by_class:
                raise ConfigError(f"options {KEYGENERATOR_TYPE.key}={given} and {KEYGENERATOR_CLASS.key}={cls} "
                                  "disagree")
            o[KEYGENERATOR_TYPE.key] = by_class
        o.setdefault(KEYGENERATOR_TYPE, infer_keygen_type(rk, pf))
        keygen = KEYGEN_TYPE_NAMES[_choice(o, KEYGENERATOR_TYPE, KEYGEN_TYPES)]
        if keygen == "NON_PARTITION":
            pf = ()  # Hudi's NonpartitionedKeyGenerator writes every record at the root: the table has no partitions
        if keygen == "SIMPLE" and (len(rk) != 1 or len(pf) > 1):
            raise ConfigError(
                f"option {KEYGENERATOR_TYPE}=SIMPLE takes one record key and at most one partition field; "
                f"use COMPLEX for {','.join(rk)} / {','.join(pf)}"
            )
        o.setdefault(RECORD_MERGE_MODE, "EVENT_TIME_ORDERING" if ordering else "COMMIT_TIME_ORDERING")
        merge_mode = _choice(o, RECORD_MERGE_MODE, MERGE_MODES)
        upp_key = {
            "RECORD_INDEX": RECORD_INDEX_UPDATE_PARTITION_PATH,
            "GLOBAL_BLOOM": BLOOM_INDEX_UPDATE_PARTITION_PATH,
        }.get(index_type, SIMPLE_INDEX_UPDATE_PARTITION_PATH)
        parallelism = int_option(o, UPSERT_PARALLELISM if op != "bulk_insert" else BULKINSERT_PARALLELISM)
        codec = str(o.get(PARQUET_COMPRESSION, DEFAULTS[PARQUET_COMPRESSION])).strip().lower()
        if codec not in PARQUET_CODECS:
            raise ConfigError(f"option {PARQUET_COMPRESSION} has unknown value {codec!r}")
        return WriteConfig(
            operation=op,
            index_type=index_type,
            record_key_fields=rk,
            partition_fields=pf,
            ordering_fields=ordering,
            keygen_type=keygen,
            hive_style=bool_option(o, HIVE_STYLE_PARTITIONING),
            url_encode=bool_option(o, URL_ENCODE_PARTITIONING),
            merge_mode=merge_mode,
            combine_before_insert=bool_option(o, COMBINE_BEFORE_INSERT),
            combine_before_upsert=bool_option(o, COMBINE_BEFORE_UPSERT),
            allow_duplicate_on_inserts=bool_option(o, MERGE_ALLOW_DUPLICATE_ON_INSERTS),
            update_partition_path=bool_option(o, upp_key),
            max_file_size=int_option(o, PARQUET_MAX_FILE_SIZE, 1),
            small_file_limit=int_option(o, PARQUET_SMALL_FILE_LIMIT),
            record_size_estimate=int_option(o, RECORD_SIZE_ESTIMATE, 1),
            insert_split_size=int_option(o, INSERT_SPLIT_SIZE, 1),
            insert_auto_split=bool_option(o, INSERT_AUTO_SPLIT),
            parallelism=parallelism,
            parquet_compression=codec,
            cleaner_commits_retained=int_option(o, CLEANER_COMMITS_RETAINED, 1),
            auto_clean=bool_option(o, AUTO_CLEAN),
            reconcile_schema=bool_option(o, RECONCILE_SCHEMA),
            bloom_prune_by_ranges=bool_option(o, BLOOM_INDEX_PRUNE_BY_RANGES),
            bloom_parallelism=int_option(o, BLOOM_INDEX_PARALLELISM),
            options=o,
        )

    @property
    def event_time_ordering(self) -> bool:
        """Records of a key are ordered by their ordering fields (``hoodie.record.merge.mode``)."""
        return self.merge_mode == "EVENT_TIME_ORDERING"

    @property
    def is_global_index(self) -> bool:
        return self.index_type.startswith("GLOBAL_") or self.index_type == "RECORD_INDEX"
