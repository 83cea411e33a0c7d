"""Merge-on-read writes (deltacommits, insert overwrite, partition moves) and compaction: every step read back by
pyhudi and by hudi-rs against a plain model (snapshot and time travel; incremental reads of both agree), the record
index checked against where hudi-rs finds each row, ``pyhudi validate`` ok; the files as Hudi 1.1 writes them (log
file names, blocks, write stats, markers, compaction plan and commit); failed appends and compactions recovered;
writes into the Java-written MOR fixtures, with cleaning; what stays refused."""

from __future__ import annotations

import copy
import itertools
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pyhudi.errors import UnsupportedTableError
from pyhudi.io.logfile import BlockType, HeaderKey, OrderingType, read_log_blocks
from pyhudi.metadata.validate import validate_table
from pyhudi.table import markers
from pyhudi.table.table import Table
from pyhudi.write.append import TORN_APPEND
from pyhudi.write.producer import FAULT_OPTION
from tests.support.column_stats import check_stats
from tests.support.fixtures import unzip_table
from tests.support.robust import OPTS, SCHEMA, apply, expected, rows, table_rows, to_arrow
from tests.support.storage import LOCAL

hudi = pytest.importorskip("hudi")
pytestmark = pytest.mark.spark

MOR_OPTS = {**OPTS, "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
LOG_RE = re.compile(r"^\.(?P<fid>[0-9a-f-]+-\d+)_(?P<instant>\d{17})\.log\.(?P<v>\d+)_(?P<token>\d+-\d+-\d+)$")


def rs_read(base: str, filters: list[tuple[str, str, str]] | None = None, as_of: str | None = None) -> pa.Table:
    opts = hudi.HudiReadOptions(filters=filters)
    if as_of is not None:
        opts = opts.with_as_of_timestamp(as_of)
    batches = list(hudi.HudiTableBuilder.from_base_uri(base).build().read(opts))
    return pa.Table.from_batches(batches) if batches else pa.table({})


def log_files(base: str) -> list[Path]:
    return sorted(p for p in Path(base).rglob(".*.log.*") if ".hoodie" not in p.parts)


def check_step(base: str, model: dict[str, dict[str, Any]]) -> None:
    """pyhudi and hudi-rs read the model; validate ok; every record-index lookup names the file group hudi-rs
    reads the row from."""
    t = Table.open(base)
    assert table_rows(t.to_arrow()) == expected(model), "pyhudi snapshot"
    rs = rs_read(base)
    assert table_rows(rs) == expected(model), "hudi-rs snapshot"
    rep = validate_table(t)
    assert rep.ok, rep.to_dict()
    if rs.num_rows:
        where = dict(zip(rs.column("_hoodie_record_key").to_pylist(),
                         zip(rs.column("_hoodie_partition_path").to_pylist(),
                             [f.split("_")[0] for f in rs.column("_hoodie_file_name").to_pylist()], strict=True),
                         strict=True))
        found = t.lookup(list(where))
        got = dict(zip(found.column("key").to_pylist(),
                       zip(found.column("partition").to_pylist(), found.column("file_id").to_pylist(), strict=True),
                       strict=True))
        assert got == where


def test_mor_writes_match_the_model_hudi_rs_and_the_record_index(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    Table.create(base, SCHEMA, MOR_OPTS)
    assert Table.open(base).config.table_type == "MERGE_ON_READ"
    model: dict[str, dict[str, Any]] = {}
    history: list[tuple[str, dict[str, dict[str, Any]]]] = []
    steps = [
        ("insert", rows(range(10))),
        ("upsert", rows(range(5, 15), ts=2, v=0.5)),  # small base files without logs take updates and inserts
        # updates only: log files; k008 with an older ordering value than stored: the stored record stays
        ("upsert", rows(range(0, 4), ts=3, v=0.25) + rows([8], ts=1, v=9.0)),
        ("delete", rows([1, 6, 12])),
        ("upsert", rows([6, 7, 20], ts=4, v=0.75)),  # 6 was deleted: a new base file; 7 to a log; 20 new
        ("bulk_insert", rows(range(30, 34), ts=5)),
        # partition a replaced: k000 and k002 written again, k050 new, the others (k008 in a log, ...) gone
        ("insert_overwrite", rows([0, 2, 50], p="a", ts=6)),
        ("upsert", rows([0, 3], ts=7)),  # into the new file group (its base file) and a log file
        # keys moving partition (hoodie.record.index.update.partition.path=true): k002 moves a -> b (a delete in
        # a's log, a new base file in b); k003 (stored ts 7 in a log) arrives in a with ts 5: it stays in b
        ("upsert", rows([2], p="b", ts=8) + rows([3], p="a", ts=5)),
    ]
    move = {"hoodie.record.index.update.partition.path": "true"}
    for op, batch in steps:
        opts = {**MOR_OPTS, **move} if any(r["p"] != ("a" if int(r["id"][1:]) % 2 == 0 else "b") for r in batch) \
            else MOR_OPTS
        res = Table.open(base).write(spark.createDataFrame(to_arrow(batch)), op, opts)
        if op == "insert_overwrite":
            parts = {r["p"] for r in batch}
            for k in [k for k, r in model.items() if r["p"] in parts]:
                del model[k]
        apply(model, "insert" if op == "insert_overwrite" else op, batch)
        history.append((res.instant, copy.deepcopy(model)))
        check_step(base, model)
        inst = Table.open(base).timeline().completed().get(res.instant)
        want = "replacecommit" if op == "insert_overwrite" else "deltacommit"
        assert inst is not None and inst.action == want, (op, inst)
        assert not Path(markers.marker_dir(base, res.instant)).exists()

    t = Table.open(base)
    # inline compaction after the fifth deltacommit (hoodie.compact.inline.max.delta.commits): base files named
    # with the compaction instant, completed as a commit
    tl = t.timeline()
    compactions = [i for i in tl.completed() if i.action == "commit"]
    assert len(compactions) == 1 and tl.read_plan("compaction", compactions[0].requested_time)["version"] == 2
    md = tl.read_commit_metadata(compactions[0])
    assert md["operationType"] == "COMPACT" and md["compacted"] is True
    for s in (s for ss in md["partitionToWriteStats"].values() for s in ss):
        assert s["path"].endswith(f"_{compactions[0].requested_time}.parquet") and s["prevBaseFile"]
    for instant, snap in history:  # time travel, both readers
        done = t.timeline().completed().get(instant)
        assert done is not None and done.completion_time is not None
        assert table_rows(rs_read(base, as_of=done.completion_time)) == expected(snap), instant
        assert table_rows(t.to_arrow(as_of=instant)) == expected(snap), instant

    # incremental reads of one commit each (the compaction's too): hudi-rs and pyhudi agree. Not for the steps
    # with a late update (a smaller ordering value than the stored record's, outside the window): hudi-rs returns
    # the log record of the window as written, pyhudi's incremental read merges it with the stored record first
    late = {history[2][0], history[-1][0]}
    commits = [i for i in t.timeline().completed() if i.action != "clean"]
    for prev, inst in itertools.pairwise(commits):
        if inst.requested_time in late:
            continue
        opts = hudi.HudiReadOptions().with_query_type(hudi.HudiQueryType.Incremental).with_start_timestamp(
            prev.completion_time).with_end_timestamp(inst.completion_time)
        batches = list(hudi.HudiTableBuilder.from_base_uri(base).build().read(opts))
        rs = pa.Table.from_batches(batches) if batches else None
        ours = t.incremental_arrow(str(prev.completion_time), str(inst.completion_time))
        assert (table_rows(rs) if rs is not None and rs.num_rows else []) == (
            table_rows(ours) if ours.num_rows else []), inst

    # the files and the commit metadata, as Hudi 1.1 writes them
    logs = log_files(base)
    assert logs
    tl = t.timeline()
    stats = {}
    for inst in tl.completed():
        for part, ss in tl.read_commit_metadata(inst)["partitionToWriteStats"].items():
            for s in ss:
                stats[s["path"]] = (inst.requested_time, part, s)
    for p in logs:
        m = LOG_RE.match(p.name)
        assert m is not None and m.group("v") == "1", p.name
        rel = str(p.relative_to(base))
        instant, part, s = stats[rel]
        assert m.group("instant") == instant and part == p.parent.name
        assert s["prevCommit"] == instant and s["baseFile"] == "" and s["logFiles"] == [p.name]
        assert s["logVersion"] == 1 and s["logOffset"] == 0 and s["fileSizeInBytes"] == p.stat().st_size
        assert s["fileId"] == m.group("fid") and s["numInserts"] == 0
        blocks = read_log_blocks(LOCAL, str(p))
        assert [b.block_type for b in blocks] in (
            [BlockType.AVRO_DATA], [BlockType.DELETE], [BlockType.AVRO_DATA, BlockType.DELETE])
        for b in blocks:
            assert set(b.header) == {HeaderKey.INSTANT_TIME, HeaderKey.SCHEMA} and b.instant_time == instant
            if b.block_type == BlockType.DELETE:
                recs = b.delete_records()
                assert len(recs) == s["numDeletes"]
                # a delete operation's: Hudi's default ordering value; a partition move's, from an upsert: the
                # moving record's ordering value (a long)
                assert all((r.ordering_type, r.ordering_value) == (OrderingType.INT, 0)
                           or r.ordering_type == OrderingType.LONG for r in recs)
                assert all(r.partition_path == part for r in recs)
            else:
                data = b.records()
                assert data.num_rows == s["numUpdateWrites"] == s["numWrites"]
                assert set(data.column("_hoodie_file_name").to_pylist()) == {m.group("fid")}
                assert set(data.column("_hoodie_commit_time").to_pylist()) == {instant}
                assert all(q.startswith(f"{instant}_") for q in data.column("_hoodie_commit_seqno").to_pylist())


def _assert_rolled_back(base: str, failed: str) -> None:
    t = Table.open(base)
    assert t.timeline().get(failed) is None
    assert not [p for p in log_files(base) if f"_{failed}.log." in p.name]
    assert not [p for p in Path(base).rglob(f"*_{failed}.parquet") if ".hoodie" not in p.parts]
    mdt = Path(base) / ".hoodie" / "metadata"
    assert not [p for p in mdt.rglob(f"*{failed}*") if ".hoodie" not in p.relative_to(mdt).parts]
    assert not Path(markers.marker_dir(base, failed)).exists()


def test_failed_deltacommits_are_rolled_back(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A write that dies in its append task (leaving its log file torn) or after the metadata table's deltacommit
    (record index included) is invisible to both readers; the next write rolls it back: its log and base files,
    its metadata-table deltacommit and its markers go."""
    base = str(tmp_path / "t")
    Table.create(base, SCHEMA, MOR_OPTS)
    model: dict[str, dict[str, Any]] = {}
    for op, batch in (("insert", rows(range(12))), ("upsert", rows(range(0, 12, 3), ts=2, v=0.5))):
        Table.open(base).write(spark.createDataFrame(to_arrow(batch)), op, MOR_OPTS)
        apply(model, op, batch)
    check_step(base, model)
    for i, fault in enumerate([TORN_APPEND, "before_data_commit"]):
        failing = rows([1, 2, 40 + i], ts=10 + i, v=0.1)  # updates (logs) and an insert (a base file)
        op, batch = ("delete", rows([4, 5])) if fault == TORN_APPEND else ("upsert", failing)
        with pytest.raises(Exception, match="injected fault"):
            Table.open(base).write(spark.createDataFrame(to_arrow(batch)), op, {**MOR_OPTS, FAULT_OPTION: fault})
        pending = [x.requested_time for x in Table.open(base).timeline() if not x.is_completed]
        assert len(pending) == 1, (fault, pending)
        assert table_rows(rs_read(base)) == expected(model), fault
        assert table_rows(Table.open(base).to_arrow()) == expected(model), fault
        nxt = rows([2, 3, 60 + i], ts=20 + i, v=0.3)
        Table.open(base).write(spark.createDataFrame(to_arrow(nxt)), "upsert", MOR_OPTS)
        apply(model, "upsert", nxt)
        _assert_rolled_back(base, pending[0])
        check_step(base, model)


def test_compaction_inline_resumed_after_a_crash_and_on_demand(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Inline compaction (every 2 deltacommits here) dies before completing: the write it followed is committed,
    readers read the model; the next write runs the compaction again first. ``pyhudi compact`` compacts what
    is left."""
    from click.testing import CliRunner

    from pyhudi.cli.main import main as cli_main

    base = str(tmp_path / "t")
    opts = {**MOR_OPTS, "hoodie.compact.inline.max.delta.commits": "2"}
    Table.create(base, SCHEMA, opts)
    model: dict[str, dict[str, Any]] = {}
    first = rows(range(8))
    Table.open(base).write(spark.createDataFrame(to_arrow(first)), "insert", opts)
    apply(model, "insert", first)
    upd = rows(range(0, 8, 2), ts=2, v=0.5)
    with pytest.raises(Exception, match="injected fault"):
        Table.open(base).write(spark.createDataFrame(to_arrow(upd)), "upsert",
                               {**opts, FAULT_OPTION: "compaction.before_complete"})
    apply(model, "upsert", upd)
    tl = Table.open(base).timeline()
    pending = [i for i in tl if not i.is_completed]
    assert [i.action for i in pending] == ["compaction"], pending
    check_step(base, model)
    # as Apache Hudi leaves a compaction, with no heartbeat file (pyhudi's, aborted, is dead too): run again at once
    hb = Path(base) / ".hoodie" / ".heartbeat" / pending[0].requested_time
    assert hb.exists()
    hb.unlink()
    dele = rows([1, 2])
    Table.open(base).write(spark.createDataFrame(to_arrow(dele)), "delete", opts)
    apply(model, "delete", dele)
    tl = Table.open(base).timeline()
    assert all(i.is_completed for i in tl)
    assert tl.get(pending[0].requested_time).action == "commit"  # the compaction ran again, completed
    check_step(base, model)
    assert not Path(markers.marker_dir(base, pending[0].requested_time)).exists()

    res = CliRunner().invoke(cli_main, ["compact", base, "--json"])
    assert res.exit_code == 0, res.output
    t = Table.open(base)
    assert len([i for i in t.timeline().completed() if i.action == "commit"]) == 2
    assert all(not s.log_files for s in t.view().latest_file_slices())
    check_step(base, model)
    assert t.compact(spark=spark) == []  # nothing left to compact


@pytest.mark.parametrize("zip_name", ["mor_v9_txns_simple_meta.zip", "mor_v9_nonpartitioned_rollback.zip"])
def test_upserts_and_deletes_into_java_mor_tables(spark, tmp_path: Path, zip_name: str) -> None:  # type: ignore[no-untyped-def]
    """Copies of the Java-written MOR tables: hudi-rs and pyhudi read exactly the rows before, with the updates
    and deletes applied (keys stored once; the rollback fixture also holds a key inserted twice, left alone), also
    after cleaning removed the older file slices."""
    base = str(unzip_table(zip_name, tmp_path))
    t = Table.open(base)
    key, ts = t.config.record_key_fields[0], t.config.ordering_fields[0]
    before = rs_read(base)
    meta = [c for c in before.column_names if c.startswith("_hoodie_")]
    data = before.drop_columns(meta).sort_by(key)
    counts: dict[str, int] = {}
    for k in data.column(key).to_pylist():
        counts[k] = counts.get(k, 0) + 1
    unique = data.filter(pa.array([counts[k] == 1 for k in data.column(key).to_pylist()]))
    upd = unique.slice(0, 2)
    upd = upd.set_column(upd.schema.get_field_index(ts), ts, pa.compute.add(upd.column(ts), 1000))
    gone = unique.slice(2, 1)
    r1 = t.write(spark.createDataFrame(upd), "upsert", {})
    # cleaning with one commit retained removes the older file slices, base and log files (compacted, clustered)
    n_files = len([p for p in Path(base).rglob("*") if p.is_file() and ".hoodie" not in p.parts])
    r2 = Table.open(base).write(spark.createDataFrame(gone), "delete", {"hoodie.cleaner.commits.retained": "1"})
    if "simple_meta" in zip_name:  # compacted and clustered file groups: older slices to clean
        assert any(i.action == "clean" for i in Table.open(base).timeline().completed())
        assert len([p for p in Path(base).rglob("*") if p.is_file() and ".hoodie" not in p.parts]) < n_files

    changed = set(upd.column(key).to_pylist()) | set(gone.column(key).to_pylist())
    want = [r for r in data.to_pylist() if r[key] not in changed] + upd.to_pylist()

    def rows_of(x: pa.Table) -> list[str]:
        return sorted(map(repr, x.drop_columns([c for c in x.column_names if c.startswith("_hoodie_")]).to_pylist()))

    assert rows_of(rs_read(base)) == sorted(map(repr, want))
    assert rows_of(Table.open(base).to_arrow()) == sorted(map(repr, want))
    rep = validate_table(Table.open(base))
    assert rep.ok, rep.to_dict()
    # the fixtures' column statistics are kept: exact for every latest file (the appended logs' too) and for the
    # partitions written to; hudi-rs filtering by a range reads the same rows
    check_stats(base, exact_partitions={s.partition for s in (*r1.stats, *r2.stats)})
    cut = sorted(r[ts] for r in want)[len(want) // 2]
    got = rs_read(base, [(ts, ">=", str(cut))])
    assert rows_of(got) == sorted(repr(r) for r in want if r[ts] >= cut)


def test_mor_writes_pyhudi_does_not_make_exactly_are_refused(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    Table.create(base, SCHEMA, MOR_OPTS)
    Table.open(base).write(spark.createDataFrame(to_arrow(rows(range(4)))), "insert", MOR_OPTS)
    files = sorted(str(p) for p in Path(base).rglob("*"))
    df = spark.createDataFrame(to_arrow(rows(range(2), ts=2)))
    refused = [
        ("upsert", {"hoodie.index.type": "GLOBAL_SIMPLE"}, "hoodie.index.type=GLOBAL_SIMPLE"),
        ("upsert", {"hoodie.index.type": "SIMPLE"}, "into a table with a record index"),
        ("upsert", {"hoodie.compact.schedule.inline": "true"}, "a compaction is scheduled and run together"),
    ]
    for op, extra, msg in refused:
        with pytest.raises(Exception, match=msg):
            Table.open(base).write(df, op, {**MOR_OPTS, **extra})
    with pytest.raises(UnsupportedTableError, match="building the record index"):
        Table.open(base).build_record_index()
    assert sorted(str(p) for p in Path(base).rglob("*")) == files


@pytest.mark.parametrize("opts", [MOR_OPTS, OPTS], ids=["mor", "cow"])
def test_an_input_column_named_like_the_operation_meta_field_is_no_data(spark, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                       opts: dict[str, str]) -> None:
    """``_hoodie_operation`` is a meta field (``D`` and ``-U`` in it mark deletes in log blocks): a writer drops it
    from its input, as Hudi does, so a record value never decides a delete nor becomes a data column."""
    base = str(tmp_path / "t")
    model: dict[str, Any] = {}
    first = rows(range(3))
    Table.create(base, SCHEMA, opts)
    Table.open(base).write(spark.createDataFrame(to_arrow(first)), "insert", opts)
    apply(model, "insert", first)
    update = rows(range(3), ts=2, v=0.5)
    with_op = to_arrow(update).append_column("_hoodie_operation", pa.array(["D", "-U", "I"]))
    Table.open(base).write(spark.createDataFrame(with_op), "upsert", opts)
    apply(model, "upsert", update)
    t = Table.open(base)
    assert "_hoodie_operation" not in t.schema().names
    assert table_rows(t.to_arrow()) == expected(model)
    assert table_rows(rs_read(base)) == expected(model)
    assert "_hoodie_operation" not in rs_read(base).column_names
