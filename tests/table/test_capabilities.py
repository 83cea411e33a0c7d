"""What pyhudi writes is checked before a write touches a table: table properties that ask for files pyhudi does
not make (another base file format, no meta columns, partition columns left out) are refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyhudi.errors import UnsupportedTableError
from pyhudi.table import properties as P
from pyhudi.table.capabilities import check_writable
from pyhudi.table.properties import TableConfig
from tests.support.storage import LOCAL


@pytest.mark.parametrize(("key", "value", "why"), [
    (P.BASE_FILE_FORMAT, "ORC", "pyhudi writes parquet base files"),
    (P.POPULATE_META_FIELDS, "false", "pyhudi writes the meta columns into every file"),
    (P.DROP_PARTITION_COLUMNS, "true", "pyhudi keeps the partition columns in its files"),
    (P.CDC_ENABLED, "true", "pyhudi writes no change-data-capture log files, which Hudi's CDC queries read"),
])
def test_table_properties_pyhudi_does_not_write_are_refused(tmp_path: Path, key: str, value: str, why: str) -> None:
    base = str(tmp_path / "t")
    (tmp_path / "t" / ".hoodie").mkdir(parents=True)
    cfg = TableConfig.create("t", record_key_fields=["id"], extra={key: value})
    with pytest.raises(UnsupportedTableError, match=f"{base} has {key}={value} \\({why}\\); pyhudi does not write "
                                                    "such tables and refuses an upsert; nothing was written"):
        check_writable(base, cfg, "an upsert", storage=LOCAL, mor_supported=True)
    check_writable(base, TableConfig.create("t", record_key_fields=["id"]), "an upsert", storage=LOCAL)


def test_nothing_is_written_while_a_restore_is_pending(tmp_path: Path) -> None:
    """A restore (Apache Hudi's, to a savepoint) that stopped part way: writes and every table service are refused
    until it completed, naming it, as Hudi's writers refuse to start a commit then."""
    from pyhudi.table.table import Table
    from pyhudi.table.timeline import RESTORE, ActiveTimeline
    from pyhudi.txn.transaction import archive_table, clean_table, rollback_write
    from tests.support.fabricate import Clock, commit, make_table
    from tests.support.robust import tree

    base = make_table(tmp_path / "t")
    clock = Clock()
    c = commit(base, clock, {"region=eu": [("aaaa-0", [("k1", 1)])]})
    tl = ActiveTimeline.load(LOCAL, base)
    r = clock()
    tl.transition_to_inflight(tl.create_requested(RESTORE, r, b""), b"")
    before = tree(base)
    refused = rf"the restore {r} is pending \(inflight\): pyhudi refuses {{}} until it has completed"
    with pytest.raises(UnsupportedTableError, match=refused.format(r"a write \(upsert\)")):
        Table.open(base).check_writable("a write (upsert)")
    for what, run in [("cleaning", lambda: clean_table(LOCAL, base)), ("archival", lambda: archive_table(LOCAL, base)),
                      ("a rollback", lambda: rollback_write(LOCAL, base, c))]:
        with pytest.raises(UnsupportedTableError, match=refused.format(what)):
            run()
    assert tree(base) == before
