"""Storage on S3 (a moto server on 127.0.0.1): what is and is not atomic there, and a clean exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid

import pytest

from pyhudi.errors import ConfigError, StorageError
from pyhudi.io.storage import Storage
from pyhudi.table.base_file import atomic_output
from pyhudi.txn.lock import IN_PROCESS_LOCK, FileSystemBasedLockProvider, lock_provider
from tests.support.s3 import S3Server

pytest.importorskip("moto")


def _table(s3_server: S3Server) -> tuple[Storage, str]:
    return Storage.from_uri(s3_server.uri(f"t-{uuid.uuid4().hex[:8]}"))


def test_s3_storage_round_trip(s3_server: S3Server) -> None:
    storage, base = _table(s3_server)
    assert storage.scheme == "s3" and base.startswith(f"{s3_server.bucket}/")
    storage = storage.rooted(base)
    path = f"{base}/.hoodie/x"
    storage.write_bytes(path, b"one", overwrite=False)
    assert storage.read_bytes(path) == b"one"
    with pytest.raises(StorageError, match="already exists"):  # a look-up before the PUT: not atomic (below)
        storage.write_bytes(path, b"two", overwrite=False)
    assert [st.name for st in storage.list(f"{base}/.hoodie")] == ["x"]
    storage.write_bytes(f"{base}/.hoodie/parts", [b"ab", b"cde"])  # a file written from its parts, in order
    assert storage.read_bytes(f"{base}/.hoodie/parts") == b"abcde"
    storage.delete(f"{base}/.hoodie/parts")
    storage.delete(path)
    assert not storage.exists(path)


def test_s3_create_is_not_atomic_and_the_file_lock_refuses_it(s3_server: S3Server) -> None:
    storage, base = _table(s3_server)
    assert not storage.atomic_create
    with pytest.raises(ConfigError, match=r"on s3 it cannot .*docs/object-stores\.md"):
        lock_provider(storage, base, {}, needed=True)
    with pytest.raises(ConfigError, match=r"listing s3 in hoodie\.fs\.atomic_creation\.support does not change"):
        FileSystemBasedLockProvider(storage, base, {"hoodie.fs.atomic_creation.support": "s3"})
    lock = lock_provider(storage, base, {"hoodie.write.lock.provider": IN_PROCESS_LOCK}, needed=True)
    with lock.held():
        assert not lock.try_lock()


def test_failed_object_store_write_leaves_no_object(s3_server: S3Server) -> None:
    storage, base = _table(s3_server)
    path = f"{base}/p/f.parquet"
    with pytest.raises(RuntimeError, match="boom"), atomic_output(storage, path) as out:
        out.write(b"partial")
        raise RuntimeError("boom")
    assert not storage.exists(path)
    with atomic_output(storage, path) as out:
        out.write(b"whole")
    assert storage.read_bytes(path) == b"whole"


def test_output_streams_left_open_do_not_block_the_exit(s3_server: S3Server) -> None:
    """pyarrow finalizes S3 at exit; an S3 output stream destroyed after that waited for ever (the process never
    exited). Streams a Storage opened are closed before: one kept by a global, one only by a reference cycle."""
    storage, base = _table(s3_server)
    script = textwrap.dedent(f"""
        from pyhudi.io.storage import Storage
        storage, base = Storage.from_uri({s3_server.uri(base.split("/", 1)[1])!r})
        KEPT = storage.open_output(base + "/kept")
        KEPT.write(b"kept")
        class Cycle:
            pass
        c = Cycle()
        c.me = c
        c.out = storage.open_output(base + "/cycle")
        c.out.write(b"cycle")
        del c
        print("done", flush=True)
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "done", res.stderr[-3000:]
    assert storage.read_bytes(f"{base}/kept") == b"kept"
    assert storage.read_bytes(f"{base}/cycle") == b"cycle"


def test_table_created_from_an_s3_uri_is_named_after_its_folder(s3_server: S3Server) -> None:
    import pyarrow as pa

    from pyhudi.table.table import Table
    from tests.support.robust import OPTS

    uri = s3_server.uri(f"named-{uuid.uuid4().hex[:6]}/orders")
    t = Table.create(uri, pa.schema([("id", pa.string()), ("p", pa.string()), ("ts", pa.int64())]), OPTS)
    assert Table.open(uri).config.table_name == "orders"  # not "orders?endpoint_override=..."
    assert "endpoint_override" not in t.config.get("hoodie.table.create.schema", "")


def test_cli_errors_hide_the_secret_key_of_a_uri(s3_server: S3Server) -> None:
    import pyarrow as pa
    from click.testing import CliRunner

    from pyhudi.cli.main import main
    from pyhudi.table.table import Table
    from tests.support.robust import OPTS

    # credentials in the URI, as pyarrow takes them: s3://ACCESS_KEY:SECRET_KEY@bucket/path (moto takes any)
    uri = s3_server.uri("absent").replace("s3://", "s3://testing:very-secret@")
    res = CliRunner().invoke(main, ["read", uri, "--json"])
    assert res.exit_code == 1
    assert "no Hudi table at s3://testing:***@" in res.stderr, res.stderr
    assert "very-secret" not in res.stdout + res.stderr
    # a result naming a URI with credentials: the output file of a read
    table = s3_server.uri(f"shown-{uuid.uuid4().hex[:6]}/t")
    Table.create(table, pa.schema([("id", pa.string()), ("p", pa.string()), ("ts", pa.int64())]), OPTS)
    out = s3_server.uri("absent/out.parquet").replace("s3://", "s3://testing:very-secret@")
    for flag in ([], ["--json"]):
        res = CliRunner().invoke(main, ["read", table, "--output", out, *flag])
        assert res.exit_code == 0, res.output
        assert "s3://testing:***@" in res.stdout and "very-secret" not in res.stdout, res.stdout
