"""One transaction per write: the whole life of its instant, in one place.

1. **Begin** (under the table lock with optimistic concurrency): failed writes are dealt with as the
   failed-writes policy says (EAGER: rolled back now, and in single-writer mode a *live* writer's instant makes
   this write fail at once instead; LAZY: the cleaner rolls them back after the commit). The timeline read here
   is the one the write is based on.
2. **Start**, once the producer has validated its input and planned the write (so bad input leaves no trace),
   under the lock: an instant time is reserved (later than every time on the timeline and every heartbeat, and
   created as this write's heartbeat file only if absent, so two writers never share one), the metadata table is
   brought in line with the options (created, partitions dropped, the record index built inline when asked
   for), then ``<t>.<action>.requested`` and the inflight instant are written.
3. The producer writes the data files (Spark tasks; markers first) and returns its write stats.
4. **Commit** (under the lock): this write's heartbeat must still be its own, and its instant still pending with
   no rollback of it begun (a writer that stalled past its heartbeat's tolerance may have been taken for dead);
   the timeline is reloaded and the write checked against what completed since it began (optimistic concurrency: the file groups both touched,
   :mod:`pyhudi.txn.conflict`; single writer: any other write); the metadata table's deltacommit is applied (files
   partition, record index: in commit order, so the index never points at a losing writer's file); the data
   files of failed or speculative task attempts (named by a marker, not by a write stat) are deleted; the instant
   completes, with a completion time after every time on the timeline. Then the markers and the heartbeat go.
5. **Post-commit services**, each under the lock: (LAZY) rollback of failed writes, (merge-on-read) inline
   compaction, cleaning, metadata-table compaction, timeline archival (``hoodie.archive.automatic``, both table
   types; :mod:`pyhudi.services.archive`).

A write that fails before completing leaves its instant pending with its heartbeat marked aborted (as Hudi
leaves it inflight), so the next writer rolls it back at once; a write that loses a conflict rolls itself back
before it raises :class:`~pyhudi.errors.ConcurrentWriteConflict`, leaving the table as if it had never run.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import operator
import posixpath
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyhudi import config as C
from pyhudi import faults
from pyhudi.errors import (
    ClusteringConflict,
    ConcurrentKeyConflict,
    ConcurrentSchemaConflict,
    ConcurrentWriteConflict,
    ConcurrentWriterError,
    ConfigError,
    CorruptFileError,
    PostCommitError,
    PyHudiError,
    StreamingCheckpointError,
    UnsupportedTableError,
)
from pyhudi.io.bloom import BloomFilter
from pyhudi.io.storage import Storage
from pyhudi.metadata.indexer import build_record_index
from pyhudi.metadata.partitions import RECORD_INDEX
from pyhudi.metadata.reader import table_view
from pyhudi.metadata.record_index import new_keys_held, record_index_lookup, record_index_updates
from pyhudi.metadata.writer import (
    MetadataWriter,
    mdt_enabled,
    mdt_max_delta_commits,
    mdt_max_delta_commits_when_pending,
    rli_enabled,
)
from pyhudi.services.archive import ArchiveOptions, ArchiveResult, archive, auto_archive_enabled
from pyhudi.services.clean import clean as run_clean
from pyhudi.services.compact import (
    delete_attempt_files,
    deltacommits_since_compaction,
    execute_compaction,
    schedule_compaction,
)
from pyhudi.services.rollback import (
    ROLLBACK_ACTIONS,
    RollbackResult,
    delete_rolled_back_files,
    pending_rollback_of,
    rollback_failed_writes,
    rollback_instant,
)
from pyhudi.spark.progress import Progress
from pyhudi.table import markers
from pyhudi.table.base_file import ParquetOptions
from pyhudi.table.capabilities import (
    MOR_INDEX_TYPES,
    MOR_OPERATIONS,
    check_not_schema_on_read,
    check_writable,
    mor_refusal,
)
from pyhudi.table.commit_metadata import (
    STREAMING_CHECKPOINT_KEY,
    clustering_file_groups,
    streaming_checkpoint,
)
from pyhudi.table.evolution import check_key_types, writer_schema
from pyhudi.table.lsm_timeline import ArchivedTimeline, FullTimeline, LsmHistory
from pyhudi.table.properties import (
    METAFOLDER,
    TABLE_VERSION,
    TableConfig,
    read_table_config,
    table_config_exists,
)
from pyhudi.table.recorded_paths import compaction_operations
from pyhudi.table.schema import avro_to_arrow, commit_schema_json, table_schema
from pyhudi.table.timeline import (
    CLUSTERING,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    ActiveTimeline,
    Instant,
    InstantTimeGenerator,
    State,
    Timeline,
)
from pyhudi.txn.conflict import Footprint, completed_writes_since, find_conflict
from pyhudi.txn.heartbeat import (
    Heartbeat,
    HeartbeatConfig,
    WriterStatus,
    delete_heartbeat,
    heartbeat_instants,
    heartbeat_path,
    writer_status,
)
from pyhudi.txn.lock import LockProvider, lock_provider
from pyhudi.write.context import WriteJob
from pyhudi.write.producer import PRODUCERS, WriteProducer, WriteResult
from pyhudi.write.status import WriteStat

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

SINGLE_WRITER = "SINGLE_WRITER"
OCC = "OPTIMISTIC_CONCURRENCY_CONTROL"
EAGER = "EAGER"
LAZY = "LAZY"


@dataclass(frozen=True)
class Concurrency:
    """How a write shares its table: the concurrency mode, the failed-writes policy, heartbeats."""

    mode: str
    failed_writes: str
    heartbeat: HeartbeatConfig

    @staticmethod
    def from_options(options: Mapping[str, Any]) -> Concurrency:
        mode = str(C.WRITE_CONCURRENCY_MODE.get(options)).strip().upper()
        if mode not in (SINGLE_WRITER, OCC):
            raise ConfigError(f"option {C.WRITE_CONCURRENCY_MODE} has unknown value {mode!r}; expected "
                              f"{SINGLE_WRITER} or {OCC}")
        given = C.FAILED_WRITES_CLEANER_POLICY.get(options)
        policy = str(given).strip().upper() if given else (LAZY if mode == OCC else EAGER)
        if policy not in (EAGER, LAZY):
            raise ConfigError(f"option {C.FAILED_WRITES_CLEANER_POLICY} has unknown value {given!r}; expected "
                              f"{EAGER} or {LAZY}")
        if mode == OCC and policy != LAZY:
            raise ConfigError(f"{C.WRITE_CONCURRENCY_MODE}={OCC} needs {C.FAILED_WRITES_CLEANER_POLICY}=LAZY: an "
                              "eager rollback would remove the other writers' work in progress")
        return Concurrency(mode, policy, HeartbeatConfig.from_options(options))

    @property
    def optimistic(self) -> bool:
        return self.mode == OCC


# -- the options of a write against a table ------------------------------------------------------------------------
def resolve_options(config: TableConfig, options: Mapping[str, Any] | None, timeline: ActiveTimeline) -> dict[str, str]:
    """The write's options: the table's properties for table-defining keys, then the caller's, and the default
    index (:func:`default_index_type`). A table-defining option given with another value than the table's is a
    ConfigError (Hudi's "Config conflict"): the table's type, version, name, record key and partition fields,
    ordering fields, key generator, partitioning style and merge mode are fixed when it is created."""
    o = {k: str(v) for k, v in (options or {}).items()}
    C.check_table_decided_values(o)  # the table's values replace them below: an unknown one is still an error
    given_type = C.TABLE_TYPE.get(o) if any(o.get(k) for k in (C.TABLE_TYPE, *C.TABLE_TYPE.aliases)) else None
    if given_type is not None and given_type.strip().upper() != config.table_type:
        raise ConfigError(
            f"option {C.TABLE_TYPE}={given_type!r} does not match the table, a {config.table_type} table (a table's "
            "type cannot change)"
        )
    table_keygen = (C.keygen_type_name(config.key_generator_type) or config.key_generator_type
                    or C.KEYGEN_CLASS_TYPES.get((config.key_generator_class or "").strip()))

    def flag(v: str) -> str:
        return v.strip().lower()

    def upper(v: str) -> str:
        return v.strip().upper()

    def keygen_type(v: str) -> str:
        return C.keygen_type_name(v) or upper(v)

    # (option keys whose given value must match, the table's value, how values compare)
    checks: list[tuple[tuple[str, ...], str | None, Any]] = [
        ((C.RECORDKEY_FIELD,), ",".join(config.record_key_fields), C.split_fields),
        ((C.HIVE_STYLE_PARTITIONING,), str(config.hive_style_partitioning).lower(), flag),
        ((C.URL_ENCODE_PARTITIONING,), str(config.url_encode_partitioning).lower(), flag),
        ((C.TABLE_NAME,), config.table_name, lambda v: v.strip().lower()),  # Spark's resolver: any case
        # how keys are encoded follows it (the key generator reads either key)
        ((C.WRITE_TABLE_VERSION, TABLE_VERSION), str(config.table_version), str.strip),
    ]
    # a non-partitioned table's key generator takes no partition field: one given is ignored, as Hudi does
    if table_keygen != "NON_PARTITION":
        checks.append(((C.PARTITIONPATH_FIELD,), ",".join(config.partition_fields), C.split_fields))
    if config.ordering_fields:
        checks.append(((C.ORDERING_FIELDS.key, C.PRECOMBINE_FIELD.key), ",".join(config.ordering_fields), C.split_fields))
    if config.record_merge_mode:
        checks.append(((C.RECORD_MERGE_MODE.key, *C.RECORD_MERGE_MODE.aliases), config.record_merge_mode, upper))
    if table_keygen:
        checks.append(((C.KEYGENERATOR_TYPE.key,), table_keygen, keygen_type))
        given_class = (o.get(C.KEYGENERATOR_CLASS.key) or "").strip()
        if given_class in C.KEYGEN_CLASS_TYPES and C.KEYGEN_CLASS_TYPES[given_class] != keygen_type(table_keygen):
            raise ConfigError(f"option {C.KEYGENERATOR_CLASS.key}={given_class!r} does not match the table's key "
                              f"generator, {table_keygen} (a table property, fixed when the table was created)")
    for keys, value, norm in checks:
        for k in keys:
            given = o.get(k)
            if given is not None and given.strip() and value is not None and norm(given) != norm(value):
                raise ConfigError(f"option {k}={given!r} does not match the table's {value!r} (a table property, "
                                  "fixed when the table was created)")
    fixed = {
        C.RECORDKEY_FIELD: ",".join(config.record_key_fields),
        C.PARTITIONPATH_FIELD: ",".join(config.partition_fields),
        C.HIVE_STYLE_PARTITIONING: str(config.hive_style_partitioning).lower(),
        C.URL_ENCODE_PARTITIONING: str(config.url_encode_partitioning).lower(),
    }
    if config.ordering_fields:
        fixed[C.ORDERING_FIELDS] = ",".join(config.ordering_fields)
    if config.key_generator_type:
        fixed[C.KEYGENERATOR_TYPE] = config.key_generator_type
    elif config.key_generator_class:  # a table that records its class only: the class decides the key encoding
        fixed[C.KEYGENERATOR_CLASS] = config.key_generator_class
    if config.record_merge_mode:
        fixed[C.RECORD_MERGE_MODE] = config.record_merge_mode
    for k, v in fixed.items():
        o[k] = v
    if not (o.get(C.INDEX_TYPE) or "").strip():
        o[C.INDEX_TYPE] = default_index_type(config, o, timeline)
    return o


def default_index_type(config: TableConfig, options: Mapping[str, str], timeline: ActiveTimeline) -> str:
    """The index used when ``hoodie.index.type`` is not given: RECORD_INDEX for a table that has (or is
    building) a record index, and for a new table with the metadata table on (unless
    ``hoodie.metadata.record.index.enable=false``); Hudi's default, SIMPLE, for other existing tables."""
    if RECORD_INDEX in config.metadata_partitions or RECORD_INDEX in config.metadata_partitions_inflight:
        return "RECORD_INDEX"
    rli_off = str(options.get(C.RECORD_INDEX_ENABLE, "")).strip().lower() == "false"
    if not timeline.completed_commits() and mdt_enabled(options) and not rli_off:
        return "RECORD_INDEX"
    return str(C.INDEX_TYPE.default)


@dataclass(frozen=True)
class StreamingCheckpoint:
    """A micro-batch of a stream (Hudi's streaming sink): its id is recorded in the commit's extra metadata under
    ``_hudi_streaming_sink_checkpoint`` for the stream's identifier, and a batch whose id is the last one committed
    for that identifier is skipped (exactly-once across retries and restarts; deletes are never skipped, as in
    Hudi); one below it is refused (:class:`~pyhudi.errors.StreamingCheckpointError`) unless
    ``pyhudi.streaming.skip.older.batches`` skips it."""

    identifier: str
    batch_id: int

    def extra_metadata(self) -> dict[str, str]:
        return {STREAMING_CHECKPOINT_KEY: json.dumps({self.identifier: str(self.batch_id)})}


def last_streaming_batch(timeline: ActiveTimeline | ArchivedTimeline, identifier: str) -> tuple[int, str] | None:
    """(batch id, instant) of the latest completed write that records a batch of stream ``identifier``."""
    for inst in reversed(timeline.completed().by_action(COMMIT, DELTA_COMMIT, REPLACE_COMMIT).by_completion_time()):
        try:
            batch = streaming_checkpoint(timeline.read_commit_metadata(inst).get("extraMetadata"), identifier)
        except ValueError as e:
            where = timeline.path_of(inst) if isinstance(timeline, ActiveTimeline) else (
                f"archived instant {inst.requested_time} ({inst.action})")
            raise CorruptFileError(where, f"{e}: the stream's last committed batch cannot be known") from None
        if batch is not None:
            return batch, inst.requested_time
    return None


def _batch_id(value: Any) -> int:
    """A micro-batch id as Spark numbers them: an integer from 0."""
    try:
        if isinstance(value, bool):
            raise TypeError
        batch = operator.index(value)
    except TypeError:
        raise ConfigError(f"batch_id must be a micro-batch id, an integer from 0; got {value!r}") from None
    if batch < 0:
        raise ConfigError(f"batch_id must be a micro-batch id, an integer from 0; got {batch}")
    return batch


class _BatchAlreadyCommitted(PyHudiError):
    """The streaming batch was committed meanwhile (by another attempt of the same batch)."""


class WriteTransaction:
    """One write into the table at ``base_path``: see the module docstring for its steps."""

    def __init__(self, storage: Storage, base_path: str, options: Mapping[str, str], *, progress: bool = False) -> None:
        self.storage = storage
        self.base_path = base_path.rstrip("/")
        self.options = dict(options)
        self.progress = progress
        self.concurrency = Concurrency.from_options(self.options)
        self.lock: LockProvider = lock_provider(storage, self.base_path, self.options,
                                                needed=self.concurrency.optimistic)
        self.fault_spec = faults.spec(self.options)
        self.instant: str | None = None
        self.heartbeat: Heartbeat | None = None
        self.begun: ActiveTimeline | None = None  # the timeline this write is based on
        self.archive_version = 0  # the LSM timeline's version when it began
        self.pending: Instant | None = None
        self.completed: Instant | None = None
        self.metadata_writer: MetadataWriter | None = None
        self.metadata_partitions_dropped: list[str] = []
        self.checkpoint: StreamingCheckpoint | None = None
        prefix = str(C.COMMITMETA_KEY_PREFIX.get(self.options) or "")
        #: written into the commit's extraMetadata (Hudi copies options with the commit-metadata key prefix)
        self.extra_metadata = {k: v for k, v in self.options.items() if prefix and k.startswith(prefix)}

    # -- table state ------------------------------------------------------------------------------------------
    def config(self) -> TableConfig:
        return read_table_config(self.storage, posixpath.join(self.base_path, METAFOLDER))

    @functools.cached_property
    def gen(self) -> InstantTimeGenerator:
        """This transaction's instant times, in the table's timeline zone."""
        return InstantTimeGenerator.for_table(self.config())

    def writer_status(self, instant: str) -> WriterStatus:
        """Whether the write holding ``instant`` is live or has failed (:func:`~pyhudi.txn.heartbeat.writer_status`)."""
        return writer_status(self.storage, self.base_path, instant, self.concurrency.heartbeat, zone=self.gen.zone)

    def timeline(self) -> ActiveTimeline:
        return ActiveTimeline.load(self.storage, self.base_path, self.config())

    # -- the write ---------------------------------------------------------------------------------------------
    def write(self, df: DataFrame, operation: str, *, batch_id: int | None = None) -> WriteResult:
        """Run ``operation`` on ``df`` as this transaction's instant. ``batch_id``: the micro-batch of a stream
        (:class:`StreamingCheckpoint`, identifier from ``hoodie.datasource.write.streaming.checkpoint.identifier``)."""
        t0 = time.perf_counter()
        check_writable(self.base_path, self.config(), f"a write ({operation})",
                       mor_supported=operation in MOR_OPERATIONS, storage=self.storage)
        given_op = self.options.get(C.OPERATION)
        if given_op is not None and given_op.strip().lower() not in C.OPERATIONS:
            raise ConfigError(
                f"option {C.OPERATION} has unknown value {given_op!r}; expected one of {', '.join(C.OPERATIONS)}"
            )
        self.options[C.OPERATION] = operation
        wc = C.WriteConfig.from_options(self.options)
        BloomFilter.from_config(self.options)  # footer bloom filter options: a bad value fails before any write
        ParquetOptions.from_options(self.options)  # base file options, read in the write tasks
        mdt_enabled(self.options)  # a bad hoodie.metadata.enable is an error before anything is written
        mdt_max_delta_commits(self.options)
        mdt_max_delta_commits_when_pending(self.options)
        # the services after the commit: a bad option of theirs would fail the write once it committed
        compact_inline(self.options)
        auto_archive_enabled(self.options)
        ArchiveOptions.from_options(self.options)
        if self.config().is_mor:
            _check_mor_write(self.base_path, self.config(), wc, self.options, self.timeline())
        from pyhudi.spark.session import arrow_schema

        incoming = arrow_schema(df, f"write to {self.base_path}")
        if batch_id is not None:
            batch_id = _batch_id(batch_id)
            self.checkpoint = StreamingCheckpoint(str(C.STREAMING_CHECKPOINT_IDENTIFIER.get(self.options)), batch_id)
            self.extra_metadata.update(self.checkpoint.extra_metadata())
        began = self.begin(spark=df.sparkSession)
        if began is None:  # the streaming batch was committed before
            return self._skipped(operation, t0)
        timeline = began
        try:
            cfg = self.config()
            if timeline.completed_commits():
                base_schema = table_schema(self.storage, self.base_path, cfg, timeline)
            else:
                base_schema = avro_to_arrow(cfg.create_schema) if cfg.create_schema else incoming
            data_schema = base_schema
            check_key_types(base_schema, incoming, [*cfg.record_key_fields, *cfg.partition_fields],
                            f"write to {self.base_path}")
            if wc.operation != "delete":
                # the writer schema: new columns, promotions, reconciliation (pyhudi.table.evolution); bad input
                # is refused here, before anything is written
                data_schema = writer_schema(base_schema, incoming, reconcile=wc.reconcile_schema,
                                            where=f"write to {self.base_path}")
            job = WriteJob(
                spark=df.sparkSession,
                storage=self.storage,
                base_path=self.base_path,
                table_name=cfg.table_name,
                config=wc,
                instant="",  # reserved when the write starts
                timeline=timeline,
                view=table_view(self.storage, self.base_path, cfg, timeline),
                data_schema=data_schema,
                base_schema=base_schema,
                merge_on_read=cfg.is_mor,
            )
            producer = PRODUCERS[wc.operation](job)
            producer.validate_columns(df.schema)
            job.progress = Progress(df.sparkSession, enabled=self.progress)
            with job.progress:
                try:
                    result = producer.run(df, before_write=lambda: self.start(producer))
                    with job.timed("commit"):
                        self.commit(producer, result.stats)
                finally:
                    try:
                        producer.unpersist()
                    except Exception:  # cached data only: never in place of the write's outcome
                        log.warning("%s: write %s: freeing its cached DataFrames failed", self.base_path,
                                    self.instant, exc_info=True)
                self.post_commit(wc, job)
        except _BatchAlreadyCommitted as e:
            self.abort(e)
            return self._skipped(operation, t0)
        except BaseException as e:
            self.abort(e)
            raise
        job.timings["total"] = time.perf_counter() - t0
        result.timings = job.timings
        result.metadata_partitions_dropped = list(self.metadata_partitions_dropped)
        return result

    def _skipped(self, operation: str, t0: float) -> WriteResult:
        assert self.checkpoint is not None
        cp = self.checkpoint
        return WriteResult(instant="", operation=operation, timings={"total": time.perf_counter() - t0},
                           skipped=f"batch {cp.batch_id} of stream {cp.identifier!r} was committed before")

    def _batch_committed(self, tl: ActiveTimeline, *, at_commit: bool = False) -> bool:
        """The streaming batch was committed before. A replayed delete runs again, as in Hudi; a batch older than
        the stream's last (a delete too: its commit would record the older id as the stream's last, and the
        upserts of that batch would then be skipped as replays) is refused unless the options skip it.
        ``at_commit``: checked again under the lock, after the write's files were written."""
        cp = self.checkpoint
        if cp is None:
            return False
        last = last_streaming_batch(tl, cp.identifier)
        if last is None and self._archive_version() > 0:
            # the stream's last commit may have been archived (other writers committed many times since): a
            # replayed batch found only there is skipped too (Hudi's sink reads the active timeline only)
            last = last_streaming_batch(ArchivedTimeline.load(self.storage, self.base_path, self.config()),
                                        cp.identifier)
        if last is None or last[0] < cp.batch_id:
            return False
        batch, instant = last
        if batch == cp.batch_id:  # a replay: the query stopped after this write committed, before Spark knew
            if self.options.get(C.OPERATION) == "delete":
                return False
            log.info("%s: batch %d of stream %r was committed by %s: skipped", self.base_path, batch, cp.identifier,
                     instant)
            return True
        if not C.bool_option(self.options, C.STREAMING_SKIP_OLDER_BATCHES):
            raise StreamingCheckpointError(
                f"{self.base_path}: micro-batch {cp.batch_id} of stream {cp.identifier!r} is older than batch {batch}, "
                f"which {instant} committed: this query's checkpoint is not the one that wrote the stream's batches "
                "(a new checkpoint location, or another query with the same identifier), and skipping its batches "
                f"would drop their records; {'the write was rolled back' if at_commit else 'nothing was written'}. "
                "Give the query an identifier of its own "
                f"({C.STREAMING_CHECKPOINT_IDENTIFIER.key}), or, for a query restarted from an older copy of its own "
                f"checkpoint, set {C.STREAMING_SKIP_OLDER_BATCHES.key}=true to skip the batches committed before"
            )
        log.warning("%s: micro-batch %d of stream %r is older than batch %d, which %s committed: skipped (%s)",
                    self.base_path, cp.batch_id, cp.identifier, batch, instant, C.STREAMING_SKIP_OLDER_BATCHES.key)
        return True

    # -- 1. begin ----------------------------------------------------------------------------------------------
    def begin(self, spark: Any = None) -> ActiveTimeline | None:
        """Deal with failed writes (and, in a merge-on-read table, resume a compaction that died); returns the
        timeline the write is based on (None: the streaming batch was committed before, nothing to do)."""
        with self.lock.held():
            tl = self.timeline()
            if self.concurrency.failed_writes == EAGER:
                self._roll_back_failed_writes(tl, refuse_live=not self.concurrency.optimistic)
                tl = tl.reload()
            if spark is not None and self.config().is_mor and tl.by_action(COMPACTION).pending():
                self.resume_compactions(spark, tl)
                tl = tl.reload()
            if self._batch_committed(tl):
                return None
            self.archive_version = self._archive_version()
        self.begun = tl
        return tl

    def _archive_version(self) -> int:
        return LsmHistory.for_table(self.storage, self.base_path, self.config()).latest_version()

    def _history_since_begin(self, now: ActiveTimeline) -> FullTimeline | None:
        """``now`` with the archived instants when archival ran since the write began (None: it did not): a
        write that completed meanwhile may already be archived, and is still a write to check against."""
        if self._archive_version() == self.archive_version:
            return None
        return FullTimeline(now, ArchivedTimeline.load(self.storage, self.base_path, self.config()))

    def _roll_back_failed_writes(self, tl: ActiveTimeline, *, refuse_live: bool) -> None:
        """Roll back the pending writes whose heartbeat says they failed; with ``refuse_live``, a live one makes
        this write fail instead (single-writer mode)."""
        statuses = {
            i.requested_time: self.writer_status(i.requested_time)
            for i in tl.pending() if i.action in ROLLBACK_ACTIONS
        }
        live = {t: s for t, s in statuses.items() if not s.is_dead}
        if len(live) < len(statuses):  # a rollback commit is coming
            check_not_schema_on_read(self.storage, self.base_path, "rolling back failed writes")
        if live and refuse_live:
            t, s = sorted(live.items())[0]
            raise ConcurrentWriterError(
                f"another writer holds instant {t} on {self.base_path} ({s.reason}); set "
                f"{C.WRITE_CONCURRENCY_MODE}={OCC} to write concurrently"
            )
        done = rollback_failed_writes(self.storage, self.base_path, tl, self.gen,
                                      is_failed=lambda i: statuses[i.requested_time].is_dead)
        for r in done:
            delete_heartbeat(self.storage, self.base_path, r.rolled_back)
        # heartbeats left by writers that died after completing (or whose rollback finished) go too
        now = tl.reload()
        for t in heartbeat_instants(self.storage, self.base_path):
            inst = now.get(t)
            if (inst is None or inst.is_completed) and self.writer_status(t).is_dead:
                delete_heartbeat(self.storage, self.base_path, t)

    def _reserve(self, tl: ActiveTimeline) -> None:
        self.heartbeat = Heartbeat.reserve_next(self.storage, self.base_path, self.gen, tl.latest_time(),
                                                self.concurrency.heartbeat)
        self.instant = self.heartbeat.instant

    # -- 2. start ----------------------------------------------------------------------------------------------
    def start(self, producer: WriteProducer) -> None:
        """The input is validated and the write planned: prepare the metadata table, then put the instant on the
        timeline (requested, inflight). Data files come after this."""
        assert self.begun is not None
        faults.at("before_start", self.fault_spec)
        tl = self.begun
        with self.lock.held():
            # the metadata table is brought in line with the table as it is now, not as it was when the write
            # began: an async index build may have been scheduled, and other writes may have completed, since
            now = tl.reload()
            self._reserve(now)
            assert self.heartbeat is not None and self.instant is not None
            self.heartbeat.start()
            producer.job.instant = self.instant
            writer = MetadataWriter(self.storage, self.base_path, self.config())
            reconciled = writer.reconcile(self.options, now, producer.job.data_schema)
            self.metadata_partitions_dropped = list(writer.dropped)
            if reconciled is not None:
                self.metadata_writer = writer
                producer.job.stats_columns = writer.stats_columns
                if writer.needs_record_index(self.options):
                    build_record_index(writer, now, self.options, spark=producer.job.spark)
        requested = tl.create_requested(producer.action, self.instant, producer.requested_metadata())
        self.pending = requested
        self.pending = tl.transition_to_inflight(requested, producer.inflight_metadata())

    # -- 4. commit ---------------------------------------------------------------------------------------------
    def commit(self, producer: WriteProducer, stats: list[WriteStat]) -> Instant:
        """Check, apply the metadata deltacommit and complete the instant (see the module docstring)."""
        assert self.instant is not None and self.begun is not None and self.heartbeat is not None
        if not table_config_exists(self.storage, posixpath.join(self.base_path, METAFOLDER)):
            raise PyHudiError(f"{self.base_path}: the table was removed while write {self.instant} ran (a first "
                              "write that failed removes the table it created); the write is abandoned")
        metadata = producer.commit_metadata(stats)
        job = producer.job
        t0 = time.perf_counter()
        try:
            self._commit_locked(producer, stats, metadata, job, t0)
        except Exception as e:
            if self.completed is None:
                raise
            # the instant completed: a lock that could not be released is not a failed write
            try:
                self.lock.unlock()
            except Exception:
                log.warning("%s: write %s committed, then releasing the table lock failed (%s: %s): %s stays, and "
                            "other writers wait for it until this process ends (or, with "
                            "hoodie.write.lock.filesystem.expire set, it expires)", self.base_path, self.instant,
                            type(e).__name__, e, self.lock.holder())
        self._tidy_after_commit()
        faults.at("after_data_commit", self.fault_spec)
        assert self.completed is not None
        return self.completed

    def _tidy_after_commit(self) -> None:
        """The completed write's markers and heartbeat go. A failure here does not fail the write, which committed
        (its caller would write its records again): as Hudi's ``quietDeleteMarkerDir``, a warning names what stayed,
        and the next writer's rollback pass deletes the markers of an instant that is no longer pending."""
        assert self.instant is not None and self.heartbeat is not None
        for what, tidy in (("markers", lambda: markers.delete_markers(self.storage, self.base_path, self.instant)),
                           ("heartbeat", self.heartbeat.stop)):
            try:
                tidy()
            except Exception as e:
                log.warning("%s: write %s committed; deleting its %s failed (%s: %s)", self.base_path,
                            self.instant, what, type(e).__name__, e)

    def _commit_locked(self, producer: WriteProducer, stats: list[WriteStat], metadata: dict[str, Any], job: WriteJob,
                       t0: float) -> None:
        """:meth:`commit` under the table lock: the checks, the metadata deltacommit, the completion."""
        assert self.instant is not None and self.begun is not None and self.heartbeat is not None
        with self.lock.held():
            t1 = time.perf_counter()
            job.timings["lock_wait"] = job.timings.get("lock_wait", 0.0) + t1 - t0
            self.heartbeat.check()
            now = self.begun.reload()
            if self.pending is None or not any(
                i.requested_time == self.instant and not i.is_completed for i in now.all_instant_files
            ):
                raise PyHudiError(f"{self.base_path}: instant {self.instant} left the timeline (rolled back by "
                                  "another writer?); the write is abandoned")
            rolling_back = pending_rollback_of(now, self.instant)
            if rolling_back is not None:  # taken for dead while it stalled: the rollback may have deleted files
                raise PyHudiError(f"{self.base_path}: rollback {rolling_back.requested_time} of instant {self.instant} "
                                  "is pending (its heartbeat expired while the write stalled, and another process "
                                  "began rolling it back); the write is abandoned")
            self._check_not_turned_schema_on_read(now)
            history = self._history_since_begin(now)
            self._check_concurrent(now, metadata, history, job)
            self._check_later_instants(now, job)
            self._check_new_keys(now, producer, history)
            if self._batch_committed(now, at_commit=True):  # another attempt of this batch committed meanwhile
                raise _BatchAlreadyCommitted(f"{self.base_path}: {self.checkpoint} was committed meanwhile")
            metadata["extraMetadata"] = {**(metadata.get("extraMetadata") or {}), **self.extra_metadata}
            job.timings["commit_checks"] = time.perf_counter() - t1
            if self.metadata_writer is not None:
                self.metadata_writer.data_config = self.config()
                rli = None
                if getattr(producer, "status_df", None) is not None:
                    rli = record_index_updates(self.storage, self.base_path, producer.status_df, job.spark,
                                               self.instant, changed=producer.index_changes,
                                               deleted=producer.index_deletes,
                                               locations=sorted({(s.partition, s.file_id) for s in stats
                                                                 if s.num_inserts}))
                from pyhudi.metadata.column_stats import decode_cells

                cells = [{"key": k, "value": v} for st in stats for k, v in st.column_stats]
                self.metadata_writer.apply_commit(self.instant, metadata, extra=rli,
                                                  column_stats=decode_cells(cells), data_timeline=now)
            # after every Spark job of the write (the record-index update may recompute write tasks)
            markers.reconcile_against_markers(self.storage, self.base_path, self.instant, metadata)
            faults.at("before_data_commit", self.fault_spec)
            try:
                self.completed = now.complete(self.pending, metadata, self.gen.next(floor=now.latest_time()))
            except Exception:
                # the completed file may have been written all the same (an object store's reply lost): then
                # the write committed, and saying otherwise would have its caller write its records again
                self.completed = next((i for i in now.reload().completed() if i.requested_time == self.instant),
                                      None)
                if self.completed is None:
                    raise
                log.warning("%s: completing write %s reported an error, but its completed instant is on the "
                            "timeline: the write committed", self.base_path, self.instant, exc_info=True)

    def _check_not_turned_schema_on_read(self, now: ActiveTimeline) -> None:
        """Under the lock, before the write completes: a table that became schema-on-read while it ran (Hudi's
        ``ALTER TABLE`` is a commit without files, with a history file in ``.hoodie/.schema``) is refused, as at
        its start; its files keep the names they were written with and would be read by another schema's. The
        folder is listed only when another instant is pending, or completed since the write began."""
        assert self.begun is not None
        before = {i.requested_time for i in self.begun.completed()}
        if any(i.requested_time != self.instant and i.requested_time not in before for i in now.all_instant_files):
            check_not_schema_on_read(self.storage, self.base_path, f"committing the write {self.instant}")

    def _check_schema(self, now: ActiveTimeline, metadata: dict[str, Any], job: WriteJob) -> None:
        """A write committed meanwhile changed the table's schema: a write that did not evolve it commits with the
        new schema (its files read through it as any older file); one that evolved it too is a conflict."""
        assert self.instant is not None
        latest = table_schema(self.storage, self.base_path, self.config(), now)
        if job.base_schema is None or latest == job.base_schema:
            return
        if job.data_schema != job.base_schema:
            raise ConcurrentSchemaConflict(self.base_path, self.instant)
        extra = dict(metadata.get("extraMetadata") or {})
        extra["schema"] = commit_schema_json(latest, job.table_name)
        metadata["extraMetadata"] = extra

    def _check_later_instants(self, now: ActiveTimeline, job: WriteJob) -> None:
        """A write that evolves the schema fails when a commit with a later instant completed since it began (a
        write that began after it, a compaction planned meanwhile): readers take the schema of the commit with the
        latest instant, so this write's new columns would be read by none. Retried, it gets a later instant."""
        assert self.instant is not None and self.begun is not None
        if job.base_schema is None or job.data_schema == job.base_schema:
            return
        before = {i.requested_time for i in self.begun.completed()}
        later = [i for i in now.completed_commits() if i.requested_time > self.instant and i.requested_time not in before]
        if later:
            raise ConcurrentSchemaConflict(self.base_path, self.instant, f"{later[0].requested_time} ({later[0].action})")

    def _check_concurrent(self, now: ActiveTimeline, metadata: dict[str, Any], history: FullTimeline | None,
                          job: WriteJob) -> None:
        """``history``: :meth:`_history_since_begin` of ``now``."""
        assert self.instant is not None and self.begun is not None
        mine = Footprint.of(metadata)
        clustered = clustering_file_groups(now)  # a clustering planned meanwhile, in either mode
        if clustered:
            hit = sorted(mine.shared_with(Footprint(frozenset(clustered))))
            if hit:
                raise ClusteringConflict(self.base_path, self.instant, clustered[hit[0]], hit, rolled_back=True)
        if self.concurrency.optimistic:
            found = find_conflict(self.begun, now, self.instant, mine, history)
            if found is not None:
                other, groups = found
                raise ConcurrentWriteConflict(self.base_path, self.instant, other, sorted(groups))
            if completed_writes_since(self.begun, now, self.instant, history):
                self._check_schema(now, metadata, job)
            return
        others = completed_writes_since(self.begun, now, self.instant, history)
        if others:
            raise ConcurrentWriterError(
                f"another writer committed {others[0].requested_time} ({others[0].action}) on {self.base_path} while "
                f"write {self.instant} ran; {self.instant} was rolled back: set {C.WRITE_CONCURRENCY_MODE}={OCC} to "
                "write concurrently"
            )

    def _check_new_keys(self, now: ActiveTimeline, producer: WriteProducer, history: FullTimeline | None) -> None:
        """Optimistic writers that both insert a new key, into file groups of their own (other partitions, new file
        groups), share no file group; committed both, the table would hold the key twice (Apache Hudi's file-group
        check lets them). With a record index, a write that looked its keys up (an upsert), or whose index makes
        a key unique in the table (an ``insert_overwrite`` with the global record index, which counts only keys
        held in the file groups those writes inserted into), looks the keys it inserts up again under the lock
        once a write that inserted records completed since it began: one held now was inserted meanwhile, and
        this write fails with :class:`ConcurrentKeyConflict` naming it. Tables without a record index keep Hudi's
        behaviour."""
        assert self.instant is not None and self.begun is not None
        status_df = getattr(producer, "status_df", None)
        if not self.concurrency.optimistic or not producer.inserts_unique_keys or status_df is None:
            return
        source: Timeline = history if history is not None else now
        inserted: dict[str, set[str]] = {}  # other instant -> the file ids it inserted into
        for other in completed_writes_since(self.begun, now, self.instant, history):
            md = source.read_commit_metadata(other)  # type: ignore[attr-defined]
            fids = {str(st.get("fileId")) for sts in (md.get("partitionToWriteStats") or {}).values()
                    for st in sts or () if st.get("numInserts")}
            if fids:
                inserted[f"{other.requested_time} ({other.action})"] = fids
        if not inserted or (producer.index_changes is not None and producer.index_changes == producer.index_deletes):
            return
        lookup = record_index_lookup(self.storage, self.base_path, now, self.config())
        if lookup is None:
            return
        # a write that did not look its keys up (an overwrite) may find the keys it writes again where they were
        # stored before it: only those in file groups the writes of meanwhile inserted into count
        within = None if producer.uses_index else set().union(*inserted.values())
        held = new_keys_held(lookup, status_df, producer.index_changes, within=within)
        if held:
            by = next((o for o, fids in inserted.items() if held[0][2] in fids), next(iter(inserted)))
            raise ConcurrentKeyConflict(self.base_path, self.instant, by, held)

    # -- failure -----------------------------------------------------------------------------------------------
    def abort(self, error: BaseException) -> None:
        """The write failed: see the module docstring for what stays behind."""
        hb = self.heartbeat
        if hb is None or self.completed is not None:
            return
        if self.pending is None:  # nothing reached the timeline: the reservation goes
            with contextlib.suppress(Exception):
                hb.stop()
            return
        if isinstance(error, (ConcurrentWriteConflict, ConcurrentWriterError, _BatchAlreadyCommitted,
                              StreamingCheckpointError)) and (
            self.instant is not None
        ):
            try:
                with self.lock.held():
                    rollback_instant(self.storage, self.base_path, self.instant, self.gen, missing_ok=True)
                hb.stop()
                return
            except Exception:  # left for the next writer, as any failed write
                pass
        if self.instant is not None:
            with contextlib.suppress(Exception):  # else left for the next rollback pass (delete_orphan_markers)
                if self._drop_files_of_rolled_back_instant():
                    hb.stop()
                    return
        hb.abort()

    def _drop_files_of_rolled_back_instant(self) -> bool:
        """Whether this write's instant was rolled back by another writer (gone from the timeline, this write
        having stalled past its heartbeat); if so, the files its tasks wrote since are deleted here, as no rollback
        will come for them."""
        assert self.instant is not None and self.begun is not None
        with self.lock.held():
            if any(i.requested_time == self.instant for i in self.begun.reload()):
                return False
            delete_rolled_back_files(self.storage, self.base_path, self.instant)
            markers.delete_markers(self.storage, self.base_path, self.instant)
        return True

    # -- 5. post-commit services -------------------------------------------------------------------------------
    def post_commit(self, wc: C.WriteConfig, job: WriteJob) -> None:
        writer = self.metadata_writer
        if self.concurrency.failed_writes == LAZY:
            with self._service(job, "rollback"):
                self._roll_back_failed_writes(self.timeline(), refuse_live=False)
        if job.merge_on_read and compact_inline(self.options):
            with self._service(job, "compaction"):
                tl = self.timeline()
                if deltacommits_since_compaction(tl) >= C.int_option(self.options, C.COMPACT_INLINE_MAX_DELTA_COMMITS, 1):
                    self.compact(job.spark, parallelism=job.parallelism)
        if wc.auto_clean:
            with self._service(job, "clean"):
                self.clean(wc.cleaner_commits_retained)
        if writer is not None:
            with self._service(job, "metadata_compaction"):
                tl = self.timeline()
                writer.maybe_compact(tl, mdt_max_delta_commits(self.options), self.gen.next(floor=tl.latest_time()),
                                     mdt_max_delta_commits_when_pending(self.options))
        if auto_archive_enabled(self.options):
            with self._service(job, "archive"):
                archive(self.storage, self.base_path, self.config(), self.options)

    @contextlib.contextmanager
    def _service(self, job: WriteJob, name: str) -> Iterator[None]:
        """A post-commit service, timed, under the lock; its failure is a :class:`PostCommitError` saying the
        write committed (a caller retrying the write would write its records twice)."""
        assert self.completed is not None
        try:
            with job.timed(name), self.lock.held():
                yield
        except Exception as e:
            raise PostCommitError(self.base_path, self.completed.requested_time, name.replace("_", " "), e) from e

    # -- compaction (merge-on-read tables) ---------------------------------------------------------------------
    def compact(self, spark: Any, *, parallelism: int = 0) -> Instant | None:
        """Schedule and run a compaction of every latest file slice with log files; None when there is none. The
        caller holds the lock."""
        tl = self.timeline()
        t = self.gen.next(floor=tl.latest_time())
        view = table_view(self.storage, self.base_path, self.config(), tl)
        # the heartbeat before the plan: another process never sees this compaction without one
        heartbeat = Heartbeat(self.storage, self.base_path, t, self.concurrency.heartbeat)
        heartbeat.beat()
        try:
            scheduled = schedule_compaction(tl, view, t)
        except BaseException:
            heartbeat.stop()
            raise
        if scheduled is None:
            heartbeat.stop()
            return None
        return self._run_compaction(spark, tl.reload(), t, parallelism, heartbeat)

    def resume_compactions(self, spark: Any, tl: ActiveTimeline, parallelism: int = 0) -> list[Instant]:
        """Run again every pending compaction (one that died): its files and metadata-table deltacommit go first.
        The caller holds the lock."""
        done = []
        for inst in tl.by_action(COMPACTION).pending():
            t = inst.requested_time
            # pyhudi's compactions keep a heartbeat: one whose heartbeat is not dead runs in another process. One
            # without a heartbeat file (Apache Hudi keeps none for compactions) is run again, as before
            status = (self.writer_status(t)
                      if self.storage.exists(heartbeat_path(self.base_path, t)) else None)
            if status is not None and not status.is_dead:
                raise ConcurrentWriterError(
                    f"{self.base_path}: compaction {t} is running in another process ({status.reason}); it is "
                    "run again only once its heartbeat has expired or its process is gone")
            # a plan from elsewhere (another writer, a corrupt table) is checked before anything is undone or written
            compaction_operations(tl.read_plan(COMPACTION, t), tl.path_of(Instant(t, COMPACTION, State.REQUESTED)))
            delete_attempt_files(self.storage, self.base_path, t)
            writer = MetadataWriter(self.storage, self.base_path, self.config())
            if writer.exists:
                writer.rollback(t, completed=True)
            done.append(self._run_compaction(spark, tl.reload(), t, parallelism))
        return done

    def _run_compaction(self, spark: Any, tl: ActiveTimeline, t: str, parallelism: int,
                        heartbeat: Heartbeat | None = None) -> Instant:
        cfg = self.config()
        wc_opts = {k: v for k, v in self.options.items() if k in C.BASE_FILE_OPTIONS}
        codec = str(self.options.get(C.PARQUET_COMPRESSION, C.DEFAULTS[C.PARQUET_COMPRESSION])).strip().lower()
        writer = MetadataWriter(self.storage, self.base_path, cfg)
        stats_columns = writer.kept_stats_columns(tl) if writer.exists else None

        def on_commit(instant: str, metadata: dict[str, Any], cells: list[dict[str, Any]]) -> None:
            from pyhudi.metadata.column_stats import decode_cells

            check_not_schema_on_read(self.storage, self.base_path, f"completing the compaction {instant}")
            if writer.exists:
                writer.data_config = self.config()
                writer.apply_commit(instant, metadata, column_stats=decode_cells(cells))

        # the compaction's heartbeat, as a write's (``heartbeat``: written before the plan): another process
        # resumes it only once it is dead
        if heartbeat is None:
            heartbeat = Heartbeat(self.storage, self.base_path, t, self.concurrency.heartbeat)
            heartbeat.beat()
        heartbeat.start()
        try:
            done = execute_compaction(
                spark, self.storage, self.base_path, cfg, tl, t,
                parquet_options={**wc_opts, C.PARQUET_COMPRESSION: codec},
                parallelism=parallelism or max(2, spark.sparkContext.defaultParallelism),
                on_commit=on_commit, completion_time=lambda now: self.gen.next(floor=now.latest_time()),
                fault=self.fault_spec, stats_columns=stats_columns,
            )
        except BaseException:
            heartbeat.abort()
            raise
        heartbeat.stop()
        return done

    def clean(self, retained: int) -> Instant | None:
        """Clean with KEEP_LATEST_COMMITS (the metadata table records the deletions first); the caller holds the
        lock."""
        writer = MetadataWriter(self.storage, self.base_path, self.config())
        return run_clean(self.storage, self.base_path, self.timeline(), retained, self.gen,
                         on_delete=writer.apply_clean if writer.exists else None,
                         before_plan=lambda: check_not_schema_on_read(self.storage, self.base_path, "cleaning"))


def _check_mor_write(base_path: str, config: TableConfig, wc: C.WriteConfig, options: Mapping[str, str],
                     timeline: ActiveTimeline) -> None:
    """Refuse, before anything is written, what pyhudi does not make exactly in a merge-on-read table."""
    if wc.index_type not in MOR_INDEX_TYPES:
        raise UnsupportedTableError(mor_refusal(base_path, f"a write with {C.INDEX_TYPE}={wc.index_type} (use "
                                                           f"{' or '.join(MOR_INDEX_TYPES)})"))
    has_rli = RECORD_INDEX in config.metadata_partitions or RECORD_INDEX in config.metadata_partitions_inflight
    if has_rli and wc.index_type != "RECORD_INDEX":
        raise UnsupportedTableError(mor_refusal(base_path, f"a write with {C.INDEX_TYPE}={wc.index_type} into a "
                                                           "table with a record index (use RECORD_INDEX)"))
    if wc.index_type == "RECORD_INDEX" and not has_rli and timeline.completed_commits():
        raise UnsupportedTableError(mor_refusal(base_path, "a write with RECORD_INDEX into a table without a "
                                                           "record index (building one is refused too)"))
    if not has_rli and rli_enabled(options) and timeline.completed_commits():
        raise UnsupportedTableError(mor_refusal(base_path, "building the record index"))
    pending = [i for i in timeline.pending() if i.action in (LOG_COMPACTION, CLUSTERING)]
    if pending:
        raise UnsupportedTableError(mor_refusal(base_path, f"a write while the {pending[0].action} "
                                                           f"{pending[0].requested_time} is pending"))


# -- table services as operations of their own ---------------------------------------------------------------------
def _service_options(options: Mapping[str, str] | None) -> dict[str, str]:
    """A table service's options as strings; an option pyhudi knows but does not honour with the value given (a
    cleaning policy other than KEEP_LATEST_COMMITS, ...) is refused, as for a write, before anything is done."""
    opts = {k: str(v) for k, v in (options or {}).items()}
    C.check_honoured(opts)
    return opts


def clean_table(storage: Storage, base_path: str, options: Mapping[str, str] | None = None) -> Instant | None:
    """``pyhudi clean``: roll back failed writes whose heartbeat expired (or whose process is gone), then clean
    (KEEP_LATEST_COMMITS, ``hoodie.cleaner.commits.retained``), under the table lock when the concurrency mode
    needs one. Returns the completed clean instant, None when nothing needed deleting."""
    opts = _service_options(options)
    tx = WriteTransaction(storage, base_path, opts)
    check_writable(tx.base_path, tx.config(), "cleaning", mor_supported=True, storage=tx.storage)
    with tx.lock.held():
        tx._roll_back_failed_writes(tx.timeline(), refuse_live=False)
        return tx.clean(C.int_option(opts, C.CLEANER_COMMITS_RETAINED, 1))


def archive_table(storage: Storage, base_path: str, options: Mapping[str, str] | None = None) -> ArchiveResult:
    """``pyhudi archive``: archive the table's old instants, then its metadata table's, into their LSM timelines
    (:mod:`pyhudi.services.archive`, the rules every commit applies with ``hoodie.archive.automatic``), under the
    table lock when the concurrency mode needs one. A run that crashed is finished first."""
    opts = _service_options(options)
    tx = WriteTransaction(storage, base_path, opts)
    check_writable(tx.base_path, tx.config(), "archival", mor_supported=True, storage=tx.storage)
    with tx.lock.held():
        return archive(tx.storage, tx.base_path, tx.config(), opts)


def compact_inline(options: Mapping[str, str]) -> bool:
    """``hoodie.compact.inline``; unset: true (the table is merge-on-read)."""
    return C.COMPACT_INLINE.get(options) is None or C.bool_option(options, C.COMPACT_INLINE)


def compact_table(storage: Storage, base_path: str, spark: Any, options: Mapping[str, str] | None = None
                  ) -> list[Instant]:
    """``pyhudi compact``: under the table lock when the concurrency mode needs one, roll back failed writes, run
    again compactions that died, then compact every latest file slice with log files. Returns the completed
    compaction instants (empty: nothing to compact)."""
    opts = _service_options(options)
    tx = WriteTransaction(storage, base_path, opts)
    cfg = tx.config()
    check_writable(tx.base_path, cfg, "compaction", mor_supported=True, storage=tx.storage)
    if not cfg.is_mor:
        raise PyHudiError(f"{base_path} is a {cfg.table_type} table: only merge-on-read tables are compacted")
    with tx.lock.held():
        tl = tx.timeline()
        if tx.concurrency.failed_writes == EAGER:
            tx._roll_back_failed_writes(tl, refuse_live=not tx.concurrency.optimistic)
        done = tx.resume_compactions(spark, tx.timeline())
        new = tx.compact(spark)
        return [*done, *([new] if new is not None else [])]


def rollback_write(
    storage: Storage, base_path: str, instant: str, options: Mapping[str, str] | None = None
) -> RollbackResult:
    """``pyhudi rollback``: roll back the pending write ``instant`` (its files, its metadata-table deltacommit, its
    timeline files), under the table lock when the concurrency mode needs one. A write that is still live (its
    heartbeat fresh, its process running) is refused."""
    opts = _service_options(options)
    tx = WriteTransaction(storage, base_path, opts)
    check_writable(tx.base_path, tx.config(), "a rollback", mor_supported=True, storage=tx.storage)
    with tx.lock.held():
        tl = tx.timeline()
        inst = tl.get(instant)
        if inst is None:
            raise PyHudiError(f"{base_path}: no instant {instant} on the timeline")
        if inst.is_completed:
            raise PyHudiError(f"{base_path}: instant {instant} ({inst.action}) is completed; only pending writes "
                              "can be rolled back")
        if inst.action not in ROLLBACK_ACTIONS:
            raise PyHudiError(f"{base_path}: instant {instant} is a pending {inst.action}, not a write")
        status = tx.writer_status(instant)
        if not status.is_dead:
            raise ConcurrentWriterError(f"{base_path}: the write {instant} is live ({status.reason}); it can be "
                                        "rolled back once it failed")
        check_not_schema_on_read(storage, base_path, "a rollback")  # under the lock, as the rollback commits
        result = rollback_instant(storage, base_path, instant, tx.gen, tl)
        delete_heartbeat(storage, base_path, instant)
        return result
