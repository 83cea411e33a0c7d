"""Random SQL filters over a table's columns, for the differential filter tests: each condition is drawn from the
values the table holds, their neighbours and nulls, so comparisons land on the statistics' boundaries.

A condition is a tree of ``AND``/``OR``/``NOT`` over atoms: ``=``, ``<=>``, ``<``, ``<=``, ``>``, ``>=``, ``!=``,
``IN``, ``NOT IN``, ``BETWEEN``, ``IS [NOT] NULL`` and ``LIKE 'prefix%'``, and ``key = x`` / ``key IN (...)`` on the
record key; a column is named in its own case or in capitals. The expected rows are Spark's own evaluation of the condition over the same rows held in memory, so
no filter semantics (three-valued logic, NaN, ``-0.0 = 0.0``, byte order of strings) are written twice here.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import decimal
import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa


def literal(t: pa.DataType, v: Any) -> str:
    """``v`` as a Spark SQL literal of a type that compares with a column of arrow type ``t``."""
    if v is None:
        return "NULL"
    if pa.types.is_boolean(t):
        return "true" if v else "false"
    if pa.types.is_floating(t):
        if math.isnan(v):
            return "CAST('NaN' AS DOUBLE)"
        if math.isinf(v):
            return "CAST('Infinity' AS DOUBLE)" if v > 0 else "CAST('-Infinity' AS DOUBLE)"
        return f"{float(v)!r}D"
    if pa.types.is_integer(t):
        return f"{int(v)}L" if -2**63 <= v < 2**63 else f"{int(v)}BD"  # beyond a long: a decimal
    if pa.types.is_decimal(t):
        return f"{decimal.Decimal(v)}BD"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'"
    if pa.types.is_timestamp(t):
        assert t.tz is not None, "timestamps with a zone only"
        return f"TIMESTAMP'{v.astimezone(dt.UTC).strftime('%Y-%m-%d %H:%M:%S.%f')}+00:00'"
    if pa.types.is_date(t):
        return f"DATE'{v.isoformat()}'"
    raise TypeError(f"no literal for {t}")


def _neighbours(t: pa.DataType, v: Any) -> list[Any]:
    """Values next to ``v``: just below and above it, and a longer string and a prefix."""
    if v is None:
        return []
    if pa.types.is_integer(t):
        return [v - 1, v + 1]
    if pa.types.is_floating(t):
        return [] if math.isnan(v) or math.isinf(v) else [v - 0.5, v + 0.5]
    if pa.types.is_decimal(t):
        step = decimal.Decimal(1).scaleb(-t.scale)
        return [v - step, v + step, v - step / 2]
    if pa.types.is_string(t):
        return [v + "a", v[:-1]] if v else ["a"]
    if pa.types.is_timestamp(t):
        step = dt.timedelta(microseconds=1)
    elif pa.types.is_date(t):
        step = dt.timedelta(days=1)
    else:
        return []
    out = []
    for sign in (-1, 1):
        with contextlib.suppress(OverflowError):  # beyond the first or last day Python dates hold
            out.append(v + sign * step)
    return out


SUPPORTED = (pa.types.is_boolean, pa.types.is_floating, pa.types.is_integer, pa.types.is_decimal,
             pa.types.is_string, pa.types.is_date)


def fuzzable(t: pa.DataType) -> bool:
    return any(f(t) for f in SUPPORTED) or (pa.types.is_timestamp(t) and t.tz is not None)


class Conditions:
    """Random conditions over ``table``'s columns of the types above (``key``: the record-key column)."""

    def __init__(self, table: pa.Table, key: str, rng: random.Random, *, extra: Mapping[str, Sequence[Any]] = ()):
        self.rng = rng
        self.key = key
        self.types = {f.name: f.type for f in table.schema if fuzzable(f.type)}
        # a key the table holds twice is read from the file group the record index names, which is not every row
        # the snapshot holds (tests/read/test_spark_source.py::test_a_key_written_twice): no condition names it
        held = collections.Counter(table.column(key).to_pylist())
        twice = {k for k, n in held.items() if n > 1}
        self.keys = sorted(k for k in held if k is not None and k not in twice)
        self.pools: dict[str, list[Any]] = {}
        for name, t in self.types.items():
            # each value once (NaN too, and -0.0 beside 0.0), in the same order every run
            values = {repr(v): v for v in sorted(table.column(name).to_pylist(), key=repr)}.values()
            seen = [v for v in values if name != key or v not in twice]
            picked = rng.sample(seen, min(len(seen), 8))
            pool = picked + [n for v in picked for n in _neighbours(t, v)] + list(dict(extra).get(name, ()))
            self.pools[name] = [*pool, None]

    def atom(self) -> str:
        rng = self.rng
        if rng.random() < 0.12 and self.keys:
            ks = rng.sample(self.keys, min(len(self.keys), rng.randint(1, 3))) + (["no-such-key"] * (rng.random() < 0.3))
            ks += [""] * (rng.random() < 0.15)  # a key no record can have (the key generator refuses it)
            t = self.types[self.key]
            if len(ks) == 1:
                return f"{self._name(self.key)} = {literal(t, ks[0])}"
            return f"{self._name(self.key)} IN ({', '.join(literal(t, k) for k in ks)})"
        c = rng.choice(sorted(self.types))
        t, pool = self.types[c], self.pools[c]
        col = self._name(c)
        op = rng.choice(["=", "<=>", "<", "<=", ">", ">=", "!=", "in", "not in", "null", "not null", "between",
                         "like"])
        if op == "null":
            return f"{col} IS NULL"
        if op == "not null":
            return f"{col} IS NOT NULL"
        if op in ("in", "not in"):
            vs = [rng.choice(pool) for _ in range(rng.randint(1, 4))]
            return f"{col} {op.upper()} ({', '.join(literal(t, v) for v in vs)})"
        if op == "between":
            return f"{col} BETWEEN {literal(t, rng.choice(pool))} AND {literal(t, rng.choice(pool))}"
        v = rng.choice(pool)
        if op == "like":
            if not pa.types.is_string(t) or v is None:
                op = "="
            else:
                prefix = v[: rng.randint(0, len(v))].replace("%", r"\%").replace("_", r"\_")
                return f"{col} LIKE {literal(t, prefix + '%')}"
        if v is None and op != "<=>":
            v = rng.choice([x for x in pool if x is not None] or [None])
        return f"{col} {op} {literal(t, v)}"

    def _name(self, c: str) -> str:
        """``c`` quoted, in its own case or in capitals (Spark resolves names regardless of case)."""
        return f"`{c.upper() if self.rng.random() < 0.2 else c}`"

    def condition(self, depth: int = 0) -> str:
        r = self.rng.random()
        if depth < 2 and r < 0.3:
            return f"({self.condition(depth + 1)}) AND ({self.condition(depth + 1)})"
        if depth < 2 and r < 0.45:
            return f"({self.condition(depth + 1)}) OR ({self.condition(depth + 1)})"
        if depth < 2 and r < 0.5:
            return f"NOT ({self.condition(depth + 1)})"
        return self.atom()

    def column(self) -> str:
        return self.rng.choice(sorted(self.types))


def comparable_rows(rows: Sequence[Any], cols: Sequence[str]) -> list[tuple[Any, ...]]:
    """Rows as sortable tuples (floats as their repr)."""
    def norm(v: Any) -> Any:
        return repr(v) if isinstance(v, float) else v  # NaN equals nothing, and -0.0 is not 0.0 here
    return sorted((tuple(norm(r[c]) for c in cols) for r in rows), key=repr)
