"""Task side of a merge-on-read write: the updates and deletes routed to one file group, appended as a new log file.

As Hudi 1.1's ``HoodieAppendHandle`` does for table version 8+ (``../shared/reference/hudi-mor-and-services.md``
sections 1-3):

- every deltacommit writes a *new* log file per file group, ``.<fileId>_<deltacommit>.log.1_<writeToken>``
  (created only if absent; a name taken already rolls over to ``.log.2_...``, and so on), after its CREATE marker
  (``<log file>.marker.CREATE``: table version 8+ marks log files as created, not appended);
- the file holds an Avro data block (block version 3) of the updated records, then a delete block of the deleted
  keys; both headers carry SCHEMA (the write schema with the five meta fields, as Hudi spells it: nullable fields
  ``["null", type]`` with default null) and INSTANT_TIME;
- the records' meta columns: ``_hoodie_commit_time`` = the deltacommit, ``_hoodie_commit_seqno`` =
  ``<instant>_<task partition>_<n>``, ``_hoodie_file_name`` = the file id (not a file name);
- a delete operation's deletes carry Hudi's default ordering value (``IntWrapper 0``): they remove the key whatever
  the ordering value of the stored record, as on copy-on-write tables. A record flagged ``_hoodie_is_deleted`` under
  event-time ordering carries its own (one ordering field whose values Hudi compares as Integer, Long, Float,
  Double or a string; else the default), as ``HoodieAppendHandle`` writes it: a later record with a smaller
  ordering value loses to it when the file slice is merged;
- the write stat: ``prevCommit`` = the deltacommit itself, ``baseFile`` empty, ``logFiles`` = [this file],
  ``logVersion``, ``logOffset`` 0 (see :meth:`pyhudi.write.status.WriteStat.to_hudi`).

Updates are appended whatever their ordering value: readers merge the file slice by the table's merge mode (an
incoming record with a smaller ordering value than the stored one loses there, as the copy-on-write merge keeps
the stored record). The record index needs no change for updates (the key stays in its file group); deleted keys
become delete markers.
"""

from __future__ import annotations

import json
import posixpath
import time
from typing import Any

import pyarrow as pa

from pyhudi import faults
from pyhudi.errors import StorageError
from pyhudi.io.logfile import (
    BlockType,
    DeleteRecord,
    HeaderKey,
    OrderingType,
    avro_data_block,
    encode_block,
    encode_delete_content,
)
from pyhudi.spark.task import task_ids
from pyhudi.table import filenames, markers
from pyhudi.table.base_file import with_meta_columns
from pyhudi.table.schema import META_COLUMNS, arrow_to_avro, record_name, without_meta
from pyhudi.table.schema import with_meta as meta_schema
from pyhudi.write.status import status_row

APPEND = "append"
#: fault point (tests): the log file is left torn (half its bytes) and the task fails, as a crash mid-append
#: on storage without atomic writes leaves it
TORN_APPEND = "append.torn"
#: a log file name that exists already rolls over to the next version, at most this many times
_MAX_ROLLOVERS = 1000


def log_schema_json(data_schema: pa.Schema, table_name: str) -> str:
    """The Avro schema of a data table's log blocks as Hudi 1.1 writes it into the SCHEMA header: the five meta
    fields (``["null","string"]``, doc ``""``, default null), then the table's columns, nullable ones as
    ``["null", type]`` with default null."""
    name, ns = record_name(table_name)
    rec = arrow_to_avro(without_meta(data_schema), name, ns)
    fields: list[dict[str, object]] = [
        {"name": c, "type": ["null", "string"], "doc": "", "default": None} for c in META_COLUMNS
    ]
    for f in rec["fields"]:
        t = f["type"]
        if isinstance(t, list) and len(t) == 2 and t[1] == "null":
            fields.append({"name": f["name"], "type": ["null", t[0]], "default": None})
        else:
            fields.append(f)
    return json.dumps({**rec, "fields": fields}, separators=(",", ":"))


def log_blocks(
    instant: str,
    schema_json: str,
    partition: str,
    updates: pa.Table | None,
    deleted_keys: list[str],
    delete_ordering: pa.Array | None = None,
) -> list[bytes]:
    """The blocks of one append: an Avro data block of ``updates`` (meta columns filled), then a delete block
    (``delete_ordering``: the deleted records' ordering values, see :func:`delete_ordering_type`; else Hudi's
    default)."""
    blocks = []
    header = [(HeaderKey.SCHEMA, schema_json), (HeaderKey.INSTANT_TIME, instant)]  # Hudi's order in the fixtures
    if updates is not None and updates.num_rows:
        blocks.append(avro_data_block(updates, instant, schema_json, schema_first=True))
    if deleted_keys:
        kind = delete_ordering_type(delete_ordering.type) if delete_ordering is not None else None
        if kind is None or delete_ordering is None:
            recs = [DeleteRecord(k, partition, 0, OrderingType.INT) for k in deleted_keys]
        else:  # a null ordering value is the default (a commit-time delete); dates as days, timestamps in their unit
            t = delete_ordering.type
            values = (delete_ordering.cast(pa.int32() if pa.types.is_date32(t) else pa.int64())
                      if pa.types.is_date32(t) or pa.types.is_timestamp(t) else delete_ordering)
            recs = [DeleteRecord(k, partition, 0, OrderingType.INT) if v is None else DeleteRecord(k, partition, v, kind)
                    for k, v in zip(deleted_keys, values.to_pylist(), strict=True)]
        blocks.append(encode_block(BlockType.DELETE, header, encode_delete_content(recs)))
    return blocks


def delete_ordering_type(t: pa.DataType) -> OrderingType | None:
    """The delete-block wrapper of an ordering field's values: the class Hudi's readers compare the field's values
    as (:func:`pyhudi.read.merge.java_class`), None for types whose deletes carry the default ordering value."""
    from pyhudi.errors import UnsupportedFormatError
    from pyhudi.read.merge import JAVA_CLASS_WRAPPERS, java_class

    try:
        return JAVA_CLASS_WRAPPERS.get(java_class(t))
    except UnsupportedFormatError:
        return None


def append_bucket(
    ctx: Any, bucket: Any, updates: pa.Table, update_keys: pa.Array, deleted_keys: pa.Array, t0: float,
    delete_ordering: pa.Array | None = None,
) -> pa.Table:
    """Append ``updates`` (the file group's updated records, aligned to the table's columns, keys
    ``update_keys``) and ``deleted_keys`` to a new log file of ``bucket`` (an existing file group); returns its
    WriteStatus (one row). ``ctx``: the write's :class:`~pyhudi.write.executor.WriteContext`."""
    part_id, token = task_ids()
    with_meta = None
    if len(update_keys):
        with_meta = with_meta_columns(updates, instant_time=ctx.instant, file_name=bucket.file_id,
                                      partition_path=bucket.partition, record_keys=update_keys,
                                      task_partition_id=part_id)
    assert ctx.log_schema is not None
    blob = b"".join(log_blocks(ctx.instant, ctx.log_schema, bucket.partition, with_meta, deleted_keys.to_pylist(),
                               delete_ordering))
    filenames.write_partition_metadata(ctx.storage, ctx.base_path, bucket.partition, ctx.instant)
    name = _write_new_log_file(ctx, bucket, token, blob)
    faults.at("after_write", ctx.fault or "")
    rel = posixpath.join(bucket.partition, name) if bucket.partition else name
    cells = None
    if ctx.stats_columns:
        from pyhudi.metadata.column_stats import empty_ranges, encode_ranges, ranges_from_table

        ranges = (ranges_from_table(with_meta, ctx.stats_columns) if with_meta is not None
                  else empty_ranges(ctx.stats_columns, meta_schema(ctx.data_schema)))
        cells = encode_ranges(bucket.partition, name, ranges)
    return status_row(
        partition=bucket.partition,
        file_id=bucket.file_id,
        path=rel,
        prev_commit=ctx.instant,
        prev_base_file=None,
        num_writes=len(update_keys),
        num_inserts=0,
        num_updates=len(update_keys),
        num_deletes=len(deleted_keys),
        file_size=len(blob),
        min_key=None,
        max_key=None,
        runtime_ms=int((time.monotonic() - t0) * 1000),
        inserted_keys=[],
        updated_keys=update_keys.to_pylist(),
        deleted_keys=deleted_keys.to_pylist(),
        column_stats=cells,
    )


def _write_new_log_file(ctx: Any, bucket: Any, token: str, blob: bytes) -> str:
    """Create ``.<fileId>_<instant>.log.<v>_<token>`` with ``blob``, v = 1 or the next free version (its marker
    first); returns its file name."""
    folder = posixpath.join(ctx.base_path, bucket.partition) if bucket.partition else ctx.base_path
    for version in range(1, _MAX_ROLLOVERS + 1):
        name = filenames.make_log_file_name(bucket.file_id, ctx.instant, version, token)
        path = posixpath.join(folder, name)
        if ctx.storage.exists(path):
            continue
        markers.create_marker(ctx.storage, ctx.base_path, ctx.instant, bucket.partition, name, markers.IOType.CREATE)
        if TORN_APPEND in (ctx.fault or "").split(","):
            with ctx.storage.open_output(path) as out:
                out.write(blob[: len(blob) // 2])
            faults.at(TORN_APPEND, ctx.fault)
        try:
            ctx.storage.write_bytes(path, blob, overwrite=False)
        except StorageError:
            if ctx.storage.exists(path):  # created meanwhile: roll over to the next version
                continue
            raise
        return name
    raise StorageError(f"{folder}: no free log file version for file group {bucket.file_id} at {ctx.instant}")
