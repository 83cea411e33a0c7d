"""The ``pyhudi`` command. Every command has text output and ``--json``; errors go through one handler."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from pyhudi import __version__
from pyhudi.cli.output import emit_json, redact_uri_secrets
from pyhudi.errors import PyHudiError


class _Cli(click.Group):
    """A group whose commands share one error handler: a PyHudiError becomes a clear message and exit 1."""

    def invoke(self, ctx: click.Context) -> Any:
        from pyhudi.spark import session
        from pyhudi.spark.session import ENV_QUIET_TASK_FAILURES

        # a failed Spark task is reported once, below, not also by Spark's logs with its stack traces (for the
        # sessions this command starts; a caller's environment gets its value back afterwards)
        set_here = ENV_QUIET_TASK_FAILURES not in os.environ
        if set_here:
            os.environ[ENV_QUIET_TASK_FAILURES] = "1"
        had_session = _active_session() is not None
        try:
            return super().invoke(ctx)
        except PyHudiError as e:
            if not had_session:  # the session this command started: its JVM logs nothing after the message
                session.quiet_jvm(_active_session())
            msg = redact_uri_secrets(str(e))
            if _wants_json(ctx):
                emit_json({"error": msg, "type": type(e).__name__})
            click.echo(f"error: {msg}", err=True)
            sys.exit(1)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as e:  # unexpected: its traceback follows on stderr (exit 1); --json still gets its object
            if _wants_json(ctx):
                first = (str(e).strip().splitlines() or [""])[0]
                emit_json({"error": redact_uri_secrets(f"{type(e).__name__}: {first}"), "type": type(e).__name__})
            raise
        finally:
            if set_here:
                os.environ.pop(ENV_QUIET_TASK_FAILURES, None)


def _active_session() -> Any:
    """The active Spark session, if PySpark is loaded and has one (never imports PySpark)."""
    if "pyspark.sql" not in sys.modules:
        return None
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


# the secret key of a URI's credentials: s3://ACCESS_KEY:SECRET_KEY@bucket/path
def _wants_json(ctx: click.Context) -> bool:
    return "--json" in sys.argv[1:]


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pyhudi")
def main() -> None:
    """pyhudi: Apache Hudi tables with a Record Level Index, for Python and PySpark."""


def _register() -> None:
    from pyhudi.cli import bench_cmd, hfile_cmd, service_cmd, table_cmd

    main.add_command(hfile_cmd.hfile)
    main.add_command(bench_cmd.bench)
    main.add_command(table_cmd.write)
    main.add_command(table_cmd.read)
    main.add_command(table_cmd.timeline)
    main.add_command(table_cmd.validate)
    main.add_command(table_cmd.lookup)
    main.add_command(table_cmd.index)
    main.add_command(service_cmd.rollback)
    main.add_command(service_cmd.clean)
    main.add_command(service_cmd.compact)
    main.add_command(service_cmd.archive)


_register()

if __name__ == "__main__":
    main()
