"""Avro binary datums (the records of Hudi's Avro data log blocks) decoded into Arrow tables.

Records of flat schemas -- every field a primitive (boolean, int, long, float, double, bytes, string), an enum, a
fixed, a logical type on those (decimal on bytes/fixed up to precision 38, date, timestamp-millis/-micros,
local-timestamp-*, uuid), each optionally in a two-branch union with ``null`` -- are decoded by a compiled loop
(:mod:`pyhudi.io._avro_kernels`) straight into Arrow buffers. Any other schema (nested records, arrays, maps,
wider unions) goes through fastavro, one Python dict per record, then Arrow: correct, about 20x slower.

Arrow types follow :func:`pyhudi.table.schema.avro_to_arrow` (timestamps in microseconds, UTC for
``timestamp-*``), so decoded log records line up with the base files' columns.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.errors import CorruptFileError, UnsupportedFormatError
from pyhudi.io import _avro_kernels as K

_PRIMITIVE_KIND = {
    "null": K.K_NULL,
    "boolean": K.K_BOOL,
    "int": K.K_INT,
    "long": K.K_LONG,
    "float": K.K_FLOAT,
    "double": K.K_DOUBLE,
    "bytes": K.K_BYTES,
    "string": K.K_BYTES,
}

_ERRORS = {
    K.E_TRUNCATED: "a value runs past the end of its record",
    K.E_LENGTH: "the datum does not end where its length prefix says",
    K.E_BRANCH: "a union branch that the schema does not have",
    K.E_VARINT: "a malformed varint (too long, or out of int range)",
    K.E_NEGATIVE: "a negative length",
}


@dataclass(frozen=True)
class _Field:
    name: str
    kind: int
    null_branch: int  # -1: not a union; else the branch that is null
    fixed_size: int
    arrow_type: pa.DataType
    nullable: bool
    is_string: bool = False
    decimal: bool = False
    millis: bool = False  # timestamp-millis: values times 1000
    symbols: tuple[str, ...] = ()


def _plan_field(f: dict[str, Any]) -> _Field | None:
    """How the compiled loop decodes field ``f``, or None if it cannot (nested or exotic type)."""
    t = f["type"]
    null_branch = -1
    if isinstance(t, list):
        if len(t) != 2 or "null" not in t or t[0] == t[1]:
            return None
        null_branch = t.index("null")
        t = t[1 - null_branch]
    logical = None
    if isinstance(t, dict):
        logical = t.get("logicalType")
        base = t.get("type")
        if base == "enum":
            symbols = tuple(t.get("symbols") or ())
            return _Field(f["name"], K.K_ENUM, null_branch, 0, pa.string(), null_branch >= 0, symbols=symbols)
        if base == "fixed":
            size = int(t["size"])
            if logical == "decimal":
                p, s = int(t["precision"]), int(t.get("scale", 0))
                if p > 38 or size > 16:
                    return None
                return _Field(f["name"], K.K_FIXED, null_branch, size, pa.decimal128(p, s), null_branch >= 0,
                              decimal=True)
            return None  # a plain fixed has no Arrow type in the table mapping
        if not isinstance(base, str) or base not in _PRIMITIVE_KIND:
            return None
        t = base
    if t not in _PRIMITIVE_KIND:
        return None
    kind = _PRIMITIVE_KIND[t]
    nullable = null_branch >= 0 or kind == K.K_NULL
    if logical == "decimal" and t == "bytes":
        spec = _branch(f)
        p, s = int(spec["precision"]), int(spec.get("scale", 0))
        if p > 38:
            return None
        return _Field(f["name"], kind, null_branch, 0, pa.decimal128(p, s), nullable, decimal=True)
    if logical == "date" and t == "int":
        return _Field(f["name"], kind, null_branch, 0, pa.date32(), nullable)
    if logical in ("timestamp-micros", "timestamp-millis") and t == "long":
        return _Field(f["name"], kind, null_branch, 0, pa.timestamp("us", tz="UTC"), nullable,
                      millis=logical == "timestamp-millis")
    if logical in ("local-timestamp-micros", "local-timestamp-millis") and t == "long":
        return _Field(f["name"], kind, null_branch, 0, pa.timestamp("us"), nullable,
                      millis=logical == "local-timestamp-millis")
    if logical is not None and logical not in ("uuid", "decimal"):
        return None  # time-millis/-micros and others: the table mapping has no type for them
    types = {K.K_NULL: pa.null(), K.K_BOOL: pa.bool_(), K.K_INT: pa.int32(), K.K_LONG: pa.int64(),
             K.K_FLOAT: pa.float32(), K.K_DOUBLE: pa.float64()}
    if kind == K.K_BYTES:
        return _Field(f["name"], kind, null_branch, 0, pa.string() if t == "string" else pa.binary(), nullable,
                      is_string=t == "string")
    return _Field(f["name"], kind, null_branch, 0, types[kind], nullable)


def _branch(f: dict[str, Any]) -> dict[str, Any]:
    t: Any = f["type"]
    if isinstance(t, list):
        t = next(b for b in t if b != "null")
    return t


class AvroArrowDecoder:
    """Decodes the length-prefixed Avro datums of one writer schema into Arrow (see the module docstring)."""

    def __init__(self, writer_schema: str) -> None:
        self.schema_json = writer_schema
        try:
            node = json.loads(writer_schema)
        except ValueError as e:
            raise CorruptFileError("<log block schema>", f"SCHEMA header is not JSON: {e}") from None
        if not isinstance(node, dict) or node.get("type") != "record":
            raise UnsupportedFormatError("log block records must have an Avro record schema")
        self._node = node
        plans = [_plan_field(f) for f in node["fields"]]
        self.fields: tuple[_Field, ...] | None = tuple(p for p in plans if p is not None) \
            if all(p is not None for p in plans) else None
        from pyhudi.table.schema import avro_to_arrow

        self.arrow_schema = avro_to_arrow(node) if self.fields is None else pa.schema(
            [pa.field(f.name, f.arrow_type, f.nullable) for f in self.fields])
        self._fastavro: Any = None
        if self.fields is not None:
            n = len(self.fields)
            self._kinds = np.array([f.kind for f in self.fields], np.int64)
            self._null = np.array([f.null_branch for f in self.fields], np.int64)
            self._fsize = np.array([f.fixed_size for f in self.fields], np.int64)
            fix = [-1] * n
            var = [-1] * n
            nfix = nvar = 0
            for j, f in enumerate(self.fields):
                if f.kind in (K.K_BYTES, K.K_FIXED):
                    var[j] = nvar
                    nvar += 1
                elif f.kind != K.K_NULL:
                    fix[j] = nfix
                    nfix += 1
            self._fix = np.array(fix, np.int64)
            self._var = np.array(var, np.int64)
            self._nfix, self._nvar = nfix, nvar

    @property
    def compiled(self) -> bool:
        """True when this schema decodes through the compiled loop."""
        return self.fields is not None

    def decode(self, data: bytes | memoryview, pos: int, end: int, n: int, where: str = "<avro block>") -> pa.Table:
        """The ``n`` records ``int32 length`` + datum found in ``data[pos:end]``, which they must fill exactly."""
        buf = np.frombuffer(data, np.uint8)
        if self.fields is None:
            return self._decode_generic(buf, pos, end, n, where)
        nf = len(self.fields)
        fixed = np.zeros((max(self._nfix, 1), n), np.int64)
        valid = np.zeros((max(nf, 1), n), np.uint8)
        vstart = np.zeros((max(self._nvar, 1), n), np.int64)
        vlen = np.zeros((max(self._nvar, 1), n), np.int64)
        status, bad, stop = K.decode_records(buf, pos, end, n, self._kinds, self._null, self._fsize, self._fix,
                                             self._var, fixed, valid, vstart, vlen)
        if status != K.OK:
            raise CorruptFileError(where, f"Avro record {bad}: {_ERRORS.get(status, status)}")
        if stop != end:
            raise CorruptFileError(where, f"{end - stop} bytes left after the {n} records of an Avro data block")
        cols = []
        for j, f in enumerate(self.fields):
            v = valid[j].view(np.bool_)
            cols.append(self._column(f, buf, fixed[self._fix[j]] if self._fix[j] >= 0 else None,
                                     vstart[self._var[j]] if self._var[j] >= 0 else None,
                                     vlen[self._var[j]] if self._var[j] >= 0 else None, v, n, where))
        return pa.Table.from_arrays(cols, schema=self.arrow_schema)

    # -- columns --------------------------------------------------------------------------------------------
    @staticmethod
    def _validity(valid: np.ndarray, n: int) -> tuple[pa.Buffer | None, int]:
        nulls = int(n - np.count_nonzero(valid))
        if nulls == 0:
            return None, 0
        return pa.py_buffer(np.packbits(valid, bitorder="little")), nulls

    def _column(self, f: _Field, buf: np.ndarray, fixed: np.ndarray | None, starts: np.ndarray | None,
                lens: np.ndarray | None, valid: np.ndarray, n: int, where: str) -> pa.Array:
        vbuf, nulls = self._validity(valid, n)
        k = f.kind
        if k == K.K_NULL:
            return pa.nulls(n, f.arrow_type)
        if k == K.K_BOOL:
            assert fixed is not None
            data = pa.py_buffer(np.packbits(fixed.astype(np.bool_), bitorder="little"))
            return pa.Array.from_buffers(pa.bool_(), n, [vbuf, data], null_count=nulls)
        if k in (K.K_INT, K.K_LONG):
            assert fixed is not None
            if f.millis:
                fixed = fixed * 1000
            np_type = np.int32 if k == K.K_INT else np.int64
            vals = fixed.astype(np_type)
            return pa.Array.from_buffers(f.arrow_type, n, [vbuf, pa.py_buffer(vals)], null_count=nulls)
        if k == K.K_FLOAT:
            assert fixed is not None
            vals = fixed.astype(np.uint32).view(np.float32)
            return pa.Array.from_buffers(pa.float32(), n, [vbuf, pa.py_buffer(vals)], null_count=nulls)
        if k == K.K_DOUBLE:
            assert fixed is not None
            return pa.Array.from_buffers(pa.float64(), n, [vbuf, pa.py_buffer(fixed.view(np.float64).copy())],
                                         null_count=nulls)
        if k == K.K_ENUM:
            assert fixed is not None
            idx = fixed.astype(np.int32)
            if len(idx) and valid.any() and (idx[valid].min() < 0 or idx[valid].max() >= len(f.symbols)):
                raise CorruptFileError(where, f"enum field {f.name!r} holds a symbol index out of range")
            idx = np.where(valid, idx, 0).astype(np.int32)
            dict_arr = pa.DictionaryArray.from_arrays(
                pa.Array.from_buffers(pa.int32(), n, [vbuf, pa.py_buffer(idx)], null_count=nulls),
                pa.array(list(f.symbols), pa.string()))
            return dict_arr.cast(pa.string())
        assert starts is not None and lens is not None
        if f.decimal:
            out = np.zeros((n, 16), np.uint8)
            bad = K.big_endian_to_decimal128(buf, starts, lens, valid, out)
            if bad >= 0:
                raise CorruptFileError(where, f"decimal field {f.name!r} of record {bad} is longer than 16 bytes")
            return pa.Array.from_buffers(f.arrow_type, n, [vbuf, pa.py_buffer(out)], null_count=nulls)
        total = int(lens[valid].sum()) if n else 0
        out_data = np.empty(total, np.uint8)
        large = total >= (1 << 31) - 1
        offsets = np.empty(n + 1, np.int64)
        K.gather(buf, starts, lens, valid, out_data, offsets)
        typ = (pa.large_string() if f.is_string else pa.large_binary()) if large else f.arrow_type
        arr = pa.Array.from_buffers(
            typ, n, [vbuf, pa.py_buffer(offsets if large else offsets.astype(np.int32)), pa.py_buffer(out_data)],
            null_count=nulls)
        if f.is_string:
            arr.validate(full=True)  # UTF-8
        return arr

    # -- generic path -----------------------------------------------------------------------------------------
    def _decode_generic(self, buf: np.ndarray, pos: int, end: int, n: int, where: str) -> pa.Table:
        import fastavro

        if self._fastavro is None:
            self._fastavro = fastavro.parse_schema(self._node, named_schemas={})
        raw = bytes(buf[pos:end])
        rows = []
        p = 0
        for i in range(n):
            if p + 4 > len(raw):
                raise CorruptFileError(where, f"Avro record {i}: {_ERRORS[K.E_TRUNCATED]}")
            ln = int.from_bytes(raw[p : p + 4], "big", signed=True)
            if ln < 0 or p + 4 + ln > len(raw):
                raise CorruptFileError(where, f"Avro record {i}: {_ERRORS[K.E_TRUNCATED]}")
            stream = io.BytesIO(raw[p + 4 : p + 4 + ln])
            try:
                rows.append(fastavro.schemaless_reader(stream, self._fastavro, None))
            except (EOFError, ValueError, IndexError, UnicodeDecodeError) as ex:
                raise CorruptFileError(where, f"Avro record {i}: {ex}") from None
            if stream.tell() != ln:
                raise CorruptFileError(where, f"Avro record {i}: {_ERRORS[K.E_LENGTH]}")
            p += 4 + ln
        if p != len(raw):
            raise CorruptFileError(where, f"{len(raw) - p} bytes left after the {n} records of an Avro data block")
        try:
            return pa.Table.from_pylist(rows, schema=self.arrow_schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as ex:
            raise UnsupportedFormatError(f"{where}: cannot convert Avro records to Arrow: {ex}") from None


class AvroArrowEncoder:
    """Encodes an Arrow table as length-prefixed Avro binary datums of a flat writer schema (the inverse of
    :class:`AvroArrowDecoder`'s compiled path; columns are matched by name and cast to the schema's types)."""

    def __init__(self, writer_schema: str) -> None:
        self._dec = decoder_for(writer_schema)
        if self._dec.fields is None:
            raise UnsupportedFormatError("only flat record schemas are encoded from Arrow")
        self.fields = self._dec.fields

    def encode(self, table: pa.Table, where: str = "<avro block>") -> bytes:
        """``int32 length`` + datum per row, concatenated."""
        d = self._dec
        n = table.num_rows
        nf = len(self.fields)
        fixed = np.zeros((max(d._nfix, 1), n), np.int64)
        valid = np.ones((max(nf, 1), n), np.uint8)
        var_parts: list[tuple[np.ndarray, np.ndarray]] = []
        dec_cols: list[np.ndarray] = []
        dec_col = np.full(nf, -1, np.int64)
        bound = 4 * n
        for j, f in enumerate(self.fields):
            if f.kind == K.K_NULL:
                valid[j] = 0
                continue
            if f.name not in table.column_names:
                if not f.nullable:
                    raise UnsupportedFormatError(f"{where}: no column {f.name!r} for a field that is not nullable")
                valid[j] = 0
                col = pa.nulls(n, f.arrow_type)
            else:
                c = table.column(f.name)
                col = (c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c).cast(f.arrow_type)
            if col.null_count:
                valid[j] = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), np.uint8)
            bound += n * 11
            k = f.kind
            if f.decimal:
                raw = np.frombuffer(col.buffers()[1], np.uint8)[col.offset * 16 : (col.offset + n) * 16]
                dec_col[j] = len(dec_cols)
                dec_cols.append(raw.reshape(n, 16))
                bound += n * 17
                var_parts.append((np.zeros(0, np.uint8), np.zeros(n + 1, np.int64)))  # keeps var_col aligned
            elif k in (K.K_BYTES, K.K_FIXED):
                from pyhudi.io.arrow import binary_buffers

                b = col.cast(pa.large_binary()) if pa.types.is_large_string(col.type) else col.cast(pa.binary())
                b = pc.fill_null(b, b"") if b.null_count else b
                data, offs = binary_buffers(b)
                var_parts.append((data, offs))
                bound += n * 10 + int(offs[-1] - offs[0])
            elif k == K.K_ENUM:
                idx = pc.index_in(col, value_set=pa.array(list(f.symbols), pa.string()))
                if idx.null_count > col.null_count:
                    raise UnsupportedFormatError(f"{where}: column {f.name!r} holds a value that is not a symbol")
                fixed[d._fix[j]] = np.asarray(pc.fill_null(idx, 0).to_numpy(zero_copy_only=False), np.int64)
            else:
                fixed[d._fix[j]] = self._fixed_values(f, col, where)
        if len(var_parts) != d._nvar or len(dec_cols) > nf:  # the compiled loop does not check bounds
            raise AssertionError("Avro encoder layout out of step with the schema")
        var_data = np.concatenate([p[0] for p in var_parts]) if var_parts else np.zeros(1, np.uint8)
        var_offs = np.zeros((max(len(var_parts), 1), n + 1), np.int64)
        shift = 0
        for v, (data, offs) in enumerate(var_parts):
            var_offs[v] = offs + shift
            shift += len(data)
        dec_in = np.stack(dec_cols) if dec_cols else np.zeros((1, 1, 16), np.uint8)
        out = np.empty(max(bound, 1), np.uint8)
        end, status, bad = K.encode_records(n, d._kinds, d._null, d._fsize, d._fix, d._var, fixed, valid, var_data,
                                            var_offs, dec_in, dec_col, out)
        if status != K.OK:
            raise UnsupportedFormatError(f"{where}: row {bad}: a value does not fit the Avro schema "
                                         f"({_ERRORS.get(status, status)})")
        return out[:end].tobytes()

    @staticmethod
    def _fixed_values(f: _Field, col: pa.Array, where: str) -> np.ndarray:
        k = f.kind
        if k == K.K_BOOL:
            return np.asarray(pc.fill_null(col, False).to_numpy(zero_copy_only=False), np.int64)
        if k == K.K_FLOAT:
            v = np.asarray(pc.fill_null(col, 0.0).to_numpy(zero_copy_only=False), np.float32)
            return v.view(np.uint32).astype(np.int64)
        if k == K.K_DOUBLE:
            v = np.asarray(pc.fill_null(col, 0.0).to_numpy(zero_copy_only=False), np.float64)
            return v.view(np.int64).copy()
        t = col.type
        if pa.types.is_timestamp(t) or pa.types.is_date32(t):
            col = col.cast(pa.int64() if pa.types.is_timestamp(t) else pa.int32())
        v = np.asarray(pc.fill_null(col, 0).to_numpy(zero_copy_only=False), np.int64)
        if f.millis:
            if (v % 1000).any():
                raise UnsupportedFormatError(f"{where}: column {f.name!r} has sub-millisecond timestamps for a "
                                             "timestamp-millis field")
            v = v // 1000
        return v


@lru_cache(maxsize=64)
def decoder_for(writer_schema: str) -> AvroArrowDecoder:
    """A (cached) decoder for one writer schema."""
    return AvroArrowDecoder(writer_schema)
