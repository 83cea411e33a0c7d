"""Table locks for optimistic concurrency control, with Hudi's lock provider class names.

- ``org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider``: the lock is a file
  (``<hoodie.write.lock.filesystem.path or <base>/.hoodie>/lock``) created only if absent; released by deleting it.
  Storage must create files atomically, and pyhudi only does so on the local filesystem: elsewhere (S3 and the
  other object stores, HDFS) pyarrow offers no create-if-absent, a create is a look-up followed by a write, and two
  writers could both believe they hold the lock, so the provider refuses to run there, whatever
  ``hoodie.fs.atomic_creation.support`` lists (that option cannot make pyhudi's create atomic). A lock file older
  than ``hoodie.write.lock.filesystem.expire`` minutes (0: never) is taken over, and so is one whose holder runs on
  this host and is gone (the lock file names its holder as Hudi's ``LockInfo`` does, in ``lockThreadName``). With
  an expiry, a holder refreshes its lock file's modification time while it holds it (every quarter of the expiry,
  at most every 15 s): a table service that holds the lock longer than the expiry (a compaction, a clean) is not
  taken for dead while it runs.
- ``org.apache.hudi.client.transaction.lock.InProcessLockProvider``: a lock per table path in this process (writers
  in threads of one process).

Acquisition tries ``hoodie.write.lock.num_retries`` + 1 times, each waiting up to ``hoodie.write.lock.wait_time_ms``,
``hoodie.write.lock.wait_time_ms_between_retry`` apart (as Hudi's lock manager does), then fails with
:class:`LockTimeoutError` naming the holder.
"""

from __future__ import annotations

import json
import posixpath
import secrets
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, ClassVar

from pyhudi import config as C
from pyhudi.errors import ConfigError, PyHudiError, StorageError
from pyhudi.io.storage import Storage
from pyhudi.table.properties import METAFOLDER
from pyhudi.txn.heartbeat import Owner

FILE_SYSTEM_LOCK = "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider"
IN_PROCESS_LOCK = "org.apache.hudi.client.transaction.lock.InProcessLockProvider"
LOCK_FILE = "lock"
_OWNER_PREFIX = "pyhudi:"
_POLL_S = 0.05  # how often a waiting writer tries to create the lock file
_TAKEOVER_SUFFIX = ".takeover"  # the file a writer holds while it replaces a stale lock file
_TAKEOVER_EXPIRE_S = 60.0  # a takeover file this old was left by a taker that died
_REFRESH_MAX_S = 15.0  # a held lock file's modification time is refreshed at least this often (with an expiry)


class LockTimeoutError(PyHudiError):
    """The table lock could not be taken in time."""


class LockProvider(ABC):
    """A mutual-exclusion lock on one table, shared by its writers."""

    def __init__(self, storage: Storage, base_path: str, options: Mapping[str, Any]) -> None:
        self.storage = storage
        self.base_path = base_path
        self.retries = C.int_option(options, C.LOCK_NUM_RETRIES)
        self.retry_wait_s = C.int_option(options, C.LOCK_RETRY_WAIT_MS) / 1000
        self.wait_s = C.int_option(options, C.LOCK_WAIT_TIME_MS) / 1000

    @abstractmethod
    def try_lock(self, timeout_s: float = 0.0) -> bool:
        """Take the lock, waiting up to ``timeout_s`` for it; True when taken."""

    @abstractmethod
    def unlock(self) -> None: ...

    def holder(self) -> str:
        """Who holds the lock, for messages."""
        return "another writer"

    def lock(self) -> None:
        for attempt in range(self.retries + 1):
            if self.try_lock(self.wait_s):
                return
            if attempt < self.retries:
                time.sleep(self.retry_wait_s)
        raise LockTimeoutError(
            f"{self.base_path}: could not take the table lock ({type(self).__name__}) held by {self.holder()} "
            f"after {self.retries + 1} attempts of {self.wait_s:g} s ({C.LOCK_NUM_RETRIES}, {C.LOCK_WAIT_TIME_MS})"
        )

    @contextmanager
    def held(self) -> Iterator[None]:
        self.lock()
        try:
            yield
        finally:
            self.unlock()


class InProcessLockProvider(LockProvider):
    _locks: ClassVar[dict[str, threading.Lock]] = {}
    _guard: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, storage: Storage, base_path: str, options: Mapping[str, Any]) -> None:
        super().__init__(storage, base_path, options)
        with self._guard:
            self._lock = self._locks.setdefault(base_path.rstrip("/"), threading.Lock())

    def try_lock(self, timeout_s: float = 0.0) -> bool:
        return self._lock.acquire(timeout=timeout_s) if timeout_s > 0 else self._lock.acquire(blocking=False)

    def unlock(self) -> None:
        self._lock.release()


class FileSystemBasedLockProvider(LockProvider):
    def __init__(self, storage: Storage, base_path: str, options: Mapping[str, Any]) -> None:
        super().__init__(storage, base_path, options)
        folder = C.LOCK_FILESYSTEM_PATH.get(options)
        if folder:  # a folder the user configured, maybe outside the table: not bound to the table's root
            self.storage = Storage(storage.fs)
        else:
            folder = posixpath.join(base_path, METAFOLDER)
        self.path = posixpath.join(folder, LOCK_FILE)
        self.expire_s = C.int_option(options, C.LOCK_FILESYSTEM_EXPIRE) * 60
        scheme = storage.scheme
        if not self.storage.atomic_create:
            listed = {s.strip().lower() for s in str(C.FS_ATOMIC_CREATION_SUPPORT.get(options) or "").split(",")}
            raise ConfigError(
                f"{C.LOCK_PROVIDER}={FILE_SYSTEM_LOCK} needs storage on which pyhudi creates files atomically "
                f"(only if absent); on {scheme} it cannot (pyarrow offers no create-if-absent there: a create is a "
                "look-up then a write, so two writers could both take the lock)"
                + (f"; listing {scheme} in {C.FS_ATOMIC_CREATION_SUPPORT} does not change that" if scheme in listed
                   else "")
                + f". Use {C.WRITE_CONCURRENCY_MODE}=SINGLE_WRITER with one writer at a time, or {IN_PROCESS_LOCK} for "
                "writers in threads of one process; see docs/object-stores.md"
            )
        self.owner = Owner.current()
        self._mine: bytes | None = None  # the bytes of the lock file this writer created, while it holds it
        self._refresh: tuple[threading.Event, threading.Thread] | None = None

    def _info(self) -> bytes:
        now = datetime.now(UTC)
        o = self.owner
        # a nonce after the thread's name: two lock files of one thread differ (unlock deletes only its own)
        thread = (f"{_OWNER_PREFIX}{json.dumps([o.host, o.boot_id, o.pid, o.start])}:"
                  f"{threading.current_thread().name}#{secrets.token_hex(4)}")
        return json.dumps({
            "lockCreateTime": now.strftime("%Y-%m-%d %H:%M:%S.") + f"{now.microsecond // 1000:03d}",
            "lockThreadName": thread,
            "lockStacksInfo": [],
        }, indent=2).encode()

    def _holder_owner(self, content: bytes | None = None, path: str | None = None) -> Owner | None:
        """The owner a lock file names (``content``: its bytes, else read from ``path``, the lock by default)."""
        try:
            raw = content if content is not None else self.storage.read_bytes(path or self.path)
            info = json.loads(raw.decode("utf-8") or "{}")
            thread = str(info.get("lockThreadName") or "")
            if not thread.startswith(_OWNER_PREFIX):
                return None
            host, boot, pid, start = json.loads(thread[len(_OWNER_PREFIX):].rsplit(":", 1)[0])
            return Owner(str(host), str(boot), int(pid), str(start))
        except (StorageError, ValueError, TypeError, AttributeError):
            return None

    def holder(self) -> str:
        o = self._holder_owner()
        return o.describe() if o is not None else f"the lock file {self.path}"

    def _stale(self, path: str, expire_s: float) -> bytes | None:
        """The bytes of the lock file at ``path`` when it is stale (its holder ran on this host and is gone, or
        it is older than ``expire_s`` seconds, when positive); else None."""
        try:
            content = self.storage.read_bytes(path)
        except StorageError:
            return None
        owner = self._holder_owner(content)
        if owner is not None and owner.is_local() and not owner.is_running():
            return content
        if expire_s <= 0:
            return None
        try:
            st = self.storage.status(path)
        except StorageError:
            return None
        old = st.mtime_ns is not None and time.time() - st.mtime_ns / 1e9 > expire_s
        return content if old else None

    def _create(self, path: str | None = None) -> bytes | None:
        """Create the lock file (or another at ``path``) only if absent; its bytes when created."""
        info = self._info()
        try:
            self.storage.write_bytes(path or self.path, info, overwrite=False)
        except StorageError:
            return None
        return info

    def _take_over(self, stale: bytes) -> bool:
        """Replace the stale lock file, whose bytes were ``stale``, by this writer's: one taker at a time (each
        takes a takeover file, created only if absent, first), and only while the lock file is still the stale
        one: two writers that both found it stale never both delete it and each create their own."""
        guard = self.path + _TAKEOVER_SUFFIX
        if self._create(guard) is None:
            # a taker that died holding it: gone on this host, or older than a takeover ever takes
            if self._stale(guard, _TAKEOVER_EXPIRE_S) is not None:
                self.storage.delete(guard, missing_ok=True)
            return False
        try:
            try:
                now = self.storage.read_bytes(self.path)
            except StorageError:
                now = None
            if now is not None and now != stale:  # another writer's lock now
                return False
            if now is not None:
                self.storage.delete(self.path, missing_ok=True)
            self._mine = self._create()
            return self._mine is not None
        finally:
            self.storage.delete(guard, missing_ok=True)

    def try_lock(self, timeout_s: float = 0.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            self._mine = self._create()
            if self._mine is None:
                stale = self._stale(self.path, self.expire_s)
                if stale is not None:
                    self._take_over(stale)
            if self._mine is not None:
                self._start_refresh(self._mine)
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(_POLL_S, max(0.0, deadline - time.monotonic())))

    def _start_refresh(self, mine: bytes) -> None:
        """With an expiry, a thread that keeps the lock file's modification time recent while this writer holds
        it (and while the file is still the one it created)."""
        if self.expire_s <= 0:
            return
        stop = threading.Event()
        every = min(_REFRESH_MAX_S, self.expire_s / 4)

        def run() -> None:
            while not stop.wait(every):
                try:
                    if self.storage.read_bytes(self.path) != mine:
                        return  # taken over meanwhile: not this writer's to refresh
                    self.storage.touch(self.path)
                except (StorageError, OSError):
                    return

        thread = threading.Thread(target=run, name="pyhudi-lock-refresh", daemon=True)
        thread.start()
        self._refresh = (stop, thread)

    def _stop_refresh(self) -> None:
        refresh, self._refresh = self._refresh, None
        if refresh is not None:
            refresh[0].set()
            refresh[1].join()

    def unlock(self) -> None:
        """Delete the lock file if it is still this writer's (another may have taken it over as expired)."""
        self._stop_refresh()
        mine = self._mine
        try:
            now = self.storage.read_bytes(self.path)
        except StorageError:
            self._mine = None
            return
        if mine is not None and now == mine:
            self.storage.delete(self.path, missing_ok=True)  # on failure still this writer's: unlock may retry
        self._mine = None


class NoLock(LockProvider):
    """Single-writer mode: nothing to take."""

    def try_lock(self, timeout_s: float = 0.0) -> bool:
        return True

    def unlock(self) -> None:
        pass


_PROVIDERS: dict[str, type[LockProvider]] = {
    FILE_SYSTEM_LOCK: FileSystemBasedLockProvider,
    IN_PROCESS_LOCK: InProcessLockProvider,
}


def lock_provider(storage: Storage, base_path: str, options: Mapping[str, Any], *, needed: bool) -> LockProvider:
    """The lock the write's options name (FileSystemBasedLockProvider by default); :class:`NoLock` when the
    concurrency mode needs none."""
    if not needed:
        return NoLock(storage, base_path, options)
    name = str(C.LOCK_PROVIDER.get(options) or FILE_SYSTEM_LOCK).strip()
    cls = _PROVIDERS.get(name)
    if cls is None:
        raise ConfigError(
            f"option {C.LOCK_PROVIDER}={name!r} is not supported; use {FILE_SYSTEM_LOCK} or {IN_PROCESS_LOCK}"
        )
    return cls(storage, base_path, options)
