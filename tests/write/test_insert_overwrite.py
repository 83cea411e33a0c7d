"""insert_overwrite and insert_overwrite_table on Spark, against the model of :mod:`tests.support.model`.

- the timeline holds a ``replacecommit`` as Hudi 1.1 writes one (requested: an all-null
  HoodieRequestedReplaceMetadata; inflight: the workload profile; completed: HoodieReplaceCommitMetadata whose
  ``partitionToReplaceFileIds`` names every file group of the overwritten partitions);
- hudi-rs reads exactly the model's rows after every write, and as of every completed instant;
- ``pyhudi validate`` is ok (files partition and record index); lookups of live keys name the partition and file
  id of the base file hudi-rs reads the row from; keys of replaced file groups not written again are not found;
- with a global index a key stored in a partition that is not overwritten is rejected and nothing changes;
- a crash in any phase of an insert_overwrite leaves the table as it was and is rolled back by the next write;
- cleaning deletes the replaced file groups' files (and the metadata table stops listing them).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pyhudi.cli.main import main as cli_main
from pyhudi.errors import InvalidInputError
from pyhudi.metadata.partitions import RECORD_INDEX
from pyhudi.metadata.validate import validate_table
from pyhudi.metadata.writer import MetadataWriter
from pyhudi.services.rollback import read_rollback_metadata
from pyhudi.table import markers
from pyhudi.table.filenames import parse_data_file_name
from pyhudi.table.table import Table
from pyhudi.table.timeline import REPLACE_COMMIT, Instant, State
from pyhudi.write.producer import FAULT_OPTION
from tests.support.model import Model, Rejected, Spec
from tests.support.workload import assert_rows, hudi_rs_read, rows_of

pytest.importorskip("hudi")
pytestmark = [pytest.mark.spark, pytest.mark.slow]  # Spark-heavy: make test runs it, make test-quick does not

SCHEMA = pa.schema(
    [("id", pa.string()), ("ts", pa.int64()), ("dt", pa.string()), ("v", pa.float64()), ("s", pa.string())]
)
COLS = tuple(SCHEMA.names)
D1, D2, D3 = "2026/11/21", "2026/11/22", "2026/12/01"
RLI_SPEC = Spec(("id",), ("dt",), global_index=True, update_partition_path=False)


def rli_options(name: str, **extra: str) -> dict[str, str]:
    return {
        **RLI_SPEC.options(name),
        "hoodie.index.type": "RECORD_INDEX",
        "hoodie.metadata.record.index.enable": "true",
        "hoodie.record.index.update.partition.path": "false",
        "hoodie.metadata.record.index.min.filegroup.count": "4",
        "hoodie.metadata.record.index.max.filegroup.count": "4",
        **extra,
    }


def recs(ids: list[int], dt: str, ts: int, tag: str = "") -> list[dict[str, Any]]:
    return [{"id": f"k{i:03d}", "ts": ts, "dt": dt, "v": float(i) + ts / 10, "s": f"{tag}{i}@{ts}"} for i in ids]


def df_of(spark, rows: list[dict[str, Any]]):  # type: ignore[no-untyped-def]
    return spark.createDataFrame(pa.Table.from_pylist(rows, schema=SCHEMA))


def file_ids(t: pa.Table) -> dict[str, tuple[str, str]]:
    """key -> (partition, file id) of the base file hudi-rs read the row from."""
    return {
        k: (p, f.split("_")[0])
        for k, p, f in zip(
            t.column("_hoodie_record_key").to_pylist(),
            t.column("_hoodie_partition_path").to_pylist(),
            t.column("_hoodie_file_name").to_pylist(),
            strict=True,
        )
    } if t.num_rows else {}


def check(table_path: str, model: Model, seen: set[str], what: str, *, record_index: bool = True) -> pa.Table:
    """hudi-rs and to_arrow read the model; validate ok; the record index maps every live key to the file
    hudi-rs reads it from and no other key."""
    table = Table.open(table_path)
    rs = hudi_rs_read(table_path)
    want = model.snapshot()
    assert_rows(f"{what}: hudi-rs", rows_of(rs, COLS), want)
    assert_rows(f"{what}: to_arrow", rows_of(table.to_arrow(), COLS), want)
    rep = validate_table(table)
    assert rep.ok, (what, rep.to_dict())
    if record_index:
        assert rep.record_index is not None and rep.record_index["entries"] == len(want), (what, rep.record_index)
        where = file_ids(rs)
        gone = sorted(seen - set(where))
        found = table.lookup([*sorted(where), *gone]).to_pylist()
        for row in found:
            if row["key"] in where:
                assert row["found"] and (row["partition"], row["file_id"]) == where[row["key"]], (what, row)
            else:
                assert not row["found"], (what, row)
    return rs


def latest_ids(table_path: str, partition: str) -> list[str]:
    return sorted(f.file_id for f in Table.open(table_path).view().latest_base_files(partition))


def timeline_files(base: str) -> list[str]:
    return sorted(p.name for p in Path(base, ".hoodie", "timeline").iterdir() if p.is_file())


def data_files(base: str) -> list[str]:
    return sorted(str(p.relative_to(base)) for p in Path(base).rglob("*.parquet") if ".hoodie" not in p.parts)


def test_insert_overwrite_flow_with_record_index(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    opts = rli_options("iow")
    Table.create(base, SCHEMA, opts)
    model = Model(RLI_SPEC, COLS)
    seen: set[str] = set()
    instants: list[str] = []

    def write(op: str, rows: list[dict[str, Any]], combine: bool = False, extra: dict[str, str] | None = None) -> Any:
        o = {**opts, **(extra or {}), **({"hoodie.combine.before.insert": "true"} if combine else {})}
        res = Table.open(base).write(df_of(spark, rows), op, o)
        model.apply(op, rows, res.instant, combine=combine)
        seen.update(r["id"] for r in rows)
        instants.append(res.instant)
        check(base, model, seen, f"{op} at {res.instant}")
        return res

    write("insert", recs(list(range(0, 20)), D1, 1) + recs(list(range(20, 40)), D2, 1) + recs(list(range(40, 60)), D3, 1))
    write("upsert", recs([1, 2, 21], D1, 2) + recs([60, 61], D2, 2))  # k021 updated where it is (in D2)
    before = {D1: latest_ids(base, D1), D2: latest_ids(base, D2), D3: latest_ids(base, D3)}

    # overwrite D1 and D2: k001..k004 stay in D1, k022/k023 move from D2 to D1, k005 moves from D1 to D2,
    # new keys k100.. in both; an in-batch duplicate of k003 (the greater ts wins); everything else of D1 and D2
    # (k000, k006..k019, k020, k021, k024..k039, k060, k061) goes
    batch = (
        recs([1, 2, 3, 4, 22, 23, 100, 101], D1, 3, "o")
        + recs([3], D1, 4, "dup")
        + recs([5, 102, 103], D2, 3, "o")
    )
    random.Random(5).shuffle(batch)
    res = write("insert_overwrite", batch, combine=True)
    assert res.inserted == len(batch) - 1 and res.updated == 0 and res.deleted == 0
    tl = Table.open(base).timeline()
    done = tl.completed().get(res.instant)
    assert done is not None and done.action == REPLACE_COMMIT
    requested = tl.read_content(Instant(res.instant, REPLACE_COMMIT, State.REQUESTED))
    assert requested == {"operationType": None, "clusteringPlan": None, "extraMetadata": None, "version": None}
    inflight = tl.read_content(Instant(res.instant, REPLACE_COMMIT, State.INFLIGHT))
    assert inflight is not None and inflight["operationType"] == "INSERT_OVERWRITE"
    assert {p: [s["numInserts"] for s in st] for p, st in inflight["partitionToWriteStats"].items()} == {D1: [8], D2: [3]}
    md = tl.read_commit_metadata(done)
    assert md["operationType"] == "INSERT_OVERWRITE"
    assert {p: sorted(ids) for p, ids in md["partitionToReplaceFileIds"].items()} == {D1: before[D1], D2: before[D2]}
    assert set(md["partitionToWriteStats"]) == {D1, D2}
    assert latest_ids(base, D3) == before[D3]
    new_ids = {s["fileId"] for st in md["partitionToWriteStats"].values() for s in st}
    assert not new_ids & set(before[D1] + before[D2])

    write("upsert", recs([40, 41], D3, 5) + recs([1, 100], D1, 5) + recs([200], D1, 5) + recs([0], D2, 5))

    # overwrite the whole table with records of D1 only: D2 and D3 end up empty
    res = write("insert_overwrite_table", recs([1, 40, 300, 301], D1, 6, "t"))
    tl = Table.open(base).timeline()
    md = tl.read_commit_metadata(tl.completed().get(res.instant))  # type: ignore[arg-type]
    assert md["operationType"] == "INSERT_OVERWRITE_TABLE"
    assert set(md["partitionToReplaceFileIds"]) == {D1, D2, D3}
    assert all(md["partitionToReplaceFileIds"][p] for p in (D1, D2, D3))
    assert Table.open(base).view().latest_base_files(D2) == []

    write("upsert", recs([1, 5, 40, 302], D1, 7))  # k005 (gone) comes back as a new key

    # time travel: hudi-rs and to_arrow as of every instant
    for inst in instants:
        want = model.snapshot(inst)
        assert_rows(f"hudi-rs as of {inst}", rows_of(hudi_rs_read(base, as_of=inst), COLS), want)
        assert_rows(f"to_arrow as of {inst}", rows_of(Table.open(base).to_arrow(as_of=inst), COLS), want)

    # cleaning: with one commit retained, the replaced file groups lose their files, in storage and in the
    # metadata table (validate compares the two)
    replaced = set()
    tl = Table.open(base).timeline()
    for rc in tl.completed().by_action(REPLACE_COMMIT):
        for ids in tl.read_commit_metadata(rc)["partitionToReplaceFileIds"].values():
            replaced.update(ids)
    assert replaced and any(parse_data_file_name(Path(f).name).file_id in replaced for f in data_files(base))  # type: ignore[union-attr]
    write("upsert", recs([301], D1, 8), extra={"hoodie.cleaner.commits.retained": "1"})
    write("upsert", recs([300], D1, 9), extra={"hoodie.cleaner.commits.retained": "1"})
    left = {parse_data_file_name(Path(f).name).file_id for f in data_files(base)}  # type: ignore[union-attr]
    assert not left & replaced, sorted(left & replaced)


def test_non_global_overwrite_empty_input_and_cli(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """SIMPLE index (no record index): a key may live in two partitions, overwriting one keeps the other; the
    CLI takes the new operations; an insert_overwrite_table of no records empties the table."""
    spec = Spec(("id",), ("dt",))
    base = str(tmp_path / "t")
    opts = spec.options("simple_iow")
    table = Table.create(base, SCHEMA, opts)
    model = Model(spec, COLS)
    first = recs([1, 2, 3], D1, 1) + recs([1, 4], D2, 1)
    res = table.write(df_of(spark, first), "insert", opts)
    model.apply("insert", [r for r in first if r["dt"] == D1], res.instant)  # the model's insert wants new keys:
    model.rows.update({(D2, r["id"]): (dict(r), res.instant) for r in first if r["dt"] == D2})  # k001 twice
    check(base, model, set(), "insert", record_index=False)
    assert RECORD_INDEX not in Table.open(base).config.metadata_partitions

    batch = recs([1, 5], D1, 2, "o")
    res = Table.open(base).write(df_of(spark, batch), "insert_overwrite", opts)
    model.apply("insert_overwrite", batch, res.instant)
    check(base, model, set(), "insert_overwrite of D1", record_index=False)
    assert ("2026/11/22", "k001") in model.rows

    cli_batch = recs([7, 8], D3, 3, "cli")
    inp = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(cli_batch, schema=SCHEMA), inp)
    out = CliRunner().invoke(cli_main, [
        "write", base, "--input", str(inp), "--operation", "insert_overwrite_table", "--record-key", "id",
        "--partition-field", "dt", "--ordering-field", "ts", "--index-type", "SIMPLE", "--json",
    ])
    assert out.exit_code == 0, out.output
    d = json.loads(out.output.strip().splitlines()[-1])
    assert d["operation"] == "insert_overwrite_table" and d["inserted"] == 2
    model.apply("insert_overwrite_table", cli_batch, d["instant"])
    check(base, model, set(), "CLI insert_overwrite_table", record_index=False)

    res = Table.open(base).write(spark.createDataFrame([], SCHEMA_DDL), "insert_overwrite_table", opts)
    model.apply("insert_overwrite_table", [], res.instant)
    assert model.snapshot() == []
    check(base, model, set(), "empty insert_overwrite_table", record_index=False)
    md = Table.open(base).timeline()
    assert md.read_commit_metadata(md.completed().get(res.instant))["partitionToReplaceFileIds"][D3]  # type: ignore[arg-type]


SCHEMA_DDL = "id string, ts bigint, dt string, v double, s string"


@pytest.mark.parametrize("index_type", ["RECORD_INDEX", "GLOBAL_SIMPLE"])
def test_global_key_in_kept_partition_is_rejected(spark, tmp_path: Path, index_type: str) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    opts = rli_options("reject", **{"hoodie.index.type": index_type})
    if index_type != "RECORD_INDEX":
        opts["hoodie.metadata.record.index.enable"] = "false"
    table = Table.create(base, SCHEMA, opts)
    model = Model(RLI_SPEC, COLS)
    first = recs([1, 2, 3], D1, 1) + recs([4, 5], D2, 1)
    res = table.write(df_of(spark, first), "insert", opts)
    model.apply("insert", first, res.instant)
    seen = {r["id"] for r in first}
    check(base, model, seen, "insert", record_index=index_type == "RECORD_INDEX")

    state = (timeline_files(base), data_files(base), sorted(p.name for p in Path(base, ".hoodie", "metadata").rglob("*")))
    bad = recs([1, 9], D1, 2) + recs([4], D1, 2)  # k004 is stored in D2, which this write keeps
    with pytest.raises(Rejected):
        model.check_overwrite("insert_overwrite", bad)
    with pytest.raises(InvalidInputError, match=r"key 'k004' is stored in partition '2026/11/22'"):
        Table.open(base).write(df_of(spark, bad), "insert_overwrite", opts)
    assert (timeline_files(base), data_files(base),
            sorted(p.name for p in Path(base, ".hoodie", "metadata").rglob("*"))) == state
    check(base, model, seen, "after the rejected write", record_index=index_type == "RECORD_INDEX")

    # overwriting both partitions the key moves between is fine
    ok = [*bad, *recs([5], D2, 2)]
    res = Table.open(base).write(df_of(spark, ok), "insert_overwrite", opts)
    model.apply("insert_overwrite", ok, res.instant)
    seen.update(r["id"] for r in ok)
    check(base, model, seen, "insert_overwrite of both partitions", record_index=index_type == "RECORD_INDEX")


def test_crash_during_insert_overwrite_is_rolled_back(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Each failing insert_overwrite leaves a pending replacecommit and an unchanged table; the next write rolls
    it back (a completed rollback, its files and markers gone, its metadata deltacommit gone)."""
    base = str(tmp_path / "t")
    opts = rli_options("crash")
    table = Table.create(base, SCHEMA, opts)
    model = Model(RLI_SPEC, COLS)
    first = recs(list(range(10)), D1, 1) + recs(list(range(10, 20)), D2, 1)
    res = table.write(df_of(spark, first), "insert", opts)
    model.apply("insert", first, res.instant)
    seen = {r["id"] for r in first}
    batch = recs([1, 2, 30], D1, 2, "o")
    seen.update(r["id"] for r in batch)
    failed: str | None = None

    def assert_rolled_back(t: str) -> None:
        tl = Table.open(base).timeline()
        assert tl.get(t) is None
        rolled = [x for i in tl.completed().by_action("rollback") for x in read_rollback_metadata(tl, i)["commitsRollback"]]
        assert t in rolled
        assert not [f for f in data_files(base) if t in f]
        assert not Path(markers.marker_dir(base, t)).exists()
        mdt = Table.open(base)
        assert MetadataWriter(mdt.storage, mdt.base_path, mdt.config).timeline().get(t) is None

    for fault in ("after_write", "before_commit", "before_data_commit"):
        with pytest.raises(Exception, match="injected fault"):
            Table.open(base).write(df_of(spark, batch), "insert_overwrite", {**opts, FAULT_OPTION: fault})
        if failed is not None:
            assert_rolled_back(failed)
        pending = [i for i in Table.open(base).timeline().pending()]
        assert len(pending) == 1 and pending[0].action == REPLACE_COMMIT, [str(i) for i in pending]
        failed = pending[0].requested_time
        if fault != "after_write":
            assert [f for f in data_files(base) if failed in f]  # written, invisible
        check(base, model, {r["id"] for r in first}, f"after a crash at {fault}")
        assert Table.open(base).lookup(["k030"]).column("found").to_pylist() == [False]

    assert failed is not None
    res = Table.open(base).write(df_of(spark, batch), "insert_overwrite", opts)
    model.apply("insert_overwrite", batch, res.instant)
    assert_rolled_back(failed)
    assert not Table.open(base).timeline().pending()
    check(base, model, seen, "after the recovering insert_overwrite")
