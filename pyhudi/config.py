"""Write options with Hudi's own names (``hoodie.*``), their defaults, and validation.

Options arrive as strings (as in Hudi's Spark datasource); :class:`WriteConfig` parses them once and rejects
unknown values with an error naming the option.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pyhudi.errors import ConfigError

# -- operation and keys -------------------------------------------------------------------------------------
OPERATION = "hoodie.datasource.write.operation"
TABLE_NAME = "hoodie.table.name"
TABLE_TYPE = "hoodie.datasource.write.table.type"
RECORDKEY_FIELD = "hoodie.datasource.write.recordkey.field"
PARTITIONPATH_FIELD = "hoodie.datasource.write.partitionpath.field"
ORDERING_FIELDS = "hoodie.table.ordering.fields"
PRECOMBINE_FIELD = "hoodie.datasource.write.precombine.field"  # older name of the ordering field
KEYGENERATOR_TYPE = "hoodie.datasource.write.keygenerator.type"
KEYGENERATOR_CLASS = "hoodie.datasource.write.keygenerator.class"
HIVE_STYLE_PARTITIONING = "hoodie.datasource.write.hive_style_partitioning"
URL_ENCODE_PARTITIONING = "hoodie.datasource.write.partitionpath.urlencode"
RECORD_MERGE_MODE = "hoodie.record.merge.mode"
COMBINE_BEFORE_INSERT = "hoodie.combine.before.insert"
COMBINE_BEFORE_UPSERT = "hoodie.combine.before.upsert"
# -- index ----------------------------------------------------------------------------------------------
INDEX_TYPE = "hoodie.index.type"
SIMPLE_INDEX_UPDATE_PARTITION_PATH = "hoodie.simple.index.update.partition.path"
BLOOM_INDEX_UPDATE_PARTITION_PATH = "hoodie.bloom.index.update.partition.path"
BLOOM_INDEX_PRUNE_BY_RANGES = "hoodie.bloom.index.prune.by.ranges"
BLOOM_INDEX_PARALLELISM = "hoodie.bloom.index.parallelism"
RECORD_INDEX_UPDATE_PARTITION_PATH = "hoodie.record.index.update.partition.path"
# -- file sizing ------------------------------------------------------------------------------------------
PARQUET_MAX_FILE_SIZE = "hoodie.parquet.max.file.size"
PARQUET_SMALL_FILE_LIMIT = "hoodie.parquet.small.file.limit"
RECORD_SIZE_ESTIMATE = "hoodie.copyonwrite.record.size.estimate"
INSERT_SPLIT_SIZE = "hoodie.copyonwrite.insert.split.size"
INSERT_AUTO_SPLIT = "hoodie.copyonwrite.insert.auto.split"
BULKINSERT_PARALLELISM = "hoodie.bulkinsert.shuffle.parallelism"
UPSERT_PARALLELISM = "hoodie.upsert.shuffle.parallelism"
PARQUET_COMPRESSION = "hoodie.parquet.compression.codec"
# -- table services ------------------------------------------------------------------------------------
CLEANER_COMMITS_RETAINED = "hoodie.cleaner.commits.retained"
AUTO_CLEAN = "hoodie.clean.automatic"
METADATA_ENABLE = "hoodie.metadata.enable"
RECORD_INDEX_ENABLE = "hoodie.metadata.record.index.enable"

OPERATIONS = ("insert", "upsert", "delete", "bulk_insert", "insert_overwrite", "insert_overwrite_table")
INDEX_TYPES = ("SIMPLE", "GLOBAL_SIMPLE", "BLOOM", "GLOBAL_BLOOM", "RECORD_INDEX")
MERGE_MODES = ("EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING")
KEYGEN_TYPES = ("SIMPLE", "COMPLEX", "NON_PARTITION", "NON_PARTITIONED")

DEFAULTS: dict[str, str] = {
    OPERATION: "upsert",
    INDEX_TYPE: "SIMPLE",
    SIMPLE_INDEX_UPDATE_PARTITION_PATH: "true",
    BLOOM_INDEX_UPDATE_PARTITION_PATH: "true",
    BLOOM_INDEX_PRUNE_BY_RANGES: "true",
    BLOOM_INDEX_PARALLELISM: "0",
    RECORD_INDEX_UPDATE_PARTITION_PATH: "false",
    HIVE_STYLE_PARTITIONING: "false",
    URL_ENCODE_PARTITIONING: "false",
    COMBINE_BEFORE_INSERT: "false",
    COMBINE_BEFORE_UPSERT: "true",
    PARQUET_MAX_FILE_SIZE: str(120 * 1024 * 1024),
    PARQUET_SMALL_FILE_LIMIT: str(100 * 1024 * 1024),
    RECORD_SIZE_ESTIMATE: "1024",
    INSERT_SPLIT_SIZE: "500000",
    INSERT_AUTO_SPLIT: "true",
    BULKINSERT_PARALLELISM: "0",
    UPSERT_PARALLELISM: "0",
    PARQUET_COMPRESSION: "gzip",
    CLEANER_COMMITS_RETAINED: "10",
    AUTO_CLEAN: "true",
    METADATA_ENABLE: "true",
    RECORD_INDEX_ENABLE: "false",
}


def bool_option(options: Mapping[str, str], key: str) -> bool:
    """A true/false option (default from :data:`DEFAULTS`); anything else is an error naming the option."""
    v = str(options.get(key, DEFAULTS.get(key, "false"))).strip().lower()
    if v not in ("true", "false"):
        raise ConfigError(f"option {key} must be true or false, got {options.get(key)!r}")
    return v == "true"


def int_option(options: Mapping[str, str], key: str, minimum: int = 0) -> int:
    """An integer option of at least ``minimum`` (default from :data:`DEFAULTS`); anything else is an error
    naming the option."""
    raw = options.get(key, DEFAULTS.get(key))
    try:
        v = int(str(raw))
    except ValueError:
        raise ConfigError(f"option {key} must be an integer, got {raw!r}") from None
    if v < minimum:
        raise ConfigError(f"option {key} must be >= {minimum}, got {v}")
    return v


def _choice(options: Mapping[str, str], key: str, choices: tuple[str, ...], upper: bool = True) -> str:
    raw = str(options.get(key, DEFAULTS.get(key, "")))
    v = raw.strip().upper() if upper else raw.strip().lower()
    if v not in choices:
        raise ConfigError(f"option {key} has unknown value {raw!r}; expected one of {', '.join(choices)}")
    return v


def _fields(value: str | None) -> tuple[str, ...]:
    return tuple(f.strip() for f in (value or "").split(",") if f.strip())


@dataclass(frozen=True)
class WriteConfig:
    """Parsed write options. Build with :meth:`from_options`."""

    operation: str
    index_type: str
    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...]
    ordering_fields: tuple[str, ...]
    keygen_type: str
    hive_style: bool
    url_encode: bool
    merge_mode: str
    combine_before_insert: bool
    combine_before_upsert: bool
    update_partition_path: bool
    max_file_size: int
    small_file_limit: int
    record_size_estimate: int
    insert_split_size: int
    insert_auto_split: bool
    parallelism: int
    parquet_compression: str
    cleaner_commits_retained: int
    auto_clean: bool
    bloom_prune_by_ranges: bool = True
    bloom_parallelism: int = 0  # 0: the write's parallelism
    options: Mapping[str, str] = field(default_factory=dict)

    @staticmethod
    def from_options(options: Mapping[str, str]) -> WriteConfig:
        o = {k: str(v) for k, v in options.items()}
        op = _choice(o, OPERATION, OPERATIONS, upper=False)
        index_type = _choice(o, INDEX_TYPE, INDEX_TYPES)
        rk = _fields(o.get(RECORDKEY_FIELD))
        if not rk:
            raise ConfigError(f"option {RECORDKEY_FIELD} is required (the record key column or columns)")
        pf = _fields(o.get(PARTITIONPATH_FIELD))
        ordering = _fields(o.get(ORDERING_FIELDS) or o.get(PRECOMBINE_FIELD))
        from pyhudi.table.keygen import infer_type  # the key generators read this module's names

        o.setdefault(KEYGENERATOR_TYPE, infer_type(rk, pf))
        keygen = _choice(o, KEYGENERATOR_TYPE, KEYGEN_TYPES)
        if keygen == "SIMPLE" and (len(rk) != 1 or len(pf) > 1):
            raise ConfigError(
                f"option {KEYGENERATOR_TYPE}=SIMPLE takes one record key and at most one partition field; "
                f"use COMPLEX for {','.join(rk)} / {','.join(pf)}"
            )
        o.setdefault(RECORD_MERGE_MODE, "EVENT_TIME_ORDERING" if ordering else "COMMIT_TIME_ORDERING")
        merge_mode = _choice(o, RECORD_MERGE_MODE, MERGE_MODES)
        upp_key = {
            "RECORD_INDEX": RECORD_INDEX_UPDATE_PARTITION_PATH,
            "GLOBAL_BLOOM": BLOOM_INDEX_UPDATE_PARTITION_PATH,
        }.get(index_type, SIMPLE_INDEX_UPDATE_PARTITION_PATH)
        parallelism = int_option(o, UPSERT_PARALLELISM if op != "bulk_insert" else BULKINSERT_PARALLELISM)
        codec = str(o.get(PARQUET_COMPRESSION, DEFAULTS[PARQUET_COMPRESSION])).lower()
        if codec not in ("gzip", "snappy", "zstd", "none", "uncompressed", "lz4", "brotli"):
            raise ConfigError(f"option {PARQUET_COMPRESSION} has unknown value {codec!r}")
        from pyhudi.io.bloom import BloomFilter

        BloomFilter.from_config(o)  # footer bloom filter options: a bad value is an error before anything is written
        return WriteConfig(
            operation=op,
            index_type=index_type,
            record_key_fields=rk,
            partition_fields=pf,
            ordering_fields=ordering,
            keygen_type=keygen,
            hive_style=bool_option(o, HIVE_STYLE_PARTITIONING),
            url_encode=bool_option(o, URL_ENCODE_PARTITIONING),
            merge_mode=merge_mode,
            combine_before_insert=bool_option(o, COMBINE_BEFORE_INSERT),
            combine_before_upsert=bool_option(o, COMBINE_BEFORE_UPSERT),
            update_partition_path=bool_option(o, upp_key),
            max_file_size=int_option(o, PARQUET_MAX_FILE_SIZE, 1),
            small_file_limit=int_option(o, PARQUET_SMALL_FILE_LIMIT),
            record_size_estimate=int_option(o, RECORD_SIZE_ESTIMATE, 1),
            insert_split_size=int_option(o, INSERT_SPLIT_SIZE, 1),
            insert_auto_split=bool_option(o, INSERT_AUTO_SPLIT),
            parallelism=parallelism,
            parquet_compression=codec,
            cleaner_commits_retained=int_option(o, CLEANER_COMMITS_RETAINED, 1),
            auto_clean=bool_option(o, AUTO_CLEAN),
            bloom_prune_by_ranges=bool_option(o, BLOOM_INDEX_PRUNE_BY_RANGES),
            bloom_parallelism=int_option(o, BLOOM_INDEX_PARALLELISM),
            options=o,
        )

    @property
    def is_global_index(self) -> bool:
        return self.index_type.startswith("GLOBAL_") or self.index_type == "RECORD_INDEX"
