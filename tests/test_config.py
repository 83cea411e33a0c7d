"""The option registry: every option is a key with a default and documentation, aliases resolve, and options
pyhudi knows but does not honour are refused (or warned about) by name."""

from __future__ import annotations

import pickle
import re
import warnings

import pyarrow as pa
import pytest

from pyhudi import config as C
from pyhudi.errors import ConfigError


def test_options_are_keys_with_docs() -> None:
    assert C.OPERATION == "hoodie.datasource.write.operation"
    assert {C.OPERATION: "x"}["hoodie.datasource.write.operation"] == "x"
    for key, opt in C.OPTIONS.items():
        assert key == opt and opt.doc, key
        # Hudi's own read option for time travel is the one key of its name without the hoodie. prefix
        assert key.startswith(("hoodie.", "pyhudi.")) or key == "as.of.instant", key
    assert C.DEFAULTS[C.INDEX_TYPE] == "SIMPLE"


def test_option_pickles_as_plain_key() -> None:
    back = pickle.loads(pickle.dumps(C.INDEX_TYPE))
    assert back == "hoodie.index.type" and type(back) is str


def test_option_defined_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="defined twice"):
        C.Option("hoodie.index.type", None, "again", section="index")


def test_alias_is_read() -> None:
    assert C.TABLE_TYPE.get({"hoodie.table.type": "MERGE_ON_READ"}) == "MERGE_ON_READ"
    assert C.TABLE_TYPE.get({}) == "COPY_ON_WRITE"
    assert C.int_option({"hoodie.clean.commits.retained": "3"}, C.CLEANER_COMMITS_RETAINED) == 3


def test_not_honoured_option_is_an_error_naming_it() -> None:
    opts = {C.RECORDKEY_FIELD: "k", "hoodie.schema.on.read.enable": "true"}
    with pytest.raises(ConfigError, match=r"hoodie\.schema\.on\.read\.enable"):
        C.WriteConfig.from_options(opts)
    C.WriteConfig.from_options({C.RECORDKEY_FIELD: "k", "hoodie.schema.on.read.enable": "false"})


def test_warn_only_option_warns() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        C.check_honoured({"hoodie.metadata.index.secondary.enable": "true"})
    assert any("secondary" in str(w.message) for w in caught)


@pytest.mark.parametrize("key", ["hoodie.table.type", "hoodie.datasource.write.table.type"])
def test_merge_on_read_table_is_created_not_ignored(tmp_path, key: str) -> None:  # type: ignore[no-untyped-def]
    from pyhudi.table.table import Table

    t = Table.create(str(tmp_path / "t"), pa.schema([("k", pa.string())]), {C.RECORDKEY_FIELD: "k", key: "MERGE_ON_READ"})
    assert t.config.table_type == "MERGE_ON_READ"


def test_conflict_resolution_strategy_other_than_the_default_is_refused() -> None:
    C.check_honoured({C.LOCK_CONFLICT_RESOLUTION_STRATEGY: str(C.LOCK_CONFLICT_RESOLUTION_STRATEGY.default)})
    with pytest.raises(ConfigError, match=re.escape(C.LOCK_CONFLICT_RESOLUTION_STRATEGY)):
        C.check_honoured({C.LOCK_CONFLICT_RESOLUTION_STRATEGY: "com.example.MyStrategy"})


def test_write_config_and_base_files_take_the_same_codecs() -> None:
    from pyhudi.table.base_file import ParquetOptions

    for codec in C.PARQUET_CODECS:
        ParquetOptions.from_options({C.PARQUET_COMPRESSION: codec})
    with pytest.raises(ConfigError, match=re.escape(C.PARQUET_COMPRESSION)):
        ParquetOptions.from_options({C.PARQUET_COMPRESSION: "lzo"})


def test_key_generator_class_names_the_key_generator() -> None:
    """``hoodie.datasource.write.keygenerator.class`` decides the key generator (it was ignored, and the type
    inferred from the fields: a ComplexKeyGenerator table of one key field got SIMPLE keys); a class pyhudi does
    not write with, or a type beside it that disagrees, is refused by name."""
    base = {C.RECORDKEY_FIELD: "k", C.PARTITIONPATH_FIELD: "p"}
    cls = "hoodie.datasource.write.keygenerator.class"
    assert C.WriteConfig.from_options(base).keygen_type == "SIMPLE"
    complex_ = C.WriteConfig.from_options({**base, cls: "org.apache.hudi.keygen.ComplexKeyGenerator"})
    assert complex_.keygen_type == "COMPLEX" and complex_.partition_fields == ("p",)
    for bad in ("org.apache.hudi.keygen.TimestampBasedKeyGenerator", "org.apache.hudi.keygen.CustomKeyGenerator"):
        with pytest.raises(ConfigError, match=re.escape(f"{cls}: unsupported key generator class {bad!r}")):
            C.WriteConfig.from_options({**base, cls: bad})
    with pytest.raises(ConfigError, match="disagree"):
        C.WriteConfig.from_options({**base, cls: "org.apache.hudi.keygen.SimpleKeyGenerator",
                                    "hoodie.datasource.write.keygenerator.type": "COMPLEX"})
    with pytest.raises(ConfigError, match="'p:SIMPLE' is a CUSTOM key generator spec"):
        C.WriteConfig.from_options({C.RECORDKEY_FIELD: "k", C.PARTITIONPATH_FIELD: "p:SIMPLE"})


@pytest.mark.parametrize("how", [{"hoodie.datasource.write.keygenerator.type": "NON_PARTITION"},
                                 {"hoodie.datasource.write.keygenerator.class":
                                  "org.apache.hudi.keygen.NonpartitionedKeyGenerator"}])
def test_a_non_partitioned_key_generator_takes_no_partition_field(tmp_path, how: dict) -> None:  # type: ignore[no-untyped-def]
    """Hudi's NonpartitionedKeyGenerator ignores a partition field given beside it: the table records none (it
    recorded the field, and hudi-rs then took the column for a partition column and filtered every row out), and
    writes giving the field again are accepted."""
    from pyhudi.table.properties import read_table_config
    from pyhudi.table.table import Table
    from pyhudi.txn.transaction import resolve_options

    opts = {C.RECORDKEY_FIELD: "k", C.PARTITIONPATH_FIELD: "p", **how}
    assert C.WriteConfig.from_options(opts).partition_fields == ()
    t = Table.create(str(tmp_path / "t"), pa.schema([("k", pa.string()), ("p", pa.string())]), opts)
    cfg = read_table_config(t.storage, str(tmp_path / "t" / ".hoodie"))
    assert cfg.partition_fields == [] or cfg.partition_fields == ()
    assert cfg.key_generator_type == "NON_PARTITION"
    assert C.WriteConfig.from_options(resolve_options(cfg, opts, t.timeline())).partition_fields == ()


def test_options_that_conflict_with_the_table_are_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A table-defining option given with another value than the table's is refused (Hudi's "Config conflict"),
    never silently replaced by the table's; the table's own values, in any spelling, pass."""
    from pyhudi.table.table import Table
    from pyhudi.txn.transaction import resolve_options

    opts = {C.RECORDKEY_FIELD: "k", C.PARTITIONPATH_FIELD: "p", C.ORDERING_FIELDS: "ts",
            C.HIVE_STYLE_PARTITIONING: "true", C.TABLE_NAME: "trips"}
    schema = pa.schema([("k", pa.string()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])
    t = Table.create(str(tmp_path / "t"), schema, opts)
    same = {**opts, C.HIVE_STYLE_PARTITIONING: "TRUE", C.URL_ENCODE_PARTITIONING: "false",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.write.record.merge.mode": "event_time_ordering",
            C.KEYGENERATOR_TYPE: "simple_avro", C.KEYGENERATOR_CLASS: "org.apache.hudi.keygen.SimpleKeyGenerator",
            C.TABLE_NAME: "Trips"}
    resolved = resolve_options(t.config, same, t.timeline())
    assert resolved[C.HIVE_STYLE_PARTITIONING] == "true" and resolved[C.ORDERING_FIELDS] == "ts"
    for key, value in [(C.HIVE_STYLE_PARTITIONING, "false"), (C.URL_ENCODE_PARTITIONING, "true"),
                       (C.ORDERING_FIELDS, "v"), ("hoodie.datasource.write.precombine.field", "v"),
                       (C.RECORD_MERGE_MODE, "COMMIT_TIME_ORDERING"), ("hoodie.write.record.merge.mode", "COMMIT_TIME_ORDERING"),
                       (C.KEYGENERATOR_TYPE, "COMPLEX"), (C.TABLE_NAME, "other"), (C.RECORDKEY_FIELD, "v"),
                       (C.PARTITIONPATH_FIELD, "v"), (C.WRITE_TABLE_VERSION, "8"), ("hoodie.table.version", "8")]:
        with pytest.raises(ConfigError, match=f"option {re.escape(key)}='{value}' does not match the table's"):
            resolve_options(t.config, {**opts, key: value}, t.timeline())
    with pytest.raises(ConfigError, match=re.escape("keygenerator.class='org.apache.hudi.keygen.ComplexKeyGenerator' "
                                                    "does not match the table's key generator, SIMPLE")):
        resolve_options(t.config, {**opts, C.KEYGENERATOR_CLASS: "org.apache.hudi.keygen.ComplexKeyGenerator"},
                        t.timeline())
    with pytest.raises(ConfigError, match=re.escape("version='8': pyhudi creates tables of version 9 only")):
        Table.create(str(tmp_path / "v8"), schema, {**opts, C.WRITE_TABLE_VERSION: "8"})
    assert not (tmp_path / "v8").exists()
