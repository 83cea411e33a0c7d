"""The Python daemon of pyhudi's Spark sessions: workers fork from it with the compiled kernels loaded."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pyarrow as pa
import pytest

from pyhudi.hfile import HFileReader, hfile_bytes
from pyhudi.hfile import reader as hfile_reader
from pyhudi.spark.daemon import warm_up


def test_warm_up_loads_the_kernels_and_starts_no_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    from pyhudi.hfile import _kernels

    monkeypatch.setattr(hfile_reader, "_POOL", None)
    warm_up()
    assert _kernels.lookup_block.signatures and _kernels.build_cells.signatures
    assert hfile_reader._POOL is None  # the daemon forks: a pool's threads would not exist in the workers


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_its_own_block_pool() -> None:
    keys = pa.array([f"k{i:06d}".encode() for i in range(20000)], pa.binary())
    data, _ = hfile_bytes(keys, keys, block_size=4096)
    hfile_reader._pool()  # the parent's pool and its threads
    pid = os.fork()
    if pid == 0:  # child: a multi-block read needs a pool of its own
        code = 1
        try:
            with HFileReader.from_bytes(data) as r:
                ok = r.num_blocks > 1 and r.read_all().num_rows == 20000 and hfile_reader._POOL is not None
            code = 0 if ok else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.spark
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_tasks_run_in_workers_forked_from_the_pyhudi_daemon(spark) -> None:  # type: ignore[no-untyped-def]
    def parent_cmdline(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import os

        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode()
        for b in batches:
            yield pa.record_batch([pa.array([cmd] * b.num_rows)], names=["cmd"])

    rows = spark.range(4).repartition(2).mapInArrow(parent_cmdline, "cmd string").collect()
    assert rows and all("pyhudi.spark.daemon" in r.cmd for r in rows), rows[:1]
