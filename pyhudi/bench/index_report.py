"""Reports of the index benchmark suite (:mod:`pyhudi.bench.index_bench`): the targets, a Markdown table, plots."""

from __future__ import annotations

import os
from typing import Any

INSTALL_HINT = "install the benchmark extras: pip install -e '.[bench]' (or make bench)"
TAG_RATIO_TARGET = 10.0
TAG_GROWTH_TARGET = 1.5


def _done(res: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in res.get("sizes", []) if s.get("status") == "done"]


def targets(res: dict[str, Any]) -> dict[str, Any]:
    """Per workload: RECORD_INDEX tagging >= 10x faster than GLOBAL_SIMPLE and GLOBAL_BLOOM at the largest size;
    RECORD_INDEX tagging growing <= 1.5x from the smallest to the largest size; the RECORD_INDEX upsert faster
    than each peer at the largest size both ran."""
    done = _done(res)
    out: dict[str, Any] = {}
    for w in sorted({w for s in done for w in s["hudi"]["summary"]}):
        t: dict[str, Any] = {}
        with_w = [s for s in done if w in s["hudi"]["summary"]]  # the sizes this workload ran at
        small, large = with_w[0], with_w[-1]
        sl = large["hudi"]["summary"].get(w, {})
        ri = (sl.get("RECORD_INDEX") or {}).get("tag_s")
        for other in ("GLOBAL_SIMPLE", "GLOBAL_BLOOM"):
            o = (sl.get(other) or {}).get("tag_s")
            key = f"record_index_tag_{TAG_RATIO_TARGET:g}x_faster_than_{other.lower()}"
            if ri is None or o is None:
                t[key] = {"holds": None, "why": f"{other if o is None else 'RECORD_INDEX'} not measured"}
            else:
                t[key] = {"rows": large["rows"], "record_index_tag_s": ri, f"{other.lower()}_tag_s": o,
                          "ratio": round(o / ri, 2), "holds": o / ri >= TAG_RATIO_TARGET}
        ri_small = ((small["hudi"]["summary"].get(w) or {}).get("RECORD_INDEX") or {}).get("tag_s")
        key = f"record_index_tag_growth_at_most_{TAG_GROWTH_TARGET:g}x"
        if ri is None or ri_small is None:
            t[key] = {"holds": None, "why": "RECORD_INDEX not measured"}
        elif small is large:
            t[key] = {"holds": None, "why": f"only one size measured ({large['rows']:,} rows)",
                      "record_index_tag_s": ri}
        else:
            t[key] = {"from_rows": small["rows"], "to_rows": large["rows"], "from_tag_s": ri_small, "to_tag_s": ri,
                      "growth": round(ri / ri_small, 2), "holds": ri / ri_small <= TAG_GROWTH_TARGET}
        for peer in res.get("peers", {}).get("measured", []):
            key = f"record_index_upsert_faster_than_{peer}"
            both = [s for s in with_w if (s.get("peers", {}).get(peer) or {}).get("status") == "done"
                    and w in s["peers"][peer].get("summary", {})]
            if not both:
                t[key] = {"holds": None, "why": f"{peer} did not finish at any size of this run (its status per size "
                                                "is in the results)"}
                continue
            s = both[-1]
            h = ((s["hudi"]["summary"].get(w) or {}).get("RECORD_INDEX") or {}).get("upsert_s")
            pv = s["peers"][peer]["summary"].get(w, {}).get("upsert_s")
            if h is None or pv is None:
                t[key] = {"holds": None, "why": "not measured"}
                continue
            t[key] = {"rows": s["rows"], "record_index_upsert_s": h, f"{peer}_upsert_s": pv,
                      "ratio_peer_over_hudi": round(pv / h, 2), "holds": h < pv}
        out[w] = t
    return out


# -- Markdown ---------------------------------------------------------------------------------------------------
def _mb(b: int | None) -> str:
    return "" if b is None else f"{b / 1e6:,.0f}" if b >= 1e7 else f"{b / 1e6:,.1f}"


def _gb(b: int | None) -> str:
    return "" if not b else f"{b / 2**30:.2f}"


def _s(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}" if x < 10 else f"{x:.1f}"


def markdown(res: dict[str, Any]) -> str:
    m = res.get("machine", {})
    cfg = res.get("config", {})
    lines = [
        f"# Index benchmark{' (quick)' if res.get('quick') else ''}",
        "",
        f"Machine: {m.get('cpus')} cores, {m.get('memory_gib')} GiB, shared with other jobs "
        f"(load average at start {m.get('load_avg_at_start')}); {m.get('platform')}; Python {m.get('python')}; "
        f"versions {m.get('versions')}. Started {res.get('started_utc')}, took {res.get('suite_s', 0) / 60:.1f} min.",
        "",
        f"Upserts of {cfg.get('upsert_rows'):,} rows; median of {cfg.get('repeat')} run(s) per index "
        f"({cfg.get('peer_repeat')} per peer). `uniform`: half updates of random live keys, half new keys on random "
        f"days. `late`: updates only in the most recent {cfg.get('recent_days')} daily partitions (5%), new keys "
        "there too. tag = `timings_s.tag`; upsert = the whole `Table.write` (peers: the MERGE / upsert call); table "
        "MB = bytes read from the table's files through the storage layer (whole upsert / while tagging); OS MB = "
        "`rchar` of the process tree (files incl. Spark shuffle and page-cache hits, pipes); peak RSS = driver + JVM "
        "+ Python workers, sampled every 50 ms (peers: the process's own high-water mark).",
        "",
    ]
    sk = res.get("indexes", {}).get("skipped") or {}
    for ix, why in sk.items():
        lines.append(f"- {ix}: skipped, {why}")
    for p, why in (res.get("peers", {}).get("skipped") or {}).items():
        lines.append(f"- {p}: skipped, {why}")
    for s in res.get("sizes", []):
        if s.get("status") != "done":
            lines.append(f"- {s['rows']:,} rows: {s.get('status')}, {s.get('reason', '')}")
        for f in (s.get("hudi") or {}).get("failed_runs") or []:
            lines.append(f"- {s['rows']:,} rows, {f['workload']} {f['index']} run {f['rep'] + 1}: failed, {f['error'][:300]}")
        for p, ps in (s.get("peers") or {}).items():
            if ps.get("status") != "done":
                lines.append(f"- {p} at {s['rows']:,} rows: {ps.get('status')}, {ps.get('reason', '')}")
    if lines[-1] != "":
        lines.append("")
    for s in _done(res):
        b = s["hudi"]["build"]
        ri = b.get("record_index") or {}
        lines.append(f"## {s['rows']:,} rows")
        lines.append("")
        sep = s.get("separate_run")
        if sep:
            cfg_s = sep.get("config") or {}
            lines.append(f"{sep['note'][0].upper()}{sep['note'][1:]} (started {sep.get('started_utc')}, took "
                         f"{(sep.get('suite_s') or 0) / 60:.1f} min; workloads {', '.join(cfg_s.get('workloads', []))}; "
                         f"peers {', '.join(sep.get('peers_measured', [])) or 'as listed'})."
                         + (f" The run above had skipped this size: {sep['replaced'].get('reason')}."
                            if sep.get("replaced", {}).get("status") == "skipped" else ""))
            lines.append("")
        lines.append(
            f"bulk_insert {b['bulk_insert_s']:.0f} s: {b['base_files']} base files, {b['base_file_bytes'] / 1e6:,.0f} MB; "
            f"record index {ri.get('file_groups')} file groups, {ri.get('bytes', 0) / 1e6:,.1f} MB "
            f"({ri.get('bytes_per_entry')} bytes/entry)."
            + "".join(f" {p}: table written in {ps['create']['create_s']:.0f} s ({ps['create']['files']} files)."
                      for p, ps in (s.get("peers") or {}).items() if ps.get("status") == "done")
        )
        lines.append("")
        lines.append("| workload | system / index | tag s | upsert s | table MB read | table MB read while tagging | OS MB read | peak RSS GiB |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for w, per in s["hudi"]["summary"].items():
            for ix, v in per.items():
                lines.append(f"| {w} | pyhudi {ix} | {_s(v['tag_s'])} | {_s(v['upsert_s'])} | {_mb(v['table_bytes_read'])} | "
                             f"{_mb(v['table_bytes_read_tag'])} | {_mb(v['os_rchar_bytes'])} | {_gb(v['peak_rss_bytes'])} |")
            for p, ps in (s.get("peers") or {}).items():
                if ps.get("status") == "done" and w in ps["summary"]:
                    v = ps["summary"][w]
                    lines.append(f"| {w} | {p} | | {_s(v['upsert_s'])} | | | {_mb(v['os_rchar_bytes'])} | {_gb(v['peak_rss_bytes'])} |")
        lines.append("")
        prof = s["hudi"].get("profile", {}).get("uniform")
        if prof:
            r, g = prof["record_index"], prof["global_simple"]
            lines.append(
                f"Tagging profile (uniform, outside Spark): opening the record index {r['open_s']:.2f} s; looking up "
                f"{r['lookup_keys']:,} keys in its {r['file_groups']} file groups {r['lookup_s_sum_of_groups']:.2f} s "
                f"in one process (slowest group {r['lookup_s_slowest_group']:.2f} s); reading the keys of all "
                f"{g['base_files']} base files (what GLOBAL_SIMPLE joins against) {g['read_all_keys_s']:.2f} s."
            )
            lines.append("")
    t = res.get("targets") or {}
    if t:
        lines.append("## Targets")
        lines.append("")
        lines.append("| workload | target | holds | figures |")
        lines.append("|---|---|---|---|")
        for w, per in t.items():
            for k, v in per.items():
                figs = ", ".join(f"{a}={b}" for a, b in v.items() if a != "holds")
                holds = {True: "yes", False: "no", None: "n/a"}[v.get("holds")]
                lines.append(f"| {w} | {k} | {holds} | {figs} |")
        lines.append("")
    return "\n".join(lines)


# -- plots --------------------------------------------------------------------------------------------------------
def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as e:
        raise ImportError(f"plots need matplotlib; {INSTALL_HINT}") from e
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plots(res: dict[str, Any], out_dir: str, suffix: str = "") -> list[str]:
    """``index_tag_vs_size{suffix}.png`` and ``index_upsert_vs_peers{suffix}.png`` in ``out_dir``."""
    plt = _pyplot()
    done = _done(res)
    if not done:
        return []
    workloads = list(done[0]["hudi"]["summary"])
    files: list[str] = []

    def save(fig: Any, stem: str) -> None:
        fig.tight_layout()
        files.append(os.path.join(out_dir, f"{stem}{suffix}.png"))
        fig.savefig(files[-1], dpi=110)
        plt.close(fig)

    fig, axes = plt.subplots(1, len(workloads), figsize=(5.5 * len(workloads), 4.2), squeeze=False)
    for ax, w in zip(axes[0], workloads, strict=True):
        ixs = list(done[0]["hudi"]["summary"][w])
        for ix in ixs:
            xs = [s["rows"] for s in done if ix in s["hudi"]["summary"].get(w, {})]
            ys = [s["hudi"]["summary"][w][ix]["tag_s"] for s in done if ix in s["hudi"]["summary"].get(w, {})]
            ax.plot(xs, ys, marker="o", label=ix, linewidth=2.5 if ix == "RECORD_INDEX" else 1.5)
        from matplotlib.ticker import NullFormatter, ScalarFormatter

        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks([s["rows"] for s in done], [f"{s['rows'] / 1e6:g}M" for s in done])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("table rows")
        ax.set_ylabel("tagging time (s, median)")
        ax.set_title(f"{w}: tagging {res['config']['upsert_rows']:,} upsert rows")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    save(fig, "index_tag_vs_size")

    fig, axes = plt.subplots(1, len(workloads), figsize=(5.5 * len(workloads), 4.2), squeeze=False)
    for ax, w in zip(axes[0], workloads, strict=True):
        systems: list[str] = []
        for s in done:
            for ix in s["hudi"]["summary"].get(w, {}):
                if f"pyhudi {ix}" not in systems:
                    systems.append(f"pyhudi {ix}")
            for pn, ps in (s.get("peers") or {}).items():
                if ps.get("status") == "done" and pn not in systems:
                    systems.append(pn)
        width = 0.8 / max(1, len(systems))
        for i, name in enumerate(systems):
            xs, ys = [], []
            for j, s in enumerate(done):
                if name.startswith("pyhudi "):
                    v = s["hudi"]["summary"].get(w, {}).get(name[7:])
                else:
                    ps = (s.get("peers") or {}).get(name) or {}
                    v = ps.get("summary", {}).get(w) if ps.get("status") == "done" else None
                if v:
                    xs.append(j + (i - (len(systems) - 1) / 2) * width)
                    ys.append(v["upsert_s"])
            ax.bar(xs, ys, width=width, label=name)
        ax.set_xticks(range(len(done)), [f"{s['rows'] / 1e6:g}M rows" for s in done])
        ax.set_ylabel("upsert time (s, median)")
        ax.set_title(f"{w}: {res['config']['upsert_rows']:,}-row upsert")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    save(fig, "index_upsert_vs_peers")
    return files


def write_reports(res: dict[str, Any], out_dir: str, name: str) -> dict[str, Any]:
    """``<name>.json``, ``<name>.md`` and the plots (suffix from ``name``) in ``out_dir``."""
    import json

    os.makedirs(out_dir, exist_ok=True)
    suffix = name[len("index_bench"):] if name.startswith("index_bench") else f"_{name}"
    out: dict[str, Any] = {}
    try:
        out["plots"] = [os.path.relpath(p, out_dir) for p in plots(res, out_dir, suffix)]
    except ImportError as e:
        out["plots_skipped"] = str(e)
    res["reports"] = out
    with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
        f.write(json.dumps(res, indent=2) + "\n")
    with open(os.path.join(out_dir, f"{name}.md"), "w") as f:
        f.write(markdown(res) + "\n")
    out["json"] = os.path.join(out_dir, f"{name}.json")
    out["md"] = os.path.join(out_dir, f"{name}.md")
    return out
