"""Avro helpers on fastavro: Hudi's model schemas, object container files and schemaless datums.

Hudi's timeline files (commit metadata, clean/rollback plans, ...) are Avro *object container files* holding
one record. Java writes them with ``DataFileWriter`` and no codec: magic ``Obj\\x01``, a metadata map holding
only ``avro.schema`` (the compiled schema's JSON, where every string type carries
``"avro.java.string":"String"``), a 16-byte sync marker, then one block (record count, byte size, datums,
sync marker). :func:`write_container` reproduces that layout exactly, so what pyhudi writes differs from what
Hudi writes only in the random sync marker.

The schemas ship as ``pyhudi/avro/<Name>.avsc`` (namespace ``org.apache.hudi.avro.model``, the Hudi 1.1
versions); each file is self-contained.
"""

from __future__ import annotations

import io
import json
import os
import struct
from collections.abc import Iterator, Mapping
from functools import cache
from importlib import resources
from typing import Any

import fastavro
from fastavro.types import Schema

from pyhudi.errors import CorruptFileError, PyHudiError

AVRO_MAGIC = b"Obj\x01"
NAMESPACE = "org.apache.hudi.avro.model"
SYNC_SIZE = 16

# Schemas shipped in pyhudi/avro (file stem == record name).
SCHEMA_NAMES = (
    "HoodieCommitMetadata",
    "HoodieReplaceCommitMetadata",
    "HoodieRequestedReplaceMetadata",
    "HoodieCompactionPlan",
    "HoodieRollbackMetadata",
    "HoodieRollbackPlan",
    "HoodieCleanMetadata",
    "HoodieCleanerPlan",
    "HoodieIndexPlan",
    "HoodieIndexCommitMetadata",
    "HoodieLSMTimelineInstant",
    "HoodieSavepointMetadata",
)


# -- schemas ------------------------------------------------------------------------------------------------
@cache
def schema_json(name: str) -> str:
    """The text of ``pyhudi/avro/<name>.avsc``."""
    try:
        return (resources.files("pyhudi") / "avro" / f"{name}.avsc").read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise PyHudiError(f"no Avro schema named {name!r} in pyhudi/avro") from e


def schema_dict(name: str) -> dict[str, Any]:
    """A fresh (mutable) JSON object of the named schema."""
    parsed: dict[str, Any] = json.loads(schema_json(name))
    return parsed


@cache
def load_schema(name: str) -> Schema:
    """The fastavro-parsed schema ``org.apache.hudi.avro.model.<name>``."""
    return fastavro.parse_schema(schema_dict(name), named_schemas={})


def java_schema_json(schema: Mapping[str, Any] | str) -> str:
    """The schema's JSON as Hudi's compiled Java classes print it (``Schema.toString()``).

    Avro's Java code generator (``stringType=String``) adds ``"avro.java.string":"String"`` to every string type
    and to every map; Jackson writes compact JSON in declaration order.
    """
    obj = json.loads(schema) if isinstance(schema, str) else schema
    return json.dumps(_javaize(obj), separators=(",", ":"), ensure_ascii=False)


_JAVA_STRING = {"avro.java.string": "String"}


def _javaize(node: Any) -> Any:
    if isinstance(node, str):
        return {"type": "string", **_JAVA_STRING} if node == "string" else node
    if isinstance(node, list):
        return [_javaize(n) for n in node]
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    if kind == "record" or kind == "error":
        out = {k: v for k, v in node.items() if k != "fields"}
        out["fields"] = [_javaize_field(f) for f in node["fields"]]
        # Java prints record props after the fields; keep the usual keys first.
        ordered = {k: out[k] for k in ("type", "name", "namespace", "doc", "fields") if k in out}
        ordered.update({k: v for k, v in out.items() if k not in ordered})
        return ordered
    if kind == "map":
        out = {"type": "map", "values": _javaize(node["values"]), **_JAVA_STRING}
        out.update({k: v for k, v in node.items() if k not in ("type", "values", "avro.java.string")})
        return out
    if kind == "array":
        out = {"type": "array", "items": _javaize(node["items"])}
        out.update({k: v for k, v in node.items() if k not in ("type", "items")})
        return out
    if kind == "string":
        out = {"type": "string", **_JAVA_STRING}
        out.update({k: v for k, v in node.items() if k not in ("type", "avro.java.string")})
        return out
    if isinstance(kind, (dict, list)):
        return {**node, "type": _javaize(kind)}
    return node


def _javaize_field(field: Mapping[str, Any]) -> dict[str, Any]:
    out = {"name": field["name"], "type": _javaize(field["type"])}
    out.update({k: v for k, v in field.items() if k not in ("name", "type")})
    return out


# -- binary datums ------------------------------------------------------------------------------------------
def _as_schema(schema: Schema | str) -> Schema:
    return load_schema(schema) if isinstance(schema, str) else schema


def encode_datum(record: Mapping[str, Any], schema: Schema | str) -> bytes:
    """The Avro binary encoding of ``record`` (no header). ``schema`` is parsed or a shipped schema's name."""
    buf = io.BytesIO()
    try:
        fastavro.schemaless_writer(buf, _as_schema(schema), dict(record))
    except (ValueError, TypeError, KeyError) as e:
        raise PyHudiError(f"record does not match Avro schema: {e}") from e
    return buf.getvalue()


def decode_datum(
    data: bytes, writer_schema: Schema | str, reader_schema: Schema | str | None = None
) -> dict[str, Any]:
    """Decode one Avro binary datum (no header)."""
    try:
        rec = fastavro.schemaless_reader(
            io.BytesIO(data),
            _as_schema(writer_schema),
            _as_schema(reader_schema) if reader_schema is not None else None,
        )
    except (EOFError, ValueError, IndexError, UnicodeDecodeError) as e:
        raise CorruptFileError("<avro datum>", f"cannot decode Avro datum: {e}") from e
    if not isinstance(rec, dict):
        raise CorruptFileError("<avro datum>", "Avro datum is not a record")
    return rec


class BinaryReader:
    """Sequential reads of Avro binary encoding from ``data[pos:end]`` (hand-decoded small structures)."""

    __slots__ = ("data", "end", "pos")

    def __init__(self, data: bytes, pos: int = 0, end: int | None = None) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise ValueError(f"{n} bytes at {self.pos} run past the end {self.end}")
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def long(self) -> int:
        shift = 0
        acc = 0
        while True:
            if self.pos >= self.end:
                raise ValueError(f"varint at {self.pos} runs past the end {self.end}")
            b = self.data[self.pos]
            self.pos += 1
            acc |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 63:
                raise ValueError(f"varint longer than 10 bytes at {self.pos}")
        return (acc >> 1) ^ -(acc & 1)

    def boolean(self) -> bool:
        return self._take(1) != b"\x00"

    def float32(self) -> float:
        return float(struct.unpack("<f", self._take(4))[0])

    def float64(self) -> float:
        return float(struct.unpack("<d", self._take(8))[0])

    def bytes_(self) -> bytes:
        return self._take(self.long())

    def string(self) -> str:
        return self.bytes_().decode("utf-8")

    def optional_string(self) -> str | None:
        """A ``["null", "string"]`` union."""
        branch = self.long()
        if branch == 0:
            return None
        if branch != 1:
            raise ValueError(f"union branch {branch} of [null, string] does not exist")
        return self.string()

    def array_items(self) -> Iterator[int]:
        """Yields once per item of an array (or map): the caller reads the item each time."""
        i = 0
        while True:
            count = self.long()
            if count == 0:
                return
            if count < 0:
                count = -count
                self.long()  # the block's byte size
            for _ in range(count):
                yield i
                i += 1


# -- object container files ---------------------------------------------------------------------------------
def zigzag_long(n: int) -> bytes:
    """Avro's zig-zag varint encoding of a long."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z & ~0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _avro_bytes(b: bytes) -> bytes:
    return zigzag_long(len(b)) + b


def write_container(
    records: list[Mapping[str, Any]] | Mapping[str, Any],
    schema_name: str,
    *,
    sync_marker: bytes | None = None,
) -> bytes:
    """An Avro object container file holding ``records``, laid out as Hudi's Java writer lays it out."""
    recs = [records] if isinstance(records, Mapping) else list(records)
    sync = sync_marker if sync_marker is not None else os.urandom(SYNC_SIZE)
    if len(sync) != SYNC_SIZE:
        raise ValueError("sync marker must be 16 bytes")
    parsed = load_schema(schema_name)
    header = bytearray(AVRO_MAGIC)
    header += zigzag_long(1)  # metadata map: one entry
    header += _avro_bytes(b"avro.schema")
    header += _avro_bytes(java_schema_json(schema_json(schema_name)).encode("utf-8"))
    header += zigzag_long(0)  # end of map
    header += sync
    if not recs:
        return bytes(header)
    body = b"".join(encode_datum(r, parsed) for r in recs)
    return bytes(header) + zigzag_long(len(recs)) + zigzag_long(len(body)) + body + sync


def iter_container(
    data: bytes, path: str = "<avro>", reader_schema: str | None = None
) -> Iterator[dict[str, Any]]:
    """The records of an Avro object container file (any codec fastavro supports)."""
    if not data.startswith(AVRO_MAGIC):
        raise CorruptFileError(path, "not an Avro object container file (bad magic)", 0)
    try:
        reader = fastavro.reader(
            io.BytesIO(data), reader_schema=load_schema(reader_schema) if reader_schema else None
        )
        for rec in reader:
            if not isinstance(rec, dict):
                raise CorruptFileError(path, "Avro container holds a non-record value")
            yield rec
    except CorruptFileError:
        raise
    except (EOFError, ValueError, IndexError, UnicodeDecodeError, fastavro.read.SchemaResolutionError) as e:
        raise CorruptFileError(path, f"cannot read Avro container: {e}") from e


def read_container(
    data: bytes, path: str = "<avro>", reader_schema: str | None = None
) -> list[dict[str, Any]]:
    return list(iter_container(data, path, reader_schema))


def read_single(data: bytes, path: str = "<avro>", reader_schema: str | None = None) -> dict[str, Any]:
    """The one record of a Hudi timeline Avro file."""
    recs = read_container(data, path, reader_schema)
    if len(recs) != 1:
        raise CorruptFileError(path, f"expected one Avro record, found {len(recs)}")
    return recs[0]


def container_schema_json(data: bytes, path: str = "<avro>") -> str:
    """The writer schema JSON stored in a container's header."""
    if not data.startswith(AVRO_MAGIC):
        raise CorruptFileError(path, "not an Avro object container file (bad magic)", 0)
    try:
        reader = fastavro.reader(io.BytesIO(data))
    except (EOFError, ValueError) as e:
        raise CorruptFileError(path, f"cannot read Avro header: {e}") from e
    raw = reader.metadata.get("avro.schema")
    if raw is None:
        raise CorruptFileError(path, "Avro header has no avro.schema")
    return str(raw)


def container_schema_name(data: bytes, path: str = "<avro>") -> str:
    """The (unqualified) record name of the container's writer schema, e.g. ``HoodieCommitMetadata``."""
    name = json.loads(container_schema_json(data, path)).get("name", "")
    return str(name).rsplit(".", 1)[-1]
