"""``pyhudi write``, ``pyhudi read``, ``pyhudi timeline``: the table commands."""

from __future__ import annotations

import os
import posixpath
from typing import Any

import click

from pyhudi import config as C
from pyhudi.cli.options import parse_options
from pyhudi.cli.output import echo_table, emit_json, redact_uri_secrets
from pyhudi.errors import ConfigError, InvalidInputError
from pyhudi.table.capabilities import MOR_OPERATIONS


@click.command()
@click.argument("table")
@click.option(
    "--input",
    "input_path",
    required=True,
    help="Records to write: a file, a directory of part files (as Spark jobs write them; _SUCCESS and files "
    "starting with _ or . are skipped) or a glob, local or a URI. Parquet, CSV (with a header) or JSON lines, "
    "told by the extension (.parquet, .csv, .json/.jsonl/.ndjson, optionally .gz/.bz2) or --input-format. "
    "Read in Spark tasks, never on the driver.",
)
@click.option(
    "--input-format",
    type=click.Choice(["parquet", "csv", "json"]),
    default=None,
    help="The format of --input's files (default: from their extensions).",
)
@click.option("--operation", type=click.Choice(list(C.OPERATIONS)), default="upsert", show_default=True)
@click.option("--record-key", "record_key", required=True, help="Record key column(s), comma separated.")
@click.option("--partition-field", default="", help="Partition column(s), comma separated (none: unpartitioned).")
@click.option("--ordering-field", default="", help="Ordering (event time) column.")
@click.option(
    "--index-type",
    default=None,
    help="hoodie.index.type: SIMPLE, GLOBAL_SIMPLE, BLOOM, GLOBAL_BLOOM or RECORD_INDEX "
    "(default: RECORD_INDEX for a table that has one or a new table with the metadata table, else SIMPLE).",
)
@click.option("--table-name", default=None, help="Name of a table created by this write (an existing table's name may be repeated, not changed).")
@click.option("--option", "options", multiple=True, help="Any hoodie.* option as KEY=VALUE (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object as the last line.")
def write(
    table: str,
    input_path: str,
    input_format: str | None,
    operation: str,
    record_key: str,
    partition_field: str,
    ordering_field: str,
    index_type: str | None,
    table_name: str | None,
    options: tuple[str, ...],
    as_json: bool,
) -> None:
    """Write records from files into TABLE (created if the path holds none)."""
    from pyhudi.spark.session import get_spark
    from pyhudi.table.table import Table

    opts = parse_options(options)
    opts[C.RECORDKEY_FIELD] = record_key
    opts[C.PARTITIONPATH_FIELD] = partition_field
    if ordering_field:
        opts[C.ORDERING_FIELDS] = ordering_field
    if index_type:
        opts[C.INDEX_TYPE] = index_type
    if table_name:
        opts[C.TABLE_NAME] = table_name
    given = opts.get(C.OPERATION)
    if given is not None and given.strip().lower() != operation:
        raise ConfigError(
            f"option {C.OPERATION}={given!r} conflicts with --operation {operation}"
            + ("" if given.strip().lower() in C.OPERATIONS else f" (known operations: {', '.join(C.OPERATIONS)})")
        )
    opts[C.OPERATION] = operation
    C.WriteConfig.from_options(opts)  # reject bad options before starting Spark
    if Table.exists(table):  # a table pyhudi cannot write is refused before Spark starts
        Table.open(table).check_writable(f"a write ({operation})", mor_supported=operation in MOR_OPERATIONS)
    from pyhudi.spark.input import input_bytes, read_errors, read_input
    from pyhudi.spark.java import SHORT_JOB_INPUT_BYTES

    size = input_bytes(input_path, input_format)
    # a write reads no table through the data source; a small input makes a short job (the JVM's client compiler)
    spark = get_spark(data_source=False, short_job=size is not None and size <= SHORT_JOB_INPUT_BYTES)

    df = read_input(spark, input_path, input_format)  # read in Spark tasks, never on the driver
    t = Table.for_dataframe(table, df, opts)  # a new table that the write fails to write into is removed again
    with read_errors():  # an input file that fails to read in the write's first job is named
        result = t.write(df, operation=operation, options=opts, progress=not as_json)
    d = result.to_dict()
    if as_json:
        emit_json(d)
    else:
        click.echo(
            f"{operation} committed at instant {d['instant']}: {d['inserted']} inserted, {d['updated']} updated, "
            f"{d['deleted']} deleted; {d['files_written']} file(s) in {d['partitions']} partition(s); "
            f"{d['timings_s'].get('total', 0):.1f}s"
        )
        if d["metadata_partitions_dropped"]:
            click.echo(
                "metadata partitions taken out of the table (indexes pyhudi does not maintain; no reader may use "
                f"them stale): {', '.join(d['metadata_partitions_dropped'])}"
            )


@click.command()
@click.argument("table")
@click.option("--as-of", default=None, help="Read the table as of this instant (time travel).")
@click.option("--read-optimized", is_flag=True, help="Base files only (Hudi's read-optimized query: log files of "
              "merge-on-read tables are not read).")
@click.option("--start", default=None, help="Incremental read: records written by the commits completed after this "
              "time (a completion time, yyyyMMddHHmmssSSS).")
@click.option("--end", default=None, help="Incremental read: ... and completed at or before this time.")
@click.option("--output", default=None, help="Write the rows to this parquet file instead of printing them.")
@click.option("--limit", type=click.IntRange(min=0), default=None, help="At most this many rows.")
@click.option("--key", "keys", multiple=True, help="Only these record keys (read via the record index).")
@click.option("--json", "as_json", is_flag=True, help="Print rows as JSON lines.")
def read(
    table: str, as_of: str | None, read_optimized: bool, start: str | None, end: str | None, output: str | None,
    limit: int | None, keys: tuple[str, ...], as_json: bool,
) -> None:
    """Read TABLE's latest snapshot (file slices merged: base and log files), as of an instant, read-optimized
    (base files only), or incrementally (--start [--end])."""
    from pyhudi.table.table import Table

    t = Table.open(table)
    if keys and (as_of or read_optimized or start or end):
        raise InvalidInputError("--key reads the latest snapshot; it cannot be combined with --as-of, "
                                "--read-optimized, --start or --end")
    if (start or end) and (as_of or read_optimized):
        raise InvalidInputError("--start/--end (incremental read) cannot be combined with --as-of or --read-optimized")
    if end and not start:
        raise InvalidInputError("--end needs --start (an incremental read)")
    if keys:
        data = t.read_keys(list(keys))
    elif start:
        data = t.incremental_arrow(start, end)
    else:
        data = t.to_arrow(as_of=as_of, read_optimized=read_optimized)
    if limit is not None:
        data = data.slice(0, limit)
    if output:
        import pyarrow.parquet as pq

        from pyhudi.io.storage import Storage, is_under

        storage, p = Storage.from_uri(output)
        inside, base = posixpath.normpath(p), posixpath.normpath(t.base_path)
        if storage.is_local and t.storage.is_local:  # through symbolic links
            inside, base = os.path.realpath(p), os.path.realpath(base)
        if storage.scheme == t.storage.scheme and is_under(inside, base):
            raise InvalidInputError(f"--output {output} lies inside the table {table}: a read writes nothing into "
                                    "its table (the file could replace one of its data files)")
        with storage.open_output(p) as f:
            pq.write_table(data, f)
        shown = redact_uri_secrets(output)
        msg = {"rows": data.num_rows, "output": shown}
        emit_json(msg) if as_json else click.echo(f"wrote {data.num_rows} rows to {shown}")
        return
    rows = data.to_pylist()
    if as_json:
        for r in rows:
            emit_json(r)
    else:
        cols = data.column_names
        echo_table([{c: r[c] for c in cols} for r in rows], cols)
        click.echo(f"({data.num_rows} rows)")


@click.command()
@click.argument("table")
@click.option("--archived", is_flag=True, help="Also list the instants archived into the LSM timeline (marked).")
@click.option("--json", "as_json", is_flag=True)
def timeline(table: str, archived: bool, as_json: bool) -> None:
    """List TABLE's instants (requested time, action, state, completion time)."""
    from pyhudi.table.table import Table

    t = Table.open(table)
    if not archived:
        rows: list[dict[str, Any]] = [
            {"instant": i.requested_time, "action": i.action, "state": i.state.name, "completed": i.completion_time}
            for i in t.timeline()
        ]
        cols = ["instant", "action", "state", "completed"]
    else:
        full = t.full_timeline()
        rows = [
            {
                "instant": i.requested_time,
                "action": i.action,
                "state": i.state.name,
                "completed": i.completion_time,
                "archived": full.is_archived(i),
            }
            for i in full
        ]
        cols = ["instant", "action", "state", "completed", "archived"]
    if as_json:
        emit_json(rows)
    else:
        if archived:
            rows = [{**r, "archived": "archived" if r["archived"] else ""} for r in rows]
        echo_table(rows, cols)


@click.command()
@click.argument("table")
@click.option("--spark/--no-spark", "use_spark", default=None,
              help="Check the record index in Spark tasks (default: when its files take at least 64 MB, about 3M "
                   "keys; smaller indexes are checked here, without starting Spark).")
@click.option("--json", "as_json", is_flag=True)
def validate(table: str, use_spark: bool | None, as_json: bool) -> None:
    """Check TABLE's metadata table against the committed files on storage (exit 1 on any difference)."""
    from pyhudi.metadata.validate import SPARK_CHECK_MIN_INDEX_BYTES, record_index_bytes, validate_table
    from pyhudi.table.table import Table

    t = Table.open(table)
    if use_spark is None:
        use_spark = record_index_bytes(t) >= SPARK_CHECK_MIN_INDEX_BYTES
    spark = None
    if use_spark:
        from pyhudi.spark.session import get_spark

        spark = get_spark(data_source=False)
    rep = validate_table(t, spark=spark)
    d = rep.to_dict()
    if as_json:
        emit_json(d)
    else:
        click.echo(f"{redact_uri_secrets(table)}: {'ok' if rep.ok else 'DIFFERENCES FOUND'} ({d['partitions']} partitions, {d['files']} files)")
        for k in ("missing_in_metadata", "extra_in_metadata", "size_mismatch", "file_slices_differ", "problems"):
            for item in d[k]:
                click.echo(f"  {k}: {item}")
        ri = d.get("record_index")
        if ri is not None:
            click.echo(
                f"record index: {ri.get('entries')} entries in {ri.get('file_groups')} file groups; "
                f"{ri.get('missing_count', 0)} missing, {ri.get('extra_count', 0)} extra, {ri.get('wrong_count', 0)} wrong"
            )
            for k in ("missing", "extra", "wrong"):
                for item in ri.get(k, []):
                    click.echo(f"  record_index {k}: {item}")
            for item in ri.get("duplicate_keys", []):
                click.echo(f"  note: key in two file groups (inserted twice): {item}")
        cs = d.get("column_stats")
        if cs is not None:
            click.echo(f"column statistics: {cs['files']} latest files checked; {len(cs['missing'])} missing, "
                       f"{len(cs['wrong'])} wrong, {len(cs['partitions_wrong'])} partitions not bounding their files")
            for k in ("missing", "wrong", "partitions_wrong"):
                for item in cs[k]:
                    click.echo(f"  column_stats {k}: {item}")
    if not rep.ok:
        raise SystemExit(1)


@click.command()
@click.argument("table")
@click.argument("keys", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True)
def lookup(table: str, keys: tuple[str, ...], as_json: bool) -> None:
    """Where the record index says each KEY lives (partition, file id, instant)."""
    from pyhudi.table.table import Table
    from pyhudi.table.timeline import format_instant_time

    t = Table.open(table)
    res, zone = t.lookup(list(keys)), t.config.timeline_zone
    rows = [
        {
            "key": r["key"],
            "found": r["found"],
            "partition": r["partition"],
            "file_id": r["file_id"],
            "instant": format_instant_time(r["instant_ms"], zone) if r["instant_ms"] is not None else None,
        }
        for r in res.to_pylist()
    ]
    if as_json:
        emit_json(rows)
    else:
        echo_table(rows, ["key", "found", "partition", "file_id", "instant"])


@click.group()
def index() -> None:
    """The record index: build it, show its size."""


@index.command("build")
@click.argument("table")
@click.option("--file-groups", type=click.IntRange(min=1), default=None, help="N (default: estimated).")
@click.option("--async", "concurrent", is_flag=True,
              help="Build while other writers keep committing (indexing instant, catch-up of their commits).")
@click.option("--option", "options", multiple=True, help="hoodie.* option as KEY=VALUE (repeatable).")
@click.option("--json", "as_json", is_flag=True)
def index_build(table: str, file_groups: int | None, concurrent: bool, options: tuple[str, ...], as_json: bool) -> None:
    """Build TABLE's record index from its latest base files (listed by the files partition)."""
    from pyhudi.table.table import Table

    t = Table.open(table)
    t.check_writable("building the record index")
    if "record_index" in t.config.metadata_partitions:
        raise InvalidInputError(f"{table} already has a record index")
    n = t.build_record_index(file_groups, options=parse_options(options), concurrent=concurrent)
    stats = Table.open(table).record_index_stats()
    if as_json:
        emit_json({"file_groups": n, "async": concurrent, **stats})
    else:
        click.echo(f"record index built: {stats['entries']} entries in {n} file groups, {stats['bytes']} bytes")


@index.command("stats")
@click.argument("table")
@click.option("--json", "as_json", is_flag=True)
def index_stats(table: str, as_json: bool) -> None:
    """{file_groups, entries, bytes, bytes_per_entry} of TABLE's record index."""
    from pyhudi.table.table import Table

    stats = Table.open(table).record_index_stats()
    if as_json:
        emit_json(stats)
    else:
        for k, v in stats.items():
            click.echo(f"{k}: {v}")
