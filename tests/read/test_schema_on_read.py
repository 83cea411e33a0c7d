"""Schema-on-read tables (``hoodie.schema.on.read.enable``): every read path maps each base file's and log block's
columns to the query's by field id, through the InternalSchema history as Hudi stores it (tables built in Hudi's
on-disk form by :mod:`tests.support.sor_tables`), checked against a plain model of the rows; what is not mapped is
refused by name, and writes are refused."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pyhudi import Table, faults
from pyhudi.errors import PostCommitError, UnsupportedTableError
from pyhudi.read import plan as read_plan
from pyhudi.services.archive import archive
from pyhudi.table.properties import MERGE_ON_READ
from pyhudi.table.schema import META_COLUMNS, commit_schema_json
from pyhudi.table.timeline import ActiveTimeline, InstantTimeGenerator
from pyhudi.txn.transaction import WriteTransaction
from tests.support.sor_tables import (
    LOCAL,
    META_FIELDS,
    Arr,
    F,
    Rec,
    SorTable,
    arrow_schema,
    history_json,
    internal_schema_json,
)
from tests.support.tree import snapshot as tree

# version 0: the table's schema before schema-on-read (ids as AvroInternalSchemaConverter numbers them: the
# record's fields first, meta columns 0-4, then the nested fields)
V0 = (F(5, "id", "string"), F(6, "ts", "long"), F(7, "a", "int"), F(8, "b", "string"),
      F(9, "st", Rec((F(11, "x", "int"), F(12, "y", "string")))), F(10, "tags", Arr(13, "string")))
# ALTER TABLE RENAME COLUMN b TO bee, st.x TO st.xx
V2 = (F(5, "id", "string"), F(6, "ts", "long"), F(7, "a", "int"), F(8, "bee", "string"),
      F(9, "st", Rec((F(11, "xx", "int"), F(12, "y", "string")))), F(10, "tags", Arr(13, "string")))
# bee moved first, tags dropped, a int -> long, st.y before st.xx, st.z added, b added (a new id: the old b's
# values are bee's, never the new b's)
V4 = (F(8, "bee", "string"), F(5, "id", "string"), F(6, "ts", "long"), F(7, "a", "long"),
      F(9, "st", Rec((F(12, "y", "string"), F(11, "xx", "int"), F(15, "z", "long")))), F(14, "b", "string"))


@dataclass
class Written:
    """A record as written: its values under the names of the version it was written with."""

    key: str
    commit: str
    fields: tuple[F, ...]
    values: dict[str, Any]


def _render(values: dict[str, Any] | None, written: tuple[F, ...], query: tuple[F, ...]) -> dict[str, Any] | None:
    """The model: a record written with ``written`` read through ``query`` -- by field id, nested too."""
    if values is None:
        return None
    by_id = {f.id: f for f in written}
    out: dict[str, Any] = {}
    for q in query:
        w = by_id.get(q.id)
        if w is None:
            out[q.name] = None
        elif isinstance(q.type, Rec):
            assert isinstance(w.type, Rec)
            out[q.name] = _render(values.get(w.name), w.type.fields, q.type.fields)
        else:
            out[q.name] = values.get(w.name)
    return out


def expected(records: list[Written], query: tuple[F, ...]) -> dict[str, dict[str, Any]]:
    out = {}
    for r in records:
        row = _render(r.values, r.fields, query)
        assert row is not None
        out[r.key] = {"_hoodie_commit_time": r.commit, **row}
    return out


def rows(t: pa.Table) -> dict[str, dict[str, Any]]:
    data = t.drop_columns([c for c in META_COLUMNS if c != "_hoodie_commit_time" and c in t.column_names])
    return {r["id"]: r for r in data.to_pylist()}


@dataclass
class Built:
    m: SorTable
    c1: str  # ordinary commit (no schema-on-read yet): f0 (k0, k1), f4 (k5)
    t2: str  # ALTER -> V2
    c3: str  # f0 rewritten (k1 updated), f1 (k2)
    t4: str  # ALTER -> V4
    c5: str  # f2 (k3)
    c6: str  # f3 (k4), the schema unchanged (latestSchema keeps version t4)
    live: dict[str, Written]  # key -> the record the latest snapshot holds
    at_c3: dict[str, Written]


def build(base: Path) -> Built:
    m = SorTable(base, V0)
    k0 = {"id": "k0", "ts": 1, "a": 10, "b": "B0", "st": {"x": 1, "y": "y0"}, "tags": ["t0", "u0"]}
    k1 = {"id": "k1", "ts": 1, "a": 11, "b": "B1", "st": None, "tags": None}
    k5 = {"id": "k5", "ts": 1, "a": -5, "b": None, "st": {"x": None, "y": "y5"}, "tags": []}
    c1 = m.write({"f0": [k0, k1], "f4": [k5]}, schema_on_read=False)
    t2 = m.alter(V2)
    k0b = {"id": "k0", "ts": 1, "a": 10, "bee": "B0", "st": {"xx": 1, "y": "y0"}, "tags": ["t0", "u0"],
           "_hoodie_commit_time": c1}
    k1b = {"id": "k1", "ts": 2, "a": 2**31 - 1, "bee": "B1'", "st": {"xx": 7, "y": None}, "tags": ["t1"]}
    k2 = {"id": "k2", "ts": 2, "a": 12, "bee": "B2", "st": {"xx": 2, "y": "y2"}, "tags": ["t2"]}
    c3 = m.write({"f0": [k0b, k1b], "f1": [k2]})
    t4 = m.alter(V4)
    k3 = {"bee": "B3", "id": "k3", "ts": 3, "a": 2**40, "st": {"y": "y3", "xx": 3, "z": 33}, "b": "new-b3"}
    c5 = m.write({"f2": [k3]})
    k4 = {"bee": None, "id": "k4", "ts": 4, "a": -(2**35), "st": {"y": "y4", "xx": None, "z": None}, "b": "new-b4"}
    c6 = m.write({"f3": [k4]})
    live = {"k0": Written("k0", c1, V2, k0b), "k1": Written("k1", c3, V2, k1b), "k2": Written("k2", c3, V2, k2),
            "k3": Written("k3", c5, V4, k3), "k4": Written("k4", c6, V4, k4), "k5": Written("k5", c1, V0, k5)}
    at_c3 = {k: live[k] for k in ("k0", "k1", "k2", "k5")}
    return Built(m, c1, t2, c3, t4, c5, c6, live, at_c3)


@pytest.fixture
def built(tmp_path: Path) -> Built:
    return build(tmp_path / "sor")


def completion(b: Built, instant: str) -> str:
    inst = next(i for i in b.m.timeline().completed_commits() if i.requested_time == instant)
    assert inst.completion_time is not None
    return inst.completion_time


def test_history_on_disk_as_hudi_writes_it(built: Built) -> None:
    """The fixture's .hoodie/.schema: requested, inflight and completed files per schema commit; the current
    history holds the versions 0, t2 and t4, newest first."""
    import json

    names = sorted(p.name for p in (Path(built.m.base) / ".hoodie" / ".schema").iterdir())
    for t in (built.t2, built.c3, built.t4, built.c5, built.c6):
        assert f"{t}.schemacommit.requested" in names and f"{t}.schemacommit.inflight" in names
        assert any(re.fullmatch(rf"{t}_\d{{17}}\.schemacommit", n) for n in names)
    assert not any(n.startswith(built.c1) for n in names)
    last = (Path(built.m.base) / ".hoodie" / ".schema" / [n for n in names if n.endswith(".schemacommit")][-1])
    assert [s["version-id"] for s in json.loads(last.read_text())["schemas"]] == [int(built.t4), int(built.t2), 0]


def test_schema_is_the_latest_internal_schema(built: Built) -> None:
    t = Table.open(built.m.base)
    assert t.schema() == arrow_schema(V4)
    assert t.schema().names == ["bee", "id", "ts", "a", "st", "b"]


def test_snapshot_maps_every_file_by_field_id(built: Built) -> None:
    """Files of version 0 (f4), of V2 (f0, f1) and of V4 (f2, f3) read under V4's names: renamed columns (b ->
    bee, st.x -> st.xx) carry their values, the dropped tags is gone, a (int -> long) is widened, the added b and
    st.z are null in older files -- the old b's values never reach the new b."""
    t = Table.open(built.m.base)
    got = t.to_arrow()
    assert got.schema.names == [*META_COLUMNS, "bee", "id", "ts", "a", "st", "b"]
    assert got.schema.field("a").type == pa.int64()
    assert rows(got) == expected(list(built.live.values()), V4)
    assert rows(got)["k0"]["bee"] == "B0" and rows(got)["k0"]["b"] is None
    assert rows(t.to_arrow(read_optimized=True)) == rows(got)


def test_time_travel_reads_with_the_schema_of_its_instant(built: Built) -> None:
    t = Table.open(built.m.base)
    at_c3 = t.to_arrow(as_of=built.c3)
    assert at_c3.schema.names == [*META_COLUMNS, "id", "ts", "a", "bee", "st", "tags"]
    assert rows(at_c3) == expected(list(built.at_c3.values()), V2)
    at_t2 = t.to_arrow(as_of=built.t2)  # the files of c1, version 0, under V2's names
    old = [Written("k0", built.c1, V0, {"id": "k0", "ts": 1, "a": 10, "b": "B0", "st": {"x": 1, "y": "y0"},
                                        "tags": ["t0", "u0"]}),
           Written("k1", built.c1, V0, {"id": "k1", "ts": 1, "a": 11, "b": "B1", "st": None, "tags": None}),
           built.live["k5"]]
    assert rows(at_t2) == expected(old, V2)


def test_time_travel_before_the_first_internal_schema_refused(built: Built) -> None:
    """At c1 the table had no InternalSchema while .hoodie/.schema holds history: refused, not guessed."""
    t = Table.open(built.m.base)
    with pytest.raises(UnsupportedTableError, match=rf"{re.escape(built.m.base)} uses schema-on-read evolution .*"
                                                    rf"commit {built.c1}, the latest at or before {built.c1}, "
                                                    r"with a schema, records no InternalSchema"):
        t.to_arrow(as_of=built.c1)


def test_incremental_reads(built: Built) -> None:
    t = Table.open(built.m.base)
    late = t.incremental_arrow(completion(built, built.c3))
    assert rows(late) == expected([built.live["k3"], built.live["k4"]], V4)
    mid = t.incremental_arrow(completion(built, built.c1), completion(built, built.c3))
    # as of c3, in the latest schema: k1 and k2 changed by c3 (k0 kept its c1 commit time)
    assert rows(mid) == expected([built.live["k1"], built.live["k2"]], V4)
    assert rows(t.incremental_arrow("0")) == expected(list(built.live.values()), V4)


def test_point_reads(built: Built) -> None:
    t = Table.open(built.m.base)
    assert rows(t.read_keys(["k0", "k3", "k5", "nope"])) == expected(
        [built.live["k0"], built.live["k3"], built.live["k5"]], V4)


# -- refused --------------------------------------------------------------------------------------------------
def test_writes_refused(built: Built) -> None:
    t = Table.open(built.m.base)
    before = tree(Path(built.m.base))
    msg = rf"{re.escape(built.m.base)} uses schema-on-read evolution .*pyhudi refuses "
    with pytest.raises(UnsupportedTableError, match=msg + r"a write \(upsert\)"):
        t.check_writable("a write (upsert)")
    with pytest.raises(UnsupportedTableError, match=msg + "cleaning"):
        t.clean()
    with pytest.raises(UnsupportedTableError, match=msg + "a rollback"):
        t.rollback(built.c6)
    assert tree(Path(built.m.base)) == before


# merge-on-read: version 0, then b -> bee, a int -> long, st.x -> st.xx; then a dropped, b added (a new id), st.z
M0 = (F(5, "id", "string"), F(6, "ts", "long"), F(7, "a", "int"), F(8, "b", "string"),
      F(9, "st", Rec((F(10, "x", "int"),))))
M2 = (F(5, "id", "string"), F(6, "ts", "long"), F(7, "a", "long"), F(8, "bee", "string"),
      F(9, "st", Rec((F(10, "xx", "int"),))))
M4 = (F(8, "bee", "string"), F(5, "id", "string"), F(6, "ts", "long"),
      F(9, "st", Rec((F(10, "xx", "int"), F(12, "z", "long")))), F(11, "b", "string"))


def test_merge_on_read_log_blocks_map_by_their_instant(tmp_path: Path) -> None:
    """Log blocks are mapped by the InternalSchema version of their INSTANT_TIME header, as Hudi's log reader
    does: a base file of version 0, a log of V2 (an update, an insert, a delete) and a log of V4 (an update of the
    log-only record, a stale update) merge by key and ordering value under the query's names."""
    m = SorTable(tmp_path / "mor", M0, table_type=MERGE_ON_READ)
    k0 = {"id": "k0", "ts": 1, "a": 1, "b": "B0", "st": {"x": 1}}
    k1 = {"id": "k1", "ts": 1, "a": 2, "b": "B1", "st": {"x": 2}}
    c1 = m.write({"f0": [k0, k1]}, schema_on_read=False)
    m.alter(M2)
    k1u = {"id": "k1", "ts": 5, "a": 2**40, "bee": "B1'", "st": {"xx": 9}}
    k9 = {"id": "k9", "ts": 1, "a": 9, "bee": "B9", "st": None}
    c3 = m.write_logs({"f0": (c1, [k1u, k9], [("k0", 0)])})
    m.alter(M4)
    k9u = {"bee": "B9'", "id": "k9", "ts": 6, "st": {"xx": 99, "z": 7}, "b": "nb9"}
    stale = {"bee": "stale", "id": "k1", "ts": 2, "st": None, "b": "s"}
    c5 = m.write_logs({"f0": (c1, [k9u, stale], [])})
    t = Table.open(m.base)
    assert t.schema() == arrow_schema(M4)
    latest = [Written("k1", c3, M2, k1u), Written("k9", c5, M4, k9u)]
    assert rows(t.to_arrow()) == expected(latest, M4)
    assert rows(t.read_keys(["k1", "k0"])) == expected(latest[:1], M4)
    assert rows(t.to_arrow(read_optimized=True)) == expected([Written("k0", c1, M0, k0), Written("k1", c1, M0, k1)],
                                                             M4)
    assert rows(t.to_arrow(as_of=c3)) == expected([Written("k1", c3, M2, k1u), Written("k9", c3, M2, k9)], M2)
    inst = next(i for i in m.timeline().completed_commits() if i.requested_time == c3)
    assert inst.completion_time is not None
    assert rows(t.incremental_arrow(inst.completion_time)) == expected(latest[1:], M4)


def test_type_change_not_converted_refused(tmp_path: Path) -> None:
    """float -> double (and other changes but int/long widenings) are refused naming the table, file and column:
    Hudi's readers convert them differently from one another."""
    m = SorTable(tmp_path / "f", (F(5, "id", "string"), F(6, "ts", "long"), F(7, "v", "float")))
    c1 = m.write({"f0": [{"id": "k0", "ts": 1, "v": 0.1}]}, schema_on_read=False)
    m.alter((F(5, "id", "string"), F(6, "ts", "long"), F(7, "v", "double")))
    m.write({"f1": [{"id": "k1", "ts": 2, "v": 0.2}]})
    t = Table.open(m.base)
    assert t.schema().field("v").type == pa.float64()
    with pytest.raises(UnsupportedTableError, match=rf"{re.escape(m.base)}: .*f0_0-1-0_{c1}\.parquet: column 'v' "
                                                    r"changed type from float \(in the file\) to double"):
        t.to_arrow()


def test_file_older_than_the_history_refused(tmp_path: Path) -> None:
    """A history without the version a file was written with (no version 0): the file's ids are unknown."""
    m = SorTable(tmp_path / "h", V0[:3])
    c1 = m.write({"f0": [{"id": "k0", "ts": 1, "a": 1}]}, schema_on_read=False)
    m.alter((F(5, "id", "string"), F(6, "ts", "long"), F(7, "a2", "int")), first_history=False)
    t = Table.open(m.base)
    assert t.schema().names == ["id", "ts", "a2"]
    with pytest.raises(UnsupportedTableError, match=rf"refuses to read .*f0_0-1-0_{c1}\.parquet: it was written at "
                                                    rf"{c1}, before the oldest InternalSchema version"):
        t.to_arrow()


def test_commit_without_internal_schema_after_history_refused(tmp_path: Path) -> None:
    """A commit recording only an Avro schema after the table used schema-on-read: which names its files carry
    is unknown, so the read is refused."""
    m = SorTable(tmp_path / "w", V0[:3])
    m.write({"f0": [{"id": "k0", "ts": 1, "a": 1}]}, schema_on_read=False)
    m.alter((F(5, "id", "string"), F(6, "ts", "long"), F(7, "a2", "int")))
    c3 = m.write({"f1": [{"id": "k1", "ts": 2, "a2": 2}]}, schema_on_read=False)
    t = Table.open(m.base)
    for attempt in (t.schema, t.to_arrow):
        with pytest.raises(UnsupportedTableError, match=rf"commit {c3}, the latest with a schema, records no "
                                                        "InternalSchema"):
            attempt()


def test_ordinary_tables_have_no_schema_on_read(tmp_path: Path) -> None:
    """A table whose .hoodie/.schema is empty (as Hudi creates it) reads and writes as before: no history, names
    as written."""
    from pyhudi.read.plan import snapshot

    m = SorTable(tmp_path / "o", V0[:3])
    m.write({"f0": [{"id": "k0", "ts": 1, "a": 1}]}, schema_on_read=False)
    t = Table.open(m.base)
    assert snapshot(t).read.schema_on_read is None
    assert t.to_arrow().select(["id", "ts", "a"]).to_pylist() == [{"id": "k0", "ts": 1, "a": 1}]
    t.check_writable("a write (upsert)")
    # the residue of a schema-on-read write that never completed: not history (Hudi reads only the files of
    # completed commits), so reads are unchanged; writes are refused all the same
    (Path(m.base) / ".hoodie" / ".schema" / "20990101000000000_20990101000001000.schemacommit").write_text(
        '{"schemas":[]}')
    assert snapshot(t).read.schema_on_read is None
    assert t.to_arrow().select(["id", "ts", "a"]).to_pylist() == [{"id": "k0", "ts": 1, "a": 1}]
    with pytest.raises(UnsupportedTableError, match=r"uses schema-on-read evolution .*holds 20990101000000000_"):
        t.check_writable("a write (upsert)")


# -- Spark ----------------------------------------------------------------------------------------------------------
@pytest.mark.spark
def test_spark_reads(spark, built: Built) -> None:  # type: ignore[no-untyped-def]
    """Table.read and the hudi data source (snapshot, time travel, incremental, a filter on a renamed column)
    return the model's rows."""
    t = Table.open(built.m.base)

    def spark_rows(df: Any) -> dict[str, dict[str, Any]]:
        return rows(pa.Table.from_pylist([r.asDict(recursive=True) for r in df.collect()]))

    want = expected(list(built.live.values()), V4)
    assert spark_rows(t.read(spark)) == want
    assert spark_rows(t.read(spark, as_of=built.c3)) == expected(list(built.at_c3.values()), V2)
    assert spark_rows(t.read_incremental(completion(built, built.c3), spark=spark)) == expected(
        [built.live["k3"], built.live["k4"]], V4)
    src = spark.read.format("pyhudi").load(built.m.base)
    assert src.columns == [*META_COLUMNS, "bee", "id", "ts", "a", "st", "b"]
    assert spark_rows(src) == want
    assert spark_rows(src.where("bee = 'B0'")) == {"k0": want["k0"]}
    assert spark_rows(src.where("b = 'B0'")) == {}
    assert spark_rows(src.where("st.xx = 3")) == {"k3": want["k3"]}
    tt = spark.read.format("pyhudi").option("as.of.instant", built.c3).load(built.m.base)
    assert spark_rows(tt) == expected(list(built.at_c3.values()), V2)
    inc = (spark.read.format("pyhudi").option("hoodie.datasource.query.type", "incremental")
           .option("hoodie.datasource.read.begin.instanttime", completion(built, built.c3)).load(built.m.base))
    assert spark_rows(inc) == expected([built.live["k3"], built.live["k4"]], V4)


@pytest.mark.spark
def test_spark_write_refused(spark, built: Built) -> None:  # type: ignore[no-untyped-def]
    t = Table.open(built.m.base)
    before = tree(Path(built.m.base))
    df = spark.createDataFrame([{"id": "k9", "ts": 9, "bee": "x"}])
    with pytest.raises(UnsupportedTableError, match=rf"{re.escape(built.m.base)} uses schema-on-read evolution .*"
                                                    r"refuses a write \(upsert\)"):
        t.write(df, "upsert", {"hoodie.datasource.write.recordkey.field": "id"})
    assert tree(Path(built.m.base)) == before


# -- which schema a file was written with ---------------------------------------------------------------------------
def _compaction_during_alter(base: Path) -> tuple[SorTable, str, str, str]:
    """A merge-on-read table: c1 writes f0 (k0) with version 0; an ALTER (ta, renaming b to bee) is requested;
    while it runs a compaction (tc > ta) rewrites f0 under the old names and records version 0; then the ALTER
    completes. The history's greatest version at or below tc is ta's, but tc's file holds version 0's names."""
    m = SorTable(base, V0, table_type=MERGE_ON_READ)
    k0 = {"id": "k0", "ts": 1, "a": 10, "b": "B0", "st": {"x": 1, "y": "y0"}, "tags": ["t0"]}
    c1 = m.write({"f0": [k0]})
    tc: list[str] = []
    ta = m.alter(V2, during=lambda: tc.append(m.compact({"f0": [{**k0, "_hoodie_commit_time": c1}]})))
    return m, c1, ta, tc[0]


def test_file_schema_is_its_commits_latest_schema_first(tmp_path: Path) -> None:
    """A file's schema is first its own commit's latestSchema (InternalSchemaCache step 1), only then the
    history's version search: the compacted file of tc reads b's values as bee, not as nulls (a later write
    records V2, so the query schema is V2 either way)."""
    m, c1, ta, tc = _compaction_during_alter(tmp_path / "sor")
    k1 = {"id": "k1", "ts": 1, "a": 1, "bee": "B1", "st": {"xx": 2, "y": None}, "tags": []}
    c4 = m.write({"f1": [k1]})
    assert c1 < ta < tc < c4
    t = Table.open(m.base)
    assert t.schema().names == ["id", "ts", "a", "bee", "st", "tags"]
    for got in (rows(t.to_arrow()), rows(t.to_arrow(read_optimized=True))):
        assert got["k0"]["bee"] == "B0" and got["k0"]["st"] == {"xx": 1, "y": "y0"}
        assert got == expected([Written("k0", c1, V0, {"id": "k0", "ts": 1, "a": 10, "b": "B0",
                                                      "st": {"x": 1, "y": "y0"}, "tags": ["t0"]}),
                                Written("k1", c4, V2, k1)], V2)


def test_query_schema_skips_commits_that_cannot_change_it(tmp_path: Path) -> None:
    """The query schema is the latestSchema of the latest commit whose operation can change the schema
    (WriteOperationType.canUpdateSchema): the compaction tc, the latest commit, records version 0, but the
    ALTER before it decides."""
    m, _, ta, tc = _compaction_during_alter(tmp_path / "sor")
    latest = m.timeline().completed_commits().last()
    assert latest is not None and latest.requested_time == tc
    t = Table.open(m.base)
    assert t.schema().names == ["id", "ts", "a", "bee", "st", "tags"]
    assert t.to_arrow(as_of=tc).column_names[len(META_COLUMNS):] == ["id", "ts", "a", "bee", "st", "tags"]
    assert t.to_arrow(as_of=ta).column("bee").to_pylist() == ["B0"]


def _archive(m: SorTable, *instants: str) -> None:
    """Remove the instants' files from the active timeline, as archiving does (without an archived timeline)."""
    folder = Path(m.timeline().timeline_dir)
    for f in folder.iterdir():
        if f.is_file() and f.name.split(".", 1)[0].split("_", 1)[0] in instants:
            f.unlink()


def test_history_of_an_archived_commit_is_the_current_history(tmp_path: Path) -> None:
    """The last history file belongs to a commit since archived (later writes recorded latestSchema without a
    history of their own): the table stays schema-on-read and its files are mapped by id."""
    m = SorTable(tmp_path / "sor", V0)
    k0 = {"id": "k0", "ts": 1, "a": 10, "b": "B0", "st": None, "tags": None}
    c1 = m.write({"f0": [k0]}, schema_on_read=False)
    ta = m.alter(V2)
    c3 = m.write({"f1": [{"id": "k1", "ts": 1, "a": 1, "bee": "B1", "st": None, "tags": None}]}, history=False)
    _archive(m, c1, ta)
    assert [i.requested_time for i in m.timeline().completed_commits()] == [c3]
    got = rows(Table.open(m.base).to_arrow())
    assert got["k0"]["bee"] == "B0" and got["k1"]["bee"] == "B1"


def test_failed_alter_history_ignored(tmp_path: Path) -> None:
    """A history file whose instant lies in the active timeline's range but is no completed commit is a failed
    write's residue: the table is read as without it."""
    m = SorTable(tmp_path / "sor", V0)
    m.write({"f0": [{"id": "k0", "ts": 1, "a": 10, "b": "B0", "st": None, "tags": None}]})
    m.write({"f0": [{"id": "k0", "ts": 2, "a": 11, "b": "B1", "st": None, "tags": None}]})
    folder = Path(m.base) / ".hoodie" / ".schema"
    first = m.timeline().completed_commits().first()
    assert first is not None
    residue = f"{int(first.requested_time) + 1}_{int(first.requested_time) + 2}.schemacommit"
    (folder / residue).write_text("not json")  # would be the current history, were it valid
    assert rows(Table.open(m.base).to_arrow())["k0"]["b"] == "B1"


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["single", "occ"])
def test_write_refused_when_the_table_turns_schema_on_read_during_it(spark, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                       mode: str) -> None:
    """An ALTER TABLE (a commit without files, and the table's first history) lands between the start and the
    commit of a pyhudi write: the commit, under the lock, refuses it; the write's instant never completes and
    the table reads as the ALTER left it."""
    m = SorTable(tmp_path / "t", V0)
    k0 = {"id": "k0", "ts": 1, "a": 10, "b": "B0", "st": None, "tags": None}
    c1 = m.write({"f0": [k0]}, schema_on_read=False)
    altered: list[str] = []

    def alter(_: str) -> None:
        m.ms = max(m.ms, int(time.time() * 1000))
        altered.append(m.alter(V2))

    opts = {"hoodie.datasource.write.recordkey.field": "id", "hoodie.table.ordering.fields": "ts",
            "hoodie.metadata.enable": "false"}
    if mode == "occ":
        opts["hoodie.write.concurrency.mode"] = "optimistic_concurrency_control"
    df = spark.createDataFrame([("k9", 9, 9, "B9", None, None)],
                               "id string, ts long, a int, b string, st struct<x:int,y:string>, tags array<string>")
    with faults.inject("before_commit", alter), pytest.raises(
            UnsupportedTableError, match=rf"{re.escape(m.base)} uses schema-on-read evolution .*pyhudi refuses "
                                         r"committing the write \d+"):
        Table.open(m.base).write(df, "upsert", opts)
    tl = m.timeline()
    assert [i.requested_time for i in tl.completed_commits()] == [c1, *altered]
    assert rows(Table.open(m.base).to_arrow()) == expected([Written("k0", c1, V0, k0)], V2)


def test_clean_refused_under_the_lock(built: Built) -> None:
    """The clean a write runs after its commit (under the lock, after the start-of-write check) refuses a table
    that is schema-on-read before its plan reaches the timeline: nothing is deleted, no clean instant."""
    before = tree(Path(built.m.base))
    tx = WriteTransaction(LOCAL, built.m.base, {})
    with pytest.raises(UnsupportedTableError, match=r"uses schema-on-read evolution .*pyhudi refuses cleaning"):
        tx.clean(1)
    assert tree(Path(built.m.base)) == before


def test_archived_commit_schema_read_from_the_archived_timeline(tmp_path: Path) -> None:
    """The compaction racing an ALTER (above), in a copy-on-write table whose timeline was then archived past
    it: its file's schema comes from the compaction's commit metadata in the archived timeline, read while
    planning (the history's search would give ta's version, whose names the file lacks)."""
    m = SorTable(tmp_path / "sor", V0)
    k0 = {"id": "k0", "ts": 1, "a": 10, "b": "B0", "st": {"x": 1, "y": "y0"}, "tags": ["t0"]}
    c1 = m.write({"f0": [k0]})
    tc: list[str] = []
    ta = m.alter(V2, during=lambda: tc.append(m.compact({"f0": [{**k0, "_hoodie_commit_time": c1}]})))
    later = [Written(f"g{i}", m.write({f"g{i}": [v]}), V2, v) for i in range(5)
             for v in [{"id": f"g{i}", "ts": 1, "a": i, "bee": f"x{i}", "st": None, "tags": None}]]
    archive(LOCAL, m.base, None, {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
                                  "hoodie.cleaner.commits.retained": "1"})
    first = m.timeline().completed_commits().first()
    assert first is not None and first.requested_time > tc[0] > ta
    plan = read_plan.snapshot(Table.open(m.base))
    sor = plan.read.schema_on_read
    assert sor is not None and sor.archived_read and sor.committed[tc[0]].version_id == 0
    assert [f.name for f in sor.versions[-1].fields][5:] == ["id", "ts", "a", "bee", "st", "tags"]
    assert rows(plan.to_arrow()) == expected([Written("k0", c1, V0, k0), *later], V2)


@pytest.mark.spark
def test_inline_compaction_refused_when_the_table_turned_schema_on_read(spark, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                         ) -> None:
    """An ALTER TABLE lands right after a pyhudi write into a merge-on-read table committed, before its inline
    compaction: the compaction refuses to complete (under the lock), the ALTER's table stays as it left it."""
    base = str(tmp_path / "t")
    opts = {"hoodie.datasource.write.recordkey.field": "id", "hoodie.table.ordering.fields": "ts",
            "hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.compact.inline.max.delta.commits": "2"}
    schema = "id string, ts long, v double"
    Table.create(base, pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.float64())]), opts)
    Table.open(base).write(spark.createDataFrame([("k0", 1, 1.0), ("k1", 1, 2.0)], schema), "insert", opts)
    v0 = (*META_FIELDS, F(5, "id", "string"), F(6, "ts", "long"), F(7, "v", "double"))
    altered: list[str] = []

    def alter(_: str) -> None:  # Hudi's ALTER TABLE RENAME COLUMN v TO w: history, then a commit without files
        tl = ActiveTimeline.load(LOCAL, base)
        gen = InstantTimeGenerator()
        t = gen.next(floor=tl.latest_time())
        v1 = internal_schema_json(int(t), (*v0[:7], F(7, "w", "double")))
        req = tl.create_requested("deltacommit", t)
        infl = tl.transition_to_inflight(req, None)
        done = gen.next(floor=t)
        (Path(base) / ".hoodie" / ".schema").mkdir(exist_ok=True)
        (Path(base) / ".hoodie" / ".schema" / f"{t}_{done}.schemacommit").write_text(
            history_json([v1, internal_schema_json(0, v0)]))
        extra = {"latestSchema": v1, "schema": commit_schema_json(
            pa.schema([("id", pa.string()), ("ts", pa.int64()), ("w", pa.float64())]), "t")}
        tl.complete(infl, {"partitionToWriteStats": {}, "compacted": False, "extraMetadata": extra, "version": 1,
                           "operationType": "ALTER_SCHEMA"}, gen.next(floor=done))
        altered.append(t)

    # the write committed; its inline compaction is refused (a PostCommitError says the write committed)
    with faults.inject("after_data_commit", alter), pytest.raises(
            PostCommitError, match=rf"committed .*compaction failed: UnsupportedTableError: {re.escape(base)} uses "
                                   r"schema-on-read evolution .*pyhudi refuses completing the compaction \d+") as e:
        Table.open(base).write(spark.createDataFrame([("k0", 2, 3.0)], schema), "upsert", opts)
    assert isinstance(e.value.__cause__, UnsupportedTableError)
    tl = ActiveTimeline.load(LOCAL, base)
    assert altered and not [i for i in tl.completed() if i.action == "commit"]  # no compaction completed
    assert [i.action for i in tl.pending()] == ["compaction"]
    got = Table.open(base).to_arrow()
    assert got.column_names[len(META_COLUMNS):] == ["id", "ts", "w"]
    assert sorted(zip(got.column("id").to_pylist(), got.column("w").to_pylist(), strict=True)) == [("k0", 3.0),
                                                                                                  ("k1", 2.0)]
