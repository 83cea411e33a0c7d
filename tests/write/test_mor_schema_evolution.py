"""Schema evolution on merge-on-read tables: a deltacommit whose input adds a column appends log blocks written
with the new schema beside base files and log blocks of the old one; reads (pyhudi, and hudi-rs where it reads
the evolved slices) give the old rows null there, then a compaction rewrites the slices into the new schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pyhudi.metadata.validate import validate_table
from pyhudi.table.table import Table
from tests.support.robust import OPTS, SCHEMA, table_rows, to_arrow

hudi = pytest.importorskip("hudi")
pytestmark = pytest.mark.spark

MOR_OPTS = {**OPTS, "hoodie.datasource.write.table.type": "MERGE_ON_READ",
            "hoodie.compact.inline": "false"}
WIDE = pa.schema([*SCHEMA, pa.field("note", pa.string())])


def _rows(ids: range | list[int], ts: int, note: str | None = None, wide: bool = False) -> pa.Table:
    recs: list[dict[str, Any]] = [
        {"id": f"k{i:03d}", "p": "a" if i % 2 == 0 else "b", "ts": ts, "v": float(i + ts)} for i in ids
    ]
    if wide:
        recs = [{**r, "note": note} for r in recs]
    return to_arrow(recs, WIDE if wide else SCHEMA)


def _rs_rows(base: str) -> list[tuple]:
    t = pa.Table.from_batches(list(hudi.HudiTableBuilder.from_base_uri(base).build().read()))
    return sorted(zip(*(t.column(c).to_pylist() for c in ("id", "p", "ts", "v", "note")), strict=True))


def _rows_of(t: pa.Table) -> list[tuple]:
    return sorted(zip(*(t.column(c).to_pylist() for c in ("id", "p", "ts", "v", "note")), strict=True))


def test_added_column_on_merge_on_read_table(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    t = Table.create(base, SCHEMA, MOR_OPTS)
    t.write(spark.createDataFrame(_rows(range(8), 1)), "insert", MOR_OPTS)
    # updates into the existing file groups go to log files, with the new column; a new key too
    Table.open(base).write(spark.createDataFrame(_rows([0, 1, 9], 2, "n2", wide=True)), "upsert", MOR_OPTS)
    # an old-schema input after the evolution: promoted to the table's schema, null in the new column
    Table.open(base).write(spark.createDataFrame(_rows([2, 3], 3)), "upsert", {**MOR_OPTS,
                           "hoodie.datasource.write.reconcile.schema": "true"})
    Table.open(base).write(spark.createDataFrame(_rows([4], 0)), "delete", MOR_OPTS)

    want = sorted(
        [(f"k{i:03d}", "a" if i % 2 == 0 else "b", 2, float(i + 2), "n2") for i in (0, 1, 9)]
        + [(f"k{i:03d}", "a" if i % 2 == 0 else "b", 3, float(i + 3), None) for i in (2, 3)]
        + [(f"k{i:03d}", "a" if i % 2 == 0 else "b", 1, float(i + 1), None) for i in (5, 6, 7)]
    )
    table = Table.open(base)
    assert table.schema().names[-1] == "note"
    assert any(p.name.startswith(".") and ".log." in p.name for p in Path(base).rglob("*") if ".hoodie" not in p.parts)
    assert _rows_of(table.to_arrow()) == want
    assert _rs_rows(base) == want
    assert sorted(table_rows(table.read(spark).toArrow())) == sorted(table_rows(table.to_arrow()))
    assert validate_table(table).ok

    # compaction rewrites the slices into base files of the new schema; the rows stay
    table.compact()
    table = Table.open(base)
    assert _rows_of(table.to_arrow()) == want
    assert _rows_of(table.to_arrow(read_optimized=True)) == want
    assert _rs_rows(base) == want
    assert validate_table(table).ok
