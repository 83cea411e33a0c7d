"""An S3 server for tests: moto's server mode in a child process, bound to 127.0.0.1 on a free port.

:func:`moto_s3` starts it, creates a bucket and yields an :class:`S3Server` that knows the table URIs pyhudi takes
(``s3://bucket/path?endpoint_override=127.0.0.1:PORT&scheme=http``), the environment (credentials, region) for
this process and the commands it starts, and hudi-rs' storage options for the same server.

The server runs in its own process, not in a thread of the test's: a reader in the test process that holds the
GIL while it waits for the network (hudi-rs, pyarrow) could otherwise block the server that has to answer it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow.fs as pafs

HOST = "127.0.0.1"
ACCESS_KEY = "testing"
SECRET_KEY = "testing"
REGION = "us-east-1"
ENV = {
    "AWS_ACCESS_KEY_ID": ACCESS_KEY,
    "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    # the AWS SDK never asks the EC2 metadata service (off loopback) for credentials or a region
    "AWS_EC2_METADATA_DISABLED": "true",
}


@dataclass(frozen=True)
class S3Server:
    port: int
    bucket: str

    @property
    def endpoint(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        return dict(ENV)

    def uri(self, path: str) -> str:
        """The pyarrow URI of ``path`` in the bucket, with the endpoint in its options."""
        return f"s3://{self.bucket}/{path.strip('/')}?endpoint_override={self.endpoint}&scheme=http"

    def filesystem(self) -> pafs.S3FileSystem:
        return pafs.S3FileSystem(
            access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION, endpoint_override=self.endpoint,
            scheme="http", allow_bucket_creation=True,
        )

    def hudi_rs_options(self) -> dict[str, str]:
        """hudi-rs' (object_store's) options for this server."""
        return {
            "aws_endpoint_url": f"http://{self.endpoint}",
            "aws_allow_http": "true",
            "aws_access_key_id": ACCESS_KEY,
            "aws_secret_access_key": SECRET_KEY,
            "aws_region": REGION,
        }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _wait_listening(proc: subprocess.Popen[bytes], port: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=1):
            return True
        time.sleep(0.2)
    return False


@contextlib.contextmanager
def moto_s3(bucket: str = "pyhudi", timeout_s: float = 60) -> Iterator[S3Server]:
    """A moto S3 server on 127.0.0.1 with ``bucket`` created; stopped on exit."""
    with tempfile.TemporaryFile() as log:
        proc: subprocess.Popen[bytes] | None = None
        try:
            for _ in range(3):  # a free port may be taken between the probe and the server's bind: try another
                port = _free_port()
                proc = subprocess.Popen(
                    [sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(port)],
                    stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **ENV},
                )
                if _wait_listening(proc, port, timeout_s):
                    break
                proc.kill()
                proc.wait()
                proc = None
            if proc is None:
                log.seek(0)
                raise RuntimeError(f"moto server did not start: {log.read()[-2000:].decode(errors='replace')}")
            server = S3Server(port, bucket)
            server.filesystem().create_dir(bucket)
            yield server
        finally:
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
