"""Records flagged ``_hoodie_is_deleted`` in an upsert carry their ordering value: under event-time ordering such a
record deletes the stored one unless the stored one's ordering value is greater (a tie goes to the delete), as
Hudi's merge decides; a delete operation's keys carry none and always delete. Copy-on-write and merge-on-read
tables end alike, hudi-rs reads them as the model, and the record index keeps every key still held."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pyhudi.metadata.validate import validate_table
from pyhudi.table.table import Table

hudi = pytest.importorskip("hudi")
pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("key", pa.string()), ("ts", pa.int64()), ("part", pa.string()), ("v", pa.string()),
                    ("_hoodie_is_deleted", pa.bool_())])
OPTS = {
    "hoodie.table.name": "soft", "hoodie.datasource.write.recordkey.field": "key",
    "hoodie.datasource.write.partitionpath.field": "part", "hoodie.table.ordering.fields": "ts",
    "hoodie.index.type": "RECORD_INDEX", "hoodie.metadata.record.index.enable": "true",
    "hoodie.parquet.small.file.limit": "0",
}


def _rows(t: pa.Table) -> list[tuple[str, int, str]]:
    return sorted((r["key"], r["ts"], r["v"]) for r in t.select(["key", "ts", "v"]).to_pylist())


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_flagged_delete_follows_event_time_ordering(spark, tmp_path, table_type: str) -> None:  # type: ignore[no-untyped-def]
    opts = {**OPTS, "hoodie.table.type": table_type}
    base = str(tmp_path / "t")

    def write(rows: list[dict], operation: str) -> None:
        t = pa.Table.from_pylist([{"_hoodie_is_deleted": False, "part": "p", **r} for r in rows], SCHEMA)
        Table.open(base).write(spark.createDataFrame(t), operation, opts)

    Table.create(base, SCHEMA, opts)
    write([{"key": k, "ts": 5, "v": f"{k}-stored"} for k in "abcde"], "insert")
    write([{"key": "a", "ts": 3, "v": "late delete", "_hoodie_is_deleted": True},   # the stored record is newer
           {"key": "b", "ts": 5, "v": "same-time delete", "_hoodie_is_deleted": True},  # a tie: the delete wins
           {"key": "c", "ts": 7, "v": "delete", "_hoodie_is_deleted": True},
           {"key": "d", "ts": 6, "v": "d-updated"}], "upsert")
    want = [("a", 5, "a-stored"), ("d", 6, "d-updated"), ("e", 5, "e-stored")]
    rs = pa.Table.from_batches(list(hudi.HudiTableBuilder.from_base_uri(base).build().read(hudi.HudiReadOptions())))
    assert _rows(Table.open(base).to_arrow()) == _rows(rs) == want
    found = Table.open(base).lookup(["a", "b", "c", "d", "e"])
    assert found.filter(found.column("found")).column("key").to_pylist() == ["a", "d", "e"]
    # the delete operation ignores ordering values: a key it names is deleted
    write([{"key": "a", "ts": 1, "v": "x"}], "delete")
    write([{"key": "a", "ts": 1, "v": "a-again"}], "upsert")  # an insert again, found nowhere else
    rs = pa.Table.from_batches(list(hudi.HudiTableBuilder.from_base_uri(base).build().read(hudi.HudiReadOptions())))
    want = [("a", 1, "a-again"), ("d", 6, "d-updated"), ("e", 5, "e-stored")]
    assert _rows(Table.open(base).to_arrow()) == _rows(rs) == want
    report = validate_table(Table.open(base))
    assert report.ok, report.to_dict()
