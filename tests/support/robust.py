"""Shared helpers of the failure/robustness tests (faults, bad input, CLI, cluster flow).

One small table layout: record key ``id``, partition ``p``, ordering ``ts``, value ``v``. The model is a dict
``id -> row`` (keys are unique across partitions and never move partition in these tests; an upsert replaces the
stored row when its ``ts`` is >= the stored one, a delete drops the key).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa

from pyhudi.faults import ENV as FAULT_ENV

PYHUDI = str(Path(sys.executable).with_name("pyhudi"))
SCHEMA = pa.schema([("id", pa.string()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.float64())])
DATA_COLS = tuple(SCHEMA.names)
OPTS = {
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.table.ordering.fields": "ts",
}
CLI_KEYS = ["--record-key", "id", "--partition-field", "p", "--ordering-field", "ts"]

Row = dict[str, Any]


def rows(ids: range | list[int], p: str | None = None, ts: int = 1, v: float = 0.0) -> list[Row]:
    """Records ``k<i>`` (partition ``p`` or alternating ``a``/``b``)."""
    return [
        {"id": f"k{i:03d}", "p": p or ("a" if i % 2 == 0 else "b"), "ts": ts, "v": float(i) + v} for i in ids
    ]


def to_arrow(batch: list[Row], schema: pa.Schema = SCHEMA) -> pa.Table:
    return pa.Table.from_pylist(batch, schema=schema)


def apply(model: dict[str, Row], operation: str, batch: list[Row]) -> None:
    for r in batch:
        if operation == "delete":
            model.pop(r["id"], None)
        elif r["id"] not in model or r["ts"] >= model[r["id"]]["ts"]:
            model[r["id"]] = dict(r)


def expected(model: dict[str, Row]) -> list[tuple[Any, ...]]:
    """The model as sorted ``(record key, partition path, *data columns)`` tuples."""
    return sorted((r["id"], r["p"], *(r[c] for c in DATA_COLS)) for r in model.values())


def table_rows(t: pa.Table) -> list[tuple[Any, ...]]:
    cols = ["_hoodie_record_key", "_hoodie_partition_path", *DATA_COLS]
    if t.num_rows == 0:
        return []
    t = t.select(cols)
    return sorted(zip(*(t.column(c).to_pylist() for c in cols), strict=True))


def full_rows(t: pa.Table) -> list[tuple[Any, ...]]:
    """Every column (meta columns included), sorted: for "reads exactly as before"."""
    names = sorted(t.column_names)
    return sorted(zip(*(t.column(c).to_pylist() for c in names), strict=True)) if t.num_rows else []


def hudi_rs_read(base: str | Path) -> pa.Table:
    from hudi import HudiTableBuilder

    batches = HudiTableBuilder.from_base_uri(str(base)).build().read()
    return pa.Table.from_batches(batches) if batches else pa.table({})


def parquet_files(base: str | Path) -> list[Path]:
    return sorted(p for p in Path(base).rglob("*.parquet") if ".hoodie" not in p.parts)


def instant_of(data_file: Path) -> str:
    """The instant time of a base file ``<fileId>_<token>_<instant>.parquet``."""
    return data_file.name.rsplit(".", 1)[0].rsplit("_", 1)[1]


def files_with_instant(base: str | Path, instant: str) -> list[Path]:
    return [p for p in parquet_files(base) if instant_of(p) == instant]


def data_files_with_instant(base: str | Path, instant: str) -> set[str]:
    """Every base and log file of the table named with ``instant`` (paths relative to the table)."""
    from pyhudi.table.filenames import parse_data_file_name

    root = Path(base)
    out = set()
    for p in root.rglob("*"):
        parsed = parse_data_file_name(p.name) if p.is_file() and ".hoodie" not in p.parts else None
        if parsed is not None and parsed.instant == instant:
            out.add(str(p.relative_to(root)))
    return out


def tree(base: str | Path) -> dict[str, int]:
    """Every file under the table (relative path -> size): a write that "writes nothing" leaves it unchanged."""
    root = Path(base)
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def timeline_files(base: str | Path) -> list[str]:
    d = Path(base) / ".hoodie" / "timeline"
    return sorted(p.name for p in d.iterdir() if p.is_file())


def cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop(FAULT_ENV, None)
    env.update(extra)
    return env


def run_cli(*args: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYHUDI, *args], capture_output=True, text=True, timeout=timeout, env=cli_env(**env))


def run_cli_here(*args: str) -> subprocess.CompletedProcess[str]:
    """``pyhudi ARGS`` in this process (with its Spark session, when it has one), reported as :func:`run_cli`
    reports it: for what the command itself decides (its exit code and messages), where a process of its own adds
    a JVM's start (about 13 CPU-seconds) and nothing else to check."""
    from click.testing import CliRunner

    from pyhudi.cli.main import main

    res = CliRunner(env={FAULT_ENV: None}).invoke(main, list(args))  # as cli_env leaves it out
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return subprocess.CompletedProcess(["pyhudi", *args], res.exit_code, res.stdout, res.stderr)


def run_cli_concurrently(
    commands: dict[str, list[str]], timeout: float = 900
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Start every ``pyhudi`` command at once (each starts its own Spark) and wait for all of them.

    Output goes to temporary files, not pipes: a failing Spark job logs far more than a pipe buffer holds, and a
    child blocked on a full pipe nobody reads yet would never finish."""
    results = {}
    with contextlib.ExitStack() as stack:
        procs = {}
        for name, args in commands.items():
            out = stack.enter_context(tempfile.TemporaryFile("w+"))
            err = stack.enter_context(tempfile.TemporaryFile("w+"))
            proc = subprocess.Popen([PYHUDI, *args], stdout=out, stderr=err, text=True, env=cli_env())
            stack.callback(_reap, proc)
            procs[name] = (proc, out, err)
        for name, (proc, out, err) in procs.items():
            proc.wait(timeout=timeout)
            out.seek(0)
            err.seek(0)
            results[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out.read(), err.read())
    return results


def _reap(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
