"""The pyhudi command's shared error handling."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pyhudi.cli import main as cli


def test_quiet_jvm_without_a_session_or_log4j() -> None:
    from pyhudi.spark.session import quiet_jvm

    quiet_jvm(None)

    class NoJvm:
        @property
        def sparkContext(self) -> object:
            raise RuntimeError("no JVM here")

    quiet_jvm(NoJvm())  # type: ignore[arg-type]  # nothing raised: the logs stay as they are


@pytest.mark.spark
def test_an_error_leaves_a_session_the_command_did_not_start_logging(  # type: ignore[no-untyped-def]
    spark, tmp_path: Path, monkeypatch
) -> None:
    """Only the JVM of a session the command started is silenced before its error is reported (the caller's own
    session, here the tests', keeps its logging)."""
    quieted: list[object] = []
    from pyhudi.spark import session

    monkeypatch.setattr(session, "quiet_jvm", quieted.append)
    pq.write_table(pa.table({"id": [None], "ts": [1], "dt": ["x"]}, schema=pa.schema(
        [("id", pa.string()), ("ts", pa.int64()), ("dt", pa.string())])), tmp_path / "in.parquet")
    res = CliRunner().invoke(cli.main, ["write", str(tmp_path / "t"), "--input", str(tmp_path / "in.parquet"),
                                        "--operation", "upsert", "--record-key", "id", "--partition-field", "dt",
                                        "--ordering-field", "ts"])
    assert res.exit_code == 1 and "error:" in res.output, res.output
    assert quieted == []


def test_json_output_gets_an_object_for_an_unexpected_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--json`` promises a JSON object as the last line of stdout: an error that is not pyhudi's own (a bug, or
    a library's error pyhudi does not translate) still gets one, and still fails the command with its traceback."""
    import json

    from pyhudi.table.table import Table

    def boom(*_a: object, **_k: object) -> None:
        raise RuntimeError("something unexpected\nsecond line")

    monkeypatch.setattr(Table, "open", boom)
    args = ["clean", str(tmp_path / "t"), "--json"]
    monkeypatch.setattr("sys.argv", ["pyhudi", *args])  # how the command tells that --json was asked for
    res = CliRunner().invoke(cli.main, args)
    assert res.exit_code == 1 and isinstance(res.exception, RuntimeError)
    assert json.loads(res.stdout.strip().splitlines()[-1]) == {"error": "RuntimeError: something unexpected",
                                                               "type": "RuntimeError"}


@pytest.mark.parametrize(("text", "shown"), [
    ("no Hudi table at s3://AKID:se/cr+et@bucket/t", "no Hudi table at s3://AKID:***@bucket/t"),  # '/' left raw
    ("no Hudi table at 's3://AKID:sec'ret@bucket/t'", "no Hudi table at 's3://AKID:***@bucket/t'"),
    ("s3://A:x@b/t and s3://A:y@b/u", "s3://A:***@b/t and s3://A:***@b/u"),
    ("s3://bucket/t?endpoint_override=127.0.0.1:9000", "s3://bucket/t?endpoint_override=127.0.0.1:9000"),
    ("hdfs://namenode:8020/data/v@2/x.parquet", "hdfs://namenode:8020/data/v@2/x.parquet"),  # a port, no secret
])
def test_uri_secrets_are_hidden(text: str, shown: str) -> None:
    from pyhudi.cli.output import redact_uri_secrets

    assert redact_uri_secrets(text) == shown
