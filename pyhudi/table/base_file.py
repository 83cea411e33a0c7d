"""Parquet base files as Hudi writes them: meta columns first, record-key footer metadata, Hudi's parquet options.

What Hudi 1.1's Spark writers put into a base file (checked against the fixture tables):

- columns ``_hoodie_commit_time``, ``_hoodie_commit_seqno``, ``_hoodie_record_key``, ``_hoodie_partition_path``,
  ``_hoodie_file_name`` (optional strings) before the data columns. ``_hoodie_commit_seqno`` is
  ``<instant>_<taskPartitionId>_<n>`` with ``n`` counting the records the task wrote (0-based). A COW merge keeps
  the commit time and seqno of records it carries over unchanged, and sets ``_hoodie_file_name`` to the new file.
- footer key-value metadata ``org.apache.hudi.bloomfilter`` (Base64), ``hoodie_bloom_filter_type_code`` (for
  ``DYNAMIC_V0``, the default), ``hoodie_min_record_key``, ``hoodie_max_record_key``; the Avro write path adds
  ``parquet.avro.schema`` and ``writer.model.name=avro``, the Spark row writer (clustering) adds
  ``org.apache.spark.version`` instead.
- parquet: GZIP in Hudi 1.1 (``hoodie.parquet.compression.codec``; pyhudi writes ZSTD by default, Apache Hudi's
  default for Spark 3.5 and newer writers, and reads any codec), row groups of
  ``hoodie.parquet.block.size`` (120 MiB), pages of ``hoodie.parquet.page.size`` (1 MiB), dictionary encoding on
  (``hoodie.parquet.dictionary.enabled``), kept per column chunk only where it pays, as parquet-mr decides it
  (the fixtures' unique keys and sequence numbers are PLAIN, their repeated dates and currencies dictionary
  encoded; :func:`dictionary_columns`); timestamps INT64 micros, dates INT32, decimals FIXED_LEN_BYTE_ARRAY.
"""

from __future__ import annotations

import contextlib
import posixpath
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from pyhudi import config as C
from pyhudi.errors import ConfigError, CorruptFileError, InvalidInputError, StorageError
from pyhudi.io import bloom as bloom_mod
from pyhudi.io.arrow import binary_array, binary_buffers, constant_strings, numbered_strings, to_binary_array
from pyhudi.io.bloom import BloomFilter
from pyhudi.io.parquet import parquet_file, parquet_format
from pyhudi.io.storage import Storage
from pyhudi.table.filenames import BaseFileName, FileNameError
from pyhudi.table.schema import (
    COMMIT_SEQNO_COL,
    COMMIT_TIME_COL,
    FILE_NAME_COL,
    META_COLUMNS,
    PARTITION_PATH_COL,
    RECORD_KEY_COL,
)

DEFAULT_COMPRESSION_CODEC = str(C.PARQUET_COMPRESSION.default)
# gzip level 1 writes about 6x faster than zlib's default level 6 for files ~4% larger
DEFAULT_GZIP_LEVEL = 1
DEFAULT_BLOCK_SIZE = int(str(C.PARQUET_BLOCK_SIZE.default))
DEFAULT_PAGE_SIZE = int(str(C.PARQUET_PAGE_SIZE.default))

_CODECS = {
    "gzip": "gzip",
    "snappy": "snappy",
    "zstd": "zstd",
    "lz4": "lz4",
    "lz4_raw": "lz4",
    "brotli": "brotli",
    "uncompressed": "none",
    "none": "none",
}
assert set(_CODECS) == set(C.PARQUET_CODECS)


@dataclass(frozen=True)
class ParquetOptions:
    compression: str = DEFAULT_COMPRESSION_CODEC
    block_size: int = DEFAULT_BLOCK_SIZE
    page_size: int = DEFAULT_PAGE_SIZE
    dictionary: bool = True
    level: int | None = DEFAULT_GZIP_LEVEL

    @staticmethod
    def from_options(options: Mapping[str, str] | None) -> ParquetOptions:
        options = options or {}
        codec = str(options.get(C.PARQUET_COMPRESSION, DEFAULT_COMPRESSION_CODEC)).strip().lower()
        if codec not in _CODECS:
            raise ConfigError(
                f"{C.PARQUET_COMPRESSION}: unsupported codec {codec!r} (use one of {sorted(_CODECS)})"
            )
        block = C.int_option(options, C.PARQUET_BLOCK_SIZE, 1)
        page = C.int_option(options, C.PARQUET_PAGE_SIZE, 1)
        dict_opt = str(options.get(C.PARQUET_DICTIONARY_ENABLED, "true")).strip().lower()
        if dict_opt not in ("true", "false"):
            raise ConfigError(f"{C.PARQUET_DICTIONARY_ENABLED}: expected true or false, got {dict_opt!r}")
        raw_level = options.get(C.PARQUET_COMPRESSION_LEVEL)
        try:
            level = int(raw_level) if raw_level is not None else (DEFAULT_GZIP_LEVEL if codec == "gzip" else None)
        except ValueError:
            raise ConfigError(f"{C.PARQUET_COMPRESSION_LEVEL}: expected an integer, got {raw_level!r}") from None
        return ParquetOptions(codec, block, page, dict_opt == "true", level)

    @property
    def arrow_codec(self) -> str:
        return _CODECS[self.compression]


@dataclass(frozen=True)
class BaseFileWriteResult:
    path: str
    file_name: str
    num_rows: int
    size_bytes: int
    min_record_key: str | None
    max_record_key: str | None
    num_row_groups: int
    #: the footer written (``pyarrow.parquet.FileMetaData``) and the schema of the columns written
    parquet_metadata: Any = None
    schema: pa.Schema | None = None


@dataclass(frozen=True)
class BaseFileFooter:
    min_key: str | None
    max_key: str | None
    bloom_filter: str | None
    bloom_type_code: str | None
    num_rows: int
    metadata: Mapping[str, str]

    def bloom(self, source: str = "<parquet footer>") -> BloomFilter | None:
        """The deserialized bloom filter (type code absent means SIMPLE, as in Hudi)."""
        if self.bloom_filter is None:
            return None
        return BloomFilter.deserialize(self.bloom_filter, self.bloom_type_code, source=source)


# -- writing ------------------------------------------------------------------------------------------------
def spark_compatible(table: pa.Table) -> pa.Table:
    """Cast types Spark cannot read as Hudi writes them: large/view strings and binaries, dictionaries."""
    fields = []
    changed = False
    for f in table.schema:
        t = _spark_type(f.type)
        changed |= t != f.type
        fields.append(pa.field(f.name, t, f.nullable, f.metadata))
    if not changed:
        return table
    try:
        return table.cast(pa.schema(fields, table.schema.metadata))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise InvalidInputError(f"cannot convert the data to Spark-compatible types: {e}") from None


def _spark_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(t):
        return _spark_type(t.value_type)
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_timestamp(t) and t.unit != "us":
        return pa.timestamp("us", t.tz)
    if pa.types.is_date64(t):
        return pa.date32()
    if pa.types.is_large_list(t) or pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return pa.list_(pa.field(t.value_field.name, _spark_type(t.value_type), t.value_field.nullable))
    if pa.types.is_list(t):
        return pa.list_(pa.field(t.value_field.name, _spark_type(t.value_type), t.value_field.nullable))
    if pa.types.is_struct(t):
        return pa.struct(
            [
                pa.field(t.field(i).name, _spark_type(t.field(i).type), t.field(i).nullable)
                for i in range(t.num_fields)
            ]
        )
    if pa.types.is_map(t):
        return pa.map_(
            _spark_type(t.key_type), pa.field("value", _spark_type(t.item_type), t.item_field.nullable)
        )
    return t


def with_meta_columns(
    data: pa.Table,
    *,
    instant_time: str,
    file_name: str,
    partition_path: str,
    record_keys: pa.Array | pa.ChunkedArray | Sequence[str] | None = None,
    task_partition_id: int = 0,
    seqno_offset: int = 0,
) -> pa.Table:
    """``data`` with the five meta columns first.

    If ``data`` already has meta columns (records carried over by a merge), their non-null commit time and seqno
    are kept; record keys come from ``record_keys`` or else the existing ``_hoodie_record_key`` column.
    """
    n = data.num_rows
    existing = {c: data.column(c) for c in META_COLUMNS if c in data.column_names}
    body = data.drop_columns(list(existing)) if existing else data
    if record_keys is None:
        if RECORD_KEY_COL not in existing:
            raise InvalidInputError(f"no record keys given and no {RECORD_KEY_COL} column in the data")
        keys = _flat(existing[RECORD_KEY_COL])
    else:
        keys = (
            record_keys
            if isinstance(record_keys, pa.Array | pa.ChunkedArray)
            else pa.array(list(record_keys))
        )
        keys = _flat(keys)
    if keys.type != pa.string():
        keys = keys.cast(pa.string())
    if len(keys) != n:
        raise InvalidInputError(f"{len(keys)} record keys for {n} rows")
    if keys.null_count:
        row = int(pc.index(pc.is_null(keys), True).as_py())
        raise InvalidInputError(f"null record key at row {row}")
    commit = constant_strings(instant_time, n)
    seqno = numbered_strings(f"{instant_time}_{task_partition_id}_", seqno_offset, n)
    if COMMIT_TIME_COL in existing:
        commit = pc.coalesce(_flat(existing[COMMIT_TIME_COL]).cast(pa.string()), commit)
    if COMMIT_SEQNO_COL in existing:
        seqno = pc.coalesce(_flat(existing[COMMIT_SEQNO_COL]).cast(pa.string()), seqno)
    part = constant_strings(partition_path, n)
    fname = constant_strings(file_name, n)
    arrays = [commit, seqno, keys, part, fname, *body.columns]
    fields = [pa.field(c, pa.string(), True) for c in META_COLUMNS] + list(body.schema)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields, data.schema.metadata))


def _flat(a: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(a, pa.ChunkedArray):
        return a.combine_chunks() if a.num_chunks else pa.array([], a.type)
    return a


def footer_metadata(
    record_keys: pa.Array,
    options: Mapping[str, str] | None = None,
    bloom_filter: BloomFilter | None = None,
) -> dict[str, str]:
    """Hudi's footer entries for these record keys: bloom filter (+ type code) and min/max record key."""
    bf = bloom_filter if bloom_filter is not None else BloomFilter.from_config(options or {})
    if len(record_keys):
        bf.add_many(record_keys)
        return bf.parquet_footer_metadata(*java_min_max(record_keys))
    return bf.parquet_footer_metadata()


# UTF-8 lead bytes remapped so that byte order is Java's String order (UTF-16 code units): supplementary
# characters (lead bytes F0-F4, surrogates D800-DBFF in UTF-16) sort before U+E000-U+FFFF (lead bytes EE, EF).
_JAVA_ORDER = np.arange(256, dtype=np.uint8)
_JAVA_ORDER[[0xEE, 0xEF, 0xF0, 0xF1, 0xF2, 0xF3, 0xF4]] = [0xF3, 0xF4, 0xEE, 0xEF, 0xF0, 0xF1, 0xF2]
_FROM_JAVA_ORDER = np.argsort(_JAVA_ORDER).astype(np.uint8)


def java_min_max(record_keys: pa.Array) -> tuple[str, str]:
    """The smallest and largest of non-empty, null-free string keys as Java's ``String.compareTo`` orders them,
    as Hudi's writers put them in the footer. It differs from byte (code point) order only between characters
    at or above U+E000 and supplementary ones."""
    arr = to_binary_array(record_keys, "record key")
    data, offs = binary_buffers(arr)
    data, offs = data[offs[0] : offs[-1]], offs - offs[0]
    if not (data >= 0xEE).any():
        mm = pc.min_max(arr)
        return mm["min"].as_py().decode("utf-8"), mm["max"].as_py().decode("utf-8")
    mm = pc.min_max(binary_array(_JAVA_ORDER[data], offs))
    lo, hi = (_FROM_JAVA_ORDER[np.frombuffer(mm[k].as_py(), np.uint8)].tobytes().decode("utf-8") for k in ("min", "max"))
    return lo, hi


#: rows of a column the dictionary decision looks at (parquet-mr decides at the first page)
DICTIONARY_SAMPLE_ROWS = 256
#: meta columns whose choice is known: keys and sequence numbers are unique in a file, partition path and file
#: name the same in every row
_PLAIN_META = (RECORD_KEY_COL, COMMIT_SEQNO_COL)
_DICTIONARY_META = (PARTITION_PATH_COL, FILE_NAME_COL)


def dictionary_columns(table: pa.Table, sample_rows: int = DICTIONARY_SAMPLE_ROWS) -> list[str] | bool:
    """The columns worth dictionary encoding, decided as parquet-mr does at a column chunk's first page: the
    dictionary is kept only if it and the encoded ids take fewer bytes than the plain values. Estimated on the
    first ``sample_rows`` values of each column. Arrow's writer keeps a dictionary it was asked for whatever it
    saves, so unique keys and sequence numbers would be hashed, dictionary encoded and written larger than plain
    (5,900 rows of 15 columns, 8 of them near unique: 7.4 ms and 617 KB with every column dictionary encoded,
    5.3 ms and 529 KB with none). A table with nested columns keeps dictionaries everywhere (True)."""
    names = []
    for name, col in zip(table.column_names, table.columns, strict=True):
        t = col.type
        if pa.types.is_nested(t) or pa.types.is_dictionary(t):
            return True
        if pa.types.is_boolean(t) or pa.types.is_null(t) or pa.types.is_fixed_size_binary(t) or pa.types.is_decimal(t):
            continue  # parquet-mr's v1 writer has no dictionary for booleans and fixed-length values (decimals)
        if name in _DICTIONARY_META:
            names.append(name)
            continue
        if name in _PLAIN_META:
            continue
        variable = pa.types.is_binary(t) or pa.types.is_string(t)
        if not variable and not (pa.types.is_primitive(t) and t.bit_width % 8 == 0):
            names.append(name)  # any other type (an extension type, say): dictionary, as Arrow's default
            continue
        sample = col.slice(0, sample_rows)
        values = sample.drop_null() if sample.null_count else sample
        n = len(values)
        if not n:
            names.append(name)
            continue
        distinct = pc.unique(values)
        d = len(distinct)
        ids = n * max(1, (d - 1).bit_length()) / 8
        if variable:
            raw = _value_bytes(values) + 4 * n
            dict_bytes = _value_bytes(distinct) + 4 * d
        else:
            raw, dict_bytes = t.byte_width * n, t.byte_width * d
        if dict_bytes + ids < raw:
            names.append(name)
    return names


def _value_bytes(a: pa.Array | pa.ChunkedArray) -> int:
    """Bytes of the values of a string or binary array (offsets excluded)."""
    total = 0
    for c in a.chunks if isinstance(a, pa.ChunkedArray) else [a]:
        offsets = binary_buffers(c)[1]
        total += int(offsets[-1] - offsets[0])
    return total


def _rows_per_group(table: pa.Table, block_size: int) -> int:
    if table.num_rows == 0:
        return 1
    per_row = max(1, table.nbytes // table.num_rows)
    return max(1, block_size // per_row)


@contextlib.contextmanager
def atomic_output(storage: Storage, path: str) -> Iterator[Any]:
    """An output stream whose content appears under ``path`` only when the block exits without error.

    Local storage: a hidden temporary sibling renamed into place. Object stores: the upload completes (and
    becomes visible) on close; on error the stream is closed and the object deleted (pyarrow offers no abort).
    """
    storage.check_path(path, "write")
    if storage.is_local:
        parent = posixpath.dirname(path)
        storage.makedirs(parent)
        tmp = posixpath.join(parent, f".{posixpath.basename(path)}.{uuid.uuid4().hex}.tmp")
        try:
            with storage.open_output(tmp) as out:
                yield out
            storage.move(tmp, path)
        except BaseException:
            with contextlib.suppress(Exception):
                storage.delete(tmp)
            raise
    else:
        out = storage.open_output(path)
        try:
            yield out
        except BaseException:
            # pyarrow cannot abort an upload: complete it and delete the object, so that neither a partial file
            # nor an open stream (which would block the process at exit) is left behind
            with contextlib.suppress(Exception):
                out.close()
            with contextlib.suppress(Exception):
                storage.delete(path, dirs=False)
            raise
        out.close()


def write_base_file(
    storage: Storage,
    path: str,
    data: pa.Table | pa.RecordBatch,
    *,
    instant_time: str,
    partition_path: str,
    record_keys: pa.Array | pa.ChunkedArray | Sequence[str] | None = None,
    task_partition_id: int = 0,
    seqno_offset: int = 0,
    options: Mapping[str, str] | None = None,
    bloom_filter: BloomFilter | None = None,
    avro_schema: str | None = None,
    extra_metadata: Mapping[str, str] | None = None,
) -> BaseFileWriteResult:
    """Write ``data`` (data columns, optionally with meta columns) as the Hudi base file ``path``.

    ``path``'s name must be a base file name (``<fileId>_<writeToken>_<instant>.parquet``). The file never
    appears half-written under its final name. ``avro_schema`` (the table's Avro schema with meta fields), if
    given, is stored as ``parquet.avro.schema`` like Hudi's Avro writer does.
    """
    name = posixpath.basename(path)
    try:
        parsed = BaseFileName.parse(name)
    except FileNameError as e:
        raise InvalidInputError(str(e)) from None
    if parsed.extension != "parquet":
        raise InvalidInputError(f"{name}: only parquet base files can be written")
    popts = ParquetOptions.from_options(options)
    table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
    table = with_meta_columns(
        table,
        instant_time=instant_time,
        file_name=name,
        partition_path=partition_path,
        record_keys=record_keys,
        task_partition_id=task_partition_id,
        seqno_offset=seqno_offset,
    )
    table = spark_compatible(table)
    keys = _flat(table.column(RECORD_KEY_COL))
    md: dict[str, str] = {}
    if avro_schema is not None:
        md["parquet.avro.schema"] = avro_schema
        md["writer.model.name"] = "avro"
    md.update(extra_metadata or {})
    md.update(footer_metadata(keys, options, bloom_filter))
    table = table.replace_schema_metadata(None)
    rows_per_group = _rows_per_group(table, popts.block_size)
    try:
        with (
            atomic_output(storage, path) as out,
            pq.ParquetWriter(
                out,
                table.schema,
                compression=popts.arrow_codec,
                compression_level=popts.level,
                use_dictionary=dictionary_columns(table) if popts.dictionary else False,
                data_page_size=popts.page_size,
                coerce_timestamps="us",
                allow_truncated_timestamps=False,
                store_schema=False,
                write_statistics=True,
            ) as writer,
        ):
            writer.write_table(table, row_group_size=rows_per_group)
            writer.add_key_value_metadata(md)
        footer = writer.writer.metadata
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise InvalidInputError(f"cannot write {path}: {e}") from None
    except OSError as e:
        raise StorageError(f"cannot write {path}: {e}") from e
    size = storage.status(path).size
    mm_min = md.get(bloom_mod.PARQUET_MIN_RECORD_KEY)
    mm_max = md.get(bloom_mod.PARQUET_MAX_RECORD_KEY)
    n_groups = max(1, -(-table.num_rows // rows_per_group)) if table.num_rows else 0
    return BaseFileWriteResult(path, name, table.num_rows, size, mm_min, mm_max, n_groups, footer, table.schema)


# -- reading ------------------------------------------------------------------------------------------------
def read_footer(storage: Storage, path: str) -> BaseFileFooter:
    """The Hudi entries of a base file's footer and its row count."""
    try:
        with storage.open_input(path) as f:
            meta = pq.read_metadata(f)
    except (pa.ArrowInvalid, pa.ArrowException) as e:
        raise CorruptFileError(path, f"not a readable parquet file: {e}") from None
    raw = meta.metadata or {}
    md = {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in raw.items()}
    bloom_text = md.get(bloom_mod.PARQUET_BLOOM_FILTER_KEY) or md.get(
        bloom_mod.PARQUET_LEGACY_BLOOM_FILTER_KEY
    )
    return BaseFileFooter(
        min_key=md.get(bloom_mod.PARQUET_MIN_RECORD_KEY),
        max_key=md.get(bloom_mod.PARQUET_MAX_RECORD_KEY),
        bloom_filter=bloom_text,
        bloom_type_code=md.get(bloom_mod.PARQUET_BLOOM_FILTER_TYPE_CODE_KEY),
        num_rows=meta.num_rows,
        metadata=md,
    )


def read_base_file(
    storage: Storage,
    path: str,
    columns: Sequence[str] | None = None,
    filter_keys: pa.Array | Sequence[str] | None = None,
) -> pa.Table:
    """Read a base file (all columns, or ``columns``), optionally only the rows whose record key is in
    ``filter_keys`` (row groups are pruned by their key statistics)."""
    cols = list(columns) if columns is not None else None

    def check(names: list[str]) -> None:
        missing = [c for c in cols or () if c not in names]
        if missing:
            raise InvalidInputError(f"{path}: no column(s) {missing}")

    try:
        if filter_keys is None:  # the file as it is: read directly (a dataset's set-up took as long as the read)
            with storage.open_input(path) as f:
                pf = parquet_file(f)
                check(pf.schema_arrow.names)
                return pf.read(columns=cols)
        storage.check_path(path, "read")
        dataset = pads.dataset(path, filesystem=storage.fs, format=parquet_format())
        keys = filter_keys if isinstance(filter_keys, pa.Array) else pa.array(list(filter_keys), pa.string())
        if keys.type != pa.string():
            keys = keys.cast(pa.string())
        check(dataset.schema.names)
        return dataset.to_table(columns=cols, filter=pc.field(RECORD_KEY_COL).isin(keys))
    except FileNotFoundError as e:
        raise StorageError(f"file not found: {path}") from e
    except (pa.ArrowInvalid, pa.ArrowException) as e:
        raise CorruptFileError(path, f"cannot read parquet: {e}") from None
