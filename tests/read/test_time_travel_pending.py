"""A time travel at or after the first incomplete write is refused (Hudi's ``validateTimestampAsOf``): that write
may still complete (a slow optimistic writer commits after a faster one with a later instant), and the same query
would then return other rows. Before it, the read is answered."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyhudi.errors import InvalidInputError
from pyhudi.table.table import Table
from tests.support.fabricate import Clock, commit, make_table

P = "region=eu"


def test_time_travel_stops_before_the_first_incomplete_write(tmp_path: Path) -> None:
    base = make_table(tmp_path / "t")
    clock = Clock()
    first = commit(base, clock, {P: [("aaaa-0", [("k1", 1)])]})
    pending = commit(base, clock, {P: [("bbbb-0", [("k2", 2)])]}, complete=False)
    later = commit(base, clock, {P: [("cccc-0", [("k3", 3)])]})
    t = Table.open(base)
    assert t.to_arrow(as_of=first).column("_hoodie_record_key").to_pylist() == ["k1"]
    for as_of in (pending, later):
        with pytest.raises(InvalidInputError, match=f"the commit {pending} is not complete"):
            t.to_arrow(as_of=as_of)
    assert sorted(t.to_arrow().column("_hoodie_record_key").to_pylist()) == ["k1", "k3"]  # a snapshot is read
