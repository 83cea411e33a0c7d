"""Base files: write -> read round trip, meta columns, footer, parquet options, atomicity; fixture footers."""

from __future__ import annotations

import datetime as dt
import decimal
import glob
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pyhudi.errors import ConfigError, InvalidInputError
from pyhudi.io.storage import Storage
from pyhudi.table.base_file import (
    META_COLUMNS,
    ParquetOptions,
    dictionary_columns,
    read_base_file,
    read_footer,
    write_base_file,
)
from pyhudi.table.filenames import make_base_file_name

INSTANT = "20260307162434124"
FID = "5a226868-2934-4f84-a16f-55124630c68d-0"


def sample(n: int = 5) -> pa.Table:
    return pa.table(
        {
            "txn_id": [f"TXN-{i:03d}" for i in range(n)],
            "amount": pa.array([decimal.Decimal(f"{i}.50") for i in range(n)], pa.decimal128(15, 2)),
            "ts": pa.array(
                [dt.datetime(2024, 1, 1) + dt.timedelta(seconds=i) for i in range(n)],
                pa.timestamp("ns", "UTC"),
            ),
            "d": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(n)]),
            "name": pa.array([f"n{i}" for i in range(n)], pa.large_string()),
            "region": ["eu"] * n,
        }
    )


def write(tmp_path: Path, data: pa.Table, **kw: object) -> tuple[Storage, str, object]:
    storage, base = Storage.from_uri(str(tmp_path))
    name = make_base_file_name(FID, "2-26-56", INSTANT)
    path = f"{base}/region=eu/{name}"
    res = write_base_file(
        storage,
        path,
        data,
        instant_time=INSTANT,
        partition_path="region=eu",
        record_keys=data.column("txn_id") if "txn_id" in data.column_names else None,
        task_partition_id=2,
        **kw,  # type: ignore[arg-type]
    )
    return storage, path, res


def test_round_trip_meta_columns_and_footer(tmp_path: Path) -> None:
    data = sample()
    storage, path, res = write(tmp_path, data)
    t = read_base_file(storage, path)
    assert t.column_names[:5] == list(META_COLUMNS)
    assert t.column_names[5:] == data.column_names
    assert t.column("_hoodie_commit_time").to_pylist() == [INSTANT] * 5
    assert t.column("_hoodie_commit_seqno").to_pylist() == [f"{INSTANT}_2_{i}" for i in range(5)]
    assert t.column("_hoodie_record_key").to_pylist() == data.column("txn_id").to_pylist()
    assert t.column("_hoodie_partition_path").to_pylist() == ["region=eu"] * 5
    assert t.column("_hoodie_file_name").to_pylist() == [os.path.basename(path)] * 5
    assert t.column("amount").to_pylist() == data.column("amount").to_pylist()
    assert t.column("ts").type == pa.timestamp("us", "UTC")
    assert t.column("ts").to_pylist() == data.column("ts").cast(pa.timestamp("us", "UTC")).to_pylist()
    assert t.column("name").type == pa.string()
    footer = read_footer(storage, path)
    assert (footer.min_key, footer.max_key, footer.num_rows) == ("TXN-000", "TXN-004", 5)
    assert footer.bloom_type_code == "DYNAMIC_V0"
    bf = footer.bloom()
    assert bf is not None and bool(bf.might_contain_many(["TXN-000", "TXN-004"]).all())
    assert res.num_rows == 5 and res.min_record_key == "TXN-000" and res.size_bytes == os.path.getsize(path)  # type: ignore[attr-defined]
    # Spark-compatible physical types, pyhudi's default codec (Apache Hudi's for Spark 3.5+ writers)
    pf = pq.ParquetFile(path)
    schema = pf.schema
    assert schema.column(list(pf.schema_arrow.names).index("ts")).physical_type == "INT64"
    assert schema.column(list(pf.schema_arrow.names).index("amount")).physical_type == "FIXED_LEN_BYTE_ARRAY"
    assert pf.metadata.row_group(0).column(0).compression == "ZSTD"
    assert b"ARROW:schema" not in (pf.metadata.metadata or {})
    assert os.listdir(os.path.dirname(path)) == [os.path.basename(path)]  # no temp file left


def test_filter_keys_and_columns(tmp_path: Path) -> None:
    storage, path, _ = write(tmp_path, sample(50), options={"hoodie.parquet.block.size": "2000"})
    assert pq.ParquetFile(path).metadata.num_row_groups > 1
    t = read_base_file(
        storage, path, columns=["_hoodie_record_key", "amount"], filter_keys=["TXN-003", "TXN-040", "X"]
    )
    assert t.column_names == ["_hoodie_record_key", "amount"]
    assert sorted(t.column("_hoodie_record_key").to_pylist()) == ["TXN-003", "TXN-040"]
    with pytest.raises(InvalidInputError):
        read_base_file(storage, path, columns=["nope"])


def test_existing_meta_columns_are_kept(tmp_path: Path) -> None:
    storage, path, _ = write(tmp_path, sample(3))
    old = read_base_file(storage, path)
    old = old.set_column(0, "_hoodie_commit_time", pa.array(["20250101000000000", None, None]))
    old = old.set_column(1, "_hoodie_commit_seqno", pa.array(["20250101000000000_0_7", None, None]))
    storage2, base2 = Storage.from_uri(str(tmp_path / "b"))
    name = make_base_file_name(FID, "0-1-2", "20260307162434999")
    res = write_base_file(
        storage2, f"{base2}/{name}", old, instant_time="20260307162434999", partition_path=""
    )
    t = read_base_file(storage2, res.path)
    assert t.column("_hoodie_commit_time").to_pylist() == [
        "20250101000000000",
        "20260307162434999",
        "20260307162434999",
    ]
    assert t.column("_hoodie_commit_seqno").to_pylist()[0] == "20250101000000000_0_7"
    assert t.column("_hoodie_commit_seqno").to_pylist()[1] == "20260307162434999_0_1"
    assert set(t.column("_hoodie_file_name").to_pylist()) == {name}


def test_options(tmp_path: Path) -> None:
    _, path, _ = write(
        tmp_path,
        sample(),
        options={"hoodie.parquet.compression.codec": "snappy", "hoodie.bloom.index.filter.type": "SIMPLE"},
    )
    pf = pq.ParquetFile(path)
    assert pf.metadata.row_group(0).column(0).compression == "SNAPPY"
    assert b"hoodie_bloom_filter_type_code" not in pf.metadata.metadata
    with pytest.raises(ConfigError):
        ParquetOptions.from_options({"hoodie.parquet.compression.codec": "lzo2"})
    assert ParquetOptions.from_options({}).compression == "zstd"


def test_avro_schema_and_extra_metadata(tmp_path: Path) -> None:
    storage, path, _ = write(tmp_path, sample(), avro_schema='{"type":"record"}', extra_metadata={"x": "y"})
    md = read_footer(storage, path).metadata
    assert (
        md["parquet.avro.schema"] == '{"type":"record"}'
        and md["writer.model.name"] == "avro"
        and md["x"] == "y"
    )


def test_errors(tmp_path: Path) -> None:
    storage, base = Storage.from_uri(str(tmp_path))
    with pytest.raises(InvalidInputError):
        write_base_file(storage, f"{base}/bad.parquet", sample(), instant_time=INSTANT, partition_path="")
    name = make_base_file_name(FID, "0-0-0", INSTANT)
    with pytest.raises(InvalidInputError, match="record keys"):
        write_base_file(
            storage,
            f"{base}/{name}",
            sample().drop_columns(["txn_id"]),
            instant_time=INSTANT,
            partition_path="",
        )
    with pytest.raises(InvalidInputError, match="row 1"):
        write_base_file(
            storage,
            f"{base}/{name}",
            sample(2),
            record_keys=["a", None],
            instant_time=INSTANT,
            partition_path="",
        )  # type: ignore[list-item]
    assert not os.path.exists(f"{base}/{name}")
    assert os.listdir(tmp_path) == []


def test_empty_file(tmp_path: Path) -> None:
    storage, path, _ = write(tmp_path, sample(0))
    assert read_base_file(storage, path).num_rows == 0
    f = read_footer(storage, path)
    assert f.num_rows == 0 and f.min_key is None and f.bloom_filter is not None


def test_dictionary_where_it_pays(tmp_path: Path) -> None:
    n = 3000
    data = pa.table({
        "txn_id": [f"TXN-{i:05d}" for i in range(n)],
        "region": ["eu", "us", "apac"] * (n // 3),
        "amount": pa.array([float(i) for i in range(n)]),
        "qty": pa.array([i % 4 for i in range(n)], pa.int64()),
        "flag": [i % 2 == 0 for i in range(n)],
        "fee": pa.array([decimal.Decimal("0.50")] * n, pa.decimal128(10, 2)),
        "empty": pa.nulls(n, pa.string()),
    })
    storage, path, _ = write(tmp_path, data)
    with_meta = read_base_file(storage, path)
    # unique keys, sequence numbers and amounts plain, as parquet-mr writes them; repeated values dictionary encoded
    chosen = dictionary_columns(with_meta)
    assert chosen == ["_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_file_name", "region", "qty", "empty"]
    md = pq.ParquetFile(path).metadata.row_group(0)
    dict_cols = {md.column(i).path_in_schema for i in range(md.num_columns) if md.column(i).has_dictionary_page}
    assert dict_cols == set(chosen)
    assert read_base_file(storage, path).equals(with_meta)
    assert dictionary_columns(pa.table({"s": pa.array([{"a": 1}]), "k": ["x"]})) is True
    _, path2, _ = write(tmp_path, data.slice(0, 10), options={"hoodie.parquet.dictionary.enabled": "false"})
    md2 = pq.ParquetFile(path2).metadata.row_group(0)
    assert not any(md2.column(i).has_dictionary_page for i in range(md2.num_columns))


def test_dictionary_choice_for_other_types() -> None:
    n = 40
    t = pa.table({
        "ts": pa.array([dt.datetime(2024, 1, 1)] * n, pa.timestamp("us", "UTC")),
        "d": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(n)]),
        "u": pa.array([bytes([i]) * 16 for i in range(n)], pa.uuid()),
        "nothing": pa.nulls(n),
        "chunked": pa.chunked_array([["é✓"] * 3, ["x"] * (n - 2)]).slice(1),
    })
    # repeated timestamps and strings dictionary, distinct dates plain, an extension type left to Arrow's default
    assert dictionary_columns(t) == ["ts", "u", "chunked"]
    assert dictionary_columns(t.slice(0, 0)) == ["ts", "d", "u", "chunked"]
    empty = pa.table({"s": pa.chunked_array([], pa.string())})
    assert dictionary_columns(empty) == ["s"]


def test_fixture_dictionary_choice(fixture_tables: dict[str, Path]) -> None:
    # the columns Apache Hudi's parquet-mr writer dictionary encoded in the fixtures' small files are the ones chosen
    same = n = 0
    for base in fixture_tables.values():
        for f in glob.glob(str(base / "**" / "*.parquet"), recursive=True):
            if "/.hoodie/" in f:
                continue
            pf = pq.ParquetFile(f)
            if pf.metadata.num_row_groups != 1 or pf.metadata.num_rows < 2:
                continue
            md = pf.metadata.row_group(0)
            java = [md.column(i).path_in_schema for i in range(md.num_columns) if md.column(i).has_dictionary_page]
            chosen = dictionary_columns(pf.read())
            n += 1
            same += chosen == java
    assert n > 50 and same == n, (same, n)


def test_fixture_footers(fixture_tables: dict[str, Path]) -> None:
    n = 0
    for base in fixture_tables.values():
        for f in glob.glob(str(base / "**" / "*.parquet"), recursive=True):
            if "/.hoodie/" in f:
                continue
            storage, path = Storage.from_uri(f)
            footer = read_footer(storage, path)
            keys = read_base_file(storage, path, columns=["_hoodie_record_key"]).column(0).to_pylist()
            assert footer.num_rows == len(keys)
            assert (footer.min_key, footer.max_key) == (min(keys), max(keys))
            bf = footer.bloom(f)
            assert bf is not None and bool(bf.might_contain_many(keys).all())
            one = read_base_file(storage, path, filter_keys=[keys[0]])
            assert one.column("_hoodie_record_key").to_pylist() == [keys[0]]
            n += 1
    assert n > 50
