"""Hudi key generators on Arrow data: record keys and partition paths, vectorised with pyarrow.compute.

Rules (Hudi 1.1, ``KeyGenUtils`` / ``*AvroKeyGenerator``; values are first turned into the string Java's
``toString`` gives for the Avro value of the column):

- SIMPLE: one record-key field, one partition field. A null or empty record key is an error.
- COMPLEX: record key ``f1:v1,f2:v2`` (every field prefixed by its name, also when there is a single field:
  table version 9 always encodes the field name; version 8 with ``hoodie.write.complex.keygen.new.encoding=true``
  writes the bare value for a single field). A null value is written ``f:__null__``, an empty one
  ``f:__empty__``; a key whose values are all null/empty is an error. Partition path ``v1/v2``.
- NON_PARTITION: partition path ``""``; a single record-key field gives the bare value, several give the
  complex encoding.
- Partition values: null or empty -> ``__HIVE_DEFAULT_PARTITION__``. With
  ``hoodie.datasource.write.partitionpath.urlencode=true`` values are escaped like Hive's
  ``FileUtils.escapePathName`` (``%XX`` upper-case hex for control characters and ``"#%'*/:=?\\{[]^`` and DEL;
  not ``java.net.URLEncoder``). Hive style (``hoodie.datasource.write.hive_style_partitioning=true``) prefixes
  ``field=``. A value containing ``/`` (e.g. ``2026/11/21``) makes nested folders unless url-encoded.

Value-to-string conversion (the Avro value's ``toString``): strings as is; integers in decimal; booleans
``true``/``false``; dates ``yyyy-MM-dd`` (``LocalDate``); timestamps the epoch **microseconds** as a long (Spark
writes ``timestamp-micros``; Hudi converts only when ``hoodie.datasource.write.keygenerator.consistent.logical
.timestamp.enabled`` is set, which is not supported here); decimals ``BigDecimal.toString`` (plain notation,
scale kept; ``E`` notation when the adjusted exponent is below -6); floats/doubles Java ``Float/Double.toString``
(``1.0``, ``1.0E7``, ``1.0E-4``, ``NaN``, ``Infinity``) as Java 19 and later print them (the shortest digits that
read back as the value); Java 17 and earlier print about 1% of doubles and 10% of floats with other digits
(``1e23`` as ``9.999999999999999E22``), so a Hudi writer on those would make other keys for them.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.config import (
    COMPLEX_NEW_ENCODING,
    CONSISTENT_LOGICAL_TS,
    PARTITIONPATH_FIELD,
    RECORDKEY_FIELD,
    WRITE_TABLE_VERSION,
    check_partition_field_specs,
    infer_keygen_type,
    keygen_class_type,
    keygen_type_name,
    split_fields,
)
from pyhudi.config import HIVE_STYLE_PARTITIONING as HIVE_STYLE
from pyhudi.config import KEYGENERATOR_CLASS as KEYGEN_CLASS
from pyhudi.config import KEYGENERATOR_TYPE as KEYGEN_TYPE
from pyhudi.config import URL_ENCODE_PARTITIONING as URL_ENCODE
from pyhudi.errors import ConfigError, InvalidInputError
from pyhudi.hfile.format import MAX_ROW_LENGTH
from pyhudi.table.partition_path import (
    DEFAULT_PARTITION_PATH,
    check_partition_part,
    check_partition_path_lengths,
    escape_path_names,
)
from pyhudi.table.properties import KEYGENERATOR_CLASS as TABLE_KEYGEN_CLASS
from pyhudi.table.properties import KEYGENERATOR_TYPE as TABLE_KEYGEN_TYPE
from pyhudi.table.properties import PARTITION_FIELDS as TABLE_PARTITION_FIELDS
from pyhudi.table.properties import RECORDKEY_FIELDS as TABLE_RECORDKEY_FIELDS

SIMPLE = "SIMPLE"
COMPLEX = "COMPLEX"
NON_PARTITION = "NON_PARTITION"

NULL_PLACEHOLDER = "__null__"
EMPTY_PLACEHOLDER = "__empty__"

Batch: TypeAlias = pa.RecordBatch | pa.Table


def _bool(options: Mapping[str, str], key: str, default: bool = False) -> bool:
    v = options.get(key)
    if v is None or str(v).strip() == "":
        return default
    s = str(v).strip().lower()
    if s not in ("true", "false"):
        raise ConfigError(f"{key}: expected true or false, got {v!r}")
    return s == "true"


@dataclass(frozen=True)
class KeyGenerator:
    """Computes ``_hoodie_record_key`` and ``_hoodie_partition_path`` for Arrow batches."""

    type_name: str
    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...] = ()
    hive_style_partitioning: bool = False
    url_encode_partition_path: bool = False
    encode_single_key_field_name: bool = True

    def __post_init__(self) -> None:
        if self.type_name not in (SIMPLE, COMPLEX, NON_PARTITION):
            raise ConfigError(f"{TABLE_KEYGEN_TYPE}: unsupported key generator type {self.type_name!r}")
        if not self.record_key_fields:
            raise ConfigError(f"{RECORDKEY_FIELD} is required (auto-generated record keys are not supported)")
        if self.type_name == SIMPLE:
            if len(self.record_key_fields) != 1:
                raise ConfigError(
                    f"the SIMPLE key generator takes one record key field, got {list(self.record_key_fields)}"
                    " (use COMPLEX)"
                )
            if len(self.partition_fields) != 1:
                raise ConfigError(
                    f"the SIMPLE key generator takes one partition path field, got {list(self.partition_fields)}"
                )
        if self.type_name == NON_PARTITION and self.partition_fields:
            object.__setattr__(self, "partition_fields", ())

    # -- construction ----------------------------------------------------------------------------------------
    @staticmethod
    def from_options(options: Mapping[str, str]) -> KeyGenerator:
        """From Hudi write options (``hoodie.datasource.write.*``) or table config keys (``hoodie.table.*``)."""
        rk = split_fields(options.get(RECORDKEY_FIELD) or options.get(TABLE_RECORDKEY_FIELDS))
        pf_raw = options.get(PARTITIONPATH_FIELD)
        if pf_raw is None:
            pf_raw = options.get(TABLE_PARTITION_FIELDS)
        pf = split_fields(pf_raw)
        check_partition_field_specs(pf, PARTITIONPATH_FIELD)
        type_name: str | None = None
        raw_type = options.get(KEYGEN_TYPE) or options.get(TABLE_KEYGEN_TYPE)
        if raw_type:
            type_name = keygen_type_name(raw_type)
            if type_name is None:
                raise ConfigError(f"{TABLE_KEYGEN_TYPE}: unsupported key generator type {raw_type!r}")
        else:
            cls = options.get(KEYGEN_CLASS) or options.get(TABLE_KEYGEN_CLASS)
            if cls:
                type_name = keygen_class_type(cls, KEYGEN_CLASS)
        if type_name is None:
            type_name = infer_keygen_type(rk, pf)
        if _bool(options, CONSISTENT_LOGICAL_TS):
            raise ConfigError(f"{CONSISTENT_LOGICAL_TS}=true is not supported")
        version = options.get(WRITE_TABLE_VERSION) or options.get("hoodie.table.version")
        try:
            table_version = int(version) if version else 9
        except ValueError:
            raise ConfigError(f"{WRITE_TABLE_VERSION}: not a number: {version!r}") from None
        encode_single = table_version >= 9 or not _bool(options, COMPLEX_NEW_ENCODING)
        return KeyGenerator(
            type_name,
            rk,
            pf,
            _bool(options, HIVE_STYLE),
            _bool(options, URL_ENCODE),
            encode_single,
        )

    # -- keys ------------------------------------------------------------------------------------------------
    @property
    def complex_key_encoding(self) -> bool:
        """Whether record keys are ``field:value`` pairs joined by commas (refused only when every field is null
        or empty) rather than the one field's value."""
        return len(self.record_key_fields) > 1 or (self.type_name == COMPLEX and self.encode_single_key_field_name)

    def record_keys(self, batch: Batch, *, check_length: bool = True) -> pa.StringArray:
        """``_hoodie_record_key`` of each row. Raises InvalidInputError for a null/empty key or missing column, and
        (``check_length``) for a key longer than pyhudi writes (:func:`_check_key_lengths`)."""
        fields = self.record_key_fields
        if not self.complex_key_encoding:
            values = _column_strings(batch, fields[0], "record key")
            _check_no_null_or_empty(values, fields[0], batch)
            return _check_key_lengths(values, fields) if check_length else values
        parts: list[pa.Array] = []
        all_missing: pa.Array | None = None
        for f in fields:
            values = _column_strings(batch, f, "record key")
            missing = _null_or_empty(values)
            all_missing = missing if all_missing is None else pc.and_(all_missing, missing)
            filled = pc.if_else(
                pc.is_null(values),
                pa.scalar(NULL_PLACEHOLDER),
                pc.if_else(pc.equal(values, ""), pa.scalar(EMPTY_PLACEHOLDER), values),
            )
            parts.append(pc.binary_join_element_wise(pa.scalar(f + ":"), filled, ""))
        assert all_missing is not None
        if len(all_missing) and pc.any(all_missing).as_py():
            row = _first_true(all_missing)
            raise InvalidInputError(f"record key fields {list(fields)} are all null or empty in the input record "
                                    f"{describe_row(batch, row, fields)}")
        keys = _as_string_array(pc.binary_join_element_wise(*parts, ","), len(batch))
        return _check_key_lengths(keys, fields) if check_length else keys

    def partition_paths(self, batch: Batch) -> pa.StringArray:
        """``_hoodie_partition_path`` of each row ("" for non-partitioned tables).

        Raises InvalidInputError for a value that makes an unsafe partition path (outside the table, an empty,
        ``.``/``..`` or ``.hoodie`` segment, a backslash or control character, too long: see
        :mod:`pyhudi.table.partition_path`), naming the column, the value and the option that makes it legal.
        """
        n = len(batch)
        if not self.partition_fields:
            return pa.array([""] * n, pa.string()) if n else pa.array([], pa.string())
        parts = []
        for f in self.partition_fields:
            raw = _column_strings(batch, f, "partition path")
            missing = _null_or_empty(raw)
            values = escape_path_names(raw) if self.url_encode_partition_path else raw
            values = pc.if_else(missing, pa.scalar(DEFAULT_PARTITION_PATH), values)
            if self.hive_style_partitioning:
                values = pc.binary_join_element_wise(pa.scalar(f + "="), values, "")
            values = _as_string_array(values, n)
            check_partition_part(
                values, raw, f, hive_style=self.hive_style_partitioning, url_encode=self.url_encode_partition_path
            )
            parts.append(values)
        paths = parts[0] if len(parts) == 1 else _as_string_array(pc.binary_join_element_wise(*parts, "/"), n)
        check_partition_path_lengths(paths, self.partition_fields)
        return paths

    def key_columns(self) -> tuple[str, ...]:
        """Every column the generator reads."""
        return tuple(dict.fromkeys(self.record_key_fields + self.partition_fields))


# -- helpers ------------------------------------------------------------------------------------------------
def _as_string_array(arr: pa.Array | pa.ChunkedArray, n: int) -> pa.StringArray:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks else pa.array([], pa.string())
    if arr.type != pa.string():
        arr = arr.cast(pa.string())
    assert len(arr) == n
    return arr


def _first_true(mask: pa.Array | pa.ChunkedArray) -> int:
    return int(np.flatnonzero(np.asarray(mask.to_numpy(zero_copy_only=False), dtype=bool))[0])


def _null_or_empty(values: pa.Array) -> pa.Array:
    return pc.fill_null(pc.equal(values, ""), True)


def describe_row(batch: Batch, row: int, first: tuple[str, ...] = (), columns: int = 4, width: int = 40) -> str:
    """Row ``row`` of ``batch`` for an error message, by the columns ``first`` and then the next ones, up to
    ``columns`` (values cut at ``width`` characters): a write's input is read in many batches, so the row's number
    in its batch would locate nothing. A value Python cannot hold (text that is not UTF-8, a date out of range)
    shows as its type: the description never hides the error it is for."""
    names = batch.schema.names
    order = [i for f in first for i, n in enumerate(names) if n == f]
    order += [i for i, n in enumerate(names) if i not in order and not n.startswith("_hoodie_")]
    shown = []
    for i in order[:columns]:
        col = batch.column(i)
        try:
            text = repr(col[row].as_py())
        except Exception:
            text = f"<{col.type}>"
        shown.append(f"{names[i]}={text[:width] + '...' if len(text) > width else text}")
    return "(" + ", ".join(shown) + (", ..." if len(order) > columns else "") + ")"


def _check_key_lengths(keys: pa.StringArray, fields: tuple[str, ...]) -> pa.StringArray:
    """``keys``, refused when one is longer (in UTF-8 bytes) than an HFile key can be. The record index (the
    metadata table's ``record_index`` partition, which any table may build later) holds every record key as one,
    as Hudi's does; pyhudi writes no key it could not index, whether or not the table has the index yet."""
    if len(keys):
        lengths = pc.binary_length(keys)
        if pc.max(lengths).as_py() > MAX_ROW_LENGTH:
            row = _first_true(pc.greater(lengths, MAX_ROW_LENGTH))
            raise InvalidInputError(
                f"record key (fields {list(fields)}) is {lengths[row].as_py()} bytes, starting "
                f"{keys[row].as_py()[:40]!r}: pyhudi writes record keys of at most {MAX_ROW_LENGTH} bytes, the "
                "longest key the record index (an HFile) can hold")
    return keys


def _check_no_null_or_empty(values: pa.Array, field: str, batch: Batch) -> None:
    if len(values) == 0:
        return
    if values.null_count:
        row = _first_true(pc.is_null(values))
        raise InvalidInputError(
            f"record key field {field!r} is null in the input record {describe_row(batch, row, (field,))}")
    empty = pc.equal(values, "")
    if pc.any(empty).as_py():
        raise InvalidInputError(
            f"record key field {field!r} is empty in the input record "
            f"{describe_row(batch, _first_true(empty), (field,))}")


def _get_column(batch: Batch, name: str, what: str) -> pa.Array:
    schema = batch.schema
    if schema.get_field_index(name) >= 0:
        col = batch.column(name)
    elif "." in name and schema.get_field_index(name.split(".")[0]) >= 0:
        parts = name.split(".")
        col = batch.column(parts[0])
        for p in parts[1:]:
            if not pa.types.is_struct(col.type) or col.type.get_field_index(p) < 0:
                raise InvalidInputError(f"{what} field {name!r} is not a column of the input")
            col = pc.struct_field(col, p)
    else:
        raise InvalidInputError(f"{what} field {name!r} is not a column of the input")
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks else pa.array([], col.type)
    return col


def _column_strings(batch: Batch, name: str, what: str) -> pa.Array:
    """The strings of column ``name`` (Hudi's text of its values), refused with InvalidInputError naming the row
    when one is not valid UTF-8: Spark and pyarrow pass such strings on unchecked, and a record key or partition
    path must be the same text wherever it is read (the driver's plan, the tasks, the metadata table)."""
    values = to_hudi_strings(_get_column(batch, name, what), name)
    try:
        values.validate(full=True)
    except pa.ArrowInvalid:
        raw = values.cast(pa.binary()).to_pylist()
        for v in raw:
            if v is not None:
                try:
                    v.decode("utf-8")
                except UnicodeDecodeError:
                    raise InvalidInputError(
                        f"{what} field {name!r} is not valid UTF-8 text: {v[:40]!r}") from None
        raise
    return values


def to_hudi_strings(arr: pa.Array, name: str = "value") -> pa.Array:
    """The string Hudi's key generators make of each value (Java toString of the Avro value); nulls stay null."""
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if pa.types.is_string(t):
        return arr
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return arr.cast(pa.string())
    if pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_date32(t):
        return arr.cast(pa.string())
    if pa.types.is_date64(t):
        return arr.cast(pa.date32()).cast(pa.string())
    if pa.types.is_timestamp(t):
        micros = arr.cast(pa.timestamp("us", t.tz), safe=False).cast(pa.int64())
        return micros.cast(pa.string())
    if pa.types.is_decimal(t):
        if 0 <= t.scale <= 6:
            return arr.cast(pa.string())
        return pa.array([None if v is None else _java_bigdecimal(v) for v in arr.to_pylist()], pa.string())
    if pa.types.is_floating(t):
        single = pa.types.is_float32(t) or pa.types.is_float16(t)
        vals = arr.to_pylist()
        return pa.array([None if v is None else java_float_str(v, single) for v in vals], pa.string())
    raise InvalidInputError(f"column {name!r} of type {t} cannot be used in a record key or partition path")


def _java_bigdecimal(v: decimal.Decimal) -> str:
    # Python's Decimal.__str__ follows the same specification as java.math.BigDecimal.toString
    return str(v)


def java_float_str(v: float, single: bool = False) -> str:
    """Java ``Double.toString`` (or ``Float.toString``), using the shortest round-tripping digits."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0:
        return "-0.0" if math.copysign(1.0, v) < 0 else "0.0"
    sign = "-" if v < 0 else ""
    a = abs(v)
    text = np.format_float_scientific(np.float32(a), unique=True) if single else repr(float(a))
    d = decimal.Decimal(text)
    digits = "".join(map(str, d.as_tuple().digits)).rstrip("0") or "0"
    exp10 = d.adjusted()  # a = 0.d1d2... * 10^(exp10+1)
    if 1e-3 <= a < 1e7:
        if exp10 >= 0:
            int_part = digits[: exp10 + 1].ljust(exp10 + 1, "0")
            frac = digits[exp10 + 1 :] or "0"
        else:
            int_part = "0"
            frac = "0" * (-exp10 - 1) + digits
        return f"{sign}{int_part}.{frac}"
    mantissa = digits[0] + "." + (digits[1:] or "0")
    return f"{sign}{mantissa}E{exp10}"
