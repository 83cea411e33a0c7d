"""The file-slice reader on hand-built merge-on-read slices: Hudi 1.1's merge rules (reference section 4,
``BufferedRecordMergerFactory``), block validity and slicing, checked against expected records and, where hudi-rs
implements the same rule, against hudi-rs reading the same table.

hudi-rs differs from Hudi's Java reader in a few rules, so it is not the oracle everywhere: it ignores
``hoodie.record.merge.mode`` (always event-time ordering), breaks ordering ties by commit seqno instead of log
order, decodes delete-block ordering values with a primitive union (right only for Hudi's default Integer 0), and
decides deletes against the greatest ordering value of all records instead of folding in log order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hudi import HudiReadOptions, HudiTableBuilder

from pyhudi import Table
from pyhudi.errors import PyHudiError
from pyhudi.io.logfile import OrderingType
from pyhudi.read.merge import MergeError
from tests.support.mor_tables import MorTable, data, deletes, parquet, rollback, torn
from tests.support.storage import LOCAL

FG = "11111111-1111-1111-1111-111111111111-0"
FG2 = "22222222-2222-2222-2222-222222222222-0"


def r(k: str, ts: int | None, v: float, **kw: Any) -> dict[str, Any]:
    return {"id": k, "ts": ts, "v": v, **kw}


def ours(base: Path | str, **kw: Any) -> dict[str, tuple]:
    t = Table.open(str(base)).to_arrow(**kw)
    return {row["id"]: (row["ts"], row["v"]) for row in t.to_pylist()} if t.num_rows else {}


def theirs(base: Path | str, as_of: str | None = None) -> dict[str, tuple]:
    opts = HudiReadOptions() if as_of is None else HudiReadOptions().with_as_of_timestamp(as_of)
    batches = HudiTableBuilder.from_base_uri(str(base)).build().read(opts)
    t = pa.Table.from_batches(batches) if batches else pa.table({"id": []})
    return {row["id"]: (row["ts"], row["v"]) for row in t.to_pylist()} if t.num_rows else {}


def full_rows(base: Path | str) -> list[tuple]:
    t = Table.open(str(base)).to_arrow()
    return sorted(tuple(x.values()) for x in t.to_pylist())


def test_event_time_updates_ties_and_default_deletes(tmp_path: Path) -> None:
    """Greater ordering value wins, ties go to the later record, an older one loses; a delete with Hudi's default
    ordering value deletes whatever the event time; an insert into a log file appears. hudi-rs agrees."""
    m = MorTable(tmp_path / "t")
    m.commit(base={FG: [r("a", 1, 1.0), r("b", 5, 1.0), r("c", 9, 1.0), r("e", 1, 1.0)]})
    m.commit(logs={FG: [data(r("a", 2, 2.0), r("b", 4, 2.0), r("d", 5, 2.0))]})
    m.commit(logs={FG: [data(r("a", 2, 3.0), r("b", 5, 3.0)), deletes("c")]})
    want = {"a": (2, 3.0), "b": (5, 3.0), "d": (5, 2.0), "e": (1, 1.0)}
    assert ours(m.base) == want
    assert theirs(m.base) == want
    # full rows, meta columns included, equal hudi-rs's
    h = pa.Table.from_batches(HudiTableBuilder.from_base_uri(str(m.base)).build().read())
    assert full_rows(m.base) == sorted(tuple(x.values()) for x in h.select(Table.open(m.base).to_arrow().column_names)
                                       .to_pylist())


def test_commit_time_ordering_later_wins_and_revives(tmp_path: Path) -> None:
    m = MorTable(tmp_path / "t", merge_mode="COMMIT_TIME_ORDERING", ordering=())
    m.commit(base={FG: [r("a", 9, 1.0), r("b", 9, 1.0), r("c", 9, 1.0)]})
    m.commit(logs={FG: [data(r("a", 1, 2.0)), deletes("b", "c")]})
    m.commit(logs={FG: [data(r("c", 0, 3.0))]})  # a later record revives a deleted key
    assert ours(m.base) == {"a": (1, 2.0), "c": (0, 3.0)}


def test_deletes_with_ordering_values(tmp_path: Path) -> None:
    """A delete-block entry with a real ordering value (LongWrapper, as Java writes for a long field) deletes
    unless the buffered record's value is of the same class and strictly greater; of another class it deletes
    without a comparison, but Hudi cannot final-merge it with a base record (a class cast): refused."""
    m = MorTable(tmp_path / "t")
    m.commit(base={FG: [r("a", 5, 1.0), r("b", 5, 1.0), r("c", 5, 1.0)]})
    m.commit(logs={FG: [data(r("e", 5, 1.0))]})
    m.commit(logs={FG: [deletes(("a", 3, OrderingType.LONG), ("b", 7, OrderingType.LONG),
                                ("c", 5, OrderingType.LONG), ("e", 9, OrderingType.INT))]})
    # a: 5 > 3 kept; b: deleted; c: a tie deletes; e (only in the log): an Integer is not a Long: deleted
    assert ours(m.base) == {"a": (5, 1.0)}
    m.commit(logs={FG: [deletes(("a", 9, OrderingType.INT))]})
    with pytest.raises(MergeError, match="record key 'a'"):
        ours(m.base)


def test_is_deleted_column(tmp_path: Path) -> None:
    m = MorTable(tmp_path / "t", is_deleted=True)
    m.commit(base={FG: [r("a", 5, 1.0), r("b", 5, 1.0), r("c", 5, 1.0, _hoodie_is_deleted=True)]})
    m.commit(logs={FG: [data(r("a", 6, 2.0, _hoodie_is_deleted=True), r("b", 4, 2.0, _hoodie_is_deleted=True),
                             r("n", 1, 2.0, _hoodie_is_deleted=True))]})
    # a: newer delete wins; b: older delete loses; c: a base row marked deleted with no log record is returned as
    # it is (Hudi does not check base rows); n: a deleted insert never appears
    assert ours(m.base) == {"b": (5, 1.0), "c": (5, 1.0)}


def test_commit_time_delete_then_older_record(tmp_path: Path) -> None:
    """Java folds the log first: a default-ordering delete, then a record with a smaller ordering value than the
    base record's, buffer that record (a record after a commit-time delete replaces it); the final merge then
    keeps the base record, whose value is greater. (hudi-rs deletes the key: it compares the delete with the
    greatest record of all.)"""
    m = MorTable(tmp_path / "t")
    m.commit(base={FG: [r("a", 5, 1.0), r("b", 5, 1.0)]})
    m.commit(logs={FG: [deletes("a", "b")]})
    m.commit(logs={FG: [data(r("a", 1, 3.0), r("b", 6, 3.0))]})
    assert ours(m.base) == {"a": (5, 1.0), "b": (6, 3.0)}


def test_rollback_command_blocks(tmp_path: Path) -> None:
    """A rollback block removes the earlier blocks of its target instant (table version 6 style log files are
    still honoured). hudi-rs agrees."""
    m = MorTable(tmp_path / "t")
    m.commit(base={FG: [r("a", 1, 1.0), r("b", 1, 1.0)]})
    t2 = m.tick()
    m.commit(logs={FG: [data(r("a", 3, 2.0), instant=t2), data(r("b", 3, 2.0)), rollback(t2)]})
    assert ours(m.base) == theirs(m.base) == {"a": (1, 1.0), "b": (3, 2.0)}


def test_blocks_of_instants_not_completed_are_skipped(tmp_path: Path) -> None:
    """Log files of an inflight deltacommit and of a rolled-back one (gone from the timeline) are not read; a block
    stamped with an instant that never completed is skipped inside a completed file."""
    m = MorTable(tmp_path / "t")
    m.commit(base={FG: [r("a", 1, 1.0), r("b", 1, 1.0), r("c", 1, 1.0)]})
    m.commit(logs={FG: [data(r("a", 5, 9.0))]}, complete=False)  # inflight
    m.write_log(FG, m.tick(), [data(r("b", 5, 9.0))])  # a rolled-back write's leftover file
    ghost = m.tick()
    m.commit(logs={FG: [data(r("c", 5, 9.0), instant=ghost), data(r("c", 2, 2.0))]})
    assert ours(m.base) == {"a": (1, 1.0), "b": (1, 1.0), "c": (2, 2.0)}


def test_torn_and_corrupt_blocks_are_skipped(tmp_path: Path) -> None:
    m = MorTable(tmp_path / "t")
    m.commit(base={FG: [r("a", 1, 1.0), r("b", 1, 1.0)]})
    m.commit(logs={FG: [data(r("a", 2, 2.0)), torn(57)]})  # a writer died mid-block: the tail is torn
    t3 = m.tick()
    good = m.log_bytes(t3, [data(r("b", 2, 2.0))], FG)
    bad = bytearray(good)
    bad[6:14] = (len(good) + 1000).to_bytes(8, "big")  # a corrupt block (a wrong length), then a valid one
    LOCAL.write_bytes(str(Path(m.folder) / f".{FG}_{t3}.log.1_0-1-0"), bytes(bad) + good)
    tl = m.timeline()
    infl = tl.transition_to_inflight(tl.create_requested("deltacommit", t3), None)
    m.complete(infl, [])
    assert ours(m.base) == theirs(m.base) == {"a": (2, 2.0), "b": (2, 2.0)}


def test_several_log_files_log_only_groups_and_parquet_blocks(tmp_path: Path) -> None:
    m = MorTable(tmp_path / "t")
    m.commit(base={FG: [r("a", 1, 1.0)]})
    m.commit(logs={FG: [data(r("a", 2, 2.0))], FG2: [data(r("x", 1, 1.0), r("y", 1, 1.0))]})
    m.commit(logs={FG: [parquet(r("a", 3, 3.0), r("b", 1, 3.0))], FG2: [deletes("y"), data(r("z", 1, 1.0))]})
    want = {"a": (3, 3.0), "b": (1, 3.0), "x": (1, 1.0), "z": (1, 1.0)}
    assert ours(m.base) == theirs(m.base) == want
    assert ours(m.base, read_optimized=True) == {"a": (1, 1.0)}  # log-only file groups have no base file


def test_pending_compaction_merges_with_previous_slice(tmp_path: Path) -> None:
    """A compaction scheduled (its base file being written) does not cut the file group: a snapshot reads the
    previous base file with the logs from before and after the compaction instant; read-optimized reads the
    previous base file."""
    m = MorTable(tmp_path / "t")
    t1 = m.commit(base={FG: [r("a", 1, 1.0), r("b", 1, 1.0)]})
    m.commit(logs={FG: [data(r("a", 2, 2.0))]})
    c = m.schedule_compaction(FG, t1, [])
    m.write_base(FG, c, [r("a", 2, 2.0), r("b", 1, 1.0), r("zzz", 0, 0.0)])  # inflight compaction output
    m.commit(logs={FG: [data(r("b", 3, 3.0))]})
    assert ours(m.base) == theirs(m.base) == {"a": (2, 2.0), "b": (3, 3.0)}
    assert ours(m.base, read_optimized=True) == {"a": (1, 1.0), "b": (1, 1.0)}


def test_time_travel_cuts_log_blocks(tmp_path: Path) -> None:
    m = MorTable(tmp_path / "t")
    t1 = m.commit(base={FG: [r("a", 1, 1.0)]})
    t2 = m.commit(logs={FG: [data(r("a", 2, 2.0), r("b", 1, 1.0))]})
    t3 = m.commit(logs={FG: [deletes("b"), data(r("a", 3, 3.0))]})
    steps = {t1: {"a": (1, 1.0)}, t2: {"a": (2, 2.0), "b": (1, 1.0)}, t3: {"a": (3, 3.0)}}
    for t, want in steps.items():
        assert ours(m.base, as_of=t) == theirs(m.base, as_of=t) == want, t
    between = str(int(t2) + 1)
    assert ours(m.base, as_of=between) == steps[t2]


def test_incremental_reads_log_records(tmp_path: Path) -> None:
    m = MorTable(tmp_path / "t")
    m.commit(base={FG: [r("a", 1, 1.0), r("b", 1, 1.0)]})
    t2 = m.commit(logs={FG: [data(r("a", 2, 2.0))]})
    m.commit(logs={FG: [data(r("c", 1, 3.0))]})
    table = Table.open(m.base)
    done = {i.requested_time: i.completion_time for i in table.timeline().completed_commits()}
    got = table.incremental_arrow(done[t2]).to_pylist()  # commits completed after t2's completion
    assert [(x["id"], x["v"]) for x in got] == [("c", 3.0)]
    got = table.incremental_arrow("0", done[t2]).to_pylist()
    assert sorted((x["id"], x["v"]) for x in got) == [("a", 2.0), ("b", 1.0)]


def test_multiple_ordering_fields_compare_lexicographically(tmp_path: Path) -> None:
    m = MorTable(tmp_path / "t", ordering=("ts", "seq"), extra_fields=[("seq", "long")])
    m.commit(base={FG: [r("a", 1, 1.0, seq=5), r("b", 1, 1.0, seq=5)]})
    m.commit(logs={FG: [data(r("a", 1, 2.0, seq=4), r("b", 1, 2.0, seq=6))]})
    assert ours(m.base) == {"a": (1, 1.0), "b": (1, 2.0)}


def test_null_ordering_values(tmp_path: Path) -> None:
    """A null ordering field is Java's Integer 0: comparing it with a long value fails in Hudi (a class cast), so
    pyhudi refuses, naming the key; with nulls on both sides the later record wins."""
    m = MorTable(tmp_path / "t")
    m.commit(base={FG: [r("a", 5, 1.0), r("n", None, 1.0)]})
    m.commit(logs={FG: [data(r("n", None, 2.0))]})
    assert ours(m.base) == {"a": (5, 1.0), "n": (None, 2.0)}
    m.commit(logs={FG: [data(r("a", None, 3.0))]})
    with pytest.raises(MergeError, match="record key 'a'"):
        ours(m.base)


def test_added_column_reads_as_null_in_older_logs(tmp_path: Path) -> None:
    m = MorTable(tmp_path / "t")
    m.commit(base={FG: [r("a", 1, 1.0)]})
    m.commit(logs={FG: [data(r("b", 1, 2.0))]})
    # the table gains a column; the older log block has no value for it
    m.schema["fields"].append({"name": "extra", "type": ["null", "string"], "default": None})
    import json

    from tests.support.mor_tables import with_meta_fields

    m.block_schema = json.dumps(with_meta_fields(m.schema), separators=(",", ":"))
    m.commit(logs={FG: [data(r("c", 1, 3.0, extra="x"))]})
    t = Table.open(m.base).to_arrow()
    assert sorted((x["id"], x["extra"]) for x in t.to_pylist()) == [("a", None), ("b", None), ("c", "x")]


def test_unsupported_merge_modes_are_refused(tmp_path: Path) -> None:
    m = MorTable(tmp_path / "t", merge_mode="CUSTOM")
    m.commit(base={FG: [r("a", 1, 1.0)]})
    with pytest.raises(PyHudiError, match=r"hoodie\.record\.merge\.mode=CUSTOM"):
        Table.open(m.base).to_arrow()


def test_folding_held_log_records_early_changes_nothing(tmp_path: Path) -> None:
    """A reader that folds its held log records every few records (to bound memory) merges exactly as one that
    folds once: the fold is a left fold per key."""
    from dataclasses import replace

    from pyhudi.read import plan as read_plan

    m = MorTable(tmp_path / "t", is_deleted=True)
    m.commit(base={FG: [r(f"k{i}", 5, 1.0) for i in range(20)]})
    for c in range(6):
        m.commit(logs={FG: [data(*[r(f"k{(i * 7 + c) % 25}", 3 + c, float(c), _hoodie_is_deleted=(i + c) % 9 == 0)
                                   for i in range(15)]), deletes(f"k{c}", (f"k{c + 3}", 6, OrderingType.LONG))]})
    plan = read_plan.snapshot(Table.open(m.base))
    once = plan.to_arrow().sort_by("id").to_pylist()
    for every in (1, 2, 7, 16):
        small = read_plan.ScanPlan(replace(plan.read, log_compact_rows=every), plan.slices)
        assert small.to_arrow().sort_by("id").to_pylist() == once, every


def test_tables_without_meta_fields_or_parquet_are_refused(tmp_path: Path) -> None:
    from pyhudi.table.properties import meta_path, update_table_config

    m = MorTable(tmp_path / "t")
    m.commit(base={FG: [r("a", 1, 1.0)]})
    update_table_config(LOCAL, meta_path(m.base), {"hoodie.populate.meta.fields": "false"})
    with pytest.raises(PyHudiError, match=r"hoodie\.populate\.meta\.fields=false"):
        Table.open(m.base).to_arrow()
    update_table_config(LOCAL, meta_path(m.base), {"hoodie.populate.meta.fields": "true",
                                                   "hoodie.table.base.file.format": "ORC"})
    with pytest.raises(PyHudiError, match="parquet base files only"):
        Table.open(m.base).to_arrow()
