"""Our reader reads the Java-written copy-on-write fixtures exactly as hudi-rs does: latest snapshot and time
travel to every completed commit."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hudi import HudiReadOptions, HudiTableBuilder

from pyhudi import Table
from tests.paths import TABLE_ZIPS_DIR
from tests.support.fixtures import unzip_table

COW = sorted(p.name for p in TABLE_ZIPS_DIR.glob("cow_v9_*.zip"))


def _rows(t: pa.Table, columns: list[str]) -> list[dict]:
    return sorted(t.select(columns).to_pylist(), key=lambda r: (r["_hoodie_partition_path"], r["_hoodie_record_key"]))


@pytest.mark.parametrize("zip_name", COW)
def test_snapshot_and_time_travel_match_hudi_rs(zip_name: str, tmp_path: Path) -> None:
    base = str(unzip_table(zip_name, tmp_path))
    table = Table.open(base)
    hudi = HudiTableBuilder.from_base_uri(base).build()
    ours = table.to_arrow()
    assert ours.num_rows > 0
    cols = ours.column_names
    assert _rows(ours, cols) == _rows(pa.Table.from_batches(hudi.read()), cols)
    for inst in table.timeline().completed_commits():
        t = inst.requested_time
        theirs = pa.Table.from_batches(hudi.read(HudiReadOptions().with_as_of_timestamp(t)))
        mine = table.to_arrow(as_of=t)
        if theirs.num_rows == 0:
            assert mine.num_rows == 0, t
            continue
        assert _rows(mine, cols) == _rows(theirs, cols), f"as of {t}"


def test_as_of_takes_times_between_instants(tmp_path: Path) -> None:
    """``as_of`` is a point in time, as Hudi's ``as.of.instant``: any instant or ``yyyy-MM-dd[ HH:mm:ss[.SSS]]``
    reads the commits at or before it; a malformed value is an error naming it."""
    from pyhudi.errors import InvalidInputError

    base = str(unzip_table(COW[0], tmp_path))
    table = Table.open(base)
    commits = [i.requested_time for i in table.timeline().completed_commits()]
    cols = table.to_arrow().column_names
    first = _rows(table.to_arrow(as_of=commits[0]), cols)
    assert table.to_arrow(as_of="1999-01-01").num_rows == 0
    assert _rows(table.to_arrow(as_of="2999-12-31 23:59:59"), cols) == _rows(table.to_arrow(), cols)
    t = commits[0]
    dashed = f"{t[:4]}-{t[4:6]}-{t[6:8]} {t[8:10]}:{t[10:12]}:{t[12:14]}.{t[14:17]}"
    assert _rows(table.to_arrow(as_of=dashed), cols) == first
    if len(commits) > 1 and int(commits[1]) - int(commits[0]) > 1:  # a time after the first commit, before the next
        assert _rows(table.to_arrow(as_of=str(int(commits[0]) + 1)), cols) == first
    with pytest.raises(InvalidInputError, match="cannot read as of 'yesterday'"):
        table.to_arrow(as_of="yesterday")
