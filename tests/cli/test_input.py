"""``pyhudi write --input``: files, directories and globs of parquet, CSV and JSON, read in Spark tasks.

Spark's readers where Spark reaches the path; pyhudi's storage in tasks where it does not (forced here with
``via_storage=True`` on local files, the same code an ``s3://...?endpoint_override=`` URI takes). CSV and JSON
keep the types and values pyarrow's readers gave when the CLI read the input on the driver (compared with
``spark.createDataFrame(pyarrow.csv.read_csv(...))``, the old path)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.json as pjson
import pyarrow.parquet as pq
import pytest

from pyhudi.errors import InvalidInputError
from pyhudi.spark.input import read_errors, read_input, spark_reaches

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.string()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.float64())])
CSV = (
    "id,p,ts,v,flag,day,s\n"
    "k1,a,1,1.5,true,2024-01-01,x\n"
    "k2,b,,NaN,false,2024-01-02,\n"
    'k3,a,NA,2,,,""\n'
    "k4,b,4,NULL,true,2024-01-04,NA\n"
)
JSON_ROWS = [
    {"id": "k1", "n": 1, "f": 1.5, "t": "2024-01-01 10:00:00", "o": {"b": 1, "a": "x"}, "l": [1, 2]},
    {"id": "k2", "n": None, "f": 2, "o": None},
]


def _table(n: int, start: int = 0) -> pa.Table:
    return pa.Table.from_pylist(
        [{"id": f"k{i:03d}", "p": "ab"[i % 2], "ts": i, "v": i / 2} for i in range(start, start + n)], schema=SCHEMA
    )


def _rows(df: Any) -> list[tuple[Any, ...]]:
    with read_errors():
        return sorted((tuple(r) for r in df.collect()), key=repr)


def _old_way(spark: Any, table: pa.Table) -> tuple[Any, list[tuple[Any, ...]]]:
    df = spark.createDataFrame(table)
    return df.schema, _rows(df)


def _plan(df: Any) -> str:
    return str(df._jdf.queryExecution().logical().toString())


def test_directory_written_by_spark_is_a_file_scan(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = str(tmp_path / "out")
    spark.createDataFrame(_table(40)).repartition(3).write.parquet(out)
    assert (tmp_path / "out" / "_SUCCESS").exists()
    df = read_input(spark, out)
    plan = _plan(df)
    assert "LocalRelation" not in plan and "Relation" in plan and "parquet" in plan, plan
    assert df.schema == spark.createDataFrame(_table(1)).schema
    assert _rows(df) == _rows(spark.createDataFrame(_table(40)))


@pytest.mark.parametrize("via_storage", [False, True], ids=["spark", "storage"])
def test_files_in_plain_sub_folders_are_read(spark, tmp_path: Path, via_storage: bool) -> None:  # type: ignore[no-untyped-def]
    """A directory whose data files lie at its top and in sub-folders that are not partition folders is read whole
    (Spark's listing of the directory skipped the sub-folders: their rows were not written, and the write reported
    the smaller count); partition folders beside other sub-folders are refused, naming one."""
    inp = tmp_path / "in"
    (inp / "sub" / "deeper").mkdir(parents=True)
    pq.write_table(_table(5), inp / "part-0.parquet")
    pq.write_table(_table(5, 5), inp / "sub" / "part-1.parquet")
    pq.write_table(_table(5, 10), inp / "sub" / "deeper" / "part-2.parquet")
    uri = f"file://{inp}" if via_storage else str(inp)
    assert [r[0] for r in _rows(read_input(spark, uri, via_storage=via_storage))] == [f"k{i:03d}" for i in range(15)]
    csv = tmp_path / "csv"
    (csv / "more").mkdir(parents=True)
    pcsv.write_csv(_table(2), csv / "a.csv")
    pcsv.write_csv(_table(2, 2), csv / "more" / "b.csv")
    assert len(_rows(read_input(spark, str(csv)))) == 4
    (inp / "p=x").mkdir()
    pq.write_table(_table(5, 20), inp / "p=x" / "part-3.parquet")
    with pytest.raises(InvalidInputError, match=r"mixes partition folders \(name=value\) with other sub-folders"):
        read_input(spark, str(inp))


def test_glob_reads_matching_files_only(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pq.write_table(_table(5), tmp_path / "a1.parquet")
    pq.write_table(_table(5, 5), tmp_path / "a2.parquet")
    pq.write_table(_table(5, 10), tmp_path / "b.parquet")
    (tmp_path / "notes.txt").write_text("not records")
    df = read_input(spark, str(tmp_path / "a*.parquet"))
    assert [r[0] for r in _rows(df)] == [f"k{i:03d}" for i in range(10)]
    df = read_input(spark, str(tmp_path / "{a1,b}.parquet"))
    assert [r[0] for r in _rows(df)] == [f"k{i:03d}" for i in [*range(5), *range(10, 15)]]
    # through Hadoop's file system (a file: URI), as an hdfs: path is
    df = read_input(spark, f"file://{tmp_path}/a?.parquet")
    assert "LocalRelation" not in _plan(df)
    assert len(_rows(df)) == 10


@pytest.mark.parametrize("via_storage", [False, True], ids=["spark", "storage"])
def test_csv_keeps_pyarrow_types_and_values(spark, tmp_path: Path, via_storage: bool) -> None:  # type: ignore[no-untyped-def]
    d = tmp_path / "csv"
    d.mkdir()
    (d / "part-0.csv").write_text(CSV)
    (d / "part-1.csv").write_text("id,p,ts,v,flag,day,s\nk5,a,5,5.5,false,2024-01-05,y\n")
    (d / "_SUCCESS").write_text("")
    (d / ".part-0.csv.crc").write_text("x")
    old_schema, old_rows = _old_way(spark, pa.concat_tables([
        pcsv.read_csv(d / "part-0.csv"),
        pcsv.read_csv(d / "part-1.csv", convert_options=pcsv.ConvertOptions(
            column_types=pcsv.read_csv(d / "part-0.csv").schema)),
    ]))
    df = read_input(spark, str(d), via_storage=via_storage)
    assert df.schema == old_schema
    assert [f.dataType.simpleString() for f in df.schema.fields] == [
        "string", "string", "bigint", "double", "boolean", "date", "string"]
    assert _rows(df) == old_rows
    k2 = next(r for r in old_rows if r[0] == "k2")
    assert k2[2] is None and k2[3] is None and k2[6] == ""  # empty int, NaN double: null; empty string: ""


@pytest.mark.parametrize("via_storage", [False, True], ids=["spark", "storage"])
def test_json_lines_keep_pyarrow_types(spark, tmp_path: Path, via_storage: bool) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "rows.json"
    f.write_text("".join(json.dumps(r) + "\n" for r in JSON_ROWS))
    old_schema, old_rows = _old_way(spark, pjson.read_json(f))
    df = read_input(spark, str(f), via_storage=via_storage)
    assert df.schema == old_schema
    assert df.schema.names == ["id", "n", "f", "t", "o", "l"]  # the file's order, not Spark's sorted one
    assert _rows(df) == old_rows


def test_storage_path_reads_in_tasks(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = str(tmp_path / "out")
    spark.createDataFrame(_table(30)).repartition(3).write.parquet(out)
    df = read_input(spark, out, via_storage=True)
    plan = _plan(df)
    assert "MapInArrow" in plan, plan
    # the only local data is the list of paths, never a record
    assert plan.count("LocalRelation") == 1 and "LocalRelation [path#" in plan, plan
    assert _rows(df) == _rows(spark.createDataFrame(_table(30)))


def test_format_option_and_extensionless_parquet(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "data").write_text(CSV)
    assert read_input(spark, str(tmp_path / "data"), "csv").count() == 4
    pq.write_table(_table(3), tmp_path / "records")  # no extension: parquet by its magic bytes, as before
    assert read_input(spark, str(tmp_path / "records")).count() == 3


def test_where_spark_reaches(spark) -> None:  # type: ignore[no-untyped-def]
    assert spark_reaches(spark, "/tmp/x") and spark_reaches(spark, "file:///tmp/x")
    assert spark_reaches(spark, "hdfs://namenode:8020/x")
    assert not spark_reaches(spark, "s3://bucket/x?endpoint_override=localhost:9000")
    s3a = True
    try:
        spark.sparkContext._jvm.java.lang.Class.forName("org.apache.hadoop.fs.s3a.S3AFileSystem")  # type: ignore[union-attr]
    except Exception:
        s3a = False
    assert spark_reaches(spark, "s3a://bucket/x") == s3a
    assert not spark_reaches(spark, "nosuchscheme://x/y")


def test_errors_name_the_path(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidInputError, match=r"input file not found: .*missing\.parquet"):
        read_input(spark, str(tmp_path / "missing.parquet"))
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "_SUCCESS").write_text("")
    with pytest.raises(InvalidInputError, match=r"input directory has no data files: .*empty"):
        read_input(spark, str(empty))
    with pytest.raises(InvalidInputError, match=r"input glob matches no files: .*nothing\*"):
        read_input(spark, str(tmp_path / "nothing*"))
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "part-0.txt").write_text("a,b\n")
    with pytest.raises(InvalidInputError, match=r"cannot tell the format of .*part-0\.txt.*--input-format"):
        read_input(spark, str(odd))
    (tmp_path / "notes").write_text("plain text")
    with pytest.raises(InvalidInputError, match=r"cannot tell the format of input file .*notes"):
        read_input(spark, str(tmp_path / "notes"))
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    pq.write_table(_table(2), mixed / "a.parquet")
    (mixed / "b.csv").write_text("id\nk\n")
    with pytest.raises(InvalidInputError, match=r"input .*mixed mixes formats \(csv, parquet\)"):
        read_input(spark, str(mixed))
    with pytest.raises(InvalidInputError, match=r"unknown input format 'xml'"):
        read_input(spark, str(mixed), "xml")


@pytest.mark.parametrize("via_storage", [False, True], ids=["spark", "storage"])
def test_unreadable_files_are_named(spark, tmp_path: Path, via_storage: bool) -> None:  # type: ignore[no-untyped-def]
    d = tmp_path / "parts"
    d.mkdir()
    pq.write_table(_table(4), d / "part-0.parquet")
    (d / "part-1.parquet").write_bytes(b"PAR1 this is no parquet file")
    with pytest.raises(InvalidInputError, match=r"cannot read input file \S*part-1\.parquet"):
        _rows(read_input(spark, str(d), via_storage=via_storage))
    c = tmp_path / "csv"
    c.mkdir()
    (c / "a.csv").write_text("id,ts\nk1,1\nk2,2\n")  # the types come from the first file: ts is int64
    (c / "b.csv").write_text("id,ts\nk3,three\n")
    with pytest.raises(InvalidInputError, match=r"cannot read input file \S*b\.csv: .*three"):
        _rows(read_input(spark, str(c), via_storage=via_storage))


@pytest.mark.parametrize("via_storage", [False, True], ids=["spark", "storage"])
def test_columns_only_later_files_carry_are_never_dropped(spark, tmp_path: Path, via_storage: bool) -> None:  # type: ignore[no-untyped-def]
    # parquet: a later part file with one more column; the column reaches the DataFrame (the write then adds it
    # to the table: schema evolution) or the read fails naming the file, never a silent drop
    d = tmp_path / "pq"
    d.mkdir()
    pq.write_table(_table(3), d / "part-0.parquet")
    pq.write_table(_table(3, 3).append_column("extra", pa.array(["x"] * 3)), d / "part-1.parquet")
    if via_storage:
        with pytest.raises(InvalidInputError, match=r"part-1\.parquet.*extra"):
            _rows(read_input(spark, str(d), via_storage=True))
    else:
        df = read_input(spark, str(d))
        assert "extra" in df.schema.names
        assert sorted(r["extra"] for r in df.collect() if r["extra"] is not None) == ["x"] * 3
    # JSON lines: a field that first appears after the first MiB
    j = tmp_path / "late.json"
    filler = "".join(json.dumps({"id": f"k{i}", "n": i, "pad": "p" * 200}) + "\n" for i in range(6000))
    j.write_text(filler + json.dumps({"id": "late", "n": 1, "pad": "", "surprise": 7}) + "\n")
    with pytest.raises(InvalidInputError, match=r"surprise|late\.json"):
        _rows(read_input(spark, str(j), via_storage=via_storage))


def test_input_bytes_before_any_session(tmp_path: Path) -> None:
    from pyhudi.spark.input import input_bytes

    d = tmp_path / "in"
    d.mkdir()
    pq.write_table(_table(10), d / "part-0.parquet")
    pq.write_table(_table(20), d / "part-1.parquet")
    (d / "_SUCCESS").write_text("")  # skipped, as the read skips it
    sizes = [(d / f"part-{i}.parquet").stat().st_size for i in (0, 1)]
    assert input_bytes(str(d)) == sum(sizes)
    assert input_bytes(str(d / "part-1.parquet")) == sizes[1]
    assert input_bytes(str(d / "part-*.parquet")) == sum(sizes)
    # a plain path the read would refuse as it lists it is refused here, before any session exists
    with pytest.raises(InvalidInputError, match=r"input file not found: .*missing"):
        input_bytes(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidInputError, match=r"input directory has no data files: .*empty"):
        input_bytes(str(tmp_path / "empty"))
    assert input_bytes(f"file://{tmp_path}/missing") is None  # listed through Hadoop's file system: the read reports it
    assert input_bytes(f"file://{d}") == sum(sizes)
    assert input_bytes("s3://bucket/in/?endpoint_override=127.0.0.1:1") is None  # no listing of object stores here


def test_sub_folders_are_judged_on_paths_without_scheme_and_authority() -> None:
    """Hadoop's listing spells ``file:///x`` as ``file:/x`` and adds the name node to ``hdfs:///x``: sub-folders
    are found below the input's path however its files are spelled."""
    from pyhudi.spark.input import InputFiles, _nested_plain_folders, _path_part

    for p in ("file:///x/y", "file:/x/y", "hdfs://nn:8020/x/y", "hdfs:///x/y", "/x/y/", "/x//y"):
        assert _path_part(p) == "/x/y", p
    plain = InputFiles("file:///in", "parquet", "file:///in", ("file:/in/a.parquet", "file:/in/s/b.parquet"), "directory")
    assert _nested_plain_folders(plain)
    parts = InputFiles("hdfs:///in", "parquet", "hdfs:///in",
                       ("hdfs://nn:8020/in/p=1/a.parquet", "hdfs://nn:8020/in/p=2/b.parquet"), "directory")
    assert not _nested_plain_folders(parts)


def test_partition_folders_are_refused_where_spark_does_not_read_them(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A Spark job's partitioned output (``day=d1/part-0.parquet``, the column only in the folder name): Spark's
    readers add the column; read through pyhudi's storage (an object-store URI only pyarrow reaches) it would be
    lost, so that reader refuses the layout, naming the folder."""
    d = tmp_path / "in"
    for day in ("d1", "d2"):
        (d / f"day={day}").mkdir(parents=True)
        pq.write_table(_table(2), d / f"day={day}" / "part-0.parquet")
    assert {r[-1] for r in _rows(read_input(spark, str(d)))} == {"d1", "d2"}
    with pytest.raises(InvalidInputError, match=r"holds partition folders \('day=d1'\), whose name=value columns"):
        read_input(spark, f"file://{d}", via_storage=True)
    # files that hold the folders' column themselves are read as they are
    for day in ("d1", "d2"):
        pq.write_table(_table(2).append_column("day", pa.array([day] * 2)), d / f"day={day}" / "part-0.parquet")
    assert sorted(r[-1] for r in _rows(read_input(spark, f"file://{d}", via_storage=True))) == ["d1", "d1", "d2", "d2"]


def test_a_storage_path_naming_a_file_is_read_literally(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A URI's percent-escapes reach pyhudi's storage decoded: a path that names an existing file is that file even
    when its name holds pattern characters, never another file the pattern would match."""
    for folder, start in (("d[1]", 0), ("d1", 100)):
        (tmp_path / folder).mkdir()
        pq.write_table(_table(2, start), tmp_path / folder / "y.parquet")
    df = read_input(spark, f"file://{tmp_path}/d%5B1%5D/y.parquet", via_storage=True)
    assert [r[0] for r in _rows(df)] == ["k000", "k001"]
    # with no such file, the pattern matches as before
    assert [r[0] for r in _rows(read_input(spark, f"file://{tmp_path}/d%5B12%5D/y.parquet", via_storage=True))] == [
        "k100", "k101"]


def test_write_command_refuses_a_missing_input_before_starting_spark(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A local input that is not there (or an empty directory) is reported before a Spark session is asked for:
    the command ends in about a second instead of starting a JVM first."""
    from click.testing import CliRunner

    import pyhudi.spark.session as session
    from pyhudi.cli.main import main as cli_main

    def no_spark(*_a: object, **_k: object) -> None:
        raise AssertionError("get_spark was called")

    monkeypatch.setattr(session, "get_spark", no_spark)
    (tmp_path / "empty").mkdir()
    for name, message in (("missing.parquet", "input file not found"), ("empty", "input directory has no data files")):
        res = CliRunner().invoke(cli_main, ["write", str(tmp_path / "t"), "--input", str(tmp_path / name),
                                            "--record-key", "id", "--partition-field", "p"])
        assert res.exit_code == 1, res.output
        assert message in res.output, res.output
    assert not (tmp_path / "t").exists()


def test_integers_a_double_cannot_hold_are_refused(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """pyarrow infers a JSON or CSV column of integers past the int64 range as double, which holds integers
    exactly only up to 2**53: ids 18446744073709551611 and ...612 would become one key. Refused, naming the file,
    the column and a value (so is an integer past 2**53 among fractions); integers within int64 stay int64, and a
    column of fractions and integers a double holds stays a double."""
    big = tmp_path / "big.json"
    big.write_text('{"id": 18446744073709551611, "p": "x", "ts": 1}\n{"id": 18446744073709551612, "p": "x", "ts": 2}\n')
    with pytest.raises(InvalidInputError, match=r"big\.json: column 'id' holds integers such as 18446744073709551611 "
                                                r"that are read as doubles"):
        read_input(spark, str(big))
    csv = tmp_path / "big.csv"
    csv.write_text("id,p,v\n18446744073709551611,x,1.5\n2,x,2\n")
    with pytest.raises(InvalidInputError, match=r"big\.csv: column 'id' holds integers such as"):
        read_input(spark, str(csv))
    ok = tmp_path / "ok.json"
    ok.write_text('{"id": 9223372036854775807, "v": 1.5, "w": 12}\n{"id": 1, "v": 9007199254740992, "w": 0.5}\n')
    df = read_input(spark, str(ok))
    assert df.schema.simpleString() == "struct<id:bigint,v:double,w:double>"
    assert [r["id"] for r in df.collect()] == [9223372036854775807, 1]


def test_nanosecond_timestamps(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # what pandas writes for datetime64[ns] by default; Hudi's timestamps are microseconds. Spark reads no parquet
    # timestamp in nanoseconds: refused naming the file and the column, not with Spark's traceback. Read through
    # pyhudi's storage, whole microseconds are read as they are and a value with nanoseconds is refused.
    import datetime as dt

    d = tmp_path / "events"
    d.mkdir()
    at = pa.array([dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2, 0, 0, 0, 1)], pa.timestamp("ns"))
    pq.write_table(_table(2).append_column("at", at), d / "part-0.parquet")
    pq.write_table(_table(2, 2).append_column("at", at), d / "part-1.parquet")
    # a legacy INT96 timestamp (Spark reads it; pyarrow's schema calls it nanoseconds) is not the one named
    legacy = _table(1, 9).append_column("old", pa.array([dt.datetime(2020, 1, 1)], pa.timestamp("ns")))
    pq.write_table(legacy, d / "a.parquet", use_deprecated_int96_timestamps=True)
    with pytest.raises(InvalidInputError,
                       match=r"input file \S*part-\d\.parquet: column 'at' is a timestamp in nanoseconds.*microseconds"):
        _rows(read_input(spark, str(d)))
    (d / "a.parquet").unlink()
    got = _rows(read_input(spark, str(d), via_storage=True))
    assert sorted(r[-1].replace(tzinfo=None) for r in got) == sorted(at.to_pylist() * 2)
    late = pa.array([1_700_000_000_000_000_001], pa.timestamp("ns"))
    pq.write_table(_table(1, 4).append_column("at", late), d / "part-2.parquet")
    with pytest.raises(InvalidInputError, match=r"cannot read input file \S*part-2\.parquet: .*would lose data"):
        _rows(read_input(spark, str(d), via_storage=True))
