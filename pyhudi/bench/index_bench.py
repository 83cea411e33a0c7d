"""Index benchmark suite: tagging and upsert cost of every index type against table size, with Delta Lake and
Iceberg on the same data and machine.

Per table size R (default 1M, 5M, 20M rows; sizes the time budget cannot fit are skipped, with the estimate that
ruled them out):

* data (:mod:`pyhudi.bench.rli_bench`'s generator): random UUID keys, ``YYYY/MM/DD`` partitions over 2025, rows
  of about 150 bytes, written by one ``bulk_insert`` (metadata table and record index on);
* workloads, U rows each: ``uniform`` (U/2 updates of distinct random live keys, U/2 new keys on random days)
  and ``late`` (the updates hit only the most recent 5% of the daily partitions, 18 days, and the new keys land
  there too: late-arriving data);
* per index type (RECORD_INDEX, GLOBAL_SIMPLE, GLOBAL_BLOOM, SIMPLE, BLOOM: those ``pyhudi.config.INDEX_TYPES``
  has; the others are reported as skipped): ``timings_s.tag``, the write's end-to-end time, table bytes read
  (all of them and while tagging), OS read bytes and the peak RSS of driver + JVM + Python workers (see
  :mod:`pyhudi.bench.measure`). Every measured upsert writes into a fresh clone of the same table (data files
  hard-linked, ``.hoodie`` copied), so each index starts from the same state; the index order rotates between
  repetitions; the JVM is garbage-collected before each;
* peers (:mod:`pyhudi.bench.peers`): the same input written to a Delta table (delta-rs) and an Iceberg table
  (pyiceberg, SQLite catalog), both partitioned by ``dt``; the same upserts as a keyed MERGE / ``upsert``, each in
  a fresh process from the same table state;
* a tagging profile of RECORD_INDEX and GLOBAL_SIMPLE on the base table: opening the record index, the batch
  lookup of the upsert's keys in one process, and reading every base file's keys, next to the Spark tag stage.

Each step runs in its own process (the Spark work of one size in one), reporting to the coordinator, which shows
progress, keeps the time budget and writes the JSON, the Markdown table and the plots (:mod:`.index_report`).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

SIZES = (1_000_000, 5_000_000, 20_000_000)
QUICK_SIZES = (200_000,)
UPSERT_ROWS = 100_000
QUICK_UPSERT_ROWS = 10_000
ALL_INDEXES = ("RECORD_INDEX", "GLOBAL_SIMPLE", "GLOBAL_BLOOM", "SIMPLE", "BLOOM")
WORKLOADS = ("uniform", "late")
DAYS = 365
RECENT_DAYS = round(DAYS * 0.05)  # 18 daily partitions
INPUT_CHUNK = 1_000_000
WARMUP_ROWS = 10_000
EVENT = "@@bench "
GLOBAL_INDEXES = ("RECORD_INDEX", "GLOBAL_SIMPLE", "GLOBAL_BLOOM")
# Spark's local-mode heap for the writes (executors run in the driver's JVM); Spark's own default, 1g, is too small
# for a 1M-row bulk_insert here (java.lang.OutOfMemoryError while caching the prepared records)
DRIVER_MEMORY = "6g"


def available_indexes(wanted: Sequence[str] = ALL_INDEXES) -> tuple[list[str], dict[str, str]]:
    """The wanted index types this build has (``pyhudi.config.INDEX_TYPES``), and a reason for each other."""
    from pyhudi import config

    have = set(config.INDEX_TYPES)
    ok = [ix for ix in wanted if ix in have]
    skipped = {ix: f"not available in this build (pyhudi.config.INDEX_TYPES = {', '.join(config.INDEX_TYPES)})"
               for ix in wanted if ix not in have}
    return ok, skipped


# -- child processes: data, Spark, peers -----------------------------------------------------------------------
def _emit(kind: str, **kw: Any) -> None:
    sys.stdout.write(EVENT + json.dumps({"event": kind, **kw}) + "\n")
    sys.stdout.flush()


def generate(spec: dict[str, Any]) -> dict[str, Any]:
    """Input rows (in 1M-row parquet files), the two upsert inputs and a small warm-up table's input."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pyhudi.bench.rli_bench import (
        day_partitions,
        random_uuid_keys,
        rows_table,
        upsert_rows,
        write_input,
    )

    rows, n, work = spec["rows"], spec["upsert_rows"], spec["work"]
    rng = np.random.default_rng(spec.get("seed", 7))
    t0 = time.perf_counter()
    keys = random_uuid_keys(rows, rng)
    days = rng.integers(0, DAYS, rows)
    dts = day_partitions(days)
    inp = os.path.join(work, "input")
    os.makedirs(inp, exist_ok=True)
    nbytes = 0
    for i in range(0, rows, INPUT_CHUNK):
        t = rows_table(keys[i:i + INPUT_CHUNK], dts[i:i + INPUT_CHUNK], 1, rng)
        nbytes += t.nbytes
        pq.write_table(t, os.path.join(inp, f"part-{i // INPUT_CHUNK:04d}.parquet"))
        _emit("progress", msg=f"input rows {min(rows, i + INPUT_CHUNK):,}/{rows:,}")
    write_input(upsert_rows(keys, dts, n, rng), os.path.join(work, "upsert-uniform"), files=2)

    first = DAYS - RECENT_DAYS
    live = np.flatnonzero(days >= first)
    n_upd = min(n // 2, int(len(live) * 0.9))
    pick = rng.choice(live, size=n_upd, replace=False)
    n_ins = n - n_upd
    late = rows_table(
        pa.concat_arrays([keys.take(pa.array(pick)), random_uuid_keys(n_ins, rng)]),
        pa.concat_arrays([day_partitions(days[pick]), day_partitions(rng.integers(first, DAYS, n_ins))]),
        2, rng)
    write_input(late, os.path.join(work, "upsert-late"), files=2)

    w = min(rows, WARMUP_ROWS)
    write_input(rows_table(keys[:w], dts[:w], 1, rng), os.path.join(work, "warmup-input"), files=1)
    write_input(upsert_rows(keys[:w], dts[:w], max(2, w // 10), rng), os.path.join(work, "warmup-upsert"), files=1)
    return {
        "gen_s": round(time.perf_counter() - t0, 2),
        "row_bytes_in_arrow": round(nbytes / rows, 1),
        "input_bytes_parquet": sum(os.path.getsize(os.path.join(inp, f)) for f in os.listdir(inp)),
        "workloads": {
            "uniform": {"updates": n // 2, "inserts": n - n // 2, "partitions": "all 365 days"},
            "late": {"updates": int(n_upd), "inserts": int(n_ins), "live_rows_in_recent_partitions": len(live),
                     "partitions": f"the most recent {RECENT_DAYS} days ({RECENT_DAYS / DAYS:.1%})"},
        },
    }


def _hudi_options(index: str | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
    from pyhudi.bench.rli_bench import BASE_OPTIONS

    o = {**BASE_OPTIONS, **(extra or {})}
    if index:
        o["hoodie.index.type"] = index
    return o


def _create_table(spark: Any, path: str, input_dir: str) -> tuple[Any, dict[str, Any]]:
    import pyarrow.parquet as pq

    from pyhudi.table.table import Table

    opts = _hudi_options()
    schema = pq.read_schema(os.path.join(input_dir, sorted(os.listdir(input_dir))[0]))
    t0 = time.perf_counter()
    table = Table.create(path, schema, opts)
    r = table.write(spark.read.parquet(input_dir), "bulk_insert", opts)
    out: dict[str, Any] = {"bulk_insert_s": round(time.perf_counter() - t0, 2), "timings_s": r.to_dict()["timings_s"]}
    table = Table.open(path)
    if "record_index" not in table.config.metadata_partitions:
        t0 = time.perf_counter()
        table.build_record_index()
        out["build_record_index_s"] = round(time.perf_counter() - t0, 2)
        table = Table.open(path)
    return table, out


def _gc_jvm(spark: Any) -> None:
    gc.collect()
    with contextlib.suppress(Exception):
        spark.sparkContext._jvm.java.lang.System.gc()


def measured_upsert(spark: Any, base: str, dst: str, upsert_dir: str, index: str, counter_dir: str | None,
                    write_options: dict[str, str] | None = None) -> dict[str, Any]:
    """One upsert into a fresh clone of ``base`` with ``index``: timings, bytes read, peak memory."""
    from pyhudi.bench.measure import (
        PeakRSS,
        StageProbe,
        counting_storage,
        diff_counts,
        table_bytes_read,
        tree_rchar,
    )
    from pyhudi.bench.rli_bench import clone_table
    from pyhudi.table.table import Table

    clone_table(base, dst)
    _gc_jvm(spark)
    probe = StageProbe(counter_dir)
    counting = counting_storage(counter_dir) if counter_dir else contextlib.nullcontext()
    try:
        with counting, probe.installed(), PeakRSS() as mem:
            b0 = table_bytes_read(counter_dir) if counter_dir else None
            rc0 = tree_rchar()
            t0 = time.perf_counter()
            res = Table.open(dst).write(spark.read.parquet(upsert_dir), "upsert", _hudi_options(index, write_options))
            wall = time.perf_counter() - t0
            rc1 = tree_rchar()
            b1 = table_bytes_read(counter_dir) if counter_dir else None
    finally:
        shutil.rmtree(dst, ignore_errors=True)
    d = res.to_dict()
    tag_window = probe.window("tag")
    out: dict[str, Any] = {
        "inserted": d["inserted"], "updated": d["updated"],
        "timings_s": d["timings_s"],
        "upsert_s": round(wall, 3),
        "table_bytes_read": diff_counts(b1, b0) if b1 is not None and b0 is not None else None,
        "table_bytes_read_tag": probe.bytes_of("tag"),
        "os_rchar_bytes": (rc1 - rc0) if rc0 is not None and rc1 is not None else None,
        "peak_rss_bytes": mem.peak,
        "peak_rss_parts": mem.peak_parts,
        "rss_before_bytes": mem.samples[0][1] if mem.samples else None,
        "peak_rss_tag_bytes": mem.peak_between(*tag_window) if tag_window else None,
    }
    return out


def tag_profile(table: Any, upsert_dir: str) -> dict[str, Any]:
    """Where RECORD_INDEX's and GLOBAL_SIMPLE's tagging time goes, measured outside Spark on the base table."""
    import pyarrow.parquet as pq

    from pyhudi.metadata.record_index import file_groups_of, record_index_lookup
    from pyhudi.table import base_file
    from pyhudi.table.schema import RECORD_KEY_COL

    keys = pq.read_table(upsert_dir, columns=["id"]).column("id").combine_chunks()
    t0 = time.perf_counter()
    lk = record_index_lookup(table.storage, table.base_path, table.timeline(), table.config)
    open_s = time.perf_counter() - t0
    assert lk is not None
    fgs = file_groups_of(keys, lk.num_file_groups)
    import numpy as np
    import pyarrow as pa

    per_group = []
    found = 0
    for g in range(lk.num_file_groups):
        ks = keys.filter(pa.array(np.asarray(fgs) == g))
        t0 = time.perf_counter()
        found += lk.lookup_group(g, ks).num_rows
        per_group.append(time.perf_counter() - t0)
    files = table.view().latest_base_files()
    t0 = time.perf_counter()
    n_keys = 0
    for f in files:
        n_keys += base_file.read_base_file(table.storage, f"{table.base_path}/{f.relative_path}",
                                           columns=[RECORD_KEY_COL]).num_rows
    scan_s = time.perf_counter() - t0
    return {
        "record_index": {
            "open_s": round(open_s, 3),
            "file_groups": lk.num_file_groups,
            "lookup_keys": len(keys), "found": found,
            "lookup_s_sum_of_groups": round(sum(per_group), 3),
            "lookup_s_slowest_group": round(max(per_group), 3),
            "note": "one process, groups one after another; the Spark tag stage runs the groups as parallel tasks "
                    "(2 cores), after the prepare stage (key generation, de-duplication) it also executes",
        },
        "global_simple": {
            "base_files": len(files), "keys_read": n_keys, "read_all_keys_s": round(scan_s, 3),
            "note": "every base file's record-key column read in one process; the Spark tag stage then joins "
                    "them with the incoming keys (a shuffle of all keys)",
        },
    }


def hudi_child(spec: dict[str, Any]) -> dict[str, Any]:
    """The Spark part of one size: bulk_insert, warm-up, the measured upserts, the tagging profile."""
    from pyhudi.spark.session import get_spark

    work, indexes, repeat = spec["work"], spec["indexes"], spec["repeat"]
    t_start = time.perf_counter()
    if spec.get("driver_memory") and "PYSPARK_SUBMIT_ARGS" not in os.environ:
        # local mode runs the executors in the driver's JVM: its heap is all Spark has (Spark's default: 1g)
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"--driver-memory {spec['driver_memory']} pyspark-shell"
    spark = get_spark()
    out: dict[str, Any] = {"spark_master": spark.sparkContext.master,
                           "spark_default_parallelism": spark.sparkContext.defaultParallelism,
                           "spark_driver_memory": spark.sparkContext.getConf().get("spark.driver.memory", "1g (default)")}
    _emit("progress", msg="warm-up (10k-row table, one upsert per index)")
    warm = os.path.join(work, "warmup-table")
    _create_table(spark, warm, os.path.join(work, "warmup-input"))
    for ix in indexes:
        measured_upsert(spark, warm, os.path.join(work, "warmup-clone"), os.path.join(work, "warmup-upsert"), ix,
                        spec.get("counter_dir"), spec.get("write_options"))
    shutil.rmtree(warm, ignore_errors=True)

    _emit("progress", msg=f"bulk_insert {spec['rows']:,} rows (metadata table, record index)")
    base = os.path.join(work, "hudi-base")
    table, build = _create_table(spark, base, os.path.join(work, "input"))
    files = table.view().latest_base_files()
    build["base_files"] = len(files)
    build["base_file_bytes"] = sum(f.size for f in files)
    build["record_index"] = table.record_index_stats()
    out["build"] = build
    _emit("done_step", step="bulk_insert", s=build["bulk_insert_s"])

    runs: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    out["failed_runs"] = failed
    for w in spec["workloads"]:
        for rep in range(repeat):
            order = indexes[rep % len(indexes):] + indexes[:rep % len(indexes)]
            for pos, ix in enumerate(order):
                _emit("progress", msg=f"upsert {w} rep {rep + 1}/{repeat} {ix}")
                try:
                    r = measured_upsert(spark, base, os.path.join(work, "clone"), os.path.join(work, f"upsert-{w}"),
                                        ix, spec.get("counter_dir"), spec.get("write_options"))
                except Exception as e:  # reported with the results; the other indexes go on
                    import traceback

                    sys.stderr.write(traceback.format_exc())
                    failed.append({"workload": w, "index": ix, "rep": rep, "error": f"{type(e).__name__}: {e}"[:2000]})
                    _emit("done_step", step=f"{w}/{ix}", failed=True)
                    continue
                r.update({"workload": w, "index": ix, "rep": rep, "position": pos})
                runs.append(r)
                _emit("done_step", step=f"{w}/{ix}", s=r["upsert_s"], tag_s=r["timings_s"]["tag"])
    out["runs"] = runs
    _emit("progress", msg="tagging profile")
    out["profile"] = {w: tag_profile(table, os.path.join(work, f"upsert-{w}")) for w in spec["workloads"]}
    shutil.rmtree(base, ignore_errors=True)
    out["child_s"] = round(time.perf_counter() - t_start, 1)
    return out


def peer_create_child(spec: dict[str, Any]) -> dict[str, Any]:
    from pyhudi.bench import peers

    if spec["peer"] == "delta":
        return peers.delta_create(spec["table"], spec["input"])
    return peers.iceberg_create(spec["table"], spec["input"])


def child_main(argv: Sequence[str]) -> None:
    """``python -m pyhudi.bench.index_bench _child ROLE SPEC_JSON``."""
    role, spec = argv[0], json.loads(argv[1])
    fn = {"gen": generate, "hudi": hudi_child, "peer-create": peer_create_child}[role]
    try:
        _emit("result", value=fn(spec))
    except Exception as e:
        import traceback

        _emit("error", error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc())
        raise SystemExit(1) from e


# -- coordinator ------------------------------------------------------------------------------------------------
class ChildFailed(RuntimeError):
    pass


class ChildTimeout(RuntimeError):
    pass


@dataclass
class Reporter:
    """Progress on the terminal (rich) or, without one, plain timestamped lines on stderr."""

    total_steps: int
    enabled: bool = True
    _t0: float = field(default_factory=time.perf_counter)
    _progress: Any = None
    _task: Any = None

    def __enter__(self) -> Reporter:
        if not self.enabled:
            return self
        from rich.console import Console

        console = Console(stderr=True)
        if console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(TextColumn("[bold]index bench"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), TextColumn("{task.description}"), console=console)
            self._progress.start()
            self._task = self._progress.add_task("starting", total=self.total_steps)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def say(self, msg: str) -> None:
        if not self.enabled:
            return
        if self._progress is not None:
            self._progress.update(self._task, description=msg)
        else:
            el = time.perf_counter() - self._t0
            sys.stderr.write(f"[{int(el) // 60:3d}:{int(el) % 60:02d}] {msg}\n")
            sys.stderr.flush()

    def advance(self, n: int = 1) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, n)

    def add_total(self, n: int) -> None:
        self.total_steps += n
        if self._progress is not None:
            self._progress.update(self._task, total=self.total_steps)


def run_child(args: list[str], log_path: str, reporter: Reporter, timeout_s: float | None,
              on_event: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run a child process, relaying its progress events; its result (the last ``result`` event)."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    with open(log_path, "a") as log:
        p = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=log, text=True, env=env,
                             start_new_session=True)
        deadline = time.monotonic() + timeout_s if timeout_s else None
        result: dict[str, Any] | None = None
        error: dict[str, Any] | None = None
        import selectors

        sel = selectors.DefaultSelector()
        assert p.stdout is not None
        sel.register(p.stdout, selectors.EVENT_READ)
        buf = ""
        try:
            while True:
                wait = None if deadline is None else max(0.0, deadline - time.monotonic())
                if deadline is not None and wait == 0:
                    raise ChildTimeout(f"did not finish within {timeout_s:.0f} s")
                if not sel.select(timeout=min(wait, 5.0) if wait is not None else 5.0):
                    continue
                chunk = p.stdout.readline()
                if not chunk:
                    break
                buf = chunk
                if not buf.startswith(EVENT):
                    log.write(buf)
                    continue
                ev = json.loads(buf[len(EVENT):])
                if ev["event"] == "progress":
                    reporter.say(ev["msg"])
                elif ev["event"] == "result":
                    result = ev["value"]
                elif ev["event"] == "error":
                    error = ev
                elif on_event is not None:
                    on_event(ev)
                else:
                    reporter.advance()
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, 9)
            p.wait()
            raise
        rc = p.wait()
    if error is not None or rc != 0 or result is None:
        msg = error["error"] if error else f"exit code {rc}"
        raise ChildFailed(f"{msg} (log: {log_path})")
    return result


def _child_args(role: str, spec: dict[str, Any]) -> list[str]:
    return ["-m", "pyhudi.bench.index_bench", "_child", role, json.dumps(spec)]


def _median(xs: Sequence[float]) -> float | None:
    return round(statistics.median(xs), 3) if xs else None


def summarize_hudi(runs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per workload and index: medians over the repetitions."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for r in runs:
        out.setdefault(r["workload"], {}).setdefault(r["index"], {"_runs": []})["_runs"].append(r)
    for per_ix in out.values():
        for ix, s in per_ix.items():
            rs = s.pop("_runs")
            tb = [r["table_bytes_read"]["total"] for r in rs if r.get("table_bytes_read")]
            tbt = [r["table_bytes_read_tag"]["total"] for r in rs if r.get("table_bytes_read_tag")]
            per_ix[ix] = {
                "runs": len(rs),
                "tag_s": _median([r["timings_s"]["tag"] for r in rs]),
                "tag_s_runs": [r["timings_s"]["tag"] for r in rs],
                "upsert_s": _median([r["upsert_s"] for r in rs]),
                "upsert_s_runs": [r["upsert_s"] for r in rs],
                "write_s": _median([r["timings_s"].get("write", 0.0) for r in rs]),
                "commit_s": _median([r["timings_s"].get("commit", 0.0) for r in rs]),
                "table_bytes_read": int(statistics.median(tb)) if tb else None,
                "table_bytes_read_tag": int(statistics.median(tbt)) if tbt else None,
                "os_rchar_bytes": int(statistics.median([r["os_rchar_bytes"] for r in rs if r["os_rchar_bytes"] is not None]))
                if any(r["os_rchar_bytes"] is not None for r in rs) else None,
                "peak_rss_bytes": max(r["peak_rss_bytes"] for r in rs),
                "peak_rss_tag_bytes": max((r["peak_rss_tag_bytes"] or 0) for r in rs) or None,
                "inserted_updated": sorted({(r["inserted"], r["updated"]) for r in rs}),
            }
            del ix
    return out


def summarize_peer(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for w in sorted({r["workload"] for r in runs}):
        rs = [r for r in runs if r["workload"] == w]
        out[w] = {
            "runs": len(rs),
            "upsert_s": _median([r["upsert_s"] for r in rs]),
            "upsert_s_runs": [r["upsert_s"] for r in rs],
            "os_rchar_bytes": int(statistics.median([r["rchar_bytes"] for r in rs if r["rchar_bytes"] is not None]))
            if any(r["rchar_bytes"] is not None for r in rs) else None,
            "peak_rss_bytes": max(r["peak_rss_bytes"] for r in rs),
            "inserted_updated": sorted({(r["inserted"], r["updated"]) for r in rs}),
        }
    return out


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpus": os.cpu_count(), "platform": platform.platform(), "machine": platform.machine(),
        "python": platform.python_version(),
    }
    with contextlib.suppress(Exception):
        import psutil

        info["memory_gib"] = round(psutil.virtual_memory().total / 2**30, 1)
        info["load_avg_at_start"] = [round(x, 2) for x in os.getloadavg()]
    with contextlib.suppress(Exception):
        here = os.path.dirname(os.path.abspath(__file__))
        git = ["git", "-C", here]
        info["git_commit"] = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                            timeout=10).stdout.strip()
        dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=all", "--", "../.."],
                               capture_output=True, text=True, timeout=10).stdout.split("\n")
        # the working tree's changes to the code that ran (modified files, and new ones under pyhudi/)
        info["git_changed_files"] = sorted(x[3:] for x in dirty if x.strip() and (
            not x.startswith("??") or x[3:].startswith("pyhudi/")))
    with contextlib.suppress(Exception):
        from importlib.metadata import version

        info["versions"] = {p: version(p) for p in ("pyspark", "pyarrow")}
        from pyhudi.bench.peers import versions

        info["versions"].update(versions())
    return info


def run_suite(
    sizes: Sequence[int] = SIZES,
    *,
    upsert_rows: int = UPSERT_ROWS,
    repeat: int = 2,
    indexes: Sequence[str] = ALL_INDEXES,
    peers: Sequence[str] = ("delta", "iceberg"),
    peer_repeat: int | None = 1,
    budget_s: float | None = 3600.0,
    peer_timeout_s: float = 300.0,
    count_bytes: bool = True,
    work_dir: str | None = None,
    quick: bool = False,
    progress: bool = True,
    seed: int = 7,
    on_size_done: Callable[[dict[str, Any]], Any] | None = None,
    driver_memory: str | None = DRIVER_MEMORY,
    workloads: Sequence[str] = WORKLOADS,
    write_options: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run the suite; the results as one JSON-able dict (see the module docstring). ``on_size_done`` gets the
    results so far after each size (to save them as the suite goes)."""
    from pyhudi.bench import peers as peers_mod

    t_suite = time.perf_counter()
    ixs, ix_skipped = available_indexes(indexes)
    if not ixs:
        raise ValueError(f"none of the index types {list(indexes)} is available: {ix_skipped}")
    peer_ok: list[str] = []
    peer_status: dict[str, dict[str, Any]] = {}
    for p in peers:
        try:
            peers_mod.require(p)
            peer_ok.append(p)
        except peers_mod.PeerUnavailable as e:
            peer_status[p] = {"skipped": str(e)}
    peer_repeat = peer_repeat or repeat
    bad = [w for w in workloads if w not in WORKLOADS]
    if bad or not workloads:
        raise ValueError(f"workloads must be some of {', '.join(WORKLOADS)}, not {list(workloads)}")
    workloads = [w for w in WORKLOADS if w in workloads]
    res: dict[str, Any] = {
        "suite": "index", "quick": quick,
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine_info(),
        "config": {"sizes": list(sizes), "upsert_rows": upsert_rows, "repeat": repeat, "peer_repeat": peer_repeat,
                   "workloads": workloads, "recent_days": RECENT_DAYS, "budget_s": budget_s,
                   "peer_timeout_s": peer_timeout_s, "count_bytes": count_bytes, "seed": seed,
                   "spark_driver_memory": driver_memory, "write_options": write_options or {}},
        "indexes": {"measured": ixs, "skipped": ix_skipped},
        "peers": {"measured": peer_ok, **({"skipped": {p: s["skipped"] for p, s in peer_status.items()}}
                                           if peer_status else {})},
        "sizes": [],
    }
    steps_per_size = 3 + len(workloads) * repeat * len(ixs) + len(peer_ok) * (1 + len(workloads) * peer_repeat)
    prev: tuple[int, dict[str, Any]] | None = None
    peer_prev: dict[str, tuple[int, float, float]] = {}
    root = tempfile.mkdtemp(prefix="pyhudi-index-bench-", dir=work_dir)
    log_dir = os.path.join(root, "logs")
    os.makedirs(log_dir)
    res["logs"] = log_dir
    try:
        with Reporter(steps_per_size * len(sizes), enabled=progress) as rep:
            for size in sizes:
                entry: dict[str, Any] = {"rows": size}
                res["sizes"].append(entry)
                elapsed = time.perf_counter() - t_suite
                if budget_s is not None and prev is not None:
                    # the previous size's time, scaled linearly in rows, without peers that will not run again
                    psize, pparts = prev
                    base_s = pparts["data"] + pparts["spark"] + sum(
                        v for p, v in pparts["peers"].items() if peer_prev.get(p, (1,))[0] > 0)
                    est = base_s * size / psize
                    if elapsed + est > budget_s:
                        entry["status"] = "skipped"
                        entry["reason"] = (f"estimated {est / 60:.0f} min (the {psize:,}-row size took "
                                           f"{base_s / 60:.1f} min; time grows about linearly with rows), with "
                                           f"{max(0.0, budget_s - elapsed) / 60:.0f} min of the {budget_s / 60:.0f}-min "
                                           "budget left")
                        rep.say(f"{size:,} rows skipped: {entry['reason']}")
                        rep.advance(steps_per_size)
                        continue
                t_size = time.perf_counter()
                work = os.path.join(root, f"r{size}")
                os.makedirs(work)
                rep.say(f"{size:,} rows: generating data")
                parts: dict[str, Any] = {"peers": {}}
                t_part = time.perf_counter()
                entry["data"] = run_child(_child_args("gen", {"rows": size, "upsert_rows": upsert_rows, "work": work,
                                                              "seed": seed}),
                                          os.path.join(log_dir, f"gen-{size}.log"), rep, None)
                rep.advance()
                parts["data"] = time.perf_counter() - t_part
                spec = {"rows": size, "work": work, "indexes": ixs, "repeat": repeat, "workloads": workloads,
                "driver_memory": driver_memory, "write_options": write_options or {},
                        "counter_dir": os.path.join(work, "io-counters") if count_bytes else None}
                rep.say(f"{size:,} rows: Spark")
                t_part = time.perf_counter()
                left = None if budget_s is None else max(0.0, budget_s - (time.perf_counter() - t_suite))
                try:
                    hudi = run_child(_child_args("hudi", spec), os.path.join(log_dir, f"hudi-{size}.log"), rep,
                                     None if left is None else left + 900.0)
                except (ChildFailed, ChildTimeout) as e:
                    entry["status"] = "failed"
                    entry["reason"] = f"the Spark part failed: {e}"
                    rep.say(f"{size:,} rows: {entry['reason']}")
                    shutil.rmtree(work, ignore_errors=True)
                    if on_size_done is not None:
                        on_size_done(res)
                    break
                rep.advance(2)
                parts["spark"] = time.perf_counter() - t_part
                hudi["summary"] = summarize_hudi(hudi["runs"])
                entry["hudi"] = hudi
                entry["peers"] = {}
                for p in peer_ok:
                    t_part = time.perf_counter()
                    entry["peers"][p] = _run_peer(p, size, work, peer_repeat, peer_timeout_s, peer_prev, log_dir, rep,
                                                  workloads)
                    parts["peers"][p] = time.perf_counter() - t_part
                shutil.rmtree(work, ignore_errors=True)
                entry["status"] = "done"
                entry["size_s"] = round(time.perf_counter() - t_size, 1)
                entry["step_s"] = {"data": round(parts["data"], 1), "spark": round(parts["spark"], 1),
                                   **{p: round(v, 1) for p, v in parts["peers"].items()}}
                prev = (size, parts)
                if on_size_done is not None:
                    res["suite_s"] = round(time.perf_counter() - t_suite, 1)
                    res["targets"] = _targets(res)
                    on_size_done(res)
    finally:
        # the tables go; the child processes' logs stay (small: Spark logs errors only) unless all went well
        keep_logs = any(s.get("status") == "failed" or s.get("hudi", {}).get("failed_runs")
                        or any(p.get("status") in ("failed", "timeout") for p in (s.get("peers") or {}).values())
                        for s in res["sizes"])
        if not os.environ.get("PYHUDI_BENCH_KEEP"):
            for name in os.listdir(root):
                if name != "logs" or not keep_logs:
                    shutil.rmtree(os.path.join(root, name), ignore_errors=True)
            if not keep_logs:
                shutil.rmtree(root, ignore_errors=True)
    res["suite_s"] = round(time.perf_counter() - t_suite, 1)
    res["targets"] = _targets(res)
    return res


def append_results(old: dict[str, Any], new: dict[str, Any], note: str) -> dict[str, Any]:
    """``old`` with ``new``'s measured sizes added (replacing old entries of the same size, which are kept under
    ``replaced``), each marked with ``note`` and the run's own settings; targets recomputed."""
    out = json.loads(json.dumps(old))
    for s in new["sizes"]:
        if s.get("status") != "done":
            continue
        s = {**s, "separate_run": {"note": note, "started_utc": new.get("started_utc"), "config": new.get("config"),
                                   "suite_s": new.get("suite_s"), "machine": new.get("machine"),
                                   "peers_measured": new.get("peers", {}).get("measured", [])}}
        keep = []
        for o in out["sizes"]:
            if o["rows"] == s["rows"]:
                s["separate_run"]["replaced"] = o
            else:
                keep.append(o)
        out["sizes"] = sorted([*keep, s], key=lambda x: x["rows"])
    out["targets"] = _targets(out)
    return out


def _targets(res: dict[str, Any]) -> dict[str, Any]:
    from pyhudi.bench.index_report import targets

    return targets(res)


def _run_peer(p: str, size: int, work: str, repeat: int, timeout_s: float,
              prev: dict[str, tuple[int, float, float]], log_dir: str, rep: Reporter,
              workloads: Sequence[str] = WORKLOADS) -> dict[str, Any]:
    steps = 1 + len(workloads) * repeat
    if p in prev:
        psize, pcreate, pupsert = prev[p]
        if psize < 0:
            rep.advance(steps)
            return {"status": "skipped", "reason": f"did not finish at {-psize:,} rows within {timeout_s:.0f} s"}
        f = size / psize
        if max(pcreate, pupsert) * f > timeout_s:
            rep.advance(steps)
            return {"status": "skipped",
                    "reason": f"estimated {max(pcreate, pupsert) * f:.0f} s for one step (at {psize:,} rows: "
                              f"create {pcreate:.0f} s, upsert {pupsert:.0f} s; linear in rows) > {timeout_s:.0f} s"}
    from pyhudi.bench import peers as peers_mod

    table = os.path.join(work, f"{p}-base")
    out: dict[str, Any] = {}
    try:
        rep.say(f"{size:,} rows: {p}: writing the table")
        out["create"] = run_child(_child_args("peer-create", {"peer": p, "table": table, "input": os.path.join(work, "input")}),
                                  os.path.join(log_dir, f"{p}-create-{size}.log"), rep, timeout_s)
        rep.advance()
        runs = []
        for w in workloads:
            for i in range(repeat):
                rep.say(f"{size:,} rows: {p}: upsert {w} rep {i + 1}/{repeat}")
                dst = os.path.join(work, f"{p}-clone")
                (peers_mod.delta_clone if p == "delta" else peers_mod.iceberg_clone)(table, dst)
                try:
                    r = _run_peer_upsert(p, dst, os.path.join(work, f"upsert-{w}"),
                                         os.path.join(log_dir, f"{p}-upsert-{size}.log"), timeout_s)
                finally:
                    shutil.rmtree(dst, ignore_errors=True)
                r.update({"workload": w, "rep": i})
                runs.append(r)
                rep.advance()
        out["runs"] = runs
        out["summary"] = summarize_peer(runs)
        out["status"] = "done"
        prev[p] = (size, out["create"]["create_s"], max(r["upsert_s"] for r in runs))
    except (ChildTimeout, subprocess.TimeoutExpired) as e:
        out.update({"status": "timeout", "reason": f"{e}"})
        prev[p] = (-size, 0.0, 0.0)
    except ChildFailed as e:
        out.update({"status": "failed", "reason": str(e)})
        prev[p] = (-size, 0.0, 0.0)
    shutil.rmtree(table, ignore_errors=True)
    return out


def _run_peer_upsert(p: str, table: str, upsert_dir: str, log_path: str, timeout_s: float) -> dict[str, Any]:
    with open(log_path, "a") as log:
        try:
            cp = subprocess.run([sys.executable, "-m", "pyhudi.bench.peers", p, table, upsert_dir],
                                stdout=subprocess.PIPE, stderr=log, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired as e:
            raise ChildTimeout(f"one {p} upsert did not finish within {timeout_s:.0f} s") from e
    if cp.returncode != 0:
        raise ChildFailed(f"{p} upsert exited with {cp.returncode} (log: {log_path})")
    return json.loads(cp.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "_child":
        child_main(sys.argv[2:])
    else:
        raise SystemExit("run the suite with 'pyhudi bench index' or 'python benchmarks/bench_index.py'")
