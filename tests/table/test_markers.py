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
