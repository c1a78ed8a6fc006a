"""An S3-compatible server on loopback (moto's server mode) for tests that use Metaflow's S3 datastore."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.otlp_receiver import free_port

BUCKET = "traincard-test"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class S3Server:
    """moto's S3 server in a child process, which a test can stop and start again on the same port.

    moto keeps objects in memory, so :meth:`stop` copies the bucket out first and :meth:`start`
    puts it back: to the process under test, the store was unreachable and then came back with
    its data, as a real S3 endpoint would after an outage.
    """

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self._saved: dict[str, bytes] = {}

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(self.url, timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise
                time.sleep(0.2)
        client = self.client()
        client.create_bucket(Bucket=BUCKET)
        for key, body in self._saved.items():
            client.put_object(Bucket=BUCKET, Key=key, Body=body)
        self._saved = {}

    def stop(self) -> None:
        """Keep the bucket's objects, then end the server: connections are refused until :meth:`start`."""
        client = self.client()
        self._saved = {key: client.get_object(Bucket=BUCKET, Key=key)["Body"].read() for key in self.keys()}
        self.kill()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.url, **_boto_kwargs())

    def keys(self, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]


@contextmanager
def s3_server() -> Iterator[str]:
    """Start moto's S3 server in a child process (so a test can stop it) and yield its endpoint URL."""
    with s3_server_process() as server:
        yield server.url


@contextmanager
def s3_server_process() -> Iterator[S3Server]:
    """Like :func:`s3_server`, yielding the server itself (to stop and restart it)."""
    server = S3Server()
    try:
        server.start()
        yield server
    finally:
        server.kill()


def _boto_kwargs() -> dict[str, str]:
    return {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}


def metaflow_s3_env(endpoint: str, root: str = "metaflow") -> dict[str, str]:
    return {
        **CREDENTIALS,
        "METAFLOW_DEFAULT_DATASTORE": "s3",
        "METAFLOW_DATASTORE_SYSROOT_S3": f"s3://{BUCKET}/{root}",
        "METAFLOW_S3_ENDPOINT_URL": endpoint,
        "METAFLOW_DEFAULT_METADATA": "local",
        "METAFLOW_S3_WORKER_COUNT": "2",
    }
