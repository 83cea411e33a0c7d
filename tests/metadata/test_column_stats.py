"""The metadata table's ``column_stats`` and ``partition_stats``: byte-compatible with the Java-written fixtures,
maintained by every write, table service and clean of copy-on-write and merge-on-read tables, built when enabled
on an existing table, removed when disabled, and used by readers to skip files."""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hudi import HudiReadOptions, HudiTableBuilder

from pyhudi import Table
from pyhudi.io.storage import Storage
from pyhudi.metadata.column_stats import (
    column_stats_key,
    file_ranges,
    hash_id,
    indexed_columns,
    partition_stats_key,
)
from pyhudi.metadata.partitions import COLUMN_STATS, PARTITION_STATS
from pyhudi.metadata.reader import MetadataTableReader
from pyhudi.metadata.records import encode_value, record_index_file_group
from pyhudi.metadata.validate import validate_table
from pyhudi.read.filters import GE, LT, Pred, Stats
from pyhudi.spark.source import plan_query
from pyhudi.table.schema import with_meta
from tests.paths import TABLE_ZIPS_DIR
from tests.support.column_stats import check_stats
from tests.support.fixtures import unzip_table

V9_STATS = ["cow_v9_txns_simple_meta.zip", "cow_v9_txns_complex_meta.zip", "cow_v9_txns_nonpart_meta.zip",
            "mor_v9_txns_simple_meta.zip"]


def _reader(base: str) -> MetadataTableReader:
    st, root = Storage.from_uri(base)
    return MetadataTableReader(st, root)


def test_key_hashes() -> None:
    # recomputed from the Java-written fixture (cow_v9_txns_simple_meta): column `currency`, partition `region=us`
    assert hash_id("currency") == "/m6lxu4Dh5w="
    assert hash_id("region=us") == "431THTTwO5Q="
    assert hash_id(".") == "FXThHwelITM="  # a non-partitioned table's partition
    name = "6d0f5b25-276e-4c1b-8ed0-c74a7d393fc9-0_2-235-588_20260307162454799.parquet"
    assert column_stats_key("currency", "region=us", name) == "/m6lxu4Dh5w=431THTTwO5Q=TmesX7jZ1i3m9S/IhkXiRQ=="
    assert partition_stats_key("currency", "region=us") == "/m6lxu4Dh5w=431THTTwO5Q="
    assert partition_stats_key("currency", "") == "/m6lxu4Dh5w=FXThHwelITM="


@pytest.mark.parametrize("zip_name", [z for z in V9_STATS if (TABLE_ZIPS_DIR / z).is_file()])
def test_records_match_the_java_written_fixture(zip_name: str, tmp_path: Path) -> None:
    """Every column_stats record Hudi 1.1 wrote (base files from their footers, log files from their records,
    delete-only logs included) is what pyhudi computes for the same file, encoded to the same bytes, in the same
    file group."""
    base = str(unzip_table(zip_name, tmp_path))
    reader = _reader(base)
    st, root = Storage.from_uri(base)
    schema = with_meta(Table.open(base).schema())
    cols = indexed_columns(schema)
    slices = reader.file_slices(COLUMN_STATS)
    seen = 0
    for i, fs in enumerate(slices):
        merged = reader.merge_slice(fs)
        assert merged
        for key in merged:
            assert record_index_file_group(key, len(slices)) == i, key
    stored = reader.read_partition(COLUMN_STATS)
    data_files = [p for p in Path(base).rglob("*") if p.is_file() and ".hoodie" not in p.parts
                  and (p.suffix == ".parquet" or ".log." in p.name)]
    for p in data_files:
        rel = p.relative_to(base).as_posix()
        part = posixpath.dirname(rel)
        for r in file_ranges(st, posixpath.join(root, rel), schema, cols):
            rec = r.to_record(part, p.name)
            theirs = stored.get(rec.key)
            if theirs is None:
                continue  # a file of a commit the Java writer rolled back, or cleaned from the index
            assert theirs.type == rec.type
            assert theirs.fields["ColumnStatsMetadata"] == rec.fields["ColumnStatsMetadata"], (rel, r.column)
            blank = {**theirs.fields, "_hoodie_file_name": None}
            assert encode_value(blank) == encode_value(rec), (rel, r.column)
            seen += 1
    assert seen == len(stored), (seen, len(stored))


# -- tables pyhudi writes -------------------------------------------------------------------------------------
OPTS = {
    "hoodie.table.name": "cs",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "region",
    "hoodie.table.ordering.fields": "ts",
    "hoodie.metadata.index.column.stats.enable": "true",
    "hoodie.cleaner.commits.retained": "1",
    "hoodie.metadata.compact.max.delta.commits": "4",
    "hoodie.compact.inline.max.delta.commits": "2",
}
SCHEMA = "id string, region string, ts long, v double, day date, amt decimal(12,2)"


def _rows(ids: range, ts: int, regions: tuple[str, ...] = ("a", "b", "c")) -> list[tuple[Any, ...]]:
    import datetime as dt
    import decimal

    return [(f"k{i:04d}", regions[i % len(regions)], ts, float(i) + ts / 1000, dt.date(2026, 1, 1 + i % 28),
             decimal.Decimal(f"{i}.{ts % 100:02d}")) for i in ids]


def _hudi_rs(base: str, filters: list[tuple[str, str, str]] | None = None) -> dict[str, int]:
    opts = HudiReadOptions(filters=filters) if filters else HudiReadOptions()
    batches = list(HudiTableBuilder.from_base_uri(base).build().read(opts))
    t = pa.Table.from_batches(batches) if batches else pa.table({"id": [], "ts": []})
    return dict(zip(t.column("id").to_pylist(), t.column("ts").to_pylist(), strict=True))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_written_table_keeps_statistics_exact(spark, tmp_path: Path, table_type: str) -> None:  # type: ignore[no-untyped-def]
    """Inserts, upserts, deletes, compactions (merge-on-read), cleans, metadata compactions and an
    insert_overwrite: after each, every latest file's statistics are exact, partition statistics merge them,
    readers skipping files by them return what hudi-rs returns, and cleaned files' statistics are gone."""
    base = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.datasource.write.table.type": table_type}
    model: dict[str, int] = {}

    def write(rows: list[tuple[Any, ...]], op: str) -> Any:
        df = spark.createDataFrame(rows, SCHEMA)
        res = Table.for_dataframe(base, df, opts).write(df, op, opts)
        for r in rows:
            if op == "delete":
                model.pop(r[0], None)
            else:
                model[r[0]] = r[2]
        return res

    logs_seen = []

    def check(exact: set[str] | None = None) -> None:
        files = check_stats(base, exact_partitions=exact)
        rep = validate_table(Table.open(base))
        assert rep.ok and rep.column_stats is not None and rep.column_stats["files"], rep.to_dict()
        logs_seen.extend(n for fm in files.values() for n in fm if n.startswith("."))
        assert _hudi_rs(base) == model
        for lo, hi in ((0, 150), (150, 250), (300, 400)):
            want = {k: v for k, v in model.items() if lo <= v < hi}
            assert _hudi_rs(base, [("ts", ">=", str(lo)), ("ts", "<", str(hi))]) == want
            plan, _ = plan_query({"path": base}, (Pred("ts", GE, lo), Pred("ts", LT, hi)))
            got = plan.to_arrow()
            got_rows = dict(zip(got.column("id").to_pylist(), got.column("ts").to_pylist(), strict=True))
            assert {k: v for k, v in got_rows.items() if lo <= v < hi} == want
        # no live statistics of a file that is gone from storage
        for rec in _reader(base).read_partition(COLUMN_STATS).values():
            name = rec.fields["ColumnStatsMetadata"]["fileName"]
            assert list(Path(base).rglob(name)), name

    write(_rows(range(0, 60), 100), "bulk_insert")
    check()
    write(_rows(range(0, 60, 3), 200) + _rows(range(60, 70), 200), "upsert")
    check()
    write(_rows(range(0, 60, 7), 0), "delete")
    check()
    write(_rows(range(1, 60, 5), 300), "upsert")  # merge-on-read: the second deltacommit, compacted inline
    check()
    write(_rows(range(2, 60, 11), 310), "upsert")
    check()
    # insert_overwrite of region a: the partition's statistics still count the replaced file groups (as in
    # Hudi), so they only bound its files until the next write to it
    over = [r for r in _rows(range(200, 210), 390, ("a",))]
    for k in [k for k in model if int(k[1:]) % 3 == 0]:
        model.pop(k)
    write(over, "insert_overwrite")
    check(exact={"b", "c"})
    write(_rows(range(200, 203), 395, ("a",)), "upsert")
    check()
    assert bool(logs_seen) == (table_type == "MERGE_ON_READ")
    cleans = [i for i in Table.open(base).timeline().completed() if i.action == "clean"]
    assert cleans  # cleaned files' statistics were checked gone
    # a range no file holds skips every file by column statistics; one only region a's files hold, the others
    _, rep = plan_query({"path": base}, (Pred("ts", GE, 1000),))
    assert rep.files_read == 0 and "column_stats" in rep.steps
    plan, rep = plan_query({"path": base}, (Pred("ts", GE, 390),))
    assert "column_stats" in rep.steps and 0 < rep.files_read < rep.files_total
    assert {sl.partition for sl in plan.slices} == {"a"}


def test_enabling_builds_and_disabling_removes(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    opts = {k: v for k, v in OPTS.items() if k != "hoodie.metadata.index.column.stats.enable"}
    df = spark.createDataFrame(_rows(range(0, 40), 100), SCHEMA)
    Table.for_dataframe(base, df, opts).write(df, "bulk_insert", opts)
    assert COLUMN_STATS not in Table.open(base).config.metadata_partitions  # off by default
    on = {**opts, "hoodie.metadata.index.column.stats.enable": "true"}
    df2 = spark.createDataFrame(_rows(range(0, 40, 4), 150), SCHEMA)
    Table.open(base).write(df2, "upsert", on)
    parts = Table.open(base).config.metadata_partitions
    assert COLUMN_STATS in parts and PARTITION_STATS in parts
    check_stats(base)
    # a later write without the option keeps them (the table has them)
    Table.open(base).write(spark.createDataFrame(_rows(range(1, 40, 4), 160), SCHEMA), "upsert", opts)
    check_stats(base)
    off = {**opts, "hoodie.metadata.index.column.stats.enable": "false"}
    res = Table.open(base).write(spark.createDataFrame(_rows(range(2, 40, 4), 170), SCHEMA), "upsert", off)
    parts = Table.open(base).config.metadata_partitions
    assert COLUMN_STATS not in parts and PARTITION_STATS not in parts
    assert res.metadata_partitions_dropped == [COLUMN_STATS, PARTITION_STATS]
    assert not Path(base, ".hoodie", "metadata", COLUMN_STATS).exists()
    # and on again: built anew from the files
    Table.open(base).write(spark.createDataFrame(_rows(range(3, 40, 4), 180), SCHEMA), "upsert", on)
    check_stats(base)
    # partition statistics off: column statistics stay
    no_ps = {**opts, "hoodie.metadata.index.partition.stats.enable": "false"}
    Table.open(base).write(spark.createDataFrame(_rows(range(0, 40, 6), 190), SCHEMA), "upsert", no_ps)
    parts = Table.open(base).config.metadata_partitions
    assert COLUMN_STATS in parts and PARTITION_STATS not in parts
    check_stats(base, partition_stats=False)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("fault", ["after_write", "before_data_commit"])
def test_failed_write_leaves_no_statistics(spark, tmp_path: Path, table_type: str, fault: str) -> None:  # type: ignore[no-untyped-def]
    """A write that dies after its files (or after its metadata deltacommit) leaves no statistics readers use;
    the next write rolls it back and the statistics are exact again."""
    from pyhudi.write.producer import FAULT_OPTION

    base = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.datasource.write.table.type": table_type}
    df = spark.createDataFrame(_rows(range(0, 40), 100), SCHEMA)
    Table.for_dataframe(base, df, opts).write(df, "bulk_insert", opts)
    bad = spark.createDataFrame(_rows(range(0, 40, 2), 900) + _rows(range(40, 45), 900), SCHEMA)
    with pytest.raises(Exception, match="injected fault"):
        Table.open(base).write(bad, "upsert", {**opts, FAULT_OPTION: fault})
    check_stats(base)  # the failed instant's deltacommit is not valid: its statistics are not read
    _, rep = plan_query({"path": base}, (Pred("ts", GE, 900),))
    assert rep.files_read == 0
    Table.open(base).write(spark.createDataFrame(_rows(range(1, 40, 3), 200), SCHEMA), "upsert", opts)
    check_stats(base)
    assert all(v < 900 for v in _hudi_rs(base).values())


def test_kill9_after_metadata_deltacommit_then_next_write(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A real SIGKILL of a CLI write right after its metadata deltacommit (statistics written, data instant not
    completed): readers see the table before it, and the next write leaves exact statistics."""
    import signal

    from pyhudi.faults import ENV
    from tests.support.robust import run_cli

    base = str(tmp_path / "t")
    df = spark.createDataFrame(_rows(range(0, 40), 100), SCHEMA)
    Table.for_dataframe(base, df, OPTS).write(df, "bulk_insert", OPTS)
    inp = tmp_path / "in"
    spark.createDataFrame(_rows(range(0, 40, 2), 900), SCHEMA).coalesce(1).write.parquet(str(inp))
    args = ["write", base, "--input", str(inp), "--operation", "upsert", "--record-key", "id", "--partition-field",
            "region", "--ordering-field", "ts"]
    r = run_cli(*args, **{ENV: "kill_before_data_commit"})
    assert r.returncode == -signal.SIGKILL, (r.returncode, r.stderr[-3000:])
    check_stats(base)
    assert all(v < 900 for v in _hudi_rs(base).values())
    Table.open(base).write(spark.createDataFrame(_rows(range(1, 40, 3), 200), SCHEMA), "upsert", OPTS)
    check_stats(base)
    assert all(v < 900 for v in _hudi_rs(base).values())


def test_validate_reports_files_without_statistics(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.metadata.compact.max.delta.commits": "10"}  # the statistics stay in log files
    # nine files: a key's file group is the parity of its characters' sum, so with few files every file's
    # statistics of one column could sit in the same file group, and a column whose statistics are all lost is
    # taken for one the writer did not index
    df = spark.createDataFrame(_rows(range(0, 36), 100, tuple("abcdefghi")), SCHEMA)
    Table.for_dataframe(base, df, opts).write(df, "bulk_insert", opts)
    assert validate_table(Table.open(base)).ok
    for p in Path(base, ".hoodie", "metadata", COLUMN_STATS).iterdir():
        if p.name.startswith(".col-stats-0001"):
            p.write_bytes(b"")  # the file group's statistics lost
    rep = validate_table(Table.open(base))
    assert not rep.ok and rep.column_stats is not None and rep.column_stats["missing"], rep.to_dict()


def test_logs_appended_while_a_compaction_is_pending(spark, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Logs appended while a compaction is pending (by a writer that leaves compaction to another process, as
    Hudi's async compaction does) join the compacted slice: the partition statistics written when the compaction
    completes count them (else a range query would skip their rows)."""
    from pyhudi.txn.transaction import WriteTransaction
    from pyhudi.write.producer import FAULT_OPTION

    base = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
    df = spark.createDataFrame(_rows(range(0, 30), 100), SCHEMA)
    Table.for_dataframe(base, df, opts).write(df, "bulk_insert", opts)
    with pytest.raises(Exception, match="injected fault"):  # the second deltacommit's inline compaction dies
        Table.open(base).write(spark.createDataFrame(_rows(range(1, 30, 2), 250), SCHEMA), "upsert",
                               {**opts, FAULT_OPTION: "compaction.before_complete"})
    assert [i.action for i in Table.open(base).timeline() if not i.is_completed] == ["compaction"]
    no_inline = {**opts, "hoodie.compact.inline": "false"}
    # appended while the compaction is pending (this writer does not resume it): values no other file holds
    with monkeypatch.context() as m:
        m.setattr(WriteTransaction, "resume_compactions", lambda *a, **k: [])
        Table.open(base).write(spark.createDataFrame(_rows(range(0, 30, 5), 5000), SCHEMA), "upsert", no_inline)
    assert [i.action for i in Table.open(base).timeline() if not i.is_completed] == ["compaction"]
    check_stats(base)
    # the next write completes the compaction first, then writes to region a only. The compaction's partition
    # statistics (its instant is older) come before the appending deltacommit's in the metadata table's log
    # order, so regions b and c keep the wider statistics of the slice before the compaction, which still bound
    # every value of their files
    Table.open(base).write(spark.createDataFrame(_rows(range(0, 1), 260, ("a",)), SCHEMA), "upsert", no_inline)
    assert not [i for i in Table.open(base).timeline() if not i.is_completed]
    check_stats(base, exact_partitions={"a"})
    want = {k: v for k, v in _hudi_rs(base).items() if v >= 5000}
    assert len(want) == 6
    plan, _ = plan_query({"path": base}, (Pred("ts", GE, 5000),))
    got = plan.to_arrow()
    assert {k: v for k, v in zip(got.column("id").to_pylist(), got.column("ts").to_pylist(), strict=True)
            if v >= 5000} == want
    assert validate_table(Table.open(base)).ok


def test_wide_decimals_are_exact(tmp_path: Path) -> None:
    """A decimal of more than 28 digits is stored and read back unrounded (a rounded bound could rule out the
    very row it came from)."""
    import decimal

    import pyarrow.parquet as pq

    from pyhudi.metadata.column_stats import ColumnRange, ranges_from_parquet, ranges_from_table
    from pyhudi.read.filters import EQ, may_match
    from pyhudi.read.pruning import _wrapped

    t = pa.schema([("x", pa.decimal128(38, 0)), ("y", pa.decimal128(38, 10))])
    vals = [decimal.Decimal("123456789012345678901234567849"), decimal.Decimal("1234567890123456789012345.6789012345")]
    table = pa.table({"x": pa.array([vals[0]], t.field("x").type), "y": pa.array([vals[1]], t.field("y").type)})
    pq.write_table(table, tmp_path / "f.parquet")
    for ranges in (ranges_from_table(table, ["x", "y"]),
                   ranges_from_parquet(pq.read_metadata(tmp_path / "f.parquet"), table.schema, ["x", "y"])):
        for r, v in zip(ranges, vals, strict=True):
            cs = r.to_record("", "f.parquet").fields["ColumnStatsMetadata"]
            back = ColumnRange.from_fields(cs)
            lo = _wrapped(cs["minValue"], t.field(r.column).type, cs["valueType"])
            hi = _wrapped(cs["maxValue"], t.field(r.column).type, cs["valueType"])
            assert back == r and lo == hi == ("num", v), (r.column, lo, v)
            assert may_match(Pred(r.column, EQ, v), Stats(lo, hi, 0, 1))


def test_fewer_indexed_columns_leave_no_stale_partition_statistics(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A write indexing fewer columns than the writes before it takes the other columns' partition statistics
    of the partitions it touches out (they would not cover its files)."""
    base = str(tmp_path / "t")
    df = spark.createDataFrame(_rows(range(0, 30), 100), SCHEMA)
    Table.for_dataframe(base, df, OPTS).write(df, "bulk_insert", OPTS)
    ps = _reader(base).read_partition(PARTITION_STATS)
    assert partition_stats_key("v", "a") in ps and partition_stats_key("v", "b") in ps
    narrow = {**OPTS, "hoodie.metadata.index.column.stats.column.list": "ts"}
    Table.open(base).write(spark.createDataFrame(_rows(range(0, 30, 3), 500, ("a",)), SCHEMA), "upsert", narrow)
    ps = _reader(base).read_partition(PARTITION_STATS)
    assert partition_stats_key("v", "a") not in ps  # region a was written: v no longer indexed there
    assert partition_stats_key("v", "b") in ps  # region b was not
    assert ps[partition_stats_key("ts", "a")].fields["ColumnStatsMetadata"]["maxValue"][1]["value"] == 500
