"""HFile v3 format constants and primitive encodings, as Apache Hudi and HBase 2.4 write them.

Everything the reader and the writer share lives here: block magics, header and trailer sizes, file-info key
names, the two varint flavours (Hadoop ``WritableUtils`` VLong and protobuf base-128), the minimal protobuf codec
for the trailer and file-info messages, and the KeyValue key layout.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

# -- blocks ----------------------------------------------------------------------------------------------
MAGIC_DATA = b"DATABLK*"
MAGIC_ENCODED_DATA = b"DATABLKE"
MAGIC_LEAF_INDEX = b"IDXLEAF2"
MAGIC_BLOOM_CHUNK = b"BLMFBLK2"
MAGIC_META = b"METABLKc"
MAGIC_INTERMEDIATE_INDEX = b"IDXINTE2"
MAGIC_ROOT_INDEX = b"IDXROOT2"
MAGIC_FILE_INFO = b"FILEINF2"
MAGIC_GENERAL_BLOOM_META = b"BLMFMET2"
MAGIC_DELETE_FAMILY_BLOOM_META = b"DFBLMET2"
MAGIC_TRAILER = b'TRABLK"$'
MAGIC_INDEX_V1 = b"IDXBLK)+"

BLOCK_HEADER_SIZE = 33  # magic 8, onDiskSizeWithoutHeader 4, uncompressedSize 4, prevOffset 8, csType 1, bpc 4, dataSize 4
HEADER_STRUCT = struct.Struct(">8siiqBii")
TRAILER_SIZE = 4096
MAJOR_VERSION = 3
HUDI_MINOR_VERSION = 0

CHECKSUM_NULL = 0
CHECKSUM_CRC32 = 1
CHECKSUM_CRC32C = 2
BYTES_PER_CHECKSUM = 16384
CHECKSUM_SIZE = 4

# -- keys ------------------------------------------------------------------------------------------------
LATEST_TIMESTAMP = 0x7FFFFFFFFFFFFFFF
KEY_TYPE_PUT = 4
KEY_SUFFIX = b"\x00" + struct.pack(">qB", LATEST_TIMESTAMP, KEY_TYPE_PUT)  # family len 0, ts, type
KEY_EXTRA = 2 + len(KEY_SUFFIX)  # keyLength = rowLength + 12
CELL_OVERHEAD = 8 + KEY_EXTRA + 1  # klen, vlen, key framing, 1 MVCC byte: 21 bytes besides row and value
HUDI_COMPARATOR = "org.apache.hudi.io.storage.HoodieHBaseKVComparator"
MAX_ROW_LENGTH = 32767  # the row length is a Java short: no key (record key, partition path) may be longer

# -- file info keys --------------------------------------------------------------------------------------
FI_LAST_KEY = "hfile.LASTKEY"
FI_AVG_KEY_LEN = "hfile.AVG_KEY_LEN"
FI_AVG_VALUE_LEN = "hfile.AVG_VALUE_LEN"
FI_CREATE_TIME = "hfile.CREATE_TIME_TS"
FI_MAX_MVCC_TS = "MAX_MEMSTORE_TS_KEY"
FI_KEY_VALUE_VERSION = "KEY_VALUE_VERSION"
FI_MAX_TAGS_LEN = "hfile.MAX_TAGS_LEN"
FI_DATA_BLOCK_ENCODING = "DATA_BLOCK_ENCODING"
# Hudi's own entries (HoodieAvroHFileWriter / HoodieHFileDataBlock)
FI_SCHEMA = "schema"
FI_MIN_RECORD_KEY = "minRecordKey"
FI_MAX_RECORD_KEY = "maxRecordKey"
FI_BLOOM_FILTER_TYPE = "bloomFilterTypeCode"
META_BLOOM_FILTER = "bloomFilter"

KEY_VALUE_VERSION_WITH_MVCC = 1


# -- Hadoop WritableUtils VLong --------------------------------------------------------------------------
def hadoop_vint_size(first: int) -> int:
    """Total encoded size of a Hadoop vint from its first byte (unsigned 0..255)."""
    b = first - 256 if first > 127 else first
    if b >= -112:
        return 1
    return (-119 - b) if b < -120 else (-111 - b)


def decode_hadoop_vint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Decode the Hadoop vint at ``pos``; returns (value, size)."""
    first = buf[pos]
    size = hadoop_vint_size(first)
    if size == 1:
        return (first - 256 if first > 127 else first), 1
    v = int.from_bytes(buf[pos + 1 : pos + size], "big")
    b = first - 256
    return (~v if b < -120 else v), size


def encode_hadoop_vint(i: int) -> bytes:
    if -112 <= i <= 127:
        return struct.pack(">b", i)
    ln = -112
    if i < 0:
        i = ~i
        ln = -120
    t = i
    while t:
        t >>= 8
        ln -= 1
    n = -(ln + 120) if ln < -120 else -(ln + 112)
    return struct.pack(">b", ln) + i.to_bytes(n, "big")


# -- protobuf --------------------------------------------------------------------------------------------
def encode_pb_varint(v: int) -> bytes:
    if v < 0:
        v &= (1 << 64) - 1  # proto uint64/int64 negative values are 10-byte varints
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def decode_pb_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Decode a protobuf varint at ``pos``; returns (value, new_pos). Raises ValueError when truncated."""
    result = 0
    shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("truncated or overlong protobuf varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def parse_pb_fields(buf: bytes | memoryview) -> list[tuple[int, int | bytes]]:
    """Parse a protobuf message into (field number, value) pairs: varints as int, length-delimited as bytes."""
    fields: list[tuple[int, int | bytes]] = []
    pos = 0
    n = len(buf)
    while pos < n:
        tag, pos = decode_pb_varint(buf, pos)
        num, wire = tag >> 3, tag & 7
        if wire == 0:
            v, pos = decode_pb_varint(buf, pos)
            fields.append((num, v))
        elif wire == 2:
            ln, pos = decode_pb_varint(buf, pos)
            if pos + ln > n:
                raise ValueError(f"protobuf field {num} runs past the end of the message")
            fields.append((num, bytes(buf[pos : pos + ln])))
            pos += ln
        elif wire == 1:
            fields.append((num, int.from_bytes(buf[pos : pos + 8], "little")))
            pos += 8
        elif wire == 5:
            fields.append((num, int.from_bytes(buf[pos : pos + 4], "little")))
            pos += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire} for field {num}")
    return fields


def pb_varint_field(num: int, v: int) -> bytes:
    return encode_pb_varint(num << 3) + encode_pb_varint(v)


def pb_bytes_field(num: int, v: bytes) -> bytes:
    return encode_pb_varint((num << 3) | 2) + encode_pb_varint(len(v)) + v


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


# -- trailer ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Trailer:
    """The fixed 4096-byte trailer (``TrailerProto`` plus version)."""

    file_info_offset: int = 0
    load_on_open_data_offset: int = 0
    uncompressed_data_index_size: int = 0
    total_uncompressed_bytes: int | None = None
    data_index_count: int = 0
    meta_index_count: int = 0
    entry_count: int = 0
    num_data_index_levels: int = 1
    first_data_block_offset: int = 0
    last_data_block_offset: int = 0
    comparator_class_name: str = HUDI_COMPARATOR
    compression_codec: int = 2
    encryption_key: bytes | None = None
    major_version: int = MAJOR_VERSION
    minor_version: int = HUDI_MINOR_VERSION

    def encode(self) -> bytes:
        m = bytearray()
        m += pb_varint_field(1, self.file_info_offset)
        m += pb_varint_field(2, self.load_on_open_data_offset)
        m += pb_varint_field(3, self.uncompressed_data_index_size)
        if self.total_uncompressed_bytes is not None:
            m += pb_varint_field(4, self.total_uncompressed_bytes)
        m += pb_varint_field(5, self.data_index_count)
        m += pb_varint_field(6, self.meta_index_count)
        m += pb_varint_field(7, self.entry_count)
        m += pb_varint_field(8, self.num_data_index_levels)
        m += pb_varint_field(9, self.first_data_block_offset)
        m += pb_varint_field(10, self.last_data_block_offset)
        m += pb_bytes_field(11, self.comparator_class_name.encode())
        m += pb_varint_field(12, self.compression_codec)
        if self.encryption_key is not None:
            m += pb_bytes_field(13, self.encryption_key)
        body = MAGIC_TRAILER + encode_pb_varint(len(m)) + bytes(m)
        if len(body) > TRAILER_SIZE - 4:
            raise ValueError("trailer does not fit in 4096 bytes")
        version = (self.minor_version << 24) | self.major_version
        return body + b"\x00" * (TRAILER_SIZE - 4 - len(body)) + struct.pack(">i", version)

    @staticmethod
    def decode(buf: bytes) -> Trailer:
        """Decode the last 4096 bytes of a file. Raises ValueError on a malformed trailer."""
        if len(buf) != TRAILER_SIZE:
            raise ValueError(f"trailer must be {TRAILER_SIZE} bytes, got {len(buf)}")
        if buf[:8] != MAGIC_TRAILER:
            raise ValueError(f"bad trailer magic {buf[:8]!r}")
        minor = buf[TRAILER_SIZE - 4]
        major = int.from_bytes(buf[TRAILER_SIZE - 3 :], "big")
        if major != MAJOR_VERSION:
            raise ValueError(f"HFile major version {major} is not supported (only 3)")
        ln, pos = decode_pb_varint(buf, 8)
        if pos + ln > TRAILER_SIZE - 4:
            raise ValueError("trailer protobuf runs past the trailer")
        kw: dict[str, object] = {}
        names = {
            1: "file_info_offset",
            2: "load_on_open_data_offset",
            3: "uncompressed_data_index_size",
            4: "total_uncompressed_bytes",
            5: "data_index_count",
            6: "meta_index_count",
            7: "entry_count",
            8: "num_data_index_levels",
            9: "first_data_block_offset",
            10: "last_data_block_offset",
        }
        for num, v in parse_pb_fields(buf[pos : pos + ln]):
            if num in names and isinstance(v, int):
                kw[names[num]] = _signed64(v) if num in (9, 10) else v
            elif num == 11 and isinstance(v, bytes):
                kw["comparator_class_name"] = v.decode("utf-8", "replace")
            elif num == 12 and isinstance(v, int):
                kw["compression_codec"] = v
            elif num == 13 and isinstance(v, bytes):
                kw["encryption_key"] = v
        kw.setdefault("compression_codec", 2)
        kw.setdefault("num_data_index_levels", 1)
        kw.setdefault("comparator_class_name", "")
        return Trailer(major_version=major, minor_version=minor, **kw)  # type: ignore[arg-type]


# -- file info -------------------------------------------------------------------------------------------
FILE_INFO_MAGIC = b"PBUF"


def encode_file_info(entries: list[tuple[str, bytes]]) -> bytes:
    msg = b"".join(
        pb_bytes_field(1, pb_bytes_field(1, k.encode()) + pb_bytes_field(2, v)) for k, v in entries
    )
    return FILE_INFO_MAGIC + encode_pb_varint(len(msg)) + msg


def decode_file_info(payload: bytes) -> dict[str, bytes]:
    if payload[:4] != FILE_INFO_MAGIC:
        raise ValueError(f"file info block does not start with PBUF (got {payload[:4]!r})")
    ln, pos = decode_pb_varint(payload, 4)
    if pos + ln > len(payload):
        raise ValueError("file info protobuf runs past the block")
    out: dict[str, bytes] = {}
    for num, entry in parse_pb_fields(payload[pos : pos + ln]):
        if num != 1 or not isinstance(entry, bytes):
            continue
        k = v = b""
        for n2, x in parse_pb_fields(entry):
            if n2 == 1 and isinstance(x, bytes):
                k = x
            elif n2 == 2 and isinstance(x, bytes):
                v = x
        out[k.decode("utf-8", "replace")] = v
    return out


# -- KeyValue keys ---------------------------------------------------------------------------------------
def full_key(row: bytes) -> bytes:
    """The full KeyValue key Hudi writes for a row: short rowLength, row, empty family, LATEST ts, Put."""
    return struct.pack(">H", len(row)) + row + KEY_SUFFIX


def row_of_key(key: bytes) -> bytes:
    """The row ("key content") of a KeyValue key, full (HBase, new Hudi) or short (old Hudi)."""
    if len(key) < 2:
        raise ValueError("KeyValue key shorter than its row length field")
    (n,) = struct.unpack_from(">H", key, 0)
    if 2 + n > len(key):
        raise ValueError(f"KeyValue key row length {n} exceeds key length {len(key)}")
    return key[2 : 2 + n]


@dataclass(frozen=True)
class IndexEntry:
    """One entry of a block index: where a block is, and its first (possibly shortened) key's row."""

    offset: int
    size: int  # on-disk size including the 33-byte header
    key: bytes = field(repr=False)
