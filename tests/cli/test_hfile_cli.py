"""The ``pyhudi hfile`` and ``pyhudi bench hfile`` commands, run as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pyhudi.cli.main import main
from pyhudi.hfile import HFileReader
from tests.paths import HFILE_VECTORS as VECTORS

GZ_20000 = VECTORS / "hudi_1_0_hbase_2_4_9_16KB_GZ_20000.hfile"


def run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, list(args))
    return res.exit_code, res.output


def test_dump_json_has_entries() -> None:
    code, out = run("hfile", "dump", str(GZ_20000), "--json")
    assert code == 0, out
    d = json.loads(out.strip().splitlines()[-1])
    assert d["entries"] == 20000
    assert d["data_blocks"] == 72
    assert d["index"]["levels"] == 1
    assert d["file_info"]["hudi_hfile_testing.custom_key"] == "hudi_custom_value"
    assert d["meta_blocks"] == ["bloomFilter"]


def test_dump_text() -> None:
    code, out = run("hfile", "dump", str(VECTORS / "hudi_1_0_hbase_2_4_13_1KB_GZ_10000_large_keys_deep_index.hfile"))
    assert code == 0, out
    assert "entries: 10000" in out
    assert "3 level(s)" in out


def test_get_json_found_and_absent() -> None:
    code, out = run("hfile", "get", str(GZ_20000), "hudi-key-000000042", "hudi-key-x", "--json")
    assert code == 0, out
    assert json.loads(out) == [
        {"key": "hudi-key-000000042", "value": "hudi-value-000000042"},
        {"key": "hudi-key-x", "value": None},
    ]


def test_write_sorts_and_reads_back(tmp_path: Path) -> None:
    src = tmp_path / "kv.parquet"
    pq.write_table(
        pa.table({"key": ["b", "c", "a"], "value": pa.array([b"2", b"\xff\xfe", b"1"], pa.binary())}), src
    )
    out = tmp_path / "out.hfile"
    code, text = run("hfile", "write", str(out), "--input", str(src), "--codec", "none", "--block-size", "64")
    assert code == 0, text
    with HFileReader.from_uri(str(out)) as r:
        assert r.read_all().to_pydict() == {"key": [b"a", b"b", b"c"], "value": [b"1", b"2", b"\xff\xfe"]}
        assert r.codec_name == "none"
    code, text = run("hfile", "get", str(out), "c", "a", "--json")
    assert json.loads(text) == [{"key": "c", "value_base64": "//4="}, {"key": "a", "value": "1"}]


def test_write_refuses_duplicates(tmp_path: Path) -> None:
    src = tmp_path / "kv.parquet"
    pq.write_table(pa.table({"key": ["a", "b", "a"], "value": pa.array([b"1", b"2", b"3"], pa.binary())}), src)
    out = tmp_path / "out.hfile"
    code, text = run("hfile", "write", str(out), "--input", str(src))
    assert code == 1
    assert "duplicate key" in text and "b'a'" in text
    assert not out.exists()


def test_write_refuses_missing_column(tmp_path: Path) -> None:
    src = tmp_path / "kv.parquet"
    pq.write_table(pa.table({"k": ["a"], "value": pa.array([b"1"], pa.binary())}), src)
    code, text = run("hfile", "write", str(tmp_path / "o.hfile"), "--input", str(src))
    assert code == 1
    assert "key" in text and str(src) in text


def test_error_names_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.hfile"
    bad.write_bytes(b"x" * 5000)
    code, text = run("hfile", "dump", str(bad))
    assert code == 1
    assert str(bad) in text and "trailer" in text


def test_console_script_bench_json() -> None:
    exe = Path(sys.executable).with_name("pyhudi")
    if not exe.exists():
        pytest.skip("console script not installed in this environment")
    out = subprocess.run(
        [str(exe), "bench", "hfile", "--entries", "20000", "--lookups", "2000", "--repeat", "1", "--json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    d = json.loads(out.strip().splitlines()[-1])
    assert set(d) >= {"entries", "write_s", "lookup_ms", "scan_entries_per_s", "file_bytes", "bytes_per_entry"}
    assert d["entries"] == 20000


def test_the_command_leaves_the_callers_environment_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command quiets Spark's failed-task logs only for the sessions it starts itself."""
    from pyhudi.spark.session import ENV_QUIET_TASK_FAILURES

    monkeypatch.delenv(ENV_QUIET_TASK_FAILURES, raising=False)
    assert run("hfile", "dump", str(GZ_20000), "--json")[0] == 0
    assert ENV_QUIET_TASK_FAILURES not in os.environ
    monkeypatch.setenv(ENV_QUIET_TASK_FAILURES, "0")
    assert run("hfile", "dump", str(GZ_20000), "--json")[0] == 0
    assert os.environ[ENV_QUIET_TASK_FAILURES] == "0"
