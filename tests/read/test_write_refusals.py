"""Writes pyhudi cannot make exactly are refused before anything is written: into merge-on-read tables
record-index builds and the async indexer (API and CLI); into table versions other than 9 (every operation into
the Hudi 1.0 MOR fixture). Every file of the table stays byte for
byte as it was. Reads of a table version pyhudi does not read are refused by name too."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

from pyhudi import Table
from pyhudi import config as C
from pyhudi.cli.main import main as cli_main
from pyhudi.errors import ConfigError, UnsupportedTableError
from pyhudi.table.capabilities import MOR_OPERATIONS
from pyhudi.table.properties import meta_path, read_table_config, update_table_config
from tests.paths import TABLE_ZIPS_DIR
from tests.support.fixtures import unzip_table
from tests.support.storage import LOCAL

MOR = sorted(p.name for p in TABLE_ZIPS_DIR.glob("mor_*.zip"))
MOR_REFUSAL = r"is a MERGE_ON_READ table, and pyhudi does not write one with"
V8_REFUSAL = r"is a MERGE_ON_READ table of version 8 \(Hudi 1\.0\); pyhudi writes table version 9 only"


def refusal(zip_name: str) -> str:
    return V8_REFUSAL if "_v8_" in zip_name else MOR_REFUSAL


def tree_digest(base: str | Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under the table (its metadata table included); folders too."""
    root = Path(base)
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        out[rel] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "<dir>"
    return out


@pytest.fixture
def mor_copies(tmp_path: Path) -> dict[str, str]:
    return {z: str(unzip_table(z, tmp_path)) for z in MOR}


def _input(table: Table) -> pa.Table:
    """A batch shaped like the table's records (one existing key, one new)."""
    t = table.to_arrow().drop_columns([c for c in table.to_arrow().column_names if c.startswith("_hoodie_")])
    first = t.slice(0, 1)
    return pa.concat_tables([first, first])


@pytest.mark.spark
@pytest.mark.parametrize("operation", list(C.OPERATIONS))
def test_writes_pyhudi_does_not_make_on_mor_fixtures_are_refused(spark, mor_copies: dict[str, str], operation: str) -> None:  # type: ignore[no-untyped-def]
    for zip_name, base in mor_copies.items():
        if operation in MOR_OPERATIONS and "_v8_" not in zip_name:
            continue  # written exactly: tests/write/test_mor_writes.py
        before = tree_digest(base)
        table = Table.open(base)
        df = spark.createDataFrame(_input(table))
        opts = {C.RECORDKEY_FIELD: ",".join(table.config.record_key_fields)}
        with pytest.raises(UnsupportedTableError, match=refusal(zip_name)) as e:
            table.write(df, operation, opts)
        assert base in str(e.value) and operation in str(e.value) and "nothing was written" in str(e.value)
        assert tree_digest(base) == before, zip_name


def test_record_index_builds_into_a_mor_fixture_are_refused(mor_copies: dict[str, str]) -> None:
    for zip_name, base in mor_copies.items():
        before = tree_digest(base)
        for concurrent in (False, True):
            with pytest.raises(UnsupportedTableError, match=refusal(zip_name) + r".*building the record index"):
                Table.open(base).build_record_index(concurrent=concurrent)
        from pyhudi.metadata.indexer import AsyncRecordIndexBuilder

        with pytest.raises(UnsupportedTableError, match=refusal(zip_name)):
            t = Table.open(base)
            AsyncRecordIndexBuilder(t.storage, t.base_path).schedule(2)
        assert tree_digest(base) == before, zip_name


def test_cli_writes_into_a_mor_fixture_are_refused(mor_copies: dict[str, str], tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    for zip_name, base in mor_copies.items():
        before = tree_digest(base)
        table = Table.open(base)
        src = tmp_path / f"{zip_name}.parquet"
        pq.write_table(_input(table), src)
        key = ",".join(table.config.record_key_fields)
        writes = [["write", base, "--input", str(src), "--record-key", key, "--operation", "upsert"]]
        for args in ([*(writes if "_v8_" in zip_name else []), ["index", "build", base],
                      ["index", "build", base, "--async"]]):
            res = CliRunner().invoke(cli_main, args)
            assert res.exit_code == 1, args
            assert "is a MERGE_ON_READ table" in res.stderr and "nothing was written" in res.stderr, (args, res.stderr)
        assert tree_digest(base) == before, zip_name


def test_writes_into_table_version_8_are_refused(tmp_path: Path) -> None:
    """A copy-on-write table of version 8 (Hudi 1.0): pyhudi reads it, refuses to write into it."""
    base = str(unzip_table("cow_v9_txns_simple_meta.zip", tmp_path))
    cfg = read_table_config(LOCAL, meta_path(base))
    update_table_config(LOCAL, meta_path(base), {"hoodie.table.version": "8"})
    assert read_table_config(LOCAL, meta_path(base)).table_version == 8 and cfg.is_cow
    before = tree_digest(base)
    table = Table.open(base)
    assert table.to_arrow().num_rows > 0
    with pytest.raises(UnsupportedTableError, match=r"table of version 8 \(Hudi 1\.0\); pyhudi writes table "
                                                    r"version 9 only"):
        table.write(None, "upsert", {})  # type: ignore[arg-type]  # refused before the input is looked at
    with pytest.raises(UnsupportedTableError, match="version 8"):
        table.build_record_index()
    assert tree_digest(base) == before


@pytest.mark.spark
def test_a_table_of_a_version_pyhudi_does_not_read_is_refused(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A table of a later version (10) may lay its files out otherwise: every read refuses it, naming the table and
    its version, instead of reading it as a version 9 table (Hudi refuses a table version it does not know)."""
    from pyhudi.spark import register

    base = str(unzip_table("cow_v9_txns_simple_meta.zip", tmp_path))
    table = Table.open(base)
    first = table.timeline().completed_commits().first()
    assert first is not None
    key = table.to_arrow().column("_hoodie_record_key")[0].as_py()
    update_table_config(LOCAL, meta_path(base), {"hoodie.table.version": "10"})
    table = Table.open(base)
    refused = rf"{base} is a table of version 10; pyhudi reads table versions 8 and 9 only"
    for read in (table.to_arrow, lambda: table.to_arrow(as_of=first.requested_time), lambda: table.read_keys([key]),
                 lambda: table.incremental_arrow("0"), lambda: table.lookup([key])):
        with pytest.raises(UnsupportedTableError, match=refused):
            read()
    register(spark)
    for native in ("true", "false"):  # Spark's parquet reader is not handed the table either
        with pytest.raises(Exception, match=refused):
            spark.read.format("hudi").option("pyhudi.read.spark.parquet", native).load(base).collect()


@pytest.mark.parametrize("key", ["hoodie.table.type", "hoodie.datasource.write.table.type"])
def test_asking_for_a_new_mor_table_creates_one(tmp_path: Path, key: str) -> None:
    t = Table.create(str(tmp_path / "t"), pa.schema([("k", pa.string())]), {C.RECORDKEY_FIELD: "k", key: "MERGE_ON_READ"})
    assert read_table_config(LOCAL, meta_path(t.base_path)).table_type == "MERGE_ON_READ"
    with pytest.raises(ConfigError, match=f"option {key} has unknown value 'MOR'"):
        Table.create(str(tmp_path / "u"), pa.schema([("k", pa.string())]), {C.RECORDKEY_FIELD: "k", key: "MOR"})
    assert not (tmp_path / "u").exists()


def test_mor_type_option_on_an_existing_cow_table_is_refused(tmp_path: Path) -> None:
    base = str(unzip_table("cow_v9_txns_simple_meta.zip", tmp_path))
    before = tree_digest(base)
    with pytest.raises(ConfigError, match=r"hoodie.datasource.write.table.type='MERGE_ON_READ' does not match"):
        Table.open(base).write(None, "upsert", {"hoodie.table.type": "MERGE_ON_READ"})  # type: ignore[arg-type]
    assert tree_digest(base) == before
    shutil.rmtree(base)
