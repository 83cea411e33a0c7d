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
