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
