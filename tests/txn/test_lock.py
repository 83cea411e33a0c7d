"""Table locks: the file-system lock is exclusive across processes, taken over from a holder that is gone or
expired, refused on storage without atomic create; acquisition gives up with an error naming the holder."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pyhudi import config as C
from pyhudi.errors import ConfigError
from pyhudi.io.storage import Storage
from pyhudi.txn.lock import (
    FILE_SYSTEM_LOCK,
    IN_PROCESS_LOCK,
    FileSystemBasedLockProvider,
    InProcessLockProvider,
    LockTimeoutError,
    NoLock,
    lock_provider,
)

LOCAL = Storage.from_uri("/")[0]
FAST = {C.LOCK_NUM_RETRIES: "2", C.LOCK_WAIT_TIME_MS: "100", C.LOCK_RETRY_WAIT_MS: "50"}


def test_file_lock_is_exclusive(tmp_path: Path) -> None:
    a = FileSystemBasedLockProvider(LOCAL, str(tmp_path), FAST)
    b = FileSystemBasedLockProvider(LOCAL, str(tmp_path), FAST)
    a.lock()
    assert (tmp_path / ".hoodie" / "lock").exists()
    assert not b.try_lock()
    with pytest.raises(LockTimeoutError, match=r"process \d+ on"):
        b.lock()
    a.unlock()
    with b.held():
        assert not a.try_lock()
    assert a.try_lock()


def test_lock_of_a_process_that_is_gone_is_taken_over(tmp_path: Path) -> None:
    code = (
        "import sys; from pyhudi.io.storage import Storage; from pyhudi.txn.lock import FileSystemBasedLockProvider;"
        "FileSystemBasedLockProvider(Storage.from_uri('/')[0], sys.argv[1], {}).lock()"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, timeout=120)
    assert (tmp_path / ".hoodie" / "lock").exists()
    assert FileSystemBasedLockProvider(LOCAL, str(tmp_path), FAST).try_lock()


def test_expired_lock_is_taken_over(tmp_path: Path) -> None:
    import os

    lock = tmp_path / ".hoodie" / "lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("{}")  # a Java writer's lock: no holder we can check
    p = FileSystemBasedLockProvider(LOCAL, str(tmp_path), {**FAST, C.LOCK_FILESYSTEM_EXPIRE: "1"})
    assert not p.try_lock()
    old = time.time() - 120
    os.utime(lock, (old, old))
    assert p.try_lock()
    never = FileSystemBasedLockProvider(LOCAL, str(tmp_path), FAST)  # expire 0: never taken over
    os.utime(lock, (old, old))
    assert not never.try_lock()


def test_a_held_lock_is_kept_fresh_past_its_expiry(tmp_path: Path) -> None:
    """A holder keeps its lock file's modification time recent while it holds it: a table service that holds the
    lock longer than ``hoodie.write.lock.filesystem.expire`` (a long compaction) is not taken over while it runs;
    once released, or once its holder stops refreshing (a stalled process), the lock expires as before."""
    import os

    opts = {**FAST, C.LOCK_FILESYSTEM_EXPIRE: "1"}
    holder = FileSystemBasedLockProvider(LOCAL, str(tmp_path), opts)
    other = FileSystemBasedLockProvider(LOCAL, str(tmp_path), opts)
    holder.expire_s = other.expire_s = 1.0  # one second instead of a minute: refreshed every quarter second
    lock = tmp_path / ".hoodie" / "lock"
    with holder.held():
        time.sleep(3)
        assert time.time() - lock.stat().st_mtime < 1
        assert not other.try_lock()
        content = lock.read_bytes()
    assert not lock.exists()
    # a holder that no longer refreshes it (its process stalled): taken over once expired
    lock.write_bytes(content)
    old = time.time() - 5
    os.utime(lock, (old, old))
    assert other.try_lock()
    other.unlock()


def test_a_stale_lock_is_taken_over_by_one_writer_only(tmp_path: Path) -> None:
    """Two writers that both found the lock stale: the first to take it over holds it; the second, finding the
    lock file no longer the stale one it saw, does not delete it. A takeover file a dead taker left is cleared."""
    import os

    lock = tmp_path / ".hoodie" / "lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("{}")
    old = time.time() - 120
    os.utime(lock, (old, old))
    opts = {**FAST, C.LOCK_FILESYSTEM_EXPIRE: "1"}
    a = FileSystemBasedLockProvider(LOCAL, str(tmp_path), opts)
    b = FileSystemBasedLockProvider(LOCAL, str(tmp_path), opts)
    seen = b._stale(b.path, b.expire_s)  # b found it stale too, before a took it over
    assert seen == b"{}"
    assert a.try_lock()
    mine = lock.read_bytes()
    assert not b._take_over(seen) and lock.read_bytes() == mine
    assert not b.try_lock()
    # a taker that died holding the takeover file: it is cleared once old, and the lock taken over again
    a.unlock()
    lock.write_text("{}")
    os.utime(lock, (old, old))
    guard = tmp_path / ".hoodie" / "lock.takeover"
    guard.write_text("{}")
    os.utime(guard, (old, old))
    assert b.try_lock(1.0) and not guard.exists()


def test_unlock_keeps_a_lock_another_writer_took_over(tmp_path: Path) -> None:
    """A writer whose lock expired while it held it (taken over as stale) does not delete the new holder's."""
    import os

    opts = {**FAST, C.LOCK_FILESYSTEM_EXPIRE: "1"}
    a = FileSystemBasedLockProvider(LOCAL, str(tmp_path), opts)
    b = FileSystemBasedLockProvider(LOCAL, str(tmp_path), opts)
    assert a.try_lock()
    lock = tmp_path / ".hoodie" / "lock"
    old = time.time() - 120
    os.utime(lock, (old, old))
    assert b.try_lock()
    theirs = lock.read_bytes()
    a.unlock()
    assert lock.read_bytes() == theirs
    b.unlock()
    assert not lock.exists()


def test_lock_waits_for_release(tmp_path: Path) -> None:
    a = FileSystemBasedLockProvider(LOCAL, str(tmp_path), FAST)
    b = FileSystemBasedLockProvider(LOCAL, str(tmp_path), {C.LOCK_WAIT_TIME_MS: "5000"})
    a.lock()
    threading.Timer(0.3, a.unlock).start()
    t0 = time.monotonic()
    b.lock()
    assert 0.2 < time.monotonic() - t0 < 4
    b.unlock()


def test_lock_path_option(tmp_path: Path) -> None:
    rooted = LOCAL.rooted(str(tmp_path / "t"))  # a table's storage: the configured folder lies outside it
    p = FileSystemBasedLockProvider(rooted, str(tmp_path / "t"), {C.LOCK_FILESYSTEM_PATH: str(tmp_path / "locks")})
    with p.held():
        assert (tmp_path / "locks" / "lock").exists()


def test_in_process_lock_is_per_table() -> None:
    a = InProcessLockProvider(LOCAL, "/x/t1", FAST)
    b = InProcessLockProvider(LOCAL, "/x/t1/", FAST)
    c = InProcessLockProvider(LOCAL, "/x/t2", FAST)
    with a.held():
        assert not b.try_lock()
        assert c.try_lock()
        c.unlock()
    assert b.try_lock()
    b.unlock()


def test_provider_by_hudi_class_name(tmp_path: Path) -> None:
    base = str(tmp_path)
    assert isinstance(lock_provider(LOCAL, base, {}, needed=False), NoLock)
    assert isinstance(lock_provider(LOCAL, base, {}, needed=True), FileSystemBasedLockProvider)
    assert isinstance(lock_provider(LOCAL, base, {C.LOCK_PROVIDER: IN_PROCESS_LOCK}, needed=True),
                      InProcessLockProvider)
    assert isinstance(lock_provider(LOCAL, base, {C.LOCK_PROVIDER: FILE_SYSTEM_LOCK}, needed=True),
                      FileSystemBasedLockProvider)
    with pytest.raises(ConfigError, match="ZookeeperBasedLockProvider"):
        lock_provider(LOCAL, base, {C.LOCK_PROVIDER: "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider"},
                      needed=True)


def test_file_lock_refused_without_atomic_create() -> None:
    import pyarrow.fs as pafs

    mock = Storage(pafs._MockFileSystem())
    assert not mock.atomic_create
    with pytest.raises(ConfigError, match=r"cannot \(pyarrow offers no create-if-absent"):
        FileSystemBasedLockProvider(mock, "/t", {})
    # listing the scheme as Hudi allows does not make pyhudi's create atomic: still refused, and said so
    with pytest.raises(ConfigError, match=r"listing mock in hoodie\.fs\.atomic_creation\.support does not change"):
        FileSystemBasedLockProvider(mock, "/t", {C.FS_ATOMIC_CREATION_SUPPORT: mock.scheme})
    with pytest.raises(ConfigError, match="FileSystemBasedLockProvider"):
        FileSystemBasedLockProvider(mock, "/t", {C.LOCK_FILESYSTEM_PATH: "/elsewhere"})
