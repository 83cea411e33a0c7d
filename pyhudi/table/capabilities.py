"""What pyhudi can write, checked before a write touches anything.

pyhudi reads copy-on-write and merge-on-read tables of table versions 8 and 9, and writes copy-on-write tables
of table version 9 only. Every operation that writes into a table or its metadata table (``Table.write`` for
every operation, with the rollback, recovery, metadata preparation, cleaning and compaction it triggers; record
index builds; the async indexer) calls :func:`check_writable` first, so a table it cannot write exactly is left
byte for byte as it was, with an error naming the table and the feature.
"""

from __future__ import annotations

from pyhudi.errors import ConfigError, UnsupportedTableError
from pyhudi.table.properties import COPY_ON_WRITE, CURRENT_TABLE_VERSION, MERGE_ON_READ, TableConfig

#: table versions pyhudi writes
WRITABLE_TABLE_VERSIONS = (CURRENT_TABLE_VERSION,)
_HUDI_RELEASE = {6: "0.14-0.15", 8: "1.0", 9: "1.1"}


def _mor_refusal(table: str, what: str) -> str:
    return (
        f"{table} is a MERGE_ON_READ table; pyhudi does not write merge-on-read tables yet: it reads them but "
        f"refuses {what} (writing log files, compaction and their metadata-table updates exactly as Hudi does is "
        "not implemented); nothing was written"
    )


def check_writable(table: str, config: TableConfig, what: str) -> None:
    """:class:`UnsupportedTableError` if pyhudi cannot write the table exactly; ``what`` names the refused
    operation ("an upsert", "building the record index", ...)."""
    if config.table_type == MERGE_ON_READ:
        raise UnsupportedTableError(_mor_refusal(table, what))
    if config.table_version not in WRITABLE_TABLE_VERSIONS:
        v = config.table_version
        release = f" (Hudi {_HUDI_RELEASE[v]})" if v in _HUDI_RELEASE else ""
        raise UnsupportedTableError(
            f"{table} is a table of version {v}{release}; pyhudi writes table version "
            f"{', '.join(map(str, WRITABLE_TABLE_VERSIONS))} only (it reads versions 8 and 9) and refuses {what} "
            "(upgrading the table is not implemented); nothing was written"
        )


def check_new_table_type(table: str, table_type: str, option: str) -> None:
    """A new table must be copy-on-write: asking for MERGE_ON_READ is refused as a write into one would be."""
    t = table_type.strip().upper()
    if t == MERGE_ON_READ:
        raise ConfigError(_mor_refusal(f"{table} (option {option}={table_type})", "creating one"))
    if t != COPY_ON_WRITE:
        raise ConfigError(f"option {option} has unknown value {table_type!r}; expected COPY_ON_WRITE or MERGE_ON_READ")
