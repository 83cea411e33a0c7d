"""``pyhudi bench``: measurements that print JSON."""

from __future__ import annotations

import click

from pyhudi.cli.output import emit_json


@click.group()
def bench() -> None:
    """Benchmarks (figures as JSON with --json)."""


@bench.command("hfile")
@click.option("--entries", type=click.IntRange(min=1), default=1_000_000, show_default=True)
@click.option("--lookups", type=click.IntRange(min=1), default=100_000, show_default=True)
@click.option("--block-size", type=click.IntRange(min=1), default=None, help="Bytes (default 1 MiB).")
@click.option("--repeat", type=click.IntRange(min=1), default=5, show_default=True, help="Lookup runs (median).")
@click.option("--json", "as_json", is_flag=True)
def bench_hfile(entries: int, lookups: int, block_size: int | None, repeat: int, as_json: bool) -> None:
    """Write an N-entry GZ HFile of random UUID keys, then batch-look-up M present keys."""
    from pyhudi.bench.hfile_bench import run

    res = run(entries, lookups, block_size=block_size, repeat=repeat)
    if as_json:
        emit_json(res)
    else:
        for k, v in res.items():
            click.echo(f"{k}: {v}")


@bench.command("rli")
@click.option("--rows", type=click.IntRange(min=1000), default=None, help="Table rows (default 2,000,000).")
@click.option("--quick", is_flag=True, help="200,000 rows (unless --rows is given).")
@click.option("--upsert-rows", type=click.IntRange(min=2), default=100_000, show_default=True)
@click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True,
              help="Upserts per index (alternating; median reported).")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Also write the JSON here.")
@click.option("--json", "as_json", is_flag=True)
def bench_rli(rows: int | None, quick: bool, upsert_rows: int, repeat: int, out: str | None, as_json: bool) -> None:
    """Record index vs GLOBAL_SIMPLE tagging, index size, lookup cost model (Spark; takes a while)."""
    import json
    import platform

    from pyhudi.bench.rli_bench import DEFAULT_ROWS, QUICK_ROWS, run

    n = rows or (QUICK_ROWS if quick else DEFAULT_ROWS)
    res = run(n, upsert_rows_n=upsert_rows, repeat=repeat, log=lambda m: click.echo(m, err=True))
    res["machine"] = f"{platform.machine()}, {res['cpus']} cpus, Python {platform.python_version()}"
    if out:
        with open(out, "w") as f:
            f.write(json.dumps(res, indent=2) + "\n")
    if as_json:
        emit_json(res)
    else:
        for k, v in res["summary"].items():
            click.echo(f"{k}: {v}")
