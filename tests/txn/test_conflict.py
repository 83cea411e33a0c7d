"""Conflict detection: instants that completed since a write began are compared with it by the file groups both
touched; compactions before the writer are tolerated; plans made meanwhile count."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyhudi import config as C
from pyhudi.errors import ConfigError
from pyhudi.io.storage import Storage
from pyhudi.table.commit_metadata import plan_file_groups, touched_file_groups
from pyhudi.table.timeline import ActiveTimeline
from pyhudi.txn.conflict import Footprint, completed_writes_since, find_conflict
from pyhudi.txn.transaction import Concurrency
from tests.support.fabricate import Clock, make_table
from tests.support.storage import LOCAL


def _md(groups: dict[str, list[str]], replaced: dict[str, list[str]] | None = None, op: str = "UPSERT") -> dict:
    stats = {p: [{"fileId": f, "path": f"{p}/{f}_0-0-0_1.parquet"} for f in fids] for p, fids in groups.items()}
    md = {"partitionToWriteStats": stats, "compacted": False, "extraMetadata": {}, "version": None,
          "operationType": op}
    if replaced is not None:
        md["partitionToReplaceFileIds"] = replaced
    return md


def _complete(tl: ActiveTimeline, clock: Clock, action: str, md: dict) -> str:
    t = clock()
    req = tl.create_requested(action, t, None if action != "replacecommit" else
                              {"operationType": None, "clusteringPlan": None, "extraMetadata": None, "version": None})
    inf = tl.transition_to_inflight(req, {"partitionToWriteStats": {}, "compacted": False, "extraMetadata": {},
                                          "version": None, "operationType": md["operationType"]})
    tl.complete(inf, md, clock())
    return t


def test_touched_groups_include_replaced() -> None:
    md = _md({"a": ["f1"], "b": ["f2"]}, {"a": ["f0"]})
    assert touched_file_groups(md) == {("a", "f1"), ("b", "f2"), ("a", "f0")}
    assert touched_file_groups({"partitionToWriteStats": {"a": [{"fileId": ""}]}}) == set()  # a workload profile
    assert plan_file_groups({"operations": [{"partitionPath": "a", "fileId": "f9"}]}) == {("a", "f9")}


def _begun(tmp_path: Path) -> tuple[ActiveTimeline, Clock, ActiveTimeline, str]:
    """A table with one commit (file group a/f1), the timeline a write begins from, and that write's instant."""
    base = make_table(tmp_path)
    clock = Clock()
    tl = ActiveTimeline.load(LOCAL, base)
    _complete(tl, clock, "commit", _md({"a": ["f1"]}))
    return tl, clock, tl.reload(), clock()


def test_overlap_is_found_disjoint_is_not(tmp_path: Path) -> None:
    tl, clock, start, me = _begun(tmp_path)
    other = _complete(tl, clock, "commit", _md({"a": ["f2"], "b": ["f3"]}))
    now = tl.reload()
    assert find_conflict(start, now, me, {("a", "f1"), ("c", "new")}) is None
    found = find_conflict(start, now, me, {("b", "f3"), ("a", "f9")})
    assert found is not None and found[0].startswith(other) and found[1] == {("b", "f3")}
    assert [i.requested_time for i in completed_writes_since(start, now, me)] == [other]
    assert completed_writes_since(now, now, me) == []


def test_an_overwrite_conflicts_with_any_write_into_a_partition_it_replaces() -> None:
    """An overwrite plans the file groups it replaces when it begins: a file group another write added meanwhile
    to a partition it overwrites would survive it (a key both wrote held twice), so they conflict, either way
    round; the whole table's overwrite conflicts with any write."""
    ovw = Footprint.of(_md({"a": ["n1"]}, {"a": ["f1"]}, op="INSERT_OVERWRITE"))
    assert ovw.overwritten == {"a"} and not ovw.whole_table
    added = Footprint.of(_md({"a": ["f2"]}))  # a new file group of partition a
    elsewhere = Footprint.of(_md({"b": ["f3"]}))
    assert ovw.shared_with(added) == added.shared_with(ovw) == {("a", "f2")}
    assert ovw.shared_with(elsewhere) == set()
    other_ovw = Footprint.of(_md({"a": ["n2"]}, {"a": []}, op="INSERT_OVERWRITE"))  # two overwrites of one partition
    assert ovw.shared_with(other_ovw) == {("a", "f1"), ("a", "n1"), ("a", "n2")}
    dropped = Footprint.of(_md({}, {"b": ["f3"]}, op="DELETE_PARTITION"))
    assert dropped.overwritten == {"b"} and dropped.shared_with(Footprint.of(_md({"b": ["f4"]}))) == {("b", "f4")}
    table = Footprint.of(_md({"a": ["n3"]}, {"a": ["f1"]}, op="INSERT_OVERWRITE_TABLE"))
    assert table.whole_table and table.shared_with(elsewhere) == {("b", "f3")}
    assert Footprint.of(_md({"a": ["f1"]})).shared_with(added) == set()  # plain writes: file groups only


def test_a_write_into_an_overwritten_partition_is_a_conflict(tmp_path: Path) -> None:
    tl, clock, start, me = _begun(tmp_path)
    other = _complete(tl, clock, "replacecommit", _md({"a": ["n1"]}, {"a": ["f1"]}, op="INSERT_OVERWRITE"))
    found = find_conflict(start, tl.reload(), me, Footprint.of(_md({"a": ["f2"]})))
    assert found is not None and found[0].startswith(other) and found[1] == {("a", "f2")}
    assert find_conflict(start, tl.reload(), me, Footprint.of(_md({"b": ["f3"]}))) is None


def test_earlier_compaction_is_tolerated(tmp_path: Path) -> None:
    base = make_table(tmp_path)
    clock = Clock()
    tl = ActiveTimeline.load(LOCAL, base)
    start = tl.reload()
    compaction = clock()
    me = clock()
    req = tl.create_requested("compaction", compaction, {"operations": [{"partitionPath": "a", "fileId": "f1"}],
                                                         "extraMetadata": {}, "version": 2})
    inf = tl.transition_to_inflight(req, None)
    tl.complete(inf, _md({"a": ["f1"]}, op="COMPACT"), clock())
    now = tl.reload()
    assert find_conflict(start, now, me, {("a", "f1")}) is None
    assert completed_writes_since(start, now, me) == []  # a table service, not a write


def test_pending_compaction_planned_meanwhile_conflicts(tmp_path: Path) -> None:
    base = make_table(tmp_path)
    clock = Clock()
    tl = ActiveTimeline.load(LOCAL, base)
    start = tl.reload()
    me = clock()
    planned = clock()
    req = tl.create_requested("compaction", planned, {"operations": [{"partitionPath": "a", "fileId": "f1"}],
                                                      "extraMetadata": {}, "version": 2})
    found = find_conflict(start, tl.reload(), me, {("a", "f1")})
    assert found is not None and found[0].startswith(planned)
    # running: its inflight file is empty (as Apache Hudi 1.x leaves it), its plan is still the requested file's
    tl.transition_to_inflight(req, None)
    assert tl.reload().get(planned).is_inflight  # type: ignore[union-attr]
    found = find_conflict(start, tl.reload(), me, {("a", "f1")})
    assert found is not None and found[0].startswith(planned)


def test_concurrency_options() -> None:
    assert Concurrency.from_options({}).failed_writes == "EAGER"
    occ = Concurrency.from_options({C.WRITE_CONCURRENCY_MODE: "optimistic_concurrency_control"})
    assert occ.optimistic and occ.failed_writes == "LAZY"
    assert Concurrency.from_options({"hoodie.cleaner.policy.failed.writes": "LAZY"}).failed_writes == "LAZY"
    with pytest.raises(ConfigError, match="LAZY"):
        Concurrency.from_options({C.WRITE_CONCURRENCY_MODE: "OPTIMISTIC_CONCURRENCY_CONTROL",
                                  C.FAILED_WRITES_CLEANER_POLICY: "EAGER"})
    with pytest.raises(ConfigError, match="NON_BLOCKING"):
        Concurrency.from_options({C.WRITE_CONCURRENCY_MODE: "NON_BLOCKING_CONCURRENCY_CONTROL"})
    assert Storage.from_uri("/")[0].atomic_create
