"""Our reader reads the Java-written fixtures exactly as hudi-rs does -- the three merge-on-read ones (whose
updates and deletes live in log files) and the copy-on-write ones: latest snapshot, time travel to every
completed instant, read-optimized, incremental reads between every pair of instants; on Spark too. Record-index
lookups on the merge-on-read fixtures name the file group hudi-rs reads each key from; validate and lookup work."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from click.testing import CliRunner
from hudi import HudiQueryType, HudiReadOptions, HudiTableBuilder

from pyhudi import Table
from pyhudi.cli.main import main as cli_main
from tests.paths import TABLE_ZIPS_DIR
from tests.support.fixtures import unzip_table

MOR = sorted(p.name for p in TABLE_ZIPS_DIR.glob("mor_*.zip"))
ALL = sorted(p.name for p in TABLE_ZIPS_DIR.glob("*.zip"))


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("fixtures")
    return {z: str(unzip_table(z, root)) for z in ALL}


def rows(t: pa.Table, cols: list[str]) -> list[tuple]:
    """Every row (the given columns), sorted: a key may appear twice (mor_v9_nonpartitioned_rollback inserted
    TXN-002 twice, in two file groups)."""
    if t.num_rows == 0:
        return []
    return sorted((tuple(r.values()) for r in t.select(cols).to_pylist()), key=repr)


def hudi_rs(base: str, opts: HudiReadOptions | None = None) -> pa.Table:
    batches = HudiTableBuilder.from_base_uri(base).build().read(opts or HudiReadOptions())
    return pa.Table.from_batches(batches) if batches else pa.table({})


def test_fixtures_are_here() -> None:
    assert len(MOR) == 3 and len(ALL) == 7


@pytest.mark.parametrize("zip_name", ALL)
def test_snapshot_time_travel_read_optimized(zip_name: str, tables: dict[str, str]) -> None:
    base = tables[zip_name]
    table = Table.open(base)
    ours = table.to_arrow()
    cols = ours.column_names
    assert ours.num_rows > 0
    assert rows(ours, cols) == rows(hudi_rs(base), cols)
    ro = HudiReadOptions().with_hudi_option("hoodie.read.use.read_optimized.mode", "true")
    assert rows(table.to_arrow(read_optimized=True), cols) == rows(hudi_rs(base, ro), cols)
    for inst in table.timeline().completed_commits():
        t = inst.requested_time
        # an instant of seconds sorts before the instants of its second (Hudi's formatQueryInstant keeps it)
        for at in (t, t[:14]):
            assert rows(table.to_arrow(as_of=at), cols) == rows(
                hudi_rs(base, HudiReadOptions().with_as_of_timestamp(at)), cols), f"as of {at}"
        ro_t = HudiReadOptions().with_as_of_timestamp(t).with_hudi_option("hoodie.read.use.read_optimized.mode",
                                                                           "true")
        assert rows(table.to_arrow(as_of=t, read_optimized=True), cols) == rows(hudi_rs(base, ro_t), cols), \
            f"read-optimized as of {t}"


def _check_incremental(base: str, pairs: list[tuple[str, str | None]]) -> None:
    table = Table.open(base)
    cols = table.to_arrow().column_names
    theirs = HudiTableBuilder.from_base_uri(base).build()  # one hudi-rs table, each query with its own options
    for a, b in pairs:
        opts = HudiReadOptions().with_query_type(HudiQueryType.Incremental).with_start_timestamp(a)
        if b is not None:
            opts = opts.with_end_timestamp(b)
        batches = theirs.read(opts)
        want = pa.Table.from_batches(batches) if batches else pa.table({})
        assert rows(table.incremental_arrow(a, b), cols) == rows(want, cols), f"({a}, {b}]"


def _times(base: str) -> list[str]:
    tl = Table.open(base).timeline().completed()
    return sorted({"0"} | {i.requested_time for i in tl} | {i.completion_time or "" for i in tl})


@pytest.mark.parametrize("zip_name", ALL)
def test_incremental_reads(zip_name: str, tables: dict[str, str]) -> None:
    """Start and end are completion-time bounds, (start, end], as hudi-rs (and Hudi 1.x) take them: from the
    table's start to every instant time, from every instant time to the latest, between neighbours."""
    base = tables[zip_name]
    times = _times(base)
    pairs: list[tuple[str, str | None]] = [("0", t) for t in times[1:]] + [(t, None) for t in times]
    pairs += list(zip(times, times[2:], strict=False))
    # bounds given to the second: before every instant of that second, as Hudi and hudi-rs compare them
    pairs += [(t[:14], None) for t in times[1:]] + [("0", t[:14]) for t in times[1:]]
    _check_incremental(base, pairs)


def test_incremental_bounds_are_read_as_times_or_refused(tables: dict[str, str]) -> None:
    """An incremental query's begin and end are instants or times as ``as.of.instant`` takes them (a time
    ``yyyy-MM-dd HH:mm:ss.SSS`` is that instant; ``0`` and ``earliest`` the table's start); anything else is
    refused by name. (They were compared as raw strings: a time in the other form, or ``earliest``, silently
    selected other commits.)"""
    import datetime as dt

    from pyhudi.errors import InvalidInputError

    base = tables[ALL[0]]
    table = Table.open(base)
    cols = table.to_arrow().column_names
    done = sorted(i.completion_time or "" for i in table.timeline().completed_commits())
    second = done[1]
    as_time = dt.datetime.strptime(second, "%Y%m%d%H%M%S%f").strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    assert rows(table.incremental_arrow(as_time), cols) == rows(table.incremental_arrow(second), cols)
    assert rows(table.incremental_arrow("0", as_time), cols) == rows(table.incremental_arrow("0", second), cols)
    assert rows(table.incremental_arrow("earliest"), cols) == rows(table.incremental_arrow("000"), cols)
    assert table.incremental_arrow("earliest").num_rows > 0
    for bad in ("garbage", "2026-13-45", "20261345000000000", "1234"):
        with pytest.raises(InvalidInputError, match=r"hoodie.datasource.read.(begin|end).instanttime"):
            table.incremental_arrow("0", bad)
        with pytest.raises(InvalidInputError, match=r"hoodie\.datasource\.read\.begin\.instanttime"):
            table.incremental_arrow(bad)
    with pytest.raises(InvalidInputError, match="cannot read as of '2026-13-45'"):
        table.to_arrow(as_of="2026-13-45")


@pytest.mark.slow
@pytest.mark.parametrize("zip_name", ALL)
def test_incremental_between_every_pair_of_instants(zip_name: str, tables: dict[str, str]) -> None:
    """Every pair of the timeline's requested and completion times."""
    base = tables[zip_name]
    times = _times(base)
    # the pairs test_incremental_reads checks (from the start; from a time to the one after next) are left to it
    _check_incremental(base, [(times[i], times[j]) for i in range(1, len(times)) for j in range(i + 1, len(times))
                              if j != i + 2])


def test_updates_that_live_only_in_log_files(tables: dict[str, str]) -> None:
    """The issue's record: its update is in a log file of the slice compacted last."""
    t = Table.open(tables["mor_v8_trips_8i3u1d.zip"])
    rec = t.read_keys(["7a84095f-737f-40bc-b62f-6b69664712d2"]).to_pylist()
    assert len(rec) == 1 and rec[0]["fare"] == 0.0 and rec[0]["_hoodie_commit_time"] == "20251220210130911"
    snap = {r["uuid"]: r["fare"] for r in t.to_arrow().to_pylist()}
    assert snap["7a84095f-737f-40bc-b62f-6b69664712d2"] == 0.0
    ro = {r["uuid"]: r["fare"] for r in t.to_arrow(read_optimized=True).to_pylist()}
    assert ro["7a84095f-737f-40bc-b62f-6b69664712d2"] == 43.4  # the base file's value


@pytest.mark.parametrize("zip_name", MOR)
def test_record_index_names_the_file_group_hudi_rs_reads(zip_name: str, tables: dict[str, str]) -> None:
    """Every key of hudi-rs's snapshot is found by the record index in the file group hudi-rs read it from (a log
    record's _hoodie_file_name is the file id, a base record's its file name), and a point read by keys returns
    hudi-rs's rows; keys deleted in log files are not in the index."""
    base = tables[zip_name]
    table = Table.open(base)
    theirs = hudi_rs(base)
    where: dict[str, set[tuple[str, str]]] = {}
    for r in theirs.to_pylist():
        fid = r["_hoodie_file_name"].split("_", 1)[0] if r["_hoodie_file_name"].endswith(".parquet") \
            else r["_hoodie_file_name"]
        where.setdefault(r["_hoodie_record_key"], set()).add((r["_hoodie_partition_path"], fid))
    found = table.lookup(sorted(where)).to_pylist()
    assert all(f["found"] for f in found)
    for f in found:
        assert (f["partition"], f["file_id"]) in where[f["key"]], f
    cols = table.to_arrow().column_names
    keys = sorted(where)
    assert rows(table.read_keys(keys), cols) == rows(theirs, cols)
    # every key that was ever written but is deleted now is not found
    ever = {r["_hoodie_record_key"] for i in table.timeline().completed_commits()
            for r in table.to_arrow(as_of=i.requested_time).to_pylist()}
    gone = sorted(ever - set(where))
    if gone:
        assert not any(f["found"] for f in table.lookup(gone).to_pylist())
        assert table.read_keys(gone).num_rows == 0


@pytest.mark.parametrize("zip_name", MOR)
def test_validate_and_lookup_commands(zip_name: str, tables: dict[str, str]) -> None:
    base = tables[zip_name]
    res = CliRunner().invoke(cli_main, ["validate", base, "--json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output.strip().splitlines()[-1])
    assert rep["ok"] and rep["record_index"]["missing_count"] == rep["record_index"]["wrong_count"] == 0
    key = Table.open(base).to_arrow().column("_hoodie_record_key")[0].as_py()
    res = CliRunner().invoke(cli_main, ["lookup", base, key, "--json"])
    assert res.exit_code == 0 and json.loads(res.output.strip().splitlines()[-1])[0]["found"]
    t = Table.open(base)
    for args, want in ((["--json"], t.to_arrow()), (["--read-optimized", "--json"], t.to_arrow(read_optimized=True)),
                       (["--start", "0", "--json"], t.incremental_arrow("0"))):
        res = CliRunner().invoke(cli_main, ["read", base, *args])
        assert res.exit_code == 0, res.output
        got = [json.loads(x) for x in res.output.strip().splitlines()]
        assert sorted(r["_hoodie_commit_seqno"] for r in got) == sorted(
            want.column("_hoodie_commit_seqno").to_pylist()), args


@pytest.mark.spark
@pytest.mark.parametrize("zip_name", MOR)
def test_spark_read_equals_local_read(spark, zip_name: str, tables: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    base = tables[zip_name]
    table = Table.open(base)
    local = table.to_arrow()
    cols = local.column_names
    got = pa.Table.from_pandas(table.read(spark).toPandas(), preserve_index=False)
    assert sorted(map(repr, got.select(["_hoodie_record_key", "_hoodie_commit_time"]).to_pylist())) == sorted(
        map(repr, local.select(["_hoodie_record_key", "_hoodie_commit_time"]).to_pylist()))
    assert set(got.column_names) == set(cols)
    keys = local.column("_hoodie_record_key").to_pylist()[:2]
    pk = table.read(spark, keys=keys).select("_hoodie_record_key", "_hoodie_file_name").collect()
    # the file groups the record index names for any of the keys, filtered by the keys (as Hudi's record-index
    # data skipping): a key inserted twice may come from both of its file groups
    want = table.read_keys(keys).select(["_hoodie_record_key", "_hoodie_file_name"]).to_pylist()
    assert sorted(tuple(r) for r in pk) == sorted(tuple(r.values()) for r in want)
    assert {r[0] for r in pk} == set(keys)
    tl = table.timeline().completed_commits()
    first = tl.instants[0]
    inc = table.read_incremental(first.completion_time or "", spark=spark).count()
    assert inc == table.incremental_arrow(first.completion_time or "").num_rows


@pytest.mark.parametrize("zip_name", MOR)
def test_slices_read_alike_with_and_without_the_read_threads(zip_name: str, tables: dict[str, str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A small slice is read in the calling thread, its consecutive data blocks decoded as one; a large one with
    the read threads, block by block: the same rows either way, hudi-rs's."""
    from pyhudi.read import slice_reader

    base = tables[zip_name]
    alone = Table.open(base).to_arrow()
    monkeypatch.setattr(slice_reader, "THREADED_SLICE_MIN_BYTES", 1)
    threaded = Table.open(base).to_arrow()
    cols = alone.column_names
    assert rows(alone, cols) == rows(threaded, cols) == rows(hudi_rs(base), cols)
