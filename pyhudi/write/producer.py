"""One producer class per write operation, on a shared base: prepare -> tag -> plan -> write -> commit.

The driver plans; Spark tasks do all file I/O on Arrow batches (key generation in ``mapInArrow``, each file
group written from its bucket's records, gathered in the write task: :func:`by_bucket`). The commit becomes
visible only when the completed instant is written, so a failure anywhere before leaves the table as it was (the
next write rolls the attempt back).
"""

from __future__ import annotations

import functools
import math
import posixpath
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from pyhudi import config as C
from pyhudi import faults
from pyhudi.errors import (
    ClusteringConflict,
    CorruptFileError,
    IndexAheadConflict,
    InvalidInputError,
    PyHudiError,
    file_groups_text,
)
from pyhudi.hfile.format import MAX_ROW_LENGTH
from pyhudi.index import index_for
from pyhudi.index.base import LOC_FILE_ID_COL, LOC_PARTITION_COL
from pyhudi.io.storage import Storage
from pyhudi.metadata.partitions import RECORD_INDEX, metadata_base_path
from pyhudi.spark import cached
from pyhudi.spark.errors import task_errors
from pyhudi.spark.frames import arrow_frame, held_rows, local_frame
from pyhudi.spark.partitioning import ROUTE_COL, KeyRouting, group_runs
from pyhudi.table.commit_metadata import (
    FileGroupKey,
    clustering_file_groups,
    commit_metadata,
    touched_file_groups,
    write_stat,
)
from pyhudi.table.evolution import conform_array
from pyhudi.table.filenames import make_file_id, new_file_id_prefix
from pyhudi.table.fsview import BaseFile
from pyhudi.table.keygen import EMPTY_PLACEHOLDER, NULL_PLACEHOLDER, KeyGenerator
from pyhudi.table.lsm_timeline import ArchivedTimeline
from pyhudi.table.partition_path import check_partition_path, nested_partitions
from pyhudi.table.schema import (
    INPUT_META_COLUMNS,
    IS_DELETED_COL,
    PARTITION_PATH_COL,
    RECORD_KEY_COL,
    commit_schema_json,
)
from pyhudi.table.timeline import COMMIT, DELTA_COMMIT, REPLACE_COMMIT
from pyhudi.write.append import APPEND, log_schema_json
from pyhudi.write.context import WriteJob
from pyhudi.write.executor import (
    BUCKET_COL,
    INSERT,
    OP_COL,
    OP_DELETE,
    OP_UPSERT,
    UPDATE,
    Bucket,
    WriteContext,
    write_bucket,
)
from pyhudi.write.status import STAT_COLUMNS, WRITE_STATUS_SCHEMA, WriteStat

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

FAULT_OPTION = C.FAULT  # test-only fault injection (pyhudi.faults)
_HASH_RANGE = 1 << 30


@dataclass
class WriteResult:
    instant: str
    operation: str
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    files_written: int = 0
    partitions: int = 0
    stats: list[WriteStat] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    #: why nothing was written: the streaming batch was committed before (exactly-once)
    skipped: str | None = None
    #: metadata partitions the write took out of the table before writing: indexes pyhudi does not maintain
    #: (column_stats, partition_stats, secondary and expression indexes of a Java-written table), so that no
    #: reader uses them stale
    metadata_partitions_dropped: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "instant": self.instant,
            "skipped": self.skipped,
            "operation": self.operation,
            "inserted": self.inserted,
            "updated": self.updated,
            "deleted": self.deleted,
            "files_written": self.files_written,
            "partitions": self.partitions,
            "metadata_partitions_dropped": list(self.metadata_partitions_dropped),
            "timings_s": {k: round(v, 3) for k, v in self.timings.items()},
        }


def prepare_task(keygen: KeyGenerator, delete_all: bool, data_cols: list[str], routing: KeyRouting | None = None,
                 types: list[pa.DataType] | None = None, ordered_by: tuple[str, ...] = (), combining: bool = True):
    """mapInArrow function: compute record key, partition path and the per-record operation (and, for an index
    that routes records to its tag tasks, :data:`ROUTE_COL`). ``types``: the writer schema's type of each data
    column (an input column narrower than the table's is promoted here, :mod:`pyhudi.table.evolution`).
    ``ordered_by``: the ordering fields no record may leave null (:meth:`WriteProducer._non_null_ordering`), for a
    write that ``combining`` records or not."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            # a delete may name a key longer than pyhudi writes, which a table without a record index can hold
            keys = keygen.record_keys(b, check_length=not delete_all)
            for f in ordered_by:
                if b.column(f).null_count:
                    raise _null_ordering(f, keys[pc.index(b.column(f).is_null(), True).as_py()].as_py(), combining)
            parts = keygen.partition_paths(b)
            n = b.num_rows
            if delete_all:
                ops = pa.array([OP_DELETE] * n, pa.string())
            elif IS_DELETED_COL in b.schema.names:
                flag = pc.fill_null(b.column(IS_DELETED_COL), False)
                ops = pc.if_else(flag, OP_DELETE, OP_UPSERT)
            else:
                ops = pa.array([OP_UPSERT] * n, pa.string())
            cols = [b.column(c) for c in data_cols]
            if types is not None:
                cols = [conform_array(a, t, "input", c) for a, t, c in zip(cols, types, data_cols, strict=True)]
            names = [*data_cols, RECORD_KEY_COL, PARTITION_PATH_COL, OP_COL]
            if routing is None:
                yield pa.RecordBatch.from_arrays([*cols, keys, parts, ops], names=names)
            else:
                yield pa.RecordBatch.from_arrays([*cols, keys, parts, ops, routing.route_column(keys)],
                                                 names=[*names, ROUTE_COL])

    return run


def _null_ordering(field: str, key: str, combining: bool) -> InvalidInputError:
    """A combining write orders the batch's records of a key by the field. Any write into a merge-on-read
    table: its readers could not order the record against a stored one (a null is Java's Integer 0, which a value
    of another class cannot be compared with), so the file slice could never be read or compacted."""
    why = ("a write that combines records orders them by it, and a null has no place in that order (Hudi's "
           "readers take it for Integer 0, which they cannot compare with a value of another type)") if combining else (
        "a merge-on-read table's readers order a file slice's records by it, and cannot order a null against a "
        "value of this type")
    return InvalidInputError(f"ordering field {field!r} (hoodie.table.ordering.fields) is null for record key "
                             f"{key!r}: {why}; nothing was written")


class WriteProducer:
    """Base of the per-operation producers."""

    operation_type = ""  # Hudi's WriteOperationType name recorded in the commit metadata
    action = COMMIT  # the timeline action of the write
    uses_index = True
    combine_option = "combine_before_upsert"
    delete_all = False
    fills_small_files = True
    sort_by_key = False
    # New file groups: False gives each its own random prefix (``<uuid>-0``, Hudi's upsert and insert buckets);
    # True numbers them under one random prefix per write (``<uuid>-0``, ``<uuid>-1``, ..., as Hudi's bulk insert
    # writers do). Record-index entries of files sharing a prefix differ only in the file index, so their
    # base HFiles compress to about a quarter fewer bytes per entry.
    numbered_file_ids = False

    @property
    def inserts_unique_keys(self) -> bool:
        """Whether the keys this write inserts must not be held elsewhere in the table (it looked them up, or
        its global index says a key is unique in the table): with optimistic concurrency, its commit checks that
        no write that completed meanwhile inserted them."""
        return self.uses_index

    def __init__(self, job: WriteJob) -> None:
        self.job = job
        self.cfg = job.config
        if job.merge_on_read and self.action == COMMIT:  # a merge-on-read table's writes are deltacommits
            self.action = DELTA_COMMIT
        #: inserted plus deleted keys of ``status_df`` (the record index's changes), when :meth:`write` counted them
        self.index_changes: int | None = None
        self.index_deletes: int | None = None  #: the deleted keys among them
        self._planned_rows = 0  # records of the tagged input (the plan's counts)
        self._file_id_prefix: str | None = None
        self._file_id_count = 0

    # -- driver-side pipeline -------------------------------------------------------------------------
    def run(self, df: DataFrame, before_write: Callable[[], None] | None = None) -> WriteResult:
        """Prepare, tag, plan, write. ``before_write`` runs once the input is validated (missing columns, null
        record keys) and the write planned, just before the first data file is written: the caller creates
        the requested/inflight instant there, so bad input leaves nothing on the timeline."""
        job = self.job
        with task_errors():
            with job.timed("prepare"):
                if held_rows(df) >= LOCAL_INPUT_CACHE_MIN_ROWS:
                    df = df.select("*").persist(_storage_level())
                    self.job.held.append(df)
                prepared = self.prepare(df)
                looks_up = self.uses_index and bool(job.view.latest_base_files())
                # an index may read the prepared records more than once: computed once (the record index reads
                # them once, tagging them in place)
                keep = looks_up and not self.tag_reads_once()
                if keep:
                    prepared = prepared.persist(_storage_level())
                    self.job.held.append(prepared)  # released below, or by unpersist() if the tag fails
                job.prepared = prepared
            with job.timed("tag"):
                tagged = self.tag(prepared)
                if self.caches_tagged():  # tagged records feed both the planning counts and the write: computed once
                    tagged = tagged.persist(_storage_level())
                    self.job.held.append(tagged)
                counts = self.count(tagged)
                if keep:
                    cached.release(prepared)  # the tagged records are cached now
            with job.timed("plan"):
                self._planned_rows = sum(n for _, _, n in counts)
                buckets = self.plan(counts)
                for b in buckets:  # partitions also come from the index and the view, not only the key generator
                    check_partition_path(b.partition, f"the plan of the write to {job.base_path}", "partition")
                if not C.bool_option(self.cfg.options, C.METADATA_ENABLE):
                    nested = nested_partitions([*job.view.partitions(), *(b.partition for b in buckets)])
                    if nested is not None:
                        raise InvalidInputError(
                            f"partition {nested[1]!r} of {job.base_path} would lie inside partition {nested[0]!r}: "
                            "without the metadata table (hoodie.metadata.enable=false) Hudi's readers list partitions "
                            "from storage and do not look inside a partition, so its records would not be read; "
                            "nothing was written")
            if before_write is not None:
                before_write()
            with job.timed("write"):
                statuses = self.write(tagged, buckets)
        self.fault("before_commit")
        return self.commit_result(statuses)

    def _non_null_ordering(self, data_cols: list[str], types: list[pa.DataType], combine: bool) -> tuple[str, ...]:
        """The ordering fields no record of this write may leave null: all of them when it combines records (Hudi
        refuses a null there); on a merge-on-read table ordered by event time, those a reader could not order a
        null of against a value (:func:`pyhudi.read.merge.null_ordering_compares`)."""
        from pyhudi.read.merge import null_ordering_compares

        if self.delete_all:
            return ()
        present = [(f, types[data_cols.index(f)]) for f in self.cfg.ordering_fields if f in data_cols]
        if combine and self.cfg.event_time_ordering:
            return tuple(f for f, _ in present)
        if self.job.merge_on_read and self.cfg.event_time_ordering:
            return tuple(f for f, t in present if not null_ordering_compares(t, f, self.job.base_path))
        return ()

    def prepare(self, df: DataFrame) -> DataFrame:
        from pyspark.sql import Window
        from pyspark.sql import functions as F
        from pyspark.sql.pandas.types import from_arrow_schema

        cfg, job = self.cfg, self.job
        data_cols = self.validate_columns(df.schema)
        keygen = KeyGenerator.from_options(cfg.options)
        routing = self.routing()
        out_schema = pa.schema(
            [*[job.data_schema.field(c) if c in job.data_schema.names else _arrow_field(df, c) for c in data_cols],
             pa.field(RECORD_KEY_COL, pa.string()), pa.field(PARTITION_PATH_COL, pa.string()),
             pa.field(OP_COL, pa.string()), *([pa.field(ROUTE_COL, pa.int32())] if routing else [])]
        )
        types = [out_schema.field(i).type for i in range(len(data_cols))]
        combine = getattr(cfg, self.combine_option)
        ordered_by = self._non_null_ordering(data_cols, types, combine)
        prepared = df.select(*data_cols).mapInArrow(
            prepare_task(keygen, self.delete_all, data_cols, routing, types, ordered_by, combine),
            from_arrow_schema(out_schema),
        )
        if combine:  # the input order, for ties between duplicates: numbered before any shuffle reorders rows
            prepared = prepared.withColumn("__seq", F.monotonically_increasing_id())
        if routing is not None:
            prepared = prepared.repartition(routing.partitions, ROUTE_COL)
        if combine:
            # commit-time ordering: the batch's last record of a key wins, as Hudi combines with the table's merger
            order = [] if self.delete_all or not cfg.event_time_ordering else [
                _java_ordered(F.col(f), out_schema.field(f).type).desc_nulls_first() for f in cfg.ordering_fields]
            # one record per HoodieKey (key + partition path); per record key only with a global index
            by = [RECORD_KEY_COL] if cfg.is_global_index else [RECORD_KEY_COL, PARTITION_PATH_COL]
            if routing is not None:  # a function of the key: the routed partitions already hold all of a key's records
                by = [ROUTE_COL, *by]
            w = Window.partitionBy(*by).orderBy(*order, F.col("__seq").desc())
            prepared = prepared.withColumn("__rn", F.row_number().over(w)).filter(F.col("__rn") == 1).drop("__rn", "__seq")
        if routing is not None:
            prepared = prepared.drop(ROUTE_COL)
        job.routing = routing
        return prepared

    def check_keys_stay_unique(self, tagged: DataFrame, limit: int = 5) -> None:
        """InvalidInputError naming input keys a non-global index (SIMPLE, BLOOM) would insert as new records while
        the table's record index holds them in another partition: the record index holds one location per key
        (key queries read only the file group it names), so a second record of a key is refused before anything is
        written. Keys that stay in their partition are updated as usual."""
        from pyspark.sql import functions as F

        job = self.job
        inserts = tagged.filter(F.col(LOC_FILE_ID_COL).isNull() & (F.col(OP_COL) != OP_DELETE)).select(
            RECORD_KEY_COL, PARTITION_PATH_COL, OP_COL)
        held = index_for("RECORD_INDEX").tag(job, inserts).filter(F.col(LOC_FILE_ID_COL).isNotNull())
        found = held.select(RECORD_KEY_COL, LOC_PARTITION_COL, PARTITION_PATH_COL, LOC_FILE_ID_COL).limit(limit).collect()
        known = {(fs.partition, fs.file_id) for fs in job.view.latest_file_slices()}
        unknown = sorted({(r[1], r[3]) for r in found if (r[1], r[3]) not in known})
        if unknown:  # not held elsewhere: the index is ahead of this write's view (see index_ahead)
            raise self.index_ahead(unknown)
        listed = _stored_elsewhere_text(found)
        if not listed:  # a new key arriving with two partitions in this input would be two records too
            twice = (inserts.groupBy(RECORD_KEY_COL).agg(F.sort_array(F.collect_set(PARTITION_PATH_COL)).alias("p"))
                     .filter(F.size("p") > 1).limit(limit).collect())
            listed = "; ".join(f"new key {r[0]!r} arrives with partitions {', '.join(map(repr, r[1]))}" for r in twice)
        if listed:
            raise InvalidInputError(
                f"{self.cfg.operation} into {job.base_path} with {C.INDEX_TYPE}={self.cfg.index_type}: {listed}; this "
                "non-global index would write a second record of the key, and the table's record index holds one "
                "location per key: write with RECORD_INDEX (it moves or keeps the key, "
                "hoodie.record.index.update.partition.path) or a global index; nothing was written")

    def caches_tagged(self) -> bool:
        """Whether the tagged records are cached for the write after the planning counts."""
        return True

    def tag_reads_once(self) -> bool:
        """The tag reads the prepared records once: the record index's lookup in place
        (:func:`pyhudi.metadata.record_index.tag_in_place`), not its fallback without an index."""
        return self.cfg.index_type.upper() == "RECORD_INDEX" and self.job.record_index_lookup() is not None

    def routing(self) -> KeyRouting | None:
        """How the index wants this write's records partitioned for its tag (None: no lookup, or no wish)."""
        if not self.uses_index or not self.job.view.latest_base_files():
            return None
        return index_for(self.cfg.index_type).routing(self.job)

    def validate_columns(self, schema: StructType) -> list[str]:
        """The input's data columns; InvalidInputError naming a record key, partition or ordering column the
        input lacks, or a ``_hoodie_is_deleted`` column that is not a boolean (Hudi's delete marker: true deletes
        the record's key), refused here, on the driver, rather than in a write task."""
        from pyspark.sql.types import BooleanType

        cfg = self.cfg
        data_cols = [c for c in schema.fieldNames() if c not in INPUT_META_COLUMNS]
        names = set(data_cols)
        for what, cols in (
            ("record key", cfg.record_key_fields),
            ("partition", cfg.partition_fields),
            ("ordering", cfg.ordering_fields if not self.delete_all else ()),
        ):
            for c in cols:
                if c not in names:
                    raise InvalidInputError(f"input has no {what} column {c!r} (columns: {', '.join(data_cols)})")
        if not self.delete_all and IS_DELETED_COL in names:
            t = schema[IS_DELETED_COL].dataType
            if not isinstance(t, BooleanType):
                raise InvalidInputError(
                    f"input column {IS_DELETED_COL!r} is of type {t.simpleString()}, but it is Hudi's delete marker, "
                    "a boolean (true deletes the record's key): cast it to boolean; nothing was written")
        return data_cols

    def tag(self, prepared: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        if not self.uses_index or not self.job.view.latest_base_files():
            return prepared.withColumn(LOC_PARTITION_COL, F.lit(None).cast("string")).withColumn(
                LOC_FILE_ID_COL, F.lit(None).cast("string")
            )
        index = index_for(self.cfg.index_type)
        tagged = index.tag(self.job, prepared)
        # a non-global index in a table with a record index: the keys it would write twice are refused
        check_unique = not index.is_global and not self.delete_all and self.job.record_index_lookup() is not None
        ordered = self.cfg.event_time_ordering and bool(self.cfg.ordering_fields)
        soft_deletes = ordered and not self.delete_all and IS_DELETED_COL in prepared.columns
        if (index.is_global and self.cfg.update_partition_path) or soft_deletes or check_unique:
            # read more than once (the moves split the tagged records into several branches; the uniqueness check
            # reads them before the write): look the keys up once
            tagged = tagged.persist(_storage_level())
            self.job.held.append(tagged)
        if check_unique:
            self.check_keys_stay_unique(tagged)
        if index.is_global:
            if self.cfg.update_partition_path and not getattr(self.cfg, self.combine_option):
                tagged = _one_stored_record_each(tagged, self.job)
            tagged = apply_partition_moves(
                tagged,
                self.cfg.update_partition_path,
                self.job if self.cfg.event_time_ordering else None,
            )
        # deletes of keys the table does not hold do nothing (one SQL expression: one call into the JVM, where
        # the same condition built from columns takes a few dozen)
        tagged = tagged.filter(F.expr(f"NOT (`{OP_COL}` = '{OP_DELETE}' AND `{LOC_FILE_ID_COL}` IS NULL)"))
        if soft_deletes:
            # a record flagged _hoodie_is_deleted carries its ordering value: under event-time ordering it deletes
            # the stored record unless that one's is greater, as Hudi's merge decides (a delete operation's keys
            # carry none and always delete); one the stored record outranks changes nothing
            deleting = F.expr(f"`{OP_COL}` = '{OP_DELETE}'")
            applied, _ = _split_movers_by_ordering(self.job, tagged.filter(deleting))
            tagged = tagged.filter(~deleting).unionByName(applied)
        return tagged

    def count(self, tagged: DataFrame) -> list[tuple[str, str | None, int]]:
        rows = cached.grouped_counts(tagged, [PARTITION_PATH_COL, LOC_FILE_ID_COL])
        return [(r[0], r[1], int(r[2])) for r in rows]

    def index_ahead(self, groups: list[FileGroupKey]) -> PyHudiError:
        """The error for index locations in file groups this write's view of the table does not hold. The index's
        log blocks are read as of the write's begin, but a metadata-table compaction since folds later commits'
        entries into its base files: a write that committed meanwhile and created those file groups is named
        (retry the write); an index naming file groups no commit wrote is refused as damaged."""
        job = self.job
        before = {i.requested_time for i in job.timeline.completed()}
        wanted = set(groups)
        # the active timeline, then the archived one (archival may have run since the write began)
        for tl in (job.timeline.reload(), ArchivedTimeline.load(job.storage, job.base_path)):
            for other in tl.completed_commits():
                if other.requested_time not in before and touched_file_groups(tl.read_commit_metadata(other)) & wanted:
                    return IndexAheadConflict(job.base_path, f"{other.requested_time} ({other.action})", groups)
        return CorruptFileError(
            f"{metadata_base_path(job.base_path)}/{RECORD_INDEX}",
            f"the record index places keys in file group(s) {file_groups_text(groups)}, which the table does not hold and no "
            "commit since this write began wrote; nothing was written: check the table with `pyhudi validate`",
        )

    def plan(self, counts: list[tuple[str, str | None, int]]) -> list[Bucket]:
        """Buckets: one per existing file group touched, then inserts into small files, then new file groups.

        Merge-on-read (as Hudi's ``SparkUpsertDeltaCommitPartitioner`` with an index that cannot index log files):
        the touched file groups get an append bucket (a new log file), except the small files picked for inserts
        (:meth:`small_files`), whose base file is rewritten with the inserts and the updates routed to them."""
        job, cfg = self.job, self.cfg
        buckets: list[Bucket] = []
        by_fg: dict[tuple[str, str], Bucket] = {}
        slices = {(fs.partition, fs.file_id): fs for fs in job.view.latest_file_slices()}
        unknown = sorted({(part, fid) for part, fid, _ in counts if fid is not None and (part, fid) not in slices})
        if unknown:
            raise self.index_ahead(unknown)
        self.refuse_clustered({(part, fid) for part, fid, _ in counts if fid is not None})
        inserts: dict[str, int] = defaultdict(int)
        for part, fid, n in counts:
            if fid is None:
                inserts[part] += n
        small_files = {p: self.small_files(p) for p in inserts} if self.fills_small_files else {}
        rewritten = {(f.partition, f.file_id) for files in small_files.values() for f in files}

        def update_bucket(part: str, fid: str) -> Bucket:
            if (part, fid) not in by_fg:
                fs = slices[(part, fid)]
                if job.merge_on_read and (part, fid) not in rewritten:
                    b = Bucket(len(buckets), APPEND, part, fid, None, fs.base_instant)
                else:
                    assert fs.base_file is not None
                    b = Bucket(len(buckets), UPDATE, part, fid, fs.base_file.file_name, fs.base_instant)
                buckets.append(b)
                by_fg[(part, fid)] = b
            return by_fg[(part, fid)]

        for part, fid, _ in counts:
            if fid is not None:
                update_bucket(part, fid)
        avg = self.average_record_size()
        per_file = max(1, cfg.max_file_size // avg) if cfg.insert_auto_split else cfg.insert_split_size
        self.insert_ranges: list[tuple[str, float, float, int]] = []
        for part, n in sorted(inserts.items()):
            targets: list[tuple[Bucket, int]] = []
            remaining = n
            if self.fills_small_files:
                for fs in small_files[part]:
                    cap = (cfg.max_file_size - fs.size) // avg
                    if cap <= 0 or remaining <= 0:
                        continue
                    take = min(cap, remaining)
                    targets.append((update_bucket(part, fs.file_id), take))
                    remaining -= take
            while remaining > 0:
                take = min(per_file, remaining)
                b = Bucket(len(buckets), INSERT, part, self.new_file_id())
                buckets.append(b)
                targets.append((b, take))
                remaining -= take
            lo = 0.0
            for i, (b, take) in enumerate(targets):
                hi = 1.0 if i == len(targets) - 1 else lo + take / n
                self.insert_ranges.append((part, lo, hi, b.id))
                lo = hi
        return buckets

    @functools.cached_property
    def clustered(self) -> dict[FileGroupKey, str]:
        """The file groups pending clusterings rewrite -> the clustering instant (read once per write)."""
        return clustering_file_groups(self.job.timeline)

    def refuse_clustered(self, groups: set[FileGroupKey]) -> None:
        """:class:`ClusteringConflict`, before anything is written, if the write would change a file group that
        a pending clustering rewrites."""
        hit = sorted(g for g in groups if g in self.clustered)
        if hit:
            raise ClusteringConflict(self.job.base_path, self.job.instant, self.clustered[hit[0]], hit)

    def small_files(self, partition: str) -> list[BaseFile]:
        """The base files of ``partition`` that receive inserts first, smallest first: every latest base file below
        ``hoodie.parquet.small.file.limit``; in a merge-on-read table only those of latest file slices without log
        files, at most ``hoodie.merge.small.file.group.candidates.limit`` of them (Hudi's MOR candidates). Never
        one a pending clustering rewrites (as Hudi's ``filterSmallFilesInClustering``)."""
        cfg, view = self.cfg, self.job.view
        if not self.job.merge_on_read:
            return sorted((f for f in view.latest_base_files(partition)
                           if f.size < cfg.small_file_limit and (partition, f.file_id) not in self.clustered),
                          key=lambda f: f.size)
        limit = C.int_option(cfg.options, C.SMALL_FILE_GROUP_CANDIDATES)
        files = [fs.base_file for fs in view.latest_file_slices(partition)
                 if fs.base_file is not None and not fs.log_files and fs.base_file.size < cfg.small_file_limit
                 and (partition, fs.file_id) not in self.clustered]
        return sorted(files, key=lambda f: f.size)[:limit]

    def new_file_id(self) -> str:
        """The id of a new file group (see :attr:`numbered_file_ids`)."""
        if not self.numbered_file_ids:
            return make_file_id()
        if self._file_id_prefix is None:
            self._file_id_prefix, self._file_id_count = new_file_id_prefix(), 0
        self._file_id_count += 1
        return make_file_id(self._file_id_prefix, self._file_id_count - 1)

    def average_record_size(self) -> int:
        """Bytes per record from the latest commits that wrote data, else hoodie.copyonwrite.record.size.estimate."""
        tl = self.job.timeline
        for inst in reversed(list(tl.completed_commits())):
            try:
                md = tl.read_commit_metadata(inst)
            except Exception:
                continue
            nbytes = nrec = 0
            for stats in (md.get("partitionToWriteStats") or {}).values():
                for s in stats:
                    if posixpath.basename(s.get("path") or "").startswith("."):
                        continue  # a log file's records are not sized as base-file records
                    nbytes += s.get("totalWriteBytes") or 0
                    nrec += s.get("numWrites") or 0
            if nbytes > 0 and nrec > 0:
                return max(1, math.ceil(nbytes / nrec))
        return self.cfg.record_size_estimate

    def write(self, tagged: DataFrame, buckets: list[Bucket]) -> list[WriteStat]:
        from pyspark.sql import functions as F

        job = self.job
        if not buckets:
            return []
        spark = job.spark
        upd = [(b.partition, b.file_id, b.id) for b in buckets if b.kind != INSERT]
        parts: list[DataFrame] = []
        base = tagged
        h = F.pmod(self.insert_hash(), F.lit(_HASH_RANGE)) / F.lit(float(_HASH_RANGE))
        if _literal_assignment(upd, self.insert_ranges, self._planned_rows):
            # few buckets: looked up in literal maps in the plan, where broadcast joins would cost a Spark job each
            if upd:
                parts.append(
                    base.filter(F.col(LOC_FILE_ID_COL).isNotNull())
                    .withColumn("__b", F.expr(_update_bucket_sql(upd)))
                    .filter(F.col("__b").isNotNull())
                )
            if self.insert_ranges:
                ins = base.filter(F.col(LOC_FILE_ID_COL).isNull() & (F.col(OP_COL) == OP_UPSERT)).withColumn("__h", h)
                parts.append(
                    ins.withColumn("__b", F.expr(_insert_bucket_sql(self.insert_ranges)))
                    .filter(F.col("__b").isNotNull())
                    .drop("__h")
                )
        else:
            if upd:
                upd_df = local_frame(spark, upd, "__p string, __f string, __b int")
                parts.append(
                    base.filter(F.col(LOC_FILE_ID_COL).isNotNull())
                    .join(F.broadcast(upd_df),
                          (F.col(PARTITION_PATH_COL) == F.col("__p")) & (F.col(LOC_FILE_ID_COL) == F.col("__f")))
                    .drop("__p", "__f")
                )
            if self.insert_ranges:
                rng = local_frame(spark, self.insert_ranges, "__p string, __lo double, __hi double, __b int")
                ins = base.filter(F.col(LOC_FILE_ID_COL).isNull() & (F.col(OP_COL) == OP_UPSERT)).withColumn("__h", h)
                parts.append(
                    ins.join(
                        F.broadcast(rng),
                        (F.col(PARTITION_PATH_COL) == F.col("__p")) & (F.col("__h") >= F.col("__lo"))
                        & (F.col("__h") < F.col("__hi")),
                    ).drop("__p", "__lo", "__hi", "__h")
                )
        assigned = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
        assigned = assigned.withColumnRenamed("__b", BUCKET_COL).drop(LOC_PARTITION_COL, LOC_FILE_ID_COL)
        return self.write_assigned(assigned, buckets)

    def insert_hash(self) -> Column:
        """A hash of each record's key, which spreads a partition's inserts over its insert buckets."""
        from pyspark.sql import functions as F

        return F.xxhash64(F.col(RECORD_KEY_COL))

    def write_context(self, buckets: list[Bucket]) -> WriteContext:
        """What the write tasks need of this write (pickled into their closure)."""
        job = self.job
        return WriteContext(
            storage=job.storage,
            base_path=job.base_path,
            instant=job.instant,
            data_schema=job.data_schema,
            ordering_fields=self.cfg.ordering_fields,
            event_time_ordering=self.cfg.event_time_ordering,
            parquet_options={
                **{k: v for k, v in self.cfg.options.items() if k in C.BASE_FILE_OPTIONS},
                C.PARQUET_COMPRESSION: self.cfg.parquet_compression,
            },
            buckets={b.id: b for b in buckets},
            sort_by_key=self.sort_by_key,
            keep_stored=self.operation_type == "INSERT" and self.cfg.allow_duplicate_on_inserts,
            ordered_deletes=self.cfg.event_time_ordering and not self.delete_all,
            fault=faults.spec(self.cfg.options),
            log_schema=log_schema_json(job.data_schema, job.table_name) if job.merge_on_read else None,
            stats_columns=job.stats_columns,
        )

    def bucket_task(self, ctx: WriteContext) -> Callable[[pa.Table], pa.Table]:
        """The function writing one bucket's records (the assigned rows of one bucket), run by :func:`by_bucket`."""

        def run(t: pa.Table) -> pa.Table:
            return write_bucket(ctx, t)

        return run

    def write_assigned(self, assigned: DataFrame, buckets: list[Bucket]) -> list[WriteStat]:
        """Write the records, each with its bucket (:data:`BUCKET_COL`): a task per :func:`write_tasks` share of
        the buckets, each bucket written whole by :func:`by_bucket`; the WriteStatus rows are persisted
        (:func:`_status_storage_level`: the record index reads their keys) and their counts collected."""
        from pyspark.sql import functions as F
        from pyspark.sql.pandas.types import from_arrow_schema

        job = self.job
        n = write_tasks(len(buckets), job.parallelism, self._planned_rows)
        out = assigned.repartition(n, BUCKET_COL).mapInArrow(
            by_bucket(self.bucket_task(self.write_context(buckets))), from_arrow_schema(WRITE_STATUS_SCHEMA)
        )
        self.status_df = out.persist(_status_storage_level())
        self.job.held.append(self.status_df)
        # the record index's changes (inserted plus deleted keys) counted in the same job as the stats
        rows = cached.collect(self.status_df, [*map(F.col, STAT_COLUMNS), F.size("deleted_keys").alias("__d")])
        self.index_deletes = sum(max(0, r["__d"] or 0) for r in rows)
        self.index_changes = sum(r["num_inserts"] for r in rows) + self.index_deletes
        return [WriteStat.from_row(r) for r in rows]

    # -- timeline content ---------------------------------------------------------------------------
    def requested_metadata(self) -> dict[str, Any] | None:
        """Content of ``<t>.<action>.requested`` (a commit's is empty)."""
        return None

    def inflight_metadata(self) -> dict[str, Any]:
        """Content of the inflight instant, written once the write is planned."""
        return commit_metadata({}, self.operation_type)

    # -- commit -------------------------------------------------------------------------------------
    def commit_metadata(self, stats: list[WriteStat]) -> dict[str, Any]:
        by_part: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for s in sorted(stats, key=lambda s: (s.partition, s.file_id)):
            by_part[s.partition].append(s.to_hudi())
        return commit_metadata(by_part, self.operation_type,
                               schema=commit_schema_json(self.job.data_schema, self.job.table_name))

    def commit_result(self, stats: list[WriteStat]) -> WriteResult:
        job = self.job
        return WriteResult(
            instant=job.instant,
            operation=self.cfg.operation,
            inserted=sum(s.num_inserts for s in stats),
            updated=sum(s.num_updates for s in stats),
            deleted=sum(s.num_deletes for s in stats),
            files_written=len(stats),
            partitions=len({s.partition for s in stats}),
            stats=stats,
            timings=job.timings,
        )

    # -- faults (tests) ----------------------------------------------------------------------------
    def fault(self, point: str) -> None:
        """Reach the fault point ``point`` (:mod:`pyhudi.faults`) with this write's fault spec."""
        faults.at(point, faults.spec(self.cfg.options))

    def unpersist(self) -> None:
        for df in self.job.held:
            cached.release(df)
        self.job.held.clear()


# The write assigns records to buckets with literal maps in the plan (no Spark job) when the plan has at most
# this many entries (update buckets plus insert ranges) ...
LITERAL_ASSIGNMENT_MAX_ENTRIES = 256
# ... and the records times the entries stays below this (a literal map is searched linearly, per record);
# otherwise through broadcast joins of small DataFrames (a Spark job each to collect them for the broadcast)
LITERAL_ASSIGNMENT_MAX_WORK = 5_000_000
_PLAIN_LITERAL = re.compile(r"[A-Za-z0-9_./:=+-]*\Z")  # written in SQL text as they are, no escaping needed


def _literal_assignment(upd: list[tuple[str, str, int]], ranges: list[tuple[str, float, float, int]],
                        rows: int) -> bool:
    entries = len(upd) + len(ranges)
    return (
        entries <= LITERAL_ASSIGNMENT_MAX_ENTRIES
        and rows * entries <= LITERAL_ASSIGNMENT_MAX_WORK
        and all(_PLAIN_LITERAL.match(p) and _PLAIN_LITERAL.match(f) for p, f, _ in upd)
        and all(_PLAIN_LITERAL.match(p) for p, *_ in ranges)
    )


def _update_bucket_sql(upd: list[tuple[str, str, int]]) -> str:
    """SQL: the bucket of a record of an existing file group (partition -> file id -> bucket), null for none: as
    the inner join of the records with the (partition, file id, bucket) rows."""
    by_part: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for p, f, b in upd:
        by_part[p].append((f, b))
    entries = {p: ", ".join(f"'{f}', {b}" for f, b in fs) for p, fs in by_part.items()}
    m = ", ".join(f"'{p}', map({e})" for p, e in entries.items())
    return f"try_element_at(try_element_at(map({m}), `{PARTITION_PATH_COL}`), `{LOC_FILE_ID_COL}`)"


def _insert_bucket_sql(ranges: list[tuple[str, float, float, int]]) -> str:
    """SQL: the bucket of an insert, by its key hash ``__h`` in the ranges [lo, hi) of its partition, null for none:
    as the inner join of the records with the (partition, lo, hi, bucket) rows (the doubles are the same:
    ``repr`` round-trips, and Spark parses it to the nearest double as Python does)."""
    by_part: dict[str, list[str]] = defaultdict(list)
    for p, lo, hi, b in ranges:
        by_part[p].append(f"named_struct('lo', CAST('{lo!r}' AS DOUBLE), 'hi', CAST('{hi!r}' AS DOUBLE), 'b', {b})")
    arrays = {p: ", ".join(rs) for p, rs in by_part.items()}
    m = ", ".join(f"'{p}', array({a})" for p, a in arrays.items())
    return (f"try_element_at(filter(try_element_at(map({m}), `{PARTITION_PATH_COL}`), "
            "x -> `__h` >= x.lo AND `__h` < x.hi), 1).b")


#: records a write task takes at most, when the write has buckets enough: a task's Spark side holds memory in
#: proportion to what it has written until it ends (at 20M rows in 2 tasks, 1.5 GB of byte arrays by the end), and
#: its Python side holds its records until its input ends (:func:`by_bucket`). Chosen when the tasks were still
#: sorted by bucket in the JVM: a 20M-row bulk_insert's write stage spilled 4.7 GB with 1M records per task
#: (57.8 s) and 1.5 GB with 250k (46.8 s; 125k: 48.1 s, more tasks of the record index after it); 2M rows
#: 11.0-12.0 s against 12.3-12.9 s
ROWS_PER_WRITE_TASK = 250_000


def write_tasks(buckets: int, parallelism: int, rows: int) -> int:
    """Spark tasks of a write of ``rows`` records into ``buckets`` buckets: one per core, more when that would
    give a task more than :data:`ROWS_PER_WRITE_TASK` records; never more than the buckets."""
    return max(1, min(buckets, max(parallelism, -(-rows // ROWS_PER_WRITE_TASK))))


def by_bucket(write: Callable[[pa.Table], pa.Table]) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``mapInArrow`` function of a write task: its records (of the buckets routed to it, in the order they
    arrive) gathered by :data:`BUCKET_COL`, then ``write`` of each bucket's records, in bucket order. The task
    holds its records until its input ends, as many as :func:`write_tasks` gives it (a ``groupBy`` would hold one
    bucket at a time, after the driver JVM sorted every record by bucket: a third of a bulk load's JVM time)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        held: dict[int, list[pa.RecordBatch]] = defaultdict(list)
        for b in batches:
            if not b.num_rows:
                continue
            ids = b.column(BUCKET_COL).to_numpy(zero_copy_only=False)
            if (ids == ids[0]).all():
                held[int(ids[0])].append(b)
                continue
            # one take per batch (its rows ordered by bucket), then a zero-copy slice per bucket: a take per
            # bucket and batch cost a merge-on-read upsert's tasks 0.7 ms per file group. The slices share their
            # batch, so the input is released when its last bucket is written, not bucket by bucket: the peak,
            # all of the task's input held when the first bucket is written, is the same
            order, runs = group_runs(ids)
            ordered = b.take(pa.array(order))
            for bucket, lo, hi in runs:
                held[bucket].append(ordered.slice(lo, hi - lo))
        for bucket in sorted(held):
            yield from write(pa.Table.from_batches(held.pop(bucket))).to_batches()

    return run


#: an input whose plan holds at least this many rows itself (a DataFrame ``spark.createDataFrame`` made of pandas,
#: Arrow or Python rows: a local relation) is cached for the write: for every query of the write, Spark's optimizer
#: evaluates the projections over such rows on the driver (``ConvertToLocalRelation``) and plans them anew; the
#: demo's 200k-row bulk_insert took 8.2 s (5.8 s in a warm session) with the rows in the plan, 4.6 s (3.2 s)
#: cached, a 50k-row one 3.6 s (1.9 s) against 3.0 s (1.2 s); the demo's 20k-row upsert was 0.2 s slower cached
LOCAL_INPUT_CACHE_MIN_ROWS = 50_000


def _storage_level() -> Any:
    from pyspark import StorageLevel

    return StorageLevel.MEMORY_AND_DISK


def _status_storage_level() -> Any:
    """Where WriteStatus rows are kept until the commit: on the executors' local disks. Each row carries the keys
    of its file (a few MB at bulk-load sizes); kept in the heap, they filled it with large arrays: a 20M-row bulk
    load failed with Java's default collector (G1, whose 1 MB regions make each such array a "humongous"
    object) in Spark's default 1 GB heap. On disk, it passes, and takes the same time with the parallel collector
    (85.5 s against 86.1 s of work; the driver JVM's peak, 1.9-2.2 GB, varies as much between runs either way)."""
    from pyspark import StorageLevel

    return StorageLevel.DISK_ONLY


def _stored_elsewhere(clash: DataFrame, limit: int) -> str:
    """Up to ``limit`` tagged records of ``clash`` listed by :func:`_stored_elsewhere_text` (empty: none)."""
    return _stored_elsewhere_text(clash.select(RECORD_KEY_COL, LOC_PARTITION_COL, PARTITION_PATH_COL).limit(limit)
                                  .collect())


def _stored_elsewhere_text(rows: list[Any]) -> str:
    """Rows (key, stored partition, input partition, ...) as "key 'k' is stored in partition 'a' (input partition
    'b')", joined by "; "."""
    return "; ".join(f"key {r[0]!r} is stored in partition {r[1]!r} (input partition {r[2]!r})" for r in rows)


def _arrow_field(df: DataFrame, col: str) -> pa.Field:
    from pyhudi.spark.session import arrow_schema

    return arrow_schema(df.select(col)).field(0)


def _one_stored_record_each(tagged: DataFrame, job: WriteJob) -> DataFrame:
    """A batch that was not combined, under a global index that moves keys: one incoming record per stored key
    (the greatest ordering value under event-time ordering; else any). Records of one key arriving with two
    partitions would otherwise both move or update, and the key would be written twice. New keys keep their
    records, as an insert's."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    cfg = job.config
    order = [_java_ordered(F.col(f), job.data_schema.field(f).type).desc_nulls_last()
             for f in cfg.ordering_fields] if cfg.event_time_ordering else []
    w = Window.partitionBy(RECORD_KEY_COL).orderBy(*order, F.col(PARTITION_PATH_COL))
    rn = F.when(F.col(LOC_FILE_ID_COL).isNotNull(), F.row_number().over(w))
    return tagged.withColumn("__rn", rn).filter(F.col("__rn").isNull() | (F.col("__rn") == 1)).drop("__rn")


def apply_partition_moves(tagged: DataFrame, update_partition_path: bool, job: WriteJob | None = None) -> DataFrame:
    """Global index semantics for a key found in another partition than the one it arrives with.

    update_partition_path=false: the record is updated where it is (its partition path becomes the old one).
    true: the record is deleted from the old partition and inserted into the new one, unless event-time
    ordering (``job`` given, with ordering fields) says the stored record is newer: then it stays where it is
    and the merge keeps it. Deletes always apply where the key is.
    """
    from pyspark.sql import functions as F

    # SQL expressions: one call into the JVM each (the tag's driver-side planning is part of its time)
    found = f"`{LOC_FILE_ID_COL}` IS NOT NULL"
    deleting = f"`{OP_COL}` = '{OP_DELETE}'"
    stays_in_old = f"{found} AND {deleting}" if update_partition_path else found
    stay = tagged.withColumn(
        PARTITION_PATH_COL,
        F.expr(f"CASE WHEN {stays_in_old} THEN `{LOC_PARTITION_COL}` ELSE `{PARTITION_PATH_COL}` END"),
    )
    if not update_partition_path:
        return stay
    moving = F.expr(f"{found} AND `{PARTITION_PATH_COL}` != `{LOC_PARTITION_COL}` AND NOT ({deleting})")
    to_old = F.col(LOC_PARTITION_COL)
    movers = tagged.filter(moving)
    rest = stay.filter(~moving)
    if job is not None and job.config.ordering_fields:
        movers, kept = _split_movers_by_ordering(job, movers)
        rest = rest.unionByName(kept.withColumn(PARTITION_PATH_COL, to_old))
    delete_old = movers.withColumn(OP_COL, F.lit(OP_DELETE)).withColumn(PARTITION_PATH_COL, to_old)
    insert_new = movers.withColumn(LOC_PARTITION_COL, F.lit(None).cast("string")).withColumn(
        LOC_FILE_ID_COL, F.lit(None).cast("string")
    )
    return rest.unionByName(delete_old).unionByName(insert_new)


def _stored_ordering_batch(t: pa.Table, file_id: str, fields: tuple[str, ...], schema: pa.Schema) -> pa.RecordBatch:
    """A file group's stored (key, file id, ordering values) rows (:func:`_split_movers_by_ordering`'s schema)."""
    cols = [t.column(RECORD_KEY_COL).combine_chunks().cast(pa.string()), pa.repeat(pa.scalar(file_id), t.num_rows)]
    cols += [t.column(f).combine_chunks().cast(schema.field(f"__old_{f}").type) for f in fields]
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def _stored_ordering_task(storage: Any, base_path: str, fields: tuple[str, ...], schema: pa.Schema):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import posixpath

        from pyhudi.table import base_file

        for b in batches:
            for fid, rel in zip(b.column(0).to_pylist(), b.column(1).to_pylist(), strict=True):
                t = base_file.read_base_file(storage, posixpath.join(base_path, rel), columns=[RECORD_KEY_COL, *fields])
                yield _stored_ordering_batch(t, fid, fields, schema)

    return run


def _stored_slice_ordering(job: WriteJob, groups: set[tuple[str, str]], fields: tuple[str, ...],
                           schema: pa.Schema) -> DataFrame:
    """Merge-on-read: (key, ordering values) of the live records of the latest file slices of ``groups``."""
    import json

    from pyspark.sql.pandas.types import from_arrow_schema

    from pyhudi.read import plan as read_plan
    from pyhudi.table.properties import METAFOLDER, read_table_config

    table = read_plan.TableFiles(job.storage, job.base_path,
                                 read_table_config(job.storage, posixpath.join(job.base_path, METAFOLDER)))
    spec = read_plan.snapshot(table, timeline=job.timeline, view=job.view).project([RECORD_KEY_COL, *fields]).read
    rows = [(s.partition, s.file_id, s.base_file_path, json.dumps(list(s.log_file_paths)))
            for s in job.view.latest_file_slices() if (s.partition, s.file_id) in groups]

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyhudi.read.slice_reader import FileSliceReader, SliceSpec

        for b in batches:
            for part, fid, rel, logs in zip(*(b.column(i).to_pylist() for i in range(4)), strict=True):
                t = FileSliceReader(spec, SliceSpec(part, fid, rel, tuple(json.loads(logs)))).read()
                yield _stored_ordering_batch(t, fid, fields, schema)

    src = local_frame(job.spark, rows, "partition string, file_id string, path string, logs string")
    return src.mapInArrow(run, from_arrow_schema(schema))


def _newest_per_file_group(stored: DataFrame, job: WriteJob, fields: tuple[str, ...]) -> DataFrame:
    """One row per (key, file id) of the stored ordering values: the greatest in Java's order."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = [_java_ordered(F.col(f"__old_{f}"), job.data_schema.field(f).type).desc_nulls_last() for f in fields]
    w = Window.partitionBy("__okey", "__ofid").orderBy(*order)
    return stored.withColumn("__rn", F.row_number().over(w)).filter(F.col("__rn") == 1).drop("__rn")


def _split_movers_by_ordering(job: WriteJob, movers: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(movers whose incoming record wins, movers whose stored record has a greater ordering value)."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    fields = job.config.ordering_fields
    groups = {(r[0], r[1]) for r in movers.select(LOC_PARTITION_COL, LOC_FILE_ID_COL).distinct().collect()}
    if not groups:
        return movers, movers.limit(0)
    schema = pa.schema([("__okey", pa.string()), ("__ofid", pa.string())]
                       + [(f"__old_{f}", job.data_schema.field(f).type) for f in fields])
    if job.merge_on_read:  # the stored ordering values are those of the file slices read merged
        stored = _stored_slice_ordering(job, groups, fields, schema)
    else:
        paths = [(f, rel) for p, f, rel in job.latest_base_files(None) if (p, f) in groups]
        stored = local_frame(job.spark, paths, "file_id string, path string").mapInArrow(
            _stored_ordering_task(job.storage, job.base_path, fields, schema), from_arrow_schema(schema)
        )
    # by key and file group: under a non-global index a key may be stored in several partitions, each record
    # ordered against its own stored one; a key an insert stored twice in one file group counts as its newest copy
    # (never deleted or moved by an older event; as Hudi's merge of the first copy keeps it), one row per mover
    stored = _newest_per_file_group(stored, job, fields)
    j = movers.join(stored, (movers[RECORD_KEY_COL] == stored["__okey"])
                    & (movers[LOC_FILE_ID_COL] == stored["__ofid"]), "left")
    old_wins = F.lit(False)
    for f in reversed(fields):
        t = job.data_schema.field(f).type
        o, n = _java_ordered(F.col(f"__old_{f}"), t), _java_ordered(F.col(f), t)
        gt = (o.isNotNull() & n.isNull()) | F.coalesce(o > n, F.lit(False))
        old_wins = gt | (o.eqNullSafe(n) & old_wins)
    drop = ["__okey", "__ofid", *[f"__old_{f}" for f in fields]]
    return j.filter(~old_wins).drop(*drop), j.filter(old_wins).drop(*drop)


class UpsertProducer(WriteProducer):
    operation_type = "UPSERT"


class InsertProducer(WriteProducer):
    operation_type = "INSERT"
    uses_index = False
    combine_option = "combine_before_insert"


class BulkInsertProducer(WriteProducer):
    """bulk_insert: every record to a new file group, sorted by key within it; no index lookup, no small files.

    When the input allows it (:meth:`_input_schema_for_tasks`: not combined, partitioned by columns Spark groups
    exactly as their partition paths differ, no type conversion needed), the records are never cached nor
    passed through Python before the write job: the planning counts group them
    by their raw partition values in Spark, counting the bad record keys on the way, and the driver makes each
    distinct value's partition path with the key generator (refusing unsafe ones); the write job routes records
    to buckets by their raw values, and its tasks make the record keys and partition paths of the records they
    write (checking each record's path is its bucket's).
    """

    operation_type = "BULK_INSERT"
    uses_index = False
    combine_option = "combine_before_insert"
    fills_small_files = False
    sort_by_key = True
    numbered_file_ids = True

    def __init__(self, job: WriteJob) -> None:
        super().__init__(job)
        self.keys_in_tasks = False  # decided by prepare()
        self._input: DataFrame | None = None  # the input records to insert (keys in tasks)
        self._keygen: KeyGenerator | None = None
        self._paths: pa.Table | None = None  # distinct raw partition values -> partition path (keys in tasks)
        self._planned_by_partition: dict[str, int] = {}  # records per partition path the plan counted
        self._strings: set[str] = set()  # the input's string columns (keys in tasks)
        self._ordered_by: tuple[str, ...] = ()  # ordering fields no record may leave null (keys in tasks)

    def caches_tagged(self) -> bool:
        return not self.keys_in_tasks

    def prepare(self, df: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        data_cols = self.validate_columns(df.schema)
        keygen = KeyGenerator.from_options(self.cfg.options)
        given = self._input_schema_for_tasks(df, data_cols, keygen)
        self.keys_in_tasks = given is not None
        if given is None:
            return super().prepare(df)
        # what the key generator refuses for its type alone (a binary or struct key...) is refused here, on the
        # driver, before anything is written
        keygen.record_keys(given.empty_table().select(list(keygen.key_columns())))
        self._keygen = keygen
        self._strings = {f.name for f in given if pa.types.is_string(f.type)}
        self._ordered_by = self._non_null_ordering(data_cols, [f.type for f in given], False)
        records = df.select(*(_col(c) for c in data_cols))
        if IS_DELETED_COL in data_cols:  # records flagged deleted are not inserted
            records = records.filter(~F.coalesce(_col(IS_DELETED_COL), F.lit(False)))
        self._input = records
        return records.withColumn(OP_COL, F.lit(OP_UPSERT))

    def _input_schema_for_tasks(self, df: DataFrame, data_cols: list[str], keygen: KeyGenerator) -> pa.Schema | None:
        """The Arrow schema of the input's data columns when this bulk insert may leave its records' keys to the
        write tasks (else None): a batch that is not combined, whose partition columns Spark groups exactly as
        their partition paths differ and whose columns have the table's types already (a conversion, which may
        fail on a value, stays before the write; a ``_hoodie_is_deleted`` flag is a boolean,
        :meth:`validate_columns`)."""
        from pyhudi.spark.session import arrow_schema

        if getattr(self.cfg, self.combine_option):
            return None
        fields = {f.name: f.dataType for f in df.schema.fields}
        parts = keygen.partition_fields
        if len(set(parts)) != len(parts) or not all(f in data_cols and _groups_exactly(fields[f]) for f in parts):
            return None
        if not all(f in data_cols for f in keygen.record_key_fields):
            return None
        given = arrow_schema(df.select(*(_col(c) for c in data_cols)))
        table = self.job.data_schema
        same = all(c not in table.names or given.field(c).type == table.field(c).type for c in data_cols)
        return given if same else None

    def count(self, tagged: DataFrame) -> list[tuple[str, str | None, int]]:
        if not self.keys_in_tasks:
            return super().count(tagged)
        from pyspark.sql import functions as F

        assert self._input is not None and self._keygen is not None
        kg, records = self._keygen, self._input
        bad = _bad_key_condition(kg, self._strings)
        for f in self._ordered_by:
            bad = bad | _col(f).isNull()
        fields = list(kg.partition_fields)
        groups = records.groupBy(*(_col(f) for f in fields)).agg(
            F.count(F.lit(1)).alias("__pyhudi_n"), F.sum(bad.cast("long")).alias("__pyhudi_bad")).toArrow()
        if groups.num_rows and pc.sum(groups.column("__pyhudi_bad")).as_py():
            # the key generator's own error for the first bad record, else its null ordering value's
            first = records.filter(bad).limit(1).toArrow()
            key = kg.record_keys(first)[0].as_py()
            for f in self._ordered_by:
                if first.column(f).null_count:
                    raise _null_ordering(f, key, False)
            raise AssertionError("a record counted bad passed the key generator")  # pragma: no cover
        if fields:  # in a stable order: an unsafe value is named the same way every time
            groups = groups.sort_by([(f, "ascending") for f in fields])
        raw = groups.select(fields)
        paths = kg.partition_paths(raw) if fields else pa.array([""] * groups.num_rows, pa.string())
        self._paths = raw.append_column(PARTITION_PATH_COL, paths)
        counts: dict[str, int] = defaultdict(int)
        for p, n in zip(paths.to_pylist(), groups.column("__pyhudi_n").to_pylist(), strict=True):
            counts[p] += n
        self._planned_by_partition = dict(counts)
        return [(p, None, n) for p, n in counts.items()]

    def write(self, tagged: DataFrame, buckets: list[Bucket]) -> list[WriteStat]:
        if not self.keys_in_tasks or not buckets:
            return super().write(tagged, buckets)
        from pyspark.sql import functions as F

        assert self._paths is not None and self._keygen is not None
        fields = list(self._keygen.partition_fields)
        # each record's bucket, in one broadcast join: its raw partition values (null-safe equality) and its key's
        # hash in one of the ranges of the partition's insert buckets
        names = [f"__pyhudi_pv{i}" for i in range(len(fields))]
        ranges = pa.table({"__p": [r[0] for r in self.insert_ranges], "__lo": [r[1] for r in self.insert_ranges],
                           "__hi": [r[2] for r in self.insert_ranges],
                           "__b": pa.array([r[3] for r in self.insert_ranges], pa.int32())})
        by_raw = self._paths.rename_columns([*names, "__p"]).join(ranges, "__p").drop_columns(["__p"])
        h = F.pmod(self.insert_hash(), F.lit(_HASH_RANGE)) / F.lit(float(_HASH_RANGE))
        cond = [_col(f).eqNullSafe(F.col(n)) for f, n in zip(fields, names, strict=True)]
        assigned = (
            tagged.withColumn("__h", h)
            .join(F.broadcast(arrow_frame(self.job.spark, by_raw)),
                  [*cond, F.col("__h") >= F.col("__lo"), F.col("__h") < F.col("__hi")], "left")
            # a record of a partition the plan did not see has no bucket: its write task refuses it
            .withColumn(BUCKET_COL, F.coalesce(F.col("__b"), F.lit(_UNPLANNED)).cast("int"))
            .drop(*names, "__lo", "__hi", "__h", "__b", OP_COL, LOC_PARTITION_COL, LOC_FILE_ID_COL)
        )
        stats = self.write_assigned(assigned, buckets)
        # the input was read twice: it must have given each partition the same records both times, counted per
        # partition (records of a partition the plan did not see were refused by their write task)
        written: dict[str, int] = defaultdict(int)
        for st in stats:
            written[st.partition] += st.num_inserts
        planned = {p: n for p, n in self._planned_by_partition.items() if n}
        if {p: n for p, n in written.items() if n} != planned:
            p = next(p for p in sorted({*planned, *written}) if planned.get(p, 0) != written.get(p, 0))
            raise InvalidInputError(
                f"bulk_insert into {self.job.base_path}: the input gave {self._planned_rows} records to plan the "
                f"write ({planned.get(p, 0)} in partition {p!r}) and {sum(written.values())} to write it "
                f"({written.get(p, 0)} in {p!r}): a source that changes between reads; nothing was committed")
        return stats

    def insert_hash(self) -> Column:
        if not self.keys_in_tasks:
            return super().insert_hash()
        from pyspark.sql import functions as F

        assert self._keygen is not None
        return F.xxhash64(*(_col(f) for f in self._keygen.record_key_fields))

    def bucket_task(self, ctx: WriteContext) -> Callable[[pa.Table], pa.Table]:
        if not self.keys_in_tasks:
            return super().bucket_task(ctx)
        assert self._keygen is not None
        return bulk_insert_task(ctx, self._keygen)


def _col(name: str) -> Column:
    """A column by its exact name (dots, spaces and backticks taken literally)."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def _java_ordered(c: Column, t: pa.DataType) -> Column:
    """``c`` as a value Spark orders as Java orders ordering values (:func:`pyhudi.read.merge.java_order`): Spark
    holds -0.0 equal to 0.0 (its functions, ``atan2`` and ``signum`` too, see them alike), so a floating-point value
    is paired with its sign as its text shows it (-1 for "-0.0") and compared as a struct; null stays null."""
    from pyspark.sql import functions as F

    if not pa.types.is_floating(t):
        return c
    sign = F.when(c.cast("string").startswith("-"), F.lit(-1)).otherwise(F.lit(1))
    return F.when(c.isNull(), F.lit(None)).otherwise(F.struct(c, sign))


def _groups_exactly(t: Any) -> bool:
    """Whether Spark groups values of Spark type ``t`` exactly as their partition paths differ (equal values,
    equal strings): strings of the default (binary) collation, integers, booleans, dates. Not floating point
    (Spark groups -0.0 with 0.0), collated strings (``UTF8_LCASE`` groups "A" with "a"), decimals or
    timestamps (kept on the general path)."""
    from pyspark.sql.types import (
        BooleanType,
        ByteType,
        DateType,
        IntegerType,
        LongType,
        ShortType,
        StringType,
    )

    if isinstance(t, StringType):
        return getattr(t, "collation", "UTF8_BINARY") in (None, "UTF8_BINARY")
    return isinstance(t, (ByteType, ShortType, IntegerType, LongType, BooleanType, DateType))


def _bad_key_condition(kg: KeyGenerator, string_cols: set[str]) -> Column:
    """True for a record whose record key the key generator refuses (null or empty; with the complex encoding,
    every field null or empty; a string field that is not valid UTF-8; a key longer than the record index holds,
    counting a field that is not a string
    as one byte: a key too long only by such fields' text is refused by the write task that makes it);
    ``string_cols``: the input's string columns (the others cannot be empty)."""
    from pyspark.sql import functions as F

    def missing(f: str) -> Column:
        c = _col(f)
        return (c.isNull() | (c == F.lit(""))) if f in string_cols else c.isNull()

    def length(f: str) -> Column:
        """The bytes of the field's value in the key (its placeholder when null or empty; at most the text the key
        generator makes of a value that is not a string: one byte)."""
        c = _col(f)
        if f not in string_cols:
            return F.when(c.isNull(), F.lit(len(NULL_PLACEHOLDER))).otherwise(F.lit(1))
        return (F.when(c.isNull(), F.lit(len(NULL_PLACEHOLDER))).when(c == F.lit(""), F.lit(len(EMPTY_PLACEHOLDER)))
                .otherwise(F.octet_length(c)))

    fields = kg.record_key_fields
    # a string that is not valid UTF-8 (Spark passes such bytes on unchecked)
    invalid = F.lit(False)
    for f in dict.fromkeys(fields):
        if f in string_cols:
            invalid = invalid | (_col(f).isNotNull() & ~F.is_valid_utf8(_col(f)))
    if not kg.complex_key_encoding:
        return missing(fields[0]) | (length(fields[0]) > F.lit(MAX_ROW_LENGTH)) | invalid
    cond = missing(fields[0])
    for f in fields[1:]:
        cond = cond & missing(f)
    size = F.lit(len(fields) - 1 + sum(len(f) + 1 for f in fields))  # "f1:v1,f2:v2"
    for f in fields:
        size = size + length(f)
    return cond | (size > F.lit(MAX_ROW_LENGTH)) | invalid


#: the bucket of a bulk insert's record whose partition its plan did not see (the input changed between reads)
_UNPLANNED = -1


def bulk_insert_task(ctx: WriteContext, keygen: KeyGenerator) -> Callable[[pa.Table], pa.Table]:
    """Function of a bulk insert's write task (:func:`by_bucket`): one bucket's records, without record keys,
    partition paths or operations: their keys and partition paths made by the key generator (the path must be
    the bucket's), then written by :func:`write_bucket` as inserts."""

    def run(t: pa.Table) -> pa.Table:
        b = int(t.column(BUCKET_COL)[0].as_py())
        if b == _UNPLANNED:
            raise InvalidInputError(
                f"bulk_insert into {ctx.base_path}: the input gave {t.num_rows} records of partition "
                f"{keygen.partition_paths(t.slice(0, 1))[0].as_py()!r} to write that it did not give to plan the "
                "write: a source that changes between reads; nothing was committed")
        bucket = ctx.buckets[b]
        if not pc.all(pc.equal(keygen.partition_paths(t), bucket.partition)).as_py():
            raise RuntimeError(f"bulk insert: records routed to bucket {bucket.id} are not all of its partition "
                               f"{bucket.partition!r}")
        t = t.append_column(RECORD_KEY_COL, keygen.record_keys(t))
        return write_bucket(ctx, t.append_column(OP_COL, pa.repeat(pa.scalar(OP_UPSERT), t.num_rows)))

    return run


class DeleteProducer(WriteProducer):
    operation_type = "DELETE"
    delete_all = True

    def validate_columns(self, schema: StructType) -> list[str]:
        """The record key and partition columns only: a delete names keys (as Hudi's takes only the keys from its
        input), so its other columns are never read, whatever their types."""
        super().validate_columns(schema)
        return [c for c in schema.fieldNames() if c in (*self.cfg.record_key_fields, *self.cfg.partition_fields)]


def replaced_keys_task(storage: Storage, base_path: str):
    """mapInArrow function: (partition, file id, base file path, base instant) of replaced file groups -> one
    WriteStatus row per group listing its record keys as deleted (for the record index; not a write stat)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import posixpath

        from pyhudi.table import base_file

        for b in batches:
            for part, fid, rel, inst in zip(*(b.column(i).to_pylist() for i in range(4)), strict=True):
                keys = base_file.read_base_file(
                    storage, posixpath.join(base_path, rel), columns=[RECORD_KEY_COL]
                ).column(RECORD_KEY_COL).combine_chunks().cast(pa.string())
                yield pa.Table.from_pylist(
                    [{
                        "partition": part, "file_id": fid, "path": rel, "prev_commit": inst,
                        "prev_base_file": posixpath.basename(rel), "num_writes": 0, "num_inserts": 0,
                        "num_updates": 0, "num_deletes": 0, "file_size": 0, "min_key": None, "max_key": None,
                        "runtime_ms": 0, "inserted_keys": None, "updated_keys": [], "deleted_keys": keys.to_pylist(),
                    }],
                    schema=WRITE_STATUS_SCHEMA,
                ).to_batches()[0]

    return run


def replaced_slice_keys_task(spec: Any):
    """As :func:`replaced_keys_task` for a merge-on-read table: (partition, file id, base file path or null, JSON
    list of log file paths, base instant) of replaced file slices -> their live record keys (the slice read merged,
    so keys deleted in log files are left out and keys updated there counted once)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import json
        import posixpath

        from pyhudi.read.slice_reader import FileSliceReader, SliceSpec

        for b in batches:
            for part, fid, rel, logs, inst in zip(*(b.column(i).to_pylist() for i in range(5)), strict=True):
                log_paths = tuple(json.loads(logs))
                keys = FileSliceReader(spec, SliceSpec(part, fid, rel, log_paths)).read().column(RECORD_KEY_COL)
                yield pa.Table.from_pylist(
                    [{
                        "partition": part, "file_id": fid, "path": rel or log_paths[0], "prev_commit": inst,
                        "prev_base_file": posixpath.basename(rel) if rel else None, "num_writes": 0,
                        "num_inserts": 0, "num_updates": 0, "num_deletes": 0, "file_size": 0, "min_key": None,
                        "max_key": None, "runtime_ms": 0, "inserted_keys": None, "updated_keys": [],
                        "deleted_keys": keys.to_pylist(),
                    }],
                    schema=WRITE_STATUS_SCHEMA,
                ).to_batches()[0]

    return run


class InsertOverwriteProducer(WriteProducer):
    """insert_overwrite: a ``replacecommit`` that writes the input to new file groups and replaces every file
    group of the partitions the input holds (``partitionToReplaceFileIds``). Stored records are neither looked
    up nor merged; the batch is combined as an insert's (``hoodie.combine.before.insert``). Records flagged
    ``_hoodie_is_deleted`` are dropped (the partitions they name are not overwritten for them).

    With a global index a key is unique in the table: an input key stored in a partition this write does not
    overwrite is rejected (InvalidInputError) before anything is written. The record index gets the new keys'
    mappings and delete markers for the keys of the replaced file groups that are not written again (their
    keys are read in Spark tasks, as deleted-key lists of extra WriteStatus rows).
    """

    operation_type = "INSERT_OVERWRITE"
    action = REPLACE_COMMIT
    uses_index = False
    combine_option = "combine_before_insert"
    fills_small_files = False
    overwrites_table = False

    def __init__(self, job: WriteJob) -> None:
        super().__init__(job)
        self.replaced: dict[str, list[str]] = {}
        self._profile: dict[str, int] = {}

    @property
    def inserts_unique_keys(self) -> bool:
        # the whole table's overwrite conflicts with any concurrent write (pyhudi.txn.conflict)
        return self.cfg.is_global_index and not self.overwrites_table

    def prepare(self, df: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        return super().prepare(df).filter(F.col(OP_COL) == OP_UPSERT)

    def tag(self, prepared: DataFrame) -> DataFrame:
        if self.cfg.is_global_index and not self.overwrites_table and self.job.view.latest_base_files():
            self.check_global_keys(prepared)
        return super().tag(prepared)  # uses_index is false: every record goes to a new file group

    def check_global_keys(self, prepared: DataFrame, limit: int = 5) -> None:
        """InvalidInputError naming input keys stored in a partition this write does not overwrite."""
        from pyspark.sql import functions as F

        job = self.job
        overwritten = job.incoming_partitions()
        # only what the check reads: the index need not carry (or route) the whole records
        keys = prepared.select(RECORD_KEY_COL, PARTITION_PATH_COL, OP_COL)
        tagged = index_for(self.cfg.index_type).tag(job, keys)
        clash = tagged.filter(F.col(LOC_FILE_ID_COL).isNotNull() & ~F.col(LOC_PARTITION_COL).isin(overwritten))
        listed = _stored_elsewhere(clash, limit)
        if listed:
            raise InvalidInputError(
                f"{self.cfg.operation}: {listed}, a partition this write does not overwrite; with the global index "
                f"{self.cfg.index_type} a record key is unique in the table (upsert moves keys between partitions)"
            )

    def plan(self, counts: list[tuple[str, str | None, int]]) -> list[Bucket]:
        view = self.job.view
        parts = view.partitions() if self.overwrites_table else sorted({p for p, _, _ in counts})
        self.replaced = {p: sorted({fs.file_id for fs in view.latest_file_slices(p)}) for p in parts}
        self.refuse_clustered({(p, f) for p, ids in self.replaced.items() for f in ids})
        self._profile = {p: 0 for p, _, _ in counts}
        for p, _, n in counts:
            self._profile[p] += n
        return super().plan(counts)

    def write(self, tagged: DataFrame, buckets: list[Bucket]) -> list[WriteStat]:
        from pyspark.sql.pandas.types import from_arrow_schema

        stats = super().write(tagged, buckets)
        job = self.job
        if job.merge_on_read:  # the live keys of the replaced file slices: base and log files merged
            import json

            from pyhudi.read import plan as read_plan
            from pyhudi.table.properties import METAFOLDER, read_table_config

            slices: list[tuple[Any, ...]] = [
                (s.partition, s.file_id, s.base_file_path, json.dumps(list(s.log_file_paths)), s.base_instant)
                for p, ids in self.replaced.items() for s in job.view.latest_file_slices(p) if s.file_id in ids
            ]
            table = read_plan.TableFiles(job.storage, job.base_path,
                                         read_table_config(job.storage, posixpath.join(job.base_path, METAFOLDER)))
            spec = read_plan.snapshot(table, timeline=job.timeline, view=job.view).project([RECORD_KEY_COL]).read
            task: Any = replaced_slice_keys_task(spec)
            schema = "partition string, file_id string, path string, logs string, instant string"
        else:
            slices = [
                (s.partition, s.file_id, s.base_file.relative_path, s.base_instant)
                for p, ids in self.replaced.items()
                for s in job.view.latest_file_slices(p)
                if s.file_id in ids and s.base_file is not None
            ]
            task = replaced_keys_task(job.storage, job.base_path)
            schema = "partition string, file_id string, path string, instant string"
        files = slices
        if files:
            src = local_frame(job.spark, files, schema)
            gone = src.repartition(max(1, min(len(files), job.parallelism))).mapInArrow(
                task, from_arrow_schema(WRITE_STATUS_SCHEMA)
            )
            # read lazily (only a record index consumes the key lists), once
            gone = gone.persist(_status_storage_level())
            self.job.held.append(gone)
            written = getattr(self, "status_df", None)
            self.status_df = gone if written is None else written.unionByName(gone)
            self.index_changes = self.index_deletes = None  # the replaced groups' keys are not counted yet
        return stats

    def requested_metadata(self) -> dict[str, Any] | None:
        # as Hudi 1.1 writes it for insert overwrite: every field null
        return {"operationType": None, "clusteringPlan": None, "extraMetadata": None, "version": None}

    def inflight_metadata(self) -> dict[str, Any]:
        """Hudi's workload profile: per partition, one stat of the records to insert (no file id yet)."""
        md = super().inflight_metadata()
        md["partitionToWriteStats"] = {p: [_profile_stat(n)] for p, n in sorted(self._profile.items())}
        return md

    def commit_metadata(self, stats: list[WriteStat]) -> dict[str, Any]:
        md = super().commit_metadata(stats)
        md["partitionToReplaceFileIds"] = dict(self.replaced)
        return md


class InsertOverwriteTableProducer(InsertOverwriteProducer):
    """insert_overwrite_table: as insert_overwrite, replacing the file groups of every partition of the table."""

    operation_type = "INSERT_OVERWRITE_TABLE"
    overwrites_table = True


def _profile_stat(inserts: int) -> dict[str, Any]:
    """A workload-profile entry of the inflight instant: inserts not yet assigned to a file group."""
    return write_stat(file_id="", path=None, partition=None, num_inserts=inserts)


PRODUCERS: dict[str, type[WriteProducer]] = {
    "upsert": UpsertProducer,
    "insert": InsertProducer,
    "bulk_insert": BulkInsertProducer,
    "delete": DeleteProducer,
    "insert_overwrite": InsertOverwriteProducer,
    "insert_overwrite_table": InsertOverwriteTableProducer,
}
