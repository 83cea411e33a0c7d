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


@bench.command("index")
@click.option("--quick", is_flag=True, help="One 200,000-row table, 10,000-row upserts, one run each (a few minutes).")
@click.option("--sizes", default=None, help="Table sizes in rows, comma-separated (default 1000000,5000000,20000000).")
@click.option("--upsert-rows", type=click.IntRange(min=10), default=None, help="Rows per upsert (default 100,000).")
@click.option("--repeat", type=click.IntRange(min=1), default=None, help="Upserts per index and workload (median; default 2).")
@click.option("--peer-repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Upserts per peer and workload (each in a fresh process).")
@click.option("--indexes", default=None, help="Index types, comma-separated (default: all five; unavailable ones are skipped).")
@click.option("--peers", default="delta,iceberg", show_default=True, help="Peers, comma-separated ('' for none).")
@click.option("--budget-min", type=float, default=None,
              help="Skip a size whose estimated time (from the previous size) exceeds the budget left (default 60; quick: none).")
@click.option("--peer-timeout-s", type=float, default=None,
              help="Limit for one peer step (table write or upsert; default 300, quick: 120); a peer that exceeds it "
                   "is reported as not finished and not run at larger sizes.")
@click.option("--driver-memory", default="6g", show_default=True,
              help="Spark driver heap for the writes (local mode: all the executors have); '' keeps Spark's 1g.")
@click.option("--workloads", default="uniform,late", show_default=True, help="Workloads, comma-separated.")
@click.option("--append-to", default=None,
              help="Add this run's sizes to the results NAME.json in the output directory (e.g. a size the budget "
                   "skipped, run on its own) and rewrite its reports, instead of writing results of its own.")
@click.option("--write-option", "write_option", multiple=True, metavar="KEY=VALUE",
              help="An extra option for every measured write (repeatable).")
@click.option("--no-bytes", is_flag=True, help="Do not count table bytes read through the storage layer.")
@click.option("--out-dir", type=click.Path(file_okay=False), default=None, help="Default: benchmarks/results.")
@click.option("--name", default=None, help="Result file name stem (default index_bench, quick: index_bench_quick).")
@click.option("--work-dir", type=click.Path(file_okay=False), default=None, help="Where tables are written (default: temp).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def bench_index(quick: bool, sizes: str | None, upsert_rows: int | None, repeat: int | None, peer_repeat: int,
                indexes: str | None, peers: str, budget_min: float | None, peer_timeout_s: float | None, driver_memory: str,
                workloads: str, append_to: str | None, write_option: tuple[str, ...], no_bytes: bool,
                out_dir: str | None, name: str | None, work_dir: str | None, as_json: bool) -> None:
    """Index types versus table size and versus Delta Lake / Iceberg upserts (Spark; takes a while)."""
    import os

    from pyhudi.bench import index_bench as ib
    from pyhudi.bench.index_report import write_reports
    from pyhudi.bench.measure import require_psutil

    if any("=" not in o for o in write_option):
        raise click.BadParameter("expected KEY=VALUE", param_hint="--write-option")
    try:
        require_psutil()
    except ImportError as e:
        raise click.ClickException(str(e)) from e

    here = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "benchmarks", "results")
    stem = name or ("index_bench_quick" if quick else "index_bench")
    size_list = [int(x) for x in sizes.split(",") if x.strip()] if sizes else list(ib.QUICK_SIZES if quick else ib.SIZES)
    res = ib.run_suite(
        size_list,
        upsert_rows=upsert_rows or (ib.QUICK_UPSERT_ROWS if quick else ib.UPSERT_ROWS),
        repeat=repeat or (1 if quick else 2),
        peer_repeat=peer_repeat,
        indexes=[x.strip().upper() for x in indexes.split(",")] if indexes else ib.ALL_INDEXES,
        peers=[x.strip() for x in peers.split(",") if x.strip()],
        budget_s=(budget_min * 60 if budget_min else None) if (quick or budget_min) else 3600.0,
        peer_timeout_s=peer_timeout_s or (120.0 if quick else 300.0),
        count_bytes=not no_bytes,
        driver_memory=driver_memory or None,
        workloads=[x.strip() for x in workloads.split(",") if x.strip()],
        write_options=dict(o.split("=", 1) for o in write_option),
        work_dir=work_dir,
        quick=quick,
        on_size_done=None if append_to else (lambda partial: write_reports(partial, out_dir or here, stem)),
    )
    if append_to:
        import json
        import shlex
        import sys

        with open(os.path.join(out_dir or here, f"{append_to}.json")) as f:
            old = json.load(f)
        argv = sys.argv[1:]
        argv = argv[2:] if argv[:2] == ["bench", "index"] else argv
        note = "measured in a separate run: " + shlex.join(["pyhudi", "bench", "index", *argv])
        res = ib.append_results(old, res, note)
        stem = append_to
    files = write_reports(res, out_dir or here, stem)
    if as_json:
        emit_json(res)
    else:
        click.echo(f"results: {files['json']}, {files['md']}" + "".join(f", {p}" for p in files.get("plots", [])))
        for w, per in res.get("targets", {}).items():
            for k, v in per.items():
                click.echo(f"{w}: {k}: {v}")
