"""Merging the records of a file slice by key, as Hudi 1.1's file group reader does.

Log records (from data blocks, and delete-block entries) are applied oldest first, each *delta-merged* into the
record buffered for its key; then every base-file record with a buffered log record is *final-merged* with it;
the buffered log records no base record claimed are emitted last (unless they are deletes). The rules depend on
the table's ``hoodie.record.merge.mode`` (J ``BufferedRecordMergerFactory``, ``BufferedRecord``):

- COMMIT_TIME_ORDERING: the later record wins, always (a later delete deletes, a later record revives).
- EVENT_TIME_ORDERING: each record carries an ordering value (the ordering fields; a null field counts as Java's
  ``Integer 0``); a data record replaces the buffered one if its ordering value is >= (ties go to the later
  record). A *commit-time-ordering delete* -- a delete whose ordering value is Hudi's default ``Integer 0`` (SQL
  DELETE, deletes without an ordering value) -- wins over anything older, and a record after it replaces it. A
  delete-block entry with a real ordering value deletes unless the buffered record's value is of the same class
  and strictly greater. The base record never is a delete (``_hoodie_is_deleted`` rows of a base file without
  log records are emitted as they are, as Hudi does).

Deletes are delete-block entries, records with ``_hoodie_is_deleted = true``, records whose
``hoodie.payload.delete.field`` equals ``hoodie.payload.delete.marker`` (both table properties) and records whose
``_hoodie_operation`` is ``D`` or ``-U``.

Ordering values are compared as Java compares them: only values of one class (a long field's ``Long``s; an int or
date field's ``Integer``s); Hudi fails (``ClassCastException``) where it would compare values of two classes --
e.g. a null ordering field (``Integer 0``) against a ``Long`` -- and so does pyhudi, naming the key. Values are
ranked once per merge (floats in Java's ``Double.compare`` order, strings by UTF-8 bytes as Spark's
``UTF8String``), then the fold runs compiled (:func:`pyhudi.read._kernels.fold`).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.errors import PyHudiError, UnsupportedFormatError
from pyhudi.io.arrow import binary_buffers, to_binary_array
from pyhudi.io.logfile import DeleteColumns, DeleteRecord, OrderingType
from pyhudi.read import _kernels as K
from pyhudi.table.properties import PAYLOAD_CLASS, TableConfig
from pyhudi.table.schema import IS_DELETED_COL, OPERATION_COL, RECORD_KEY_COL

EVENT_TIME = "EVENT_TIME_ORDERING"
COMMIT_TIME = "COMMIT_TIME_ORDERING"
DELETE_FIELD_KEY = "hoodie.payload.delete.field"
DELETE_MARKER_KEY = "hoodie.payload.delete.marker"
PARTIAL_UPDATE_MODE_KEY = "hoodie.table.partial.update.mode"
LEGACY_PAYLOAD_KEY = "hoodie.table.legacy.payload.class"

#: payload classes whose merging a merge mode reproduces (tables without hoodie.record.merge.mode)
_PAYLOAD_MODES = {
    "org.apache.hudi.common.model.DefaultHoodieRecordPayload": EVENT_TIME,
    "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload": COMMIT_TIME,
    "org.apache.hudi.common.model.HoodieAvroPayload": COMMIT_TIME,
}


class MergeError(PyHudiError):
    """Records of a file slice cannot be merged as Hudi would (Hudi itself fails on them)."""


@dataclass(frozen=True)
class MergeConfig:
    """How the records of one key merge (picklable)."""

    mode: str
    ordering_fields: tuple[str, ...] = ()
    delete_field: str | None = None
    delete_marker: str | None = None

    @staticmethod
    def of_table(config: TableConfig, schema: pa.Schema, where: str) -> MergeConfig:
        """The table's merge configuration; merging pyhudi cannot reproduce is refused, naming the property."""
        mode = (config.record_merge_mode or "").strip().upper()
        payload = config.get_any(PAYLOAD_CLASS) or config.get_any(LEGACY_PAYLOAD_KEY)
        ordering = tuple(f for f in config.ordering_fields if f)
        if not mode:  # tables written before merge modes: the payload class decides, as Hudi infers it
            if payload and payload not in _PAYLOAD_MODES:
                raise UnsupportedFormatError(
                    f"{where}: records merge with payload class {payload}; only the merging of "
                    f"{', '.join(sorted(_PAYLOAD_MODES))} (or hoodie.record.merge.mode EVENT_TIME_ORDERING / "
                    "COMMIT_TIME_ORDERING) is supported"
                )
            mode = _PAYLOAD_MODES.get(payload or "", EVENT_TIME if ordering else COMMIT_TIME)
        if mode not in (EVENT_TIME, COMMIT_TIME):
            raise UnsupportedFormatError(
                f"{where}: hoodie.record.merge.mode={mode} is not supported (a custom record merger or payload "
                "class); pyhudi merges EVENT_TIME_ORDERING and COMMIT_TIME_ORDERING tables"
            )
        partial = str(config.get_any(PARTIAL_UPDATE_MODE_KEY) or "").strip().upper()
        if partial not in ("", "NONE"):
            raise UnsupportedFormatError(f"{where}: {PARTIAL_UPDATE_MODE_KEY}={partial} (partial updates) is not "
                                         "supported")
        if mode == EVENT_TIME:
            for f in ordering:
                if f not in schema.names:
                    raise UnsupportedFormatError(f"{where}: ordering field {f!r} is not a column of the table")
                java_class(schema.field(f).type, f, where)
        field = config.get_any(DELETE_FIELD_KEY)
        marker = config.get_any(DELETE_MARKER_KEY)
        return MergeConfig(mode, ordering if mode == EVENT_TIME else (),
                           field if field and marker is not None else None, marker if field else None)


# -- Java classes of ordering values -------------------------------------------------------------------------
_INTEGER, _LONG, _FLOAT, _DOUBLE, _STRING, _BOOLEAN, _DECIMAL = "Integer", "Long", "Float", "Double", "UTF8String", \
    "Boolean", "Decimal"


def null_ordering_compares(t: pa.DataType, name: str, where: str) -> bool:
    """Whether Hudi's merge of a file slice can order a record whose ordering field ``name`` of type ``t`` is null
    against one whose is not: a null is Java's Integer 0, comparable only with the values of an Integer column."""
    return java_class(t, name, where) == _INTEGER


def java_class(t: pa.DataType, name: str = "", where: str = "") -> str:
    """The class of a column's values in Hudi's Spark reader (what its ordering values are compared as)."""
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t) or pa.types.is_date32(t):
        return _INTEGER
    if pa.types.is_int64(t) or pa.types.is_timestamp(t):
        return _LONG
    if pa.types.is_float32(t):
        return _FLOAT
    if pa.types.is_float64(t):
        return _DOUBLE
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _STRING
    if pa.types.is_boolean(t):
        return _BOOLEAN
    if pa.types.is_decimal(t):
        return _DECIMAL
    raise UnsupportedFormatError(f"{where}: ordering field {name!r} has type {t}, which cannot order records")


#: the delete-block wrapper pyhudi writes a class's ordering values as (classes not listed: the default ordering)
JAVA_CLASS_WRAPPERS = {_INTEGER: OrderingType.INT, _LONG: OrderingType.LONG, _FLOAT: OrderingType.FLOAT,
                       _DOUBLE: OrderingType.DOUBLE, _STRING: OrderingType.STRING}
_WRAPPER_CLASS = {
    OrderingType.BOOLEAN: _BOOLEAN, OrderingType.INT: _INTEGER, OrderingType.LONG: _LONG,
    OrderingType.FLOAT: _FLOAT, OrderingType.DOUBLE: _DOUBLE, OrderingType.STRING: _STRING,
    OrderingType.DECIMAL: _DECIMAL, OrderingType.DATE: _INTEGER, OrderingType.TIME_MICROS: _LONG,
    OrderingType.TIMESTAMP_MICROS: _LONG, OrderingType.BYTES: "ByteBuffer", OrderingType.ARRAY: "ArrayComparable",
}
_CLS_OTHER = 2  # + index of the class name in _OTHER_CLASSES


def java_order(a: pa.Array) -> pa.Array:
    """Values whose Arrow order is Java's order: floats as their IEEE total order (-0.0 < 0.0, NaN last and all
    NaNs equal, as ``Double.compare``)."""
    t = a.type
    if pa.types.is_floating(t):
        f = a.cast(pa.float64()).to_numpy(zero_copy_only=False)
        f = np.where(np.isnan(f), np.nan, f)  # one NaN bit pattern
        bits = f.view(np.int64)
        key = np.where(bits < 0, bits ^ np.int64(0x7FFFFFFFFFFFFFFF), bits)
        return pa.array(key, pa.int64(), mask=~np.asarray(a.is_valid()).astype(bool) if a.null_count else None)
    if pa.types.is_date32(t) or pa.types.is_timestamp(t):
        return a.cast(pa.int32() if pa.types.is_date32(t) else pa.int64())
    return a


class KeyTable:
    """Record keys dictionary-encoded by a hash table (compiled): each distinct key gets an id, in order of first
    appearance; other keys (a base file's) are then looked up by :meth:`probe`."""

    def __init__(self, keys: pa.Array) -> None:
        arr = to_binary_array(keys, "record key")
        self._keep = arr
        self._data, self._offs = binary_buffers(arr)
        n = len(arr)
        self._slots = np.full((1 << max(4, int(2 * max(n, 1) - 1).bit_length()), 2), -1, np.int64)
        self.ids = np.empty(n, np.int64)
        first = np.empty(max(n, 1), np.int64)
        self.count = int(K.encode_keys(self._data, self._offs, self._slots, self.ids, first))
        self._first = first[: max(self.count, 1)]

    def probe(self, keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """For each key: its id, or -1."""
        arr = to_binary_array(keys, "record key")
        qd, qo = binary_buffers(arr)
        out = np.empty(len(arr), np.int64)
        return K.probe_ids(self._slots, self._first, self._data, self._offs, qd, qo, out)


# -- the log records of a slice --------------------------------------------------------------------------------
@dataclass
class _Chunk:
    keys: pa.Array  # string
    kind: np.ndarray  # int8: DATA / DELETE_ENTRY
    is_delete: np.ndarray  # bool
    is_ctd: np.ndarray  # bool: a commit-time-ordering delete
    cls: np.ndarray  # int16: CLS_FIELD, CLS_INT_DEFAULT, or another class
    ordering: list[pa.Array]  # per ordering field, field-typed, null where cls != CLS_FIELD
    rows: np.ndarray  # int64: row in the log rows table, -1 for delete entries


class LogRecords:
    """The log records of one file slice, accumulated block by block (as Arrow), folded per key on demand.

    ``schema`` is the output schema; rows of data blocks are kept in it. When ``compact_rows`` records (and at
    least twice as many as the last fold kept) have accumulated, they are folded and only each key's buffered
    record is kept, so memory follows the number of distinct keys, not the number of log records.
    """

    def __init__(self, schema: pa.Schema, merge: MergeConfig, where: str, compact_rows: int = 2_000_000) -> None:
        self.schema = schema
        self.merge = merge
        self.where = where
        self.compact_rows = compact_rows
        self._field_types = [schema.field(f).type for f in merge.ordering_fields]
        self._field_classes = [java_class(t, f, where) for t, f in zip(self._field_types, merge.ordering_fields,
                                                                         strict=True)]
        self._other: list[str] = []
        self._chunks: list[_Chunk] = []
        self._tables: list[pa.Table] = []  # data rows, in the output schema
        self._nrows = 0
        self._pending = 0
        self._next_compact = compact_rows

    @property
    def empty(self) -> bool:
        return not self._chunks

    def _other_cls(self, name: str) -> int:
        if name not in self._other:
            self._other.append(name)
        return _CLS_OTHER + self._other.index(name)

    # -- adding --------------------------------------------------------------------------------------------
    def add_data(self, block: pa.Table, rows: pa.Table) -> None:
        """A data block's records: ``block`` as decoded (its own schema), ``rows`` the same in the output schema."""
        n = rows.num_rows
        if n == 0:
            return
        keys = rows.column(RECORD_KEY_COL).combine_chunks()
        if keys.null_count:
            raise MergeError(f"{self.where}: a log record has no record key ({RECORD_KEY_COL} is null)")
        is_delete = np.zeros(n, np.bool_)
        if IS_DELETED_COL in block.column_names:
            is_delete |= _true(block.column(IS_DELETED_COL))
        if OPERATION_COL in block.column_names:
            op = block.column(OPERATION_COL).cast(pa.string())
            is_delete |= _true(pc.is_in(op, value_set=pa.array(["D", "-U"])))
        m = self.merge
        if m.delete_field is not None and m.delete_field in block.column_names:
            val = block.column(m.delete_field).cast(pa.string())
            is_delete |= _true(pc.equal(val, pa.scalar(m.delete_marker, pa.string())))
        ordering, cls, is_int_zero = self._data_ordering(rows)
        first = self._nrows
        self._tables.append(rows)  # before _add: it may compact, folding this block's rows too
        self._nrows += n
        self._add(_Chunk(keys, np.full(n, K.DATA, np.int8), is_delete, is_delete & is_int_zero, cls, ordering,
                         np.arange(first, first + n, dtype=np.int64)))

    def add_deletes(self, entries: DeleteColumns) -> None:
        """A delete block's entries (entries without a record key are ignored)."""
        if len(entries) == 0:
            return
        if entries.keys.null_count:
            entries = entries.filter(entries.keys.is_valid())
        n = len(entries)
        is_ctd = entries.is_default_ordering
        cls = np.empty(n, np.int16)
        types = entries.types
        ordering: list[pa.Array] = []
        fields = self._field_classes
        if len(fields) == 1:
            jc = fields[0]
            same = np.array([_WRAPPER_CLASS.get(OrderingType(int(t))) == jc if t else False for t in range(13)])
            in_field = same[types] & ~is_ctd
            if jc == _INTEGER:  # Hudi's default Integer 0 is a value of the field's class
                in_field |= is_ctd
            cls[:] = K.CLS_FIELD
            cls[~in_field & is_ctd] = K.CLS_INT_DEFAULT
            for other in np.flatnonzero(~in_field & ~is_ctd).tolist():
                cls[other] = self._other_cls(_WRAPPER_CLASS.get(OrderingType(int(types[other])), "?"))
            ordering = [self._delete_values(entries, in_field, is_ctd, self._field_types[0])]
        else:
            ordering_values: list[list[object]] = [[] for _ in fields]
            for i in range(n):
                rec = DeleteRecord("", None, entries.value(i), OrderingType(int(types[i])))
                c, vals = self._delete_ordering(rec)
                cls[i] = c
                for j in range(len(fields)):
                    ordering_values[j].append(vals[j] if vals is not None else None)
            ordering = [_to_arrow(v, t, self.where) for v, t in zip(ordering_values, self._field_types, strict=True)]
        self._add(_Chunk(entries.keys, np.full(n, K.DELETE_ENTRY, np.int8), np.ones(n, np.bool_), is_ctd, cls,
                         ordering, np.full(n, -1, np.int64)))

    def _delete_values(self, e: DeleteColumns, in_field: np.ndarray, is_ctd: np.ndarray,
                       t: pa.DataType) -> pa.Array:
        """The ordering values of delete entries of the field's class, as the field's type (null elsewhere)."""
        mask = ~in_field
        if pa.types.is_floating(t):
            return pa.array(e.floats, pa.float64(), mask=mask).cast(t)
        if pa.types.is_boolean(t):
            return pa.array(e.ints != 0, pa.bool_(), mask=mask)
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            v = e.var.cast(pa.string()) if len(e.var) else pa.array([], pa.string())
            return pc.if_else(pa.array(in_field), v, pa.scalar(None, pa.string())).cast(t)
        if pa.types.is_decimal(t):
            vals = [e.value(i) if in_field[i] else None for i in range(len(e))]
            return _to_arrow(vals, t, self.where)
        ints = np.where(is_ctd, 0, e.ints)
        if pa.types.is_date32(t):
            return pa.array(ints.astype(np.int32), pa.int32(), mask=mask).cast(t)
        if pa.types.is_timestamp(t):
            return pa.array(ints, pa.int64(), mask=mask).cast(t)
        return pa.array(ints, pa.int64(), mask=mask).cast(t, safe=False)

    def _add(self, chunk: _Chunk) -> None:
        self._chunks.append(chunk)
        self._pending += len(chunk.keys)
        if self._pending >= self._next_compact:
            self._compact()

    def _data_ordering(self, rows: pa.Table) -> tuple[list[pa.Array], np.ndarray, np.ndarray]:
        """(ordering columns, class per record, whether the ordering value is Java's Integer 0)."""
        n = rows.num_rows
        if self.merge.mode != EVENT_TIME or not self.merge.ordering_fields:
            # no ordering fields: every value is the default Integer 0
            return [], np.full(n, K.CLS_INT_DEFAULT, np.int16), np.ones(n, np.bool_)
        cols = [rows.column(f).combine_chunks() for f in self.merge.ordering_fields]
        single = len(cols) == 1
        null_any = np.zeros(n, np.bool_)
        for a in cols:
            if a.null_count:
                null_any |= ~_true(a.is_valid())
        cls = np.full(n, K.CLS_FIELD, np.int16)
        int_zero = np.zeros(n, np.bool_)
        if single:
            a, jc = cols[0], self._field_classes[0]
            if jc == _INTEGER:  # a null is Integer 0, the same class: rank it as 0
                if a.null_count:
                    cols = [pc.fill_null(a, pa.scalar(0, pa.int32()).cast(a.type))]
                int_zero = _true(pc.equal(java_order(cols[0]), 0))
            else:
                cls[null_any] = K.CLS_INT_DEFAULT
                int_zero = null_any
        else:
            # an array of values; a null element is Integer 0 (another class unless the field's is Integer)
            for a, jc in zip(cols, self._field_classes, strict=True):
                if a.null_count and jc != _INTEGER:
                    cls[~_true(a.is_valid())] = self._other_cls("ArrayComparable(null)")
            cols = [pc.fill_null(a, pa.scalar(0, pa.int32()).cast(a.type)) if jc == _INTEGER and a.null_count else a
                    for a, jc in zip(cols, self._field_classes, strict=True)]
        return cols, cls, int_zero

    def _delete_ordering(self, r: DeleteRecord) -> tuple[int, list[object] | None]:
        t = r.ordering_type
        if r.is_default_ordering:
            if len(self._field_classes) == 1 and self._field_classes[0] == _INTEGER:
                return K.CLS_FIELD, [0]
            return K.CLS_INT_DEFAULT, None
        if self.merge.mode != EVENT_TIME or not self._field_types:
            return self._other_cls(_WRAPPER_CLASS.get(t, str(t))), None  # type: ignore[arg-type]
        if t == OrderingType.ARRAY:
            items = list(r.ordering_value or ())
            if len(items) != len(self._field_types):
                return self._other_cls("ArrayComparable"), None
            vals = []
            for it, jc in zip(items, self._field_classes, strict=True):
                if _WRAPPER_CLASS.get(it.type) != jc:
                    return self._other_cls("ArrayComparable"), None
                vals.append(it.value)
            return (K.CLS_FIELD, vals) if len(vals) > 1 else (self._other_cls("ArrayComparable"), None)
        jc = _WRAPPER_CLASS.get(t, str(t))  # type: ignore[arg-type]
        if len(self._field_types) == 1 and jc == self._field_classes[0]:
            return K.CLS_FIELD, [r.ordering_value]
        return self._other_cls(jc), None

    # -- folding -------------------------------------------------------------------------------------------
    def _concat(self) -> _Chunk:
        cs = self._chunks
        if len(cs) == 1:
            return cs[0]
        return _Chunk(
            pa.concat_arrays([c.keys for c in cs]),
            np.concatenate([c.kind for c in cs]),
            np.concatenate([c.is_delete for c in cs]),
            np.concatenate([c.is_ctd for c in cs]),
            np.concatenate([c.cls for c in cs]),
            [pa.concat_arrays([c.ordering[j] for c in cs]) for j in range(len(self._field_types))],
            np.concatenate([c.rows for c in cs]),
        )

    def _fold(self) -> tuple[_Chunk, np.ndarray, KeyTable]:
        """(all records, each key's buffered record after the fold by key id, the key ids)."""
        ev = self._concat()
        keys = KeyTable(ev.keys)
        rank = self._ranks(ev)
        state = np.full(keys.count, -1, np.int64)
        mode = K.EVENT_TIME if self.merge.mode == EVENT_TIME else K.COMMIT_TIME
        status, bad = K.fold(keys.ids, keys.count, ev.kind, ev.is_ctd, ev.cls, rank, mode, state)
        if status != K.OK:
            key = ev.keys[int(bad)].as_py()
            prev_cls = self._cls_name(int(ev.cls[state[keys.ids[bad]]]))
            raise MergeError(
                f"{self.where}: record key {key!r}: Hudi compares its ordering values "
                f"({', '.join(self.merge.ordering_fields)}) as {self._cls_name(int(ev.cls[bad]))} and "
                f"{prev_cls}, which it cannot (EVENT_TIME_ORDERING); the slice cannot be merged"
            )
        return ev, state, keys

    def _cls_name(self, c: int) -> str:
        if c == K.CLS_FIELD:
            return "/".join(self._field_classes) or "Integer"
        if c == K.CLS_INT_DEFAULT:
            return "Integer (a null or default ordering value)"
        return self._other[c - _CLS_OTHER]

    def _ranks(self, ev: _Chunk) -> np.ndarray:
        n = len(ev.keys)
        rank = np.zeros(n, np.int64)
        sel = np.flatnonzero(ev.cls == K.CLS_FIELD)
        if not len(sel) or not self._field_types:
            return rank
        if len(ev.ordering) == 1:  # a single integral or floating field: its (total-order) value is its rank
            a = java_order(ev.ordering[0])
            if pa.types.is_integer(a.type) or pa.types.is_boolean(a.type):
                vals = np.asarray(a.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False), np.int64)
                rank[sel] = vals[sel]
                return rank
        idx = pa.array(sel)
        cols = [java_order(a.take(idx)) for a in ev.ordering]
        names = [f"o{j}" for j in range(len(cols))]
        t = pa.table(cols, names=names)
        order = pc.sort_indices(t, sort_keys=[(c, "ascending") for c in names]).to_numpy()
        same = np.ones(len(sel), np.bool_)
        if len(sel) > 1:
            for c in cols:
                s = c.take(pa.array(order))
                eq = pc.equal(s.slice(1), s.slice(0, len(s) - 1))
                same[1:] &= _true(eq)
            same[0] = False
        out = np.empty(len(sel), np.int64)
        K.dense_rank(order, same, out)
        rank[sel] = out
        return rank

    def _compact(self) -> None:
        ev, state, _ = self._fold()
        keep = np.sort(state)
        rows = ev.rows[keep]
        data = rows >= 0
        table = self._rows_table()
        taken = table.take(pa.array(rows[data])) if data.any() else self.schema.empty_table()
        new_rows = np.full(len(keep), -1, np.int64)
        new_rows[data] = np.arange(int(data.sum()))
        idx = pa.array(keep)
        self._chunks = [_Chunk(ev.keys.take(idx), ev.kind[keep], ev.is_delete[keep], ev.is_ctd[keep], ev.cls[keep],
                               [a.take(idx) for a in ev.ordering], new_rows)]
        self._tables = [taken.combine_chunks()]
        self._nrows = taken.num_rows
        self._pending = len(keep)
        # the next fold when as many records again have come: folding costs what is held, so many distinct keys
        # must not make every fold copy them all (amortised linear)
        self._next_compact = max(self.compact_rows, 2 * len(keep))

    def _rows_table(self) -> pa.Table:
        return pa.concat_tables(self._tables) if self._tables else self.schema.empty_table()

    def resolve(self) -> Winners:
        """Each key's buffered record after all log records, by key id: the input of the final merge. The log rows
        stay where they were decoded (``Winners.tables``); a winner names its row by position in them."""
        if not self._chunks:
            return Winners.empty(len(self._field_types))
        ev, state, keys = self._fold()
        tables, self._chunks, self._tables = self._tables, [], []
        idx = pa.array(state)
        return Winners(keys, ev.keys.take(idx), ev.is_delete[state], ev.is_ctd[state], ev.cls[state],
                       [a.take(idx) for a in ev.ordering], ev.rows[state], tables)


@dataclass
class Winners:
    """The buffered log record of every key of a slice (one per key, by key id of ``key_table``)."""

    key_table: KeyTable | None
    keys: pa.Array
    is_delete: np.ndarray
    is_ctd: np.ndarray
    cls: np.ndarray
    ordering: list[pa.Array]
    row: np.ndarray  # position of a data record's row in ``tables`` (concatenated), -1 for delete entries
    tables: list[pa.Table]  # the log rows, in the output schema

    @staticmethod
    def empty(n_fields: int) -> Winners:
        return Winners(None, pa.array([], pa.string()), np.zeros(0, np.bool_), np.zeros(0, np.bool_),
                       np.zeros(0, np.int16), [pa.array([]) for _ in range(n_fields)], np.zeros(0, np.int64), [])

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def total_rows(self) -> int:
        return sum(t.num_rows for t in self.tables)

    def emit(self, rows: np.ndarray) -> Iterator[pa.Table]:
        """The log rows at ``rows`` (positions into ``tables``), in log order, one table per decoded block."""
        mask = np.zeros(self.total_rows, np.bool_)
        mask[rows] = True
        off = 0
        for t in self.tables:
            sub = mask[off : off + t.num_rows]
            off += t.num_rows
            if sub.all():
                yield t
            elif sub.any():
                yield t.filter(pa.array(sub))


def final_merge(
    merge: MergeConfig, winners: Winners, matched: np.ndarray, base_ordering: list[pa.Array], where: str,
    base_keys: pa.Array | None = None,
) -> np.ndarray:
    """For base records matched to buffered log records ``winners[matched]``: True where the log record wins
    (``finalMerge(base, log)``); it then replaces the base record, or deletes it if it is a delete."""
    m = len(matched)
    if m == 0:
        return np.zeros(0, np.bool_)
    if merge.mode != EVENT_TIME or not merge.ordering_fields:
        return np.ones(m, np.bool_)
    idx = pa.array(matched)
    w_ctd = winners.is_ctd[matched]
    w_cls = winners.cls[matched]
    # the base record's class per row, as for data log records
    single = len(base_ordering) == 1
    b_cls = np.full(m, K.CLS_FIELD, np.int16)
    fields = merge.ordering_fields
    classes = [java_class(a.type) for a in base_ordering]
    base_vals = []
    for a, jc in zip(base_ordering, classes, strict=True):
        if a.null_count:
            if jc == _INTEGER:
                a = pc.fill_null(a, pa.scalar(0, pa.int32()).cast(a.type))
            else:
                b_cls[~_true(a.is_valid())] = K.CLS_INT_DEFAULT if single else -1
        base_vals.append(a)
    comparable = w_ctd | (w_cls == b_cls)
    if not comparable.all():
        i = int(np.flatnonzero(~comparable)[0])
        key = base_keys[i].as_py() if base_keys is not None else "?"
        raise MergeError(
            f"{where}: record key {key!r}: Hudi compares the base file's ordering value ({', '.join(fields)}) with "
            "a log record's of another class (e.g. a null against a value), which it cannot "
            "(EVENT_TIME_ORDERING); the slice cannot be merged"
        )
    if (w_cls[~w_ctd] >= _CLS_OTHER).any():
        raise MergeError(f"{where}: ordering values of a class pyhudi does not compare ({', '.join(fields)})")
    ge = np.ones(m, np.bool_)  # log >= base, lexicographically; equal when both are the default Integer 0
    field_rows = (w_cls == K.CLS_FIELD) & ~w_ctd
    if field_rows.any():
        greater = np.zeros(m, np.bool_)
        equal = np.ones(m, np.bool_)
        for j, b in enumerate(base_vals):
            lv = java_order(winners.ordering[j].take(idx))
            bv = java_order(b)
            if lv.type != bv.type:
                bv = bv.cast(lv.type)
            gt = _true(pc.greater(lv, bv))
            eq = _true(pc.equal(lv, bv))
            greater |= equal & gt
            equal &= eq
        ge = np.where(field_rows, greater | equal, ge)
    return w_ctd | ge


def _true(a: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean Arrow array as numpy, nulls false."""
    if isinstance(a, pa.ChunkedArray):
        a = a.combine_chunks()
    if a.null_count:
        a = pc.fill_null(a, False)
    return np.asarray(a.to_numpy(zero_copy_only=False), dtype=np.bool_)


def _to_arrow(values: list[object], t: pa.DataType, where: str) -> pa.Array:
    try:
        if pa.types.is_date32(t):
            values = [(_dt.date(1970, 1, 1) + _dt.timedelta(days=v)) if isinstance(v, int) else v for v in values]
        if pa.types.is_timestamp(t):
            return pa.array(values, pa.int64()).cast(t)
        if pa.types.is_decimal(t):
            return pa.array(values, pa.decimal128(38, 15)).cast(t)
        return pa.array(values, t)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
        raise MergeError(f"{where}: a delete block's ordering value does not fit the ordering field's type {t}: {e}") \
            from None
