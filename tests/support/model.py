"""A plain-Python model of a COPY_ON_WRITE Hudi table, for the model-based write/read tests.

It is written from Hudi's documented semantics, independently of pyhudi's code:

- Record key: SIMPLE = the bare value; COMPLEX = ``f1:v1,f2:v2``; NON_PARTITION with one key field = bare value.
- Partition path: values joined by ``/``; hive style prefixes ``field=``; with url-encoding each value is escaped
  like Hive's ``escapePathName`` (``%XX`` for control characters and ``"#%'*/:=?\\{[]^`` and DEL).
- upsert / delete combine the batch first (``hoodie.combine.before.upsert=true``): one record per key (per
  HoodieKey = key + partition path for a non-global index, per record key for a global one), the highest ordering
  value wins, ties go to the last record of the batch. insert / bulk_insert do not combine and do not look the key
  up in the index; this model only accepts keys the table does not hold anywhere (it raises otherwise).
- EVENT_TIME_ORDERING: a stored record with a greater ordering value is not overwritten (equal: the incoming wins);
  such a record keeps its commit time (it is not rewritten as "changed").
- delete removes the key (where the index finds it), whatever its ordering value; unknown keys are ignored.
- insert_overwrite: every stored record of the partitions the batch holds goes, then the batch is stored as is
  (no lookup, no merge); insert_overwrite_table: every stored record goes. Like insert, the batch is combined
  only with ``hoodie.combine.before.insert=true`` (``combine=True`` here: per HoodieKey, or per record key with a
  global index, highest ordering value wins, ties go to the last); otherwise the model only takes distinct keys.
  With a global index a key stored in a partition that is not overwritten must be rejected (the model raises
  :class:`Rejected`).
- SIMPLE index: a key is unique per partition (the same key in another partition is another record).
- GLOBAL_SIMPLE: a key is unique in the table. A key arriving with another partition: with
  ``hoodie.simple.index.update.partition.path=true`` it moves (delete from old + insert into new) when the incoming
  record wins the ordering comparison, else the stored record stays as it is; with ``false`` the stored record is
  updated in place (it keeps its old partition path, its data columns take the incoming values).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

RK = "_hoodie_record_key"
PP = "_hoodie_partition_path"
CT = "_hoodie_commit_time"
_ESCAPED = set("\"#%'*/:=?\\{[]^\x7f") | {chr(c) for c in range(1, 32)}


def escape(value: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


@dataclass(frozen=True)
class Spec:
    """The table layout the model needs (mirrors the write options)."""

    key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...] = ()
    hive_style: bool = False
    url_encode: bool = False
    global_index: bool = False
    update_partition_path: bool = True
    ordering_field: str = "ts"

    def options(self, name: str) -> dict[str, str]:
        o = {
            "hoodie.table.name": name,
            "hoodie.datasource.write.recordkey.field": ",".join(self.key_fields),
            "hoodie.datasource.write.partitionpath.field": ",".join(self.partition_fields),
            "hoodie.table.ordering.fields": self.ordering_field,
            "hoodie.datasource.write.hive_style_partitioning": str(self.hive_style).lower(),
            "hoodie.datasource.write.partitionpath.urlencode": str(self.url_encode).lower(),
            "hoodie.index.type": "GLOBAL_SIMPLE" if self.global_index else "SIMPLE",
            "hoodie.simple.index.update.partition.path": str(self.update_partition_path).lower(),
        }
        if len(self.key_fields) > 1 or len(self.partition_fields) > 1:
            o["hoodie.datasource.write.keygenerator.type"] = "COMPLEX"
        return o

    def record_key(self, row: dict[str, Any]) -> str:
        if len(self.key_fields) == 1:
            return str(row[self.key_fields[0]])
        return ",".join(f"{f}:{row[f]}" for f in self.key_fields)

    def partition_path(self, row: dict[str, Any]) -> str:
        parts = []
        for f in self.partition_fields:
            v = str(row[f])
            v = escape(v) if self.url_encode else v
            parts.append(f"{f}={v}" if self.hive_style else v)
        return "/".join(parts)


class Rejected(ValueError):
    """The write must be rejected (a global-index key stored in a partition an insert_overwrite keeps)."""


@dataclass
class Model:
    """Table state: (partition path, record key) -> (data row, commit instant that last changed it)."""

    spec: Spec
    data_columns: tuple[str, ...]
    rows: dict[tuple[str, str], tuple[dict[str, Any], str]] = field(default_factory=dict)
    history: list[tuple[str, dict[tuple[str, str], tuple[dict[str, Any], str]]]] = field(default_factory=list)

    # -- lookups ------------------------------------------------------------------------------------------
    def locate(self, rk: str) -> str | None:
        """Partition path holding ``rk`` (global index view; first match for a non-global table)."""
        for pp, k in self.rows:
            if k == rk:
                return pp
        return None

    def stored_rows(self) -> list[dict[str, Any]]:
        return [dict(r) for r, _ in self.rows.values()]

    # -- operations ---------------------------------------------------------------------------------------
    def apply(self, operation: str, batch: Sequence[dict[str, Any]], instant: str, *, combine: bool = False) -> None:
        s = self.spec
        if operation in ("insert_overwrite", "insert_overwrite_table"):
            self.check_overwrite(operation, batch)
            records = self._combine(batch, "upsert") if combine else list(batch)
            seen_keys: set[Any] = set()
            for r in records:
                k: Any = s.record_key(r) if s.global_index else (s.partition_path(r), s.record_key(r))
                if k in seen_keys:
                    raise ValueError(f"model: {operation} without combining only takes distinct keys, {k!r} repeats")
                seen_keys.add(k)
            parts = {s.partition_path(r) for r in records}
            self.rows = {
                (pp, rk): v for (pp, rk), v in self.rows.items()
                if operation == "insert_overwrite" and pp not in parts
            }
            for r in records:
                self.rows[(s.partition_path(r), s.record_key(r))] = (dict(r), instant)
        elif operation in ("insert", "bulk_insert"):
            seen: set[str] = set()
            for r in batch:
                rk = s.record_key(r)
                if rk in seen or self.locate(rk) is not None:
                    raise ValueError(f"model: {operation} only takes new keys, {rk!r} is not new")
                seen.add(rk)
                self.rows[(s.partition_path(r), rk)] = (dict(r), instant)
        elif operation in ("upsert", "delete"):
            for r in self._combine(batch, operation):
                self._upsert_one(r, instant) if operation == "upsert" else self._delete_one(r)
        else:
            raise ValueError(operation)
        self.history.append((instant, copy.deepcopy(self.rows)))

    def check_overwrite(self, operation: str, batch: Sequence[dict[str, Any]]) -> None:
        """Raise :class:`Rejected` if an insert_overwrite under a global index would duplicate a key."""
        s = self.spec
        if operation != "insert_overwrite" or not s.global_index:
            return
        parts = {s.partition_path(r) for r in batch}
        for r in batch:
            where = self.locate(s.record_key(r))
            if where is not None and where not in parts:
                raise Rejected(f"key {s.record_key(r)!r} is stored in partition {where!r}")

    def _combine(self, batch: Sequence[dict[str, Any]], operation: str) -> list[dict[str, Any]]:
        s = self.spec
        best: dict[Any, tuple[int, dict[str, Any]]] = {}
        for i, r in enumerate(batch):
            rk = s.record_key(r)
            k: Any = rk if s.global_index else (s.partition_path(r), rk)
            cur = best.get(k)
            if cur is None or operation == "delete" or r[s.ordering_field] >= cur[1][s.ordering_field]:
                best[k] = (i, r)
        return [r for _, r in sorted(best.values(), key=lambda x: x[0])]

    def _wins(self, incoming: dict[str, Any], stored: dict[str, Any]) -> bool:
        f = self.spec.ordering_field
        return not stored[f] > incoming[f]

    def _upsert_one(self, r: dict[str, Any], instant: str) -> None:
        s = self.spec
        rk, pp = s.record_key(r), s.partition_path(r)
        old_pp = self.locate(rk) if s.global_index else (pp if (pp, rk) in self.rows else None)
        if old_pp is None:
            self.rows[(pp, rk)] = (dict(r), instant)
            return
        stored = self.rows[(old_pp, rk)][0]
        if not self._wins(r, stored):
            return
        if old_pp == pp or not s.update_partition_path:
            self.rows[(old_pp, rk)] = (dict(r), instant)
        else:
            del self.rows[(old_pp, rk)]
            self.rows[(pp, rk)] = (dict(r), instant)

    def _delete_one(self, r: dict[str, Any]) -> None:
        s = self.spec
        rk = s.record_key(r)
        pp = self.locate(rk) if s.global_index else s.partition_path(r)
        self.rows.pop((pp, rk), None)  # type: ignore[arg-type]

    # -- expected results -----------------------------------------------------------------------------------
    def snapshot(self, instant: str | None = None) -> list[tuple[Any, ...]]:
        rows = self.rows if instant is None else dict(self.history)[instant]
        return sorted(
            ((rk, pp, *(r[c] for c in self.data_columns)) for (pp, rk), (r, _) in rows.items()), key=_key
        )

    def changed(self, instant: str) -> list[tuple[Any, ...]]:
        """Rows of the snapshot after ``instant`` whose latest version was written by ``instant``."""
        rows = dict(self.history)[instant]
        return sorted(
            (
                (rk, pp, *(r[c] for c in self.data_columns))
                for (pp, rk), (r, t) in rows.items()
                if t == instant
            ),
            key=_key,
        )


def _key(t: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is None, v if v is not None else 0) for v in t)


def table_rows(t: pa.Table, data_columns: Iterable[str]) -> list[tuple[Any, ...]]:
    """Rows of an Arrow table as sorted ``(record key, partition path, *data columns)`` tuples."""
    cols = [RK, PP, *data_columns]
    t = t.select(cols)
    return sorted(zip(*(t.column(c).to_pylist() for c in cols), strict=True), key=_key) if t.num_rows else []
