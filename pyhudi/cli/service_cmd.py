"""``pyhudi rollback``, ``pyhudi clean``, ``pyhudi compact`` and ``pyhudi archive``: the table services as commands
of their own."""

from __future__ import annotations

import click

from pyhudi.cli.options import parse_options
from pyhudi.cli.output import emit_json


@click.command()
@click.argument("table")
@click.argument("instant")
@click.option("--option", "options", multiple=True, help="Any hoodie.* option as KEY=VALUE (lock, heartbeat).")
@click.option("--json", "as_json", is_flag=True)
def rollback(table: str, instant: str, options: tuple[str, ...], as_json: bool) -> None:
    """Roll back the pending write INSTANT of TABLE (refused while its writer is live)."""
    from pyhudi.table.table import Table

    r = Table.open(table).rollback(instant, parse_options(options))
    d = {"rolled_back": r.rolled_back, "action": r.rolled_back_action, "rollback_instant": r.instant.requested_time,
         "files_deleted": len(r.deleted), "files_failed": len(r.failed)}
    if as_json:
        emit_json(d)
    else:
        click.echo(f"rolled back {r.rolled_back} ({r.rolled_back_action}) at {d['rollback_instant']}: "
                   f"{d['files_deleted']} file(s) deleted")


@click.command()
@click.argument("table")
@click.option("--option", "options", multiple=True,
              help="Any hoodie.* option as KEY=VALUE (hoodie.cleaner.commits.retained, lock, heartbeat).")
@click.option("--json", "as_json", is_flag=True)
def clean(table: str, options: tuple[str, ...], as_json: bool) -> None:
    """Roll back failed writes, then delete file versions no longer needed (KEEP_LATEST_COMMITS)."""
    from pyhudi.services.clean import read_clean_metadata
    from pyhudi.table.table import Table

    t = Table.open(table)
    inst = t.clean(parse_options(options))
    deleted = read_clean_metadata(t.timeline(), inst)["totalFilesDeleted"] if inst is not None else 0
    d = {"clean_instant": inst.requested_time if inst is not None else None, "files_deleted": deleted}
    if as_json:
        emit_json(d)
    elif inst is None:
        click.echo("nothing to clean")
    else:
        click.echo(f"cleaned at {inst.requested_time}: {deleted} file(s) deleted")


@click.command()
@click.argument("table")
@click.option("--option", "options", multiple=True,
              help="Any hoodie.* option as KEY=VALUE (parquet options, lock, heartbeat).")
@click.option("--json", "as_json", is_flag=True)
def compact(table: str, options: tuple[str, ...], as_json: bool) -> None:
    """Compact the merge-on-read TABLE: every file slice with log files becomes a new base file (a compaction that
    died is run again first)."""
    from pyhudi.table.table import Table

    done = Table.open(table).compact(parse_options(options))
    d = {"compaction_instants": [i.requested_time for i in done]}
    if as_json:
        emit_json(d)
    elif not done:
        click.echo("nothing to compact")
    else:
        click.echo(f"compacted at {', '.join(d['compaction_instants'])}")


@click.command()
@click.argument("table")
@click.option("--option", "options", multiple=True,
              help="Any hoodie.* option as KEY=VALUE (hoodie.keep.min.commits, hoodie.keep.max.commits, "
                   "hoodie.cleaner.commits.retained, hoodie.compact.inline.max.delta.commits, lock, ...).")
@click.option("--json", "as_json", is_flag=True)
def archive(table: str, options: tuple[str, ...], as_json: bool) -> None:
    """Archive TABLE's old completed instants (and its metadata table's) into the LSM timeline, as every commit
    does with hoodie.archive.automatic."""
    from pyhudi.table.table import Table

    res = Table.open(table).archive(parse_options(options))
    d = res.to_dict()
    if as_json:
        emit_json(d)
        return
    for name, r in d.items():
        n = len(r["archived"])
        click.echo(f"{name}: {n} instant(s) archived" + (f" ({r['reason']})" if r["reason"] else ""))
