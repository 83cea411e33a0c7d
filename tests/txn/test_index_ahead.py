"""A write whose record index is ahead of its view of the table: another write commits after it began and the
metadata table compacts, so the index's base files hold the other write's entries (the index reads only its log
blocks as of the write's begin). A key the other write put in a new file group is then placed by the index in a
file group the write's view does not hold: the write is refused as a retryable conflict before anything is
written, and the retry commits; an index naming file groups no commit wrote is refused as damaged."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pyhudi.errors import ConcurrentWriteConflict, CorruptFileError, IndexAheadConflict
from pyhudi.metadata.validate import validate_table
from pyhudi.table.fsview import FileSystemView
from pyhudi.table.table import Table
from pyhudi.txn import transaction as T
from tests.support.robust import OPTS, apply, expected, hudi_rs_read, rows, table_rows, to_arrow
from tests.support.tree import snapshot

pytest.importorskip("hudi")
pytestmark = pytest.mark.spark

OCC = {"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"}
# the metadata table compacts after every deltacommit: the other write's index entries reach its base files
COMPACT_EACH = {"hoodie.metadata.compact.max.delta.commits": "1"}
TYPES = {
    "COPY_ON_WRITE": {**OPTS, **OCC, **COMPACT_EACH},
    "MERGE_ON_READ": {**OPTS, **OCC, **COMPACT_EACH, "hoodie.datasource.write.table.type": "MERGE_ON_READ",
                      "hoodie.compact.inline": "false"},
}


def _write(spark, base: str, op: str, batch: list, opts: dict) -> str:  # type: ignore[no-untyped-def]
    return Table.open(base).write(spark.createDataFrame(to_arrow(batch)), op, opts).instant


def _after_begin(monkeypatch: pytest.MonkeyPatch, other: Callable[[], None]) -> None:
    """``other`` runs once, right after the next write began (took its view of the table)."""
    begin = T.WriteTransaction.begin
    fired: list[bool] = []

    def patched(self, spark=None):  # type: ignore[no-untyped-def]
        tl = begin(self, spark)
        if not fired:
            fired.append(True)
            other()
        return tl

    monkeypatch.setattr(T.WriteTransaction, "begin", patched)


def _check(base: str, model: dict) -> None:
    assert table_rows(Table.open(base).to_arrow()) == expected(model)
    assert table_rows(hudi_rs_read(base)) == expected(model)
    assert validate_table(Table.open(base)).ok


@pytest.mark.parametrize(("table_type", "operation"), [
    *((t, op) for t in TYPES for op in ("upsert", "delete")),
    ("COPY_ON_WRITE", "upsert with SIMPLE"),  # merge-on-read tables with a record index are written with it only
])
def test_a_key_placed_meanwhile_in_a_new_file_group_is_a_conflict(spark, tmp_path: Path, table_type: str,
                                                                  operation: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``upsert with SIMPLE``: a non-global index finds no new file group of the other write, and the record index
    check of keys held elsewhere finds the key there: a conflict too, not bad input."""
    opts = TYPES[table_type]
    if operation == "upsert with SIMPLE":
        # the table keeps its record index (hoodie.index.type=RECORD_INDEX implies one; SIMPLE does not)
        opts, operation = {**opts, "hoodie.index.type": "SIMPLE", "hoodie.metadata.record.index.enable": "true"}, "upsert"
    base = str(tmp_path / "t")
    model: dict = {}
    first = rows(range(10))
    Table.create(base, to_arrow(first).schema, opts)
    _write(spark, base, "insert", first, opts)
    apply(model, "insert", first)
    theirs = rows([200], p="c", ts=3, v=0.3)  # a new partition: a new file group
    committed: list[str] = []

    def other() -> None:
        committed.append(_write(spark, base, "upsert", theirs, opts))
        apply(model, "upsert", theirs)
        nonlocal before
        before = snapshot(Path(base))

    before: dict = {}
    mine = rows([200, 201], p="c", ts=5, v=0.7) if operation == "upsert" else rows([200], p="c")
    _after_begin(monkeypatch, other)
    with pytest.raises(IndexAheadConflict) as e:
        _write(spark, base, operation, mine, opts)
    assert isinstance(e.value, ConcurrentWriteConflict)  # retryable, as every conflict
    assert committed[0] in str(e.value) and "c/" in str(e.value) and "nothing was written" in str(e.value)
    assert snapshot(Path(base)) == before  # the refused write left nothing: no instant, marker or file
    _check(base, model)

    monkeypatch.undo()
    _write(spark, base, operation, mine, opts)  # the retry sees the other write's file group
    apply(model, operation, mine)
    _check(base, model)


def test_an_index_naming_a_file_group_no_commit_wrote_is_refused(spark, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The table's view hides one file group that the record index names (as an index out of step with the table
    would): the write is refused naming the record index, and nothing is written."""
    opts = TYPES["COPY_ON_WRITE"]
    base = str(tmp_path / "t")
    first = rows(range(10))
    Table.create(base, to_arrow(first).schema, opts)
    _write(spark, base, "insert", first, opts)
    hidden = next(fs for fs in Table.open(base).view().latest_file_slices() if fs.partition == "b")
    latest = FileSystemView.latest_file_slices

    def without_hidden(self, *a, **k):  # type: ignore[no-untyped-def]
        return [fs for fs in latest(self, *a, **k) if (fs.partition, fs.file_id) != (hidden.partition, hidden.file_id)]

    monkeypatch.setattr(FileSystemView, "latest_file_slices", without_hidden)
    before = snapshot(Path(base))
    with pytest.raises(CorruptFileError) as e:
        _write(spark, base, "upsert", rows([1], ts=5), opts)
    assert "record_index" in str(e.value) and f"b/{hidden.file_id}" in str(e.value)
    assert "pyhudi validate" in str(e.value)
    assert snapshot(Path(base)) == before
