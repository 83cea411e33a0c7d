"""The merge-on-read file-group reader through an evolved schema (issue 22): base files and log blocks written
before a column existed, or with a narrower type, read with nulls and promoted values through the latest schema
(snapshot, read-optimized, point reads, hudi-rs alike); time travel reads with the schema of its instant. A table
whose commits record a schema-on-read InternalSchema without the history that maps its files is refused, naming
the table and the feature (schema-on-read tables: tests/read/test_schema_on_read.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hudi import HudiReadOptions, HudiTableBuilder

from pyhudi import Table
from pyhudi.errors import UnsupportedTableError
from tests.support.mor_tables import MorTable, data, data_schema, deletes, parquet, with_meta_fields

FG = "11111111-1111-1111-1111-111111111111-0"
FG2 = "22222222-2222-2222-2222-222222222222-0"
COLS = ["id", "ts", "v", "n", "c"]


def r(k: str, ts: int, v: float, **kw: Any) -> dict[str, Any]:
    return {"id": k, "ts": ts, "v": v, **kw}


def evolve(m: MorTable, extra: list[tuple[str, Any]]) -> None:
    """Later commits of ``m`` write (and record) the data schema with ``extra`` columns."""
    m.schema = data_schema(extra=extra)
    m.block_schema = json.dumps(with_meta_fields(m.schema), separators=(",", ":"))


def rows(t: pa.Table, cols: list[str] = COLS) -> dict[str, tuple]:
    return {x["id"]: tuple(x.get(c) for c in cols[1:]) for x in t.select(cols).to_pylist()}


def hudi_rs(base: str, **kw: str) -> pa.Table:
    opts = HudiReadOptions()
    if "as_of" in kw:
        opts = opts.with_as_of_timestamp(kw["as_of"])
    return pa.Table.from_batches(HudiTableBuilder.from_base_uri(base).build().read(opts))


@pytest.fixture(params=["promoted", "added_only"])
def evolved(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[MorTable, list[str], bool]:
    """Base file and a log block with n:int (``added_only``: long) and no c; then n:long and a new column c (Avro
    and parquet blocks)."""
    m = MorTable(tmp_path / "t", extra_fields=[("n", "int" if request.param == "promoted" else "long")])
    t1 = m.commit(base={FG: [r("a", 1, 1.0, n=1), r("b", 1, 1.0, n=2), r("c", 1, 1.0, n=3), r("d", 1, 1.0, n=4)]})
    t2 = m.commit(logs={FG: [data(r("b", 2, 2.0, n=20))]})
    evolve(m, [("n", "long"), ("c", "string")])
    t3 = m.commit(logs={FG: [data(r("a", 3, 3.0, n=2**40, c="A"), r("z", 3, 3.0, c="Z")), deletes("d")]})
    t4 = m.commit(logs={FG2: [parquet(r("y", 4, 4.0, n=5, c="Y"))]})
    return m, [t1, t2, t3, t4], request.param == "promoted"


WANT = {
    "a": (3, 3.0, 2**40, "A"),  # log record of the new schema
    "b": (2, 2.0, 20, None),  # log record written before c existed, n an int then
    "c": (1, 1.0, 3, None),  # base record written before c existed
    "z": (3, 3.0, None, "Z"),  # insert into the log
    "y": (4, 4.0, 5, "Y"),  # log-only file group, parquet block
}


def test_mor_slices_read_through_latest_schema(evolved: tuple[MorTable, list[str], bool]) -> None:
    m, _, promoted = evolved
    t = Table.open(m.base)
    assert [(f.name, f.type) for f in t.schema()][-2:] == [("n", pa.int64()), ("c", pa.string())]
    snap = t.to_arrow()
    assert snap.schema.field("n").type == pa.int64()
    assert rows(snap) == WANT
    if not promoted:
        # hudi-rs 0.5 refuses a log block whose column has a narrower type than the table's ("partial-update
        # column 'n' has type Int32 but the table schema expects Int64"): compared where no type was promoted
        assert rows(hudi_rs(m.base)) == WANT
    assert rows(t.read_keys(["b", "c", "z", "nope"])) == {k: WANT[k] for k in ("b", "c", "z")}
    # read-optimized: the base file only, through the latest schema
    assert rows(t.to_arrow(read_optimized=True)) == {"a": (1, 1.0, 1, None), "b": (1, 1.0, 2, None),
                                                     "c": (1, 1.0, 3, None), "d": (1, 1.0, 4, None)}


def test_mor_time_travel_reads_with_its_instants_schema(evolved: tuple[MorTable, list[str], bool]) -> None:
    m, (_, t2, t3, _), promoted = evolved
    t = Table.open(m.base)
    old = t.to_arrow(as_of=t2)
    assert old.schema.names[-1] == "n"
    assert old.schema.field("n").type == (pa.int32() if promoted else pa.int64())
    assert rows(old, COLS[:4]) == {"a": (1, 1.0, 1), "b": (2, 2.0, 20), "c": (1, 1.0, 3), "d": (1, 1.0, 4)}
    at3 = t.to_arrow(as_of=t3)
    assert rows(at3) == {k: v for k, v in WANT.items() if k != "y"}
    # hudi-rs reads time travel with the latest schema: same rows, c null before it existed
    if not promoted:
            assert rows(hudi_rs(m.base, as_of=t2)) == {"a": (1, 1.0, 1, None), "b": (2, 2.0, 20, None),
                                                   "c": (1, 1.0, 3, None), "d": (1, 1.0, 4, None)}


class SchemaOnReadMor(MorTable):
    """A merge-on-read table whose commits also record an InternalSchema, as Hudi's schema-on-read writes do."""

    def complete(self, inflight: Any, stats: list[dict[str, Any]] | None = None) -> str:
        tl = self.timeline()
        if isinstance(inflight, str):
            inflight = next(i for i in tl.pending() if i.requested_time == inflight)
        internal = {"max_column_id": 9, "version-id": int(inflight.requested_time), "type": "record",
                    "fields": [{"id": 0, "name": "id", "optional": True, "type": "string"}]}
        meta = {"partitionToWriteStats": {self.partition: stats or []}, "compacted": False,
                "extraMetadata": {"schema": json.dumps(self.schema, separators=(",", ":")),
                                  "latestSchema": json.dumps(internal, separators=(",", ":"))},
                "version": 1, "operationType": "UPSERT"}
        return tl.complete(inflight, meta, self.tick()).completion_time or ""


def test_schema_on_read_commit_without_history_refused(tmp_path: Path) -> None:
    """Commits recording an InternalSchema while .hoodie/.schema holds no history: the files' field ids are
    unknown, so every read is refused."""
    m = SchemaOnReadMor(tmp_path / "sor")
    m.commit(base={FG: [r("a", 1, 1.0)]})
    t = Table.open(m.base)
    for attempt in (t.to_arrow, t.schema, lambda: t.to_arrow(read_optimized=True)):
        with pytest.raises(UnsupportedTableError, match=r"sor uses schema-on-read evolution \(.*its commits record "
                                                        r"an InternalSchema under extraMetadata\.latestSchema\); "
                                                        r"pyhudi refuses to read it: .*\.schema holds no history"):
            attempt()
