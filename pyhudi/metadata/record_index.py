"""The record index (``record_index`` metadata partition): record key -> (partition, file id, instant).

N file groups ``record-index-0000-0`` ...; a key lives in file group ``abs(abs(String.hashCode(key)) % N)``.
Cell values are ``HoodieMetadataRecord`` datums (type 5) with the key blanked, so every key written to the same
file by the same commit has the same value bytes: encoding and decoding work on the distinct values only.

Lookups are vectorised per file group: one batch lookup in the base HFile, one per valid log block (HFile data
blocks and delete blocks, in log order, later wins), and the found values decoded once per distinct value.
"""

from __future__ import annotations

import math
import os
import posixpath
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, tzinfo
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi import config as C
from pyhudi.errors import ConfigError
from pyhudi.hfile import HFileReader, hfile_bytes
from pyhudi.io.arrow import pack_strings, to_binary_array, unpack_strings
from pyhudi.io.compression import CODEC_GZ
from pyhudi.io.logfile import BlockType, DeleteRecord, HeaderKey, delete_block, encode_block
from pyhudi.io.storage import Storage
from pyhudi.metadata._kernels import ascii_file_groups
from pyhudi.metadata.partitions import RECORD_INDEX, metadata_base_path, pending_indexing
from pyhudi.metadata.reader import BlockFilter, MetadataTableReader, valid_log_blocks
from pyhudi.metadata.records import (
    decode_value,
    encode_value,
    record_index_file_group,
    record_index_record,
    writer_schema_json,
)
from pyhudi.spark.frames import local_frame
from pyhudi.spark.partitioning import ROUTE_COL, positions_by_group, route_values
from pyhudi.spark.task import task_ids
from pyhudi.table.properties import METAFOLDER, TableConfig, read_table_config
from pyhudi.table.timeline import ActiveTimeline, parse_instant_time

ASSUMED_BYTES_PER_ENTRY = 48  # Hudi's estimate when sizing the partition

LOCATION_SCHEMA = pa.schema(
    [("key", pa.string()), ("partition", pa.string()), ("file_id", pa.string()), ("instant_ms", pa.int64())]
)


def estimate_file_groups(num_records: int, options: Mapping[str, str] | None = None) -> int:
    """Hudi's estimate of the record index's file group count for ``num_records`` keys."""
    o = options or {}
    lo, hi = C.int_option(o, C.RECORD_INDEX_MIN_FILE_GROUPS, 1), C.int_option(o, C.RECORD_INDEX_MAX_FILE_GROUPS, 1)
    max_size = C.int_option(o, C.RECORD_INDEX_MAX_FILE_GROUP_SIZE, ASSUMED_BYTES_PER_ENTRY)
    growth = C.float_option(o, C.RECORD_INDEX_GROWTH_FACTOR, 0.0)
    if hi < lo:
        raise ConfigError(
            f"option {C.RECORD_INDEX_MAX_FILE_GROUPS}={hi} is below {C.RECORD_INDEX_MIN_FILE_GROUPS}={lo}"
        )
    if lo == hi:
        return lo
    n = math.ceil(num_records * growth / (max_size / ASSUMED_BYTES_PER_ENTRY))
    return max(lo, min(hi, n))


def file_group_id(index: int) -> str:
    return f"record-index-{index:04d}-0"


# -- key -> file group ---------------------------------------------------------------------------------------
def file_groups_of(keys: pa.Array | pa.ChunkedArray, n: int) -> np.ndarray:
    """Java ``String.hashCode`` routing of every key: compiled for ASCII keys, per key in Python for the rest."""
    if isinstance(keys, pa.ChunkedArray):  # chunk by chunk: together they may pass 2 GiB of string data
        if keys.num_chunks == 1:
            return file_groups_of(keys.chunk(0), n)
        return np.concatenate([file_groups_of(c, n) for c in keys.chunks] or [np.empty(0, np.int64)])
    arr = keys
    out = np.empty(len(arr), np.int64)
    if len(arr) == 0:
        return out
    data, offsets = _buffers(arr)
    ascii_file_groups(data, offsets, n, out)
    others = np.flatnonzero(out < 0)
    if len(others):
        texts = arr.cast(pa.string()) if not pa.types.is_string(arr.type) else arr
        for i in others:
            out[i] = record_index_file_group(texts[int(i)].as_py(), n)
    return out


def _buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    from pyhudi.io.arrow import binary_buffers

    return binary_buffers(to_binary_array(arr))


# -- values --------------------------------------------------------------------------------------------------
def _codes(arr: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[Any]]:
    """(a number per element, the distinct values those numbers index); a null is refused."""
    enc = pc.dictionary_encode(arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr)
    if enc.indices.null_count:
        raise ValueError("record index: a null file id or instant time in the locations to encode")
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), enc.dictionary.to_pylist()


def encode_locations(partitions: pa.Array, file_ids: pa.Array, instants_ms: pa.Array) -> pa.Array:
    """Cell values for parallel (partition, file id, instant ms) arrays: each distinct location encoded once
    (the locations numbered with integer arithmetic: no join or copy of the strings)."""
    n = len(partitions)
    if n == 0:
        return pa.array([], pa.binary())
    # a null partition is the empty one (a non-partitioned table's)
    (pi, ps), (fi, fs), (ti, ts) = _codes(pc.fill_null(partitions, "")), _codes(file_ids), _codes(instants_ms)
    combined = (pi * len(fs) + fi) * len(ts) + ti
    uniq, inverse = np.unique(combined, return_inverse=True)
    values = []
    for c in uniq.tolist():
        rest, t = divmod(c, len(ts))
        p, f = divmod(rest, len(fs))
        values.append(encode_value(record_index_record("", ps[p], fs[f], int(ts[t]))))
    return pa.array(values, pa.binary()).take(pa.array(inverse.astype(np.int32)))


def decode_locations(values: pa.Array | pa.ChunkedArray, schema_json: str | None = None) -> pa.Table:
    """(partition, file_id, instant_ms) of record-index cell values, decoding each distinct value once."""
    if len(values) == 0:
        return pa.table({"partition": pa.array([], pa.string()), "file_id": pa.array([], pa.string()),
                         "instant_ms": pa.array([], pa.int64())})
    enc = pc.dictionary_encode(values).combine_chunks() if isinstance(values, pa.ChunkedArray) else pc.dictionary_encode(values)
    parts, fids, times = [], [], []
    for v in enc.dictionary.to_pylist():
        info = decode_value("", v, schema_json).record_index
        assert info is not None
        parts.append(info.partition)
        fids.append(info.file_id)
        times.append(info.instant_time_ms)
    idx = enc.indices
    return pa.table(
        {
            "partition": pa.array(parts, pa.string()).take(idx),
            "file_id": pa.array(fids, pa.string()).take(idx),
            "instant_ms": pa.array(times, pa.int64()).take(idx),
        }
    )


def key_order(keys: pa.Array) -> pa.Array:
    """Indices that sort ``keys`` (binary), each key once: a key given twice (one commit's ``insert`` of a key
    into two file groups, which Hudi allows; the index names one of them) keeps its first occurrence."""
    order = pc.sort_indices(keys)
    k = keys.take(order)
    if len(k) > 1:
        repeat = np.zeros(len(k), bool)
        repeat[1:] = pc.equal(k.slice(1), k.slice(0, len(k) - 1)).to_numpy(zero_copy_only=False)
        if repeat.any():
            order = order.filter(pa.array(~repeat))
    return order


def sorted_cells(keys: pa.Array, values: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(keys, values) in key order, each key once (:func:`key_order`)."""
    keys = to_binary_array(keys)
    order = key_order(keys)
    return keys.take(order), values.take(order)


def log_block_bytes(instant: str, keys: pa.Array, values: pa.Array, deleted: Sequence[str] = (), *,
                    presorted: bool = False) -> bytes:
    """The log file content a commit appends to one record-index file group: an HFile data block of new
    mappings (``presorted``: ``keys`` are sorted already) and, if any, a delete block of removed keys."""
    out = b""
    schema = writer_schema_json()
    if len(keys):
        k, v = (to_binary_array(keys), values) if presorted else sorted_cells(keys, values)
        content, _ = hfile_bytes(k, v, codec=CODEC_GZ, file_info={"schema": schema.encode()})
        del k, v
        header = [(HeaderKey.INSTANT_TIME, instant), (HeaderKey.SCHEMA, schema)]
        out += encode_block(BlockType.HFILE_DATA, header, content)
    if deleted:
        out += delete_block([DeleteRecord(k, RECORD_INDEX, 0) for k in sorted(deleted)], instant)
    return out


def _location_table(
    found_keys: pa.Array | pa.ChunkedArray, values: pa.Array | pa.ChunkedArray, schema_json: str | None
) -> pa.Table:
    return pa.table([found_keys, *decode_locations(values, schema_json).columns], schema=LOCATION_SCHEMA)


# -- lookups -------------------------------------------------------------------------------------------------
#: file groups looked up at once by one process (each also inflates its blocks in the HFile reader's threads)
_GROUP_THREADS = 4


@dataclass(frozen=True)
class RecordIndexLookup:
    """Everything needed to look keys up in the record index, picklable into Spark tasks."""

    storage: Storage
    mdt_path: str
    slices: tuple[tuple[str | None, tuple[str, ...]], ...]  # per file group: base file path, log file paths
    block_filter: BlockFilter
    file_bytes: int  # size on storage of the latest file slices of every file group (from the listing)

    @staticmethod
    def from_reader(reader: MetadataTableReader) -> RecordIndexLookup:
        slices = []
        nbytes = 0
        for fs in reader.file_slices(RECORD_INDEX):
            base = posixpath.join(reader.mdt_path, fs.base_file.relative_path) if fs.base_file else None
            logs = tuple(posixpath.join(reader.mdt_path, lf.relative_path) for lf in fs.log_files)
            slices.append((base, logs))
            nbytes += fs.total_size
        return RecordIndexLookup(reader.storage, reader.mdt_path, tuple(slices), reader.block_filter, nbytes)

    @property
    def num_file_groups(self) -> int:
        return len(self.slices)

    def lookup_group(self, fg: int, keys: pa.Array) -> pa.Table:
        """Locations of the ``keys`` (all routed to file group ``fg``) that the index holds."""
        found_keys, values, schema = self._raw_lookup(fg, keys)
        return _location_table(found_keys, values, schema)

    def _raw_lookup(self, fg: int, keys: pa.Array) -> tuple[pa.Array, pa.Array, str | None]:
        """(found keys, their undecoded cell values, the writer schema) of ``keys`` in file group ``fg``:
        the base HFile, then the valid log blocks in order (later wins; delete blocks remove)."""
        keys = to_binary_array(keys)
        n = len(keys)
        values: pa.Array = pa.nulls(n, pa.binary())
        schema: str | None = None
        base, logs = self.slices[fg]
        if base is not None and n:
            with HFileReader.open(self.storage, base) as h:
                values = h.lookup(keys).column("value").combine_chunks()
                sj = h.file_info.get("schema")
                schema = sj.decode() if sj else None
        for b in valid_log_blocks(self.storage, list(logs), self.block_filter) if n else []:
            if b.block_type == BlockType.HFILE_DATA:
                found = b.hfile().lookup(keys).column("value").combine_chunks()
                values = pc.if_else(pc.is_valid(found), found, values)
                schema = schema or b.schema
            elif b.block_type == BlockType.DELETE:
                gone = pa.array([d.record_key for d in b.delete_records() if d.record_key is not None], pa.string())
                if len(gone):
                    hit = pc.is_in(keys.cast(pa.string()), value_set=gone)
                    values = pc.if_else(hit, pa.scalar(None, pa.binary()), values)
        present = pc.is_valid(values)
        return keys.filter(present).cast(pa.string()), values.filter(present), schema

    def live_keys(self, fg: int) -> pa.Array:
        """Every key file group ``fg`` maps (base plus valid log blocks, deletes applied)."""
        base, logs = self.slices[fg]
        parts: list[pa.Array] = []
        if base is not None:
            with HFileReader.open(self.storage, base) as h:
                parts.append(h.read_all().column("key").combine_chunks())
        keys = pa.concat_arrays(parts) if parts else pa.array([], pa.binary())
        for b in valid_log_blocks(self.storage, list(logs), self.block_filter):
            if b.block_type == BlockType.HFILE_DATA:
                keys = pa.concat_arrays([keys, b.hfile().read_all().column("key").combine_chunks()])
            elif b.block_type == BlockType.DELETE:
                gone = pa.array([d.record_key.encode() for d in b.delete_records() if d.record_key], pa.binary())
                keys = keys.filter(pc.invert(pc.is_in(keys, value_set=gone)))
        return pc.unique(keys).cast(pa.string())

    def lookup(self, keys: Sequence[str] | pa.Array) -> pa.Table:
        """Driver-side lookup of any keys: routes them to their file groups, one batch per group."""
        arr = to_binary_array(keys).cast(pa.string())
        if not self.slices or len(arr) == 0:
            return LOCATION_SCHEMA.empty_table()
        fgs = file_groups_of(arr, self.num_file_groups)
        groups = [int(g) for g in np.unique(fgs)]
        with ThreadPoolExecutor(max_workers=max(1, min(len(groups), os.cpu_count() or 1, _GROUP_THREADS))) as ex:
            raw = list(ex.map(lambda g: self._raw_lookup(g, arr.filter(pa.array(fgs == g))), groups))
        # the file groups share most values (a base file's keys spread over every group): decode them together
        by_schema: dict[str | None, list[tuple[pa.Array, pa.Array]]] = {}
        for k, v, sj in raw:
            by_schema.setdefault(sj, []).append((k, v))
        return pa.concat_tables(  # chunked: the values of all groups may exceed one binary array's 2 GiB
            _location_table(pa.chunked_array([k for k, _ in kv], pa.string()),
                            pa.chunked_array([v for _, v in kv], pa.binary()), sj)
            for sj, kv in by_schema.items()
        )


# -- Spark jobs ----------------------------------------------------------------------------------------------
_FG_COL = "__rli_fg"


def file_group_tasks(n: int, parallelism: int) -> int:
    """How many Spark tasks share the ``n`` record-index file groups of a job of ``parallelism``."""
    return max(1, min(n, parallelism))


def file_group_partitions(fgs: np.ndarray, partitions: int) -> np.ndarray:
    """The Spark partition of every record-index file group when ``partitions`` tasks share them: g mod
    ``partitions`` (Hudi gives each file group a task of its own; here a task may hold several)."""
    return fgs % partitions


def _with_file_group(b: pa.RecordBatch, fgs: np.ndarray, partitions: int) -> pa.RecordBatch:
    """``b`` with the file group of each row and the route that sends it to its partition (see
    :func:`by_file_group`)."""
    route = route_values(file_group_partitions(fgs, partitions), partitions)
    return b.append_column(_FG_COL, pa.array(fgs, pa.int32())).append_column(ROUTE_COL, route)


def add_file_group_task(key_col: str, n: int, partitions: int):
    """mapInArrow function appending the record-index file group of ``key_col`` (and its route) to every batch."""

    def run(batches):
        for b in batches:
            yield _with_file_group(b, file_groups_of(b.column(key_col), n), partitions)

    return run


def by_file_group(rows, partitions: int, fn, schema: pa.Schema):
    """Spark: ``fn`` applied to the rows of each record-index file group (rows made by :func:`_with_file_group`),
    the groups spread evenly over ``partitions`` tasks (a hash of the file group number alone would pile several
    groups into one task)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return rows.repartition(partitions, ROUTE_COL).groupBy(ROUTE_COL, _FG_COL).applyInArrow(
        fn, from_arrow_schema(schema)
    )


def by_own_file_group(rows, n: int, fn, schema: pa.Schema):
    """Spark: the iterator function ``fn`` applied to the rows of each record-index file group (rows made by
    :func:`_with_file_group` with ``n`` partitions), one task per file group, as Hudi runs them: the rows reach
    Python in the order they arrive, not sorted by group first (the sort ``groupBy`` needs, a JVM sort of every
    changed key, took about a third of a bulk load's record-index job)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return rows.repartition(n, ROUTE_COL).mapInArrow(fn, from_arrow_schema(schema))


STAT_SCHEMA = pa.schema([("rel", pa.string()), ("file_id", pa.string()), ("size", pa.int64()), ("n", pa.int64())])


# a commit whose record-index changes (inserted plus deleted keys) are at most this many writes them from the
# driver: two small collects of the cached WriteStatus rows instead of a job with a shuffle and Python workers,
# about 1 s less per small commit on 2 cores; encoding 200k keys into 10 file groups' log files takes the driver
# 0.6 CPU-s (1M keys: 2.1 CPU-s), and the keys on the driver are ~10 MB at most
DRIVER_UPDATE_MAX_KEYS = 250_000


def write_updates(spark, status_df, storage: Storage, mdt_path: str, instant: str, n: int,
                  changed: int | None = None, deleted: int | None = None,
                  locations: list[tuple[str, str]] | None = None, *, zone: tzinfo | None = UTC) -> list[dict]:
    """Append one log file per touched record-index file group for the commit ``instant``: new mappings for
    inserted keys, delete markers for deleted keys (a key both deleted and inserted, i.e. moved, keeps only
    its new mapping). Written by a Spark job over the WriteStatus rows, or, for a commit of at most
    :data:`DRIVER_UPDATE_MAX_KEYS` changed keys, from the driver (the same files); returns one stat per log file.
    ``changed``: that number when the caller counted it already (no Spark job to count it here); ``deleted``:
    the number of deleted keys among them, when counted, and ``locations``: every (partition, file id) the
    WriteStatus rows insert keys into: with both given and no deleted keys, the job reads no deleted keys, joins
    nothing, and carries each key's location as a number into ``locations`` instead of its two strings.
    ``zone``: the table's timeline zone, in which ``instant`` is read for the entries' commit time."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    if changed is None:
        counts = status_df.select(
            F.coalesce(F.sum("num_inserts"), F.lit(0)).alias("i"),
            F.coalesce(F.sum(F.size("deleted_keys")), F.lit(0)).alias("d"),
        ).first()
        changed = int(counts["i"]) + int(counts["d"]) if counts is not None else None
    t_ms = parse_instant_time(instant, zone)
    if changed is not None and changed <= DRIVER_UPDATE_MAX_KEYS:
        lists = status_df.select("partition", "file_id", "inserted_keys", "deleted_keys").toArrow()
        return _write_updates_here(lists, storage, mdt_path, instant, t_ms, n)

    if deleted == 0 and locations is not None:
        return _write_inserts(status_df, storage, mdt_path, instant, t_ms, n, locations)
    ins = status_df.select("partition", "file_id", "inserted_keys").mapInArrow(
        _inserted_key_rows, from_arrow_schema(_INSERTED_ROWS_SCHEMA))
    dels = (
        status_df.select(F.explode("deleted_keys").alias("key"))
        .join(ins.select("key"), "key", "left_anti")
        .select(F.lit(None).cast("string").alias("partition"), F.lit(None).cast("string").alias("file_id"), "key")
    )
    rows = ins.unionByName(dels)
    in_schema = pa.schema([("partition", pa.string()), ("file_id", pa.string()), ("key", pa.string()),
                           (_FG_COL, pa.int32()), (ROUTE_COL, pa.int32())])
    with_fg = rows.mapInArrow(add_file_group_task("key", n, n), from_arrow_schema(in_schema))

    def block(t: pa.Table) -> tuple[pa.Array, pa.Array, list[str]]:
        return _changes_block(t, t_ms)

    write_group = _streamed_group_log(storage, mdt_path, instant, block, LOG_BLOCK_MAX_KEYS)
    return [r.asDict() for r in by_own_file_group(with_fg, n, write_group, STAT_SCHEMA).collect()]


_LOC_COL = "__loc"
_KEYS_COL = "__keys"
#: the rows :func:`inserted_keys_task` sends to the record-index writers: per WriteStatus row and file group, the
#: keys packed into one Arrow IPC stream (a few thousand rows in the JVM for a 20M-row load, not 20M)
PACKED_KEYS_SCHEMA = pa.schema([(_KEYS_COL, pa.binary()), (_LOC_COL, pa.int32()), (_FG_COL, pa.int32()),
                                (ROUTE_COL, pa.int32())])


#: one row per inserted key: its new location
_INSERTED_ROWS_SCHEMA = pa.schema([("partition", pa.string()), ("file_id", pa.string()), ("key", pa.string())])


def _explode_packed(batches: Iterator[pa.RecordBatch], packed: str,
                    carried: Sequence[str]) -> Iterator[pa.RecordBatch]:
    """Rows with a column of packed keys (:func:`pyhudi.io.arrow.pack_strings`) -> one row per key: ``key``, then
    the ``carried`` columns' value of its row, repeated; rows without keys give none."""
    for b in batches:
        col, others = b.column(packed), [b.column(c) for c in carried]
        for i in range(b.num_rows):
            keys = unpack_strings(col[i])
            if len(keys):
                yield pa.RecordBatch.from_arrays([keys, *(pa.repeat(o[i], len(keys)) for o in others)],
                                                 names=["key", *carried])


def _inserted_key_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """WriteStatus rows (partition, file id, packed inserted keys) -> one row per key (:data:`_INSERTED_ROWS_SCHEMA`;
    a mapInArrow function, and the driver's unpacking)."""
    for b in _explode_packed(batches, "inserted_keys", ["partition", "file_id"]):
        yield b.select(_INSERTED_ROWS_SCHEMA.names)


def inserted_keys_task(n: int, partitions: int, locations: list[tuple[str, str]]):
    """mapInArrow function: WriteStatus rows (partition, file id, inserted keys) -> per row and record-index file
    group, one row (:data:`PACKED_KEYS_SCHEMA`): the group's keys packed, the index of their location in
    ``locations``, the file group and its route."""
    index = {loc: i for i, loc in enumerate(locations)}

    def run(batches):
        for b in batches:
            packed = b.column("inserted_keys")
            parts, fids = b.column("partition").to_pylist(), b.column("file_id").to_pylist()
            for i in range(b.num_rows):
                keys = unpack_strings(packed[i])
                if not len(keys):
                    continue
                loc = index.get((parts[i], fids[i]))
                if loc is None:
                    raise RuntimeError(f"record index: keys inserted into {fids[i]!r} of partition {parts[i]!r}, "
                                       "a file group the commit does not list")
                parts_of = list(positions_by_group(file_groups_of(keys, n)))
                groups = np.array([g for g, _ in parts_of], np.int64)
                yield pa.RecordBatch.from_arrays([
                    pa.array([pack_strings(keys.take(pa.array(rows))) for _, rows in parts_of], pa.binary()),
                    pa.array(np.full(len(groups), loc, np.int32)),
                    pa.array(groups, pa.int32()),
                    route_values(file_group_partitions(groups, partitions), partitions),
                ], schema=PACKED_KEYS_SCHEMA)

    return run


def _unpacked(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Rows (key, location index, file group) from :data:`PACKED_KEYS_SCHEMA` rows."""
    return _explode_packed(batches, _KEYS_COL, [_LOC_COL, _FG_COL])


#: the size at which the record-index job of a commit that only inserts keys cuts the Arrow batches of packed keys
#: it sends to Python. Spark cuts them at 10,000 rows otherwise (the session turns its byte limit off: checking
#: it costs every small row; these rows are few and large): one batch holding a whole file group's keys, 80 MB
#: each in the JVM and in the Python worker of a 20M-row bulk load's tasks
PACKED_KEYS_BATCH_BYTES = 16 << 20


def _write_inserts(status_df, storage: Storage, mdt_path: str, instant: str, t_ms: int, n: int,
                   locations: list[tuple[str, str]]) -> list[dict]:
    """:func:`write_updates` of a commit that deletes no key: the inserted keys go to their file group's task
    packed (:func:`inserted_keys_task`), their location a number."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from pyhudi.spark import cached

    # a few hundred rows of packed keys per file group: the Arrow batches that carry them to Python are cut by size
    status = cached.with_settings(status_df, {cached.ARROW_BATCH_BYTES_CONF: str(PACKED_KEYS_BATCH_BYTES)})
    rows = status.select("partition", "file_id", "inserted_keys").mapInArrow(
        inserted_keys_task(n, n, locations), from_arrow_schema(PACKED_KEYS_SCHEMA))
    # the locations' values made once each, here; a block takes them in key order
    loc_values = encode_locations(pa.array([p for p, _ in locations], pa.string()),
                                  pa.array([f for _, f in locations], pa.string()),
                                  pa.array(np.full(len(locations), t_ms), pa.int64()))

    def block(t: pa.Table) -> tuple[pa.Array, pa.Array, list[str]]:
        keys = to_binary_array(t.column("key"))
        order = key_order(keys)
        return keys.take(order), loc_values.take(t.column(_LOC_COL).combine_chunks().take(order)), []

    write_group = _streamed_group_log(storage, mdt_path, instant, block, LOG_BLOCK_MAX_KEYS)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return write_group(_unpacked(batches))

    return [r.asDict() for r in by_own_file_group(rows, n, run, STAT_SCHEMA).collect()]


#: keys a Spark task turns into one HFile data block of a record-index log file at a time: a commit changing
#: more keys of a file group writes several blocks into its log file (blocks of one instant hold distinct keys),
#: and the task holds one block's keys while it makes it, not the file group's. Measured on one file group of a
#: 20M-row bulk load (2M keys, its 80 MB of packed keys received), the task's memory beyond them and its time:
#: 500k keys a block 297 MB, 1.8 s; 250k 208 MB, 1.4 s; 100k 157 MB, 1.2 s; 50k 132 MB, 1.2 s
LOG_BLOCK_MAX_KEYS = 100_000


def _changes_block(t: pa.Table, t_ms: int) -> tuple[pa.Array, pa.Array, list[str]]:
    """(sorted inserted keys, their cell values, deleted keys) of changed keys ``t`` (``key``, with the new
    location of an inserted key in ``partition``, ``file_id``, null for a deleted one)."""
    is_ins = pc.is_valid(t.column("file_id"))
    deleted: list[str] = []
    if not pc.all(is_ins).as_py():
        deleted = t.filter(pc.invert(is_ins)).column("key").to_pylist()
        t = t.filter(is_ins)
    keys = to_binary_array(t.column("key"))
    order = key_order(keys)  # sorted before the values are made: one copy of each
    values = encode_locations(t.column("partition").take(order), t.column("file_id").take(order),
                              pa.array(np.full(len(order), t_ms), pa.int64()))
    return keys.take(order), values, deleted


def _write_group_log(storage: Storage, mdt_path: str, instant: str, t_ms: int, fg: int, t: pa.Table) -> dict:
    """Write the log file of one record-index file group from the changed keys ``t`` (see :func:`_changes_block`)."""
    keys, values, deleted = _changes_block(t, t_ms)
    return _write_log_file(storage, mdt_path, instant, fg, [log_block_bytes(instant, keys, values, deleted,
                                                                            presorted=True)], t.num_rows)


def _write_log_file(storage: Storage, mdt_path: str, instant: str, fg: int, blocks: Sequence[bytes], n: int) -> dict:
    """Write the log file of file group ``fg`` for ``instant`` from its blocks' bytes, whole (readers see all of
    it or nothing)."""
    from pyhudi.table.filenames import make_log_file_name

    fid = file_group_id(fg)
    _, token = task_ids()
    rel = posixpath.join(RECORD_INDEX, make_log_file_name(fid, instant, 1, token))
    storage.write_bytes(posixpath.join(mdt_path, rel), blocks)  # the blocks one after the other, not joined
    return {"rel": rel, "file_id": fid, "size": sum(len(b) for b in blocks), "n": n}


def _streamed_group_log(storage: Storage, mdt_path: str, instant: str,
                        block: Callable[[pa.Table], tuple[pa.Array, pa.Array, list[str]]],
                        max_keys: int = LOG_BLOCK_MAX_KEYS):
    """Iterator function (:func:`by_own_file_group`: a file group's rows arrive in batches) writing the group's
    log file: every ``max_keys`` rows are made into a block by ``block`` (sorted keys, values,
    deleted keys) and encoded at once; the encoded blocks are written as one file at the end."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        fg: int | None = None
        pending: list[pa.RecordBatch] = []
        held = n = 0
        blocks: list[bytes] = []

        def flush(everything: bool) -> int:
            """Blocks of ``max_keys`` rows from the pending ones (and the rest too with ``everything``); the
            number of rows left pending."""
            t = pa.Table.from_batches(pending)
            pending.clear()
            done = t.num_rows if everything else t.num_rows - t.num_rows % max_keys
            for off in range(0, done, max_keys):
                keys, values, deleted = block(t.slice(off, min(max_keys, done - off)))
                blocks.append(log_block_bytes(instant, keys, values, deleted, presorted=True))
            pending.extend(t.slice(done).to_batches())
            return t.num_rows - done

        for b in batches:
            if not b.num_rows:
                continue
            if fg is None:
                fg = int(b.column(_FG_COL)[0].as_py())
            lo_hi = pc.min_max(b.column(_FG_COL))
            if lo_hi["min"].as_py() != fg or lo_hi["max"].as_py() != fg:
                raise RuntimeError(f"record index: keys of file groups {lo_hi} reached the task writing {fg}")
            pending.append(b)
            held += b.num_rows
            n += b.num_rows
            if held >= max_keys:
                held = flush(False)
        if pending:
            flush(True)
        if fg is not None:
            yield pa.RecordBatch.from_pylist([_write_log_file(storage, mdt_path, instant, fg, blocks, n)],
                                             schema=STAT_SCHEMA)

    return run


def _write_updates_here(lists: pa.Table, storage: Storage, mdt_path: str, instant: str, t_ms: int, n: int) -> list[dict]:
    """:func:`write_updates` on the driver, from the WriteStatus rows' key lists (``lists``)."""
    ins_batches = list(_inserted_key_rows(lists.select(["partition", "file_id", "inserted_keys"]).to_batches()))
    ins = (pa.Table.from_batches(ins_batches).cast(_INSERTED_ROWS_SCHEMA) if ins_batches
           else _INSERTED_ROWS_SCHEMA.empty_table())
    ins_keys = ins.column("key").combine_chunks()
    dels = pc.list_flatten(lists.column("deleted_keys").combine_chunks())
    dels = dels.filter(pc.invert(pc.is_in(dels, value_set=ins_keys)))  # a moved key keeps its new mapping only
    rows = pa.concat_tables([
        ins,
        pa.table({"partition": pa.nulls(len(dels), pa.string()), "file_id": pa.nulls(len(dels), pa.string()),
                  "key": dels.cast(pa.string())}),
    ]).combine_chunks()
    if rows.num_rows == 0:
        return []
    return [_write_group_log(storage, mdt_path, instant, t_ms, fg, rows.take(pa.array(positions)))
            for fg, positions in positions_by_group(file_groups_of(rows.column("key"), n))]


def tag_in_place(records, lookup: RecordIndexLookup, key_col: str, loc_partition_col: str, loc_file_id_col: str):
    """Spark: the records with their current location (null: a new key), as Hudi's record index tags: each task
    looks the distinct keys of its partition up in one sorted batch per file group (the groups in threads) and
    the locations are appended to the records in place. A scalar Arrow iterator UDF does it: only the keys go to
    Python and two columns come back, matched to the records by position, while the records stay in the JVM
    (queued there, spilled to disk if large): nothing is joined back. Correct however the records are
    partitioned; fast when they are routed by file group (:class:`pyhudi.index.record.FileGroupRouting`), so
    that each file group's blocks are inflated by one task only."""
    from pyspark.sql import functions as F
    from pyspark.sql.functions import arrow_udf
    from pyspark.sql.pandas.types import from_arrow_type

    loc_fields = [pa.field(loc_partition_col, pa.string()), pa.field(loc_file_id_col, pa.string())]

    def locate(chunks: Iterator[pa.Array]) -> Iterator[pa.Array]:  # the hints make it an iterator UDF
        held = [c for c in chunks if len(c)]  # this partition's keys; the locations must come back in their order
        if not held:
            return
        keys = pa.chunked_array(held)  # chunked: a task's keys may pass 2 GiB
        found = lookup.lookup(pc.unique(keys))
        at = pc.index_in(keys, value_set=found.column("key").combine_chunks().cast(keys.type))
        part = found.column("partition").combine_chunks().take(at)
        fid = found.column("file_id").combine_chunks().take(at)
        off = 0
        for c in held:
            m = len(c)
            cols = [part.slice(off, m).combine_chunks(), fid.slice(off, m).combine_chunks()]
            yield pa.StructArray.from_arrays(cols, fields=loc_fields)
            off += m

    loc_type = from_arrow_type(pa.struct(loc_fields))
    # nondeterministic: evaluated once per record, never duplicated into each of the two fields taken from it
    # (the stubs type iterator UDFs only with an explicit functionType, which PySpark warns against)
    tag = arrow_udf(locate, loc_type).asNondeterministic()  # type: ignore[call-overload]
    loc = "__rli_location"
    # appended and the struct dropped rather than every column selected: a few calls into the JVM, not a hundred
    return (
        records.withColumn(loc, tag(F.col(key_col)))
        .withColumn(loc_partition_col, F.col(loc).getField(loc_partition_col))
        .withColumn(loc_file_id_col, F.col(loc).getField(loc_file_id_col))
        .drop(loc)
    )


def empty_base_hfile(name: str) -> bytes:
    """A record-index base HFile with no entries (a new, empty table's file groups)."""
    return base_hfile(pa.array([], pa.string()), pa.array([], pa.binary()), name)


# GZ level of record-index base HFiles (ISA-L 0-3). Level 3 instead of the default 1: about 3% fewer bytes per
# entry for about 10% more compression time, the same lookup time (benchmarks/results/record_index*.json,
# index_size.tradeoffs); still plain deflate to every reader.
BASE_GZIP_LEVEL = 3


def base_hfile(keys: pa.Array, values: pa.Array, name: str) -> bytes:
    """A record-index base HFile as Hudi's metadata writer makes them: sorted cells, schema file info, the
    ``bloomFilter`` meta block (10000-entry DYNAMIC_V0) with min/max record keys; GZ blocks at
    :data:`BASE_GZIP_LEVEL`."""
    from pyhudi.io import bloom

    k, v = sorted_cells(keys, values)
    bf = bloom.BloomFilter.create(10000)
    if len(k):
        bf.add_many(k.cast(pa.string()))
    data, _ = hfile_bytes(k, v, codec=CODEC_GZ, file_info={"schema": writer_schema_json().encode()}, bloom_filter=bf,
                          name=name, gzip_level=BASE_GZIP_LEVEL)
    return data


SLICE_KEY_SCHEMA = pa.schema([("key", pa.string()), ("partition", pa.string()), ("file_id", pa.string()),
                              ("instant_ms", pa.int64()), (_FG_COL, pa.int32()), (ROUTE_COL, pa.int32())])


def slice_keys_task(spec, n: int, tasks: int, *, instant_ms: bool = True, zone: tzinfo | None = UTC):
    """mapInArrow function: pickled file slices (column 0) in; out, per slice, its record keys (base file and log
    files merged, so a key updated or deleted in a log is where the snapshot has it) with the slice's partition
    and file id, the commit time (ms) that wrote each key (``instant_ms``; ``spec`` must then read
    ``_hoodie_commit_time`` too), and each key's record-index file group of ``n`` and route over ``tasks``."""
    import pickle

    from pyhudi.read.slice_reader import FileSliceReader
    from pyhudi.table.schema import COMMIT_TIME_COL, RECORD_KEY_COL

    names = [f.name for f in SLICE_KEY_SCHEMA][:4 if instant_ms else 3]

    def run(batches):
        for b in batches:
            for raw in b.column(0).to_pylist():
                sl = pickle.loads(raw)
                t = FileSliceReader(spec, sl).read()
                keys = t.column(RECORD_KEY_COL).combine_chunks().cast(pa.string())
                m = len(keys)
                cols = [keys, pa.array([sl.partition] * m, pa.string()), pa.array([sl.file_id] * m, pa.string())]
                if instant_ms:
                    commit = t.column(COMMIT_TIME_COL).combine_chunks()
                    uniq = commit.unique()
                    times = [parse_instant_time(x, zone) for x in uniq.to_pylist()]
                    cols.append(pa.array(times, pa.int64()).take(pc.index_in(commit, value_set=uniq)))
                yield _with_file_group(pa.record_batch(cols, names=names), file_groups_of(keys, n), tasks)

    return run


def slices_frame(spark, slices: Sequence[Any], parallelism: int):
    """A DataFrame of the pickled file ``slices`` (or any picklable items: one binary column), spread over up to
    ``parallelism`` tasks."""
    import pickle

    src = local_frame(spark, [(pickle.dumps(s),) for s in slices], "slice binary")
    return src.repartition(max(1, min(len(slices), parallelism)))


def build_base_files(spark, plan, mdt_path: str, instant: str, n: int, parallelism: int, *,
                     zone: tzinfo | None = UTC) -> list[dict]:
    """Spark: read the record keys (and the commit time that wrote each, an instant time in the table's timeline
    ``zone``) of the file slices of a scan plan (:class:`pyhudi.read.plan.ScanPlan`) with :func:`slice_keys_task`,
    route them to ``n`` file groups and write each group as one sorted base HFile from one task. Returns a stat per
    file written."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from pyhudi.table.filenames import make_base_file_name
    from pyhudi.table.schema import COMMIT_TIME_COL, RECORD_KEY_COL

    if plan is None or not plan.slices:
        return []
    storage = plan.read.storage
    keys_plan = plan.project([COMMIT_TIME_COL, RECORD_KEY_COL])
    tasks = file_group_tasks(n, parallelism)

    def write_group(t: pa.Table) -> pa.Table:
        fg = int(t.column(_FG_COL)[0].as_py())
        values = encode_locations(t.column("partition").combine_chunks(), t.column("file_id").combine_chunks(),
                                  t.column("instant_ms").combine_chunks())
        _, token = task_ids()
        fid = file_group_id(fg)
        rel = posixpath.join(RECORD_INDEX, make_base_file_name(fid, token, instant, extension="hfile"))
        data = base_hfile(t.column("key").combine_chunks(), values, rel)
        storage.write_bytes(posixpath.join(mdt_path, rel), data)
        return pa.table({"rel": [rel], "file_id": [fid], "size": [len(data)], "n": [t.num_rows]}, schema=STAT_SCHEMA)

    keys = slices_frame(spark, keys_plan.slices, parallelism).mapInArrow(
        slice_keys_task(keys_plan.read, n, tasks, zone=zone), from_arrow_schema(SLICE_KEY_SCHEMA))
    return [r.asDict() for r in by_file_group(keys, tasks, write_group, STAT_SCHEMA).collect()]


# -- compaction ----------------------------------------------------------------------------------------------
def merged_parts(storage: Storage, base: str | None, logs: Sequence[str],
                 block_filter: BlockFilter) -> list[tuple[pa.Array, pa.Array]]:
    """The live (key, value) cells of a record-index file slice (base HFile, then the valid log blocks in log
    order: a later write of a key wins, a delete block removes), as parts with no key in common, each sorted by
    key as its HFile was: every source without the keys a later source writes or deletes. The sources are held
    once, plus the few they lose to later ones. Values are copied as they are when written with our schema, and
    re-encoded (once per distinct value) when written with another."""
    ours = writer_schema_json()
    sources: list[tuple[pa.Array, pa.Array | None]] = []  # oldest first; no values: a delete block

    def add(k: pa.Array, v: pa.Array, schema: str | None) -> None:
        if schema is not None and schema != ours and len(v):
            locs = decode_locations(v, schema)
            v = encode_locations(locs.column("partition").combine_chunks(), locs.column("file_id").combine_chunks(),
                                 locs.column("instant_ms").combine_chunks())
        sources.append((to_binary_array(k), (v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v).cast(pa.binary())))

    if base is not None:
        with HFileReader.open(storage, base) as h:
            t = h.read_all()
            sj = h.file_info.get("schema")
            add(t.column("key").combine_chunks(), t.column("value").combine_chunks(), sj.decode() if sj else None)
    for b in valid_log_blocks(storage, list(logs), block_filter):
        if b.block_type == BlockType.HFILE_DATA:
            t = b.hfile().read_all()
            add(t.column("key").combine_chunks(), t.column("value").combine_chunks(), b.schema)
        elif b.block_type == BlockType.DELETE:
            gone = [d.record_key.encode() for d in b.delete_records() if d.record_key is not None]
            sources.append((pa.array(gone, pa.binary()), None))
    parts: list[tuple[pa.Array, pa.Array]] = []
    later: list[pa.Array] = []  # keys written or deleted by the sources after the current one
    for k, v in reversed(sources):
        if v is not None and len(k):
            if later:
                gone = pc.is_in(k, value_set=pa.concat_arrays(later) if len(later) > 1 else later[0])
                if pc.any(gone).as_py():
                    keep = pc.invert(gone)
                    k, v = k.filter(keep), v.filter(keep)
            if len(k):
                parts.append((k, v))
        if len(k):
            later.append(k)
    parts.reverse()
    return parts


def merged_cells(storage: Storage, base: str | None, logs: Sequence[str], block_filter: BlockFilter) -> tuple[pa.Array, pa.Array]:
    """The live (key, value) cells of a record-index file slice (:func:`merged_parts`), sorted by key."""
    parts = merged_parts(storage, base, logs, block_filter)
    if not parts:
        return pa.array([], pa.binary()), pa.array([], pa.binary())
    if len(parts) == 1:
        return parts[0]
    keys = pa.concat_arrays([k for k, _ in parts])
    values = pa.concat_arrays([v for _, v in parts])
    parts.clear()
    order = pc.sort_indices(keys)
    return keys.take(order), values.take(order)


def record_index_lookup(
    storage: Storage, base_path: str, timeline: ActiveTimeline, config: TableConfig
) -> RecordIndexLookup | None:
    """The record index of a table as of its timeline, or None when the table has none (or is building one)."""
    if RECORD_INDEX not in config.metadata_partitions:
        return None
    reader = MetadataTableReader(storage, base_path, data_timeline=timeline, data_config=config)
    if RECORD_INDEX not in reader.partitions():
        return None
    return RecordIndexLookup.from_reader(reader)


def new_keys_held(lookup: RecordIndexLookup, status_df: Any, changed: int | None,
                  limit: int = 5, within: set[str] | None = None) -> list[tuple[str, str, str]]:
    """Keys a write inserts as new records (the WriteStatus rows' inserted keys it does not also delete: not moved)
    that ``lookup`` holds (in file groups of the ids ``within``, when given): (key, partition, file id) of up to
    ``limit`` of them. With ``lookup`` the record index as of a commit's lock, these are keys a write that completed
    meanwhile inserted too. On the driver for a write of at most :data:`DRIVER_UPDATE_MAX_KEYS` changed keys
    (``changed``), else in Spark tasks."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    if changed is not None and changed <= DRIVER_UPDATE_MAX_KEYS:
        lists = status_df.select("partition", "file_id", "inserted_keys", "deleted_keys").toArrow()
        keys = pa.chunked_array([b.column("key").cast(pa.string())
                                 for b in _inserted_key_rows(iter(lists.to_batches()))], pa.string())
        deleted = pc.list_flatten(lists.column("deleted_keys"))
        if len(deleted):
            keys = keys.filter(pc.invert(pc.is_in(keys, value_set=deleted.combine_chunks().cast(pa.string()))))
        if not len(keys):
            return []
        found = lookup.lookup(keys.combine_chunks())
        if within is not None:
            ids = pa.array(sorted(within), pa.string()).cast(found.schema.field("file_id").type)
            found = found.filter(pc.is_in(found.column("file_id"), value_set=ids))
        found = found.slice(0, limit)
        return list(zip(*(found.column(c).to_pylist() for c in ("key", "partition", "file_id")), strict=True))
    ins = status_df.select("partition", "file_id", "inserted_keys").mapInArrow(
        _inserted_key_rows, from_arrow_schema(_INSERTED_ROWS_SCHEMA)).select("key")
    ins = ins.join(status_df.select(F.explode("deleted_keys").alias("key")), "key", "left_anti")
    held = tag_in_place(ins, lookup, "key", "__p", "__f").filter(F.col("__f").isNotNull())
    if within is not None:
        held = held.filter(F.col("__f").isin(sorted(within)))
    held = held.limit(limit).collect()
    return [(r["key"], r["__p"], r["__f"]) for r in held]


def record_index_updates(
    storage: Storage, base_path: str, status_df: Any, spark: Any, instant: str,
    changed: int | None = None, deleted: int | None = None, locations: list[tuple[str, str]] | None = None,
) -> Callable[[], dict[str, list[dict[str, Any]]]]:
    """The record-index part of a commit's metadata deltacommit: new mappings and delete markers from the
    WriteStatus key lists, written by Spark tasks (one log file per touched file group). Whether there is an
    index to update, and its file group count, is decided when it runs, at commit time (under the table lock with
    optimistic concurrency): an async indexer may have started building the partition meanwhile."""

    def run() -> dict[str, list[dict[str, Any]]]:
        from pyhudi.spark.errors import task_errors

        cfg = read_table_config(storage, posixpath.join(base_path, METAFOLDER))
        timeline = ActiveTimeline.load(storage, base_path, cfg)
        n: int | None = None
        if RECORD_INDEX in cfg.metadata_partitions:
            lk = record_index_lookup(storage, base_path, timeline, cfg)
            n = lk.num_file_groups if lk is not None else None
        elif RECORD_INDEX in cfg.metadata_partitions_inflight:
            plan = pending_indexing(timeline)
            n = plan.file_groups if plan is not None else None
        if n is None:
            return {}
        with task_errors():
            return {RECORD_INDEX: write_updates(spark, status_df, storage, metadata_base_path(base_path), instant, n,
                                                changed, deleted, locations, zone=cfg.timeline_zone)}

    return run
