"""``pyhudi hfile``: inspect, query and write HFiles."""

from __future__ import annotations

import struct
from typing import Any

import click
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pyhudi.cli.output import echo_table, emit_json, text_or_base64
from pyhudi.errors import InvalidInputError
from pyhudi.hfile import HFileReader, write_hfile
from pyhudi.hfile.format import (
    FI_AVG_KEY_LEN,
    FI_AVG_VALUE_LEN,
    FI_CREATE_TIME,
    FI_KEY_VALUE_VERSION,
    FI_LAST_KEY,
    FI_MAX_MVCC_TS,
    FI_MAX_TAGS_LEN,
    row_of_key,
)
from pyhudi.io.compression import CODEC_NAMES, codec_id
from pyhudi.io.storage import Storage

_INT_KEYS = {FI_AVG_KEY_LEN, FI_AVG_VALUE_LEN, FI_KEY_VALUE_VERSION, FI_MAX_TAGS_LEN}
_LONG_KEYS = {FI_CREATE_TIME, FI_MAX_MVCC_TS}


@click.group()
def hfile() -> None:
    """Inspect, query and write HFile v3 files (the metadata table's file format)."""


def _decode_info(key: str, v: bytes) -> Any:
    if key in _INT_KEYS and len(v) == 4:
        return struct.unpack(">i", v)[0]
    if key in _LONG_KEYS and len(v) == 8:
        return struct.unpack(">q", v)[0]
    if key == FI_LAST_KEY:
        return text_or_base64(row_of_key(v))[0] if v else None
    return text_or_base64(v)[0]


def describe(r: HFileReader) -> dict[str, Any]:
    t = r.trailer
    return {
        "path": r.path,
        "file_size": r.file_size,
        "version": f"{t.major_version}.{t.minor_version}",
        "codec": CODEC_NAMES[t.compression_codec],
        "entries": t.entry_count,
        "data_blocks": r.num_blocks,
        "index": {"levels": r.index_levels, "entries_per_level": r.index_level_sizes},
        "meta_blocks": r.meta_block_names(),
        "last_key": text_or_base64(r.last_key)[0] if r.last_key is not None else None,
        "trailer": {
            "file_info_offset": t.file_info_offset,
            "load_on_open_data_offset": t.load_on_open_data_offset,
            "uncompressed_data_index_size": t.uncompressed_data_index_size,
            "total_uncompressed_bytes": t.total_uncompressed_bytes,
            "data_index_count": t.data_index_count,
            "meta_index_count": t.meta_index_count,
            "entry_count": t.entry_count,
            "num_data_index_levels": t.num_data_index_levels,
            "first_data_block_offset": t.first_data_block_offset,
            "last_data_block_offset": t.last_data_block_offset,
            "comparator_class_name": t.comparator_class_name,
            "compression_codec": t.compression_codec,
        },
        "file_info": {k: _decode_info(k, v) for k, v in sorted(r.file_info.items())},
    }


@hfile.command()
@click.argument("file")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def dump(file: str, as_json: bool) -> None:
    """Show FILE's trailer, file info, index levels and block count."""
    with HFileReader.from_uri(file) as r:
        d = describe(r)
    if as_json:
        emit_json(d)
        return
    click.echo(f"{d['path']}: HFile v{d['version']}, {d['file_size']} bytes, codec {d['codec']}")
    click.echo(f"entries: {d['entries']}   data blocks: {d['data_blocks']}   last key: {d['last_key']}")
    lv = d["index"]
    click.echo(f"index: {lv['levels']} level(s), entries per level {lv['entries_per_level']}")
    click.echo(f"meta blocks: {', '.join(d['meta_blocks']) or '-'}")
    click.echo("trailer:")
    for k, v in d["trailer"].items():
        click.echo(f"  {k}: {v}")
    click.echo("file info:")
    for k, v in d["file_info"].items():
        s = str(v)
        click.echo(f"  {k}: {s if len(s) <= 100 else s[:97] + '...'}")


@hfile.command()
@click.argument("file")
@click.argument("keys", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of {key, value}.")
def get(file: str, keys: tuple[str, ...], as_json: bool) -> None:
    """Look KEYS up in FILE (one batch lookup)."""
    with HFileReader.from_uri(file) as r:
        res = r.lookup(list(keys))
    rows: list[dict[str, Any]] = []
    for k, v in zip(keys, res.column("value").to_pylist(), strict=True):
        if v is None:
            rows.append({"key": k, "value": None})
        else:
            text, ok = text_or_base64(v)
            rows.append({"key": k, "value": text} if ok else {"key": k, "value_base64": text})
    if as_json:
        emit_json(rows)
    else:
        echo_table([{"key": r["key"], "value": r.get("value", r.get("value_base64"))} for r in rows], ["key", "value"])


@hfile.command()
@click.argument("out")
@click.option("--input", "input_path", required=True, help="Parquet file with columns key (string), value (binary).")
@click.option("--codec", type=click.Choice(["gz", "none"]), default="gz", show_default=True)
@click.option("--block-size", type=click.IntRange(min=1), default=1 << 20, show_default=True, help="Bytes.")
@click.option("--json", "as_json", is_flag=True)
def write(out: str, input_path: str, codec: str, block_size: int, as_json: bool) -> None:
    """Write OUT from a parquet file of (key, value) rows; rows are sorted by key, duplicates refused."""
    storage, path = Storage.from_uri(input_path)
    with storage.open_input(path) as f:
        try:
            table = pq.read_table(f, columns=["key", "value"])
        except (KeyError, pa.ArrowInvalid) as e:
            raise InvalidInputError(f"{input_path}: needs columns 'key' (string) and 'value' (binary): {e}") from None
    keys = table.column("key").combine_chunks()
    values = table.column("value").combine_chunks()
    if keys.null_count:
        raise InvalidInputError(f"{input_path}: column 'key' has {keys.null_count} null value(s)")
    if values.null_count:
        raise InvalidInputError(f"{input_path}: column 'value' has {values.null_count} null value(s)")
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        values = values.cast(pa.binary())
    order = pc.sort_indices(keys.cast(pa.binary()) if pa.types.is_string(keys.type) else keys)
    keys, values = keys.take(order), values.take(order)
    out_storage, out_path = Storage.from_uri(out)
    trailer = write_hfile(out_storage, out_path, keys, values, codec=codec_id(codec), block_size=block_size)
    size = out_storage.status(out_path).size
    result = {"path": out_path, "entries": trailer.entry_count, "data_blocks": trailer.data_index_count, "bytes": size}
    if as_json:
        emit_json(result)
    else:
        click.echo(f"wrote {out_path}: {result['entries']} entries in {result['data_blocks']} blocks, {size} bytes")
