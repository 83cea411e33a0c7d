from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import extract_zip
from tests.paths import TABLE_ZIPS_DIR as FIXTURES

ZIPS = sorted(p.name for p in FIXTURES.glob("*.zip")) if FIXTURES.is_dir() else []


def unzip_table(zip_name: str, dest: Path) -> Path:
    """Extract ``zip_name`` into ``dest/<zip stem>/`` and return the table's base path.

    Each zip gets its own folder: the cow_ and mor_ zips of v9_txns_simple_meta unzip to the same folder name.
    """
    out = extract_zip(FIXTURES / zip_name, dest)
    bases = [
        p.parent.parent
        for p in out.rglob("hoodie.properties")
        if p.parent.name == ".hoodie" and "__MACOSX" not in p.parts and p.parent.parent.name != "metadata"
    ]
    assert len(bases) == 1, bases
    return bases[0]


@pytest.fixture(scope="session")
def fixture_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """zip name -> base path of the unzipped data table."""
    if not ZIPS:
        pytest.skip("fixture tables not available")
    root = tmp_path_factory.mktemp("fixtures")
    return {z: unzip_table(z, root) for z in ZIPS}
