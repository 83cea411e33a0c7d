"""Predicates against statistics and partition values: a range, a partition or a key is ruled out only when no
row in it can match (a value that cannot be judged rules nothing out)."""

from __future__ import annotations

import datetime as dt
import decimal
from dataclasses import dataclass

import pyarrow as pa
import pytest

from pyhudi.read.filters import (
    EQ,
    EQ_NULL_SAFE,
    GE,
    GT,
    IN,
    IS_NULL,
    LE,
    LT,
    NOT_NULL,
    STARTS_WITH,
    Pred,
    Stats,
    from_spark,
    may_match,
    value_matches,
)
from pyhudi.read.pruning import partition_values, record_keys
from pyhudi.table.properties import TableConfig

S = Stats.of(10, 20, null_count=0, value_count=5)


@pytest.mark.parametrize(("op", "value", "want"), [
    (EQ, 10, True), (EQ, 20, True), (EQ, 9, False), (EQ, 21, False),
    (LT, 10, False), (LT, 11, True), (LE, 10, True), (LE, 9, False),
    (GT, 20, False), (GT, 19, True), (GE, 20, True), (GE, 21, False),
    (IN, (1, 2, 30), False), (IN, (1, 15), True), (IN, (None,), False),
    (IS_NULL, None, False), (NOT_NULL, None, True), (EQ_NULL_SAFE, None, False), (EQ_NULL_SAFE, 12, True),
    (EQ, 1.5, True),  # a float is never judged
    (EQ, "15", True),  # nor a value of another domain
])
def test_ranges(op: str, value: object, want: bool) -> None:
    assert may_match(Pred("c", op, value), S) is want


def test_nulls_strings_dates_and_unknown_statistics() -> None:
    all_null = Stats.of(None, None, null_count=5, value_count=5)
    assert not may_match(Pred("c", EQ, 1), all_null) and may_match(Pred("c", IS_NULL), all_null)
    assert not may_match(Pred("c", NOT_NULL), all_null)
    assert may_match(Pred("c", EQ, 1), Stats.of(None, None))  # nothing known
    s = Stats.of("apple", "melon")
    assert may_match(Pred("c", STARTS_WITH, "b"), s) and may_match(Pred("c", STARTS_WITH, "me"), s)
    assert not may_match(Pred("c", STARTS_WITH, "n"), s) and not may_match(Pred("c", STARTS_WITH, "a0"), s)
    assert may_match(Pred("c", STARTS_WITH, "ap"), s)
    # UTF-8 byte order is code point order
    assert not may_match(Pred("c", GT, "\u00e9"), Stats.of("a", "z"))
    d = Stats.of(dt.date(2024, 1, 1), dt.date(2024, 1, 31))
    assert not may_match(Pred("c", GT, dt.date(2024, 2, 1)), d) and may_match(Pred("c", EQ, dt.date(2024, 1, 9)), d)
    utc = dt.UTC
    ts = Stats.of(dt.datetime(2024, 1, 1, tzinfo=utc), dt.datetime(2024, 1, 2, tzinfo=utc))
    assert not may_match(Pred("c", LT, dt.datetime(2023, 12, 31, 23, tzinfo=utc)), ts)
    assert may_match(Pred("c", LT, dt.datetime(2023, 12, 31, 23)), ts)  # no time zone: not judged
    dec = Stats.of(decimal.Decimal("1.50"), decimal.Decimal("9.99"))
    assert not may_match(Pred("c", GT, decimal.Decimal("10")), dec) and may_match(Pred("c", EQ, 5), dec)


def test_value_matches() -> None:
    assert value_matches(Pred("p", EQ, "us"), "us") is True
    assert value_matches(Pred("p", EQ, "us"), "eu") is False
    assert value_matches(Pred("p", IN, ("us", "eu")), "eu") is True
    assert value_matches(Pred("p", GE, 5), 4) is False
    assert value_matches(Pred("p", GE, 5.0), 4) is None
    assert value_matches(Pred("p", IS_NULL), "x") is False


@dataclass
class _F:  # stands for pyspark.sql.datasource filters, which are matched by class name
    attribute: tuple[str, ...]
    value: object = None


def test_from_spark() -> None:
    EqualTo = type("EqualTo", (_F,), {})
    Not = type("Not", (), {})
    got = from_spark([EqualTo(("a",), 1), EqualTo(("s", "x"), 2), Not()])
    assert got[0][1] == Pred("a", EQ, 1) and got[1][1] is None and got[2][1] is None


def test_from_spark_leaves_out_decimals_pyspark_may_have_rounded() -> None:
    """PySpark decodes a literal's unscaled value times a power of ten in the default decimal context (28
    significant digits): a literal of more digits reaches the source rounded, and pruning with it would lose the
    rows equal to the real literal; such a value prunes nothing (Spark evaluates the filter)."""
    EqualTo = type("EqualTo", (_F,), {})
    In = type("In", (_F,), {})
    rounded = decimal.Decimal(123456789012345678901234567890) * decimal.Decimal(10) ** -10  # what PySpark hands
    assert len(rounded.as_tuple().digits) == 28 and rounded != decimal.Decimal("12345678901234567890.1234567890")
    exact = decimal.Decimal("1234567890123456789012345.67")  # 27 digits: exact in the default context
    got = from_spark([EqualTo(("d",), rounded), In(("d",), (exact, rounded)), EqualTo(("d",), exact)])
    assert got[0][1] is None and got[1][1] is None and got[2][1] == Pred("d", EQ, exact)


def test_partition_values() -> None:
    assert partition_values("2026/06/01", ["dt"], hive_style=False, url_encode=False) == {"dt": "2026/06/01"}
    assert partition_values("dt=2026/06/01", ["dt"], hive_style=True, url_encode=False) == {"dt": "2026/06/01"}
    assert partition_values("region=us/city=sf", ["region", "city"], hive_style=True, url_encode=False) == \
        {"region": "us", "city": "sf"}
    assert partition_values("us/sf", ["region", "city"], hive_style=False, url_encode=False) == \
        {"region": "us", "city": "sf"}
    assert partition_values("us/sf/x", ["region", "city"], hive_style=False, url_encode=False) is None
    assert partition_values("a%2Fb", ["p"], hive_style=False, url_encode=True) == {"p": "a/b"}
    assert partition_values("__HIVE_DEFAULT_PARTITION__", ["p"], hive_style=False, url_encode=False) == {}


@dataclass
class _Table:
    config: TableConfig


def test_record_keys_follow_the_key_generator() -> None:
    schema = pa.schema([("a", pa.string()), ("b", pa.int64()), ("p", pa.string())])
    simple = _Table(TableConfig.create("t", record_key_fields=["a"], partition_fields=["p"]))
    assert record_keys(simple, schema, [Pred("a", IN, ("x", "y")), Pred("a", EQ, "x")]) == ["x"]
    assert record_keys(simple, schema, [Pred("a", GT, "x")]) is None
    assert record_keys(simple, schema, [Pred("a", EQ, "x"), Pred("a", EQ, "y")]) == []
    composite = _Table(TableConfig.create("t", record_key_fields=["a", "b"], partition_fields=["p"]))
    assert record_keys(composite, schema, [Pred("a", EQ, "x"), Pred("b", IN, (2, 1))]) == ["a:x,b:1", "a:x,b:2"]
    assert record_keys(composite, schema, [Pred("a", EQ, "x")]) is None
    # a key the key generator refuses (empty) is held by no record; the others still prune
    assert record_keys(simple, schema, [Pred("a", IN, ("x", ""))]) == ["x"]
    assert record_keys(simple, schema, [Pred("a", EQ, "")]) == []
    assert record_keys(composite, schema, [Pred("a", IN, ("", "x")), Pred("b", EQ, 1)]) == ["a:__empty__,b:1",
                                                                                           "a:x,b:1"]
    # a key longer than pyhudi writes may be held by a table without a record index: it is looked for
    long = "y" * 40000
    assert record_keys(simple, schema, [Pred("a", IN, ("x", long))]) == ["x", long]
    # Spark holds NaN = NaN: two predicates that both admit NaN pin the NaN key (their intersection was empty)
    doubles = pa.schema([("d", pa.float64()), ("p", pa.string())])
    by_double = _Table(TableConfig.create("t", record_key_fields=["d"], partition_fields=["p"]))
    nan = float("nan")
    assert record_keys(by_double, doubles, [Pred("d", EQ, nan), Pred("d", IN, (float("nan"), 1.0))]) == ["NaN"]
    assert record_keys(by_double, doubles, [Pred("d", IN, (nan, 1.0)), Pred("d", IN, (float("nan"), 2.0))]) == ["NaN"]
