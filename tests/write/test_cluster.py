"""The key write flows on a multi-process Spark: ``local-cluster[2,1,1024]`` (a master, two workers with one
executor JVM each; tasks run in separate Python workers and are retried on failure).

Runs ``tests/write/test_cluster_flow.py`` (create, insert, upsert, delete, a failed write and its rollback, read
back with hudi-rs and Spark) in a pytest subprocess whose session fixture uses that master. The model-based
workloads of ``test_flows.py`` on the cluster take longer: ``test_flows_on_local_cluster`` (slow) runs the one that moves keys between partitions under a global index."""

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


def test_small_flow_on_local_cluster() -> None:
    r = _pytest_on_cluster("tests/write/test_cluster_flow.py")
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-3000:]
    assert "1 passed" in r.stdout


@pytest.mark.slow
def test_flows_on_local_cluster() -> None:
    if not (ROOT / "tests" / "write" / "test_flows.py").is_file():
        pytest.skip("tests/write/test_flows.py is not there")
    r = _pytest_on_cluster("tests/write/test_flows.py", "-k", "global_move")
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-3000:]
    assert "passed" in r.stdout
