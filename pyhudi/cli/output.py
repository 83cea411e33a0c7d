"""Printing results: text for people, one JSON document for programs."""

from __future__ import annotations

import base64
import json
import re
import sys
from typing import Any

import click


def emit_json(data: Any) -> None:
    """Print ``data`` as one line of JSON on stdout (the last line a command prints)."""
    sys.stdout.write(json.dumps(data, default=_default) + "\n")
    sys.stdout.flush()


def _default(o: Any) -> Any:
    import datetime
    import decimal

    if isinstance(o, bytes):
        return text_or_base64(o)[0]
    if isinstance(o, (datetime.datetime, datetime.date, datetime.time)):
        return o.isoformat()
    if isinstance(o, decimal.Decimal):
        return str(o)  # exact: a JSON number would go through a float
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(f"cannot serialise {type(o).__name__}")


def text_or_base64(b: bytes) -> tuple[str, bool]:
    """(text, is_text): UTF-8 text if the bytes decode, else Base64."""
    try:
        return b.decode("utf-8"), True
    except UnicodeDecodeError:
        return base64.b64encode(b).decode("ascii"), False


def echo_table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    """A plain aligned text table."""
    widths = {c: max([len(c)] + [len(_cell(r.get(c))) for r in rows]) for c in columns}
    click.echo("  ".join(c.ljust(widths[c]) for c in columns))
    for r in rows:
        click.echo("  ".join(_cell(r.get(c)).ljust(widths[c]) for c in columns))


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


# the secret runs to the credentials' '@': it may hold a '/' (left unencoded) or a quote; a port followed by a path
# (hdfs://namenode:8020/data/v@2) is no secret
_URI_SECRET = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:'\"]*:)(?!\d*/)[^@\s]+@")


def redact_uri_secrets(text: str) -> str:
    """``text`` with the secret key of a storage URI's credentials (``s3://KEY:SECRET@bucket/...``) hidden
    (messages name tables by the URI they were given)."""
    return _URI_SECRET.sub(r"\1***@", text)
