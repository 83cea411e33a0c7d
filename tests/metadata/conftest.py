from __future__ import annotations

from pathlib import Path

import pytest

from tests.table.conftest import ZIPS, unzip_table

MDT_ZIPS = [z for z in ZIPS if z.startswith(("cow_v9", "mor_v9", "mor_v8"))]


@pytest.fixture(scope="session")
def mdt_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """zip name -> base path of each unzipped fixture table that has a metadata table."""
    if not MDT_ZIPS:
        pytest.skip("fixture tables not available")
    root = tmp_path_factory.mktemp("mdt_fixtures")
    return {z: unzip_table(z, root) for z in MDT_ZIPS}
