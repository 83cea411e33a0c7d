"""The Python daemon of pyhudi's Spark sessions: workers fork from it with the compiled kernels loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pyarrow as pa
import pytest

from pyhudi.hfile import HFileReader, hfile_bytes
from pyhudi.hfile import reader as hfile_reader
from pyhudi.io import pools

_WARM_UP_PROBE = """
import json, sys, threading
from pyhudi.io import pools
from pyhudi.hfile import _kernels as k
from pyhudi.spark.daemon import warm_up
before = (threading.active_count(), bool(k.lookup_block.signatures), bool(k.build_cells.signatures))
warm_up()
after = (threading.active_count(), bool(k.lookup_block.signatures), bool(k.build_cells.signatures))
print(json.dumps({"before": before, "after": after, "pool": bool(pools._POOLS)}), file=sys.stderr)
"""


def test_warm_up_loads_the_kernels_quietly_without_threads() -> None:
    """In a fresh interpreter, as in the daemon: kernels loaded afterwards, no Python thread or block pool
    started (the daemon forks), nothing written to stdout (PySpark reads the daemon's port there)."""
    r = subprocess.run([sys.executable, "-c", _WARM_UP_PROBE], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == ""
    got = json.loads(r.stderr.strip().splitlines()[-1])
    assert got["before"][1:] == [False, False] and got["after"][1:] == [True, True]
    assert got["after"][0] == got["before"][0] and not got["pool"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_its_own_block_pool() -> None:
    keys = pa.array([f"k{i:06d}".encode() for i in range(20000)], pa.binary())
    data, _ = hfile_bytes(keys, keys, block_size=4096)
    parent_pool = hfile_reader._pool()
    parent_pool.submit(lambda: None).result()  # a pool that has run work: its idle threads do not exist in a child
    pid = os.fork()
    if pid == 0:  # child: a multi-block read needs a pool of its own
        code = 1
        try:
            import signal

            signal.alarm(60)  # a child stuck on the parent's pool fails instead of hanging the test run
            with HFileReader.from_bytes(data) as r:
                ok = r.num_blocks > 1 and r.read_all().num_rows == 20000
            own = pools._POOLS.get("pyhudi-hfile")
            code = 0 if ok and own is not None and own is not parent_pool else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.spark
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_tasks_run_in_workers_forked_from_the_pyhudi_daemon(spark) -> None:  # type: ignore[no-untyped-def]
    if not spark.sparkContext.master.startswith("local"):
        pytest.skip("the daemon is set for local masters")

    def probe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import gc
        import os
        import sys

        warm = "pyhudi.hfile._kernels" in sys.modules and bool(sys.modules["pyhudi.hfile._kernels"].lookup_block.signatures)
        # what the daemon loaded is frozen: the collection a reused worker runs after each task skips it
        warm = warm and gc.get_freeze_count() > 10_000
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode()
        where = sys.modules["pyspark"].__file__
        for b in batches:
            yield pa.record_batch([pa.array([cmd] * b.num_rows), pa.array([warm] * b.num_rows),
                                   pa.array([where] * b.num_rows)], names=["cmd", "warm", "pyspark"])

    rows = spark.range(4).repartition(2).mapInArrow(probe, "cmd string, warm boolean, pyspark string").collect()
    assert rows and all("pyhudi.spark.daemon" in r.cmd and r.warm for r in rows), rows[:1]
    # PySpark itself imported from the installed package (compiled once), not from Spark's pyspark.zip
    import pyspark

    assert {r.pyspark for r in rows} == {pyspark.__file__}


def test_pyspark_zips_leave_the_path_only_when_the_same_pyspark_is_installed(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import pyspark

    from pyhudi.spark.daemon import unzipped_pyspark_path

    lib = os.path.join(os.path.dirname(pyspark.__file__), "python", "lib")
    other = str(tmp_path / "deps.zip")  # a job's own --py-files archive stays
    path = [os.path.join(lib, "pyspark.zip"), os.path.join(lib, "py4j-0.10.9.9-src.zip"), other, *sys.path]
    monkeypatch.setattr(sys, "path", list(path))
    unzipped_pyspark_path()
    assert sys.path == path[2:]
    # a py4j zip of another version than the installed py4j stays (the installed PySpark's own zip goes)
    other_py4j = [os.path.join(lib, "pyspark.zip"), os.path.join(lib, "py4j-0.0.1-src.zip"), *sys.path]
    monkeypatch.setattr(sys, "path", list(other_py4j))
    unzipped_pyspark_path()
    assert sys.path == other_py4j[1:]
    # zips of another Spark installation (SPARK_HOME elsewhere) stay: their PySpark may differ from this one
    elsewhere = [str(tmp_path / "spark" / "python" / "lib" / "pyspark.zip"), *path[2:]]
    monkeypatch.setattr(sys, "path", list(elsewhere))
    unzipped_pyspark_path()
    assert sys.path == elsewhere
