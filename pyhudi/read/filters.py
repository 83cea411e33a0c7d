"""Predicates a query hands the reader, and whether a range of values (statistics) can hold a row matching them.

A :class:`Pred` is one conjunct of a query's filter on a top-level column: ``=``, ``<=>``, ``<``, ``<=``, ``>``,
``>=``, ``IN``, ``IS NULL``, ``IS NOT NULL`` and ``StartsWith`` (Spark's data source filters, taken from
:mod:`pyspark.sql.datasource` objects by :func:`from_spark`). Predicates only ever *skip* data -- partitions,
files, row groups -- that cannot hold a matching row; Spark evaluates every filter on the rows that are read, so
a predicate this module cannot judge keeps the data (:func:`may_match` answers True).

Values are compared in one domain each (:func:`comparable`): integers, strings (UTF-8 byte order, which Python's
code-point order equals, as Spark compares them), booleans, decimals, dates (as days) and timestamps with a time
zone (as microseconds). Floating-point columns are never judged (NaN orders above every number in Spark and not
at all in statistics), nor are values of two different domains.
"""

from __future__ import annotations

import datetime as _dt
import decimal
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

EQ, EQ_NULL_SAFE, LT, LE, GT, GE, IN, IS_NULL, NOT_NULL, STARTS_WITH = (
    "=", "<=>", "<", "<=", ">", ">=", "in", "is_null", "not_null", "starts_with")

_SPARK_OPS = {
    "EqualTo": EQ, "EqualNullSafe": EQ_NULL_SAFE, "LessThan": LT, "LessThanOrEqual": LE, "GreaterThan": GT,
    "GreaterThanOrEqual": GE, "In": IN, "IsNull": IS_NULL, "IsNotNull": NOT_NULL, "StringStartsWith": STARTS_WITH,
}


_REPLACEMENT = "\ufffd"  # what a string literal's invalid UTF-8 bytes become in Python
# PySpark hands a data source every date of the Julian calendar's gap (1582-10-05 to 10-14) as 1582-10-15, and a
# time in it on 1582-10-15: a value there may stand for an earlier literal
_GAP_END = _dt.date(1582, 10, 15)


def _known(v: Any) -> bool:
    """Whether a filter value from PySpark is the query's literal (not a string whose bytes were not UTF-8, nor a
    date or time the Julian gap may have moved, nor a decimal PySpark may have rounded: it decodes a literal as
    its unscaled integer times a power of ten in the thread's decimal context, 28 significant digits by default,
    so a literal of ``decimal(38, s)`` with more digits arrives rounded to that many)."""
    if isinstance(v, decimal.Decimal):
        return v.is_finite() and len(v.as_tuple().digits) < decimal.getcontext().prec
    if isinstance(v, str):
        return _REPLACEMENT not in v
    if isinstance(v, _dt.datetime):
        return abs((v.date() - _GAP_END).days) > 1  # the day in any time zone
    if isinstance(v, _dt.date):
        return v != _GAP_END
    return True


@dataclass(frozen=True)
class Pred:
    """``column op value`` (``value``: a tuple for IN, None for the null tests)."""

    column: str
    op: str
    value: Any = None

    def __str__(self) -> str:
        return f"{self.column} {self.op}" + ("" if self.op in (IS_NULL, NOT_NULL) else f" {self.value!r}")


def from_spark(filters: Iterable[Any]) -> list[tuple[Any, Pred | None]]:
    """Each Spark data source filter with the predicate it is (None for one this module does not model: a
    negation, a nested column, ``EndsWith``/``Contains``)."""
    out: list[tuple[Any, Pred | None]] = []
    for f in filters:
        op = _SPARK_OPS.get(type(f).__name__)
        attr = getattr(f, "attribute", None)
        if op is None or not isinstance(attr, tuple) or len(attr) != 1:
            out.append((f, None))
            continue
        value = getattr(f, "value", None)
        if op == IN:
            value = tuple(value or ())
        values = value if isinstance(value, tuple) else (value,)
        if not all(_known(v) for v in values):
            out.append((f, None))  # a literal not known here: it prunes nothing
            continue
        out.append((f, Pred(attr[0], op, value)))
    return out


# -- comparable values ------------------------------------------------------------------------------------------
EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_EPOCH_DAY = _dt.date(1970, 1, 1)


def comparable(v: Any) -> tuple[str, Any] | None:
    """``(domain, value)`` of ``v`` for ordering comparisons, None when ``v`` cannot be judged."""
    if v is None:
        return None
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, int):
        return ("num", v)
    if isinstance(v, decimal.Decimal):
        return ("num", v) if v.is_finite() else None
    if isinstance(v, str):
        return ("str", v)
    if isinstance(v, _dt.datetime):
        if v.tzinfo is None:
            return None  # a time without a zone: which instant it means is not known here
        d = v - EPOCH
        return ("ts", (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds)
    if isinstance(v, _dt.date):
        return ("date", (v - _EPOCH_DAY).days)
    return None


def _cmp(a: tuple[str, Any] | None, b: tuple[str, Any] | None) -> int | None:
    if a is None or b is None or a[0] != b[0]:
        return None
    x, y = a[1], b[1]
    return -1 if x < y else (1 if x > y else 0)


@dataclass(frozen=True)
class Stats:
    """What statistics say of a column in some rows: min and max (None: unknown), null count and row count
    (None: unknown)."""

    min: tuple[str, Any] | None
    max: tuple[str, Any] | None
    null_count: int | None = None
    value_count: int | None = None

    @staticmethod
    def of(lo: Any, hi: Any, null_count: int | None = None, value_count: int | None = None) -> Stats:
        return Stats(comparable(lo), comparable(hi), null_count, value_count)


def may_match(p: Pred, s: Stats) -> bool:
    """False only when no row described by ``s`` can satisfy ``p``."""
    all_null = s.null_count is not None and s.value_count is not None and s.null_count >= s.value_count
    if p.op == IS_NULL:
        return s.null_count is None or s.null_count > 0
    if p.op == NOT_NULL:
        return not all_null
    if all_null and p.op != EQ_NULL_SAFE:
        return False  # a comparison with null is never true
    if p.op == EQ_NULL_SAFE and p.value is None:
        return s.null_count is None or s.null_count > 0
    if p.op in (EQ, EQ_NULL_SAFE):
        return _in_range(comparable(p.value), s)
    if p.op == IN:
        return any(_in_range(comparable(v), s) for v in p.value if v is not None) if p.value else False
    if p.op == STARTS_WITH:
        if not isinstance(p.value, str) or s.min is None or s.max is None or s.min[0] != "str" or s.max[0] != "str":
            return True
        if p.value == "":
            return True
        # some string in [min, max] starts with the prefix iff prefix >= min's prefix part and prefix <= max's
        return s.max[1][: len(p.value)] >= p.value >= s.min[1][: len(p.value)]
    v = comparable(p.value)
    if p.op in (LT, LE):
        c = _cmp(s.min, v)
        return c is None or c < 0 or (c == 0 and p.op == LE)
    if p.op in (GT, GE):
        c = _cmp(s.max, v)
        return c is None or c > 0 or (c == 0 and p.op == GE)
    return True


def _in_range(v: tuple[str, Any] | None, s: Stats) -> bool:
    lo, hi = _cmp(s.min, v), _cmp(s.max, v)
    if lo is not None and lo > 0:
        return False
    return not (hi is not None and hi < 0)


def all_may_match(preds: Sequence[Pred], stats: dict[str, Stats]) -> bool:
    """False when some predicate rules out every row (a column without statistics rules out nothing)."""
    for p in preds:
        s = stats.get(p.column)
        if s is not None and not may_match(p, s):
            return False
    return True


def value_matches(p: Pred, value: Any) -> bool | None:
    """Whether ``value`` (one known, non-null value) satisfies ``p``; None when that cannot be judged."""
    if p.op == IS_NULL:
        return False
    if p.op == NOT_NULL:
        return True
    if p.op == STARTS_WITH:
        return value.startswith(p.value) if isinstance(value, str) and isinstance(p.value, str) else None
    if p.op == IN:
        if not p.value:
            return False
        res = [value_matches(Pred(p.column, EQ, v), value) for v in p.value if v is not None]
        if any(r is True for r in res):
            return True
        return False if all(r is False for r in res) else None
    if p.value is None:
        return False if p.op == EQ_NULL_SAFE else None
    c = _cmp(comparable(value), comparable(p.value))
    if c is None:
        return None
    return {EQ: c == 0, EQ_NULL_SAFE: c == 0, LT: c < 0, LE: c <= 0, GT: c > 0, GE: c >= 0}.get(p.op)
