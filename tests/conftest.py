"""Shared test helpers: where the read-compatibility fixtures live, and unzipping a fixture table into tmp."""

from __future__ import annotations

import os
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.paths import HFILE_VECTORS, SHARED_FIXTURES, TABLE_ZIPS_DIR

__all__ = ["HFILE_VECTORS", "SHARED_FIXTURES", "TABLE_ZIPS_DIR"]


def table_zip_names() -> list[str]:
    """File names of the zipped fixture tables (empty when the fixtures are not mounted)."""
    return sorted(p.name for p in TABLE_ZIPS_DIR.glob("*.zip")) if TABLE_ZIPS_DIR.is_dir() else []


def extract_zip(zip_path: Path, dest: Path) -> Path:
    """Extract ``zip_path`` into ``dest/<zip stem>/`` (never in place), skipping macOS ``__MACOSX`` junk."""
    out = dest / zip_path.stem
    with zipfile.ZipFile(zip_path) as zf:
        members = [m for m in zf.namelist() if not m.startswith("__MACOSX/")]
        zf.extractall(out, members)
    return out


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
def spark():  # type: ignore[no-untyped-def]
    """One Spark session for the test run (master from PYHUDI_TEST_MASTER, default local[2]), on loopback."""
    from pyhudi.spark.session import get_spark

    master = os.environ.get("PYHUDI_TEST_MASTER", "local[2]")
    session = get_spark(master)
    yield session
    session.stop()


def pytest_sessionstart(session: pytest.Session) -> None:
    """The read-compatibility fixtures are part of the test suite: refuse to run silently without them."""
    if not TABLE_ZIPS_DIR.is_dir() or not HFILE_VECTORS.is_dir():
        raise pytest.UsageError(
            f"shared fixtures not found at {SHARED_FIXTURES} (expected shared/ beside the repository); "
            "set PYHUDI_SHARED to the shared/ folder"
        )
