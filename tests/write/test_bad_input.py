"""Bad input is rejected with a clear error and writes nothing: no instant of any state on the timeline, no new
file anywhere under the table. Through the Python API (exception type and message) and the CLI (exit code 1,
the message on stderr names the column, option or file)."""

from __future__ import annotations

import itertools
import re
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pyhudi.errors import ConfigError, InvalidInputError, PyHudiError
from pyhudi.table.table import Table
from tests.support.robust import (
    CLI_KEYS,
    OPTS,
    SCHEMA,
    apply,
    expected,
    hudi_rs_read,
    rows,
    run_cli_concurrently,
    run_cli_here,
    table_rows,
    to_arrow,
    tree,
)

pytest.importorskip("hudi")
pytestmark = [pytest.mark.spark, pytest.mark.slow]  # Spark-heavy: make test runs it, make test-quick does not

GOOD = rows(range(6))


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory) -> str:  # type: ignore[no-untyped-def]
    base = str(tmp_path_factory.mktemp("bad_input") / "t")
    Table.create(base, SCHEMA, OPTS).write(spark.createDataFrame(to_arrow(GOOD)), "insert", OPTS)
    return base


def _without(batch: list[dict], col: str) -> pa.Table:
    return to_arrow(batch).drop_columns([col])


def _null_key() -> pa.Table:
    b = rows(range(10, 14))
    b[2]["id"] = None
    return to_arrow(b)


def _empty_key() -> pa.Table:
    b = rows(range(10, 14))
    b[1]["id"] = ""
    return to_arrow(b)


def _long_key() -> pa.Table:
    b = rows(range(10, 14))
    b[3]["id"] = "\u00e9" * 16384  # 32768 bytes in UTF-8: one more than an HFile key holds
    return to_arrow(b)


def _unresolvable_type() -> pa.Table:
    t = to_arrow(rows(range(10, 12)))
    return t.set_column(2, "ts", pa.array([True, False]))


def _changed_type() -> pa.Table:
    t = to_arrow(rows(range(10, 12)))
    return t.set_column(3, "v", pa.array(["1.0", "2.0"]))


def _null_ordering() -> pa.Table:
    b = rows(range(10, 14))
    b[2]["ts"] = None
    return to_arrow(b)


def _invalid_utf8(col: str) -> pa.Table:
    """Row 1's ``col`` holds bytes that are not UTF-8 (written by a writer that does not check; Spark passes them on)."""
    t = to_arrow(rows(range(10, 13)))
    values = [v.encode() for v in t.column(col).to_pylist()]
    values[1] = b"k\xff1"
    offsets = pa.array(list(itertools.accumulate((len(v) for v in values), initial=0)), pa.int32())
    raw = pa.Array.from_buffers(pa.string(), len(values), [None, offsets.buffers()[1], pa.py_buffer(b"".join(values))])
    return t.set_column(t.schema.get_field_index(col), col, raw)


def _with_column(field: pa.Field, values: list) -> pa.Table:
    return to_arrow(rows(range(10, 12))).append_column(field, pa.array(values, field.type))


NEW = rows(range(10, 12))
NULL_ORDERING = r"ordering field 'ts' \(hoodie\.table\.ordering\.fields\) is null for record key 'k012'"
# name -> (input table, operation, extra options, error type, message pattern)
CASES = {
    "null_record_key": (_null_key, "upsert", {}, InvalidInputError,
                        r"record key field 'id' is null in the input record \(id=None, p='a', ts=\d+, v=.*\)"),
    "null_record_key_insert": (_null_key, "insert", {}, InvalidInputError, r"record key field 'id' is null"),
    "null_record_key_bulk_insert": (_null_key, "bulk_insert", {}, InvalidInputError, r"record key field 'id' is null"),
    "empty_record_key_bulk_insert": (_empty_key, "bulk_insert", {}, InvalidInputError,
                                     r"record key field 'id' is empty"),
    **{f"invalid_utf8_{what}_{op}": (lambda col=col: _invalid_utf8(col), op, {}, InvalidInputError,
                                      rf"{what.replace('_', ' ')} field '{col}' is not valid UTF-8 text: "
                                      r"b'k\\xff1'")
       for what, col in (("record_key", "id"), ("partition_path", "p")) for op in ("upsert", "insert", "bulk_insert")},
    "record_key_too_long": (_long_key, "upsert", {}, InvalidInputError, r"record key \(fields \['id'\]\) is 32768 bytes"),
    "record_key_too_long_bulk_insert": (_long_key, "bulk_insert", {}, InvalidInputError,
                                        r"record key \(fields \['id'\]\) is 32768 bytes.*at most 32767"),
    "missing_record_key_column_bulk_insert": (lambda: _without(NEW, "id"), "bulk_insert", {}, InvalidInputError,
                                              r"lacks table column\(s\) id \(.*nothing was written$"),
    "missing_record_key_column": (lambda: _without(NEW, "id"), "upsert", {}, InvalidInputError,
                                  r"lacks table column\(s\) id \(.*nothing was written$"),
    "missing_record_key_column_delete": (lambda: _without(NEW, "id"), "delete", {}, InvalidInputError,
                                         r"no record key column 'id'"),
    "missing_partition_column": (lambda: _without(NEW, "p"), "upsert", {}, InvalidInputError,
                                 r"lacks table column\(s\) p \(.*nothing was written$"),
    "missing_ordering_column": (lambda: _without(NEW, "ts"), "upsert", {}, InvalidInputError,
                                r"lacks table column\(s\) ts \(.*nothing was written$"),
    # Hudi's writer reads the ordering value of every record it combines and refuses a null
    "null_ordering_value": (_null_ordering, "upsert", {}, InvalidInputError,
                            NULL_ORDERING + r": a write that combines records orders them by it.*nothing was written"),
    "null_ordering_value_insert_combined": (_null_ordering, "insert", {"hoodie.combine.before.insert": "true"},
                                            InvalidInputError, NULL_ORDERING),
    "missing_data_column": (lambda: _without(NEW, "v"), "upsert", {}, InvalidInputError,
                            r"lacks table column\(s\) v \(.*nothing was written$"),
    # no Avro promotion between the types (new columns and promotions: tests/write/test_schema_evolution.py)
    "unresolvable_type": (_unresolvable_type, "upsert", {}, InvalidInputError,
                          r"column 'ts' is bool in the input but int64 in the table: Avro schema resolution cannot"),
    "changed_type": (_changed_type, "upsert", {}, InvalidInputError,
                     r"column 'v' is string in the input but double in the table"),
    # a table's schema is Avro: names Avro refuses and maps of keys other than strings are not stored
    "illegal_avro_name": (lambda: _with_column(pa.field("a-b", pa.int32()), [1, 2]), "upsert", {},
                          InvalidInputError, r"column 'a-b' is not a legal Avro name.*nothing was written$"),
    "map_with_int_keys": (lambda: _with_column(pa.field("m", pa.map_(pa.int32(), pa.string())), [[(7, "v")], None]),
                          "upsert", {}, InvalidInputError,
                          r"column 'm' is a map with int32 keys, but Avro maps.*nothing was written$"),
    # a column of a type Avro has none for (Spark's NullType of F.lit(None), a day-time interval): refused before
    # the write begins, not when its commit records the schema
    "null_type_column": (lambda: _with_column(pa.field("nn", pa.null()), [None, None]), "upsert", {},
                         InvalidInputError, r"column 'nn' has type null, which Hudi tables cannot store.*nothing was "
                         r"written$"),
    "null_type_column_bulk_insert": (lambda: _with_column(pa.field("nn", pa.null()), [None, None]), "bulk_insert", {},
                                     InvalidInputError, r"column 'nn' has type null.*nothing was written$"),
    "interval_column_insert": (lambda: _with_column(pa.field("iv", pa.duration("us")), [1, 2]), "insert", {},
                               InvalidInputError, r"column 'iv' has type duration\[us\].*nothing was written$"),
    # Hudi's delete marker is a boolean: another type is refused on the driver, not by a write task
    "is_deleted_a_string": (lambda: _with_column(pa.field("_hoodie_is_deleted", pa.string()), ["true", "false"]),
                            "upsert", {}, InvalidInputError,
                            r"input column '_hoodie_is_deleted' is of type string, but it is Hudi's delete marker, "
                            r"a boolean.*nothing was written$"),
    "is_deleted_an_int_bulk_insert": (lambda: _with_column(pa.field("_hoodie_is_deleted", pa.int64()), [1, 0]),
                                      "bulk_insert", {}, InvalidInputError,
                                      r"input column '_hoodie_is_deleted' is of type bigint"),
    # the table has a record index (one location per key): a non-global index may not make a second record of a key
    "non_global_index_second_record": (lambda: to_arrow(rows([0, 10], p="b")), "upsert", {"hoodie.index.type": "SIMPLE"},
                                       InvalidInputError, r"key 'k000' is stored in partition 'a' \(input partition "
                                       r"'b'\); this non-global index would write a second record.*nothing was written$"),
    "non_global_bloom_second_record": (lambda: to_arrow(rows([1], p="a")), "upsert", {"hoodie.index.type": "BLOOM"},
                                       InvalidInputError, r"key 'k001' is stored in partition 'b' \(input partition"),
    "non_global_new_key_twice": (lambda: to_arrow(rows([20], p="a") + rows([20], p="b")), "upsert",
                                 {"hoodie.index.type": "SIMPLE"}, InvalidInputError,
                                 r"new key 'k020' arrives with partitions 'a', 'b'; this non-global index"),
    "unknown_index_type": (lambda: to_arrow(NEW), "upsert", {"hoodie.index.type": "NOPE"}, ConfigError,
                           r"hoodie\.index\.type has unknown value 'NOPE'"),
    "unknown_operation": (lambda: to_arrow(NEW), "merge", {}, ConfigError,
                          r"hoodie\.datasource\.write\.operation has unknown value 'merge'"),
    "unknown_operation_option": (lambda: to_arrow(NEW), "upsert", {"hoodie.datasource.write.operation": "merge"},
                                 ConfigError, r"hoodie\.datasource\.write\.operation has unknown value 'merge'"),
    "max_file_size_not_a_number": (lambda: to_arrow(NEW), "upsert", {"hoodie.parquet.max.file.size": "abc"},
                                   ConfigError, r"hoodie\.parquet\.max\.file\.size must be an integer, got 'abc'"),
    "record_key_option_differs": (lambda: to_arrow(NEW), "upsert", {"hoodie.datasource.write.recordkey.field": "v"},
                                  ConfigError, r"recordkey\.field='v' does not match the table's 'id'"),
    # read in the write tasks, or by the services after the commit: checked before the write starts all the same
    "parquet_block_size_zero": (lambda: to_arrow(NEW), "upsert", {"hoodie.parquet.block.size": "0"}, ConfigError,
                                r"option hoodie\.parquet\.block\.size must be >= 1, got 0"),
    "parquet_page_size_zero": (lambda: to_arrow(NEW), "upsert", {"hoodie.parquet.page.size": "0"}, ConfigError,
                               r"option hoodie\.parquet\.page\.size must be >= 1, got 0"),
    "keep_min_commits_zero": (lambda: to_arrow(NEW), "upsert", {"hoodie.keep.min.commits": "0"}, ConfigError,
                              r"option hoodie\.keep\.min\.commits must be >= 1, got 0"),
    "keep_max_commits_not_above_min": (lambda: to_arrow(NEW), "upsert",
                                       {"hoodie.keep.min.commits": "5", "hoodie.keep.max.commits": "5"}, ConfigError,
                                       r"option hoodie\.keep\.max\.commits \(5\) must be greater than"),
    "timeline_compaction_batch_size": (lambda: to_arrow(NEW), "upsert", {"hoodie.timeline.compaction.batch.size": "1"},
                                       ConfigError, r"option hoodie\.timeline\.compaction\.batch\.size must be >= 2"),
    "archive_automatic_not_a_boolean": (lambda: to_arrow(NEW), "upsert", {"hoodie.archive.automatic": "sometimes"},
                                        ConfigError, r"option hoodie\.archive\.automatic must be true or false"),
    "compact_inline_not_a_boolean": (lambda: to_arrow(NEW), "upsert", {"hoodie.compact.inline": "sometimes"},
                                     ConfigError, r"option hoodie\.compact\.inline must be true or false"),
    # the table's merge mode is used, but an unknown value is an error, not ignored
    "unknown_merge_mode": (lambda: to_arrow(NEW), "upsert", {"hoodie.record.merge.mode": "WHATEVER"}, ConfigError,
                           r"option hoodie\.record\.merge\.mode has unknown value 'WHATEVER'"),
    "unknown_hive_style_value": (lambda: to_arrow(NEW), "upsert",
                                 {"hoodie.datasource.write.hive_style_partitioning": "yes"}, ConfigError,
                                 r"option hoodie\.datasource\.write\.hive_style_partitioning must be true or false"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_api_rejects_and_writes_nothing(spark, table: str, case: str) -> None:  # type: ignore[no-untyped-def]
    make, operation, extra, err, pattern = CASES[case]
    before = tree(table)
    with pytest.raises(err) as info:
        Table.open(table).write(spark.createDataFrame(make()), operation, {**OPTS, **extra})
    assert isinstance(info.value, PyHudiError)
    assert re.search(pattern, str(info.value)), str(info.value)
    assert tree(table) == before
    assert all(i.is_completed for i in Table.open(table).timeline())
    model: dict = {}
    apply(model, "insert", GOOD)
    assert table_rows(hudi_rs_read(table)) == expected(model)


@pytest.mark.parametrize("operation", ["upsert", "insert", "bulk_insert"])
def test_null_ordering_values_into_merge_on_read(spark, tmp_path: Path, operation: str) -> None:  # type: ignore[no-untyped-def]
    """A merge-on-read table's readers order a file slice's records by the ordering field, and cannot order a null
    (Java's Integer 0) against a long: every write refuses one, combined or not (an insert, a bulk insert whose
    keys are made in its tasks), and leaves the table as it was. An int ordering field's null is Integer 0 like
    its values: accepted, and a later update merges with it as hudi-rs reads it."""
    mor = {**OPTS, "hoodie.table.type": "MERGE_ON_READ"}
    base = str(tmp_path / "t")
    Table.create(base, SCHEMA, mor).write(spark.createDataFrame(to_arrow(GOOD)), "insert", mor)
    before = tree(base)
    with pytest.raises(InvalidInputError, match=NULL_ORDERING):
        Table.open(base).write(spark.createDataFrame(_null_ordering()), operation, mor)
    assert tree(base) == before
    model: dict = {}
    apply(model, "insert", GOOD)
    assert table_rows(hudi_rs_read(base)) == expected(model)

    ints = pa.schema([f if f.name != "ts" else pa.field("ts", pa.int32()) for f in SCHEMA])
    base = str(tmp_path / "ints")
    first = _null_ordering().cast(ints)
    Table.create(base, ints, mor).write(spark.createDataFrame(first), "insert", mor)  # not combined: no refusal
    update = to_arrow([{**r, "ts": 0, "v": -1.0} for r in first.to_pylist()]).cast(ints)
    Table.open(base).write(spark.createDataFrame(update), "upsert", mor)
    got = sorted((r["id"], r["ts"], r["v"]) for r in Table.open(base).to_arrow().select(["id", "ts", "v"]).to_pylist())
    # a stored 1 outranks the update's 0; a stored null is 0, a tie the later record wins
    assert got == sorted((r["id"], r["ts"], r["v"]) if r["ts"] is not None else (r["id"], 0, -1.0)
                         for r in first.to_pylist())
    theirs = hudi_rs_read(base).select(["id", "ts", "v"]).to_pylist()
    assert sorted((r["id"], r["ts"], r["v"]) for r in theirs) == got


@pytest.mark.parametrize("new_table", [False, True])
def test_variant_columns_are_refused(spark, table: str, tmp_path: Path, new_table: bool) -> None:  # type: ignore[no-untyped-def]
    """Hudi 1.1's tables have no variant type: a VARIANT column (here inside a struct) is refused, not stored as
    the struct of two binaries Arrow carries it as; neither a table nor an instant is made."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame(to_arrow(NEW)).withColumn("st", F.struct(F.parse_json(F.lit('{"a": 1}')).alias("j")))
    base = str(tmp_path / "new") if new_table else table
    before = None if new_table else tree(table)
    with pytest.raises(InvalidInputError, match=r"column 'st\.j' is of Spark type VARIANT.*nothing was written"):
        Table.for_dataframe(base, df, OPTS).write(df, "upsert", OPTS)
    if new_table:
        assert not Path(base).exists()
    else:
        assert tree(table) == before


@pytest.mark.parametrize("new_table", [False, True])
def test_repeated_columns_are_refused(spark, table: str, tmp_path: Path, new_table: bool) -> None:  # type: ignore[no-untyped-def]
    """A DataFrame may hold two columns (or struct fields) of one name, a table's schema cannot: the write, a delete
    too, is refused naming the column; nothing is written and no table is made."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame(to_arrow(NEW))
    cases = {
        "v": df.select("*", F.col("v").alias("v")),
        "st.x": df.withColumn("st", F.struct(F.lit(1).alias("x"), F.lit(2).alias("x"))),
    }
    base = str(tmp_path / "new") if new_table else table
    before = None if new_table else tree(table)
    for name, bad in cases.items():
        for operation in ["upsert"] if new_table else ["upsert", "delete"]:
            with pytest.raises(InvalidInputError, match=rf"column '{re.escape(name)}' appears twice.*nothing was written"):
                Table.for_dataframe(base, bad, OPTS).write(bad, operation, OPTS)
            if new_table:
                assert not Path(base).exists()
            else:
                assert tree(table) == before


def test_first_write_with_null_key_leaves_empty_timeline(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = str(tmp_path / "t")
    t = Table.create(base, SCHEMA, OPTS)
    before = tree(base)
    with pytest.raises(InvalidInputError, match="record key field 'id' is null"):
        t.write(spark.createDataFrame(_null_key()), "insert", OPTS)
    assert tree(base) == before
    assert list(Table.open(base).timeline()) == []


# -- CLI ------------------------------------------------------------------------------------------------------
# name -> (input table or None for a missing file, extra CLI arguments, pattern that stderr must match)
CLI_CASES = {
    "null_record_key": (_null_key, [], r"error: .*record key field 'id' is null"),
    "missing_record_key_column": (lambda: _without(NEW, "id"), [], r"error: .*lacks table column\(s\) id"),
    "unresolvable_type": (_unresolvable_type, [], r"error: .*column 'ts' is bool in the input but int64 in the table"),
    "missing_input_file": (None, [], r"error: input file not found: .*missing\.parquet"),
    "unknown_index_type": (lambda: to_arrow(NEW), ["--option", "hoodie.index.type=NOPE"],
                           r"error: option hoodie\.index\.type has unknown value 'NOPE'"),
    "max_file_size_not_a_number": (lambda: to_arrow(NEW), ["--option", "hoodie.parquet.max.file.size=abc"],
                                   r"error: option hoodie\.parquet\.max\.file\.size must be an integer"),
    # Spark resolves names ignoring case: it reads neither column
    "columns_differing_only_in_case": (lambda: to_arrow(NEW).append_column("V", pa.array([1.0, 2.0])), [],
                                       r"error: input file \S*columns_differing_only_in_case\.parquet: columns 'v' "
                                       r"and 'V' differ only in case"),
}

# CSV inputs: name -> (the file's text, pattern that stderr must match)
CSV_CASES = {
    "repeated_csv_header": ("id,p,ts,v,v\nk010,a,1,1.0,2.0\n",
                            r"error: input file \S*repeated_csv_header\.csv: column 'v' appears twice"),
}


# input directories: name -> pattern that stderr must match
DIR_CASES = {
    "empty_input_directory": r"error: input directory has no data files: .*empty_input_directory",
    # read in the write's first job: the file is named and nothing is written
    "unreadable_part_file": r"error: cannot read input file \S*unreadable_part_file/part-00001\.parquet",
}


# the CLI cases run as processes of their own: those that fail inside a Spark job, whose logs a process's stderr
# could repeat the error in; the others run in the test's process (the command decides them before any Spark job)
PROCESS_CASES = frozenset({"null_record_key", "unreadable_part_file", "new_table_null_key"})


def test_cli_rejects_and_writes_nothing(spark, table: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Every CLI case against the shared table (those of :data:`PROCESS_CASES` at once, each a process starting
    its own Spark): exit code 1, the message last and once, nothing written."""
    d = tmp_path
    before = tree(table)
    commands = {}
    for name, (make, extra, _pattern) in CLI_CASES.items():
        path = d / f"{name}.parquet"
        if make is not None:
            pq.write_table(make(), path)
        else:
            path = d / "missing.parquet"
        commands[name] = ["write", table, "--input", str(path), "--operation", "upsert", *CLI_KEYS, *extra]
    pq.write_table(to_arrow(NEW), d / "new.parquet")
    for name in DIR_CASES:  # directories as Spark jobs leave them
        (d / name).mkdir()
        (d / name / "_SUCCESS").write_text("")
        commands[name] = ["write", table, "--input", str(d / name), "--operation", "upsert", *CLI_KEYS]
    pq.write_table(to_arrow(NEW), d / "unreadable_part_file" / "part-00000.parquet")
    for name, (text, _pattern) in CSV_CASES.items():
        (d / f"{name}.csv").write_text(text)
        commands[name] = ["write", table, "--input", str(d / f"{name}.csv"), "--operation", "upsert", *CLI_KEYS]
    (d / "unreadable_part_file" / "part-00001.parquet").write_bytes(b"PAR1 not a parquet file")
    fresh = d / "merge_target"
    commands["operation_option_merge"] = ["write", str(fresh), "--input", str(d / "new.parquet"), *CLI_KEYS,
                                          "--option", "hoodie.datasource.write.operation=merge"]
    pq.write_table(_null_key(), d / "null_key.parquet")
    for name, bad in {"new_table_wrong_key": [d / "new.parquet", "--record-key", "idd"],
                      "new_table_null_key": [d / "null_key.parquet", "--record-key", "id"]}.items():
        commands[name] = ["write", str(d / name), "--input", str(bad[0]), *bad[1:], "--partition-field", "p",
                          "--ordering-field", "ts"]
    results = run_cli_concurrently({k: v for k, v in commands.items() if k in PROCESS_CASES})
    results.update({k: run_cli_here(*v) for k, v in commands.items() if k not in PROCESS_CASES})
    assert tree(table) == before
    for name in ("new_table_wrong_key", "new_table_null_key"):  # the first write of a new table: no table is left
        assert results[name].returncode == 1 and not (d / name).exists(), (name, results[name].stderr[-2000:])

    problems = {}
    for case in [*CLI_CASES, *DIR_CASES, *CSV_CASES]:
        r: subprocess.CompletedProcess[str] = results[case]
        pattern = CLI_CASES[case][2] if case in CLI_CASES else DIR_CASES.get(case) or CSV_CASES[case][1]
        if r.returncode != 1:
            problems[case] = f"exit code {r.returncode}: {r.stderr[-3000:]}"
        elif not re.search(pattern, r.stderr):
            problems[case] = f"stderr does not match {pattern!r}: {r.stderr[-3000:]}"
        elif not r.stderr.strip().splitlines()[-1].startswith("error: "):  # the message comes last
            problems[case] = f"the error is not the last line: {r.stderr[-3000:]}"
        # reported once: not also by Spark's logs of the failed task (the null key fails inside a task)
        elif "Traceback" in r.stderr or "\tat org.apache" in r.stderr:
            problems[case] = f"a traceback: {r.stderr[-3000:]}"
    assert not problems, problems

    r = results["operation_option_merge"]  # an operation the CLI does not know, given as a hoodie option
    assert r.returncode == 1, (r.returncode, r.stdout[-500:])
    assert "hoodie.datasource.write.operation" in r.stderr
    assert not (fresh / ".hoodie").exists()


def test_a_complex_key_too_long_is_refused_by_a_bulk_insert_before_writing(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The COMPLEX key generator writes ``id:<value>``: a value of 32,765 bytes makes a key of 32,768, one more
    than the record index holds. A bulk insert, which makes its keys in its write tasks, finds it in its planning
    counts and writes nothing."""
    opts = {**OPTS, "hoodie.datasource.write.keygenerator.type": "COMPLEX"}
    base = str(tmp_path / "t")
    Table.create(base, SCHEMA, opts)
    before = tree(base)
    b = rows(range(10, 14))
    b[1]["id"] = "x" * 32765
    with pytest.raises(InvalidInputError, match=r"is 32768 bytes, starting 'id:xxx"):
        Table.open(base).write(spark.createDataFrame(to_arrow(b)), "bulk_insert", opts)
    assert tree(base) == before
    b[1]["id"] = "x" * 32764  # a key of 32,767 bytes is written
    Table.open(base).write(spark.createDataFrame(to_arrow(b)), "bulk_insert", opts)
    assert len(hudi_rs_read(base)) == 4


def test_a_failed_first_write_through_the_api_leaves_no_table(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``Table.for_dataframe(...).write(...)`` into a new path: a write that fails (a key field the input lacks, a
    null key found in a write task) removes the table it created, so the corrected write creates it anew with the
    corrected options. A table made by ``Table.create`` is the caller's and stays; so does a folder that was there."""
    df = spark.createDataFrame(to_arrow(GOOD))
    base = tmp_path / "new"
    with pytest.raises(InvalidInputError, match="idd"):
        Table.for_dataframe(str(base), df, {**OPTS, "hoodie.datasource.write.recordkey.field": "idd"}).write(
            df, "upsert", {**OPTS, "hoodie.datasource.write.recordkey.field": "idd"})
    assert not base.exists()
    (tmp_path / "kept").mkdir()
    with pytest.raises(InvalidInputError, match="null"):
        Table.for_dataframe(str(tmp_path / "kept"), spark.createDataFrame(_null_key()), OPTS).write(
            spark.createDataFrame(_null_key()), "upsert", OPTS)
    assert (tmp_path / "kept").exists() and not list((tmp_path / "kept").iterdir())
    Table.for_dataframe(str(base), df, OPTS).write(df, "upsert", OPTS)
    model: dict = {}
    apply(model, "upsert", GOOD)
    assert table_rows(hudi_rs_read(base)) == expected(model)

    created = tmp_path / "created"
    Table.create(str(created), SCHEMA, OPTS)
    with pytest.raises(InvalidInputError, match="null"):
        Table.open(str(created)).write(spark.createDataFrame(_null_key()), "upsert", OPTS)
    assert Table.exists(str(created))


def test_a_write_into_a_table_removed_meanwhile_is_abandoned(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Another process's failed first write removed the new table (its hoodie.properties) while this write ran:
    the write fails at commit instead of completing an instant in a folder without a table."""
    from pyhudi import faults

    base = tmp_path / "t"
    df = spark.createDataFrame(to_arrow(GOOD))
    Table.create(str(base), SCHEMA, OPTS)
    props = base / ".hoodie" / "hoodie.properties"

    def removed(point: str) -> None:
        props.rename(tmp_path / "props")

    with faults.inject("before_commit", removed), pytest.raises(PyHudiError, match="the table was removed"):
        Table.open(str(base)).write(df, "upsert", OPTS)
    assert not [f for f in (base / ".hoodie" / "timeline").iterdir() if f.name.endswith(".commit")]


def test_a_partition_inside_another_is_refused_without_the_metadata_table(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Hudi's readers that list storage (no metadata table) do not look inside a partition: a write that would put
    one partition inside another is refused, in one batch or against the table's partitions."""
    opts = {**OPTS, "hoodie.metadata.enable": "false"}
    base = str(tmp_path / "t")
    Table.create(base, SCHEMA, opts).write(spark.createDataFrame(to_arrow(rows(range(2), p="p0"))), "insert", opts)
    before = tree(base)
    for batch in (rows(range(2, 4), p="p0/x"), rows(range(2, 3), p="q") + rows(range(3, 4), p="q/x/y")):
        with pytest.raises(InvalidInputError, match=r"partition '(p0|q)/x.*' of .* would lie inside partition"):
            Table.open(base).write(spark.createDataFrame(to_arrow(batch)), "insert", opts)
        assert tree(base) == before
