"""The key write flows on a multi-process Spark: ``local-cluster[2,1,1024]`` (a master, two workers with one
executor JVM each; tasks run in separate Python workers and are retried on failure).

Runs ``tests/write/test_cluster_flow.py`` (create, insert, upsert, delete, a failed write and its rollback, read
back with hudi-rs and Spark) in a pytest subprocess whose session fixture uses that master. The model-based
workloads of ``test_flows.py`` take longer on the cluster: the one that moves keys between partitions under a
global index runs there, in the same subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]  # Spark-heavy: make test runs it, make test-quick does not

ROOT = Path(__file__).resolve().parents[2]
MASTER = "local-cluster[2,1,1024]"


def _pytest_on_cluster(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYHUDI_TEST_MASTER=MASTER)
    env.pop("PYHUDI_TEST_FAULT", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
    )


def test_flows_on_local_cluster() -> None:
    """One cluster for both: its start (master, two workers, their executors and Python workers) is most of a
    small flow's time."""
    r = _pytest_on_cluster("tests/write/test_cluster_flow.py", "tests/write/test_flows.py", "-k",
                           "test_small_flow or global_move")
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-3000:]
    assert "3 passed" in r.stdout, r.stdout[-3000:]  # the small flow and the two global-move workloads
