"""What pyhudi can read and write, checked before a read plans anything and before a write touches anything.

pyhudi reads copy-on-write and merge-on-read tables of table versions 8 and 9 (:func:`check_readable`: a table of
another version is refused by name, never read as if it were one of these), and writes tables of table
version 9. Into merge-on-read tables it writes every operation (:data:`MOR_OPERATIONS`: upsert, insert,
bulk_insert and delete as deltacommits, :mod:`pyhudi.write.append`; insert_overwrite as replacecommits), compacts,
rolls failed writes back and cleans; what it does not make exactly there is refused by name. Every operation that writes into a table or its metadata table (``Table.write`` for
every operation, with the rollback, recovery, metadata preparation, cleaning and compaction it triggers; record
index builds; the async indexer) calls :func:`check_writable` first, so a table it cannot write exactly is left
byte for byte as it was, with an error naming the table and the feature.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyhudi.errors import ConfigError, UnsupportedTableError
from pyhudi.table.internal_schema import history_files, refusal, schema_folder
from pyhudi.table.properties import (
    BASE_FILE_FORMAT,
    CDC_ENABLED,
    COPY_ON_WRITE,
    CURRENT_TABLE_VERSION,
    DROP_PARTITION_COLUMNS,
    MERGE_ON_READ,
    POPULATE_META_FIELDS,
    TableConfig,
)

if TYPE_CHECKING:
    from pyhudi.io.storage import Storage

#: table versions pyhudi reads
READABLE_TABLE_VERSIONS = (8, CURRENT_TABLE_VERSION)
#: table versions pyhudi writes
WRITABLE_TABLE_VERSIONS = (CURRENT_TABLE_VERSION,)
_HUDI_RELEASE = {6: "0.14-0.15", 8: "1.0", 9: "1.1"}
#: write operations pyhudi makes exactly on merge-on-read tables
MOR_OPERATIONS = ("upsert", "insert", "bulk_insert", "delete", "insert_overwrite", "insert_overwrite_table")
#: indexes whose tagging is exact on merge-on-read tables written by pyhudi (inserts always go to base files, so
#: the keys of the latest base files are a superset of the live keys; a key deleted in a log file and written
#: again is appended to its old file group, where the newer record wins)
MOR_INDEX_TYPES = ("RECORD_INDEX", "SIMPLE")


def mor_refusal(table: str, what: str) -> str:
    return (
        f"{table} is a MERGE_ON_READ table, and pyhudi does not write one with {what}: it writes "
        f"{', '.join(MOR_OPERATIONS)}, compacts, rolls failed writes back and cleans, and refuses the rest "
        "(writing them exactly as Hudi does is not implemented); nothing was written"
    )


def _versioned(table: str, config: TableConfig) -> str:
    """``<table> is a [MERGE_ON_READ ]table of version <v>[ (Hudi <release>)]``."""
    v = config.table_version
    release = f" (Hudi {_HUDI_RELEASE[v]})" if v in _HUDI_RELEASE else ""
    kind = "MERGE_ON_READ " if config.table_type == MERGE_ON_READ else ""
    return f"{table} is a {kind}table of version {v}{release}"


def _versions(versions: tuple[int, ...]) -> str:
    return " and ".join(map(str, versions))


def check_readable(table: str, config: TableConfig) -> None:
    """:class:`UnsupportedTableError` if the table's version is not one pyhudi reads: another version may lay its
    files out otherwise, so such a table is refused, never read as if it were one of these."""
    if config.table_version not in READABLE_TABLE_VERSIONS:
        raise UnsupportedTableError(
            f"{_versioned(table, config)}; pyhudi reads table versions {_versions(READABLE_TABLE_VERSIONS)} only, "
            "and does not read it"
        )


def check_writable(table: str, config: TableConfig, what: str, *, storage: Storage,
                   mor_supported: bool = False) -> None:
    """:class:`UnsupportedTableError` if pyhudi cannot write the table exactly; ``what`` names the refused
    operation ("an upsert", "building the record index", ...). ``mor_supported``: the operation is one pyhudi
    makes exactly on merge-on-read tables too. ``storage`` (the table's): a table that uses schema-on-read
    evolution is refused too (:func:`check_not_schema_on_read`)."""
    check_not_schema_on_read(storage, table, what)
    if config.table_version not in WRITABLE_TABLE_VERSIONS:
        raise UnsupportedTableError(
            f"{_versioned(table, config)}; pyhudi writes table version {_versions(WRITABLE_TABLE_VERSIONS)} only "
            f"(it reads versions {_versions(READABLE_TABLE_VERSIONS)}) and refuses {what} (upgrading the table is "
            "not implemented); nothing was written"
        )
    feature = table_feature_not_written(config)
    if feature is not None:
        raise UnsupportedTableError(f"{table} has {feature}; pyhudi does not write such tables and refuses {what}; "
                                    "nothing was written")
    check_no_pending_restore(storage, table, config, what)
    if config.table_type == MERGE_ON_READ and not mor_supported:
        raise UnsupportedTableError(mor_refusal(table, what))


def table_feature_not_written(config: TableConfig) -> str | None:
    """The table property (as ``key=value`` text) that asks for files pyhudi does not write, or None: base files
    in another format than parquet, no meta columns in them, or partition columns left out of them."""
    if config.base_file_format.strip().upper() != "PARQUET":
        return f"{BASE_FILE_FORMAT}={config.base_file_format} (pyhudi writes parquet base files)"
    if not config.populate_meta_fields:
        return f"{POPULATE_META_FIELDS}=false (pyhudi writes the meta columns into every file)"
    if config.drop_partition_columns:
        return f"{DROP_PARTITION_COLUMNS}=true (pyhudi keeps the partition columns in its files)"
    if str(config.get(CDC_ENABLED, "false")).strip().lower() == "true":
        return f"{CDC_ENABLED}=true (pyhudi writes no change-data-capture log files, which Hudi's CDC queries read)"
    return None


def check_not_schema_on_read(storage: Storage, table: str, what: str) -> None:
    """:class:`UnsupportedTableError` when ``.hoodie/.schema`` holds schema-on-read history (Hudi creates the
    folder empty in every table; every schema-on-read commit writes a history file there)."""
    files = history_files(storage, table)
    if files:
        raise refusal(table, f"{schema_folder(table)} holds {files[0]}", what,
                      "it reads such tables, but a write must extend Hudi's InternalSchema history (.hoodie/.schema, "
                      "extraMetadata.latestSchema) as Hudi does, which pyhudi does not implement; nothing was committed")


def check_no_pending_restore(storage: Storage, table: str, config: TableConfig, what: str) -> None:
    """:class:`UnsupportedTableError` while a restore (Apache Hudi's, to a savepoint) is requested or inflight, as
    Hudi's writers refuse to start a commit then (``BaseHoodieWriteClient#startCommit``): a restore that stopped part
    way has rolled back some of the commits after its savepoint and not the others, and a write now would carry
    their records into its new files, where the rest of the restore would leave them."""
    from pyhudi.table.timeline import RESTORE, ActiveTimeline

    pending = ActiveTimeline.load(storage, table, config).pending().by_action(RESTORE).first()
    if pending is not None:
        raise UnsupportedTableError(
            f"{table}: the restore {pending.requested_time} is pending ({pending.state.name.lower()}): pyhudi "
            f"refuses {what} until it has completed (run the restore again with Apache Hudi, which finishes it); "
            "nothing was written"
        )


def check_new_table_type(table: str, table_type: str, option: str) -> str:
    """The type of a new table (COPY_ON_WRITE or MERGE_ON_READ); anything else is an error naming the option."""
    t = table_type.strip().upper()
    if t not in (COPY_ON_WRITE, MERGE_ON_READ):
        raise ConfigError(f"option {option} has unknown value {table_type!r}; expected COPY_ON_WRITE or MERGE_ON_READ")
    return t
