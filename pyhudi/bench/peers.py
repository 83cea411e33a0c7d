"""Peer table formats for the index benchmark, on the same data: Delta Lake (delta-rs, ``deltalake``) and Apache
Iceberg (``pyiceberg`` with a SQL catalog on SQLite). Both are optional (the ``bench`` extra) and imported only
here, lazily, with an install hint.

Each table is partitioned by ``dt`` like the Hudi table. An upsert is keyed on ``id``:

* Delta: ``DeltaTable.merge(source, "t.id = s.id").when_matched_update_all().when_not_matched_insert_all()``;
* Iceberg: ``Table.upsert(source, join_cols=["id"])`` (updates matched rows that changed, inserts the rest).

A measured upsert runs in a fresh process (:func:`main`, ``python -m pyhudi.bench.peers``) so its peak RSS
(``VmHWM``, the kernel's high-water mark of that process) and its read bytes (``rchar`` of /proc/self/io
across the upsert) belong to the upsert alone. Every upsert starts from the same table state: Delta tables are
cloned (data files hard-linked, the append-only log copied); an Iceberg table's state is its catalog's pointer
to a metadata file, so the SQLite catalog file is copied and an upsert on the copy only adds files.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sys
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq

PEERS = ("delta", "iceberg")
INSTALL_HINT = "install the benchmark extras: pip install -e '.[bench]' (or make bench)"
ICEBERG_NAMESPACE = "bench"
ICEBERG_TABLE = "rows"


class PeerUnavailable(RuntimeError):
    pass


def require(peer: str) -> None:
    """Import the peer's library or raise :class:`PeerUnavailable` with an install hint."""
    mod = {"delta": "deltalake", "iceberg": "pyiceberg.catalog.sql"}[peer]
    try:
        __import__(mod)
        if peer == "iceberg":
            __import__("sqlalchemy")
    except ImportError as e:
        raise PeerUnavailable(f"{peer}: {e.name or mod} is not installed; {INSTALL_HINT}") from e


def versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for p in ("deltalake", "pyiceberg"):
        try:
            out[p] = version(p)
        except PackageNotFoundError:
            out[p] = None
    return out


def store_result(result: dict[str, Any], out: str) -> None:
    """Record the machine and the peers' versions in a benchmark's ``result``, store it as JSON at ``out`` and
    print it on one line."""
    import json
    import os
    import platform
    from pathlib import Path

    result["machine"] = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    result["versions"] = versions()
    Path(out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


def _month_batches(input_dir: str) -> Iterator[pa.Table]:
    """The input rows a month at a time (grouped by partition, so each append writes one file per day)."""
    ds = pads.dataset(input_dir, format="parquet")
    for m in range(1, 13):
        lo, hi = f"2025/{m:02d}/", f"2025/{m + 1:02d}/" if m < 12 else "2026/"
        t = ds.to_table(filter=(pads.field("dt") >= lo) & (pads.field("dt") < hi))
        if t.num_rows:
            yield t.sort_by("dt")


# -- Delta ----------------------------------------------------------------------------------------------------
def delta_create(path: str, input_dir: str) -> dict[str, Any]:
    require("delta")
    from deltalake import DeltaTable, write_deltalake

    t0 = time.perf_counter()
    ds = pads.dataset(input_dir, format="parquet")
    write_deltalake(path, ds.scanner().to_reader(), partition_by=["dt"], mode="error")
    s = time.perf_counter() - t0
    files = DeltaTable(path).file_uris()
    return {"create_s": round(s, 2), "files": len(files)}


def delta_clone(src: str, dst: str) -> None:
    from pyhudi.bench.rli_bench import clone_table

    clone_table(src, dst)


def delta_upsert(path: str, source: pa.Table) -> dict[str, Any]:
    from deltalake import DeltaTable

    dt = DeltaTable(path)
    m = (
        dt.merge(source=source, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    return {"updated": int(m.get("num_target_rows_updated", 0)), "inserted": int(m.get("num_target_rows_inserted", 0)),
            "files_added": m.get("num_target_files_added"), "files_removed": m.get("num_target_files_removed")}


# -- Iceberg --------------------------------------------------------------------------------------------------
def _catalog(root: str, db: str = "catalog.db") -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog("bench", uri=f"sqlite:///{os.path.join(root, db)}",
                      warehouse=f"file://{os.path.join(root, 'warehouse')}")


def iceberg_create(root: str, input_dir: str) -> dict[str, Any]:
    require("iceberg")
    from pyiceberg.transforms import IdentityTransform

    os.makedirs(os.path.join(root, "warehouse"), exist_ok=True)
    t0 = time.perf_counter()
    cat = _catalog(root)
    cat.create_namespace(ICEBERG_NAMESPACE)
    schema = pq.read_schema(next(os.path.join(input_dir, f) for f in sorted(os.listdir(input_dir))))
    # the key is not nullable: an identifier field, so upsert needs no join_cols (they are given anyway)
    schema = pa.schema([f.with_nullable(False) if f.name == "id" else f for f in schema])
    tbl = cat.create_table(f"{ICEBERG_NAMESPACE}.{ICEBERG_TABLE}", schema=schema)
    dt_id = tbl.schema().find_field("dt").field_id
    with tbl.update_spec() as u:
        u.add_field("dt", IdentityTransform(), "dt")
    tbl = cat.load_table(f"{ICEBERG_NAMESPACE}.{ICEBERG_TABLE}")
    for batch in _month_batches(input_dir):
        tbl.append(batch.cast(schema))
    s = time.perf_counter() - t0
    files = len(tbl.inspect.files())
    return {"create_s": round(s, 2), "files": files, "partition_source_field_id": dt_id}


def iceberg_clone(src_root: str, dst_root: str) -> None:
    """The same table state: the catalog (the pointer to the current metadata file) copied. The table's files
    stay where its metadata says (absolute paths in the source's warehouse): an upsert adds files there and never
    changes or removes one, so the source's state is untouched."""
    os.makedirs(dst_root, exist_ok=True)
    shutil.copy2(os.path.join(src_root, "catalog.db"), os.path.join(dst_root, "catalog.db"))


def iceberg_upsert(root: str, source: pa.Table) -> dict[str, Any]:
    # the catalog's warehouse path is only used for new tables; the loaded table writes where its metadata says
    cat = _catalog(root)
    tbl = cat.load_table(f"{ICEBERG_NAMESPACE}.{ICEBERG_TABLE}")
    src = source.cast(tbl.schema().as_arrow())
    r = tbl.upsert(src, join_cols=["id"])
    return {"updated": int(r.rows_updated), "inserted": int(r.rows_inserted)}


# -- one measured upsert in this process ----------------------------------------------------------------------
def vm_hwm() -> int | None:
    """This process's peak RSS (``VmHWM``: its own address space's high-water mark; ``ru_maxrss`` would carry the
    parent's RSS at fork across the exec)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measured_upsert(peer: str, table: str, upsert_dir: str) -> dict[str, Any]:
    from pyhudi.bench.measure import self_rchar

    require(peer)
    source = pq.read_table(upsert_dir)
    rc0 = self_rchar()
    t0 = time.perf_counter()
    out = delta_upsert(table, source) if peer == "delta" else iceberg_upsert(table, source)
    s = time.perf_counter() - t0
    rc1 = self_rchar()
    out.update({
        "upsert_s": round(s, 3),
        "rchar_bytes": (rc1 - rc0) if rc0 is not None and rc1 is not None else None,
        "peak_rss_bytes": vm_hwm(),
    })
    return out


def main(argv: list[str] | None = None) -> None:
    """``python -m pyhudi.bench.peers PEER TABLE UPSERT_DIR``: one upsert; prints its figures as JSON."""
    a = sys.argv[1:] if argv is None else argv
    if len(a) != 3 or a[0] not in PEERS:
        raise SystemExit("usage: python -m pyhudi.bench.peers {delta|iceberg} TABLE UPSERT_DIR")
    print(json.dumps(measured_upsert(a[0], a[1], a[2])), flush=True)


if __name__ == "__main__":
    main()
