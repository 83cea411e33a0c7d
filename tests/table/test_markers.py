from __future__ import annotations

from pathlib import Path

from pyhudi.io.storage import Storage
from pyhudi.table.markers import (
    IOType,
    create_marker,
    delete_markers,
    list_marked_files,
    marker_path,
    markers_exist,
    reconcile_against_markers,
)

LOCAL = Storage.from_uri("/")[0]
T = "20260101000000123"


def test_layout_and_round_trip(tmp_path: Path) -> None:
    base = str(tmp_path)
    p1 = create_marker(LOCAL, base, T, "region=eu", "f1-0_0-1-0_" + T + ".parquet", IOType.CREATE)
    assert p1 == f"{base}/.hoodie/.temp/{T}/region=eu/f1-0_0-1-0_{T}.parquet.marker.CREATE"
    assert Path(p1).read_bytes() == b""
    create_marker(LOCAL, base, T, "2026/01/02", "f2-0_0-1-0_" + T + ".parquet", "MERGE")
    create_marker(LOCAL, base, T, "", ".f3-0_" + T + ".log.1_0-1-0", IOType.APPEND)
    # a retried task: no error, no duplicate
    assert create_marker(LOCAL, base, T, "region=eu", "f1-0_0-1-0_" + T + ".parquet", IOType.CREATE) == p1
    assert (
        marker_path(base, T, "", "x.parquet", "CREATE") == f"{base}/.hoodie/.temp/{T}/x.parquet.marker.CREATE"
    )
    assert list_marked_files(LOCAL, base, T) == [
        ("", ".f3-0_" + T + ".log.1_0-1-0", IOType.APPEND),
        ("2026/01/02", "f2-0_0-1-0_" + T + ".parquet", IOType.MERGE),
        ("region=eu", "f1-0_0-1-0_" + T + ".parquet", IOType.CREATE),
    ]
    assert markers_exist(LOCAL, base, T)
    delete_markers(LOCAL, base, T)
    assert not markers_exist(LOCAL, base, T)
    assert list_marked_files(LOCAL, base, T) == []
    delete_markers(LOCAL, base, T)  # idempotent


def test_timeline_server_marker_files_are_read(tmp_path: Path) -> None:
    d = tmp_path / ".hoodie" / ".temp" / T
    d.mkdir(parents=True)
    (d / "MARKERS.type").write_text("TIMELINE_SERVER_BASED")
    (d / "MARKERS0").write_text(
        f"region=eu/a_0-1-0_{T}.parquet.marker.CREATE\nb_0-1-0_{T}.parquet.marker.MERGE\n"
    )
    assert list_marked_files(LOCAL, str(tmp_path), T) == [
        ("", f"b_0-1-0_{T}.parquet", IOType.MERGE),
        ("region=eu", f"a_0-1-0_{T}.parquet", IOType.CREATE),
    ]


def test_markers_pickle_free_api_in_subprocess(tmp_path: Path) -> None:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        pool.starmap(
            create_marker,
            [(LOCAL, str(tmp_path), T, "p", f"f{i}_0-1-0_{T}.parquet", "CREATE") for i in range(4)],
        )
    assert len(list_marked_files(LOCAL, str(tmp_path), T)) == 4


def test_reconcile_deletes_only_unreported_files_of_the_instant(tmp_path: Path) -> None:
    """A failed task attempt's files (marked, not in the commit) go; the commit's files, files of other instants
    and unmarked files stay."""
    base = str(tmp_path)
    other = "20251231000000001"
    good = f"f1-0_0-1-7_{T}.parquet"
    stray = f"f1-0_0-1-3_{T}.parquet"  # the same task, an earlier attempt
    stray_log = f".f2-0_{T}.log.1_1-1-4"
    foreign = f"f3-0_0-1-0_{other}.parquet"  # a marker naming another instant's file: never deleted here
    unmarked = f"f4-0_0-1-9_{T}.parquet"
    files = {"p=1": [good, stray, foreign, unmarked], "": [stray_log]}
    for part, names in files.items():
        for n in names:
            (tmp_path / part / n).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / part / n).write_bytes(b"x")
    for part, n in [("p=1", good), ("p=1", stray), ("", stray_log), ("p=1", foreign)]:
        create_marker(LOCAL, base, T, part, n, IOType.CREATE)
    metadata = {"partitionToWriteStats": {"p=1": [{"path": f"p=1/{good}"}]}}
    assert sorted(reconcile_against_markers(LOCAL, base, T, metadata)) == [stray_log, f"p=1/{stray}"]
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file() and ".hoodie" not in str(p))
    assert left == sorted(f"p=1/{n}" for n in (good, foreign, unmarked))
    assert reconcile_against_markers(LOCAL, base, T, metadata) == []  # idempotent
    assert reconcile_against_markers(LOCAL, base, "20260202000000000", metadata) == []  # no markers: nothing
