"""Heartbeats: how a failed write is told apart from a live one.

A writer keeps ``.hoodie/.heartbeat/<instant>`` fresh, rewriting it every ``hoodie.client.heartbeat.interval_in_ms``,
from the moment it reserves its instant time until the instant completes (the file is then deleted) or is rolled
back. Hudi reads only the file's modification time: the heartbeat has expired once it is older than the interval
times ``hoodie.client.heartbeat.tolerable.misses``. pyhudi also writes who holds it (host, boot id, process id and
start time) and whether the write gave up, so that

- a write whose process on this host is gone is known dead at once (a write retried right after a crash rolls
  the dead attempt back and proceeds immediately),
- a write that failed in a process that lives on (an exception) is dead at once (state ``aborted``),
- any other write is live until its heartbeat expires.

An instant with no heartbeat file (a writer that keeps none) counts as live until its requested time is older than
the tolerance. pyhudi writes a heartbeat for every write, whatever the failed-writes policy, so that no mode can
roll back a live write.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import posixpath
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, tzinfo
from typing import Any

from pyhudi import config as C
from pyhudi.errors import PyHudiError, StorageError
from pyhudi.io.storage import Storage
from pyhudi.table.properties import METAFOLDER
from pyhudi.table.timeline import InstantTimeGenerator, parse_instant_time

HEARTBEAT_FOLDER = ".heartbeat"
WRITER = "pyhudi"
LIVE = "live"
ABORTED = "aborted"


def heartbeat_dir(base_path: str) -> str:
    return posixpath.join(base_path, METAFOLDER, HEARTBEAT_FOLDER)


def heartbeat_path(base_path: str, instant: str) -> str:
    return posixpath.join(heartbeat_dir(base_path), instant)


@dataclass(frozen=True)
class HeartbeatConfig:
    interval_ms: int
    tolerable_misses: int

    @staticmethod
    def from_options(options: Mapping[str, Any]) -> HeartbeatConfig:
        return HeartbeatConfig(
            C.int_option(options, C.HEARTBEAT_INTERVAL_MS, 1), C.int_option(options, C.HEARTBEAT_TOLERABLE_MISSES, 1)
        )

    @property
    def tolerance_ms(self) -> int:
        return self.interval_ms * self.tolerable_misses


# -- who a writer is --------------------------------------------------------------------------------------------------
def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def _process_start(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks after boot, from /proc), None if unknown or gone."""
    stat = _read_text(f"/proc/{pid}/stat")
    if stat is None:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


@dataclass(frozen=True)
class Owner:
    """A writer process: enough to tell, on its own host, whether it still runs."""

    host: str
    boot_id: str
    pid: int
    start: str

    @staticmethod
    def current() -> Owner:
        pid = os.getpid()
        return Owner(socket.gethostname(), _read_text("/proc/sys/kernel/random/boot_id") or "", pid,
                     _process_start(pid) or "")

    def is_local(self) -> bool:
        me = Owner.current()
        return self.host == me.host and self.boot_id == me.boot_id

    def is_running(self) -> bool:
        """Whether the process runs (meaningful only when :meth:`is_local`)."""
        if self.start and os.path.isdir("/proc"):
            return _process_start(self.pid) == self.start
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def describe(self) -> str:
        return f"process {self.pid} on {self.host}"


def _content(owner: Owner, instant: str, state: str) -> bytes:
    return json.dumps({"writer": WRITER, "instant": instant, "state": state, "host": owner.host,
                       "bootId": owner.boot_id, "pid": owner.pid, "start": owner.start}).encode()


def _parse(data: bytes) -> tuple[Owner | None, str]:
    """(owner, state) of a heartbeat file; (None, live) for Hudi's empty files and anything unreadable."""
    try:
        d = json.loads(data.decode("utf-8")) if data else None
        if isinstance(d, dict) and d.get("writer") == WRITER:
            owner = Owner(str(d["host"]), str(d.get("bootId") or ""), int(d["pid"]), str(d.get("start") or ""))
            return owner, str(d.get("state") or LIVE)
    except (ValueError, KeyError, TypeError):
        pass
    return None, LIVE


# -- the state of another writer's instant ----------------------------------------------------------------------------
class WriterState(enum.Enum):
    LIVE = "live"
    DEAD = "dead"


@dataclass(frozen=True)
class WriterStatus:
    state: WriterState
    reason: str  #: why, for messages

    @property
    def is_dead(self) -> bool:
        return self.state is WriterState.DEAD


def writer_status(
    storage: Storage, base_path: str, instant: str, config: HeartbeatConfig, now_ms: int | None = None,
    *, zone: tzinfo | None = UTC,
) -> WriterStatus:
    """Whether the write holding ``instant`` is live or has failed, from its heartbeat (none yet: from the age
    of its instant time, in the table's timeline ``zone``)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    path = heartbeat_path(base_path, instant)
    try:
        st = storage.status(path)
        data = storage.read_bytes(path)
    except StorageError:
        try:
            age = now - parse_instant_time(instant, zone)
        except ValueError:
            return WriterStatus(WriterState.DEAD, "no heartbeat, unparsable instant time")
        if age > config.tolerance_ms:
            return WriterStatus(WriterState.DEAD, f"no heartbeat, requested {age // 1000} s ago")
        return WriterStatus(WriterState.LIVE, f"no heartbeat yet, requested {max(0, age) // 1000} s ago")
    owner, state = _parse(data)
    if state == ABORTED:
        return WriterStatus(WriterState.DEAD, "the write failed")
    if owner is not None and owner.is_local() and not owner.is_running():
        return WriterStatus(WriterState.DEAD, f"{owner.describe()} is gone")
    age = now - (st.mtime_ns // 1_000_000 if st.mtime_ns is not None else 0)
    who = f" by {owner.describe()}" if owner is not None else ""
    if age > config.tolerance_ms:
        return WriterStatus(WriterState.DEAD, f"heartbeat expired {age // 1000} s ago{who}")
    return WriterStatus(WriterState.LIVE, f"heartbeat {max(0, age) / 1000:.0f} s old{who}")


def heartbeat_instants(storage: Storage, base_path: str) -> list[str]:
    """Instants that have a heartbeat file."""
    return sorted(st.name for st in storage.list(heartbeat_dir(base_path)) if not st.is_dir and st.name.isdigit())


# -- this writer's heartbeat ------------------------------------------------------------------------------------------
class Heartbeat:
    """The heartbeat of one of this process's writes. :meth:`reserve` creates it (failing if the instant time is
    taken), :meth:`start` keeps it fresh from a daemon thread, :meth:`stop` deletes it once the instant is
    completed or rolled back, :meth:`abort` marks the write failed."""

    def __init__(self, storage: Storage, base_path: str, instant: str, config: HeartbeatConfig) -> None:
        self.storage = storage
        self.base_path = base_path
        self.instant = instant
        self.config = config
        self.path = heartbeat_path(base_path, instant)
        self.owner = Owner.current()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._done = False

    @classmethod
    def reserve(cls, storage: Storage, base_path: str, instant: str, config: HeartbeatConfig) -> Heartbeat:
        """Create the heartbeat of ``instant``; StorageError if the file exists (another writer took the time)."""
        hb = cls(storage, base_path, instant, config)
        storage.write_bytes(hb.path, _content(hb.owner, instant, LIVE), overwrite=False)
        return hb

    @classmethod
    def reserve_next(cls, storage: Storage, base_path: str, gen: InstantTimeGenerator, latest: str | None,
                     config: HeartbeatConfig) -> Heartbeat:
        """Reserve a fresh instant time: later than ``latest`` (the timeline's newest time) and every time another
        writer holds a heartbeat for, retried past times that another process takes meanwhile."""
        floor = max(filter(None, [latest, *heartbeat_instants(storage, base_path)]), default=None)
        for _ in range(100):
            t = gen.next(floor=floor)
            try:
                return cls.reserve(storage, base_path, t, config)
            except StorageError:  # another writer took this time
                floor = t
        raise PyHudiError(f"{base_path}: could not reserve an instant time")

    def beat(self) -> None:
        with self._lock:
            if not self._done:
                self.storage.write_bytes(self.path, _content(self.owner, self.instant, LIVE))

    def start(self) -> Heartbeat:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"pyhudi-heartbeat-{self.instant}", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.config.interval_ms / 1000):
            with contextlib.suppress(Exception):  # a missed beat: it may expire, and the commit-time check says so
                self.beat()

    def check(self) -> None:
        """PyHudiError unless this write's heartbeat is still its own and fresh (it may have been declared dead
        and rolled back by another writer while this one stalled)."""
        status = writer_status(self.storage, self.base_path, self.instant, self.config)
        try:
            owner, state = _parse(self.storage.read_bytes(self.path))
        except StorageError:
            owner, state = None, LIVE
        if owner != self.owner or state != LIVE or status.is_dead:
            raise PyHudiError(
                f"{self.base_path}: the heartbeat of instant {self.instant} has expired ({status.reason}): another "
                "writer may have rolled this write back; it is abandoned"
            )

    def _halt(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=max(1.0, self.config.interval_ms / 1000 + 1))

    def stop(self) -> None:
        """The instant is completed or rolled back: the heartbeat goes."""
        self._halt()
        with self._lock:
            self._done = True
            self.storage.delete(self.path, missing_ok=True)

    def abort(self) -> None:
        """The write failed in this (living) process: others may roll it back now."""
        self._halt()
        with self._lock:
            self._done = True
            with contextlib.suppress(Exception):
                self.storage.write_bytes(self.path, _content(self.owner, self.instant, ABORTED))


def delete_heartbeat(storage: Storage, base_path: str, instant: str) -> None:
    storage.delete(heartbeat_path(base_path, instant), missing_ok=True)
