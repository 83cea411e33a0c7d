"""Timeline archival: Hudi's rules on fabricated timelines, the LSM files it writes, and whole tables (data +
metadata table, written without Spark) archived after every commit: hudi-rs and pyhudi read exactly the model,
time travel and incremental reads over archived instants, ``pyhudi validate``, crashes at every step."""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pyhudi import faults
from pyhudi.cli.main import main as cli_main
from pyhudi.errors import ConfigError, InvalidInputError
from pyhudi.metadata.indexer import record_counts
from pyhudi.metadata.partitions import metadata_base_path
from pyhudi.metadata.validate import validate_table
from pyhudi.services.archive import (
    ArchiveLimits,
    archive,
    auto_archive_enabled,
    lsm_entry,
    plan_archival,
)
from pyhudi.table.lsm_timeline import ArchivedTimeline, FullTimeline, LsmFile, LsmHistory
from pyhudi.table.properties import meta_path, read_table_config, update_table_config
from pyhudi.table.table import Table
from pyhudi.table.timeline import (
    CLEAN,
    CLUSTERING,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    INDEXING,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    ROLLBACK,
    SAVEPOINT,
    ActiveTimeline,
    Instant,
    State,
)
from tests.support.service_tables import Fab, FabTable, hudi_rs_rows, incremental_rows, pyhudi_rows
from tests.support.storage import LOCAL

hudi = pytest.importorskip("hudi")

EU, US = "region=eu", "region=us"


class Crash(Exception):
    pass


# -- fabricated timelines ---------------------------------------------------------------------------------------
def _plan(fab: Fab, lo: int = 4, hi: int = 6, **kw: Any) -> tuple[list[str], list[str]]:
    p = plan_archival(fab.tl, ArchiveLimits(lo, hi), **kw)
    return [i.requested_time for i in p.commits], [i.requested_time for i in p.others]


# -- planning rules -----------------------------------------------------------------------------------------------
def test_limits() -> None:
    assert ArchiveLimits.from_options({}) == ArchiveLimits(20, 30)
    assert ArchiveLimits.from_options({}).for_metadata_table() == ArchiveLimits(21, 31)
    with pytest.raises(ConfigError, match=r"hoodie\.keep\.max\.commits"):
        ArchiveLimits.from_options({"hoodie.keep.min.commits": "30"})
    with pytest.raises(ConfigError, match=r"hoodie\.keep\.min\.commits"):
        ArchiveLimits.from_options({"hoodie.keep.min.commits": "0", "hoodie.keep.max.commits": "3"})
    assert auto_archive_enabled({}) and not auto_archive_enabled({"hoodie.archive.automatic": "false"})
    with pytest.raises(ConfigError, match=r"hoodie\.archive\.automatic"):
        auto_archive_enabled({"hoodie.archive.automatic": "maybe"})


def test_nothing_until_more_than_max(tmp_path: Path) -> None:
    fab = Fab(tmp_path)
    fab.done(n=6)
    assert _plan(fab) == ([], [])
    fab.done()
    assert _plan(fab)[0] == fab.tl.completed_commits().requested_times()[:3]  # 7 -> 4


def test_oldest_commits_down_to_min_with_older_cleans_and_rollbacks(tmp_path: Path) -> None:
    fab = Fab(tmp_path)
    c = fab.done(n=2)
    k1 = fab.clean(c[0])
    r1 = fab.done(ROLLBACK)[0]
    c += fab.done(n=3)
    k2 = fab.clean(c[2])  # after the last archived commit (c[3]): stays
    c += fab.done(n=4)
    pending_clean = fab.pending(CLEAN)  # never archived (only completed cleans and rollbacks go)
    commits, others = _plan(fab)
    assert commits == c[:5] and others == [k1, r1]  # 9 commits -> 4 kept
    assert k2 > c[2] and pending_clean not in others
    assert len(fab.tl.completed_commits()) - len(commits) == 4


def test_cleaner_raises_the_limits(tmp_path: Path) -> None:
    fab = Fab(tmp_path)
    c = fab.done(n=10)
    # retained 5: the earliest commit to retain is c[5]; 4 commits after it + 2 = 6 kept, max 6 + (4 - 2) = 8
    p = plan_archival(fab.tl, ArchiveLimits(2, 4), cleaner_commits_retained=5)
    assert (p.min_commits, p.max_commits) == (6, 8)
    assert [i.requested_time for i in p.commits] == c[:4]
    p = plan_archival(fab.tl, ArchiveLimits(2, 4), cleaner_commits_retained=1)  # 0 + 2 = 2: no raise
    assert (p.min_commits, p.max_commits) == (2, 4) and len(p.commits) == 8


@pytest.mark.parametrize("action", [COMMIT, DELTA_COMMIT, REPLACE_COMMIT, CLUSTERING, COMPACTION, LOG_COMPACTION, INDEXING])
def test_pending_write_stops_archival(tmp_path: Path, action: str) -> None:
    fab = Fab(tmp_path)
    c = fab.done(n=3)
    fab.pending(action, inflight=action != COMPACTION)
    c += fab.done(n=6)
    commits, _ = _plan(fab, 2, 4)
    # stops before the last completed commit before the pending instant
    assert commits == c[:2]


def test_pending_clean_or_rollback_does_not_stop_archival(tmp_path: Path) -> None:
    fab = Fab(tmp_path)
    c = fab.done(n=3)
    fab.pending(CLEAN)
    fab.pending(ROLLBACK)
    c += fab.done(n=6)
    assert _plan(fab, 2, 4)[0] == c[:7]


def test_replacecommit_stays_until_its_files_are_cleaned(tmp_path: Path) -> None:
    fab = Fab(tmp_path)
    c = fab.done(n=2)
    rc = fab.done(REPLACE_COMMIT)[0]
    c2 = fab.done(n=7)
    # no clean yet: nothing from the first replacecommit on
    assert _plan(fab, 2, 4)[0] == c
    # a clean whose earliest commit to retain is not after the replacecommit: still kept
    fab.clean(rc)
    assert _plan(fab, 2, 4)[0] == c
    # a clean past it has removed the replaced file groups: the replacecommit may go
    fab.clean(c2[1])
    assert _plan(fab, 2, 4)[0] == [*c, rc, *c2[:5]]


def test_pending_clustering_stays(tmp_path: Path) -> None:
    fab = Fab(tmp_path)
    c = fab.done(n=4)
    fab.clean(c[3])
    fab.done()
    cl = fab.pending(CLUSTERING)
    fab.done(n=5)
    commits, _ = _plan(fab, 2, 4)
    assert commits and all(t < cl for t in commits)


def test_replaced_savepoint_in_clean_keeps_replacecommits(tmp_path: Path) -> None:
    """A savepoint the clean kept files for (``savepointed_timestamps``), with a replacecommit between it and the
    clean's earliest commit to retain: replacecommits from the savepoint on stay."""
    fab = Fab(tmp_path)
    c = fab.done(n=2)
    sp = c[1]
    rc = fab.done(REPLACE_COMMIT)[0]
    c2 = fab.done(n=8)
    fab.clean(c2[2], {"savepointed_timestamps": sp})
    assert _plan(fab, 2, 4)[0] == c
    fab.clean(c2[3])
    assert rc in _plan(fab, 2, 4)[0]


def test_savepoint_stops_archival(tmp_path: Path) -> None:
    fab = Fab(tmp_path)
    c = fab.done(n=3)
    sp = fab.done(SAVEPOINT)[0]
    fab.done(n=6)
    commits, _ = _plan(fab, 2, 4)
    assert commits == c and all(t < sp for t in commits)


def test_metadata_table_must_have_compacted(tmp_path: Path) -> None:
    fab = Fab(tmp_path)
    c = fab.done(n=8)
    assert _plan(fab, 2, 4, metadata_table=True, metadata_compaction=None) == ([], [])
    p = plan_archival(fab.tl, ArchiveLimits(2, 4), metadata_table=True)
    assert "not been compacted" in p.reason
    # commits completed after the metadata table's latest compaction stay
    compaction = fab.tl.get(c[3]).completion_time  # type: ignore[union-attr]
    assert _plan(fab, 2, 4, metadata_table=True, metadata_compaction=str(int(compaction) + 1))[0] == c[:4]
    assert _plan(fab, 2, 4, metadata_table=False)[0] == c[:6]


def test_metadata_table_rules(tmp_path: Path) -> None:
    """The metadata table keeps everything from the data table's earliest commit (any state) or pending instant,
    and the deltacommits its next compaction needs."""
    data, mdt = Fab(tmp_path, "data"), Fab(tmp_path, "mdt")
    mdt.clock = data.clock  # one clock for both timelines
    d = mdt.done(DELTA_COMMIT, 4)
    k = mdt.done(DELTA_COMMIT)[0]  # e.g. a data clean's deltacommit
    d += mdt.done(DELTA_COMMIT, 3)
    comp = mdt.tl.create_requested(COMPACTION, mdt.clock(), b"")
    mdt.tl.complete(mdt.tl.transition_to_inflight(comp, b""), b"", mdt.clock())
    d2 = mdt.done(DELTA_COMMIT, 3)
    first_data = data.done(n=1)[0]
    mdt.done(DELTA_COMMIT, 2)
    # the latest compaction and the deltacommits after it stay while the next compaction needs them (10)
    p = plan_archival(mdt.tl, ArchiveLimits(2, 4), data_timeline=data.tl, max_delta_commits=10)
    assert [i.requested_time for i in p.commits] == [*d[:4], k, *d[4:]]
    assert p.retain_from == comp.requested_time
    # with 1 needed, the data table's active timeline bounds: everything before its earliest commit may go
    p = plan_archival(mdt.tl, ArchiveLimits(2, 4), data_timeline=data.tl, max_delta_commits=1)
    assert [i.requested_time for i in p.commits] == [*d[:4], k, *d[4:], comp.requested_time, *d2]
    assert p.retain_from == first_data
    # keep min / max one more than the data table's
    p = plan_archival(mdt.tl, ArchiveLimits(2, 4).for_metadata_table(), data_timeline=data.tl, max_delta_commits=1)
    assert len(p.commits) == 14 - 3
    # a pending data instant (of any action) bounds the metadata table too
    data2 = Fab(tmp_path, "data2")
    data2.clock = data.clock
    p = plan_archival(mdt.tl, ArchiveLimits(2, 4), data_timeline=data2.tl, max_delta_commits=1)
    assert p.commits  # no data instant at all: no bound from the data table
    pend = data2.pending(CLEAN)
    data2.done(n=2)
    p = plan_archival(mdt.tl, ArchiveLimits(2, 4), data_timeline=data2.tl, max_delta_commits=1)
    assert p.commits and all(i.requested_time < pend for i in p.commits)
    # a completed data clean still active, requested before the data table's earliest commit (it completed late):
    # its deltacommit stays too (hudi-rs reads no block of an archived deltacommit; it listed the deleted files)
    from pyhudi.table.timeline import parse_instant_time

    data3 = Fab(tmp_path, "data3")
    data3.clock.ms = parse_instant_time(k) - 1000
    assert data3.clean(d[0]) == k
    data3.clock = data.clock
    data3.done(n=2)
    p = plan_archival(mdt.tl, ArchiveLimits(2, 4), data_timeline=data3.tl, max_delta_commits=1)
    assert [i.requested_time for i in p.commits] == d[:4]


def test_compaction_retention(tmp_path: Path) -> None:
    fab = Fab(tmp_path)
    d = fab.done(DELTA_COMMIT, 6)
    # no compaction yet and fewer deltacommits than needed: keep them all
    assert _plan(fab, 1, 2, max_delta_commits=10)[0] == []
    # 6 deltacommits, 4 needed: keep the last 4
    assert _plan(fab, 1, 2, max_delta_commits=4)[0] == d[:2]


# -- one table, archived after every commit ---------------------------------------------------------------------
OPTS = {
    "hoodie.keep.min.commits": "4",
    "hoodie.keep.max.commits": "6",
    "hoodie.cleaner.commits.retained": "2",
    "hoodie.timeline.compaction.batch.size": "3",
    "hoodie.metadata.compact.max.delta.commits": "4",
}


def _grow(ft: FabTable, rnd: random.Random, i: int) -> str:
    """One commit: new versions of one or two file groups, now and then a new group or an insert overwrite."""
    if i % 11 == 10:  # replace a group with a new one
        p = rnd.choice([EU, US])
        live = [f for (pp, f) in ft.groups if pp == p and not any(f in r.get(p, []) for _, r in ft.replaces)]
        old = rnd.choice(live)
        new = f"ow{i:02d}-0"
        return ft.write({(p, new): [(f"o{i}-{j}", i) for j in range(2)]}, {p: [old]})
    changes = {}
    for _ in range(rnd.choice([1, 1, 2])):
        p = rnd.choice([EU, US])
        fid = f"fg{rnd.randrange(5 if i > 15 else 3)}-0"
        if any(fid in r.get(p, []) for _, r in ft.replaces):
            continue
        changes[(p, fid)] = [(f"{p[-2:]}{fid[:3]}-{j}", i) for j in range(3)]
    return ft.write(changes or {(EU, "fg0-0"): [("eufg0-0", i)]})


def _active_commits(base: str) -> int:
    return len(ActiveTimeline.load(LOCAL, base).completed_commits())


def _check_reads(ft: FabTable, where: str) -> None:
    want = ft.snapshot()
    assert hudi_rs_rows(ft.base) == want, f"{where}: hudi-rs"
    assert pyhudi_rows(ft.base) == want, f"{where}: pyhudi"
    rep = validate_table(Table.open(ft.base))
    assert rep.ok, f"{where}: {rep.to_dict()}"


def _full_history_is_exact(ft: FabTable, originals: dict[str, dict[str, bytes]]) -> None:
    """Every instant ever completed is on the full timeline once, with the bytes it was written with."""
    full = FullTimeline.load(LOCAL, ft.base)
    tl = ActiveTimeline.load(LOCAL, ft.base)
    for t, files in originals.items():
        inst = full.get(t)
        assert inst is not None and inst.is_completed, t
        done = next(n for n in files if "_" in n)
        if full.is_archived(t):
            assert full.archived.read_bytes(inst) == files[done], t
        else:
            assert tl.read_bytes(inst) == files[done], t


def _snapshot_timeline(base: str, into: dict[str, dict[str, bytes]]) -> None:
    d = Path(base, ".hoodie", "timeline")
    for p in d.iterdir():
        if p.is_file() and p.name[:1].isdigit():
            into.setdefault(p.name.split(".")[0].split("_")[0], {})[p.name] = p.read_bytes()


def test_archive_after_every_commit(tmp_path: Path) -> None:
    ft = FabTable.create(tmp_path / "t", retained=2, max_delta=4)
    rnd = random.Random(7)
    originals: dict[str, dict[str, bytes]] = {}
    archived_data: list[str] = []
    archived_mdt: list[str] = []
    for i in range(45):
        _grow(ft, rnd, i)
        _snapshot_timeline(ft.base, originals)
        res = archive(LOCAL, ft.base, None, OPTS)
        archived_data += [x.requested_time for x in res.data.archived]
        assert res.metadata is not None
        archived_mdt += [x.requested_time for x in res.metadata.archived]
        # the active timeline stays within keep.max (+ pending) commits, for both tables
        assert _active_commits(ft.base) <= res.data.plan.max_commits
        # the metadata table: within keep.max + 1, or everything before what the rules keep is gone
        mdt = ActiveTimeline.load(LOCAL, metadata_base_path(ft.base)).completed_commits()
        bound = res.metadata.plan.retain_from
        kept = [c for c in mdt if bound is None or c.requested_time >= bound]
        assert len(mdt) <= max(7, len(kept)), (len(mdt), len(kept), res.metadata.plan.reason)
        if i % 5 == 4:
            _check_reads(ft, f"commit {i}")
    assert len(archived_data) > 25 and len(archived_mdt) > 25
    assert len(set(archived_data)) == len(archived_data)
    _full_history_is_exact(ft, originals)
    full = FullTimeline.load(LOCAL, ft.base)
    assert [i.requested_time for i in full.completed_commits()] == ft.commits
    # cleans went with the commits; replacecommits too, once the replaced files were cleaned
    assert any(i.action == CLEAN for i in full.archived)
    assert any(i.action == REPLACE_COMMIT for i in full.archived)
    # layer compaction happened, and the manifests were cleaned
    h = LsmHistory.for_table(LOCAL, ft.base)
    version, manifest = h.latest()
    assert any(LsmFile.parse(n).layer >= 1 for n in manifest.file_names)  # type: ignore[union-attr]
    assert len(h.manifest_versions()) <= 3 + 2 and version == h.manifest_versions()[-1]
    assert set(h.parquet_files()) == set().union(*(h.read_manifest(v).file_names for v in h.manifest_versions()))

    # time travel at every commit: the exact rows, or a clear refusal where cleaning removed file versions
    table = Table.open(ft.base)
    retained_from = None
    for t in ft.commits:
        try:
            got = pyhudi_rows(ft.base, t)
        except InvalidInputError as e:
            assert "cleaning" in str(e) and "removed the file versions" in str(e)
            continue
        retained_from = retained_from or t
        assert got == ft.snapshot(t), f"as of {t} ({'archived' if full.is_archived(t) else 'active'})"
        if not full.is_archived(t):
            assert hudi_rs_rows(ft.base, t) == ft.snapshot(t), f"hudi-rs as of {t}"
    assert retained_from is not None and retained_from > ft.commits[0]

    # incremental reads: from before the active timeline (archived commits included) up to now, and ranges
    completion = {i.requested_time: i.completion_time for i in full.completed_commits()}
    first_active = ActiveTimeline.load(LOCAL, ft.base).completed_commits().first()
    assert first_active is not None
    for start_i in (0, 5, len(ft.commits) - 12):
        start = completion[ft.commits[start_i]]
        assert start is not None
        in_range = {t for t in ft.commits if (completion[t] or "") > start}
        assert incremental_rows(ft.base, start) == ft.changed_by(in_range, None), start_i
    # a range ending before what cleaning kept is refused
    with pytest.raises(InvalidInputError, match="cleaning"):
        table.incremental_arrow("00000000000000000", completion[ft.commits[1]])

    # pyhudi timeline --archived
    out = CliRunner().invoke(cli_main, ["timeline", ft.base, "--archived", "--json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output.strip().splitlines()[-1])
    assert [r["instant"] for r in rows if r["action"] in (COMMIT, REPLACE_COMMIT)] == ft.commits
    assert {r["instant"] for r in rows if r["archived"]} == {i.requested_time for i in full.archived}
    text = CliRunner().invoke(cli_main, ["timeline", ft.base, "--archived"]).output
    assert "archived" in text.splitlines()[0] and text.count(" archived") >= len(archived_data)
    plain = json.loads(CliRunner().invoke(cli_main, ["timeline", ft.base, "--json"]).output.strip().splitlines()[-1])
    assert len(plain) == len(ActiveTimeline.load(LOCAL, ft.base))


def test_archived_rows_hold_the_instant_files(tmp_path: Path) -> None:
    """metadata = the completed file's bytes; plan = the clean's requested plan, a replacecommit's inflight
    metadata (else its requested metadata), a compaction's plan; nothing for a commit."""
    ft = FabTable.create(tmp_path / "t", retained=2, max_delta=3)
    rnd = random.Random(3)
    for i in range(12):
        _grow(ft, rnd, i)
    tl = ActiveTimeline.load(LOCAL, ft.base)
    groups: dict[str, list[Instant]] = {}
    for f in tl.all_instant_files:
        groups.setdefault(f.requested_time, []).append(f)
    for t, files in groups.items():
        states = {f.state: f for f in files}
        if State.COMPLETED not in states:
            continue
        e = lsm_entry(tl, files)
        done = states[State.COMPLETED]
        assert (e.instant_time, e.completion_time, e.action) == (t, done.completion_time, done.action)
        assert e.metadata == (tl.read_bytes(done) or None)
        if done.action == CLEAN:
            assert e.plan == tl.read_bytes(states[State.REQUESTED]) and e.plan
        elif done.action == REPLACE_COMMIT:
            assert e.plan == (tl.read_bytes(states[State.INFLIGHT]) or tl.read_bytes(states[State.REQUESTED]) or None)
        else:
            assert e.plan is None
    mdt = ActiveTimeline.load(LOCAL, metadata_base_path(ft.base))
    comps = [f for f in mdt.all_instant_files if f.action == COMPACTION and f.state == State.REQUESTED]
    assert comps
    files = [f for f in mdt.all_instant_files if f.requested_time == comps[0].requested_time]
    e = lsm_entry(mdt, files)
    assert e.action == COMMIT and e.plan == mdt.read_bytes(comps[0]) and e.plan


def test_layer_compaction_and_cleaning(tmp_path: Path) -> None:
    ft = FabTable.create(tmp_path / "t", retained=1, max_delta=2, mdt=False)
    opts = {"hoodie.keep.min.commits": "1", "hoodie.keep.max.commits": "2", "hoodie.cleaner.commits.retained": "1",
            "hoodie.timeline.compaction.batch.size": "2"}
    h = LsmHistory.for_table(LOCAL, ft.base)
    layers_seen = set()
    for i in range(24):
        ft.write({(EU, "fg0-0"): [("a", i)]})
        res = archive(LOCAL, ft.base, None, opts)
        assert res.metadata is None
        _, manifest = h.latest()
        layers = [LsmFile.parse(n).layer for n in manifest.file_names]  # type: ignore[union-attr]
        layers_seen.update(layers)
        for layer in set(layers):  # after each run no layer holds a full batch
            assert layers.count(layer) < 2
        at = ArchivedTimeline.load(LOCAL, ft.base)
        assert len(at) == len(set(at.requested_times()))
        # cleaning keeps the 3 newest snapshots (+1 per compaction of this run); only their files stay
        versions = h.manifest_versions()
        assert len(versions) <= 3 + len(res.data.compacted)
        live = set().union(*(h.read_manifest(v).file_names for v in versions))
        assert set(h.parquet_files()) == live
    assert {0, 1, 2, 3} <= layers_seen
    full = FullTimeline.load(LOCAL, ft.base)
    assert [i.requested_time for i in full.completed_commits()] == ft.commits
    assert pyhudi_rows(ft.base) == ft.snapshot() == hudi_rs_rows(ft.base)


# -- crashes ------------------------------------------------------------------------------------------------------
def _ready_table(tmp_path: Path) -> FabTable:
    """A table whose next archival archives both tables and compacts layers."""
    ft = FabTable.create(tmp_path / "ready", retained=2, max_delta=3)
    rnd = random.Random(11)
    opts = {**OPTS, "hoodie.timeline.compaction.batch.size": "2"}
    for i in range(26):
        _grow(ft, rnd, i)
        if i in (8, 12, 16):
            archive(LOCAL, ft.base, None, opts)
    return ft


def _events(ft: FabTable, opts: dict[str, str], into: Path) -> list[str]:
    shutil.copytree(ft.base, into)
    seen: list[str] = []
    with faults.inject("archive.*", _as_hook(seen.append)):
        archive(LOCAL, str(into), None, opts)
    return seen


def _state(base: str) -> tuple[list[str], list[str], list[str], list[str]]:
    """(archived instants, active timeline files, of the data table, then of the metadata table)."""
    def one(b: str) -> tuple[list[str], list[str]]:
        return (ArchivedTimeline.load(LOCAL, b).requested_times(),
                sorted(p.name for p in Path(b, ".hoodie", "timeline").iterdir() if p.is_file()))
    a, b = one(base)
    c, d = one(metadata_base_path(base))
    return a, b, c, d


def test_crash_at_every_step_then_rerun(tmp_path: Path) -> None:
    ft = _ready_table(tmp_path)
    opts = {**OPTS, "hoodie.timeline.compaction.batch.size": "2"}
    events = _events(ft, opts, tmp_path / "reference")
    want = _state(str(tmp_path / "reference"))
    assert "data:version_written" in events and "metadata:version_written" in events
    assert "data:compaction_written" in events and "data:files_cleaned" in events
    assert events.count("data:instant_deleted") > 2 and events.count("metadata:instant_deleted") > 2
    full_before = FullTimeline.load(LOCAL, ft.base)
    originals: dict[str, dict[str, bytes]] = {}
    _snapshot_timeline(ft.base, originals)
    for k, event in enumerate(events):
        where = f"crash after event {k} ({event})"
        base = tmp_path / f"crash{k}"
        shutil.copytree(ft.base, base)
        ft_k = FabTable(str(base), groups=ft.groups, replaces=ft.replaces, commits=ft.commits)

        def hook(step: str, n: list[int] = [0], at: int = k) -> None:  # noqa: B006 - counts this run's events
            if n[0] == at:
                raise Crash(step)
            n[0] += 1

        with pytest.raises(Crash), faults.inject("archive.*", _as_hook(hook)):
            archive(LOCAL, str(base), None, opts)
        # readable, exactly, right after the crash
        _check_reads(ft_k, where)
        full = FullTimeline.load(LOCAL, str(base))
        assert full.requested_times() == full_before.requested_times(), where
        _full_history_is_exact(ft_k, originals)
        # the next run completes the work
        archive(LOCAL, str(base), None, opts)
        assert _state(str(base)) == want, where
        _check_reads(ft_k, f"{where}, rerun")


def test_missing_version_file(tmp_path: Path) -> None:
    """Hudi rewrites ``_version_`` by delete + create: a crash in between leaves none. Readers take the latest
    manifest, and the next archival writes it again."""
    ft = _ready_table(tmp_path)
    archive(LOCAL, ft.base, None, OPTS)
    h = LsmHistory.for_table(LOCAL, ft.base)
    v = h.latest_version()
    Path(h.version_path).unlink()
    assert h.latest_version() == v
    _check_reads(ft, "no _version_")
    res = archive(LOCAL, ft.base, None, OPTS)
    assert Path(h.version_path).read_text() == str(h.manifest_versions()[-1])
    assert res.data.recovered == ()


def test_half_deleted_instants_are_finished(tmp_path: Path) -> None:
    """A run that stopped while deleting active files: the archived instants still active are read once (from
    the active timeline) and the next run deletes what is left before planning."""
    ft = _ready_table(tmp_path)
    k = {"n": 0}

    def hook(step: str) -> None:
        if step == "data:instant_deleted":
            k["n"] += 1
            if k["n"] == 2:
                raise Crash(step)

    with pytest.raises(Crash), faults.inject("archive.*", _as_hook(hook)):
        archive(LOCAL, ft.base, None, OPTS)
    full = FullTimeline.load(LOCAL, ft.base)
    tl = ActiveTimeline.load(LOCAL, ft.base)
    both = [i.requested_time for i in full.archived if tl.contains(i.requested_time)]
    assert both and all(tl.get(t).is_completed for t in both)  # type: ignore[union-attr]
    res = archive(LOCAL, ft.base, None, OPTS)
    assert list(res.data.recovered) == both
    tl = tl.reload()
    assert not any(tl.contains(t) for t in both)


# -- refusals -----------------------------------------------------------------------------------------------------
def test_refusals(tmp_path: Path) -> None:
    ft = FabTable.create(tmp_path / "t", mdt=False)
    ft.write({(EU, "fg0-0"): [("a", 1)]})
    with pytest.raises(ConfigError, match=r"hoodie\.archive\.async"):
        archive(LOCAL, ft.base, None, {"hoodie.archive.async": "true"})
    with pytest.raises(ConfigError, match=r"hoodie\.archive\.beyond\.savepoint"):
        archive(LOCAL, ft.base, None, {"hoodie.archive.beyond.savepoint": "true"})
    with pytest.raises(ConfigError, match=r"hoodie\.timeline\.compaction\.batch\.size"):
        archive(LOCAL, ft.base, None, {"hoodie.timeline.compaction.batch.size": "1"})
    update_table_config(LOCAL, meta_path(ft.base), {"hoodie.table.type": "MERGE_ON_READ"})
    assert read_table_config(LOCAL, meta_path(ft.base)).is_mor
    # a merge-on-read table is archived; its compaction trigger counts (a bad value is an error naming it)
    with pytest.raises(ConfigError, match=r"hoodie\.compact\.inline\.max\.delta\.commits"):
        archive(LOCAL, ft.base, None, {"hoodie.compact.inline.max.delta.commits": "0"})
    assert not archive(LOCAL, ft.base).data.archived


def test_no_metadata_table_archives_the_data_table(tmp_path: Path) -> None:
    ft = FabTable.create(tmp_path / "t", mdt=False, retained=1)
    for i in range(9):
        ft.write({(EU, f"fg{i % 2}-0"): [("a", i)]})
    res = archive(LOCAL, ft.base, None, OPTS)
    assert res.metadata is None and len(res.data.archived) >= 3
    assert pyhudi_rows(ft.base) == ft.snapshot() == hudi_rs_rows(ft.base)


def _as_hook(fn: Callable[[str], None] | None) -> Callable[[str], None]:
    """A fault-point handler calling ``fn`` with ``<table>:<step>`` (the point ``archive.<table>.<step>``)."""
    return lambda point: fn(point.removeprefix("archive.").replace(".", ":", 1)) if fn is not None else None


def _hook_counter(stop: str) -> Callable[[str], None]:
    def hook(step: str) -> None:
        if step == stop:
            raise Crash(step)
    return hook


def test_crash_before_the_manifest_leaves_an_unlisted_file(tmp_path: Path) -> None:
    ft = _ready_table(tmp_path)
    with pytest.raises(Crash), faults.inject("archive.*", _as_hook(_hook_counter("data:file_written"))):
        archive(LOCAL, ft.base, None, OPTS)
    h = LsmHistory.for_table(LOCAL, ft.base)
    listed = set().union(*(h.read_manifest(v).file_names for v in h.manifest_versions()))
    stray = set(h.parquet_files()) - listed
    assert len(stray) == 1
    _check_reads(ft, "unlisted file")
    archive(LOCAL, ft.base, None, OPTS)  # writes the same file again and lists it
    assert stray <= set(h.latest()[1].file_names)


def test_time_travel_to_archived_instants(tmp_path: Path) -> None:
    """Appends only: cleaning never has anything to delete, so every archived instant stays readable; pyhudi and
    hudi-rs read each one exactly, and an incremental read from the beginning returns every row."""
    ft = FabTable.create(tmp_path / "t", retained=2, max_delta=4)
    for i in range(16):
        ft.write({(EU if i % 2 else US, f"ap{i:02d}-0"): [(f"a{i}", i)]})
        archive(LOCAL, ft.base, None, OPTS)
    full = FullTimeline.load(LOCAL, ft.base)
    archived = [t for t in ft.commits if full.is_archived(t)]
    assert len(archived) >= 9 and not any(i.action == CLEAN for i in full)
    for t in ft.commits:
        assert pyhudi_rows(ft.base, t) == ft.snapshot(t), t
        assert hudi_rs_rows(ft.base, t) == ft.snapshot(t), t
    assert incremental_rows(ft.base, "00000000000000000") == ft.snapshot()
    completion = {i.requested_time: i.completion_time for i in full.completed_commits()}
    mid = ft.commits[4]
    want = ft.changed_by({t for t in ft.commits if (completion[t] or "") > (completion[mid] or "")}, None)
    assert incremental_rows(ft.base, completion[mid] or "") == want
    assert incremental_rows(ft.base, completion[mid] or "", completion[ft.commits[6]]) == ft.changed_by(
        set(ft.commits[5:7]), ft.commits[6])


# -- Spark: the real write path, archived after every commit --------------------------------------------------------
SPARK_OPTS = {
    "hoodie.table.name": "arch",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "dt",
    "hoodie.table.ordering.fields": "ts",
    "hoodie.keep.min.commits": "5",
    "hoodie.keep.max.commits": "7",
    "hoodie.cleaner.commits.retained": "3",
    "hoodie.metadata.compact.max.delta.commits": "4",
    "hoodie.timeline.compaction.batch.size": "3",
    # the test archives after each commit itself, with crashes injected; the writes' own archival would leave it
    # nothing to do
    "hoodie.archive.automatic": "false",
}
DATES = ("2026-11-01", "2026-11-02", "2026-11-03")


@pytest.mark.spark
@pytest.mark.slow
def test_forty_spark_commits_archived_after_each(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import pyarrow as pa

    schema = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("dt", pa.string()), ("v", pa.int64())])
    base = str(tmp_path / "t")
    table = Table.create(base, schema, SPARK_OPTS)
    rnd = random.Random(5)
    live: dict[str, tuple[str, int, int, str]] = {}  # id -> (dt, ts, v, instant of its latest version)
    snapshots: dict[str, list[tuple[str, str, int, int]]] = {}
    commits: list[str] = []

    def snap() -> list[tuple[str, str, int, int]]:
        return sorted((k, dt, ts, v) for k, (dt, ts, v, _) in live.items())

    def rows_of(t: pa.Table) -> list[tuple[str, str, int, int]]:
        return sorted(zip(*(t.column(c).to_pylist() for c in ("id", "dt", "ts", "v")), strict=True)) if t.num_rows else []

    def rs(as_of: str | None = None) -> list[tuple[str, str, int, int]]:
        opts = hudi.HudiReadOptions() if as_of is None else hudi.HudiReadOptions().with_as_of_timestamp(as_of)
        batches = list(hudi.HudiTableBuilder.from_base_uri(base).build().read(opts))
        return rows_of(pa.Table.from_batches(batches)) if batches else []

    # crash the first archival from commit 10 / 20 / 30 on that reaches these steps
    crashes = [(10, "data:instant_deleted"), (20, "metadata:version_written"), (30, "data:compaction_written")]
    crashed: list[str] = []
    for i in range(40):
        ids = sorted({f"k{rnd.randrange(40):02d}" for _ in range(rnd.randrange(2, 7))})
        op = "delete" if i % 9 == 8 and live else "upsert"
        if op == "delete":
            ids = sorted(rnd.sample(sorted(live), min(3, len(live))))
        batch = [{"id": k, "ts": i, "dt": DATES[int(k[1:]) % 3], "v": i * 100 + int(k[1:])} for k in ids]
        res = Table.open(base).write(spark.createDataFrame(pa.Table.from_pylist(batch, schema=schema)), op, SPARK_OPTS)
        commits.append(res.instant)
        for r in batch:
            if op == "delete":
                live.pop(r["id"], None)
            else:
                live[r["id"]] = (r["dt"], r["ts"], r["v"], res.instant)
        snapshots[res.instant] = snap()
        armed = next((step for start, step in crashes if start <= i and step not in crashed), None)
        try:
            with faults.inject("archive.*", _as_hook(_hook_counter(armed) if armed else None)):
                result = archive(LOCAL, base, None, SPARK_OPTS)
        except Crash:
            crashed.append(str(armed))
            assert rs() == snapshots[res.instant], f"commit {i}: hudi-rs after a crashed archival ({armed})"
            assert rows_of(Table.open(base).to_arrow()) == snapshots[res.instant]
            assert validate_table(Table.open(base)).ok
            continue  # the next commit writes on top of it; its archival finishes this one's work
        assert len(ActiveTimeline.load(LOCAL, base).completed_commits()) <= result.data.plan.max_commits
        if i % 10 == 9:
            assert rs() == snapshots[res.instant], f"commit {i}: hudi-rs"
            rep = validate_table(Table.open(base))
            assert rep.ok and rep.record_index is not None, rep.to_dict()

    assert crashed == [step for _, step in crashes]
    table = Table.open(base)
    full = table.full_timeline()
    archived = [t for t in commits if full.is_archived(t)]
    assert len(archived) > 25 and [i.requested_time for i in full.completed_commits()] == commits
    assert any(i.action == CLEAN for i in full.archived)
    mdt_archived = ArchivedTimeline.load(LOCAL, metadata_base_path(base))
    assert len(mdt_archived) > 25 and any(i.action == COMMIT for i in mdt_archived)  # compactions archived too
    assert rs() == snap() == rows_of(table.to_arrow())
    assert validate_table(table).ok

    # time travel: exact, or refused where cleaning removed the file versions
    refused = 0
    for t in commits:
        try:
            got = rows_of(table.to_arrow(as_of=t))
        except InvalidInputError as e:
            assert "cleaning" in str(e)
            refused += 1
            continue
        assert got == snapshots[t], t
    assert 0 < refused < len(commits)
    mid = commits[-3]
    assert rows_of(table.read(spark, as_of=mid).toArrow()) == snapshots[mid]

    # incremental (Spark) from before the active timeline: every live row last written after the start
    completion = {i.requested_time: i.completion_time or "" for i in full.completed_commits()}
    for j in (0, 10, 25):
        start = completion[commits[j]]
        want = sorted((k, dt, ts, v) for k, (dt, ts, v, inst) in live.items() if completion[inst] > start)
        assert rows_of(table.read_incremental(start, spark=spark).toArrow()) == want, j
    with pytest.raises(InvalidInputError, match="cleaning"):
        table.read_incremental(completion[commits[0]], completion[commits[2]], spark=spark)


# -- readers and services that walk the timeline ----------------------------------------------------------------------
def test_cleaning_sees_files_of_archived_commits(tmp_path: Path) -> None:
    """An instant that stays on the active timeline while the commits around it are archived (a completed
    ``indexing`` instant is never archived) does not hide the files of the archived commits after it."""
    from pyhudi.services.clean import clean

    ft = FabTable.create(tmp_path / "t", mdt=False, retained=1)
    ts = [ft.write({(EU, "fg0-0"): [("a", i)]}, services=False) for i in range(10)]
    res = archive(LOCAL, ft.base, None, {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
                                         "hoodie.cleaner.commits.retained": "1"})
    assert [i.requested_time for i in res.data.archived] == ts[:8]
    old = str(int(ts[0]) + 1)  # an indexing instant between the first two (archived) commits
    tdir = Path(ft.base, ".hoodie", "timeline")
    for name in (f"{old}.indexing.requested", f"{old}.indexing.inflight", f"{old}_{int(old) + 1}.indexing"):
        (tdir / name).write_bytes(b"")
    assert ActiveTimeline.load(LOCAL, ft.base).first().requested_time == old  # type: ignore[union-attr]
    clean(LOCAL, ft.base, None, 1, ft.gen)
    left = sorted(p.name.rsplit("_", 1)[1].split(".")[0] for p in Path(ft.base, EU).glob("fg0-0_*.parquet"))
    assert left == ts[8:]
    assert pyhudi_rows(ft.base) == ft.snapshot() == hudi_rs_rows(ft.base)


def test_record_counts_and_schema_from_archived_commits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ft = FabTable.create(tmp_path / "t", mdt=False, retained=1)
    for i in range(8):
        ft.write({(EU, f"fg{i}-0"): [(f"a{i}", i), (f"b{i}", i)]}, services=False)
    archive(LOCAL, ft.base, None, {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
                                   "hoodie.cleaner.commits.retained": "1"})
    table = Table.open(ft.base)
    tl = table.timeline()
    latest = {f.file_name for f in table.view(tl).latest_base_files()}
    assert len(latest) == 8 and len(tl.completed_commits()) == 2
    counts = record_counts(tl, latest, ArchivedTimeline.load(LOCAL, ft.base))
    assert {n: counts[n] for n in latest} == dict.fromkeys(latest, 2)  # 6 of them written by archived commits
    # every write resolves the schema: an active commit carrying one answers without reading the LSM timeline
    loads: list[str] = []
    load = ArchivedTimeline.load

    def counted(*a: Any, **kw: Any) -> ArchivedTimeline:
        loads.append(str(a[1]))
        return load(*a, **kw)

    monkeypatch.setattr(ArchivedTimeline, "load", counted)
    schema = table.schema()
    assert schema.names == ["id", "v", "region"] and loads == []
    # active commits that carry no schema: the latest archived commit that does
    for inst in tl.completed_commits():
        meta = tl.read_commit_metadata(inst)
        meta["extraMetadata"] = {}
        Path(tl.path_of(inst)).write_bytes(avro_container(meta))
    assert not any((tl.read_commit_metadata(i).get("extraMetadata") or {}) for i in tl.completed_commits())
    cfg = read_table_config(LOCAL, meta_path(ft.base))
    update_table_config(LOCAL, meta_path(ft.base), deletes=["hoodie.table.create.schema"])
    assert Table.open(ft.base).schema() == schema and cfg.create_schema
    assert loads == [ft.base]


def avro_container(meta: dict[str, Any]) -> bytes:
    from pyhudi.io import avro

    return avro.write_container(meta, "HoodieCommitMetadata")


def test_compaction_candidates() -> None:
    """``getCandidateFiles``: the oldest consecutive files of a layer, at most a batch, stopping once past ~1000 MB
    (a lone file past it is skipped)."""
    from pyhudi.services.archive import COMPACTION_MAX_BYTES, _candidate_files
    from pyhudi.table.lsm_timeline import ManifestEntry

    def files(*sizes: int) -> list[ManifestEntry]:
        return [ManifestEntry(f"{i:017d}_{i:017d}_0.parquet", n) for i, n in enumerate(sizes)]

    mb = 1024 * 1024
    names = [f.file_name for f in files(*range(12))]
    assert _candidate_files(files(*[10] * 12), 10, COMPACTION_MAX_BYTES) == names[:10]
    assert _candidate_files(files(COMPACTION_MAX_BYTES + 1, 10, 10), 10, COMPACTION_MAX_BYTES) == names[1:3]
    assert _candidate_files(files(600 * mb, 600 * mb, 10), 10, COMPACTION_MAX_BYTES) == names[:2]
