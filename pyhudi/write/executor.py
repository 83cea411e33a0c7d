"""Task side of a write: turn the incoming records of one bucket (file group) into one new base file.

Runs inside a Spark Python worker on one Arrow table (all records routed to the bucket). Everything it touches
goes through :class:`~pyhudi.io.storage.Storage`; nothing refers to driver-local state.

- insert bucket: a new file group receives the records.
- update bucket: copy-on-write merge of the file group's current base file with the incoming records: updates
  replace records in place (unless event-time ordering says the stored record is newer), deletes drop them,
  new keys routed here (small-file filling) are appended. Untouched records keep their commit time and
  sequence number.
- append bucket (merge-on-read tables): the updates and deletes go to a new log file of the file group
  (:mod:`pyhudi.write.append`).
"""

from __future__ import annotations

import posixpath
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi import faults
from pyhudi.io.storage import Storage
from pyhudi.spark.task import task_ids
from pyhudi.table import base_file, filenames, markers
from pyhudi.table.commit_metadata import NULL_COMMIT
from pyhudi.table.evolution import conform_table
from pyhudi.table.schema import (
    COMMIT_SEQNO_COL,
    COMMIT_TIME_COL,
    RECORD_KEY_COL,
    with_meta,
)
from pyhudi.write.append import APPEND, append_bucket
from pyhudi.write.status import WRITE_STATUS_SCHEMA, status_row

OP_COL = "_hoodie_op"  # per incoming record: "U" upsert/insert, "D" delete
BUCKET_COL = "_hoodie_bucket"
OP_UPSERT = "U"
OP_DELETE = "D"
INSERT = "insert"
UPDATE = "update"


@dataclass(frozen=True)
class Bucket:
    """One unit of write work: a new file group (insert), a rewrite of an existing one (update) or, in a
    merge-on-read table, a new log file of an existing one (append)."""

    id: int
    kind: str
    partition: str
    file_id: str
    base_file: str | None = None  # current base file name (update buckets)
    prev_commit: str = NULL_COMMIT


@dataclass(frozen=True)
class WriteContext:
    """Everything a write task needs; pickled into the Spark closure."""

    storage: Storage
    base_path: str
    instant: str
    data_schema: pa.Schema  # the table's columns without meta columns, in table order
    ordering_fields: tuple[str, ...]
    event_time_ordering: bool
    parquet_options: dict[str, str]
    buckets: dict[int, Bucket]
    sort_by_key: bool = False
    # an insert that keeps the stored records of keys it inserts again (hoodie.merge.allow.duplicate.on.inserts)
    keep_stored: bool = False
    # merge-on-read: deletes are records flagged _hoodie_is_deleted, ordered by event time (not a delete operation)
    ordered_deletes: bool = False
    fault: str | None = None  # the write's fault spec (pyhudi.faults), acted on in the task
    log_schema: str | None = None  # merge-on-read: the SCHEMA header of the log blocks (pyhudi.write.append)
    stats_columns: tuple[str, ...] | None = None  # the table keeps column_stats of these columns


def write_bucket(ctx: WriteContext, incoming: pa.Table) -> pa.Table:
    """Write one bucket; returns its WriteStatus (one row)."""
    t0 = time.monotonic()
    bucket = ctx.buckets[int(incoming.column(BUCKET_COL)[0].as_py())]
    if bucket.kind == APPEND:
        is_del = pc.fill_null(pc.equal(incoming.column(OP_COL), OP_DELETE), False)
        keys = incoming.column(RECORD_KEY_COL).combine_chunks()
        ups = pc.invert(is_del)
        ordering = None  # flagged deletes under event-time ordering carry their ordering value (one field)
        if ctx.ordered_deletes and len(ctx.ordering_fields) == 1 and ctx.ordering_fields[0] in incoming.column_names:
            ordering = incoming.column(ctx.ordering_fields[0]).combine_chunks().filter(is_del)
        return append_bucket(ctx, bucket, _align(incoming.filter(ups), ctx.data_schema), keys.filter(ups),
                             keys.filter(is_del), t0, ordering)
    part_id, token = task_ids()
    file_name = filenames.make_base_file_name(bucket.file_id, token, ctx.instant)
    rel_path = posixpath.join(bucket.partition, file_name) if bucket.partition else file_name
    full_path = posixpath.join(ctx.base_path, rel_path)
    filenames.write_partition_metadata(ctx.storage, ctx.base_path, bucket.partition, ctx.instant)
    markers.create_marker(
        ctx.storage, ctx.base_path, ctx.instant, bucket.partition, file_name,
        markers.IOType.MERGE if bucket.kind == UPDATE else markers.IOType.CREATE,
    )
    new = _align(incoming, ctx.data_schema)
    ops = incoming.column(OP_COL).combine_chunks()
    keys = incoming.column(RECORD_KEY_COL).combine_chunks()
    if bucket.kind == UPDATE:
        assert bucket.base_file is not None
        old_path = posixpath.join(ctx.base_path, bucket.partition, bucket.base_file) if bucket.partition else (
            posixpath.join(ctx.base_path, bucket.base_file)
        )
        old = _align(base_file.read_base_file(ctx.storage, old_path), with_meta(ctx.data_schema))
        out, inserted, updated, deleted = _merge(ctx, old, new, keys, ops)
    else:
        is_ins = pc.fill_null(pc.equal(ops, OP_UPSERT), False)
        if not pc.all(is_ins).as_py():  # a bulk insert's are all inserts: no copy
            new, keys = new.filter(is_ins), keys.filter(is_ins)
        if ctx.sort_by_key:
            order = pc.sort_indices(keys)
            new, keys = new.take(order), keys.take(order)
        out = new
        inserted, updated, deleted = keys, pa.array([], pa.string()), pa.array([], pa.string())
    out = _meta_for_new(out, keys if bucket.kind == INSERT else None)
    written = base_file.write_base_file(
        ctx.storage,
        full_path,
        out,
        instant_time=ctx.instant,
        partition_path=bucket.partition,
        task_partition_id=part_id,
        options=ctx.parquet_options,
    )
    faults.at("after_write", ctx.fault or "")
    from pyhudi.metadata.column_stats import written_file_cells

    cells = written_file_cells(bucket.partition, written, ctx.stats_columns)
    return status_row(
        partition=bucket.partition,
        file_id=bucket.file_id,
        path=rel_path,
        prev_commit=bucket.prev_commit,
        prev_base_file=bucket.base_file,
        num_writes=written.num_rows,
        num_inserts=len(inserted),
        num_updates=len(updated),
        num_deletes=len(deleted),
        file_size=written.size_bytes,
        min_key=written.min_record_key,
        max_key=written.max_record_key,
        runtime_ms=int((time.monotonic() - t0) * 1000),
        inserted_keys=inserted,
        updated_keys=updated,
        deleted_keys=deleted,
        column_stats=cells,
    )


def _align(t: pa.Table, schema: pa.Schema) -> pa.Table:
    """``t`` with exactly ``schema``'s columns, in order (meta columns may be absent): a file written before a
    column existed gets nulls there, promoted types are converted (:func:`pyhudi.table.evolution.conform_table`)."""
    return conform_table(t, schema, "write")


def _old_wins(old: pa.Table, new: pa.Table, fields: tuple[str, ...]) -> np.ndarray:
    """Row-wise: does the stored record have a greater ordering value than the incoming one (lexicographic, in
    Java's order as Hudi compares them and a merge-on-read reader does: NaN above every number, -0.0 below 0.0)?"""
    from pyhudi.read.merge import java_order

    wins = np.zeros(old.num_rows, bool)
    undecided = np.ones(old.num_rows, bool)
    for f in fields:
        a, b = java_order(old.column(f).combine_chunks()), java_order(new.column(f).combine_chunks())
        gt = pc.fill_null(pc.greater(a, b), False).to_numpy(zero_copy_only=False)
        gt |= (pc.is_valid(a).to_numpy(zero_copy_only=False) & pc.is_null(b).to_numpy(zero_copy_only=False))
        eq = pc.fill_null(pc.equal(a, b), False).to_numpy(zero_copy_only=False)
        eq |= pc.and_(pc.is_null(a), pc.is_null(b)).to_numpy(zero_copy_only=False)
        wins |= undecided & gt
        undecided &= eq
    return wins


def _merge(
    ctx: WriteContext, old: pa.Table, new: pa.Table, keys: pa.Array, ops: pa.Array
) -> tuple[pa.Table, pa.Array, pa.Array, pa.Array]:
    """A file group's stored records merged with the incoming ones: each stored record of a key that comes in is
    replaced by the winning incoming record of the key (or dropped by a delete), unless it wins itself under
    event-time ordering; incoming records of other keys are appended (all of them: a batch that was not combined
    keeps its duplicates of new keys, as written into a new file group). An insert that keeps stored records
    (:attr:`WriteContext.keep_stored`) appends every incoming record."""
    old_keys = old.column(RECORD_KEY_COL).combine_chunks()
    n_old = old.num_rows
    is_del = pc.fill_null(pc.equal(ops, OP_DELETE), False).to_numpy(zero_copy_only=False)
    if ctx.keep_stored:  # no stored row matched: every one kept, every incoming record appended
        matched = np.zeros(n_old, bool)
        j = np.zeros(n_old, np.int64)
        in_old = np.zeros(len(keys), bool)
    else:  # the incoming records of stored keys
        pos = pc.index_in(old_keys, value_set=keys)  # per stored row: its (first) incoming record, or null
        matched = pc.is_valid(pos).to_numpy(zero_copy_only=False)
        j = pos.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        in_old = pc.is_in(keys, value_set=old_keys.filter(pa.array(matched))).to_numpy(zero_copy_only=False)
        cand = np.flatnonzero(in_old)
        if len(cand) and pc.count_distinct(keys.take(pa.array(cand))).as_py() < len(cand):
            cand = _winners(ctx, new, keys, cand)  # a batch not combined: one incoming record per stored key
            pos = pc.index_in(old_keys, value_set=keys.take(pa.array(cand)))
            j = cand[pos.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)]
    take_new = matched & ~is_del[j]
    if ctx.event_time_ordering and ctx.ordering_fields and n_old:
        idx = np.flatnonzero(take_new)
        if len(idx):
            keep_old = _old_wins(old.take(pa.array(idx)), new.take(pa.array(j[idx])), ctx.ordering_fields)
            take_new[idx[keep_old]] = False
    dropped = matched & is_del[j]
    ins = np.flatnonzero(~in_old & ~is_del)
    # stored rows in place (replaced by incoming when it wins), then new keys appended
    src_old = np.flatnonzero(~dropped)
    new_full = _align(new.append_column(RECORD_KEY_COL, keys), old.schema)
    new_full = _mark_new(new_full, np.ones(new.num_rows, bool))
    old_m = _mark_new(old, np.zeros(n_old, bool))
    combined = pa.concat_tables([old_m, new_full])
    order = np.where(take_new[src_old], n_old + j[src_old], src_old)
    order = np.concatenate([order, n_old + ins]).astype(np.int64)
    out = combined.take(pa.array(order))
    updated = old_keys.filter(pa.array(take_new))
    deleted = old_keys.filter(pa.array(dropped))
    inserted = keys.take(pa.array(ins, pa.int64()))
    return out, inserted, updated, deleted


def _winners(ctx: WriteContext, new: pa.Table, keys: pa.Array, rows: np.ndarray) -> np.ndarray:
    """Of the incoming ``rows`` (positions), one per key: the greatest ordering value under event-time ordering
    (Java's order; a null below every value), the later record on a tie or under commit-time ordering."""
    from pyhudi.read.merge import java_order

    sub = pa.table({"k": keys.take(pa.array(rows)), "i": pa.array(rows, pa.int64())})
    sort = [("k", "ascending", "at_end")]
    if ctx.event_time_ordering:
        for n, f in enumerate(ctx.ordering_fields):
            sub = sub.append_column(f"o{n}", java_order(new.column(f).combine_chunks().take(pa.array(rows))))
            sort.append((f"o{n}", "descending", "at_end"))
    sort.append(("i", "descending", "at_end"))
    ordered = sub.take(pc.sort_indices(sub, sort_keys=sort))
    k = ordered.column("k").combine_chunks()
    first = np.ones(len(k), bool)
    if len(k) > 1:
        first[1:] = pc.not_equal(k.slice(1), k.slice(0, len(k) - 1)).to_numpy(zero_copy_only=False)
    return np.sort(ordered.column("i").to_numpy()[first])


_NEW_FLAG = "__pyhudi_new"


def _mark_new(t: pa.Table, flags: np.ndarray) -> pa.Table:
    return t.append_column(_NEW_FLAG, pa.array(flags, pa.bool_()))


def _meta_for_new(t: pa.Table, insert_keys: pa.Array | None) -> pa.Table:
    """Data plus the meta columns the base-file writer keeps: records new in this commit get null commit time
    and sequence number (filled in by the writer), carried-over records keep theirs."""
    if _NEW_FLAG in t.column_names:
        is_new = t.column(_NEW_FLAG).combine_chunks()
        t = t.drop_columns([_NEW_FLAG])
        n = t.num_rows
        keep = pc.invert(is_new)
        ct = pc.if_else(keep, t.column(COMMIT_TIME_COL), pa.nulls(n, pa.string()))
        sq = pc.if_else(keep, t.column(COMMIT_SEQNO_COL), pa.nulls(n, pa.string()))
        t = t.set_column(t.schema.get_field_index(COMMIT_TIME_COL), COMMIT_TIME_COL, ct)
        return t.set_column(t.schema.get_field_index(COMMIT_SEQNO_COL), COMMIT_SEQNO_COL, sq)
    assert insert_keys is not None
    return t.append_column(RECORD_KEY_COL, insert_keys)


def empty_status() -> pa.Table:
    return WRITE_STATUS_SCHEMA.empty_table()
