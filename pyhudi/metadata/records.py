"""Metadata-table records (``HoodieMetadataRecord``, Hudi 1.1): encoding, decoding and merging.

Every metadata-table cell (base HFile or HFile log block) is: key = the record key, value = the Avro binary datum
of the record written with Hudi's *writer schema*, which is ``pyhudi/avro/HoodieMetadata.avsc`` with the five
``_hoodie_*`` meta fields (nullable strings) prepended, and with ``key`` blanked to ``""``. Compacted base files
fill ``_hoodie_file_name`` with the base file's own name; log blocks leave every meta field null. The writer
schema's JSON (Java ``Schema.toString()``) is what Hudi puts into the log-block SCHEMA header and the HFile file
info ``schema``: :data:`WRITER_SCHEMA_JSON` reproduces it byte for byte.

Record types (``type``): 1 partition list (key ``__all_partitions__``), 2 files of one partition (key = the
partition path, ``.`` for a non-partitioned table), 3 column stats, 4 bloom filter, 5 record index (key = the
data record key), 6 partition stats, 7 secondary index (key = ``<secondaryKey>$<recordKey>``).

Merging (``HoodieMetadataPayload.preCombine``; *new* is the later record):

- a deleted record (delete-block entry) wins over anything before it; a record after a delete replaces it;
- types 1 and 2: union of the file maps; for a name in both: new ``isDeleted`` -> the name is dropped (or kept
  as a tombstone if the old one was a tombstone too), else ``size = max(old, new)``, ``isDeleted = False``;
  names only in new (tombstones included) are kept. Readers ignore tombstoned names.
- type 5 (record index), 7 (secondary index): the new record replaces the old; a secondary-index record with
  ``isDeleted`` counts as absent.
- types 3 and 6 (column and partition statistics, ``mergeColumnStatsRecords``): a tombstone (``isDeleted``) on
  either side, or a new record with ``isTightBound``, -> the new record; else min of mins, max of maxes, counts and
  sizes summed. A column-statistics tombstone counts as absent.
- other types: the new record replaces the old.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import fastavro
from fastavro.types import Schema

from pyhudi.errors import CorruptFileError, PyHudiError
from pyhudi.io import avro

# -- record types and keys ------------------------------------------------------------------------------------
TYPE_PARTITION_LIST = 1
TYPE_FILE_LIST = 2
TYPE_COLUMN_STATS = 3
TYPE_BLOOM_FILTER = 4
TYPE_RECORD_INDEX = 5
TYPE_PARTITION_STATS = 6
TYPE_SECONDARY_INDEX = 7

ALL_PARTITIONS_KEY = "__all_partitions__"
#: The files-partition key (and partition name) of a non-partitioned table's only partition.
NON_PARTITIONED_NAME = "."

FILE_ID_ENCODING_UUID = 0
FILE_ID_ENCODING_RAW = 1
MISSING_FILE_INDEX = -1

META_FIELDS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)


# -- schemas --------------------------------------------------------------------------------------------------
def _meta_field(name: str) -> dict[str, Any]:
    return {"name": name, "type": ["null", "string"], "doc": "", "default": None}


@cache
def writer_schema_dict() -> dict[str, Any]:
    """HoodieMetadataRecord with the meta fields prepended, as Hudi writes metadata-table records."""
    d = avro.schema_dict("HoodieMetadata")
    d["fields"] = [_meta_field(n) for n in META_FIELDS] + d["fields"]
    return d


@cache
def writer_schema_json() -> str:
    """The writer schema as Java prints it (the SCHEMA header / ``schema`` file-info value)."""
    java = avro.java_schema_json(avro.schema_dict("HoodieMetadata"))
    marker = '"fields":['
    i = java.index(marker) + len(marker)
    meta = ",".join(json.dumps(_meta_field(n), separators=(",", ":")) for n in META_FIELDS)
    return java[:i] + meta + "," + java[i:]


@cache
def writer_schema() -> Schema:
    return fastavro.parse_schema(writer_schema_dict(), named_schemas={})


@cache
def _parsed(schema_json: str) -> Schema:
    return fastavro.parse_schema(json.loads(schema_json), named_schemas={})


def schema_for(schema_json: str | None) -> Schema:
    """The parsed writer schema named by a file/block (None or the current one -> :func:`writer_schema`)."""
    if schema_json is None or schema_json == writer_schema_json():
        return writer_schema()
    return _parsed(schema_json)


# -- the record -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RecordIndexInfo:
    partition: str
    file_id: str
    instant_time_ms: int | None
    file_id_encoding: int = FILE_ID_ENCODING_UUID
    position: int | None = None


@dataclass(frozen=True)
class MetadataRecord:
    """A decoded metadata record. ``fields`` holds the full Avro record (``key`` filled in)."""

    key: str
    type: int
    fields: Mapping[str, Any]
    deleted: bool = False  # a delete marker (delete-block entry or empty HFile value)

    @property
    def files(self) -> dict[str, tuple[int, bool]]:
        """``filesystemMetadata`` as name -> (size, isDeleted) (types 1 and 2)."""
        fm = self.fields.get("filesystemMetadata") or {}
        return {n: (int(i["size"]), bool(i["isDeleted"])) for n, i in fm.items()}

    @property
    def live_files(self) -> dict[str, int]:
        return {n: s for n, (s, d) in self.files.items() if not d}

    @property
    def record_index(self) -> RecordIndexInfo | None:
        ri = self.fields.get("recordIndexMetadata")
        return decode_record_index_info(ri) if ri is not None else None

    @property
    def is_absent(self) -> bool:
        """True if readers treat the record as not there (delete marker or deleted secondary-index entry)."""
        if self.deleted:
            return True
        if self.type == TYPE_SECONDARY_INDEX:
            si = self.fields.get("SecondaryIndexMetadata")
            return si is not None and bool(si.get("isDeleted"))
        if self.type in (TYPE_COLUMN_STATS, TYPE_PARTITION_STATS):
            cs = self.fields.get("ColumnStatsMetadata")
            return cs is not None and bool(cs.get("isDeleted"))
        return False


def delete_marker(key: str) -> MetadataRecord:
    return MetadataRecord(key, 0, {}, deleted=True)


def _blank(**fields: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {n: None for n in META_FIELDS}
    rec.update(
        key="",
        type=0,
        filesystemMetadata=None,
        BloomFilterMetadata=None,
        ColumnStatsMetadata=None,
        recordIndexMetadata=None,
        SecondaryIndexMetadata=None,
    )
    rec.update(fields)
    return rec


# -- encode / decode ------------------------------------------------------------------------------------------
def encode_value(record: MetadataRecord | Mapping[str, Any], schema: Schema | None = None) -> bytes:
    """The HFile cell value of ``record``: its Avro datum with ``key`` blanked."""
    fields = record.fields if isinstance(record, MetadataRecord) else record
    if isinstance(record, MetadataRecord) and record.deleted:
        raise PyHudiError(f"metadata record {record.key!r} is a delete marker; write it to a delete block")
    rec = _blank(**{k: v for k, v in fields.items() if k in writer_schema_dict_names()})
    rec["key"] = ""
    return avro.encode_datum(rec, schema if schema is not None else writer_schema())


@cache
def writer_schema_dict_names() -> frozenset[str]:
    return frozenset(f["name"] for f in writer_schema_dict()["fields"])


def decode_value(key: str | bytes, value: bytes, schema_json: str | None = None) -> MetadataRecord:
    """Decode one cell (an empty value is a delete marker, as older Hudi wrote them).

    Unions of several records (column-stats wrappers) decode to ``(record name, record)`` tuples, which
    :func:`encode_value` writes back to the same branch.
    """
    k = key.decode("utf-8") if isinstance(key, bytes) else key
    if not value:
        return delete_marker(k)
    ws = schema_for(schema_json)
    rs = None if ws is writer_schema() else writer_schema()
    try:
        rec = fastavro.schemaless_reader(
            io.BytesIO(value), ws, rs, return_record_name=True, return_record_name_override=True
        )
    except (EOFError, ValueError, IndexError, UnicodeDecodeError) as e:
        raise CorruptFileError("<metadata record>", f"cannot decode the value of key {k!r}: {e}") from e
    if not isinstance(rec, dict):
        raise CorruptFileError("<metadata record>", f"value of key {k!r} is not a record")
    rec["key"] = k
    return MetadataRecord(k, int(rec["type"]), rec)


def encode_cells(records: Iterable[MetadataRecord]) -> list[tuple[str, bytes]]:
    """(key, value) cells sorted by key, ready for an HFile; delete markers are not allowed."""
    out = [(r.key, encode_value(r)) for r in records]
    out.sort(key=lambda kv: kv[0].encode("utf-8"))
    return out


# -- builders -------------------------------------------------------------------------------------------------
def _file_map(files: Mapping[str, int | tuple[int, bool]]) -> dict[str, dict[str, Any]]:
    out = {}
    for name, v in files.items():
        size, deleted = (v, False) if isinstance(v, int) else (int(v[0]), bool(v[1]))
        out[name] = {"size": int(size), "isDeleted": deleted}
    return out


def partition_list_record(partitions: Iterable[str], *, deleted: Iterable[str] = ()) -> MetadataRecord:
    """The ``__all_partitions__`` record (``.`` for the non-partitioned table's partition)."""
    m: dict[str, int | tuple[int, bool]] = {p or NON_PARTITIONED_NAME: 0 for p in partitions}
    m.update({p or NON_PARTITIONED_NAME: (0, True) for p in deleted})
    fields = _blank(key=ALL_PARTITIONS_KEY, type=TYPE_PARTITION_LIST, filesystemMetadata=_file_map(m))
    return MetadataRecord(ALL_PARTITIONS_KEY, TYPE_PARTITION_LIST, fields)


def files_record(partition: str, files: Mapping[str, int | tuple[int, bool]]) -> MetadataRecord:
    """A files-partition record: file name -> size (added/updated) or (size, isDeleted)."""
    key = partition or NON_PARTITIONED_NAME
    fields = _blank(key=key, type=TYPE_FILE_LIST, filesystemMetadata=_file_map(files))
    return MetadataRecord(key, TYPE_FILE_LIST, fields)


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


_INT_MAX = 2**31 - 1


def _uuid_and_index(file_id: str) -> tuple[uuid.UUID | None, int]:
    """(UUID, file index or MISSING_FILE_INDEX) of a file id the UUID encoding gives back unchanged, else (None, 0)."""
    head, tail = file_id[:36], file_id[36:]
    if tail:
        if not (tail[0] == "-" and tail[1:].isascii() and tail[1:].isdigit()):
            return None, 0
        index = int(tail[1:])
        if index > _INT_MAX or tail[1:] != str(index):
            return None, 0
    else:
        index = MISSING_FILE_INDEX
    try:
        u = uuid.UUID(head)
    except ValueError:
        return None, 0
    return (u, index) if str(u) == head else (None, 0)


def encode_file_id(file_id: str) -> dict[str, Any]:
    """The fileId part of HoodieRecordIndexInfo: UUID bits + index (encoding 0) when those decode back to exactly
    ``file_id`` (a lower-case canonical UUID, optionally ``-<index>`` in plain decimal within an int), else the raw
    id (encoding 1). Python's ``int`` and ``uuid.UUID`` accept more (``01``, ``+1``, ``1_0``, other scripts'
    digits, upper case, a doubled dash) and would have named another file group."""
    u, index = _uuid_and_index(file_id)
    if u is None:
        return {
            "fileIdHighBits": None,
            "fileIdLowBits": None,
            "fileIndex": None,
            "fileId": file_id,
            "fileIdEncoding": FILE_ID_ENCODING_RAW,
        }
    return {
        "fileIdHighBits": _signed64(u.int >> 64),
        "fileIdLowBits": _signed64(u.int & ((1 << 64) - 1)),
        "fileIndex": index,
        "fileId": "",
        "fileIdEncoding": FILE_ID_ENCODING_UUID,
    }


def decode_record_index_info(ri: Mapping[str, Any]) -> RecordIndexInfo:
    enc = int(ri.get("fileIdEncoding") or 0)
    if enc == FILE_ID_ENCODING_UUID:
        hi, lo = ri.get("fileIdHighBits"), ri.get("fileIdLowBits")
        if hi is None or lo is None:
            raise PyHudiError("record-index entry with UUID encoding has no fileId bits")
        u = uuid.UUID(int=((int(hi) & ((1 << 64) - 1)) << 64) | (int(lo) & ((1 << 64) - 1)))
        idx = ri.get("fileIndex")
        file_id = str(u) if idx is None or idx == MISSING_FILE_INDEX else f"{u}-{idx}"
    else:
        file_id = ri.get("fileId") or ""
    return RecordIndexInfo(
        ri.get("partitionName") or "", file_id, ri.get("instantTime"), enc, ri.get("position")
    )


def record_index_record(
    record_key: str, partition: str, file_id: str, instant_time_ms: int, *, raw_file_id: bool = False
) -> MetadataRecord:
    """A record-index entry: ``record_key`` lives in ``file_id`` of ``partition`` since the given instant."""
    fid = encode_file_id(file_id) if not raw_file_id else {
        "fileIdHighBits": None, "fileIdLowBits": None, "fileIndex": None,
        "fileId": file_id, "fileIdEncoding": FILE_ID_ENCODING_RAW,
    }
    info = {"partitionName": partition, **fid, "instantTime": int(instant_time_ms), "position": None}
    info = {k: info[k] for k in (
        "partitionName", "fileIdHighBits", "fileIdLowBits", "fileIndex", "fileId", "instantTime",
        "fileIdEncoding", "position",
    )}
    fields = _blank(key=record_key, type=TYPE_RECORD_INDEX, recordIndexMetadata=info)
    return MetadataRecord(record_key, TYPE_RECORD_INDEX, fields)


# -- merging --------------------------------------------------------------------------------------------------
def _combine_files(old: MetadataRecord, new: MetadataRecord) -> MetadataRecord:
    combined: dict[str, dict[str, Any]] = {
        n: dict(i) for n, i in (old.fields.get("filesystemMetadata") or {}).items()
    }
    for name, info in (new.fields.get("filesystemMetadata") or {}).items():
        prev = combined.get(name)
        if prev is None:
            combined[name] = dict(info)
        elif info["isDeleted"]:
            if prev["isDeleted"]:
                combined[name] = dict(info)
            else:
                del combined[name]
        else:
            combined[name] = {"size": max(int(info["size"]), int(prev["size"])), "isDeleted": False}
    fields = dict(new.fields)
    fields["filesystemMetadata"] = combined
    return MetadataRecord(new.key, new.type, fields)


DECIMAL_TYPE_ORDINAL = 10  # ValueType.DECIMAL: BytesWrapper of the unscaled value


def stats_sort_key(raw: Any, ordinal: int) -> Any:
    """A column-statistics min/max (its wrapper's ``value``) as a value that orders like the column's values."""
    if ordinal == DECIMAL_TYPE_ORDINAL and isinstance(raw, bytes):
        return int.from_bytes(raw, "big", signed=True)
    return raw


def _combine_column_stats(old: MetadataRecord, new: MetadataRecord) -> MetadataRecord:
    a, b = old.fields.get("ColumnStatsMetadata"), new.fields.get("ColumnStatsMetadata")
    if not a or not b or a.get("isDeleted") or b.get("isDeleted") or b.get("isTightBound"):
        return new
    ta, tb = a.get("valueType") or {}, b.get("valueType") or {}
    ends = {"minValue": min, "maxValue": max}
    merged = dict(b)
    for name, pick in ends.items():
        vals = [(x[name], t) for x, t in ((a, ta), (b, tb)) if x.get(name)]
        if len({(t.get("typeOrdinal"), t.get("additionalInfo")) for _, t in vals}) > 1:
            return new  # value types differ (an evolved column): the newer statistics stand
        if vals:
            ordinal = int(vals[0][1].get("typeOrdinal") or 0)
            merged[name] = pick((v for v, _ in vals), key=lambda w: stats_sort_key(w[1]["value"], ordinal))
    for n in ("valueCount", "nullCount", "totalSize", "totalUncompressedSize"):
        merged[n] = int(a.get(n) or 0) + int(b.get(n) or 0)
    if not b.get("minValue") and a.get("minValue"):
        merged["valueType"] = ta
    return MetadataRecord(new.key, new.type, {**new.fields, "ColumnStatsMetadata": merged})


def combine(old: MetadataRecord | None, new: MetadataRecord) -> MetadataRecord:
    """Merge ``new`` (later) onto ``old`` as HoodieMetadataPayload does."""
    if old is None or new.deleted or old.deleted:
        return new
    if old.type != new.type:
        raise PyHudiError(f"cannot merge metadata records of types {old.type} and {new.type} (key {new.key!r})")
    if new.type in (TYPE_PARTITION_LIST, TYPE_FILE_LIST):
        return _combine_files(old, new)
    if new.type in (TYPE_COLUMN_STATS, TYPE_PARTITION_STATS):
        return _combine_column_stats(old, new)
    return new


def partition_key(partition: str) -> str:
    """The files-partition record key of a data partition path."""
    return partition or NON_PARTITIONED_NAME


def partition_path(key: str) -> str:
    """The data partition path of a files-partition record key (``.`` -> ``""``)."""
    return "" if key == NON_PARTITIONED_NAME else key


def record_index_file_group(record_key: str, num_file_groups: int) -> int:
    """Hudi's ``mapRecordKeyToFileGroupIndex``: Java ``String.hashCode`` then ``abs(abs(h) % n)``."""
    h = 0
    for ch in _utf16_units(record_key):
        h = (31 * h + ch) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    a = abs(h)
    if a == 1 << 31:  # Math.abs(Integer.MIN_VALUE) stays negative
        a = -(1 << 31)
    r = abs(a) % num_file_groups if a >= 0 else -((-a) % num_file_groups)  # Java remainder keeps the sign
    return abs(r)


def _utf16_units(s: str) -> list[int]:
    b = s.encode("utf-16-be")
    return [int.from_bytes(b[i : i + 2], "big") for i in range(0, len(b), 2)]
