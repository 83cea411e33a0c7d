"""Hudi's log file format (``.<fileId>_<instant>.log.<version>_<writeToken>``): reading and writing blocks.

A log file is a sequence of blocks. Log format version 1 (the only one Hudi writes since 0.x), all integers
big-endian::

    "#HUDI#"                          6 bytes magic
    long   blockLength                bytes after this field, up to and including the trailing total length
    int    logFormatVersion           1
    int    blockType                  see :class:`BlockType`
    header map                        int count, then per entry: int key ordinal, int length, UTF-8 value
    long   contentLength
    bytes  content
    footer map                        same encoding (Hudi writes an empty footer: count 0)
    long   totalBlockLength           magic + length field + everything above = blockLength + 6

Header keys (:class:`HeaderKey`, ordinal = position in Hudi's ``HeaderMetadataType``): INSTANT_TIME 0,
TARGET_INSTANT_TIME 1, SCHEMA 2, COMMAND_BLOCK_TYPE 3, COMPACTED_BLOCK_TIMES 4, RECORD_POSITIONS 5,
BLOCK_IDENTIFIER 6, IS_PARTIAL 7, BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS 8. Hudi keeps the header in a
Java ``HashMap`` keyed by the enum, so the entry order on disk varies between JVM runs (the fixtures show both
INSTANT_TIME, SCHEMA and SCHEMA, INSTANT_TIME); readers must not depend on it.

Block contents:

- HFILE_DATA (4): a complete standalone HFile (no version prefix); cell key = record key, value = Avro binary
  datum of the record with its key field blanked. Header: INSTANT_TIME and SCHEMA.
- DELETE (1): int block version (3), int length, then the Avro binary datum of ``HoodieDeleteRecordList``
  (``pyhudi/avro/HoodieDeleteRecordList.avsc``). Header: INSTANT_TIME (and SCHEMA when written by a data
  writer). The metadata table writes an *empty* delete block when it initialises a file group, and record-index
  deletions (``partitionPath`` = ``record_index``, ``orderingVal`` = long 0) as delete blocks.
- COMMAND (0): empty content; header INSTANT_TIME, TARGET_INSTANT_TIME, COMMAND_BLOCK_TYPE ("0" = rollback):
  rolls back earlier blocks of this file slice whose INSTANT_TIME equals TARGET_INSTANT_TIME.
- AVRO_DATA (3): int block version (3), int record count, then per record int length + Avro binary datum.
- PARQUET_DATA (5): a parquet file. CDC_DATA (6) is Avro like 3.

Torn or corrupt blocks (Hudi's ``HoodieLogFileReader``): after reading a block's length the reader checks that
the trailing total length at ``start + blockLength - 8`` exists, equals ``blockLength + 6``, and that the next
6 bytes are either EOF or the magic. If not (or the length itself cannot be read), the bytes from the block
start up to the next occurrence of the magic (or EOF) form a *corrupt block* (type CORRUPT, no header), which
readers skip. An incomplete magic at EOF (fewer than 6 bytes) ends the file.
"""

from __future__ import annotations

import enum
import io
import itertools
import json
import posixpath
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from pyhudi.errors import CorruptFileError, InvalidInputError, PyHudiError, UnsupportedFormatError
from pyhudi.hfile import HFileReader, hfile_bytes
from pyhudi.io import avro
from pyhudi.io.compression import CODEC_GZ
from pyhudi.io.storage import Storage
from pyhudi.table.filenames import LogFileName

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1
#: Version of the content encoding of Avro data and delete blocks.
LOG_BLOCK_VERSION = 3
#: Hudi's ``hoodie.metadata`` HFile block size for log-block HFiles.
HFILE_BLOCK_SIZE = 1 << 20
_SCAN_BUFFER = 1 << 20
_HEADER_PREFETCH = 16 << 10

_LONG = struct.Struct(">q")
_INT = struct.Struct(">i")


class BlockType(enum.IntEnum):
    COMMAND = 0
    DELETE = 1
    CORRUPT = 2
    AVRO_DATA = 3
    HFILE_DATA = 4
    PARQUET_DATA = 5
    CDC_DATA = 6


class HeaderKey(enum.IntEnum):
    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6
    IS_PARTIAL = 7
    BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS = 8


class CommandType(enum.IntEnum):
    ROLLBACK = 0


DATA_BLOCK_TYPES = frozenset({BlockType.AVRO_DATA, BlockType.HFILE_DATA, BlockType.PARQUET_DATA, BlockType.CDC_DATA})


class OrderingType(enum.IntEnum):
    """Branch of the ``orderingVal`` union of a delete-block entry (Java's wrapper records, Hudi 1.1).

    Each wrapper is a record with one field, so on the wire a branch is the bare value: boolean, int, long,
    float, double, bytes, string; DATE an int of days, DECIMAL bytes of decimal(30,15), TIME_MICROS and
    TIMESTAMP_MICROS a long; ARRAY (several ordering fields) a nullable array of wrapped values.
    """

    NULL = 0
    BOOLEAN = 1
    INT = 2
    LONG = 3
    FLOAT = 4
    DOUBLE = 5
    BYTES = 6
    STRING = 7
    DATE = 8
    DECIMAL = 9
    TIME_MICROS = 10
    TIMESTAMP_MICROS = 11
    ARRAY = 12


#: the elements of an ARRAY ordering value: this union (``ArrayWrapper.wrappedValues`` items) has no ARRAY branch
#: but a LOCAL_DATE one (an int of days) at 12
_ARRAY_ITEM_LOCAL_DATE = 12
#: scale of DecimalWrapper values
DECIMAL_WRAPPER_SCALE = 15
_INT32 = (-(1 << 31), (1 << 31) - 1)


@dataclass(frozen=True)
class OrderingValue:
    """A typed ordering value (an element of an ARRAY ordering value)."""

    type: OrderingType
    value: Any


def infer_ordering_type(v: Any) -> OrderingType:
    """The wrapper Java writes for a Python value: bool -> BOOLEAN, int -> INT (or LONG outside int32), float ->
    DOUBLE, bytes -> BYTES, str -> STRING, date -> DATE, Decimal -> DECIMAL, datetime -> TIMESTAMP_MICROS,
    tuple/list -> ARRAY, None -> NULL."""
    import datetime as _dt
    import decimal as _dec

    if v is None:
        return OrderingType.NULL
    if isinstance(v, bool):
        return OrderingType.BOOLEAN
    if isinstance(v, int):
        return OrderingType.INT if _INT32[0] <= v <= _INT32[1] else OrderingType.LONG
    if isinstance(v, float):
        return OrderingType.DOUBLE
    if isinstance(v, bytes):
        return OrderingType.BYTES
    if isinstance(v, str):
        return OrderingType.STRING
    if isinstance(v, _dt.datetime):
        return OrderingType.TIMESTAMP_MICROS
    if isinstance(v, _dt.date):
        return OrderingType.DATE
    if isinstance(v, _dec.Decimal):
        return OrderingType.DECIMAL
    if isinstance(v, (tuple, list)):
        return OrderingType.ARRAY
    raise PyHudiError(f"unsupported ordering value type {type(v).__name__} in a delete block")


@dataclass(frozen=True)
class DeleteRecord:
    """One entry of a delete block: the key and the ordering value of the deleted record.

    ``ordering_type`` is the union branch (inferred from the value when not given, see
    :func:`infer_ordering_type`). Hudi's default ordering value, ``Integer 0`` (INT 0), marks a delete that wins
    regardless of event time (SQL ``DELETE``, deletes without an ordering value).
    """

    record_key: str | None
    partition_path: str | None = None
    ordering_value: Any = None
    ordering_type: OrderingType | None = None

    def __post_init__(self) -> None:
        if self.ordering_type is None:
            object.__setattr__(self, "ordering_type", infer_ordering_type(self.ordering_value))

    @property
    def is_default_ordering(self) -> bool:
        """True for Hudi's default ordering value (``Integer 0``) or none: a commit-time-ordering delete."""
        t = self.ordering_type
        return t == OrderingType.NULL or (t == OrderingType.INT and self.ordering_value == 0)


# -- blocks ---------------------------------------------------------------------------------------------------
@dataclass
class LogBlock:
    """One block of a log file. ``content`` is loaded on first use (ranged read) unless given."""

    path: str
    offset: int  # of the magic
    size: int  # bytes on disk from the magic to the end of the block
    block_type: BlockType
    format_version: int = LOG_FORMAT_VERSION
    header: dict[int, str] = field(default_factory=dict)
    footer: dict[int, str] = field(default_factory=dict)
    header_order: tuple[int, ...] = ()
    content_offset: int = 0
    content_length: int = 0
    _content: bytes | None = field(default=None, repr=False)
    _source: pa.NativeFile | None = field(default=None, repr=False)

    @property
    def is_corrupt(self) -> bool:
        return self.block_type == BlockType.CORRUPT

    @property
    def is_data_block(self) -> bool:
        return self.block_type in DATA_BLOCK_TYPES

    @property
    def instant_time(self) -> str | None:
        return self.header.get(HeaderKey.INSTANT_TIME)

    @property
    def target_instant_time(self) -> str | None:
        return self.header.get(HeaderKey.TARGET_INSTANT_TIME)

    @property
    def schema(self) -> str | None:
        return self.header.get(HeaderKey.SCHEMA)

    @property
    def command_type(self) -> CommandType | None:
        if self.block_type != BlockType.COMMAND:
            return None
        raw = self.header.get(HeaderKey.COMMAND_BLOCK_TYPE)
        try:
            return CommandType(int(raw)) if raw is not None else None
        except ValueError:
            return None

    @property
    def is_rollback(self) -> bool:
        return self.command_type == CommandType.ROLLBACK

    @property
    def compacted_block_times(self) -> list[str]:
        raw = self.header.get(HeaderKey.COMPACTED_BLOCK_TIMES)
        return [t for t in raw.split(",") if t] if raw else []

    @property
    def content(self) -> bytes:
        if self._content is None:
            if self._source is None:
                raise PyHudiError(f"{self.path}: block content at {self.content_offset} is not loaded")
            data = self._source.read_at(self.content_length, self.content_offset)
            if len(data) != self.content_length:
                raise CorruptFileError(self.path, "short read of block content", self.content_offset)
            self._content = bytes(data)
        return self._content

    # -- content decoders -------------------------------------------------------------------------------------
    def hfile(self) -> HFileReader:
        """The HFile held by an HFILE_DATA block."""
        self._expect(BlockType.HFILE_DATA)
        try:
            return HFileReader.from_bytes(self.content, f"{self.path}@{self.offset}")
        except CorruptFileError:
            raise
        except (ValueError, IndexError) as e:
            raise CorruptFileError(self.path, f"HFile block content: {e}", self.content_offset) from e

    def hfile_records(self) -> list[tuple[bytes, bytes]]:
        """(key, value) cells of an HFILE_DATA block, in key order."""
        if not self.content:
            return []
        table = self.hfile().read_all()
        return list(
            zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True)
        )

    def delete_records(self, storage: Storage | None = None) -> list[DeleteRecord]:
        """The entries of a DELETE block (content read from ``storage`` if it is not loaded)."""
        return self.delete_columns(storage).records()

    def delete_columns(self, storage: Storage | None = None) -> DeleteColumns:
        """The entries of a DELETE block as columns (content read from ``storage`` if it is not loaded)."""
        self._expect(BlockType.DELETE)
        return decode_delete_columns(self.fetch(storage) if storage is not None else self.content, self.path)

    def records(self, storage: Storage | None = None) -> pa.Table:
        """The records of an AVRO_DATA or PARQUET_DATA block, as Arrow (columns of the block's own schema); the
        content is read from ``storage`` if it is not loaded.

        HFILE_DATA blocks (metadata table) are read with :meth:`hfile_records`; CDC blocks belong to ``.cdc`` log
        files, which readers of the table skip."""
        where = f"{self.path} (block at offset {self.offset})"
        content = self.fetch(storage) if storage is not None else self.content
        if self.block_type == BlockType.AVRO_DATA:
            return decode_avro_block_content(content, self.schema, where)
        if self.block_type == BlockType.PARQUET_DATA:
            return decode_parquet_block_content(content, where)
        raise UnsupportedFormatError(
            f"{where}: {self.block_type.name} log blocks in a data table are not supported (Avro and parquet "
            "data blocks are)"
        )

    def fetch(self, storage: Storage) -> bytes:
        """The content, read now from ``storage`` if it is not loaded (the block's file may be closed)."""
        if self._content is None:
            with storage.open_input(self.path) as f:
                data = f.read_at(self.content_length, self.content_offset)
            if len(data) != self.content_length:
                raise CorruptFileError(self.path, "short read of block content", self.content_offset)
            self._content = bytes(data)
        return self._content

    def detach(self) -> LogBlock:
        """Forget the open file this block was read from (its content is then read with :meth:`fetch`)."""
        self._source = None
        return self

    def release(self) -> None:
        """Drop the loaded content (read it again with :meth:`fetch`)."""
        self._content = None

    def _expect(self, t: BlockType) -> None:
        if self.block_type != t:
            raise PyHudiError(f"{self.path}: block at {self.offset} is {self.block_type.name}, not {t.name}")


# -- reading --------------------------------------------------------------------------------------------------
class LogFileReader:
    """Iterates the blocks of one log file with ranged reads; torn/corrupt blocks come back as CORRUPT blocks."""

    def __init__(self, source: pa.NativeFile, path: str, *, load_content: bool = False) -> None:
        self._src = source
        self.path = path
        self.size = source.size()
        self.load_content = load_content

    @classmethod
    def open(cls, storage: Storage, path: str, **kw: Any) -> LogFileReader:
        return cls(storage.open_input(path), path, **kw)

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "<memory>", **kw: Any) -> LogFileReader:
        return cls(pa.BufferReader(data), name, **kw)

    def close(self) -> None:
        self._src.close()

    def __enter__(self) -> LogFileReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self, offset: int, size: int) -> bytes:
        size = max(0, min(size, self.size - offset))
        return bytes(self._src.read_at(size, offset)) if size else b""

    def __iter__(self) -> Iterator[LogBlock]:
        return self.blocks()

    def blocks(self) -> Iterator[LogBlock]:
        pos = 0
        while pos < self.size:
            magic = self._read(pos, len(MAGIC))
            if len(magic) < len(MAGIC):
                return  # an incomplete magic at EOF ends the file
            if magic != MAGIC:
                raise CorruptFileError(self.path, "no log block magic #HUDI# at the start of a block", pos)
            block = self._read_block(pos)
            yield block
            pos = block.offset + block.size

    def _block_is_intact(self, start: int, length: int) -> bool:
        """Hudi's ``isBlockCorrupted``, inverted. ``start`` = position right after the length field."""
        if length < 8 or start + length > self.size:
            return False
        (total,) = _LONG.unpack(self._read(start + length - 8, 8))
        if total - len(MAGIC) != length:
            return False
        nxt = self._read(start + length, len(MAGIC))
        return len(nxt) < len(MAGIC) or nxt == MAGIC

    def _corrupt_block(self, pos: int) -> LogBlock:
        """A CORRUPT block from ``pos`` (a magic) up to the next magic after it, or EOF."""
        body = pos + len(MAGIC)
        nxt = self._find_magic(body)
        return LogBlock(
            self.path, pos, nxt - pos, BlockType.CORRUPT, 0,
            content_offset=body, content_length=nxt - body, _source=self._src,
        )

    def _find_magic(self, start: int) -> int:
        cur = start
        while cur < self.size:
            buf = self._read(cur, _SCAN_BUFFER)
            i = buf.find(MAGIC)
            if i >= 0:
                return cur + i
            if cur + len(buf) >= self.size:
                break
            cur += len(buf) - len(MAGIC) + 1
        return self.size

    def _read_block(self, pos: int) -> LogBlock:
        start = pos + len(MAGIC) + 8
        raw_len = self._read(pos + len(MAGIC), 8)
        if len(raw_len) < 8:
            return self._corrupt_block(pos)
        (length,) = _LONG.unpack(raw_len)
        if not self._block_is_intact(start, length):
            return self._corrupt_block(pos)
        end = start + length  # first byte after the block
        try:
            return self._parse_block(pos, start, end)
        except (struct.error, UnicodeDecodeError, ValueError, _Short) as e:
            raise CorruptFileError(self.path, f"malformed log block: {e}", pos) from None

    def _parse_block(self, pos: int, start: int, end: int) -> LogBlock:
        buf = _Cursor(self, start, end)
        version = buf.i32()
        if version != LOG_FORMAT_VERSION:
            raise CorruptFileError(self.path, f"unsupported log format version {version}", start)
        btype = BlockType(buf.i32())
        header, order = buf.metadata()
        content_length = buf.i64()
        content_offset = buf.pos
        if content_length < 0 or content_offset + content_length > end - 8:
            raise ValueError(f"content length {content_length} runs past the block end")
        buf.skip(content_length)
        footer, _ = buf.metadata()
        buf.i64()  # total block length, already checked
        if buf.pos != end:
            raise ValueError(f"block ends at {buf.pos}, its length says {end}")
        block = LogBlock(
            self.path, pos, end - pos, btype, version, header, footer, order,
            content_offset, content_length, _source=self._src,
        )
        if self.load_content:
            _ = block.content
        return block


class _Short(Exception):
    pass


class _Cursor:
    """Sequential reads inside one block, prefetching in chunks."""

    def __init__(self, reader: LogFileReader, start: int, end: int) -> None:
        self.r = reader
        self.pos = start
        self.end = end
        self._buf_start = start
        self._buf = reader._read(start, min(_HEADER_PREFETCH, end - start))

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise _Short(f"field of {n} bytes at {self.pos} runs past the block end {self.end}")
        rel = self.pos - self._buf_start
        if rel + n > len(self._buf):
            self._buf_start = self.pos
            self._buf = self.r._read(self.pos, min(max(n, _HEADER_PREFETCH), self.end - self.pos))
            rel = 0
        self.pos += n
        return self._buf[rel : rel + n]

    def skip(self, n: int) -> None:
        self.pos += n

    def i32(self) -> int:
        return int(_INT.unpack(self.take(4))[0])

    def i64(self) -> int:
        return int(_LONG.unpack(self.take(8))[0])

    def metadata(self) -> tuple[dict[int, str], tuple[int, ...]]:
        n = self.i32()
        if n < 0:
            raise ValueError(f"negative metadata entry count {n}")
        out: dict[int, str] = {}
        order = []
        for _ in range(n):
            k = self.i32()
            v = self.take(self.i32()).decode("utf-8")
            key: int = HeaderKey(k) if k in HeaderKey._value2member_map_ else k
            out[key] = v
            order.append(k)
        return out, tuple(order)


def read_log_blocks(storage: Storage, path: str, *, load_content: bool = True) -> list[LogBlock]:
    """All blocks of the log file at ``path`` (contents loaded unless ``load_content`` is False)."""
    with LogFileReader.open(storage, path, load_content=load_content) as r:
        return list(r.blocks())


# -- content codecs -------------------------------------------------------------------------------------------
@dataclass
class DeleteColumns:
    """The entries of a delete block as columns (decoded by a compiled loop).

    ``types`` holds each entry's ordering-value branch (:class:`OrderingType`); its value is in ``ints`` (INT, LONG,
    DATE days, TIME_MICROS, TIMESTAMP_MICROS, BOOLEAN 0/1), ``floats`` (FLOAT, DOUBLE) or ``var`` (BYTES, STRING
    UTF-8, DECIMAL unscaled big-endian); ARRAY values (several ordering fields) are in ``arrays`` by entry index.
    """

    keys: pa.Array  # string, null for an entry without a key
    partitions: pa.Array  # string
    types: np.ndarray  # int8
    ints: np.ndarray  # int64
    floats: np.ndarray  # float64
    var: pa.Array  # binary
    arrays: dict[int, tuple[OrderingValue, ...] | None] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.types)

    def filter(self, mask: pa.Array) -> DeleteColumns:
        """The entries where ``mask`` (an Arrow boolean array; null counts as false) is true."""
        keep = np.asarray(mask.fill_null(False).to_numpy(zero_copy_only=False), np.bool_)
        idx = np.flatnonzero(keep)
        sel = pa.array(idx, pa.int64())
        return DeleteColumns(self.keys.take(sel), self.partitions.take(sel), self.types[keep], self.ints[keep],
                             self.floats[keep], self.var.take(sel),
                             {j: self.arrays[int(i)] for j, i in enumerate(idx) if int(i) in self.arrays})

    @property
    def is_default_ordering(self) -> np.ndarray:
        """Hudi's default ordering value (Integer 0) or none, per entry."""
        return (self.types == OrderingType.NULL) | ((self.types == OrderingType.INT) & (self.ints == 0))

    def value(self, i: int) -> Any:
        """The Python value of entry ``i``'s ordering value (as :class:`DeleteRecord` holds it)."""
        import datetime as _dt
        import decimal as _dec

        t = OrderingType(int(self.types[i]))
        if t == OrderingType.NULL:
            return None
        if t == OrderingType.ARRAY:
            return self.arrays.get(i)
        if t == OrderingType.BOOLEAN:
            return bool(self.ints[i])
        if t in (OrderingType.INT, OrderingType.LONG, OrderingType.TIME_MICROS, OrderingType.TIMESTAMP_MICROS):
            return int(self.ints[i])
        if t == OrderingType.DATE:
            return _dt.date(1970, 1, 1) + _dt.timedelta(days=int(self.ints[i]))
        if t in (OrderingType.FLOAT, OrderingType.DOUBLE):
            return float(self.floats[i])
        raw = self.var[i].as_py()
        if t == OrderingType.STRING:
            return raw.decode("utf-8")
        if t == OrderingType.DECIMAL:
            return _dec.Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-DECIMAL_WRAPPER_SCALE)
        return raw

    def records(self) -> list[DeleteRecord]:
        keys = self.keys.to_pylist()
        parts = self.partitions.to_pylist()
        return [DeleteRecord(keys[i], parts[i], self.value(i), OrderingType(int(self.types[i])))
                for i in range(len(self))]


def decode_delete_columns(content: bytes, path: str = "<delete block>") -> DeleteColumns:
    """The entries of a delete block's content as columns: int32 version (3), int32 length, then one Avro binary
    datum of ``HoodieDeleteRecordList`` (``pyhudi/avro/HoodieDeleteRecordList.avsc``, Java's wrapper-record union
    for the ordering value)."""
    from pyhudi.io import _avro_kernels as AK

    if len(content) < 8:
        raise CorruptFileError(path, "delete block content is too short")
    (version,) = _INT.unpack_from(content, 0)
    if version != LOG_BLOCK_VERSION:
        raise CorruptFileError(
            path, f"delete block version {version} is not supported (need 3: the Avro layout of Hudi 0.14+)"
        )
    (n,) = _INT.unpack_from(content, 4)
    if n < 0 or 8 + n > len(content):
        raise CorruptFileError(path, f"delete block payload length {n} runs past the content")
    buf = np.frombuffer(content, np.uint8)
    cap = n // 3 + 1
    ks, kl, ps, pl = (np.zeros(cap, np.int64) for _ in range(4))
    otype = np.zeros(cap, np.int8)
    oint = np.zeros(cap, np.int64)
    ofloat = np.zeros(cap, np.float64)
    vs, vl = np.zeros(cap, np.int64), np.full(cap, -1, np.int64)
    status, m, stop = AK.decode_delete_list(buf, 8, 8 + n, ks, kl, ps, pl, otype, oint, ofloat, vs, vl)
    if status == 1:  # ARRAY ordering values: the general decoder
        recs = _decode_delete_records(content, n, path)
        return _columns_of(recs)
    if status != AK.OK:
        raise CorruptFileError(path, f"malformed delete block: entry {m}: {status}")
    if stop != 8 + n:
        raise CorruptFileError(path, f"malformed delete block: {8 + n - stop} bytes left after the record list")
    from pyhudi.io.arrow import binary_array

    def strings(starts: np.ndarray, lens: np.ndarray) -> pa.Array:
        valid = lens[:m] >= 0
        offs = np.zeros(m + 1, np.int64)
        np.cumsum(np.where(valid, lens[:m], 0), out=offs[1:])
        data = np.empty(int(offs[-1]), np.uint8)
        from pyhudi.io import _avro_kernels as AK2

        AK2.gather(buf, starts[:m], np.maximum(lens[:m], 0), valid, data, offs)
        return binary_array(data, offs, valid)

    keys = strings(ks, kl).cast(pa.string())
    parts = strings(ps, pl).cast(pa.string())
    var = strings(vs, vl)
    return DeleteColumns(keys, parts, otype[:m].copy(), oint[:m].copy(), ofloat[:m].copy(), var)


def _columns_of(recs: list[DeleteRecord]) -> DeleteColumns:
    import datetime as _dt
    import decimal as _dec

    m = len(recs)
    types = np.array([int(r.ordering_type or 0) for r in recs], np.int8)
    ints = np.zeros(m, np.int64)
    floats = np.zeros(m, np.float64)
    var: list[bytes | None] = [None] * m
    arrays: dict[int, tuple[OrderingValue, ...] | None] = {}
    for i, r in enumerate(recs):
        t, v = r.ordering_type, r.ordering_value
        if t == OrderingType.ARRAY:
            arrays[i] = v
        elif t == OrderingType.DATE:
            ints[i] = (v - _dt.date(1970, 1, 1)).days
        elif t in (OrderingType.FLOAT, OrderingType.DOUBLE):
            floats[i] = v
        elif t == OrderingType.STRING:
            var[i] = v.encode("utf-8")
        elif t == OrderingType.BYTES:
            var[i] = v
        elif t == OrderingType.DECIMAL:
            u = int(_dec.Decimal(v).scaleb(DECIMAL_WRAPPER_SCALE).to_integral_exact())
            var[i] = u.to_bytes(max(1, (u.bit_length() + 8) // 8), "big", signed=True)
        elif t != OrderingType.NULL:
            ints[i] = int(v)
    return DeleteColumns(pa.array([r.record_key for r in recs], pa.string()),
                         pa.array([r.partition_path for r in recs], pa.string()), types, ints, floats,
                         pa.array(var, pa.binary()), arrays)


def decode_delete_content(content: bytes, path: str = "<delete block>") -> list[DeleteRecord]:
    """The entries of a delete block's content (see :func:`decode_delete_columns`)."""
    return decode_delete_columns(content, path).records()


def _decode_delete_records(content: bytes, n: int, path: str) -> list[DeleteRecord]:
    r = avro.BinaryReader(content, 8, 8 + n)
    out: list[DeleteRecord] = []
    try:
        for _ in r.array_items():
            key = r.optional_string()
            part = r.optional_string()
            branch = r.long()
            typ, value = _read_ordering(r, branch, top=True)
            out.append(DeleteRecord(key, part, value, typ))
        if r.pos != 8 + n:
            raise ValueError(f"{8 + n - r.pos} bytes left after the record list")
    except (ValueError, IndexError, UnicodeDecodeError) as e:
        raise CorruptFileError(path, f"malformed delete block: {e}") from None
    return out


def _read_ordering(r: avro.BinaryReader, branch: int, *, top: bool) -> tuple[OrderingType, Any]:
    import datetime as _dt

    if branch == OrderingType.NULL:
        return OrderingType.NULL, None
    if not top and branch == _ARRAY_ITEM_LOCAL_DATE:
        return OrderingType.DATE, _dt.date(1970, 1, 1) + _dt.timedelta(days=r.long())
    if branch < 0 or branch > OrderingType.ARRAY or (not top and branch == OrderingType.ARRAY):
        raise ValueError(f"ordering value union branch {branch} does not exist")
    t = OrderingType(branch)
    if t == OrderingType.BOOLEAN:
        return t, r.boolean()
    if t in (OrderingType.INT, OrderingType.LONG, OrderingType.TIME_MICROS, OrderingType.TIMESTAMP_MICROS):
        return t, r.long()
    if t == OrderingType.FLOAT:
        return t, r.float32()
    if t == OrderingType.DOUBLE:
        return t, r.float64()
    if t == OrderingType.BYTES:
        return t, r.bytes_()
    if t == OrderingType.STRING:
        return t, r.string()
    if t == OrderingType.DATE:
        return t, _dt.date(1970, 1, 1) + _dt.timedelta(days=r.long())
    if t == OrderingType.DECIMAL:
        import decimal as _dec

        unscaled = int.from_bytes(r.bytes_(), "big", signed=True)
        return t, _dec.Decimal(unscaled).scaleb(-DECIMAL_WRAPPER_SCALE)
    # ARRAY: wrappedValues [null, array<union>]
    if r.long() == 0:
        return t, None
    items = []
    for _ in r.array_items():
        it, iv = _read_ordering(r, r.long(), top=False)
        items.append(OrderingValue(it, iv))
    return t, tuple(items)


def encode_delete_content(records: Iterable[DeleteRecord]) -> bytes:
    """Delete-block content (version 3), the ordering values in Java's wrapper-record union (see
    :class:`DeleteRecord`): Hudi's default ``Integer 0`` is ``04 00``."""
    recs = list(records)
    body = bytearray()
    if recs:
        body += avro.zigzag_long(len(recs))
        for r in recs:
            body += _opt_str(r.record_key) + _opt_str(r.partition_path)
            body += _ordering(r.ordering_type or infer_ordering_type(r.ordering_value), r.ordering_value, top=True)
    body += avro.zigzag_long(0)
    datum = bytes(body)
    return _INT.pack(LOG_BLOCK_VERSION) + _INT.pack(len(datum)) + datum


def _opt_str(v: str | None) -> bytes:
    if v is None:
        return avro.zigzag_long(0)
    b = v.encode("utf-8")
    return avro.zigzag_long(1) + avro.zigzag_long(len(b)) + b


def _ordering(t: OrderingType, v: Any, *, top: bool) -> bytes:
    import datetime as _dt
    import decimal as _dec

    z = avro.zigzag_long
    if t == OrderingType.NULL or (v is None and t != OrderingType.ARRAY):
        return z(0)
    if t == OrderingType.ARRAY and not top:
        raise PyHudiError("an ARRAY ordering value cannot hold another ARRAY")
    head = z(int(t))  # array items: the same branches (their LocalDate branch 12 is read as DATE)
    if t == OrderingType.BOOLEAN:
        return head + (b"\x01" if v else b"\x00")
    if t in (OrderingType.INT, OrderingType.LONG, OrderingType.TIME_MICROS):
        if t == OrderingType.INT and not _INT32[0] <= int(v) <= _INT32[1]:
            raise PyHudiError(f"ordering value {v} does not fit an Avro int")
        return head + z(int(v))
    if t == OrderingType.TIMESTAMP_MICROS:
        if isinstance(v, _dt.datetime):
            ref = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC if v.tzinfo else None)
            d = v - ref
            v = (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds
        return head + z(int(v))
    if t == OrderingType.FLOAT:
        return head + struct.pack("<f", float(v))
    if t == OrderingType.DOUBLE:
        return head + struct.pack("<d", float(v))
    if t == OrderingType.BYTES:
        b = bytes(v)
        return head + z(len(b)) + b
    if t == OrderingType.STRING:
        b = str(v).encode("utf-8")
        return head + z(len(b)) + b
    if t == OrderingType.DATE:
        days = (v - _dt.date(1970, 1, 1)).days if isinstance(v, _dt.date) else int(v)
        return head + z(days)
    if t == OrderingType.DECIMAL:
        unscaled = int(_dec.Decimal(v).scaleb(DECIMAL_WRAPPER_SCALE).to_integral_exact())
        b = unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)
        return head + z(len(b)) + b
    # ARRAY
    if v is None:
        return head + z(0)  # wrappedValues: null
    items = list(v)
    out = head + z(1)  # wrappedValues: the array branch
    if items:
        out += z(len(items))
        for it in items:
            iv = it if isinstance(it, OrderingValue) else OrderingValue(infer_ordering_type(it), it)
            out += _ordering(iv.type, iv.value, top=False)
    return out + z(0)


def _avro_block_count(content: bytes, schema_json: str | None, where: str) -> int:
    """The record count of an AVRO_DATA block's content, its header checked."""
    if schema_json is None:
        raise CorruptFileError(where, "Avro data block without a SCHEMA header")
    if len(content) < 8:
        raise CorruptFileError(where, "Avro data block content is too short")
    (version,) = _INT.unpack_from(content, 0)
    if version != LOG_BLOCK_VERSION:
        raise UnsupportedFormatError(f"{where}: Avro data block version {version} is not supported (need 3)")
    (n,) = _INT.unpack_from(content, 4)
    if n < 0:
        raise CorruptFileError(where, f"negative record count {n}")
    return n


def decode_avro_block_content(content: bytes, schema_json: str | None, where: str = "<avro block>") -> pa.Table:
    """The records of an AVRO_DATA block: int32 version (3), int32 record count, then per record an int32 length
    and the Avro binary datum (writer schema = the block's SCHEMA header)."""
    from pyhudi.io.avro_arrow import decoder_for

    n = _avro_block_count(content, schema_json, where)
    assert schema_json is not None
    return decoder_for(schema_json).decode(content, 8, len(content), n, where)


def decode_avro_blocks_content(contents: Sequence[bytes], schema_json: str | None, wheres: Sequence[str]) -> pa.Table:
    """The records of AVRO_DATA blocks of one writer schema, in order, decoded as one table (what
    :func:`decode_avro_block_content` gives each, concatenated): a decoder's fixed cost is paid once, not per
    block, for a file slice's many small blocks. A block that does not decode is named as it would be alone."""
    from pyhudi.io.avro_arrow import decoder_for

    n = sum(_avro_block_count(c, schema_json, w) for c, w in zip(contents, wheres, strict=True))
    assert schema_json is not None
    records = b"".join(memoryview(c)[8:] for c in contents)
    try:
        return decoder_for(schema_json).decode(records, 0, len(records), n, wheres[0])
    except CorruptFileError:
        for c, w in zip(contents, wheres, strict=True):  # the block at fault, named
            decode_avro_block_content(c, schema_json, w)
        raise


def decode_parquet_block_content(content: bytes, where: str = "<parquet block>") -> pa.Table:
    """The records of a PARQUET_DATA block: the content is a whole parquet file."""
    from pyhudi.io.parquet import read_parquet

    try:
        return read_parquet(pa.BufferReader(content))
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptFileError(where, f"parquet data block: {e}") from None


def avro_block_content(records: pa.Table | Iterable[Mapping[str, Any]], schema_json: str) -> bytes:
    """AVRO_DATA block content (block version 3) of ``records`` in writer schema ``schema_json``: int32 version,
    int32 record count, then per record an int32 length and its Avro binary datum (Hudi 1.1's layout). An Arrow
    table of a flat schema is encoded by a compiled loop; dicts, or nested schemas, by fastavro."""
    import fastavro

    from pyhudi.io.avro_arrow import decoder_for

    if isinstance(records, pa.Table) and decoder_for(schema_json).compiled:
        from pyhudi.io.avro_arrow import AvroArrowEncoder

        datums = AvroArrowEncoder(schema_json).encode(records)
        return _INT.pack(LOG_BLOCK_VERSION) + _INT.pack(records.num_rows) + datums
    parsed = fastavro.parse_schema(json.loads(schema_json), named_schemas={})
    # Arrow maps become dicts, as Avro maps are; a map with a key twice has no Avro form and is refused
    rows = _avro_rows(records) if isinstance(records, pa.Table) else records
    out = io.BytesIO()
    out.write(_INT.pack(LOG_BLOCK_VERSION))
    out.write(b"\0\0\0\0")  # record count, patched below
    n = 0
    buf = io.BytesIO()
    for r in rows:
        buf.seek(0)
        buf.truncate()
        try:
            fastavro.schemaless_writer(buf, parsed, dict(r))
        except (ValueError, TypeError, KeyError) as e:
            raise PyHudiError(f"record {n} does not match the block schema: {e}") from None
        datum = buf.getvalue()
        out.write(_INT.pack(len(datum)))
        out.write(datum)
        n += 1
    data = bytearray(out.getvalue())
    data[4:8] = _INT.pack(n)
    return bytes(data)


def _avro_rows(records: pa.Table) -> list[dict[str, Any]]:
    try:
        return records.to_pylist(maps_as_pydicts="strict")
    except (KeyError, ValueError) as e:  # pyarrow's KeyError names the key; inside a struct it is a ValueError
        if not _duplicate_keys(e):
            raise
        raise InvalidInputError(f"{_where_map_key_twice(records)}a map value holds a key twice, which an Avro map "
                                f"cannot: {e.args[0]}") from None


def _duplicate_keys(e: Exception) -> bool:
    """Whether pyarrow's ``e`` refused a map holding a key twice (``maps_as_pydicts="strict"``)."""
    return isinstance(e, KeyError) or "duplicate" in str(e)


def _where_map_key_twice(records: pa.Table) -> str:
    """``"column 'c' of record key 'k': "`` for the first value of ``records`` whose map holds a key twice (for the
    error of :func:`_avro_rows`; looked for only then)."""
    keys = records.column("_hoodie_record_key") if "_hoodie_record_key" in records.column_names else None
    for name in records.column_names:
        col = records.column(name).combine_chunks() if records.num_rows else records.column(name)
        try:
            col.to_pylist(maps_as_pydicts="strict")
            continue
        except (KeyError, ValueError) as e:
            if not _duplicate_keys(e):
                continue
        for i in range(len(col)):
            try:
                col[i].as_py(maps_as_pydicts="strict")
            except (KeyError, ValueError) as e:
                if not _duplicate_keys(e):
                    continue
                return f"column {name!r}" + (f" of record key {keys[i].as_py()!r}" if keys is not None else "") + ": "
        return f"column {name!r}: "
    return ""


def avro_data_block(
    records: pa.Table | Iterable[Mapping[str, Any]],
    instant_time: str,
    schema_json: str,
    *,
    schema_first: bool = False,
    extra_header: Sequence[tuple[int, str]] = (),
) -> bytes:
    """An AVRO_DATA block as Hudi 1.1 writes data-table log blocks: header INSTANT_TIME and SCHEMA (the write
    schema with the five meta fields), block version 3 content, empty footer."""
    header: list[tuple[int, str]] = [(HeaderKey.INSTANT_TIME, instant_time), (HeaderKey.SCHEMA, schema_json)]
    if schema_first:
        header.reverse()
    return encode_block(BlockType.AVRO_DATA, [*header, *extra_header], avro_block_content(records, schema_json))


def parquet_data_block(table: pa.Table, instant_time: str, schema_json: str, *, compression: str = "gzip") -> bytes:
    """A PARQUET_DATA block: the records as one whole parquet file."""
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression=compression)
    header = [(HeaderKey.INSTANT_TIME, instant_time), (HeaderKey.SCHEMA, schema_json)]
    return encode_block(BlockType.PARQUET_DATA, header, sink.getvalue().to_pybytes())


# -- writing --------------------------------------------------------------------------------------------------
def _metadata_bytes(entries: Sequence[tuple[int, str]]) -> bytes:
    out = io.BytesIO()
    out.write(_INT.pack(len(entries)))
    for k, v in entries:
        b = v.encode("utf-8")
        out.write(_INT.pack(int(k)))
        out.write(_INT.pack(len(b)))
        out.write(b)
    return out.getvalue()


def _entries(m: Mapping[int, str] | Sequence[tuple[int, str]] | None) -> list[tuple[int, str]]:
    if m is None:
        return []
    if isinstance(m, Mapping):
        return [(int(k), v) for k, v in m.items()]
    return [(int(k), v) for k, v in m]


def encode_block(
    block_type: BlockType,
    header: Mapping[int, str] | Sequence[tuple[int, str]],
    content: bytes,
    footer: Mapping[int, str] | Sequence[tuple[int, str]] | None = None,
) -> bytes:
    """One complete log block (magic .. total length). Header/footer entries are written in the given order."""
    head = _metadata_bytes(_entries(header))
    foot = _metadata_bytes(_entries(footer))
    body = (
        _INT.pack(LOG_FORMAT_VERSION)
        + _INT.pack(int(block_type))
        + head
        + _LONG.pack(len(content))
        + content
        + foot
    )
    total = len(MAGIC) + 8 + len(body)
    return MAGIC + _LONG.pack(len(body) + 8) + body + _LONG.pack(total)


def hfile_block_content(
    records: Iterable[tuple[str | bytes, bytes]] | Mapping[str, bytes],
    schema_json: str,
    *,
    codec: int = CODEC_GZ,
    creation_time_ms: int | None = None,
) -> bytes:
    """The HFile of an HFILE_DATA block: cells sorted by key (duplicates rejected), file info ``schema``."""
    items = list(records.items()) if isinstance(records, Mapping) else list(records)
    items = [(k.encode("utf-8") if isinstance(k, str) else bytes(k), v) for k, v in items]
    items.sort(key=lambda kv: kv[0])
    for a, b in itertools.pairwise(items):
        if a[0] == b[0]:
            raise PyHudiError(f"duplicate key {a[0]!r} in an HFile log block")
    data, _ = hfile_bytes(
        [k for k, _ in items],
        [v for _, v in items],
        codec=codec,
        block_size=HFILE_BLOCK_SIZE,
        file_info={"schema": schema_json.encode("utf-8")},
        creation_time_ms=creation_time_ms,
    )
    return data


def hfile_data_block(
    records: Iterable[tuple[str | bytes, bytes]] | Mapping[str, bytes],
    instant_time: str,
    schema_json: str,
    *,
    header_schema: str | None = None,
    codec: int = CODEC_GZ,
    creation_time_ms: int | None = None,
    schema_first: bool = False,
) -> bytes:
    """An HFILE_DATA block as Hudi writes metadata-table log blocks (header INSTANT_TIME + SCHEMA, no footer).

    ``schema_json`` goes into the HFile's file info; ``header_schema`` (default: the same) into the header.
    """
    content = hfile_block_content(records, schema_json, codec=codec, creation_time_ms=creation_time_ms)
    hs = header_schema if header_schema is not None else schema_json
    header = [(HeaderKey.INSTANT_TIME, instant_time), (HeaderKey.SCHEMA, hs)]
    if schema_first:
        header.reverse()
    return encode_block(BlockType.HFILE_DATA, header, content)


def delete_block(
    records: Iterable[DeleteRecord], instant_time: str, *, schema_json: str | None = None
) -> bytes:
    header: list[tuple[int, str]] = [(HeaderKey.INSTANT_TIME, instant_time)]
    if schema_json is not None:
        header.append((HeaderKey.SCHEMA, schema_json))
    return encode_block(BlockType.DELETE, header, encode_delete_content(records))


def rollback_block(instant_time: str, target_instant_time: str) -> bytes:
    """A COMMAND block rolling back the blocks written by ``target_instant_time``."""
    header = [
        (HeaderKey.INSTANT_TIME, instant_time),
        (HeaderKey.TARGET_INSTANT_TIME, target_instant_time),
        (HeaderKey.COMMAND_BLOCK_TYPE, str(int(CommandType.ROLLBACK))),
    ]
    return encode_block(BlockType.COMMAND, header, b"")


def append_blocks(storage: Storage, path: str, blocks: Sequence[bytes]) -> str:
    """Append encoded blocks to the log file at ``path``; returns the path written.

    On the local filesystem the blocks are appended in place (creating the file). Object stores cannot append,
    so there (as Hudi does) a file that already exists is left alone and the blocks go to the next log version
    of the same file group.
    """
    data = b"".join(blocks)
    if storage.is_local:
        with storage.open_append(path) as out:
            out.write(data)
        return path
    target = path
    while storage.exists(target):
        name = LogFileName.parse(posixpath.basename(target))
        nxt = LogFileName(name.file_id, name.instant, name.version + 1, name.write_token, name.extension, name.cdc)
        target = posixpath.join(posixpath.dirname(target), nxt.name)
    storage.write_bytes(target, data, overwrite=False)
    return target
