"""The read-compatibility fixtures (tables written by Apache Hudi, HFiles written by HBase): where they live and
how a test unzips one into its own folder (never in place)."""

from __future__ import annotations

import zipfile
from pathlib import Path

from tests.paths import TABLE_ZIPS_DIR

ZIPS = sorted(p.name for p in TABLE_ZIPS_DIR.glob("*.zip")) if TABLE_ZIPS_DIR.is_dir() else []
#: the fixture tables that carry a metadata table
MDT_ZIPS = [z for z in ZIPS if z.startswith(("cow_v9", "mor_v9", "mor_v8"))]


def extract_zip(zip_path: Path, dest: Path) -> Path:
    """Extract ``zip_path`` into ``dest/<zip stem>/`` (never in place), skipping macOS ``__MACOSX`` junk."""
    out = dest / zip_path.stem
    with zipfile.ZipFile(zip_path) as zf:
        members = [m for m in zf.namelist() if not m.startswith("__MACOSX/")]
        zf.extractall(out, members)
    return out


def unzip_table(zip_name: str, dest: Path) -> Path:
    """Extract fixture ``zip_name`` into ``dest/<zip stem>/`` and return the table's base path.

    Each zip gets its own folder: the cow_ and mor_ zips of v9_txns_simple_meta unzip to the same folder name.
    """
    out = extract_zip(TABLE_ZIPS_DIR / zip_name, dest)
    bases = [
        p.parent.parent
        for p in out.rglob("hoodie.properties")
        if p.parent.name == ".hoodie" and "__MACOSX" not in p.parts and p.parent.parent.name != "metadata"
    ]
    assert len(bases) == 1, bases
    return bases[0]
