"""Shared test helpers: where the read-compatibility fixtures live, and unzipping a fixture table into tmp."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from pyhudi.spark.java import DEFAULT_DRIVER_JAVA_OPTIONS, ENV_DRIVER_JAVA_OPTIONS, SHORT_JOB_JAVA_OPTIONS
from tests.paths import HFILE_VECTORS, SHARED_FIXTURES, TABLE_ZIPS_DIR
from tests.support.fixtures import MDT_ZIPS, ZIPS, extract_zip, unzip_table


@pytest.fixture
def unzipped_table(tmp_path: Path) -> Callable[[str], Path]:
    """Factory: ``unzipped_table("cow_v9_txns_simple_meta.zip")`` extracts that fixture zip into this test's
    tmp_path and returns the extraction folder (the table folder is inside it)."""

    def _unzip(zip_name: str) -> Path:
        src = TABLE_ZIPS_DIR / zip_name
        if not src.is_file():
            pytest.skip(f"fixture table {zip_name} not available")
        return extract_zip(src, tmp_path)

    return _unzip


@pytest.fixture(scope="session")
def fixture_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """zip name -> base path of the unzipped data table (shared by the session's tests: read only)."""
    if not ZIPS:
        pytest.skip("fixture tables not available")
    root = tmp_path_factory.mktemp("fixtures")
    return {z: unzip_table(z, root) for z in ZIPS}


@pytest.fixture(scope="session")
def mdt_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """zip name -> base path of each unzipped fixture table that has a metadata table (read only)."""
    if not MDT_ZIPS:
        pytest.skip("fixture tables not available")
    root = tmp_path_factory.mktemp("mdt_fixtures")
    return {z: unzip_table(z, root) for z in MDT_ZIPS}


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """One Spark session for the test run (master from PYHUDI_TEST_MASTER, default local[2]), on loopback."""
    from pyhudi.spark.session import get_spark

    master = os.environ.get("PYHUDI_TEST_MASTER", "local[2]")
    session = get_spark(master)
    yield session
    session.stop()


@pytest.fixture(params=["spark_parquet", "python"])
def reader(request: pytest.FixtureRequest, spark):  # type: ignore[no-untyped-def]
    """Both readers of ``spark.read.format("hudi")``: Spark's parquet reader for the scans it can read (pyhudi's
    rule, the default session's), and the Python source alone (the rule hands no scan over)."""
    from pyhudi.spark.native import planner_of

    planner = planner_of(spark)
    assert planner is not None, "the default session has pyhudi's rule"
    planner.hand_over = request.param != "python"
    try:
        yield request.param
    finally:
        planner.hand_over = True


def pytest_configure(config: pytest.Config) -> None:
    """Every local driver JVM of the suite (the test sessions and every process a test starts) compiles with the
    client compiler only, as pyhudi's command does for a short write: the suite is thousands of short jobs over
    small tables, where the server compiler's work never pays off. Measured on 2 cores, three workers:
    tests/read/test_filter_fuzz.py 189 s against 247 s, tests/txn/test_concurrent_writers.py 125 s against 158 s.
    A value set in the environment wins."""
    os.environ.setdefault(ENV_DRIVER_JAVA_OPTIONS, f"{DEFAULT_DRIVER_JAVA_OPTIONS} {SHORT_JOB_JAVA_OPTIONS}")


def pytest_sessionstart(session: pytest.Session) -> None:
    """The read-compatibility fixtures are part of the test suite: refuse to run silently without them."""
    if not TABLE_ZIPS_DIR.is_dir() or not HFILE_VECTORS.is_dir():
        raise pytest.UsageError(
            f"shared fixtures not found at {SHARED_FIXTURES} (expected shared/ beside the repository); "
            "set PYHUDI_SHARED to the shared/ folder"
        )


@pytest.fixture(scope="session")
def s3_server():  # type: ignore[no-untyped-def]
    """A moto S3 server on 127.0.0.1 (tests/support/s3.py) with a bucket; its credentials and region are in this
    process's environment, and so in that of the commands a test starts, while it runs."""
    from tests.support.s3 import moto_s3

    with pytest.MonkeyPatch.context() as mp, moto_s3() as server:
        for k, v in server.env.items():
            mp.setenv(k, v)
        yield server
