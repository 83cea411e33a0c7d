"""Key generators: Hudi's record key / partition path rules, and agreement with Java-written fixture tables."""

from __future__ import annotations

import datetime as dt
import decimal
import glob
import posixpath
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pyhudi.errors import ConfigError, InvalidInputError
from pyhudi.io.storage import Storage
from pyhudi.table.keygen import (
    COMPLEX,
    NON_PARTITION,
    SIMPLE,
    KeyGenerator,
    java_float_str,
    to_hudi_strings,
)
from pyhudi.table.partition_path import escape_path_name
from pyhudi.table.properties import read_table_config

RK = "hoodie.datasource.write.recordkey.field"
PP = "hoodie.datasource.write.partitionpath.field"
HIVE = "hoodie.datasource.write.hive_style_partitioning"
ENC = "hoodie.datasource.write.partitionpath.urlencode"
TYPE = "hoodie.table.keygenerator.type"


def kg(**opts: str) -> KeyGenerator:
    names = {"rk": RK, "pp": PP, "hive": HIVE, "enc": ENC, "type": TYPE}
    return KeyGenerator.from_options({names.get(k, k): v for k, v in opts.items()})


def test_simple_key_and_partition() -> None:
    b = pa.table({"id": ["a", "b"], "p": ["2026/11/21", "x"]})
    g = kg(rk="id", pp="p")
    assert g.type_name == SIMPLE and g.record_key_fields == ("id",) and g.partition_fields == ("p",)
    assert g.record_keys(b).to_pylist() == ["a", "b"]
    assert g.partition_paths(b).to_pylist() == ["2026/11/21", "x"]  # a slash makes nested folders
    assert kg(rk="id", pp="p", hive="true").partition_paths(b).to_pylist() == ["p=2026/11/21", "p=x"]
    assert isinstance(g.record_keys(b), pa.StringArray)


def test_value_conversions() -> None:
    b = pa.table(
        {
            "i": pa.array([7, -1], pa.int32()),
            "l": pa.array([2**40, 0], pa.int64()),
            "s": ["x", "y"],
            "d": pa.array([dt.date(2024, 1, 21), dt.date(1969, 12, 31)]),
            "b": [True, False],
            "t": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.UTC)] * 2, pa.timestamp("us", "UTC")),
            "tms": pa.array([1000, 1], pa.timestamp("ms")),
            "dec": pa.array([decimal.Decimal("55.00"), decimal.Decimal("-0.50")], pa.decimal128(15, 2)),
            "dec8": pa.array([decimal.Decimal("0E-8"), decimal.Decimal("1.5")], pa.decimal128(20, 8)),
            "f64": [1.0, 0.1],
            "f32": pa.array([1e10, 0.1], pa.float32()),
            "dict": pa.array(["eu", "us"]).dictionary_encode(),
        }
    )
    conv = {c: to_hudi_strings(b.column(c).chunk(0), c).to_pylist() for c in b.column_names}
    assert conv["i"] == ["7", "-1"]
    assert conv["l"] == [str(2**40), "0"]
    assert conv["d"] == ["2024-01-21", "1969-12-31"]
    assert conv["b"] == ["true", "false"]
    assert conv["t"] == ["1704067200000000", "1704067200000000"]  # epoch micros, as the Avro long
    assert conv["tms"] == ["1000000", "1000"]
    assert conv["dec"] == ["55.00", "-0.50"]
    assert conv["dec8"] == ["0E-8", "1.50000000"]  # java.math.BigDecimal.toString
    assert conv["f64"] == ["1.0", "0.1"]
    assert conv["f32"] == ["1.0E10", "0.1"]
    assert conv["dict"] == ["eu", "us"]


@pytest.mark.parametrize(
    ("value", "java"),
    [
        (1.0, "1.0"),
        (100.0, "100.0"),
        (1e7, "1.0E7"),
        (1234567.5, "1234567.5"),
        (0.001, "0.001"),
        (0.0001, "1.0E-4"),
        (-2.5e-5, "-2.5E-5"),
        (1.2345e20, "1.2345E20"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
        (float("-inf"), "-Infinity"),
        (123.456, "123.456"),
    ],
)
def test_java_double_to_string(value: float, java: str) -> None:
    assert java_float_str(value) == java


def test_complex_key_rules() -> None:
    b = pa.table(
        {
            "a": ["x", None, "", "v"],
            "b": [1, 2, 3, None],
            "p1": ["eu", None, "", "us"],
            "p2": ["q", "r", "s", "t"],
        }
    )
    g = kg(rk="a,b", pp="p1,p2")
    assert g.type_name == COMPLEX
    assert g.record_keys(b).to_pylist() == ["a:x,b:1", "a:__null__,b:2", "a:__empty__,b:3", "a:v,b:__null__"]
    assert g.partition_paths(b).to_pylist() == [
        "eu/q",
        "__HIVE_DEFAULT_PARTITION__/r",
        "__HIVE_DEFAULT_PARTITION__/s",
        "us/t",
    ]
    assert kg(rk="a,b", pp="p1,p2", hive="true").partition_paths(b).to_pylist()[1] == (
        "p1=__HIVE_DEFAULT_PARTITION__/p2=r"
    )


def test_complex_single_field_is_field_prefixed_in_v9() -> None:
    b = pa.table({"id": ["k1"], "p": ["eu"]})
    assert kg(rk="id", pp="p", type="COMPLEX").record_keys(b).to_pylist() == ["id:k1"]
    # table version 8 with the "new encoding" writes the bare value
    g8 = KeyGenerator.from_options(
        {
            RK: "id",
            PP: "p",
            TYPE: "COMPLEX",
            "hoodie.write.table.version": "8",
            "hoodie.write.complex.keygen.new.encoding": "true",
        }
    )
    assert g8.record_keys(b).to_pylist() == ["k1"]


def test_complex_all_null_key_is_an_error() -> None:
    b = pa.table({"a": ["x", None], "b": ["y", ""]})
    with pytest.raises(InvalidInputError, match=r"all null or empty in the input record \(a=None, b=''\)"):
        kg(rk="a,b", pp="").record_keys(b)


def test_non_partitioned() -> None:
    b = pa.table({"id": ["a", "b"], "x": [1, 2]})
    g = kg(rk="id", type="NON_PARTITION")
    assert g.type_name == NON_PARTITION and g.partition_fields == ()
    assert g.partition_paths(b).to_pylist() == ["", ""]
    assert kg(rk="id").type_name == NON_PARTITION  # inferred without partition fields
    assert kg(rk="id,x", type="NON_PARTITION").record_keys(b).to_pylist() == ["id:a,x:1", "id:b,x:2"]


@pytest.mark.parametrize("bad", [None, ""])
def test_null_or_empty_simple_key_names_column_and_record(bad: str | None) -> None:
    # the record by its values: its row number within one of a write's many batches would locate nothing
    b = pa.table({"id": ["a", "b", bad], "p": ["x", "y", "z"]})
    with pytest.raises(InvalidInputError, match=rf"'id' is {'null' if bad is None else 'empty'} in the input record "
                                                rf"\(id={bad!r}, p='z'\)"):
        kg(rk="id", pp="p").record_keys(b)


def test_a_key_longer_than_an_hfile_key_is_an_error() -> None:
    """The record index holds each key as an HFile row key (a Java short of bytes): a key of 32767 UTF-8 bytes is
    made, one of 32768 refused, whether one field's value or a complex key's fields together."""
    fits = "\u00e9" * 16383 + "a"
    assert kg(rk="id", pp="").record_keys(pa.table({"id": ["x", fits]})).to_pylist() == ["x", fits]
    with pytest.raises(InvalidInputError, match=r"record key \(fields \['id'\]\) is 32768 bytes"):
        kg(rk="id", pp="").record_keys(pa.table({"id": ["x", fits + "b"]}))
    with pytest.raises(InvalidInputError, match=r"record key \(fields \['a', 'b'\]\) is 32769 bytes"):
        kg(rk="a,b", pp="").record_keys(pa.table({"a": ["x" * 16380], "b": ["y" * 16384]}))


def test_missing_column() -> None:
    b = pa.table({"id": ["a"]})
    with pytest.raises(InvalidInputError, match="'region'"):
        kg(rk="id", pp="region").partition_paths(b)
    with pytest.raises(InvalidInputError, match="'nope'"):
        kg(rk="nope", pp="id").record_keys(b)


def test_null_and_empty_partition_values_use_default() -> None:
    b = pa.table({"id": ["a", "b", "c"], "p": [None, "", "v"]})
    assert kg(rk="id", pp="p", hive="true").partition_paths(b).to_pylist() == [
        "p=__HIVE_DEFAULT_PARTITION__",
        "p=__HIVE_DEFAULT_PARTITION__",
        "p=v",
    ]


def test_url_encoding_is_hive_escape_path_name() -> None:
    b = pa.table({"id": ["a", "b", "c"], "p": ["2026/11/21", "a b:c=d%", "é#?"]})
    got = kg(rk="id", pp="p", enc="true").partition_paths(b).to_pylist()
    assert got == ["2026%2F11%2F21", "a b%3Ac%3Dd%25", "é%23%3F"]  # space and non-ASCII kept
    assert escape_path_name("\x01[x]^{'\"*\\\x7f") == "%01%5Bx%5D%5E%7B%27%22%2A%5C%7F"


def test_nested_field() -> None:
    b = pa.table({"s": pa.array([{"k": "a"}, {"k": "b"}]), "p": ["x", "y"]})
    assert kg(rk="s.k", pp="p").record_keys(b).to_pylist() == ["a", "b"]


def test_config_errors() -> None:
    with pytest.raises(ConfigError):
        kg(rk="a,b", pp="p", type="SIMPLE")
    with pytest.raises(ConfigError):
        kg(rk="a", pp="p", type="TIMESTAMP")
    with pytest.raises(ConfigError):
        kg(pp="p")
    with pytest.raises(ConfigError):
        kg(rk="a", pp="p", hive="yes")
    with pytest.raises(ConfigError):
        kg(rk="a", pp="p:SIMPLE")


def test_record_batch_and_chunked_input() -> None:
    t = pa.concat_tables([pa.table({"id": ["a"], "p": ["x"]}), pa.table({"id": ["b"], "p": ["y"]})])
    assert kg(rk="id", pp="p").record_keys(t).to_pylist() == ["a", "b"]
    rb = t.to_batches()[0]
    assert kg(rk="id", pp="p").partition_paths(rb).to_pylist() == ["x"]
    empty = t.slice(0, 0)
    assert kg(rk="id", pp="p").record_keys(empty).to_pylist() == []
    assert kg(rk="id", pp="p").partition_paths(empty).to_pylist() == []


def test_keys_match_java_written_fixtures(fixture_tables: dict[str, Path]) -> None:
    """Recompute _hoodie_record_key and _hoodie_partition_path of every fixture base file."""
    checked = 0
    for zip_name, base in fixture_tables.items():
        storage, bp = Storage.from_uri(str(base))
        cfg = read_table_config(storage, posixpath.join(bp, ".hoodie"))
        g = KeyGenerator.from_options(cfg.to_dict())
        for f in glob.glob(str(base / "**" / "*.parquet"), recursive=True):
            if "/.hoodie/" in f:
                continue
            t = pq.read_table(f)
            assert g.record_keys(t).to_pylist() == t.column("_hoodie_record_key").to_pylist(), (zip_name, f)
            assert g.partition_paths(t).to_pylist() == t.column("_hoodie_partition_path").to_pylist(), f
            checked += 1
    assert checked > 50
