"""The metadata table end to end through ``Table.write`` on Spark: hudi-rs lists our tables through the files
partition, compaction and cleaning of the metadata table, crashes between the two commits and inside a
metadata compaction, creating / removing the metadata table on an existing table, and upserts into a
Java-written table whose metadata table has partitions pyhudi does not maintain."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pyhudi.cli.main import main as cli_main
from pyhudi.errors import CorruptFileError, PostCommitError
from pyhudi.io.storage import Storage
from pyhudi.metadata.partitions import FILES, INIT_PREFIX, RECORD_INDEX
from pyhudi.metadata.reader import MetadataTableReader
from pyhudi.metadata.validate import validate_table
from pyhudi.metadata.writer import MetadataWriter
from pyhudi.table.filenames import parse_data_file_name
from pyhudi.table.table import Table
from pyhudi.table.timeline import COMMIT, COMPACTION, DELTA_COMMIT, ActiveTimeline
from tests.paths import TABLE_ZIPS_DIR
from tests.support.column_stats import check_stats
from tests.support.faults import crash_next_metadata_compactions
from tests.support.fixtures import unzip_table

pytestmark = [pytest.mark.spark, pytest.mark.slow]  # Spark-heavy: make test runs it, make test-quick does not

hudi = pytest.importorskip("hudi")

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("dt", pa.string()), ("v", pa.int64())])


def opts(name: str, **extra: str) -> dict[str, str]:
    return {
        "hoodie.table.name": name,
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "dt",
        "hoodie.table.ordering.fields": "ts",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        **extra,
    }


class Model:
    """id -> (dt, ts, v); upsert = newest ts wins (ties: incoming)."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple[str, int, int]] = {}

    def upsert(self, rows: list[dict[str, Any]]) -> None:
        for r in rows:
            old = self.rows.get(r["id"])
            if old is None or r["ts"] >= old[1]:
                self.rows[r["id"]] = (r["dt"], r["ts"], r["v"])

    def snapshot(self) -> list[tuple[str, str, int, int]]:
        return sorted((k, dt, ts, v) for k, (dt, ts, v) in self.rows.items())


def rows(ids: list[str], ts: int, v: int) -> list[dict[str, Any]]:
    return [{"id": i, "ts": ts, "dt": "2026-11-0" + str(int(i[1:]) % 2 + 1), "v": v} for i in ids]


def hudi_rs_table(base: str, filters: list[tuple[str, str, str]] | None = None) -> pa.Table:
    t = hudi.HudiTableBuilder.from_base_uri(base).build()
    batches = list(t.read(hudi.HudiReadOptions(filters=filters)))
    return pa.Table.from_batches(batches) if batches else pa.table({})


def snap(t: pa.Table) -> list[tuple[str, str, int, int]]:
    if not t.num_rows:
        return []
    return sorted(zip(*(t.column(c).to_pylist() for c in ("id", "dt", "ts", "v")), strict=True))


def hudi_slices(base: str) -> list[tuple[str, str, str]]:
    t = hudi.HudiTableBuilder.from_base_uri(base).build()
    return sorted((fs.partition_path, fs.file_id, fs.base_file_name or "") for fs in t.get_file_slices())


def slices_of(view: Any) -> list[tuple[str, str, str]]:
    return sorted(
        (s.partition, s.file_id, s.base_file.file_name if s.base_file else "")
        for s in view.latest_file_slices()
    )


def mdt_timeline(base: str) -> ActiveTimeline:
    t = Table.open(base)
    return MetadataWriter(t.storage, t.base_path, t.config).timeline()


def mdt_file_names(base: str, partition: str = FILES) -> list[str]:
    d = Path(base, ".hoodie", "metadata", partition)
    return (
        sorted(p.name for p in d.iterdir() if parse_data_file_name(p.name) is not None) if d.is_dir() else []
    )


def cli_validate(base: str) -> tuple[int, dict[str, Any]]:
    res = CliRunner().invoke(cli_main, ["validate", base, "--json"])
    return res.exit_code, json.loads(res.output)


def check(table: Table, model: Model, what: str) -> None:
    """hudi-rs and Table.to_arrow read the model; views from the metadata table, a listing and hudi-rs agree;
    ``pyhudi validate`` is ok."""
    base = table.base_path
    table = Table.open(base)
    assert snap(hudi_rs_table(base)) == model.snapshot(), f"{what}: hudi-rs"
    assert snap(table.to_arrow()) == model.snapshot(), f"{what}: to_arrow"
    mdt = slices_of(table.view(use_metadata=True))
    assert mdt == slices_of(table.view(use_metadata=False)) == hudi_slices(base), what
    code, rep = cli_validate(base)
    assert (code, rep["ok"]) == (0, True), (what, rep)


class Writer:
    def __init__(self, spark: Any, base: str, name: str, model: Model) -> None:
        self.spark, self.base, self.name, self.model = spark, base, name, model
        self.table = Table.create(base, SCHEMA, opts(name))

    def write(self, batch: list[dict[str, Any]], **extra: str) -> str:
        df = self.spark.createDataFrame(pa.Table.from_pylist(batch, schema=SCHEMA))
        res = Table.open(self.base).write(df, "upsert", opts(self.name, **extra))
        self.model.upsert(batch)
        return res.instant


def test_dropped_file_invisible_to_hudi_rs_and_reported(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    model = Model()
    w = Writer(spark, base, "drop", model)
    w.write(rows([f"k{i}" for i in range(6)], 1, 1))
    last = w.write(rows(["k0", "k3"], 2, 2))
    table = Table.open(base)
    assert table.config.metadata_partitions == [FILES, RECORD_INDEX] and table.has_metadata_table  # new tables: RLI on
    check(table, model, "before the drop")

    # a parquet file dropped without a commit: a copy of a committed base file under a new file id, with a
    # completed instant in its name (a storage listing takes it for a committed file group)
    src = next(s for s in table.view().latest_base_files() if s.instant == last)
    new_fid = "deadbeef-0000-4000-8000-000000000000-0"
    parsed = parse_data_file_name(src.file_name)
    assert parsed is not None
    dropped = Path(base, src.partition, src.file_name.replace(parsed.file_id, new_fid))
    shutil.copyfile(Path(base, src.relative_path), dropped)

    listed = Table.open(base).view(use_metadata=False)
    assert new_fid in {s.file_id for s in listed.latest_file_slices()}  # a listing-based view sees it
    assert new_fid not in {s.file_id for s in Table.open(base).view(use_metadata=True).latest_file_slices()}
    assert new_fid not in {f for _, f, _ in hudi_slices(base)}  # hudi-rs lists through the files partition
    assert snap(hudi_rs_table(base)) == model.snapshot()  # (a listing would add duplicate rows of k0/k3)
    code, rep = cli_validate(base)
    assert code == 1 and not rep["ok"]
    assert rep["missing_in_metadata"] == [f"{src.partition}/{dropped.name}"]
    assert f"{src.partition}/{new_fid}" in rep["file_slices_differ"]
    res = CliRunner().invoke(cli_main, ["validate", base])
    assert res.exit_code == 1 and "missing_in_metadata" in res.output

    # a write that compacts the metadata table: still invisible, hudi-rs still reads the model
    n_compactions = len([i for i in mdt_timeline(base).completed() if i.action == COMMIT])
    w.write(rows(["k1", "k6"], 3, 3), **{"hoodie.metadata.compact.max.delta.commits": "1"})
    assert len([i for i in mdt_timeline(base).completed() if i.action == COMMIT]) == n_compactions + 1
    assert snap(hudi_rs_table(base)) == model.snapshot()
    assert new_fid not in {f for _, f, _ in hudi_slices(base)}
    code, rep = cli_validate(base)
    assert code == 1 and rep["missing_in_metadata"] == [f"{src.partition}/{dropped.name}"]
    dropped.unlink()
    check(Table.open(base), model, "after compaction, dropped file removed")


def test_twelve_spark_commits_compact_twice(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    model = Model()
    w = Writer(spark, base, "many", model)
    extra = {"hoodie.metadata.compact.max.delta.commits": "5", "hoodie.cleaner.commits.retained": "3"}
    t0 = time.perf_counter()
    for i in range(12):
        w.write(rows([f"k{i % 4}", f"n{i}"], i, i), **extra)
    elapsed = time.perf_counter() - t0
    mdt_tl = mdt_timeline(base)
    compactions = sorted(i.requested_time for i in mdt_tl.completed() if i.action == COMMIT)
    assert len(compactions) >= 2, [str(i) for i in mdt_tl]
    assert not mdt_tl.pending()
    table = Table.open(base)
    assert validate_table(table).ok
    check(table, model, f"after 12 commits ({elapsed:.0f}s)")
    # old metadata file slices were cleaned: nothing older than the second-to-last compaction is left
    names = mdt_file_names(base)
    assert [
        n for n in names if (p := parse_data_file_name(n)) is not None and p.instant < compactions[-2]
    ] == []


def test_crash_before_data_commit_and_in_metadata_compaction(  # type: ignore[no-untyped-def]
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = str(tmp_path / "t")
    model = Model()
    w = Writer(spark, base, "crash", model)
    w.write(rows([f"k{i}" for i in range(4)], 1, 1))
    before = model.snapshot()

    # 1. crash between the metadata deltacommit and the data commit
    batch = rows(["k0", "k9"], 2, 2)
    df = spark.createDataFrame(pa.Table.from_pylist(batch, schema=SCHEMA))
    with pytest.raises(Exception, match="injected fault: before_data_commit"):
        Table.open(base).write(df, "upsert", opts("crash", **{"pyhudi.test.fault": "before_data_commit"}))
    data_tl = Table.open(base).timeline()
    failed = [i.requested_time for i in data_tl.pending() if i.action == COMMIT]
    assert len(failed) == 1
    assert mdt_timeline(base).completed().contains(failed[0])  # the deltacommit completed
    assert any(failed[0] in n for n in mdt_file_names(base))
    check(Table.open(base), model, "after the crash before the data commit")
    assert model.snapshot() == before

    w.write(rows(["k1"], 3, 3))  # the next write rolls the failed one back, metadata first
    assert not any(failed[0] in n for n in mdt_file_names(base))
    assert mdt_timeline(base).get(failed[0]) is None
    assert not Table.open(base).timeline().pending()
    check(Table.open(base), model, "after the recovering write")

    # 2. crash inside a metadata compaction (after its base files are written, before it completes)
    crash_next_metadata_compactions(monkeypatch, "injected: metadata compaction died after writing its base files")
    batch = rows(["k2", "k8"], 4, 4)
    with pytest.raises(PostCommitError, match=r"committed .* post-commit metadata compaction failed: RuntimeError: "
                       "injected: metadata compaction"):
        w.write(batch, **{"hoodie.metadata.compact.max.delta.commits": "1"})
    monkeypatch.undo()
    model.upsert(batch)  # the data commit completed before the metadata compaction started
    pending = [i for i in mdt_timeline(base).pending() if i.action == COMPACTION]
    assert len(pending) == 1
    ct = pending[0].requested_time
    assert any(ct in n and n.endswith(".hfile") for n in mdt_file_names(base))
    check(Table.open(base), model, "with a pending metadata compaction")  # the data commit had completed

    w.write(rows(["k3"], 5, 5))  # recovers: the pending compaction and its files are gone
    assert mdt_timeline(base).get(ct) is None
    assert not any(ct in n for n in mdt_file_names(base))
    check(Table.open(base), model, "after recovering from the compaction crash")
    w.write(rows(["k0"], 6, 6), **{"hoodie.metadata.compact.max.delta.commits": "1"})
    assert [i for i in mdt_timeline(base).completed() if i.action == COMMIT]
    check(Table.open(base), model, "after a completed compaction")


def test_create_on_existing_table_then_disable(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    model = Model()
    w = Writer(spark, base, "toggle", model)
    off = {"hoodie.metadata.enable": "false"}
    w.write(rows([f"k{i}" for i in range(4)], 1, 1), **off)
    w.write(rows(["k0"], 2, 2), **off)
    assert not Path(base, ".hoodie", "metadata").exists()
    assert Table.open(base).config.metadata_partitions == []
    assert snap(hudi_rs_table(base)) == model.snapshot()

    w.write(rows(["k1", "k5"], 3, 3))  # enabled (default): created from a listing, then this commit applied
    table = Table.open(base)
    assert table.has_metadata_table and table.config.metadata_partitions == [FILES]
    inits = [
        i.requested_time for i in mdt_timeline(base).completed() if i.requested_time.startswith(INIT_PREFIX)
    ]
    assert inits == [f"{INIT_PREFIX}000"]
    # the bootstrap listed the files of the two earlier commits
    reader = MetadataTableReader(
        table.storage, table.base_path, data_timeline=table.timeline(), data_config=table.config
    )
    committed = {i.requested_time for i in table.timeline().completed_commits()}
    listed = {parse_data_file_name(n).instant for files in reader.all_files().values() for n in files}  # type: ignore[union-attr]
    assert listed == committed
    check(table, model, "after creation on an existing table")
    w.write(rows(["k2"], 4, 4))
    inits = [
        i.requested_time for i in mdt_timeline(base).completed() if i.requested_time.startswith(INIT_PREFIX)
    ]
    assert inits == [f"{INIT_PREFIX}000"]  # bootstrapped once
    deltas = [i for i in mdt_timeline(base).completed() if i.action == DELTA_COMMIT]
    assert len(deltas) >= 3

    w.write(rows(["k3"], 5, 5), **off)  # disabled: the metadata table goes, property and folder
    table = Table.open(base)
    assert not Path(base, ".hoodie", "metadata").exists()
    props = Path(base, ".hoodie", "hoodie.properties").read_text()
    assert "hoodie.table.metadata.partitions=" not in props.replace(
        "hoodie.table.metadata.partitions.inflight", ""
    )
    assert not table.has_metadata_table
    assert snap(hudi_rs_table(base)) == model.snapshot()  # hudi-rs reads by listing
    assert snap(table.to_arrow()) == model.snapshot()
    assert slices_of(table.view()) == hudi_slices(base)


FIXTURE = "cow_v9_txns_simple_meta.zip"
UNMAINTAINED = (
    "secondary_index_merchant_idx",
    "secondary_index_txn_date_idx",
)


needs_fixture = pytest.mark.skipif(
    not (TABLE_ZIPS_DIR / FIXTURE).is_file(), reason=f"{FIXTURE} not available"
)
FIXTURE_OPTS = {
    "hoodie.datasource.write.recordkey.field": "txn_id",
    "hoodie.datasource.write.partitionpath.field": "region",
    "hoodie.table.ordering.fields": "txn_ts",
    "hoodie.datasource.write.hive_style_partitioning": "true",
}


def check_fixture_after_write(
    base: str, res: Any, mdt_before: set[str], want: dict[str, dict[str, Any]], data: pa.Table
) -> Table:
    """Unmaintained metadata partitions dropped (property and folder), files partition updated with the
    write's deltacommit, validate ok, hudi-rs reads ``want``, views agree."""
    table = Table.open(base)
    parts = table.config.metadata_partitions
    # the write names what it took out
    assert res.metadata_partitions_dropped == sorted(UNMAINTAINED)
    assert res.to_dict()["metadata_partitions_dropped"] == sorted(UNMAINTAINED)
    for p in UNMAINTAINED:
        assert p not in parts
        assert not Path(base, ".hoodie", "metadata", p).exists(), p
    # nor does the table still declare them (Hudi's index definition file), the others' definitions kept
    defs = json.loads(Path(base, ".hoodie", ".index_defs", "index.json").read_text())["indexDefinitions"]
    assert sorted(defs) == ["column_stats", "record_index"]
    assert FILES in parts
    assert table.config.metadata_partitions_inflight == []
    # column and partition statistics are kept: those of the files written, and of the partitions written to
    # (the others keep what the Java writer left, which after its clustering bound their files)
    touched = {s.partition for s in res.stats}
    check_stats(base, exact_partitions=touched)
    mdt_tl = mdt_timeline(base)
    assert mdt_tl.completed().contains(res.instant) and res.instant not in mdt_before
    st, p = Storage.from_uri(base)
    reader = MetadataTableReader(st, p, data_timeline=table.timeline(), data_config=table.config)
    written = {s.path.rsplit("/", 1)[-1] for s in res.stats}
    assert written and written <= {n for files in reader.all_files().values() for n in files}
    rep = validate_table(table)
    assert rep.ok, rep.to_dict()
    code, _ = cli_validate(base)
    assert code == 0
    got = hudi_rs_table(base).select(data.column_names).cast(data.schema)
    assert sorted(got.to_pylist(), key=lambda r: r["txn_id"]) == sorted(
        want.values(), key=lambda r: r["txn_id"]
    )
    cut = sorted(r["txn_ts"] for r in want.values())[len(want) // 2]
    got = hudi_rs_table(base, [("txn_ts", ">=", str(cut))]).select(data.column_names).cast(data.schema)
    assert sorted(got.to_pylist(), key=lambda r: r["txn_id"]) == sorted(
        (r for r in want.values() if r["txn_ts"] >= cut), key=lambda r: r["txn_id"])
    assert (
        slices_of(table.view(use_metadata=True))
        == slices_of(table.view(use_metadata=False))
        == hudi_slices(base)
    )
    return table


def fixture_rows(base: str) -> pa.Table:
    """The fixture's data columns as hudi-rs reads them."""
    snap0 = hudi_rs_table(base)
    return snap0.select([c for c in snap0.column_names if not c.startswith("_hoodie_")])


@needs_fixture
def test_delete_from_java_written_table(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A write into the Java table (a delete: input = key, partition and ordering columns) drops the metadata
    partitions pyhudi does not maintain and keeps the files partition (and a kept record index) right."""
    base = str(unzip_table(FIXTURE, tmp_path))
    assert set(UNMAINTAINED) <= set(Table.open(base).config.metadata_partitions)
    data = fixture_rows(base)
    rows_by_id = {r["txn_id"]: r for r in data.to_pylist()}
    gone = sorted(rows_by_id)[:2]
    batch = data.select(["txn_id", "region", "txn_ts"]).filter(
        pc.is_in(data.column("txn_id"), pa.array(gone))
    )
    mdt_before = {i.requested_time for i in mdt_timeline(base).completed()}
    o = {"hoodie.table.name": Table.open(base).name, **FIXTURE_OPTS}
    res = Table.open(base).write(spark.createDataFrame(batch), "delete", o)
    want = {k: r for k, r in rows_by_id.items() if k not in gone}
    table = check_fixture_after_write(base, res, mdt_before, want, data)
    assert RECORD_INDEX in table.config.metadata_partitions  # kept and maintained: it must know the live keys
    found = table.lookup(sorted(rows_by_id))
    assert dict(zip(found.column("key").to_pylist(), found.column("found").to_pylist(), strict=True)) == {
        k: k not in gone for k in rows_by_id
    }


@needs_fixture
def test_upsert_into_java_written_table(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(unzip_table(FIXTURE, tmp_path))
    data = fixture_rows(base)
    rows_by_id = {r["txn_id"]: r for r in data.to_pylist()}
    changed = []
    for i in sorted(rows_by_id)[:3]:  # change txn_metadata and bump txn_ts on three records
        r = dict(rows_by_id[i])
        r["txn_metadata"] = f"changed-{i}"
        r["txn_ts"] = (r["txn_ts"] or 0) + 1
        changed.append(r)
    batch = pa.Table.from_pylist(changed, schema=data.schema)
    mdt_before = {i.requested_time for i in mdt_timeline(base).completed()}
    o = {"hoodie.table.name": Table.open(base).name, **FIXTURE_OPTS}
    res = Table.open(base).write(spark.createDataFrame(batch), "upsert", o)
    want = {**rows_by_id, **{r["txn_id"]: r for r in changed}}
    table = check_fixture_after_write(base, res, mdt_before, want, data)
    assert RECORD_INDEX in table.config.metadata_partitions
    assert all(table.lookup(sorted(want)).column("found").to_pylist())


@needs_fixture
def test_index_definitions_follow_the_metadata_partitions(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Every write keeps in the table's index definition file only the indexes the table has (a definition left
    from before is taken out too); an unreadable file fails the write before hoodie.properties changes."""
    base = str(unzip_table(FIXTURE, tmp_path))
    data = fixture_rows(base)
    o = {"hoodie.table.name": Table.open(base).name, **FIXTURE_OPTS}
    batch = spark.createDataFrame(data.slice(0, 1))
    defs_file = Path(base, ".hoodie", ".index_defs", "index.json")
    Table.open(base).write(batch, "upsert", o)
    doc = json.loads(defs_file.read_text())
    doc["indexDefinitions"]["secondary_index_left"] = {"indexName": "secondary_index_left"}
    defs_file.write_text(json.dumps(doc))
    Table.open(base).write(batch, "upsert", o)
    assert sorted(json.loads(defs_file.read_text())["indexDefinitions"]) == ["column_stats", "record_index"]
    props = Path(base, ".hoodie", "hoodie.properties").read_bytes()
    defs_file.write_text("{not json")
    with pytest.raises(CorruptFileError, match=r"index\.json: not an index definition file"):
        Table.open(base).write(batch, "upsert", o)
    assert Path(base, ".hoodie", "hoodie.properties").read_bytes() == props


@needs_fixture
def test_cli_write_names_the_metadata_partitions_it_takes_out(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``pyhudi write`` into the Java table says which metadata partitions it took out (in the session's
    process: no second Spark)."""
    base = str(unzip_table(FIXTURE, tmp_path))
    data = fixture_rows(base)
    src = tmp_path / "upd.parquet"
    pq.write_table(data.slice(0, 1), src)
    args = ["write", base, "--input", str(src), "--operation", "upsert", "--record-key", "txn_id",
            "--partition-field", "region", "--ordering-field", "txn_ts",
            "--option", "hoodie.datasource.write.hive_style_partitioning=true"]
    res = CliRunner().invoke(cli_main, args)
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.output.splitlines() if ln.startswith("metadata partitions taken out"))
    assert line.endswith(": " + ", ".join(sorted(UNMAINTAINED)))
    # a second write has nothing left to take out, and says nothing
    res = CliRunner().invoke(cli_main, [*args, "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output.strip().splitlines()[-1])["metadata_partitions_dropped"] == []
