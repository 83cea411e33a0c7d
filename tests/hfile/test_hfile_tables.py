"""Every HFile base file of the metadata tables in the zipped fixture tables (written by Hudi on Spark) reads.

Metadata-table log files (``.hoodie/metadata/*/.*.log.*``) hold HFiles inside log blocks; they are covered by the
log-format tests, not here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pyhudi.hfile import KV_SCHEMA, HFileReader
from tests.paths import TABLE_ZIPS_DIR as TABLES

ZIPS = sorted(p.name for p in TABLES.glob("*.zip")) if TABLES.is_dir() else []


@pytest.mark.parametrize(
    "zip_name", ZIPS or [pytest.param("none", marks=pytest.mark.skip("no fixture tables"))]
)
def test_metadata_base_hfiles_read(zip_name: str, unzipped_table: Callable[[str], Path]) -> None:
    root = unzipped_table(zip_name)
    hfiles = sorted(p for p in root.rglob("*.hfile") if "__MACOSX" not in p.parts)
    assert hfiles, f"{zip_name} has no .hfile"
    for p in hfiles:
        assert ".hoodie" in p.parts and "metadata" in p.parts, p
        with HFileReader.from_uri(str(p)) as r:
            t = r.read_all()
            assert t.schema == KV_SCHEMA
            assert t.num_rows == r.entry_count == r.trailer.entry_count, p
            keys = t.column("key").to_pylist()
            assert keys == sorted(keys), p  # rows ascend in unsigned byte order
            assert r.last_key == (keys[-1] if keys else None)
            # every row can be found by a batch lookup, giving its first cell's value
            first: dict[bytes, bytes] = {}
            for k, v in zip(keys, t.column("value").to_pylist(), strict=True):
                first.setdefault(k, v)
            got = r.lookup(list(first)).column("value").to_pylist()
            assert got == list(first.values()), p
            # Hudi's metadata base files carry the writer schema and the bloom filter
            assert "schema" in r.file_info, p
