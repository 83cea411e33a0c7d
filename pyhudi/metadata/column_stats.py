"""The metadata table's data-skipping partitions, ``column_stats`` and ``partition_stats``, as Hudi 1.1 writes them.

``column_stats`` holds one record (type 3) per data file and indexed column; ``partition_stats`` one record (type 6)
per data partition and indexed column. Both are ``HoodieMetadataColumnStats``:

- key: ``h64(column) + h64(partition) + md5(file name)`` (column stats) or ``h64(column) + h64(partition)``
  (partition stats), where ``h64`` is the standard Base64 of the big-endian XXH64 of the UTF-8 string with seed
  ``0xdabadaba`` (a Java int, sign-extended: ``0xffffffffdabadaba``), ``md5`` the Base64 of the MD5 digest of the
  file name (no folder; a log file's name keeps its leading dot), and a non-partitioned table's partition is
  ``.``;
- file group: ``abs(abs(String.hashCode(key)) % N)``, as the record index routes its keys, of ``col-stats-%04d-0``
  (N = 2 by default) or ``partition-stats-%04d-0`` (N = 1);
- ``minValue``/``maxValue`` wrapped by value type (``valueType.typeOrdinal``): boolean 2 (BooleanWrapper), int 3
  and date 12 (IntWrapper, epoch days), long 4 and timestamps 16 / local timestamps 19 (LongWrapper,
  microseconds), float 5, double 6, string 7, bytes 8 and fixed 9 (BytesWrapper), decimal 10 (BytesWrapper of
  the unscaled value's minimal big-endian two's complement, ``additionalInfo`` ``"precision,scale"``); a column
  whose values are all null: no min/max, type NULL (1);
- ``valueCount`` counts nulls too; ``totalSize``/``totalUncompressedSize`` are the parquet column chunks' sizes
  (0 for log files); ``isTightBound`` false for files, true for partitions;
- indexed columns: ``_hoodie_commit_time``, ``_hoodie_partition_path``, ``_hoodie_record_key``, then the data
  columns named by ``hoodie.metadata.index.column.stats.column.list`` or, without it, the first 32 top-level
  columns of a supported type;
- a base file's statistics come from its parquet footer, a log file's from the records it appends (a delete-only
  log file gets value count 0 and no min/max); a partition's statistics merge those of the latest file slice of
  each of its file groups together with the files the commit writes (in a replace commit, the file groups it
  replaces still count, as in Hudi), written for every partition the commit touches;
- cleaned files get a tombstone (``isDeleted``) per indexed column; a tombstone wins any merge and is dropped
  when the metadata table compacts.

Two records of one key merge as :func:`pyhudi.metadata.records.combine` says.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import hashlib
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.metadata.partitions import COLUMN_STATS, PARTITION_STATS
from pyhudi.metadata.records import (
    NON_PARTITIONED_NAME,
    TYPE_COLUMN_STATS,
    TYPE_PARTITION_STATS,
    MetadataRecord,
    decode_value,
    encode_value,
    stats_sort_key,
)

#: meta columns Hudi always indexes (``META_COLS_TO_ALWAYS_INDEX``)
META_COLUMNS_INDEXED = ("_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key")

_WRAPPER_NS = "org.apache.hudi.avro.model."
# value types (org.apache.hudi.stats.ValueType ordinals)
NULL, BOOLEAN, INT, LONG, FLOAT, DOUBLE, STRING, BYTES, FIXED, DECIMAL = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
DATE, TIMESTAMP_MICROS, LOCAL_TIMESTAMP_MICROS = 12, 16, 19
_WRAPPER = {
    BOOLEAN: "BooleanWrapper", INT: "IntWrapper", DATE: "IntWrapper", LONG: "LongWrapper",
    TIMESTAMP_MICROS: "LongWrapper", LOCAL_TIMESTAMP_MICROS: "LongWrapper", FLOAT: "FloatWrapper",
    DOUBLE: "DoubleWrapper", STRING: "StringWrapper", BYTES: "BytesWrapper", FIXED: "BytesWrapper",
    DECIMAL: "BytesWrapper",
}


# -- keys ---------------------------------------------------------------------------------------------------------
_M64 = (1 << 64) - 1
_P1, _P2, _P3, _P4, _P5 = (11400714785074694791, 14029467366897019727, 1609587929392839161, 9650029242287828579,
                           2870177450012600261)
_SEED = 0xFFFFFFFFDABADABA  # Java's int 0xdabadaba, sign-extended to the long seed of XXHash64


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _round(acc: int, v: int) -> int:
    return (_rotl((acc + v * _P2) & _M64, 31) * _P1) & _M64


def xxh64(data: bytes, seed: int = 0) -> int:
    """XXH64 of ``data`` (the reference algorithm; keys are short, so plain Python is enough)."""
    n, i, seed = len(data), 0, seed & _M64
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M64, (seed + _P2) & _M64, seed, (seed - _P1) & _M64]
        while i + 32 <= n:
            for j, lane in enumerate(struct.unpack_from("<4Q", data, i)):
                v[j] = _round(v[j], lane)
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M64
        for x in v:
            h = ((h ^ _round(0, x)) * _P1 + _P4) & _M64
    else:
        h = (seed + _P5) & _M64
    h = (h + n) & _M64
    while i + 8 <= n:
        (k,) = struct.unpack_from("<Q", data, i)
        h = (_rotl(h ^ _round(0, k), 27) * _P1 + _P4) & _M64
        i += 8
    if i + 4 <= n:
        (k4,) = struct.unpack_from("<I", data, i)
        h = (_rotl(h ^ ((k4 * _P1) & _M64), 23) * _P2 + _P3) & _M64
        i += 4
    while i < n:
        h = (_rotl(h ^ ((data[i] * _P5) & _M64), 11) * _P1) & _M64
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _M64
    h ^= h >> 29
    h = (h * _P3) & _M64
    return h ^ (h >> 32)


@lru_cache(maxsize=1 << 16)
def hash_id(s: str) -> str:
    """Hudi's 64-bit ``ColumnIndexID`` / ``PartitionIndexID`` of ``s``, Base64."""
    return base64.b64encode(struct.pack(">Q", xxh64(s.encode("utf-8"), _SEED))).decode("ascii")


def file_id_hash(file_name: str) -> str:
    """Hudi's 128-bit ``FileIndexID`` of a file name: Base64 of its MD5."""
    return base64.b64encode(hashlib.md5(file_name.encode("utf-8")).digest()).decode("ascii")


def _partition_id(partition: str) -> str:
    return partition or NON_PARTITIONED_NAME


def column_stats_key(column: str, partition: str, file_name: str) -> str:
    return hash_id(column) + hash_id(_partition_id(partition)) + file_id_hash(file_name)


def partition_stats_key(column: str, partition: str) -> str:
    return hash_id(column) + hash_id(_partition_id(partition))


# -- which columns ------------------------------------------------------------------------------------------------
def value_type(t: pa.DataType) -> tuple[int, str | None] | None:
    """(value type ordinal, additionalInfo) of an Arrow column type, None for types not indexed."""
    if pa.types.is_boolean(t):
        return BOOLEAN, None
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t):
        return INT, None
    if pa.types.is_int64(t):
        return LONG, None
    if pa.types.is_float32(t):
        return FLOAT, None
    if pa.types.is_float64(t):
        return DOUBLE, None
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return STRING, None
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return BYTES, None
    if pa.types.is_fixed_size_binary(t):
        return FIXED, None
    if pa.types.is_decimal(t):
        return DECIMAL, f"{t.precision},{t.scale}"
    if pa.types.is_date32(t):
        return DATE, None
    if pa.types.is_timestamp(t):
        return (TIMESTAMP_MICROS if t.tz else LOCAL_TIMESTAMP_MICROS), None
    return None


def indexed_columns(schema: pa.Schema, column_list: str = "", max_columns: int = 32) -> tuple[str, ...]:
    """The columns ``column_stats`` indexes for a table of ``schema`` (meta columns first)."""
    names = [n for n in schema.names if n in META_COLUMNS_INDEXED]
    data = [f for f in schema if not f.name.startswith("_hoodie_")]
    wanted = [c.strip() for c in column_list.split(",") if c.strip()]
    if wanted:
        by_name = {f.name: f for f in data}
        cols = [c for c in wanted if c in by_name and value_type(by_name[c].type) is not None]
    else:
        cols = [f.name for f in data if value_type(f.type) is not None][:max_columns]
    return tuple(names + [c for c in cols if c not in names])


# -- values -------------------------------------------------------------------------------------------------------
#: a decimal context that rounds no decimal of up to 100 digits (Arrow's largest, decimal256, holds 76)
EXACT_DECIMALS = decimal.Context(prec=100)
_EPOCH_DATE = datetime.date(1970, 1, 1)
_EPOCH_NAIVE = datetime.datetime(1970, 1, 1)
_EPOCH_UTC = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _micros(v: datetime.datetime) -> int:
    td = v - (_EPOCH_UTC if v.tzinfo is not None else _EPOCH_NAIVE)
    return (td.days * 86400 + td.seconds) * 1_000_000 + td.microseconds


def _unscaled_bytes(unscaled: int) -> bytes:
    """Java ``BigInteger.toByteArray``: minimal big-endian two's complement."""
    n = ((~unscaled).bit_length() if unscaled < 0 else unscaled.bit_length()) // 8 + 1
    return unscaled.to_bytes(n, "big", signed=True)


def _raw(v: Any, ordinal: int, scale: int) -> Any:
    """A Python min/max value as the ``value`` of its wrapper."""
    if ordinal == DATE:
        return (v - _EPOCH_DATE).days if isinstance(v, datetime.date) else int(v)
    if ordinal in (TIMESTAMP_MICROS, LOCAL_TIMESTAMP_MICROS):
        return _micros(v) if isinstance(v, datetime.datetime) else int(v)
    if ordinal == DECIMAL:
        d = v if isinstance(v, decimal.Decimal) else decimal.Decimal(v)
        # exact: the default context would round an unscaled value of more than 28 digits (decimal(38, s) holds 38)
        return _unscaled_bytes(int(d.scaleb(scale, context=EXACT_DECIMALS)))
    if ordinal in (BYTES, FIXED):
        return bytes(v)
    if ordinal in (FLOAT, DOUBLE):
        return float(v)
    if ordinal == BOOLEAN:
        return bool(v)
    if ordinal in (INT, LONG):
        return int(v)
    return str(v)


def _wrap(raw: Any, ordinal: int) -> tuple[str, dict[str, Any]] | None:
    return None if raw is None else (_WRAPPER_NS + _WRAPPER[ordinal], {"value": raw})


@dataclass(frozen=True)
class ColumnRange:
    """The statistics of one column of one file (or partition), values raw (as their wrappers hold them)."""

    column: str
    min: Any
    max: Any
    null_count: int
    value_count: int
    total_size: int
    total_uncompressed_size: int
    ordinal: int
    info: str | None

    def to_record(self, partition: str, file_name: str) -> MetadataRecord:
        return MetadataRecord(column_stats_key(self.column, partition, file_name), TYPE_COLUMN_STATS,
                              {"type": TYPE_COLUMN_STATS, "ColumnStatsMetadata": self._fields(file_name, tight=False)})

    def to_partition_record(self, partition: str) -> MetadataRecord:
        return MetadataRecord(partition_stats_key(self.column, partition), TYPE_PARTITION_STATS,
                              {"type": TYPE_PARTITION_STATS,
                               "ColumnStatsMetadata": self._fields(partition, tight=True)})

    def _fields(self, name: str, *, tight: bool) -> dict[str, Any]:
        ordinal = NULL if self.value_count == 0 and self.min is None else self.ordinal
        return {
            "fileName": name, "columnName": self.column,
            "minValue": _wrap(self.min, self.ordinal), "maxValue": _wrap(self.max, self.ordinal),
            "valueCount": self.value_count, "nullCount": self.null_count, "totalSize": self.total_size,
            "totalUncompressedSize": self.total_uncompressed_size, "isDeleted": False, "isTightBound": tight,
            "valueType": {"typeOrdinal": ordinal, "additionalInfo": self.info if ordinal != NULL else None},
        }

    @staticmethod
    def from_fields(cs: Mapping[str, Any]) -> ColumnRange:
        vt = cs.get("valueType") or {}
        mn, mx = cs.get("minValue"), cs.get("maxValue")
        return ColumnRange(
            str(cs["columnName"]), mn[1]["value"] if mn else None, mx[1]["value"] if mx else None,
            int(cs.get("nullCount") or 0), int(cs.get("valueCount") or 0), int(cs.get("totalSize") or 0),
            int(cs.get("totalUncompressedSize") or 0), int(vt.get("typeOrdinal") or 0), vt.get("additionalInfo"))


def _scale(t: pa.DataType) -> int:
    return int(t.scale) if pa.types.is_decimal(t) else 0


def ranges_from_parquet(metadata: Any, schema: pa.Schema, columns: Sequence[str]) -> list[ColumnRange]:
    """The statistics of ``columns`` of a parquet file, from its footer (``pyarrow.parquet.FileMetaData``): min
    and max over the row groups' statistics, null and value counts, column-chunk sizes summed. A column some row
    group of which has values but no min/max gets no statistics (readers then keep the file)."""
    index = {metadata.schema.column(j).path: j for j in range(metadata.num_columns)}
    out = []
    for col in columns:
        j = index.get(col)
        vt = value_type(schema.field(col).type) if col in schema.names else None
        if j is None or vt is None:
            continue
        ordinal, info = vt
        scale = _scale(schema.field(col).type)
        lo = hi = None
        nulls = values = size = usize = 0
        ok = True
        for g in range(metadata.num_row_groups):
            rg = metadata.row_group(g)
            c = rg.column(j)
            st = c.statistics
            values += rg.num_rows
            size += c.total_compressed_size
            usize += c.total_uncompressed_size
            n_null = st.null_count if st is not None and st.has_null_count else None
            if n_null is None:
                ok = False
                break
            nulls += n_null
            if n_null < rg.num_rows:
                if st is None or not st.has_min_max:
                    ok = False
                    break
                a, b = _raw(st.min, ordinal, scale), _raw(st.max, ordinal, scale)
                lo = a if lo is None or _less(a, lo, ordinal) else lo
                hi = b if hi is None or _less(hi, b, ordinal) else hi
        if ok:
            out.append(ColumnRange(col, lo, hi, nulls, values, size, usize, ordinal, info))
    return out


def ranges_from_table(table: pa.Table, columns: Sequence[str], num_rows: int | None = None) -> list[ColumnRange]:
    """The statistics of ``columns`` of records held in ``table`` (a log file's appended records; sizes 0)."""
    out = []
    for col in columns:
        if col not in table.column_names:
            continue
        t = table.schema.field(col).type
        vt = value_type(t)
        if vt is None:
            continue
        ordinal, info = vt
        arr = table.column(col)
        nulls = arr.null_count
        lo = hi = None
        if nulls < len(arr):
            mm = pc.min_max(arr)
            lo = _raw(_py(mm["min"], t), ordinal, _scale(t))
            hi = _raw(_py(mm["max"], t), ordinal, _scale(t))
        out.append(ColumnRange(col, lo, hi, nulls, len(arr) if num_rows is None else num_rows, 0, 0, ordinal, info))
    return out


def empty_ranges(columns: Sequence[str], schema: pa.Schema) -> list[ColumnRange]:
    """The statistics of a file that holds no records (a delete-only log file): no min/max, counts 0."""
    return [ColumnRange(col, None, None, 0, 0, 0, 0, NULL, None) for col in columns
            if col in schema.names and value_type(schema.field(col).type) is not None]


def _py(scalar: pa.Scalar, t: pa.DataType) -> Any:
    if pa.types.is_timestamp(t):
        return scalar.cast(pa.timestamp("us", tz=t.tz)).cast(pa.int64()).as_py()
    if pa.types.is_date32(t):
        return scalar.cast(pa.int32()).as_py()
    return scalar.as_py()


def _less(a: Any, b: Any, ordinal: int) -> bool:
    return bool(stats_sort_key(a, ordinal) < stats_sort_key(b, ordinal))


# -- records ------------------------------------------------------------------------------------------------------
def encode_ranges(partition: str, file_name: str, ranges: Iterable[ColumnRange]) -> list[dict[str, Any]]:
    """The ``column_stats`` cells of one file, as a write status carries them: ``{"key", "value"}``."""
    out = []
    for r in ranges:
        rec = r.to_record(partition, file_name)
        out.append({"key": rec.key, "value": encode_value(rec)})
    return out


def written_file_cells(partition: str, written: Any, columns: Sequence[str] | None) -> list[dict[str, Any]] | None:
    """The ``column_stats`` cells of a base file just written (a
    :class:`~pyhudi.table.base_file.BaseFileWriteResult`), from the footer it wrote; None when no columns are
    indexed."""
    if not columns:
        return None
    assert written.schema is not None
    return encode_ranges(partition, written.file_name,
                         ranges_from_parquet(written.parquet_metadata, written.schema, columns))


def decode_cells(cells: Iterable[Any]) -> list[MetadataRecord]:
    """Records of cells carried by write statuses (dicts or Spark rows with ``key`` and ``value``)."""
    out = []
    for c in cells:
        d = c.asDict() if hasattr(c, "asDict") else c
        out.append(decode_value(str(d["key"]), bytes(d["value"])))
    return out


def tombstones(partition: str, file_name: str, columns: Iterable[str]) -> list[MetadataRecord]:
    """``column_stats`` tombstones of a deleted file."""
    return [
        MetadataRecord(column_stats_key(c, partition, file_name), TYPE_COLUMN_STATS, {"type": TYPE_COLUMN_STATS, "ColumnStatsMetadata": {
            "fileName": file_name, "columnName": c, "minValue": None, "maxValue": None, "valueCount": 0,
            "nullCount": 0, "totalSize": 0, "totalUncompressedSize": 0, "isDeleted": True, "isTightBound": False,
            "valueType": {"typeOrdinal": NULL, "additionalInfo": None}}})
        for c in columns
    ]


def merge_ranges(ranges: Iterable[ColumnRange]) -> ColumnRange | None:
    """The statistics of a partition from those of its files (one column): None when they cannot be merged
    (value types differ)."""
    acc: ColumnRange | None = None
    for r in ranges:
        if acc is None:
            acc = r
            continue
        typed = [x for x in (acc, r) if x.min is not None]
        if len({(x.ordinal, x.info) for x in typed}) > 1:
            return None
        base = typed[-1] if typed else r
        lo = min((x.min for x in typed), key=lambda v: stats_sort_key(v, base.ordinal)) if typed else None
        hi = max((x.max for x in typed), key=lambda v: stats_sort_key(v, base.ordinal)) if typed else None
        acc = ColumnRange(r.column, lo, hi, acc.null_count + r.null_count, acc.value_count + r.value_count,
                          acc.total_size + r.total_size, acc.total_uncompressed_size + r.total_uncompressed_size,
                          base.ordinal, base.info)
    return acc




# -- reading data files (initialisation, and files a commit wrote without statistics) -----------------------------
def file_ranges(storage: Any, path: str, schema: pa.Schema, columns: Sequence[str]) -> list[ColumnRange]:
    """The statistics of the data file at ``path`` (a parquet base file from its footer; a log file from the
    records of its data blocks; ``schema``: the table's columns with meta columns)."""
    import posixpath

    from pyhudi.io.parquet import parquet_file

    name = posixpath.basename(path)
    if not name.startswith("."):
        with storage.open_input(path) as f:
            pf = parquet_file(f)
            return ranges_from_parquet(pf.metadata, pf.schema_arrow, columns)
    from pyhudi.io.logfile import LogFileReader

    tables = []
    with LogFileReader.open(storage, path) as r:
        for b in r.blocks():
            if not b.is_corrupt and b.is_data_block:
                tables.append(b.records(storage))
    if not tables:
        return empty_ranges(columns, schema)
    t = pa.concat_tables(tables, promote_options="permissive")
    return ranges_from_table(t, columns)


def partition_records(partition: str, files: Mapping[str, Mapping[str, ColumnRange]],
                      columns: Sequence[str]) -> list[MetadataRecord]:
    """The ``partition_stats`` records of a partition whose latest files have the statistics ``files`` (file
    name -> column -> range): one per column, a tombstone where some file has no statistics for it (so no stale
    record stays)."""
    out = []
    for col in columns:
        ranges = [f.get(col) for f in files.values()]
        merged = merge_ranges(r for r in ranges if r is not None) if all(r is not None for r in ranges) else None
        out.append(partition_tombstone(col, partition) if merged is None else merged.to_partition_record(partition))
    return out


def partition_tombstone(column: str, partition: str) -> MetadataRecord:
    """A ``partition_stats`` tombstone: readers keep the partition for predicates on ``column``."""
    return MetadataRecord(partition_stats_key(column, partition), TYPE_PARTITION_STATS, {
        "type": TYPE_PARTITION_STATS, "ColumnStatsMetadata": {
            "fileName": partition, "columnName": column, "minValue": None, "maxValue": None, "valueCount": 0,
            "nullCount": 0, "totalSize": 0, "totalUncompressedSize": 0, "isDeleted": True, "isTightBound": True,
            "valueType": {"typeOrdinal": NULL, "additionalInfo": None}}})


__all__ = [
    "COLUMN_STATS",
    "PARTITION_STATS",
    "ColumnRange",
    "column_stats_key",
    "file_ranges",
    "indexed_columns",
    "merge_ranges",
    "partition_records",
    "partition_stats_key",
    "ranges_from_parquet",
    "ranges_from_table",
    "tombstones",
]
