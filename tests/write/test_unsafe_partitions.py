"""Record values never choose where a write puts files: a partition value that would make an unsafe path fails
the write with a clear error and nothing is written anywhere (no partition folder, no partition metafile, no
instant, no metadata table); with url-encoding or Hive-style names the values that become safe folder names are
written, and every file lands under the table. Checked by listing (with hashes) the whole folder around the
table before and after."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pyhudi.errors import InvalidInputError
from pyhudi.table.keygen import KeyGenerator
from pyhudi.table.partition_path import partition_path_problem
from pyhudi.table.table import Table
from tests.support.robust import run_cli
from tests.support.tree import snapshot

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.string()), ("p", pa.string()), ("q", pa.string()), ("ts", pa.int64())])
URLENCODE = "hoodie.datasource.write.partitionpath.urlencode"
HIVE = "hoodie.datasource.write.hive_style_partitioning"
ABSOLUTE = "/abs/path"  # as in the report; must not appear at the root of the filesystem
BAD_VALUES = ["../x", "a/../../b", "..", ".", ABSOLUTE, "..\\x", "a\x00b", "x" * 1000, "<tmp-absolute>"]
STYLES = {
    "plain": {"hoodie.datasource.write.partitionpath.field": "p"},
    "hive": {"hoodie.datasource.write.partitionpath.field": "p", HIVE: "true"},
    "multi": {"hoodie.datasource.write.partitionpath.field": "q,p"},
}


def _options(style: str, encode: bool) -> dict[str, str]:
    return {"hoodie.datasource.write.recordkey.field": "id", "hoodie.table.ordering.fields": "ts",
            URLENCODE: str(encode).lower(), **STYLES[style]}


def _records(values: list[str], start: int = 0) -> pa.Table:
    n = len(values)
    return pa.table({"id": [f"k{start + i}" for i in range(n)], "p": values, "q": ["z"] * n,
                     "ts": pa.array([1] * n, pa.int64())}, schema=SCHEMA)


def _expected_error(opts: dict[str, str], value: str) -> str | None:
    """The message of the key generator run locally (None: the value makes a safe path under these options)."""
    try:
        KeyGenerator.from_options(opts).partition_paths(_records(["ok", value]))
    except InvalidInputError as e:
        return str(e)
    return None


def _check_outside(root: Path, table: Path, before: dict[str, str]) -> None:
    """Nothing under ``root`` outside the table changed (``before``: :func:`snapshot` of ``root``)."""
    rel = str(table.relative_to(root))

    def outside(snap: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in snap.items() if k != rel and not k.startswith(rel + "/") and not rel.startswith(k + "/")}

    assert outside(snapshot(root)) == outside(before)
    assert not os.path.exists("/abs"), "a file landed at the root of the filesystem"


@pytest.fixture(autouse=True)
def _no_abs_folder() -> None:
    if os.path.exists("/abs"):
        pytest.skip("/abs exists on this machine: the absolute-path check would not be meaningful")


@pytest.mark.parametrize("operation", ["upsert", "bulk_insert"])
def test_report_scenario(spark, tmp_path: Path, operation: str) -> None:  # type: ignore[no-untyped-def]
    """The report: values ok, ../../escaped and /abs/path in one upsert (or bulk insert, whose write tasks make
    the record keys). Refused, nothing written; then, in a table created with url-encoding, the three values are
    written as safe folders under the table."""
    parent = tmp_path / "a" / "b"
    parent.mkdir(parents=True)
    values = ["ok", "../../escaped", ABSOLUTE]
    opts = _options("plain", False)
    table = Table.create(str(parent / "t"), SCHEMA, opts)
    before = snapshot(tmp_path)
    # the first unsafe value in the input's order (a bulk insert finds them among the distinct values, sorted)
    with pytest.raises(InvalidInputError, match=re.escape(
        "partition column 'p' has the value '../../escaped', which makes the partition path '../../escaped' that "
        f"has a '..' segment; a table created with {URLENCODE}=true stores such values url-encoded"
    )):
        table.write(spark.createDataFrame(_records(values)), operation, opts)
    assert snapshot(tmp_path) == before
    assert not os.path.exists("/abs")

    enc = _options("plain", True)
    encoded = Table.create(str(parent / "u"), SCHEMA, enc)
    before = snapshot(tmp_path)
    r = encoded.write(spark.createDataFrame(_records(values)), operation, enc)
    assert (r.inserted, r.partitions) == (3, 3)
    _check_outside(tmp_path, parent / "u", before)
    assert sorted(p.name for p in (parent / "u").iterdir()) == sorted(
        [".hoodie", "%2Fabs%2Fpath", "..%2F..%2Fescaped", "ok"])
    got = Table.open(str(parent / "u")).to_arrow()
    assert sorted(zip(got.column("p").to_pylist(), got.column("_hoodie_partition_path").to_pylist(), strict=True)) == [
        ("../../escaped", "..%2F..%2Fescaped"), ("/abs/path", "%2Fabs%2Fpath"), ("ok", "ok")]


@pytest.mark.slow
@pytest.mark.parametrize("encode", [False, True], ids=["raw", "urlencoded"])
@pytest.mark.parametrize("style", list(STYLES))
def test_every_unsafe_value_every_style(spark, tmp_path: Path, style: str, encode: bool) -> None:  # type: ignore[no-untyped-def]
    parent = tmp_path / "around"
    (parent / "sibling").mkdir(parents=True)
    (parent / "sibling" / "keep.txt").write_text("keep")
    base = parent / "t"
    opts = _options(style, encode)
    values = [str(tmp_path / "abs" / "path") if v == "<tmp-absolute>" else v for v in BAD_VALUES]
    table = Table.create(str(base), SCHEMA, opts)
    accepted = []
    for i, value in enumerate(values):
        expected = _expected_error(opts, value)
        if expected is None:
            accepted.append(value)
            continue
        before = snapshot(tmp_path)
        df = spark.createDataFrame(_records(["ok", value, "fine"], start=10 * i))
        with pytest.raises(InvalidInputError) as info:
            table.write(df, "upsert", opts)
        assert str(info.value) == expected
        assert "\n" not in str(info.value)
        assert snapshot(tmp_path) == before, value  # nothing anywhere: no folder, metafile, instant, metadata table
        assert not os.path.exists("/abs")
    assert not (base / ".hoodie" / "metadata").exists()
    assert list(Table.open(str(base)).timeline()) == []
    # what each style/encoding accepts (checked for safety below)
    if not encode and style != "hive":
        assert accepted == []
    refused = set(values) - set(accepted)
    if encode:
        assert refused == ({"x" * 1000} if style == "hive" else {"..", ".", "x" * 1000})
    elif style == "hive":  # field=value folders: only what stays unsafe after the prefix
        assert refused == {"a/../../b", "..\\x", "a\x00b", "x" * 1000}
    if not accepted:
        return
    before = snapshot(tmp_path)
    r = table.write(spark.createDataFrame(_records(["ok", *accepted])), "upsert", opts)
    assert r.inserted == len(accepted) + 1
    _check_outside(tmp_path, base, before)
    assert not (tmp_path / "abs").exists()  # the absolute value became a folder name under the table
    got = Table.open(str(base)).to_arrow()
    assert sorted(got.column("p").to_pylist()) == sorted(["ok", *accepted])
    for part in set(got.column("_hoodie_partition_path").to_pylist()):
        assert partition_path_problem(part) is None, part
        assert (base / part / ".hoodie_partition_metadata").is_file()


@pytest.mark.slow
def test_cli_refuses_and_writes_nothing(tmp_path: Path) -> None:
    parent = tmp_path / "around"
    parent.mkdir()
    base = parent / "t"
    Table.create(str(base), SCHEMA, _options("plain", False))
    src = tmp_path / "in.parquet"
    pq.write_table(_records(["ok", "../../x"]), src)
    before = snapshot(tmp_path)
    r = run_cli("write", str(base), "--input", str(src), "--record-key", "id", "--partition-field", "p",
                "--ordering-field", "ts")
    assert r.returncode == 1, r.stderr[-2000:]
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("error: partition column 'p' has the value '../../x'"), r.stderr[-2000:]
    assert URLENCODE in last
    assert snapshot(tmp_path) == before
