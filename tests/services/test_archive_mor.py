"""Archival of merge-on-read data tables: Hudi's MOR rules on fabricated timelines; a log file whose deltacommit
completed after a later-requested compaction, archived, still read from the compacted slice (and kept by
cleaning); a Spark pipeline with inline compactions archived after every commit, read back after every step
(snapshot, read-optimized, time travel, incremental) by pyhudi against a model and by hudi-rs; crashes at every
step of an archival of such a table."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pyhudi import faults
from pyhudi.services.archive import ArchiveLimits, archive, plan_archival
from pyhudi.services.clean import clean
from pyhudi.table.lsm_timeline import ArchivedCompletionTimes, FullTimeline
from pyhudi.table.table import Table
from pyhudi.table.timeline import COMMIT, COMPACTION, DELTA_COMMIT, ActiveTimeline, InstantTimeGenerator
from pyhudi.write.append import TORN_APPEND
from pyhudi.write.producer import FAULT_OPTION
from tests.support.mor_tables import MorTable, data
from tests.support.service_tables import Fab
from tests.support.storage import LOCAL

hudi = pytest.importorskip("hudi")

FA = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa-0"
FB = "bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb-0"


class Crash(Exception):
    pass


# -- rules on fabricated timelines --------------------------------------------------------------------------------
def _times(instants: Any) -> list[str]:
    return [i.requested_time for i in instants]


def test_mor_rules_compaction_needs_and_pending_compaction(tmp_path: Path) -> None:
    """``hoodie.compact.inline.max.delta.commits`` (N): the deltacommits the next compaction needs stay, counted
    after the latest completed compaction (TimelineArchiverV2, CompactionUtils); a pending compaction stops
    archival at the last completed commit before it."""
    fab = Fab(tmp_path)
    d1 = fab.done(DELTA_COMMIT, 4)
    c1 = fab.done(COMMIT)  # a completed compaction
    d2 = fab.done(DELTA_COMMIT, 3)
    tl = fab.tl
    # 3 deltacommits after the compaction, 5 needed: nothing from the compaction on
    p = plan_archival(tl, ArchiveLimits(1, 2), max_delta_commits=5)
    assert _times(p.commits) == d1 and p.retain_from == c1[0]
    # 2 needed: the 2 newest stay, the compaction and the oldest one after it go
    p = plan_archival(tl, ArchiveLimits(1, 2), max_delta_commits=2)
    assert _times(p.commits) == d1 + c1 + d2[:1]
    # a pending compaction: nothing at or after the last completed commit before it
    pend = fab.pending(COMPACTION)
    d3 = fab.done(DELTA_COMMIT, 2)
    p = plan_archival(fab.tl, ArchiveLimits(1, 2), max_delta_commits=1)
    assert p.commits and all(i.requested_time < d2[-1] for i in p.commits)
    assert pend not in _times(p.instants) and not set(d3) & set(_times(p.instants))
    assert f"pending compaction {pend}" in p.reason


# -- the completion-time case -------------------------------------------------------------------------------------
def row(k: str, ts: int, v: float) -> dict[str, Any]:
    return {"id": k, "ts": ts, "v": v}


def _late_deltacommit_table(tmp_path: Path) -> tuple[MorTable, dict[str, str]]:
    """A deltacommit (t3) requested before a compaction (t4) of its file group and completed after it: its log
    belongs to the compacted slice. Then deltacommits into another file group, so t3 can be archived."""
    mt = MorTable(tmp_path / "t")
    t: dict[str, str] = {}
    t["t1"] = mt.commit(base={FA: [row("a", 1, 1.0), row("b", 1, 1.0)]})
    t["t2"] = mt.commit(logs={FA: [data(row("a", 2, 2.0))]})
    t["t3"] = mt.commit(logs={FA: [data(row("b", 3, 3.0))]}, complete=False)
    t["t4"] = mt.schedule_compaction(FA, t["t1"], [f".{FA}_{t['t2']}.log.1_0-1-0"])
    mt.write_base(FA, t["t4"], [row("a", 2, 2.0), row("b", 1, 1.0)])  # t2 merged; t3 was not completed
    t["c4"] = mt.complete(t["t4"])
    t["c3"] = mt.complete(t["t3"])
    assert t["t3"] < t["t4"] < t["c4"] < t["c3"]
    t["t5"] = mt.commit(base={FB: [row("x", 1, 1.0)]})
    for i in range(4):
        t[f"t{6 + i}"] = mt.commit(logs={FB: [data(row("x", 2 + i, 2.0 + i))]})
    return mt, t


OPTS_SMALL = {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
              "hoodie.compact.inline.max.delta.commits": "1"}


def _rows(t: pa.Table) -> list[tuple[str, int, float]]:
    return sorted(zip(t.column("id").to_pylist(), t.column("ts").to_pylist(), t.column("v").to_pylist(),
                      strict=True)) if t.num_rows else []


def _rs_rows(base: str) -> list[tuple[str, int, float]]:
    batches = list(hudi.HudiTableBuilder.from_base_uri(base).build().read())
    return _rows(pa.Table.from_batches(batches)) if batches else []


def test_log_completed_after_a_later_compaction_archived_stays_in_the_compacted_slice(tmp_path: Path) -> None:
    mt, t = _late_deltacommit_table(tmp_path)
    want = [("a", 2, 2.0), ("b", 3, 3.0), ("x", 5, 5.0)]
    assert _rows(Table.open(mt.base).to_arrow()) == want
    # hudi-rs agrees while t3 is on the active timeline; it reads no archived completion time, so after archival
    # it places t3's log in the old slice and returns b's old row: the case Hudi's CompletionTimeQueryView (and
    # pyhudi's view) reads the LSM timeline for
    assert _rs_rows(mt.base) == want
    res = archive(LOCAL, mt.base, None, OPTS_SMALL)
    assert {t["t1"], t["t2"], t["t3"], t["t4"]} <= {i.requested_time for i in res.data.archived}
    assert not ActiveTimeline.load(LOCAL, mt.base).contains(t["t3"])
    assert FullTimeline.load(LOCAL, mt.base).get(t["t3"]).completion_time == t["c3"]  # type: ignore[union-attr]

    view = Table.open(mt.base).view()
    g = view.file_group("", FA)
    assert g is not None
    old, new = g.slices
    assert (old.base_instant, [lf.instant for lf in old.log_files]) == (t["t1"], [t["t2"]])
    assert (new.base_instant, [lf.instant for lf in new.log_files]) == (t["t4"], [t["t3"]])
    assert new.log_files[0].completion_time == t["c3"]
    # snapshot, read-optimized, time travel (requested times), incremental from the start
    tab = Table.open(mt.base)
    assert _rows(tab.to_arrow()) == want
    assert _rows(tab.to_arrow(read_optimized=True)) == [("a", 2, 2.0), ("b", 1, 1.0), ("x", 1, 1.0)]
    assert _rows(tab.to_arrow(as_of=t["t2"])) == [("a", 2, 2.0), ("b", 1, 1.0)]
    assert _rows(tab.to_arrow(as_of=t["t5"])) == [("a", 2, 2.0), ("b", 3, 3.0), ("x", 1, 1.0)]
    assert _rows(tab.incremental_arrow("00000000000000000")) == want
    # an incremental read ending before t3 completed does not return it
    assert ("b", 3, 3.0) not in _rows(tab.incremental_arrow("00000000000000000", t["c4"]))

    # cleaning (retaining 1 commit) removes the old slice, never the archived deltacommit's log of the new one
    clean(LOCAL, mt.base, ActiveTimeline.load(LOCAL, mt.base), 1, InstantTimeGenerator())
    names = {p.name for p in Path(mt.base).iterdir()}
    assert f"{FA}_0-1-0_{t['t1']}.parquet" not in names and f".{FA}_{t['t2']}.log.1_0-1-0" not in names
    assert f".{FA}_{t['t3']}.log.1_0-1-0" in names
    assert _rows(Table.open(mt.base).to_arrow()) == want


def test_views_without_undecided_logs_read_nothing_of_the_archive(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a log file of an archived deltacommit with a newer base file in its group makes a view read the LSM
    timeline; once cleaning removed the old slice, no view does."""
    mt, t = _late_deltacommit_table(tmp_path)
    archive(LOCAL, mt.base, None, OPTS_SMALL)
    loads: list[int] = []
    real = ArchivedCompletionTimes._load

    def counting(self: ArchivedCompletionTimes, todo: set[str]) -> None:
        loads.append(len(todo))
        real(self, todo)

    monkeypatch.setattr(ArchivedCompletionTimes, "_load", counting)
    Table.open(mt.base).view()
    assert loads == [2]  # the logs of t2 and t3 (archived) lie in a file group with the newer base of t4
    loads.clear()
    # after a compaction of FA (t3's log merged) and a clean, no listed log is older than the active timeline
    tl = ActiveTimeline.load(LOCAL, mt.base)
    t10 = mt.schedule_compaction(FA, t["t4"], [f".{FA}_{t['t3']}.log.1_0-1-0"])
    mt.write_base(FA, t10, [row("a", 2, 2.0), row("b", 3, 3.0)])
    mt.complete(t10)
    for i in range(3):
        mt.commit(logs={FB: [data(row("x", 10 + i, 9.0))]})
    clean(LOCAL, mt.base, tl.reload(), 1, InstantTimeGenerator())
    loads.clear()
    assert _rows(Table.open(mt.base).to_arrow()) == [("a", 2, 2.0), ("b", 3, 3.0), ("x", 12, 9.0)]
    assert loads == []



@pytest.mark.parametrize("zip_name", ["mor_v9_txns_simple_meta.zip", "mor_v8_trips_8i3u1d.zip"])
def test_java_written_mor_tables_read_the_same_after_archival(tmp_path: Path, zip_name: str) -> None:
    """Hudi-written merge-on-read tables (deltacommits, a compaction, logs completed around it) archived down to
    a few commits: every pyhudi read is what it was (time travel to the archived commits included: the log files
    of archived deltacommits in the old slices are placed by their archived completion times), hudi-rs reads the
    snapshot."""
    from tests.support.fixtures import unzip_table

    base = str(unzip_table(zip_name, tmp_path))
    tl = ActiveTimeline.load(LOCAL, base)
    commits = [i.requested_time for i in tl.completed_commits()]

    def reads() -> list[Any]:
        t = Table.open(base)
        return [t.to_arrow().sort_by("_hoodie_record_key"), t.to_arrow(read_optimized=True).num_rows,
                *(t.to_arrow(as_of=c).sort_by("_hoodie_record_key") for c in commits)]

    before = reads()
    opts = {"hoodie.keep.min.commits": "1", "hoodie.keep.max.commits": "2", "hoodie.cleaner.commits.retained": "1",
            "hoodie.compact.inline.max.delta.commits": "1"}
    res = archive(LOCAL, base, None, opts)
    assert any(i.action == DELTA_COMMIT for i in res.data.archived)
    assert reads() == before
    rs = pa.Table.from_batches(list(hudi.HudiTableBuilder.from_base_uri(base).build().read()))
    assert rs.select(before[0].column_names).sort_by("_hoodie_record_key").to_pylist() == before[0].to_pylist()


def test_pyhudi_archive_command(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from pyhudi.cli.main import main as cli_main

    mt, t = _late_deltacommit_table(tmp_path)
    args = [f"--option={k}={v}" for k, v in OPTS_SMALL.items()]
    res = CliRunner().invoke(cli_main, ["archive", mt.base, *args, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert t["t3"] in out["data"]["archived"] and out["data"]["file"]
    res = CliRunner().invoke(cli_main, ["archive", mt.base, *args])
    assert res.exit_code == 0 and res.output.startswith("data: 0 instant(s) archived"), res.output
    assert _rows(Table.open(mt.base).to_arrow()) == [("a", 2, 2.0), ("b", 3, 3.0), ("x", 5, 5.0)]


# -- a Spark pipeline archived after every commit ------------------------------------------------------------------
PIPE_OPTS = {
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.table.ordering.fields": "ts",
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.keep.min.commits": "2",
    "hoodie.keep.max.commits": "3",
    "hoodie.cleaner.commits.retained": "2",
    "hoodie.compact.inline.max.delta.commits": "2",
    "hoodie.metadata.compact.max.delta.commits": "2",
    "hoodie.timeline.compaction.batch.size": "2",
    "hoodie.upsert.shuffle.parallelism": "2",
}
N_DELTAS = 2
PIPE_SCHEMA = pa.schema([("id", pa.string()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.float64())])
Model = dict[str, tuple[str, int, float]]


def _batch(ids: range | list[int], ts: int) -> list[dict[str, Any]]:
    return [{"id": f"k{i:03d}", "p": "a" if i % 2 else "b", "ts": ts, "v": float(i * 100 + ts)} for i in ids]


def _model_rows(model: Model) -> list[tuple[str, str, int, float]]:
    return sorted((k, p, ts, v) for k, (p, ts, v) in model.items())


def _table_rows(t: pa.Table) -> list[tuple[str, str, int, float]]:
    if not t.num_rows:
        return []
    return sorted(zip(t.column("id").to_pylist(), t.column("p").to_pylist(), t.column("ts").to_pylist(),
                      t.column("v").to_pylist(), strict=True))


def _rs(base: str) -> list[tuple[str, str, int, float]]:
    batches = list(hudi.HudiTableBuilder.from_base_uri(base).build().read())
    return _table_rows(pa.Table.from_batches(batches)) if batches else []


def _reads(base: str, history: list[tuple[str, str, Model]]) -> dict[str, Any]:
    """Every read pyhudi offers: snapshot, read-optimized, time travel to each commit and incremental from the
    start to each commit's completion (a read refused because cleaning removed its files: the error's text)."""
    from pyhudi.errors import InvalidInputError

    t = Table.open(base)
    out: dict[str, Any] = {"snapshot": _table_rows(t.to_arrow()), "ro": _table_rows(t.to_arrow(read_optimized=True))}
    for instant, done, _ in _probed(history):
        for kind in ("tt", "incr"):
            try:
                got = t.to_arrow(as_of=instant) if kind == "tt" else t.incremental_arrow("00000000000000000", done)
                out[f"{kind}:{instant}"] = _table_rows(got)
            except InvalidInputError as e:
                assert "cleaning" in str(e), e
                out[f"{kind}:{instant}"] = "refused"
    return out


def _probed(history: list[tuple[str, str, Model]]) -> list[tuple[str, str, Model]]:
    """The commits time travel and incremental reads are checked at: the first (long archived and cleaned) and
    the last four."""
    return history[:1] + history[1:][-4:]


def _check_rules(base: str) -> None:
    """What must stay active: the deltacommits the next compaction needs (or the latest compaction), nothing
    from a pending write on; the active timeline bounded."""
    full = FullTimeline.load(LOCAL, base)
    tl = full.active
    commits = list(full.completed_commits())
    compactions = [i for i in commits if i.action == COMMIT]
    if compactions:
        last = compactions[-1]
        after = [i for i in full if i.action == DELTA_COMMIT and i.requested_time > last.requested_time]
        keep = [last] if len(after) < N_DELTAS else after[len(after) - N_DELTAS:]
        assert all(tl.contains(i.requested_time) for i in keep + after[-N_DELTAS:]), base
    pending = next((i for i in tl.pending() if i.action in (DELTA_COMMIT, COMPACTION, COMMIT)), None)
    if pending is not None:  # nothing from the last completed commit before it on
        before = [c for c in commits if c.requested_time < pending.requested_time]
        bound = before[-1].requested_time if before else pending.requested_time
        assert all(i.requested_time < bound for i in full if full.is_archived(i)), (base, str(pending))
    assert len(tl.completed_commits()) <= 8, [str(i) for i in tl]


@pytest.mark.spark
@pytest.mark.slow
def test_spark_pipeline_with_compactions_archived_after_every_commit(spark: Any, tmp_path: Path) -> None:
    """Upserts, deletes and inserts into a merge-on-read table compacted every 2 deltacommits, cleaned retaining
    2 commits and archived after every commit (keep 2..3): after every step every read is what it was before the
    archival, the snapshot and time travel are the model's (or refused by cleaning, by name), hudi-rs reads the
    snapshot, the rules hold; the post-commit service archives too. Then a crash at every step of an archival
    of the table leaves it readable, exactly, and the next run finishes the work."""
    base = str(tmp_path / "t")
    # (operation, batch, fault): a write that dies in its append task stays pending until the next write rolls it
    # back; one whose inline compaction dies leaves the compaction pending until the next write runs it again
    # ("keep": written, not archived, left for the crashes)
    steps: list[tuple[str, list[dict[str, Any]], str | None]] = [
        ("insert", _batch(range(12), 1), None),
        ("upsert", _batch(range(0, 12, 3), 2), None),
        ("upsert", _batch(range(1, 12, 4), 3) + _batch([20, 21], 3), None),
        ("delete", _batch([4, 7], 4), None),
        ("upsert", _batch(range(0, 6), 5), None),
        ("upsert", _batch([8, 9, 20], 6), None),
        ("delete", _batch([0, 21], 7), None),
        ("upsert", _batch([1, 5], 8), TORN_APPEND),
        ("upsert", _batch(range(2, 12, 2), 8), None),
        ("upsert", _batch([1, 3, 30], 9), None),
        ("upsert", _batch(range(5, 10), 10), "compaction.before_complete"),
        ("upsert", _batch([2, 11], 11), None),
        ("upsert", _batch([3, 30, 31], 12), None),
        # not archived: left for the crashes below
        ("upsert", _batch([1, 2, 40], 13), "keep"),
        ("upsert", _batch([5, 41], 14), "keep"),
    ]
    model: Model = {}
    history: list[tuple[str, str, Model]] = []
    archived_data = compacted_steps = 0
    lsm_loads: list[int] = []
    real_load = ArchivedCompletionTimes._load

    def counting(self: ArchivedCompletionTimes, todo: set[str]) -> None:
        lsm_loads.append(len(todo))
        real_load(self, todo)

    for k, (op, batch, fault) in enumerate(steps):
        # the post-commit service archives every third write; the others are archived below, reads compared
        automatic = k % 3 == 2 and fault is None
        keep = fault == "keep"
        fault = None if keep else fault
        opts = {**PIPE_OPTS, "hoodie.archive.automatic": str(automatic).lower()}
        if k == 0:
            Table.create(base, PIPE_SCHEMA, opts)
        df = spark.createDataFrame(pa.Table.from_pylist(batch, PIPE_SCHEMA))
        if fault is None:
            res = Table.open(base).write(df, op, opts)
            instant = res.instant
        else:
            with pytest.raises(Exception, match="injected fault"):
                Table.open(base).write(df, op, {**opts, FAULT_OPTION: fault})
            tl = ActiveTimeline.load(LOCAL, base)
            pending = tl.pending().first()
            assert pending is not None and pending.action == (COMPACTION if fault != TORN_APPEND else DELTA_COMMIT)
            instant = tl.completed().by_action(DELTA_COMMIT).last().requested_time  # type: ignore[union-attr]
        if fault != TORN_APPEND:
            for r in batch:
                if op == "delete":
                    model.pop(r["id"], None)
                else:
                    model[r["id"]] = (r["p"], r["ts"], r["v"])
            done = ActiveTimeline.load(LOCAL, base).get(instant)
            assert done is not None and done.completion_time is not None
            history.append((instant, done.completion_time, dict(model)))
        where = f"step {k} ({op} {instant}, fault {fault})"
        if keep:
            continue
        if automatic:
            assert "archive" in res.timings
            before = None
        else:
            before = _reads(base, history)
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(ArchivedCompletionTimes, "_load", counting)
                res_a = Table.open(base).archive(opts)
            archived_data += len(res_a.data.archived)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(ArchivedCompletionTimes, "_load", counting)
            after = _reads(base, history)
        if before is not None:
            assert after == before, where
        assert after["snapshot"] == _model_rows(model), where
        assert _rs(base) == _model_rows(model), f"{where}: hudi-rs"
        for probe, _, snap in _probed(history):
            for kind in ("tt", "incr"):
                got = after[f"{kind}:{probe}"]
                assert got in ("refused", _model_rows(snap)), f"{where}: {kind} {probe}"
        assert after[f"tt:{history[-1][0]}"] != "refused" and after[f"incr:{history[-1][0]}"] != "refused"
        tl = ActiveTimeline.load(LOCAL, base)
        if any(i.action == COMMIT and i.requested_time > instant for i in tl.completed()):
            assert after["ro"] == after["snapshot"], f"{where}: read-optimized right after a compaction"
            compacted_steps += 1
        _check_rules(base)
    full = FullTimeline.load(LOCAL, base)
    arch = [i for i in full if full.is_archived(i)]
    assert archived_data > 0 and any(i.action == DELTA_COMMIT for i in arch) and any(i.action == COMMIT for i in arch)
    assert any(n > 0 for n in lsm_loads)  # views placed logs of archived deltacommits by their archived times
    assert compacted_steps >= 4
    assert len(ActiveTimeline.load(LOCAL, base).completed_commits()) <= 8

    # -- crashes: the last two writes were not archived (both tables have instants to archive)
    opts = {**PIPE_OPTS, "hoodie.archive.automatic": "false"}
    _crash_at_every_step(tmp_path, base, opts, _model_rows(model))


def _as_hook(fn: Callable[[str], None]) -> Callable[[str], None]:
    return lambda point: fn(point.removeprefix("archive."))


def _state(base: str) -> tuple[list[str], list[str], list[str], list[str]]:
    from pyhudi.metadata.partitions import metadata_base_path

    def one(b: str) -> tuple[list[str], list[str]]:
        return (FullTimeline.load(LOCAL, b).archived.requested_times(),
                sorted(p.name for p in Path(b, ".hoodie", "timeline").iterdir() if p.is_file()))

    a, b = one(base)
    c, d = one(metadata_base_path(base))
    return a, b, c, d


def _crash_at_every_step(tmp_path: Path, base: str, opts: dict[str, str], want: list[Any]) -> None:
    ref = tmp_path / "reference"
    shutil.copytree(base, ref)
    events: list[str] = []
    with faults.inject("archive.*", _as_hook(events.append)):
        res = archive(LOCAL, str(ref), None, opts)
    assert res.data.archived and res.metadata is not None and res.metadata.archived
    assert "data.version_written" in events and "metadata.version_written" in events
    reference = _state(str(ref))
    full_before = FullTimeline.load(LOCAL, base).requested_times()
    for k, event in enumerate(events):
        where = f"crash after event {k} ({event})"
        copy = tmp_path / f"crash{k}"
        shutil.copytree(base, copy)

        def hook(step: str, at: int = k, seen: list[int] = [0]) -> None:  # noqa: B006 - counts this run's events
            if seen[0] == at:
                raise Crash(step)
            seen[0] += 1

        with pytest.raises(Crash), faults.inject("archive.*", _as_hook(hook)):
            archive(LOCAL, str(copy), None, opts)
        assert _table_rows(Table.open(str(copy)).to_arrow()) == want, where
        assert _rs(str(copy)) == want, f"{where}: hudi-rs"
        assert FullTimeline.load(LOCAL, str(copy)).requested_times() == full_before, where
        archive(LOCAL, str(copy), None, opts)
        assert _state(str(copy)) == reference, where
        assert _table_rows(Table.open(str(copy)).to_arrow()) == want, f"{where}, rerun"
        shutil.rmtree(copy)
