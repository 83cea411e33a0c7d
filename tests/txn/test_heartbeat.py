"""Heartbeats tell failed writes from live ones: a fresh heartbeat is live, an expired one dead, a process gone
from this host dead at once, an aborted write dead at once, and an instant without heartbeat live until it is
older than the tolerance."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pyhudi.errors import PyHudiError, StorageError
from pyhudi.io.storage import Storage
from pyhudi.table.timeline import format_instant_time
from pyhudi.txn.heartbeat import (
    Heartbeat,
    HeartbeatConfig,
    Owner,
    heartbeat_instants,
    heartbeat_path,
    writer_status,
)

LOCAL = Storage.from_uri("/")[0]
CFG = HeartbeatConfig(interval_ms=200, tolerable_misses=2)


def _now_instant(offset_ms: int = 0) -> str:
    return format_instant_time(int(time.time() * 1000) + offset_ms)


def test_live_then_stopped(tmp_path: Path) -> None:
    base = str(tmp_path)
    t = _now_instant()
    hb = Heartbeat.reserve(LOCAL, base, t, CFG).start()
    assert heartbeat_instants(LOCAL, base) == [t]
    time.sleep(0.7)  # longer than the tolerance: the thread keeps it fresh
    assert not writer_status(LOCAL, base, t, CFG).is_dead
    hb.check()
    hb.stop()
    assert not Path(heartbeat_path(base, t)).exists()


def test_reserve_fails_when_taken(tmp_path: Path) -> None:
    t = _now_instant()
    Heartbeat.reserve(LOCAL, str(tmp_path), t, CFG)
    with pytest.raises(StorageError):
        Heartbeat.reserve(LOCAL, str(tmp_path), t, CFG)


def test_expired_heartbeat_is_dead(tmp_path: Path) -> None:
    base = str(tmp_path)
    t = _now_instant()
    hb = Heartbeat.reserve(LOCAL, base, t, CFG)  # never refreshed
    old = time.time() - 10
    os.utime(heartbeat_path(base, t), (old, old))
    st = writer_status(LOCAL, base, t, CFG)
    assert st.is_dead and "expired" in st.reason
    with pytest.raises(PyHudiError, match="expired"):
        hb.check()


def test_aborted_write_is_dead_at_once(tmp_path: Path) -> None:
    base = str(tmp_path)
    t = _now_instant()
    hb = Heartbeat.reserve(LOCAL, base, t, HeartbeatConfig(60_000, 2)).start()
    assert not writer_status(LOCAL, base, t, HeartbeatConfig(60_000, 2)).is_dead
    hb.abort()
    st = writer_status(LOCAL, base, t, HeartbeatConfig(60_000, 2))
    assert st.is_dead and "failed" in st.reason


def test_writer_process_gone_is_dead_at_once(tmp_path: Path) -> None:
    """A heartbeat written by another process on this host, fresh, but the process has exited."""
    base = str(tmp_path)
    t = _now_instant()
    code = (
        "import sys; from pyhudi.io.storage import Storage; from pyhudi.txn.heartbeat import Heartbeat, "
        "HeartbeatConfig; Heartbeat.reserve(Storage.from_uri('/')[0], sys.argv[1], sys.argv[2], "
        "HeartbeatConfig(60000, 2))"
    )
    subprocess.run([sys.executable, "-c", code, base, t], check=True, timeout=120)
    st = writer_status(LOCAL, base, t, HeartbeatConfig(60_000, 2))
    assert st.is_dead and "gone" in st.reason


def test_live_process_of_another_writer_is_live(tmp_path: Path) -> None:
    base = str(tmp_path)
    t = _now_instant()
    code = (
        "import sys, time; from pyhudi.io.storage import Storage; from pyhudi.txn.heartbeat import Heartbeat, "
        "HeartbeatConfig; Heartbeat.reserve(Storage.from_uri('/')[0], sys.argv[1], sys.argv[2], "
        "HeartbeatConfig(60000, 2)); print('ok', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, base, t], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ok"
        assert not writer_status(LOCAL, base, t, HeartbeatConfig(60_000, 2)).is_dead
    finally:
        proc.kill()
        proc.wait()
    assert writer_status(LOCAL, base, t, HeartbeatConfig(60_000, 2)).is_dead


def test_instant_without_heartbeat(tmp_path: Path) -> None:
    base = str(tmp_path)
    assert not writer_status(LOCAL, base, _now_instant(), CFG).is_dead  # a writer that keeps none: live for now
    assert writer_status(LOCAL, base, _now_instant(-5_000), CFG).is_dead


def test_hudi_style_empty_heartbeat_uses_mtime(tmp_path: Path) -> None:
    base = str(tmp_path)
    t = _now_instant()
    Path(heartbeat_path(base, t)).parent.mkdir(parents=True)
    Path(heartbeat_path(base, t)).write_bytes(b"")
    assert not writer_status(LOCAL, base, t, CFG).is_dead
    old = time.time() - 10
    os.utime(heartbeat_path(base, t), (old, old))
    assert writer_status(LOCAL, base, t, CFG).is_dead


def test_owner_of_this_process_runs() -> None:
    me = Owner.current()
    assert me.is_local() and me.is_running()
    assert not Owner(me.host, me.boot_id, me.pid, "1").is_running()  # same pid, another start time: reused pid
